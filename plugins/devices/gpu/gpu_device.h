// One GPU of the cuda or hip device plugin: its memory (a caching
// allocator), streams, events, and the thread that runs event callbacks.
//
// The runtime keeps a current device per host thread, so every entry point
// makes its device current first (Device::MakeCurrent, a cheap
// thread-local store in both runtimes).
#ifndef WEFT_PLUGINS_DEVICES_GPU_GPU_DEVICE_H_
#define WEFT_PLUGINS_DEVICES_GPU_GPU_DEVICE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpu/gpu_runtime.h"
#include "gpu/vendor.h"
#include "weft/weft_plugin.h"

namespace weft::gpu {

// Throws weft::sdk::Error for |error|: RESOURCE_EXHAUSTED when memory is
// out, INTERNAL otherwise, as "<what>: <cudaErrorX>: <the runtime's text>".
[[noreturn]] void ThrowRuntimeError(rt::Error error, const std::string& what);

inline void Check(rt::Error error, const char* what) {
  if (error != rt::kSuccess) ThrowRuntimeError(error, what);
}

// What [devices.cuda] / [devices.hip] set.
struct Options {
  // Keep freed blocks in per-size free lists for reuse (allocator_cache).
  bool allocator_cache = true;
};

struct Buffer {
  void* ptr;
  uint64_t size;      // what was asked for
  uint64_t capacity;  // the size class actually allocated
};

struct Event {
  rt::Event event = nullptr;
  // Whether event_record ran: a never-recorded event counts as ready. Read
  // by event_on_ready, possibly on another thread than the recording one.
  std::atomic<bool> recorded{false};
};

class Device;

struct Stream {
  Stream(Device* owner, rt::Stream handle) : device(owner), stream(handle) {}
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device* device;
  rt::Stream stream;
  // cuBLAS/cuDNN handles bound to this stream (vendor.h), made on first use.
  StreamLibraries* libraries = nullptr;
};

// Device memory in size classes: a request is rounded up to its class
// (quarter steps between powers of two, at least 512 bytes, so at most a
// quarter is wasted) and served from that class's free list when it holds
// a block. Freed blocks go back to their list instead of to the runtime,
// whose free synchronises the whole device. When the runtime runs out,
// the lists are emptied and the allocation retried once. Thread-safe.
class CachingAllocator {
 public:
  CachingAllocator(int ordinal, bool cache) : ordinal_(ordinal), cache_(cache) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The class |bytes| is served from (also with the cache off, so that
  // capacity is always what was allocated).
  static uint64_t SizeClass(uint64_t bytes);

  // A block of SizeClass(bytes) bytes; throws RESOURCE_EXHAUSTED. The
  // device must be current.
  void* Allocate(uint64_t bytes, uint64_t* capacity);
  void Release(void* ptr, uint64_t capacity);
  // Returns every cached block to the runtime.
  void Trim();

  uint64_t bytes_in_use() const;
  uint64_t bytes_cached() const;

 private:
  void TrimLocked();

  int ordinal_;
  bool cache_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, std::vector<void*>> free_;
  uint64_t in_use_ = 0;
  uint64_t cached_ = 0;
};

class Device {
 public:
  Device(int ordinal, const Options& options);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  int ordinal() const { return ordinal_; }
  // "/device:CUDA:0"
  const std::string& name() const { return name_; }
  void MakeCurrent() const;
  void Properties(weft_device_properties_t* out) const;

  Buffer* Allocate(uint64_t size);
  void Free(Buffer* buffer);
  CachingAllocator& allocator() { return allocator_; }

  // Calls |done|(|user|, status) once |event| is ready, on the device's
  // callback thread (which may call the runtime, unlike the runtime's own
  // callback thread).
  void OnReady(Event* event, weft_done_fn done, void* user);

 private:
  struct Pending {
    Device* device;
    weft_done_fn done;
    void* user;
    rt::Error status = rt::kSuccess;
  };
  static void RuntimeCallback(rt::Stream stream, rt::Error status, void* user);
  void CallbackLoop();

  int ordinal_;
  std::string name_;
  rt::DeviceProp prop_{};
  std::string driver_text_;
  std::string capability_text_;
  std::vector<std::pair<std::string, std::string>> extra_text_;
  std::vector<weft_property_t> extra_;
  CachingAllocator allocator_;

  // Event callbacks: the runtime calls RuntimeCallback on its own thread
  // once the callback stream passes the event; that only queues the call,
  // and callback_thread_ runs it.
  std::mutex callback_mutex_;
  std::condition_variable callback_cv_;
  std::deque<Pending*> callbacks_;
  bool stopping_ = false;
  rt::Stream callback_stream_ = nullptr;
  std::thread callback_thread_;
};

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_GPU_DEVICE_H_
