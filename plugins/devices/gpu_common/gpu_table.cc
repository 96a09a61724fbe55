// The device table of the cuda and hip plugins. Streams and events are the
// runtime's; event_on_ready enqueues a host function behind the event on a
// per-device callback stream, and that host function only hands the
// callback to a notifier thread, because a runtime host function must not
// call the runtime itself (the host's callback may free buffers or launch
// work).
#include "gpu_table.h"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "gpu_device.h"
#include "gpu_kernels.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/options.h"
#include "weft/sdk/status.h"
#include "weft/sdk/struct.h"

namespace weft::gpu {
namespace {

bool g_allocator_cache = true;

// Runs callbacks handed over by runtime host functions on a thread of its
// own, in the order they arrive.
class Notifier {
 public:
  Notifier() : thread_([this] { Run(); }) {}
  ~Notifier() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // |error| is the runtime's report on the stream (success when none).
  void Post(weft_done_fn done, void* user, gpuError_t error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(Item{done, user, error});
    }
    wake_.notify_one();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, with nothing left to run
      const Item item = queue_.front();
      queue_.pop_front();
      lock.unlock();
      weft_status_t status = nullptr;
      if (item.error != gpuSuccess) {
        status = sdk::MakeStatus(
            WEFT_INTERNAL, ("work before an event failed: " + ErrorText(item.error)).c_str());
      }
      item.done(item.user, status);
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  struct Item {
    weft_done_fn done;
    void* user;
    gpuError_t error;
  };
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// What a weft_device_t points to.
struct Handle {
  explicit Handle(int ordinal) : device(ordinal, g_allocator_cache) {
    device.Check(gpuStreamCreateWithFlags(&callbacks, gpuStreamNonBlocking),
                 "creating the callback stream");
  }
  ~Handle() {
    // Every event was released before close, so the callback stream has
    // nothing left that could still post.
    if (callbacks != nullptr) {
      (void)gpuStreamSynchronize(callbacks);
      (void)gpuStreamDestroy(callbacks);
    }
  }
  Device device;
  gpuStream_t callbacks = nullptr;
  Notifier notifier;  // declared last: stopped first
};

struct Pending {
  Notifier* notifier;
  weft_done_fn done;
  void* user;
};

#if defined(WEFT_GPU_CUDA)
void HostFunction(void* data) {
  std::unique_ptr<Pending> pending(static_cast<Pending*>(data));
  pending->notifier->Post(pending->done, pending->user, gpuSuccess);
}
// Runs HostFunction(data) once the work on |stream| so far completes.
gpuError_t EnqueueHostFunction(gpuStream_t stream, void* data) {
  return cudaLaunchHostFunc(stream, HostFunction, data);
}
#else
// Debian's ROCm 5.2 runtime has no hipLaunchHostFunc; the stream callback
// does the same and also reports the stream's error.
void HostCallback(hipStream_t, hipError_t error, void* data) {
  std::unique_ptr<Pending> pending(static_cast<Pending*>(data));
  pending->notifier->Post(pending->done, pending->user, error);
}
gpuError_t EnqueueHostFunction(gpuStream_t stream, void* data) {
  return hipStreamAddCallback(stream, HostCallback, data, 0);
}
#endif

Handle* AsHandle(weft_device_t device) { return reinterpret_cast<Handle*>(device); }
Device& AsDevice(weft_device_t device) { return AsHandle(device)->device; }
Buffer* AsBuffer(weft_buffer_t buffer) { return reinterpret_cast<Buffer*>(buffer); }
gpuStream_t AsStream(weft_stream_t stream) { return reinterpret_cast<Stream*>(stream)->stream; }
Event* AsEvent(weft_event_t event) { return reinterpret_cast<Event*>(event); }

// The device address of |offset| in |buffer|, after checking that |size|
// bytes from there lie inside it.
char* At(weft_buffer_t buffer, uint64_t offset, uint64_t size, const char* what) {
  const Buffer* b = AsBuffer(buffer);
  if (b == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, std::string(what) + ": NULL buffer");
  if (offset > b->size || size > b->size - offset) {
    throw sdk::Error(WEFT_OUT_OF_RANGE, std::string(what) + ": bytes [" + std::to_string(offset) +
                                            ", " + std::to_string(offset + size) +
                                            ") outside a buffer of " + std::to_string(b->size) +
                                            " bytes");
  }
  return static_cast<char*>(b->ptr) + offset;
}

weft_status_t DeviceCount(int32_t* out_count) {
  return sdk::Guard([&] {
    int count = 0;
    const gpuError_t err = gpuGetDeviceCount(&count);
    if (err != gpuSuccess) {
      (void)gpuGetLastError();
      throw sdk::Error(WEFT_UNAVAILABLE, UnavailableReason(err));
    }
    *out_count = count;
  });
}

weft_status_t DeviceOpen(int32_t ordinal, weft_device_t* out_device) {
  return sdk::Guard([&] {
    int count = 0;
    const gpuError_t err = gpuGetDeviceCount(&count);
    if (err != gpuSuccess) throw sdk::Error(WEFT_UNAVAILABLE, UnavailableReason(err));
    if (ordinal < 0 || ordinal >= count) {
      throw sdk::Error(WEFT_NOT_FOUND, "no /device:" WEFT_GPU_TYPE ":" + std::to_string(ordinal) +
                                           " (the runtime reports " + std::to_string(count) +
                                           " devices)");
    }
    *out_device = reinterpret_cast<weft_device_t>(new Handle(ordinal));
  });
}

void DeviceClose(weft_device_t device) {
  sdk::GuardVoid("device_close", [&] { delete AsHandle(device); });
}

weft_status_t DeviceProperties(weft_device_t device, weft_device_properties_t* out) {
  return sdk::Guard([&] { AsDevice(device).Properties(out); });
}

weft_status_t BufferAlloc(weft_device_t device, uint64_t size, weft_buffer_t* out_buffer) {
  return sdk::Guard([&] {
    *out_buffer = reinterpret_cast<weft_buffer_t>(AsDevice(device).Allocate(size));
  });
}

void BufferFree(weft_device_t device, weft_buffer_t buffer) {
  sdk::GuardVoid("buffer_free", [&] { AsDevice(device).Free(AsBuffer(buffer)); });
}

weft_status_t StreamCreate(weft_device_t device, weft_stream_t* out_stream) {
  return sdk::Guard([&] {
    Device& d = AsDevice(device);
    d.Activate();
    auto stream = std::make_unique<Stream>();
    d.Check(gpuStreamCreateWithFlags(&stream->stream, gpuStreamNonBlocking), "creating a stream");
    *out_stream = reinterpret_cast<weft_stream_t>(stream.release());
  });
}

void StreamDestroy(weft_device_t, weft_stream_t stream) {
  std::unique_ptr<Stream> owned(reinterpret_cast<Stream*>(stream));
  if (owned != nullptr) (void)gpuStreamDestroy(owned->stream);
}

weft_status_t StreamSynchronize(weft_device_t device, weft_stream_t stream) {
  return sdk::Guard([&] {
    AsDevice(device).Check(gpuStreamSynchronize(AsStream(stream)), "synchronizing a stream");
  });
}

weft_status_t EventCreate(weft_device_t device, weft_event_t* out_event) {
  return sdk::Guard([&] {
    Device& d = AsDevice(device);
    d.Activate();
    auto event = std::make_unique<Event>();
    d.Check(gpuEventCreateWithFlags(&event->event, gpuEventDisableTiming), "creating an event");
    *out_event = reinterpret_cast<weft_event_t>(event.release());
  });
}

void EventDestroy(weft_device_t, weft_event_t event) {
  std::unique_ptr<Event> owned(AsEvent(event));
  if (owned != nullptr) (void)gpuEventDestroy(owned->event);
}

weft_status_t EventRecord(weft_device_t device, weft_event_t event, weft_stream_t stream) {
  return sdk::Guard([&] {
    AsDevice(device).Check(gpuEventRecord(AsEvent(event)->event, AsStream(stream)),
                           "recording an event");
    AsEvent(event)->recorded = true;
  });
}

weft_status_t StreamWaitEvent(weft_device_t device, weft_stream_t stream, weft_event_t event) {
  return sdk::Guard([&] {
    if (!AsEvent(event)->recorded) return;
    AsDevice(device).Check(gpuStreamWaitEvent(AsStream(stream), AsEvent(event)->event, 0),
                           "making a stream wait for an event");
  });
}

weft_status_t EventSynchronize(weft_device_t device, weft_event_t event) {
  return sdk::Guard([&] {
    if (!AsEvent(event)->recorded) return;
    AsDevice(device).Check(gpuEventSynchronize(AsEvent(event)->event), "waiting for an event");
  });
}

weft_status_t EventOnReady(weft_device_t device, weft_event_t event, weft_done_fn done,
                           void* user) {
  return sdk::Guard([&] {
    if (done == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "event_on_ready: NULL callback");
    Handle* h = AsHandle(device);
    if (!AsEvent(event)->recorded) {
      done(user, nullptr);
      return;
    }
    h->device.Check(gpuStreamWaitEvent(h->callbacks, AsEvent(event)->event, 0),
                    "queueing a callback behind an event");
    auto pending = std::make_unique<Pending>(Pending{&h->notifier, done, user});
    h->device.Check(EnqueueHostFunction(h->callbacks, pending.get()),
                    "queueing a callback behind an event");
    (void)pending.release();  // HostFunction owns it now
  });
}

weft_status_t CopyHostToDevice(weft_device_t device, weft_stream_t stream, const void* src,
                               weft_buffer_t dst, uint64_t dst_offset, uint64_t size) {
  return sdk::Guard([&] {
    char* to = At(dst, dst_offset, size, "copy_host_to_device");
    if (size == 0) return;
    AsDevice(device).Check(
        gpuMemcpyAsync(to, src, size, gpuMemcpyHostToDevice, AsStream(stream)),
        "copying host to device");
  });
}

weft_status_t CopyDeviceToHost(weft_device_t device, weft_stream_t stream, weft_buffer_t src,
                               uint64_t src_offset, void* dst, uint64_t size) {
  return sdk::Guard([&] {
    const char* from = At(src, src_offset, size, "copy_device_to_host");
    if (size == 0) return;
    AsDevice(device).Check(
        gpuMemcpyAsync(dst, from, size, gpuMemcpyDeviceToHost, AsStream(stream)),
        "copying device to host");
  });
}

weft_status_t CopyDeviceToDevice(weft_device_t device, weft_stream_t stream, weft_buffer_t src,
                                 uint64_t src_offset, weft_buffer_t dst, uint64_t dst_offset,
                                 uint64_t size) {
  return sdk::Guard([&] {
    const char* from = At(src, src_offset, size, "copy_device_to_device (source)");
    char* to = At(dst, dst_offset, size, "copy_device_to_device (destination)");
    if (size == 0) return;
    AsDevice(device).Check(
        gpuMemcpyAsync(to, from, size, gpuMemcpyDeviceToDevice, AsStream(stream)),
        "copying device to device");
  });
}

weft_status_t CopyPeer(weft_device_t src_device, weft_stream_t src_stream, weft_buffer_t src,
                       uint64_t src_offset, weft_device_t dst_device, weft_buffer_t dst,
                       uint64_t dst_offset, uint64_t size) {
  return sdk::Guard([&] {
    const char* from = At(src, src_offset, size, "copy_peer (source)");
    char* to = At(dst, dst_offset, size, "copy_peer (destination)");
    if (size == 0) return;
    Device& s = AsDevice(src_device);
    Device& d = AsDevice(dst_device);
    s.Check(gpuMemcpyPeerAsync(to, d.ordinal(), from, s.ordinal(), size, AsStream(src_stream)),
            ("copying to " + d.where()).c_str());
  });
}

weft_status_t BufferMemset(weft_device_t device, weft_stream_t stream, weft_buffer_t buffer,
                           uint64_t offset, uint8_t value, uint64_t size) {
  return sdk::Guard([&] {
    char* to = At(buffer, offset, size, "buffer_memset");
    if (size == 0) return;
    AsDevice(device).Check(gpuMemsetAsync(to, value, size, AsStream(stream)), "setting memory");
  });
}

}  // namespace

Device* DeviceOf(weft_device_t device) { return &AsDevice(device); }

weft_status_t Configure(const weft_options_t* options) {
  return sdk::Guard([&] { g_allocator_cache = sdk::GetBool(options, "allocator_cache"); });
}

const weft_device_plugin_t& DeviceTable(const weft_kernel_def_t* kernels, std::size_t num_kernels) {
  static const weft_device_plugin_t table = [&] {
    auto t = sdk::Make<weft_device_plugin_t>();
    t.device_type = WEFT_GPU_TYPE;
    t.device_count = DeviceCount;
    t.device_open = DeviceOpen;
    t.device_close = DeviceClose;
    t.device_properties = DeviceProperties;
    t.buffer_alloc = BufferAlloc;
    t.buffer_free = BufferFree;
    t.buffer_host_pointer = nullptr;
    t.stream_create = StreamCreate;
    t.stream_destroy = StreamDestroy;
    t.stream_synchronize = StreamSynchronize;
    t.event_create = EventCreate;
    t.event_destroy = EventDestroy;
    t.event_record = EventRecord;
    t.stream_wait_event = StreamWaitEvent;
    t.event_synchronize = EventSynchronize;
    t.event_on_ready = EventOnReady;
    t.copy_host_to_device = CopyHostToDevice;
    t.copy_device_to_host = CopyDeviceToHost;
    t.copy_device_to_device = CopyDeviceToDevice;
    t.copy_peer = CopyPeer;
    t.buffer_memset = BufferMemset;
    t.kernels = num_kernels == 0 ? nullptr : kernels;
    t.num_kernels = num_kernels;
    return t;
  }();
  return table;
}

}  // namespace weft::gpu
