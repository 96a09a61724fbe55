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
#include "weft/sdk/option_defs.h"
#include "weft/sdk/plugin.h"
#include "weft/sdk/tables.h"

namespace weft::cpu {

void RegisterQuantizeKernels(KernelRegistry& r);  // kernels/quantize.cc: int8

namespace {

int g_device_count = 1;
uint64_t g_cache_bytes = 0;

// A stream's work runs when enqueued; the stream only exists to satisfy
// the ordering contract, which inline execution meets trivially.
struct CpuStream {
  int ordinal;
};
struct CpuEvent {
  int ordinal;
};

weft_status_t Configure(const weft_options_t* options) {
  return sdk::Guard([&] {
    g_device_count = static_cast<int>(sdk::GetInt(options, "count"));
    g_cache_bytes = static_cast<uint64_t>(sdk::GetInt(options, "allocator_cache_mb")) << 20;
  });
}

// The device table's entry points (weft/sdk/tables.h).
struct Entry : sdk::DeviceObjects<CpuDevice> {
  static char* At(weft_buffer_t buffer, uint64_t offset) { return static_cast<char*>(AsBuffer(buffer)->data) + offset; }

  static weft_status_t DeviceCount(int32_t* out_count) {
    return sdk::Guard([&] { *out_count = g_device_count; });
  }

  static weft_status_t DeviceOpen(int32_t ordinal, weft_device_t* out_device) {
    return sdk::Guard([&] {
      if (ordinal < 0 || ordinal >= g_device_count) {
        throw sdk::Error(WEFT_NOT_FOUND, "no /device:CPU:" + std::to_string(ordinal) + " (" +
                                             std::to_string(g_device_count) + " configured by devices.cpu.count)");
      }
      *out_device = reinterpret_cast<weft_device_t>(new CpuDevice(ordinal, g_cache_bytes));
    });
  }

  static void* BufferHostPointer(weft_device_t, weft_buffer_t buffer) {
    return buffer == nullptr ? nullptr : AsBuffer(buffer)->data;
  }

  static weft_status_t StreamCreate(weft_device_t device, weft_stream_t* out_stream) {
    return sdk::Guard(
        [&] { *out_stream = reinterpret_cast<weft_stream_t>(new CpuStream{AsDevice(device)->ordinal()}); });
  }

  static void StreamDestroy(weft_device_t, weft_stream_t stream) { delete reinterpret_cast<CpuStream*>(stream); }

  static weft_status_t StreamSynchronize(weft_device_t, weft_stream_t) { return nullptr; }

  static weft_status_t EventCreate(weft_device_t device, weft_event_t* out_event) {
    return sdk::Guard([&] { *out_event = reinterpret_cast<weft_event_t>(new CpuEvent{AsDevice(device)->ordinal()}); });
  }

  static void EventDestroy(weft_device_t, weft_event_t event) { delete reinterpret_cast<CpuEvent*>(event); }

  static weft_status_t EventRecord(weft_device_t, weft_event_t, weft_stream_t) { return nullptr; }
  static weft_status_t StreamWaitEvent(weft_device_t, weft_stream_t, weft_event_t) { return nullptr; }
  static weft_status_t EventSynchronize(weft_device_t, weft_event_t) { return nullptr; }

  static weft_status_t EventOnReady(weft_device_t, weft_event_t, weft_done_fn done, void* user) {
    return sdk::Guard([&] {
      if (done == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "event_on_ready: NULL callback");
      done(user, nullptr);
    });
  }

  static weft_status_t CopyHostToDevice(weft_device_t, weft_stream_t, const void* src, weft_buffer_t dst,
                                        uint64_t dst_offset, uint64_t size) {
    return sdk::Guard([&] {
      sdk::CheckBufferRange(AsBuffer(dst), dst_offset, size, "copy_host_to_device");
      if (size > 0) std::memcpy(At(dst, dst_offset), src, size);
    });
  }

