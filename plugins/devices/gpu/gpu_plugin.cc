// The device table of the cuda and hip plugins, written once against the
// runtime aliases of gpu_runtime.h; each plugin builds this file with its
// runtime and links its own vendor.h definitions.
//
// Buffers are runtime allocations from a caching allocator, streams are
// non-blocking runtime streams, events are runtime events without timing,
// and copies and memsets are the runtime's asynchronous ones, ordered on
// the stream. Where the runtime finds no usable device (no driver, no
// GPU), device_count answers UNAVAILABLE with the runtime's own words, and
// the host lists the plugin as unavailable and goes on.
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "gpu/gpu_device.h"
#include "gpu/kernel_framework.h"
#include "gpu/plugin_options.h"
#include "gpu/vendor.h"
#include "weft/sdk/plugin.h"
#include "weft/sdk/tables.h"

namespace weft::gpu {

namespace {

std::mutex g_mutex;
Options g_options;

Stream* AsStream(weft_stream_t stream) { return reinterpret_cast<Stream*>(stream); }
Event* AsEvent(weft_event_t event) { return reinterpret_cast<Event*>(event); }

void CheckStream(weft_stream_t stream, const char* what) {
  if (stream == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, std::string(what) + ": NULL stream");
}

std::string Call(const char* name) { return std::string(Vendor().call_prefix) + name; }

weft_status_t Configure(const weft_options_t* options) {
  return sdk::Guard([&] {
    Options o;
    o.allocator_cache = sdk::GetBool(options, "allocator_cache");
    std::lock_guard<std::mutex> lock(g_mutex);
    g_options = o;
  });
}

// The device table's entry points (weft/sdk/tables.h). Device memory
// is not host-addressable: there is no BufferHostPointer.
struct Entry : sdk::DeviceObjects<Device> {
  static char* At(weft_buffer_t buffer, uint64_t offset) { return static_cast<char*>(AsBuffer(buffer)->ptr) + offset; }

  static weft_status_t DeviceCount(int32_t* out_count) {
    return sdk::Guard([&]() -> weft_status_t {
      int count = 0;
      const rt::Error error = rt::GetDeviceCount(&count);
      if (error != rt::kSuccess || count <= 0) {
        (void)rt::GetLastError();  // the runtime keeps the last error per thread
        return sdk::MakeStatus(WEFT_UNAVAILABLE, UnavailableMessage(error).c_str());
      }
      *out_count = count;
      return nullptr;
    });
  }

  static weft_status_t DeviceOpen(int32_t ordinal, weft_device_t* out_device) {
    return sdk::Guard([&] {
      int count = 0;
      const rt::Error error = rt::GetDeviceCount(&count);
      if (error != rt::kSuccess) {
        (void)rt::GetLastError();
        throw sdk::Error(WEFT_UNAVAILABLE, UnavailableMessage(error));
      }
      if (ordinal < 0 || ordinal >= count) {
        throw sdk::Error(WEFT_NOT_FOUND, std::string("no /device:") + Vendor().device_type + ":" +
                                             std::to_string(ordinal) + " (" + std::to_string(count) + " " +
                                             Vendor().runtime_name + " device(s) found)");
      }
      Options options;
      {
        std::lock_guard<std::mutex> lock(g_mutex);
        options = g_options;
      }
      *out_device = reinterpret_cast<weft_device_t>(new Device(ordinal, options));
    });
  }

  static weft_status_t StreamCreate(weft_device_t device, weft_stream_t* out_stream) {
    return sdk::Guard([&] {
      Device* d = AsDevice(device);
      d->MakeCurrent();
      rt::Stream stream = nullptr;
      Check(rt::StreamCreate(&stream), Call("StreamCreateWithFlags").c_str());
      *out_stream = reinterpret_cast<weft_stream_t>(new Stream(d, stream));
    });
  }

  static void StreamDestroy(weft_device_t, weft_stream_t stream) {
    sdk::GuardVoid("stream_destroy", [&] { delete AsStream(stream); });
  }

  static weft_status_t StreamSynchronize(weft_device_t device, weft_stream_t stream) {
    return sdk::Guard([&] {
      CheckStream(stream, "stream_synchronize");
      AsDevice(device)->MakeCurrent();
      Check(rt::StreamSynchronize(AsStream(stream)->stream), Call("StreamSynchronize").c_str());
    });
  }

  static weft_status_t EventCreate(weft_device_t device, weft_event_t* out_event) {
    return sdk::Guard([&] {
      AsDevice(device)->MakeCurrent();
      auto event = std::make_unique<Event>();
      Check(rt::EventCreate(&event->event), Call("EventCreateWithFlags").c_str());
      *out_event = reinterpret_cast<weft_event_t>(event.release());
    });
  }

  static void EventDestroy(weft_device_t device, weft_event_t event) {
    sdk::GuardVoid("event_destroy", [&] {
      if (event == nullptr) return;
      std::unique_ptr<Event> owned(AsEvent(event));
      AsDevice(device)->MakeCurrent();
      Check(rt::EventDestroy(owned->event), Call("EventDestroy").c_str());
    });
  }

  static weft_status_t EventRecord(weft_device_t device, weft_event_t event, weft_stream_t stream) {
    return sdk::Guard([&] {
      CheckStream(stream, "event_record");
      AsDevice(device)->MakeCurrent();
      Check(rt::EventRecord(AsEvent(event)->event, AsStream(stream)->stream), Call("EventRecord").c_str());
      AsEvent(event)->recorded.store(true, std::memory_order_release);
    });
  }

