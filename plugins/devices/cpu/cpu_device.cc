#include "cpu_device.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <new>
#include <set>
#include <sstream>
#include <thread>

#include "weft/sdk/status.h"
#include "weft/sdk/struct.h"

namespace weft::cpu {
namespace {

std::string Trim(const std::string& text) {
  const auto begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const auto end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// The value of the first "key : value" line of /proc/cpuinfo with |key|.
std::string CpuInfoField(const std::string& cpuinfo, const std::string& key) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (Trim(line.substr(0, colon)) == key) return Trim(line.substr(colon + 1));
  }
  return "";
}

int AffinityCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace

MachineInfo ReadMachineInfo() {
  MachineInfo info;
  std::ifstream file("/proc/cpuinfo");
  std::stringstream text;
  text << file.rdbuf();
  const std::string cpuinfo = text.str();
  info.model = CpuInfoField(cpuinfo, "model name");
  info.vendor = CpuInfoField(cpuinfo, "vendor_id");
  if (info.model.empty()) info.model = "unknown CPU";

  // Only the extensions that decide which kernels run fast; the full flag
  // list is in /proc/cpuinfo.
  static const char* const kInteresting[] = {
      "sse4_2",      "avx",         "avx2",        "fma",      "f16c",     "avx512f",  "avx512bw", "avx512vl",
      "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "neon",     "sve"};
  std::set<std::string> flags;
  std::istringstream words(CpuInfoField(cpuinfo, "flags"));
  for (std::string word; words >> word;) flags.insert(word);
  for (const char* name : kInteresting) {
    if (flags.count(name) == 0) continue;
    if (!info.isa.empty()) info.isa.push_back(' ');
    info.isa.append(name);
  }

  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    info.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  info.cores = AffinityCores();
  return info;
}

BlockCache::~BlockCache() {
  for (auto& [capacity, blocks] : free_) {
    for (void* block : blocks) std::free(block);
  }
}

void* BlockCache::Take(uint64_t& capacity, uint64_t most) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = free_.lower_bound(capacity); it != free_.end() && it->first <= most; ++it) {
    if (it->second.empty()) continue;
    void* block = it->second.back();
    it->second.pop_back();
    capacity = it->first;
    cached_ -= capacity;
    return block;
  }
  return nullptr;
}

bool BlockCache::Give(void* data, uint64_t capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cached_ + capacity > limit_) return false;
  free_[capacity].push_back(data);
  cached_ += capacity;
  return true;
}

uint64_t BlockCache::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_;
}

namespace {

// The data first, so that it has the block's alignment and the block is
// found from it.
struct alignas(kAlignment) SmallBlock {
  unsigned char data[SmallBlocks::kBytes];
  CpuBuffer record;
};

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kKeepSmallBlocks = false;
#else
constexpr bool kKeepSmallBlocks = true;
#endif

}  // namespace

SmallBlocks::SmallBlocks(bool keep) : keep_(keep && kKeepSmallBlocks) {}

SmallBlocks::~SmallBlocks() {
  for (CpuBuffer* buffer : free_) delete static_cast<SmallBlock*>(buffer->data);
}

CpuBuffer* SmallBlocks::Take(uint64_t size) {
  CpuBuffer* buffer = nullptr;
  if (keep_) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      buffer = free_.back();
      free_.pop_back();
    }
  }
  if (buffer == nullptr) {
    auto* block = new SmallBlock;
    block->record = CpuBuffer{block->data, 0, kBytes, true};
    buffer = &block->record;
  }
  buffer->size = size;
  return buffer;
}

void SmallBlocks::Give(CpuBuffer* buffer) {
  if (keep_) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() < kMaxKept) {
      free_.push_back(buffer);
      return;
    }
  }
  delete static_cast<SmallBlock*>(buffer->data);
}

CpuDevice::CpuDevice(int ordinal, uint64_t cache_bytes)
    : ordinal_(ordinal), machine_(ReadMachineInfo()), cache_(cache_bytes), small_(cache_bytes > 0) {
  compute_units_text_ = std::to_string(machine_.cores);
  extra_.push_back({sizeof(weft_property_t), "isa", machine_.isa.c_str()});
  extra_.push_back({sizeof(weft_property_t), "cores", compute_units_text_.c_str()});
}

