// A CUDA or HIP device behind the weft device table (see gpu_runtime.h for
// how one source serves both runtimes): its buffers, served by a caching
// allocator, its properties, and the runtime errors turned into
// weft::sdk::Error.
//
// Part of the cuda and hip device plugins, which see the Weft SDK only.
#ifndef WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_DEVICE_H_
#define WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_DEVICE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gpu_runtime.h"
#include "weft/weft_plugin.h"

namespace weft::gpu {

// "<message> (<name>)" for a runtime error, or just the name when the
// runtime's message is the name.
std::string ErrorText(gpuError_t err);

// Throws INTERNAL "<call> on <where>: <message> (<name>)" unless |err| is
// gpuSuccess; RESOURCE_EXHAUSTED for an out-of-memory error.
void Check(gpuError_t err, const char* call, const std::string& where);

// The reason no device can be used, for device_count's UNAVAILABLE:
// "no usable CUDA device: <message> (<name>); the CUDA plugin needs ...".
std::string UnavailableReason(gpuError_t err);

// A block of device memory. |size| is what was asked for; |capacity| is
// what the allocator holds (its size bucket).
struct Buffer {
  void* ptr = nullptr;
  uint64_t size = 0;
  uint64_t capacity = 0;
};

// A stream is the runtime's stream; an event is the runtime's event plus
// whether it was ever recorded (a never-recorded event counts as ready).
struct Stream {
  gpuStream_t stream = nullptr;
};
struct Event {
  gpuEvent_t event = nullptr;
  std::atomic<bool> recorded{false};
};

class Device {
 public:
  // Opens device |ordinal|; |cache| keeps freed blocks for reuse.
  Device(int ordinal, bool cache);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int ordinal() const { return ordinal_; }
  // "/device:CUDA:0 (NVIDIA A100)", for messages.
  const std::string& where() const { return where_; }
  // Makes this device current on the calling thread (the runtime's
  // current device is per thread, and any thread may call the table).
  void Activate() const;
  void Check(gpuError_t err, const char* call) const { gpu::Check(err, call, where_); }

  void Properties(weft_device_properties_t* out) const;

  // Buffers are 256-byte aligned (what the runtime's allocations give).
  Buffer* Allocate(uint64_t size);
  void Free(Buffer* buffer);

 private:
  // The bucket a request of |size| bytes is served from: sizes up to 1 MiB
  // round to a power of two, larger ones to a multiple of 1 MiB.
  static uint64_t Bucket(uint64_t size);
  void ReleaseCache();

  int ordinal_;
  bool cache_enabled_;
  std::string where_;
  std::string model_;
  std::string vendor_;
  std::string driver_;
  std::vector<std::string> extra_strings_;
  std::vector<weft_property_t> extra_;
  uint64_t memory_bytes_ = 0;
  int32_t compute_units_ = 0;

  std::mutex mutex_;
  std::map<uint64_t, std::vector<void*>> free_;  // bucket -> idle blocks
};

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_DEVICE_H_