  static weft_status_t StreamWaitEvent(weft_device_t device, weft_stream_t stream, weft_event_t event) {
    return sdk::Guard([&] {
      CheckStream(stream, "stream_wait_event");
      if (!AsEvent(event)->recorded.load(std::memory_order_acquire)) return;
      AsDevice(device)->MakeCurrent();
      Check(rt::StreamWaitEvent(AsStream(stream)->stream, AsEvent(event)->event), Call("StreamWaitEvent").c_str());
    });
  }

  static weft_status_t EventSynchronize(weft_device_t device, weft_event_t event) {
    return sdk::Guard([&] {
      if (!AsEvent(event)->recorded.load(std::memory_order_acquire)) return;
      AsDevice(device)->MakeCurrent();
      Check(rt::EventSynchronize(AsEvent(event)->event), Call("EventSynchronize").c_str());
    });
  }

  static weft_status_t EventOnReady(weft_device_t device, weft_event_t event, weft_done_fn done, void* user) {
    return sdk::Guard([&] {
      if (done == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "event_on_ready: NULL callback");
      AsDevice(device)->OnReady(AsEvent(event), done, user);
    });
  }

  static weft_status_t CopyHostToDevice(weft_device_t device, weft_stream_t stream, const void* src, weft_buffer_t dst,
                                        uint64_t dst_offset, uint64_t size) {
    return sdk::Guard([&] {
      CheckStream(stream, "copy_host_to_device");
      sdk::CheckBufferRange(AsBuffer(dst), dst_offset, size, "copy_host_to_device");
      if (size == 0) return;
      AsDevice(device)->MakeCurrent();
      Check(rt::CopyHostToDevice(At(dst, dst_offset), src, size, AsStream(stream)->stream),
            Call("MemcpyAsync (host to device)").c_str());
    });
  }

  static weft_status_t CopyDeviceToHost(weft_device_t device, weft_stream_t stream, weft_buffer_t src,
                                        uint64_t src_offset, void* dst, uint64_t size) {
    return sdk::Guard([&] {
      CheckStream(stream, "copy_device_to_host");
      sdk::CheckBufferRange(AsBuffer(src), src_offset, size, "copy_device_to_host");
      if (size == 0) return;
      AsDevice(device)->MakeCurrent();
      Check(rt::CopyDeviceToHost(dst, At(src, src_offset), size, AsStream(stream)->stream),
            Call("MemcpyAsync (device to host)").c_str());
    });
  }

  static weft_status_t CopyDeviceToDevice(weft_device_t device, weft_stream_t stream, weft_buffer_t src,
                                          uint64_t src_offset, weft_buffer_t dst, uint64_t dst_offset, uint64_t size) {
    return sdk::Guard([&] {
      CheckStream(stream, "copy_device_to_device");
      sdk::CheckBufferRange(AsBuffer(src), src_offset, size, "copy_device_to_device (source)");
      sdk::CheckBufferRange(AsBuffer(dst), dst_offset, size, "copy_device_to_device (destination)");
      if (size == 0) return;
      AsDevice(device)->MakeCurrent();
      Check(rt::CopyDeviceToDevice(At(dst, dst_offset), At(src, src_offset), size, AsStream(stream)->stream),
            Call("MemcpyAsync (device to device)").c_str());
    });
  }

  // The runtime copies between any two of its devices: directly where they
  // are peers, through host memory where they are not.
  static weft_status_t CopyPeer(weft_device_t src_device, weft_stream_t src_stream, weft_buffer_t src,
                                uint64_t src_offset, weft_device_t dst_device, weft_buffer_t dst, uint64_t dst_offset,
                                uint64_t size) {
    return sdk::Guard([&] {
      CheckStream(src_stream, "copy_peer");
      sdk::CheckBufferRange(AsBuffer(src), src_offset, size, "copy_peer (source)");
      sdk::CheckBufferRange(AsBuffer(dst), dst_offset, size, "copy_peer (destination)");
      if (size == 0) return;
      AsDevice(src_device)->MakeCurrent();
      Check(rt::CopyPeer(At(dst, dst_offset), AsDevice(dst_device)->ordinal(), At(src, src_offset),
                         AsDevice(src_device)->ordinal(), size, AsStream(src_stream)->stream),
            Call("MemcpyPeerAsync").c_str());
    });
  }

  static weft_status_t BufferMemset(weft_device_t device, weft_stream_t stream, weft_buffer_t buffer, uint64_t offset,
                                    uint8_t value, uint64_t size) {
    return sdk::Guard([&] {
      CheckStream(stream, "buffer_memset");
      sdk::CheckBufferRange(AsBuffer(buffer), offset, size, "buffer_memset");
      if (size == 0) return;
      AsDevice(device)->MakeCurrent();
      Check(rt::Memset(At(buffer, offset), value, size, AsStream(stream)->stream), Call("MemsetAsync").c_str());
    });
  }
};

const weft_device_plugin_t& DeviceTable() {
  static const KernelRegistry kernels = sdk::MakeRegistry<KernelRegistry>(
      {RegisterUnaryKernels, RegisterBinaryKernels, RegisterCastKernels, RegisterArrayKernels, RegisterReductionKernels,
       RegisterNnKernels, RegisterNormKernels, RegisterPoolKernels, RegisterTrainingKernels, RegisterVendorKernels});
  static const weft_device_plugin_t table = sdk::DeviceTableOf<Entry>(Vendor().device_type, kernels);
  return table;
}

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin = Description(&DeviceTable(), Configure);
  return &plugin;
}

}  // namespace
}  // namespace weft::gpu

WEFT_SDK_DEFINE_PLUGIN(weft::gpu::Describe)
