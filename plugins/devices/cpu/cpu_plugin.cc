// The cpu device plugin: its description, options and device table.
//
// It is built against the Weft SDK alone (weft_add_plugin enforces that),
// which is the proof that any device can live behind the ABI. Streams run
// their work as it is enqueued, so events are ready once recorded.
#include <cstring>
#include <memory>
#include <mutex>

#include "cpu_device.h"
#include "kernel_framework.h"
#include "weft/sdk/plugin.h"

namespace weft::cpu {
namespace {

int g_device_count = 1;
uint64_t g_cache_bytes = 0;

CpuDevice* AsDevice(weft_device_t device) { return reinterpret_cast<CpuDevice*>(device); }
CpuBuffer* AsBuffer(weft_buffer_t buffer) { return reinterpret_cast<CpuBuffer*>(buffer); }

// A stream's work runs when enqueued; the stream only exists to satisfy
// the ordering contract, which inline execution meets trivially.
struct CpuStream {
  int ordinal;
};
struct CpuEvent {
  int ordinal;
};

void CheckRange(const CpuBuffer* buffer, uint64_t offset, uint64_t size, const char* what) {
  if (buffer == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, std::string(what) + ": NULL buffer");
  if (offset > buffer->size || size > buffer->size - offset) {
    throw sdk::Error(WEFT_OUT_OF_RANGE, std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                                            std::to_string(offset + size) + ") outside a buffer of " +
                                            std::to_string(buffer->size) + " bytes");
  }
}

weft_status_t Configure(const weft_options_t* options) {
  return sdk::Guard([&] {
    g_device_count = static_cast<int>(sdk::GetInt(options, "count"));
    g_cache_bytes = static_cast<uint64_t>(sdk::GetInt(options, "allocator_cache_mb")) << 20;
  });
}

weft_status_t DeviceCount(int32_t* out_count) {
  return sdk::Guard([&] { *out_count = g_device_count; });
}

weft_status_t DeviceOpen(int32_t ordinal, weft_device_t* out_device) {
  return sdk::Guard([&] {
    if (ordinal < 0 || ordinal >= g_device_count) {
      throw sdk::Error(WEFT_NOT_FOUND, "no /device:CPU:" + std::to_string(ordinal) + " (" +
                                           std::to_string(g_device_count) + " configured by devices.cpu.count)");
    }
    *out_device = reinterpret_cast<weft_device_t>(new CpuDevice(ordinal, g_cache_bytes));
  });
}

void DeviceClose(weft_device_t device) {
  sdk::GuardVoid("device_close", [&] { delete AsDevice(device); });
}

weft_status_t DeviceProperties(weft_device_t device, weft_device_properties_t* out) {
  return sdk::Guard([&] { AsDevice(device)->Properties(out); });
}

weft_status_t BufferAlloc(weft_device_t device, uint64_t size, weft_buffer_t* out_buffer) {
  return sdk::Guard([&] { *out_buffer = reinterpret_cast<weft_buffer_t>(AsDevice(device)->Allocate(size)); });
}

void BufferFree(weft_device_t device, weft_buffer_t buffer) {
  sdk::GuardVoid("buffer_free", [&] { AsDevice(device)->Free(AsBuffer(buffer)); });
}

void* BufferHostPointer(weft_device_t, weft_buffer_t buffer) {
  return buffer == nullptr ? nullptr : AsBuffer(buffer)->data;
}

weft_status_t StreamCreate(weft_device_t device, weft_stream_t* out_stream) {
  return sdk::Guard([&] { *out_stream = reinterpret_cast<weft_stream_t>(new CpuStream{AsDevice(device)->ordinal()}); });
}

void StreamDestroy(weft_device_t, weft_stream_t stream) { delete reinterpret_cast<CpuStream*>(stream); }

weft_status_t StreamSynchronize(weft_device_t, weft_stream_t) { return nullptr; }

weft_status_t EventCreate(weft_device_t device, weft_event_t* out_event) {
  return sdk::Guard([&] { *out_event = reinterpret_cast<weft_event_t>(new CpuEvent{AsDevice(device)->ordinal()}); });
}

void EventDestroy(weft_device_t, weft_event_t event) { delete reinterpret_cast<CpuEvent*>(event); }

weft_status_t EventRecord(weft_device_t, weft_event_t, weft_stream_t) { return nullptr; }
weft_status_t StreamWaitEvent(weft_device_t, weft_stream_t, weft_event_t) { return nullptr; }
weft_status_t EventSynchronize(weft_device_t, weft_event_t) { return nullptr; }

weft_status_t EventOnReady(weft_device_t, weft_event_t, weft_done_fn done, void* user) {
  return sdk::Guard([&] {
    if (done == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "event_on_ready: NULL callback");
    done(user, nullptr);
  });
}

weft_status_t CopyHostToDevice(weft_device_t, weft_stream_t, const void* src, weft_buffer_t dst, uint64_t dst_offset,
                               uint64_t size) {
  return sdk::Guard([&] {
    CheckRange(AsBuffer(dst), dst_offset, size, "copy_host_to_device");
    if (size > 0) std::memcpy(static_cast<char*>(AsBuffer(dst)->data) + dst_offset, src, size);
  });
}

weft_status_t CopyDeviceToHost(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t src_offset, void* dst,
                               uint64_t size) {
  return sdk::Guard([&] {
    CheckRange(AsBuffer(src), src_offset, size, "copy_device_to_host");
    if (size > 0) std::memcpy(dst, static_cast<const char*>(AsBuffer(src)->data) + src_offset, size);
  });
}

weft_status_t CopyDeviceToDevice(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t src_offset,
                                 weft_buffer_t dst, uint64_t dst_offset, uint64_t size) {
  return sdk::Guard([&] {
    CheckRange(AsBuffer(src), src_offset, size, "copy_device_to_device (source)");
    CheckRange(AsBuffer(dst), dst_offset, size, "copy_device_to_device (destination)");
    if (size > 0) {
      std::memmove(static_cast<char*>(AsBuffer(dst)->data) + dst_offset,
                   static_cast<const char*>(AsBuffer(src)->data) + src_offset, size);
    }
  });
}

// All CPU devices share the host's memory, so a peer copy is a memmove.
weft_status_t CopyPeer(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t src_offset, weft_device_t,
                       weft_buffer_t dst, uint64_t dst_offset, uint64_t size) {
  return CopyDeviceToDevice(nullptr, nullptr, src, src_offset, dst, dst_offset, size);
}

weft_status_t BufferMemset(weft_device_t, weft_stream_t, weft_buffer_t buffer, uint64_t offset, uint8_t value,
                           uint64_t size) {
  return sdk::Guard([&] {
    CheckRange(AsBuffer(buffer), offset, size, "buffer_memset");
    if (size > 0) std::memset(static_cast<char*>(AsBuffer(buffer)->data) + offset, value, size);
  });
}

// Every kernel of the plugin, registered family by family when the plugin
// is first described.
const KernelRegistry& Kernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    RegisterElementwiseKernels(r);
    RegisterMatMulKernels(r);
    RegisterReductionKernels(r);
    RegisterArrayKernels(r);
    RegisterIndexingKernels(r);
    RegisterNnKernels(r);
    RegisterFusedKernels(r);
    RegisterNnGradKernels(r);
    RegisterRandomKernels(r);
    RegisterStateKernels(r);
    RegisterTrainingKernels(r);
    RegisterGradSupportKernels(r);
    RegisterSparseKernels(r);
    return r;
  }();
  return registry;
}

