// The CPU device: host memory, streams that run their work at once, and
// events that are ready when recorded.
//
// Part of the cpu device plugin, which sees the Weft SDK only.
#ifndef WEFT_PLUGINS_DEVICES_CPU_CPU_DEVICE_H_
#define WEFT_PLUGINS_DEVICES_CPU_CPU_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "weft/weft_plugin.h"

namespace weft::cpu {

// Every buffer is aligned for the widest vector loads (AVX-512) and cache
// lines.
inline constexpr uint64_t kAlignment = 64;
// Transparent huge pages (the lite build's large blocks, cpu_device.cc).
inline constexpr uint64_t kHugePage = uint64_t{2} << 20;

// What the machine is, read once per device from /proc and the scheduler.
struct MachineInfo {
  std::string model;
  std::string vendor;
  std::string isa;  // the vector extensions kernels care about
  uint64_t memory_bytes = 0;
  int cores = 1;
};

MachineInfo ReadMachineInfo();

struct CpuBuffer {
  void* data;
  uint64_t size;
  uint64_t capacity;   // bytes actually allocated (size rounded up)
  bool small = false;  // a SmallBlocks block: the record and data are one
};

// Buffers of a few bytes (a loop's counters and conditions, scalars in
// general) come and go at a high rate, and each one cost an aligned malloc
// for the data and another for its record. A small block holds both in one
// allocation, and freed blocks are kept on a list for the next small
// buffer (at most kMaxKept of them, 1.25 MiB). The list is off when the
// device's cache is (allocator_cache_mb = 0) and under AddressSanitizer, so
// that every buffer is checked on its own.
class SmallBlocks {
 public:
  static constexpr uint64_t kBytes = 256;
  static constexpr std::size_t kMaxKept = 4096;
  explicit SmallBlocks(bool keep);
  SmallBlocks(const SmallBlocks&) = delete;
  SmallBlocks& operator=(const SmallBlocks&) = delete;
  ~SmallBlocks();
  // A buffer of |size| <= kBytes bytes; throws std::bad_alloc.
  CpuBuffer* Take(uint64_t size);
  void Give(CpuBuffer* buffer);

 private:
  const bool keep_;
  std::mutex mutex_;
  std::vector<CpuBuffer*> free_;
};

// Keeps freed large blocks, by size, for the next allocation of that size:
// a training step allocates the same shapes every time, and reusing warm
// pages saves the page faults of fresh memory (several ms for a 6 MB
// convolution output). Blocks below kMinCached bytes are left to malloc,
// which already reuses them. At most |limit| bytes are kept.
class BlockCache {
 public:
  static constexpr uint64_t kMinCached = 64 << 10;
  static constexpr uint64_t kGranule = 4096;
  explicit BlockCache(uint64_t limit) : limit_(limit) {}
  ~BlockCache();
  // The smallest cached block of |capacity| to |most| bytes (multiples of
  // kGranule), or nullptr; |capacity| becomes the block's.
  void* Take(uint64_t& capacity, uint64_t most);
  // Keeps |data| for reuse; false when the cache is full (the caller frees).
  bool Give(void* data, uint64_t capacity);
  uint64_t cached_bytes() const;

 private:
  mutable std::mutex mutex_;
  uint64_t limit_;
  uint64_t cached_ = 0;
  std::map<uint64_t, std::vector<void*>> free_;  // by capacity
};

class CpuDevice {
 public:
  // |cache_bytes| bounds the device's block cache (0 disables it).
  CpuDevice(int ordinal, uint64_t cache_bytes);
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  int ordinal() const { return ordinal_; }
  const MachineInfo& machine() const { return machine_; }
  // Fills the host's out-struct (see weft_device_properties_t).
  void Properties(weft_device_properties_t* out) const;

  // Throws weft::sdk::Error(RESOURCE_EXHAUSTED) when memory is out.
  CpuBuffer* Allocate(uint64_t size);
  void Free(CpuBuffer* buffer);
  uint64_t bytes_in_use() const { return bytes_in_use_.load(std::memory_order_relaxed); }

 private:
  int ordinal_;
  MachineInfo machine_;
  std::string compute_units_text_;
  std::vector<weft_property_t> extra_;
  std::atomic<uint64_t> bytes_in_use_{0};
  BlockCache cache_;
  SmallBlocks small_;
};

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_CPU_DEVICE_H_