void CpuDevice::Properties(weft_device_properties_t* out) const {
  auto props = sdk::Make<weft_device_properties_t>();
  props.model = machine_.model.c_str();
  props.vendor = machine_.vendor.empty() ? nullptr : machine_.vendor.c_str();
  props.driver = "weft cpu plugin";
  props.memory_bytes = machine_.memory_bytes;
  props.alignment = kAlignment;
  props.host_visible = 1;
  props.compute_units = machine_.cores;
  props.extra = extra_.data();
  props.num_extra = extra_.size();
  sdk::FillOut(out, props);
}

CpuBuffer* CpuDevice::Allocate(uint64_t size) {
  // One byte for empty buffers keeps every buffer a distinct address.
  uint64_t bytes = size == 0 ? 1 : size;
  if (bytes <= SmallBlocks::kBytes) {
    CpuBuffer* buffer = nullptr;
    try {
      buffer = small_.Take(size);
    } catch (const std::bad_alloc&) {
      throw sdk::Error(WEFT_RESOURCE_EXHAUSTED, "cannot allocate " + std::to_string(size) +
                                                    " bytes of host memory on /device:CPU:" + std::to_string(ordinal_));
    }
    bytes_in_use_.fetch_add(size, std::memory_order_relaxed);
    return buffer;
  }
  void* data = nullptr;
  uint64_t alignment = kAlignment;
#if defined(WEFT_CPU_LITE)
  // The lite build (docs/lite.md) gives blocks of 2 MiB and more whole,
  // aligned 2 MiB pages it advises MADV_HUGEPAGE: the first run of a model
  // touches every activation's memory for the first time, and a fault per
  // 2 MiB instead of per 4 KiB left MobileNet-v2's first run 1,200 page
  // faults fewer (5,400 instead of 6,600).
  if (bytes >= kHugePage) {
    bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    alignment = kHugePage;
  }
#endif
  if (bytes >= BlockCache::kMinCached) {
    bytes = (bytes + BlockCache::kGranule - 1) / BlockCache::kGranule * BlockCache::kGranule;
    uint64_t most = bytes;
#if defined(WEFT_CPU_LITE)
    // A cached block up to twice the size rather than fresh memory: a
    // model's first run frees each layer's input as the next layer needs
    // an output of another size, and fresh memory is zeroed by the kernel
    // on first touch (the lite build's start-to-first-result).
    most = 2 * bytes;
#endif
    data = cache_.Take(bytes, most);
    if (data != nullptr) {
      bytes_in_use_.fetch_add(size, std::memory_order_relaxed);
      return new CpuBuffer{data, size, bytes, false};
    }
  }
  if (bytes < size || posix_memalign(&data, alignment, bytes) != 0) {
    throw sdk::Error(WEFT_RESOURCE_EXHAUSTED, "cannot allocate " + std::to_string(size) + " bytes of host memory (" +
                                                  std::to_string(bytes_in_use() >> 20) +
                                                  " MiB in use on /device:CPU:" + std::to_string(ordinal_) + ")");
  }
#if defined(WEFT_CPU_LITE)
  if (alignment == kHugePage) ::madvise(data, bytes, MADV_HUGEPAGE);  // advice: without it, 4 KiB pages
#endif
  bytes_in_use_.fetch_add(size, std::memory_order_relaxed);
  return new CpuBuffer{data, size, bytes, false};
}

void CpuDevice::Free(CpuBuffer* buffer) {
  if (buffer == nullptr) return;
  bytes_in_use_.fetch_sub(buffer->size, std::memory_order_relaxed);
  if (buffer->small) {
    small_.Give(buffer);
    return;
  }
  if (buffer->capacity < BlockCache::kMinCached || !cache_.Give(buffer->data, buffer->capacity)) {
    std::free(buffer->data);
  }
  delete buffer;
}

}  // namespace weft::cpu
