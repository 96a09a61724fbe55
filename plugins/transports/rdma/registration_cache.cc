#include "rdma/registration_cache.h"

#include <limits>
#include <string>

namespace weft::rdma {

using std::to_string;

RegistrationCache::RegistrationCache(uint64_t byte_budget, RegisterFn register_fn, UnregisterFn unregister_fn)
    : budget_(byte_budget), register_(std::move(register_fn)), unregister_(std::move(unregister_fn)) {}

RegistrationCache::~RegistrationCache() {
  for (auto& [key, entry] : regions_) unregister_(entry.region.memory);
}

Result<RegistrationCache::Key> RegistrationCache::CheckedRange(const void* address, uint64_t size) const {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(address);
  if (address == nullptr || size == 0) {
    return Fail(WEFT_INVALID_ARGUMENT, "rdma memory registration: empty range (address " + to_string(begin) + ", " +
                                           to_string(size) + " bytes)");
  }
  if (size > std::numeric_limits<uintptr_t>::max() - begin) {
    return Fail(WEFT_INVALID_ARGUMENT, "rdma memory registration: the range of " + to_string(size) + " bytes at " +
                                           to_string(begin) + " wraps around the address space");
  }
  return Key{begin, begin + static_cast<uintptr_t>(size)};
}

RegistrationCache::Entry* RegistrationCache::FindContaining(uintptr_t begin, uintptr_t end) {
  // Regions are ordered by (begin, end). A region containing the range
  // begins at or before |begin|; walking back from there, a region that
  // begins more than |largest_| bytes before |end| cannot reach it.
  auto it = regions_.upper_bound(Key{begin, std::numeric_limits<uintptr_t>::max()});
  const uintptr_t floor = end > largest_ ? end - static_cast<uintptr_t>(largest_) : 0;
  while (it != regions_.begin()) {
    --it;
    if (it->first.first < floor) break;
    if (it->second.region.contains(begin, end)) return &it->second;
  }
  return nullptr;
}

void RegistrationCache::AddToLru(Entry& entry) {
  entry.lru = lru_.insert(lru_.end(), Key{entry.region.begin, entry.region.end});
  entry.in_lru = true;
  cached_bytes_ += entry.region.size();
}

void RegistrationCache::RemoveFromLru(Entry& entry) {
  if (!entry.in_lru) return;
  lru_.erase(entry.lru);
  entry.in_lru = false;
  cached_bytes_ -= entry.region.size();
}

void RegistrationCache::Touch(Entry& entry) {
  if (entry.in_lru) lru_.splice(lru_.end(), lru_, entry.lru);
}

void RegistrationCache::Erase(std::map<Key, Entry>::iterator it) {
  RemoveFromLru(it->second);
  unregister_(it->second.region.memory);
  regions_.erase(it);
}

bool RegistrationCache::MakeRoom(uint64_t incoming) {
  auto it = lru_.begin();
  while (cached_bytes_ + incoming > budget_ && it != lru_.end()) {
    auto region = regions_.find(*it);
    ++it;
    if (region->second.region.uses > 0) continue;
    Erase(region);
    ++evictions_;
  }
  return cached_bytes_ + incoming <= budget_;
}

Result<RegistrationCache::Entry*> RegistrationCache::Insert(uintptr_t begin, uintptr_t end) {
  Result<RegisteredMemory> memory = register_(reinterpret_cast<void*>(begin), end - begin);
  if (!memory.ok()) return memory.failure();
  Entry& entry = regions_[Key{begin, end}];
  entry.region.begin = begin;
  entry.region.end = end;
  entry.region.memory = *memory;
  if (end - begin > largest_) largest_ = end - begin;
  return &entry;
}

const Region* RegistrationCache::Find(const void* address, uint64_t size) {
  Result<Key> range = CheckedRange(address, size);
  if (!range.ok()) return nullptr;
  Entry* entry = FindContaining(range->first, range->second);
  if (entry == nullptr) return nullptr;
  Touch(*entry);
  return &entry->region;
}

Result<const Region*> RegistrationCache::Acquire(const void* address, uint64_t size) {
  Result<Key> range = CheckedRange(address, size);
  if (!range.ok()) return range.failure();
  if (Entry* hit = FindContaining(range->first, range->second)) {
    ++hits_;
    ++hit->region.uses;
    Touch(*hit);
    return &hit->region;
  }
  ++misses_;
  if (size > budget_) {
    return Fail(WEFT_RESOURCE_EXHAUSTED, "rdma registration cache: " + to_string(size) +
                                             " bytes are more than the whole budget of " + to_string(budget_) +
                                             " bytes");
  }
  if (!MakeRoom(size)) {
    return Fail(WEFT_RESOURCE_EXHAUSTED, "rdma registration cache: no room for " + to_string(size) +
                                             " bytes: " + to_string(cached_bytes_) + " of the " + to_string(budget_) +
                                             " byte budget are held by sends in flight");
  }
  Result<Entry*> entry = Insert(range->first, range->second);
  if (!entry.ok()) return entry.failure();
  (*entry)->region.uses = 1;
  AddToLru(**entry);
  return &(*entry)->region;
}

void RegistrationCache::Release(const Region* region) {
  auto it = regions_.find(Key{region->begin, region->end});
  if (it == regions_.end() || it->second.region.uses == 0) return;
  --it->second.region.uses;
  if (cached_bytes_ > budget_) MakeRoom(0);
}

Result<const Region*> RegistrationCache::Pin(const void* address, uint64_t size) {
  Result<Key> range = CheckedRange(address, size);
  if (!range.ok()) return range.failure();
  Entry* entry = FindContaining(range->first, range->second);
  if (entry != nullptr) {
    ++hits_;
  } else {
    ++misses_;
    Result<Entry*> inserted = Insert(range->first, range->second);
    if (!inserted.ok()) return inserted.failure();
    entry = *inserted;
  }
  RemoveFromLru(*entry);
  ++entry->region.pins;
  return &entry->region;
}

void RegistrationCache::Unpin(const Region* region) {
  auto it = regions_.find(Key{region->begin, region->end});
  if (it == regions_.end() || it->second.region.pins == 0) return;
  if (--it->second.region.pins > 0) return;
  AddToLru(it->second);
  if (cached_bytes_ > budget_) MakeRoom(0);
}

std::vector<std::pair<uintptr_t, uintptr_t>> RegistrationCache::LruOrder() const {
  return std::vector<std::pair<uintptr_t, uintptr_t>>(lru_.begin(), lru_.end());
}

}  // namespace weft::rdma