  static weft_status_t CopyDeviceToHost(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t src_offset, void* dst,
                                        uint64_t size) {
    return sdk::Guard([&] {
      sdk::CheckBufferRange(AsBuffer(src), src_offset, size, "copy_device_to_host");
      if (size > 0) std::memcpy(dst, At(src, src_offset), size);
    });
  }

  static weft_status_t CopyDeviceToDevice(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t src_offset,
                                          weft_buffer_t dst, uint64_t dst_offset, uint64_t size) {
    return sdk::Guard([&] {
      sdk::CheckBufferRange(AsBuffer(src), src_offset, size, "copy_device_to_device (source)");
      sdk::CheckBufferRange(AsBuffer(dst), dst_offset, size, "copy_device_to_device (destination)");
      if (size > 0) std::memmove(At(dst, dst_offset), At(src, src_offset), size);
    });
  }

  // All CPU devices share the host's memory, so a peer copy is a memmove.
  static weft_status_t CopyPeer(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t src_offset, weft_device_t,
                                weft_buffer_t dst, uint64_t dst_offset, uint64_t size) {
    return CopyDeviceToDevice(nullptr, nullptr, src, src_offset, dst, dst_offset, size);
  }

  static weft_status_t BufferMemset(weft_device_t, weft_stream_t, weft_buffer_t buffer, uint64_t offset, uint8_t value,
                                    uint64_t size) {
    return sdk::Guard([&] {
      sdk::CheckBufferRange(AsBuffer(buffer), offset, size, "buffer_memset");
      if (size > 0) std::memset(At(buffer, offset), value, size);
    });
  }
};

// The device's table, with every kernel of the plugin, registered family
// by family when the plugin is first described.
const weft_device_plugin_t& DeviceTable() {
#if defined(WEFT_CPU_LITE)
  // The lite build (docs/lite.md) runs inference: no gradients of nn ops,
  // variable updates or optimizers. grad_support.cc stays: it also holds
  // ops inference graphs run (Pack, BroadcastTo, Cumsum, ...).
  static const KernelRegistry kernels = sdk::MakeRegistry<KernelRegistry>(
      {RegisterElementwiseKernels, RegisterMatMulKernels, RegisterReductionKernels, RegisterArrayKernels,
       RegisterIndexingKernels, RegisterNnKernels, RegisterFusedKernels, RegisterRandomKernels,
       RegisterGradSupportKernels, RegisterSparseKernels, RegisterDynamicShapeKernels, RegisterResizeKernels,
       RegisterDetectionKernels, RegisterUniqueKernels, RegisterQuantizeKernels});
#else
  static const KernelRegistry kernels = sdk::MakeRegistry<KernelRegistry>(
      {RegisterElementwiseKernels, RegisterMatMulKernels, RegisterReductionKernels, RegisterArrayKernels,
       RegisterIndexingKernels, RegisterNnKernels, RegisterFusedKernels, RegisterNnGradKernels, RegisterRandomKernels,
       RegisterStateKernels, RegisterTrainingKernels, RegisterGradSupportKernels, RegisterSparseKernels,
       RegisterDynamicShapeKernels, RegisterResizeKernels, RegisterDetectionKernels, RegisterUniqueKernels,
       RegisterQuantizeKernels});
#endif
  static const weft_device_plugin_t table = sdk::DeviceTableOf<Entry>("CPU", kernels);
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

constexpr weft_option_def_t kOptions[] = {
    sdk::IntOption("count", "1", "How many logical CPU devices to expose; they share the machine's cores.", 1, 64),
    sdk::IntOption("allocator_cache_mb", WEFT_CPU_CACHE_DEFAULT,
                   "At most this many MiB of freed large buffers kept per device for reuse (0 turns the cache off).", 0,
                   1 << 20),
};

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin =
      sdk::DescribePlugin("cpu", WEFT_CPU_PLUGIN_VERSION, "Host CPU: aligned host memory, inline streams",
                          &DeviceTable(), kOptions, Configure);
  return &plugin;
}

}  // namespace
}  // namespace weft::cpu

WEFT_SDK_DEFINE_PLUGIN(weft::cpu::Describe)