const weft_device_plugin_t& DeviceTable() {
  static const weft_device_plugin_t table = [] {
    auto t = sdk::Make<weft_device_plugin_t>();
    t.device_type = "CPU";
    t.device_count = DeviceCount;
    t.device_open = DeviceOpen;
    t.device_close = DeviceClose;
    t.device_properties = DeviceProperties;
    t.buffer_alloc = BufferAlloc;
    t.buffer_free = BufferFree;
    t.buffer_host_pointer = BufferHostPointer;
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
    t.kernels = Kernels().data();
    t.num_kernels = Kernels().size();
    return t;
  }();
  return table;
}

// Under AddressSanitizer, freed memory must really be freed for ASan to
// catch a use after free, so the block cache is off by default there.
#if defined(__SANITIZE_ADDRESS__)
#define WEFT_CPU_CACHE_DEFAULT "0"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_CPU_CACHE_DEFAULT "0"
#endif
#endif
#ifndef WEFT_CPU_CACHE_DEFAULT
#define WEFT_CPU_CACHE_DEFAULT "1024"
#endif

const weft_option_def_t kOptions[] = {
    {sizeof(weft_option_def_t), "count", WEFT_OPTION_INT, "1",
     "How many logical CPU devices to expose; they share the machine's cores.", 1, 1, 1, 64, nullptr, 0},
    {sizeof(weft_option_def_t), "allocator_cache_mb", WEFT_OPTION_INT, WEFT_CPU_CACHE_DEFAULT,
     "At most this many MiB of freed large buffers kept per device for reuse (0 turns the cache off).", 1, 0, 1,
     1 << 20, nullptr, 0},
};

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin = [] {
    weft_plugin_t p = sdk::DescribePlugin("cpu", WEFT_CPU_PLUGIN_VERSION,
                                          "Host CPU: aligned host memory, inline streams", WEFT_PLUGIN_DEVICE);
    p.device = &DeviceTable();
    sdk::WithOptions(p, kOptions, Configure);
    return p;
  }();
  return &plugin;
}

}  // namespace
}  // namespace weft::cpu

WEFT_SDK_DEFINE_PLUGIN(weft::cpu::Describe)
