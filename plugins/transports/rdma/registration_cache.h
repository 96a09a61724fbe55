// The rdma plugin's memory registration cache.
//
// Registering memory with the NIC (ibv_reg_mr) pins pages and costs tens of
// microseconds, so a tensor buffer that is sent again and again is
// registered once and found again by address. A region is found when it
// contains the whole range asked for; regions may overlap (verbs allows
// that), and a range that no single region contains is registered anew.
//
// Two kinds of holds keep a region alive:
//  - pins: explicit registrations (the transport's memory_register). A
//    pinned region is never evicted and does not count against the budget.
//  - uses: in-flight sends of Acquire(). A region in use is never evicted.
// Unpinned regions are cached: they count against the byte budget and are
// evicted least recently used first, when not in use, to make room.
//
// The register and unregister functions are injected, so that the cache is
// tested without a device; the plugin passes ibv_reg_mr / ibv_dereg_mr.
//
//   RegistrationCache cache(budget, Register, Unregister);
//   Result<const Region*> r = cache.Acquire(data, size);   // uses + 1
//   ... post a work request with (*r)->lkey ...
//   cache.Release(*r);                                     // on completion
//
// Not thread-safe: the owner (an endpoint) locks around it.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_REGISTRATION_CACHE_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_REGISTRATION_CACHE_H_

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <utility>
#include <vector>

#include "rdma/result.h"

namespace weft::rdma {

// What the register function returns for a range.
struct RegisteredMemory {
  void* handle = nullptr;  // the ibv_mr*, or whatever a fake returns
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

struct Region {
  uintptr_t begin = 0;
  uintptr_t end = 0;  // one past the last byte
  RegisteredMemory memory;
  uint32_t pins = 0;
  uint32_t uses = 0;

  uint64_t size() const noexcept { return end - begin; }
  bool contains(uintptr_t b, uintptr_t e) const noexcept { return begin <= b && e <= end; }
};

class RegistrationCache {
 public:
  using RegisterFn = std::function<Result<RegisteredMemory>(void* address, uint64_t size)>;
  using UnregisterFn = std::function<void(const RegisteredMemory&)>;

  // |byte_budget| bounds the bytes of cached (unpinned) regions.
  RegistrationCache(uint64_t byte_budget, RegisterFn register_fn, UnregisterFn unregister_fn);
  // Unregisters every region still held, pinned or not.
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // The region containing [address, address + size), or nullptr; marks it
  // most recently used. Holds nothing.
  const Region* Find(const void* address, uint64_t size);

  // Finds or registers a region for the range and adds a use. A miss
  // evicts least recently used cached regions not in use until the new one
  // fits the budget. RESOURCE_EXHAUSTED when the range is larger than the
  // budget or the regions in use leave no room; the register function's
  // failure otherwise. INVALID_ARGUMENT for an empty or wrapping range.
  Result<const Region*> Acquire(const void* address, uint64_t size);
  // Drops a use added by Acquire; evicts if the cache is over budget.
  void Release(const Region* region);

  // Finds or registers a region for the range and pins it (explicit
  // registration). Not bounded by the budget. Errors as for Acquire, except
  // that the budget is not checked.
  Result<const Region*> Pin(const void* address, uint64_t size);
  // Drops a pin; a region with no pin left becomes cached (and may be
  // evicted at once when the cache is over budget).
  void Unpin(const Region* region);

  uint64_t budget() const noexcept { return budget_; }
  // Bytes of unpinned regions.
  uint64_t cached_bytes() const noexcept { return cached_bytes_; }
  std::size_t region_count() const noexcept { return regions_.size(); }
  uint64_t hits() const noexcept { return hits_; }
  uint64_t misses() const noexcept { return misses_; }
  uint64_t evictions() const noexcept { return evictions_; }
  // The cached regions' [begin, end), least recently used first.
  std::vector<std::pair<uintptr_t, uintptr_t>> LruOrder() const;

 private:
  using Key = std::pair<uintptr_t, uintptr_t>;
  struct Entry {
    Region region;
    // Position in lru_ while unpinned.
    std::list<Key>::iterator lru;
    bool in_lru = false;
  };

  Result<Key> CheckedRange(const void* address, uint64_t size) const;
  Entry* FindContaining(uintptr_t begin, uintptr_t end);
  Result<Entry*> Insert(uintptr_t begin, uintptr_t end);
  void Touch(Entry& entry);
  void AddToLru(Entry& entry);
  void RemoveFromLru(Entry& entry);
  // Evicts unused cached regions, oldest first, until cached_bytes_ +
  // |incoming| fits the budget or nothing more can go. Returns whether it
  // fits.
  bool MakeRoom(uint64_t incoming);
  void Erase(std::map<Key, Entry>::iterator it);

  uint64_t budget_;
  RegisterFn register_;
  UnregisterFn unregister_;
  std::map<Key, Entry> regions_;
  std::list<Key> lru_;  // front = least recently used
  uint64_t cached_bytes_ = 0;
  uint64_t largest_ = 0;  // the largest region ever held: bounds the lookup scan
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_REGISTRATION_CACHE_H_
