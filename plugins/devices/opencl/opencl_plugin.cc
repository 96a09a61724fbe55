// The opencl device plugin: its description, options and device table.
//
// Buffers are cl_mem objects, streams in-order command queues, events the
// markers of a queue; copies are non-blocking reads, writes and copies
// ordered on the stream. Kernels are OpenCL C (kernels/*.cl, embedded in
// the library), built per device the first time a node needs them.
#include <cstring>
#include <mutex>
#include <vector>

#include "kernel_framework.h"
#include "opencl_device.h"
#include "weft/sdk/option_defs.h"
#include "weft/sdk/plugin.h"
#include "weft/sdk/tables.h"

namespace weft::opencl {
namespace {

std::mutex g_mutex;
Selection g_selection;         // from the [devices.opencl] section
std::vector<Found> g_devices;  // what device_count found

Stream* AsStream(weft_stream_t stream) { return reinterpret_cast<Stream*>(stream); }
Event* AsEvent(weft_event_t event) { return reinterpret_cast<Event*>(event); }

// A retained reference to an event's marker, or null when never recorded.
cl_event Marker(Event* event) {
  std::lock_guard<std::mutex> lock(event->mutex);
  if (event->marker != nullptr) clRetainEvent(event->marker);
  return event->marker;
}

// Why |marker| failed, when its status is negative.
std::string FailedStatus(cl_event marker) {
  cl_int status = CL_COMPLETE;
  clGetEventInfo(marker, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  return status < 0 ? ClErrorText(status) : std::string();
}

weft_status_t Configure(const weft_options_t* options) {
  return sdk::Guard([&] {
    Selection s;
    s.platform = sdk::GetString(options, "platform");
    s.device_type = sdk::GetString(options, "device_type");
    s.kernel_source_dir = sdk::GetString(options, "kernel_source_dir");
    s.matmul_kernel = sdk::GetString(options, "matmul_kernel");
    std::lock_guard<std::mutex> lock(g_mutex);
    g_selection = std::move(s);
  });
}

// What an on-ready callback needs once OpenCL calls it.
struct ReadyCall {
  weft_done_fn done;
  void* user;
  std::string where;
};

void CL_CALLBACK OnMarkerDone(cl_event, cl_int status, void* data) {
  auto* call = static_cast<ReadyCall*>(data);
  weft_status_t result = nullptr;
  if (status < 0) {
    const std::string message =
        "event on " + call->where + ": the work before the event failed: " + ClErrorText(status);
    result = sdk::host()->status_new(WEFT_INTERNAL, message.c_str());
  }
  call->done(call->user, result);
  delete call;
}

// The device table's entry points (weft/sdk/tables.h). Device memory
// is not host-addressable (no BufferHostPointer), and each device has a
// context of its own, so copies between devices go through the host (no
// CopyPeer).
struct Entry : sdk::DeviceObjects<Device> {
  static weft_status_t DeviceCount(int32_t* out_count) {
    return sdk::Guard([&] {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_devices = FindDevices(g_selection);
      *out_count = static_cast<int32_t>(g_devices.size());
    });
  }

  static weft_status_t DeviceOpen(int32_t ordinal, weft_device_t* out_device) {
    return sdk::Guard([&] {
      Found found;
      Selection selection;
      {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_devices.empty()) g_devices = FindDevices(g_selection);
        if (ordinal < 0 || ordinal >= static_cast<int32_t>(g_devices.size())) {
          throw sdk::Error(WEFT_NOT_FOUND, "no /device:OPENCL:" + std::to_string(ordinal) + " (" +
                                               std::to_string(g_devices.size()) + " OpenCL device(s) found)");
        }
        found = g_devices[static_cast<std::size_t>(ordinal)];
        selection = g_selection;
      }
      *out_device = reinterpret_cast<weft_device_t>(new Device(ordinal, found, selection));
    });
  }

  static weft_status_t StreamCreate(weft_device_t device, weft_stream_t* out_stream) {
    return sdk::Guard([&] {
      Device* d = AsDevice(device);
      cl_int err = CL_SUCCESS;
      cl_command_queue queue = clCreateCommandQueue(d->context(), d->id(), 0, &err);
      d->Check(err, "clCreateCommandQueue");
      *out_stream = reinterpret_cast<weft_stream_t>(new Stream{queue});
    });
  }

  static void StreamDestroy(weft_device_t, weft_stream_t stream) {
    sdk::GuardVoid("stream_destroy", [&] {
      if (stream == nullptr) return;
      // Work still queued finishes first; its buffers may be freed next.
      clFinish(AsStream(stream)->queue);
      clReleaseCommandQueue(AsStream(stream)->queue);
      delete AsStream(stream);
    });
  }

  static weft_status_t StreamSynchronize(weft_device_t device, weft_stream_t stream) {
    return sdk::Guard([&] {
      Device* d = AsDevice(device);
      cl_command_queue queue = AsStream(stream)->queue;
      // The marker's status says whether the work before it completed.
      cl_event marker = nullptr;
      d->Check(clEnqueueMarkerWithWaitList(queue, 0, nullptr, &marker), "clEnqueueMarkerWithWaitList");
      const cl_int finished = clFinish(queue);
      const std::string failed = FailedStatus(marker);
      clReleaseEvent(marker);
      d->Check(finished, "clFinish");
      if (!failed.empty()) {
        throw sdk::Error(WEFT_INTERNAL,
                         "stream_synchronize on " + d->where() + ": work on the stream failed: " + failed);
      }
    });
  }

  static weft_status_t EventCreate(weft_device_t, weft_event_t* out_event) {
    return sdk::Guard([&] { *out_event = reinterpret_cast<weft_event_t>(new Event); });
  }

  static void EventDestroy(weft_device_t, weft_event_t event) {
    if (event == nullptr) return;
    if (AsEvent(event)->marker != nullptr) clReleaseEvent(AsEvent(event)->marker);
    delete AsEvent(event);
  }

  static weft_status_t EventRecord(weft_device_t device, weft_event_t event, weft_stream_t stream) {
    return sdk::Guard([&] {
      cl_event marker = nullptr;
      AsDevice(device)->Check(clEnqueueMarkerWithWaitList(AsStream(stream)->queue, 0, nullptr, &marker),
                              "clEnqueueMarkerWithWaitList");
      cl_event old;
      {
        std::lock_guard<std::mutex> lock(AsEvent(event)->mutex);
        old = AsEvent(event)->marker;
        AsEvent(event)->marker = marker;
      }
      if (old != nullptr) clReleaseEvent(old);
    });
  }

  static weft_status_t StreamWaitEvent(weft_device_t device, weft_stream_t stream, weft_event_t event) {
    return sdk::Guard([&] {
      cl_event marker = Marker(AsEvent(event));
      if (marker == nullptr) return;  // never recorded: ready
      const cl_int err = clEnqueueBarrierWithWaitList(AsStream(stream)->queue, 1, &marker, nullptr);
      clReleaseEvent(marker);
      AsDevice(device)->Check(err, "clEnqueueBarrierWithWaitList");
    });
  }

  static weft_status_t EventSynchronize(weft_device_t device, weft_event_t event) {
    return sdk::Guard([&] {
      cl_event marker = Marker(AsEvent(event));
      if (marker == nullptr) return;
      const cl_int err = clWaitForEvents(1, &marker);
      const std::string failed = FailedStatus(marker);
      clReleaseEvent(marker);
      Device* d = AsDevice(device);
      if (!failed.empty()) {
        throw sdk::Error(WEFT_INTERNAL,
                         "event_synchronize on " + d->where() + ": the work before the event failed: " + failed);
      }
      d->Check(err, "clWaitForEvents");
    });
  }

  static weft_status_t EventOnReady(weft_device_t device, weft_event_t event, weft_done_fn done, void* user) {
    return sdk::Guard([&] {
      if (done == nullptr) throw sdk::Error(WEFT_INVALID_ARGUMENT, "event_on_ready: NULL callback");
      cl_event marker = Marker(AsEvent(event));
      if (marker == nullptr) {
        done(user, nullptr);
        return;
      }
      auto* call = new ReadyCall{done, user, AsDevice(device)->where()};
      // OpenCL calls back once the marker completes or fails (a negative
      // status), at once if that already happened.
      const cl_int err = clSetEventCallback(marker, CL_COMPLETE, OnMarkerDone, call);
      clReleaseEvent(marker);
      if (err != CL_SUCCESS) {
        delete call;
        AsDevice(device)->Check(err, "clSetEventCallback");
      }
    });
  }

  static weft_status_t CopyHostToDevice(weft_device_t device, weft_stream_t stream, const void* src, weft_buffer_t dst,
                                        uint64_t dst_offset, uint64_t size) {
    return sdk::Guard([&] {
      sdk::CheckBufferRange(AsBuffer(dst), dst_offset, size, "copy_host_to_device");
      if (size == 0) return;
      AsDevice(device)->Check(clEnqueueWriteBuffer(AsStream(stream)->queue, AsBuffer(dst)->mem, CL_FALSE, dst_offset,
                                                   size, src, 0, nullptr, nullptr),
                              "clEnqueueWriteBuffer");
    });
  }

  static weft_status_t CopyDeviceToHost(weft_device_t device, weft_stream_t stream, weft_buffer_t src,
                                        uint64_t src_offset, void* dst, uint64_t size) {
    return sdk::Guard([&] {
      sdk::CheckBufferRange(AsBuffer(src), src_offset, size, "copy_device_to_host");
      if (size == 0) return;
      AsDevice(device)->Check(clEnqueueReadBuffer(AsStream(stream)->queue, AsBuffer(src)->mem, CL_FALSE, src_offset,
                                                  size, dst, 0, nullptr, nullptr),
                              "clEnqueueReadBuffer");
    });
  }

  static weft_status_t CopyDeviceToDevice(weft_device_t device, weft_stream_t stream, weft_buffer_t src,
                                          uint64_t src_offset, weft_buffer_t dst, uint64_t dst_offset, uint64_t size) {
    return sdk::Guard([&] {
      sdk::CheckBufferRange(AsBuffer(src), src_offset, size, "copy_device_to_device (source)");
      sdk::CheckBufferRange(AsBuffer(dst), dst_offset, size, "copy_device_to_device (destination)");
      if (size == 0) return;
      Device* d = AsDevice(device);
      cl_command_queue queue = AsStream(stream)->queue;
      cl_mem from = AsBuffer(src)->mem, to = AsBuffer(dst)->mem;
      const bool overlap = from == to && src_offset < dst_offset + size && dst_offset < src_offset + size;
      if (!overlap) {
        d->Check(clEnqueueCopyBuffer(queue, from, to, src_offset, dst_offset, size, 0, nullptr, nullptr),
                 "clEnqueueCopyBuffer");
        return;
      }
      // OpenCL refuses overlapping copies (CL_MEM_COPY_OVERLAP); go through a
      // scratch buffer, as memmove would.
      cl_int err = CL_SUCCESS;
      cl_mem scratch = clCreateBuffer(d->context(), CL_MEM_READ_WRITE, size, nullptr, &err);
      d->Check(err, "clCreateBuffer");
      err = clEnqueueCopyBuffer(queue, from, scratch, src_offset, 0, size, 0, nullptr, nullptr);
      if (err == CL_SUCCESS) err = clEnqueueCopyBuffer(queue, scratch, to, 0, dst_offset, size, 0, nullptr, nullptr);
      clReleaseMemObject(scratch);
      d->Check(err, "clEnqueueCopyBuffer");
    });
  }

  static weft_status_t BufferMemset(weft_device_t device, weft_stream_t stream, weft_buffer_t buffer, uint64_t offset,
                                    uint8_t value, uint64_t size) {
    return sdk::Guard([&] {
      sdk::CheckBufferRange(AsBuffer(buffer), offset, size, "buffer_memset");
      if (size == 0) return;
      AsDevice(device)->Check(clEnqueueFillBuffer(AsStream(stream)->queue, AsBuffer(buffer)->mem, &value, 1, offset,
                                                  size, 0, nullptr, nullptr),
                              "clEnqueueFillBuffer");
    });
  }
};

// The device's table. Kernels that use f64 ask the device first
// (QueryFp64).
const weft_device_plugin_t& DeviceTable() {
  static const KernelRegistry kernels =
      sdk::MakeRegistry<KernelRegistry>({RegisterElementwiseKernels, RegisterReductionKernels, RegisterMatMulKernels,
                                         RegisterNnKernels, RegisterConvKernels, RegisterTrainingKernels},
                                        QueryFp64);
  static const weft_device_plugin_t table = sdk::DeviceTableOf<Entry>("OPENCL", kernels);
  return table;
}

const char* const kDeviceTypes[] = {"all", "gpu", "cpu", "accelerator"};
const char* const kMatMulKernels[] = {"auto", "tiled", "blocked"};

constexpr weft_option_def_t kOptions[] = {
    sdk::StringOption(
        "platform", "\"\"",
        "Use only OpenCL platforms whose name contains this text (case-insensitive); empty uses every platform."),
    sdk::StringOption("device_type", "\"all\"", "Which OpenCL devices of those platforms to expose.", kDeviceTypes),
    sdk::StringOption("kernel_source_dir", "\"\"",
                      "A folder whose <program>.cl files replace the plugin's built-in OpenCL C sources of that name "
                      "(for kernel development); empty uses the built-in ones."),
    sdk::StringOption("matmul_kernel", "\"auto\"",
                      "The MatMul kernel: \"tiled\" (tiles in local memory, for GPUs), \"blocked\" (register blocks, "
                      "no local memory, for CPU devices such as PoCL's), or \"auto\": blocked where the device's local "
                      "memory is ordinary memory.",
                      kMatMulKernels),
};

const weft_plugin_t* Describe() {
  static const weft_plugin_t plugin =
      sdk::DescribePlugin("opencl", WEFT_OPENCL_PLUGIN_VERSION,
                          "OpenCL 1.2 devices (GPUs, or CPUs through PoCL): device memory, command queues as streams",
                          &DeviceTable(), kOptions, Configure);
  return &plugin;
}

}  // namespace
}  // namespace weft::opencl

WEFT_SDK_DEFINE_PLUGIN(weft::opencl::Describe)
