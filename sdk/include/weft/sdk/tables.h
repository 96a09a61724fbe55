// Weft SDK for C++ plugins: a plugin's table of entry points (a device's
// weft_device_plugin_t, a transport's weft_transport_plugin_t) from a
// struct of static member functions, each named after the table's member
// it fills: DeviceCount for device_count, CopyHostToDevice for
// copy_host_to_device, EndpointOpen for endpoint_open, ... (the CPU,
// OpenCL, CUDA and HIP devices and the tcp and zmq transports use it).
//
// A device that queues its own work writes its entry points so, and
// DeviceTableOf fills its table; DeviceObjects<D> supplies the four that
// only make and destroy objects of the device class D, and the casts from
// the ABI's handles (a device whose every operation finishes before
// returning wants weft/sdk/device.h instead). From the CPU device
// (plugins/devices/cpu/cpu_plugin.cc):
//
//   struct Entry : sdk::DeviceObjects<CpuDevice> {
//     static weft_status_t DeviceCount(int32_t* out_count) {
//       return sdk::Guard([&] { *out_count = g_device_count; });
//     }
//     ...  // DeviceOpen, the streams and events, the copies, BufferMemset
//   };
//
//   const weft_device_plugin_t& DeviceTable() {
//     static const KernelRegistry kernels = sdk::MakeRegistry<KernelRegistry>(
//         ...  // the functions that register each kernel family
//     static const weft_device_plugin_t table = sdk::DeviceTableOf<Entry>("CPU", kernels);
//     return table;
//   }
//
// A transport does the same with TransportTableOf; from the zmq transport
// (plugins/transports/zmq/zmq_plugin.cc):
//
//   struct Entry {
//     static weft_status_t EndpointOpen(const char* listen_address, const weft_transport_callbacks_t* callbacks,
//                                       weft_endpoint_t* out_endpoint) {
//       ...
//     }
//     ...  // EndpointClose, EndpointAddress, ConnectionOpen, ConnectionClose, Send
//   };
//   static const weft_transport_plugin_t table = sdk::TransportTableOf<Entry>("zmq");
//
// Optional members are set when Entry has them and stay NULL otherwise: a
// device's BufferHostPointer (memory the host can address) and CopyPeer
// (copies between devices of the plugin); a transport's MemoryRegister with
// MemoryUnregister (sends from registered memory) and
// ConnectionSetMaxMessage (ABI 1.3).
#ifndef WEFT_SDK_TABLES_H_
#define WEFT_SDK_TABLES_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "weft/sdk/guard.h"
#include "weft/sdk/status.h"
#include "weft/sdk/struct.h"
#include "weft/weft_device.h"
#include "weft/weft_transport.h"

namespace weft::sdk {

// device_close, device_properties, buffer_alloc and buffer_free for a
// device class D: its destructor, D::Properties(out), D::Allocate(size),
// which returns a pointer to the plugin's buffer type, and D::Free(buffer).
template <class D>
struct DeviceObjects {
  using Buffer = std::remove_pointer_t<decltype(std::declval<D&>().Allocate(uint64_t{}))>;

  static D* AsDevice(weft_device_t device) { return reinterpret_cast<D*>(device); }
  static Buffer* AsBuffer(weft_buffer_t buffer) { return reinterpret_cast<Buffer*>(buffer); }

  static void DeviceClose(weft_device_t device) {
    GuardVoid("device_close", [&] { delete AsDevice(device); });
  }
  static weft_status_t DeviceProperties(weft_device_t device, weft_device_properties_t* out) {
    return Guard([&] { AsDevice(device)->Properties(out); });
  }
  static weft_status_t BufferAlloc(weft_device_t device, uint64_t size, weft_buffer_t* out_buffer) {
    return Guard([&] { *out_buffer = reinterpret_cast<weft_buffer_t>(AsDevice(device)->Allocate(size)); });
  }
  static void BufferFree(weft_device_t device, weft_buffer_t buffer) {
    GuardVoid("buffer_free", [&] { AsDevice(device)->Free(AsBuffer(buffer)); });
  }
};

// Throws unless bytes [offset, offset + size) lie inside |buffer| (the
// plugin's buffer object, whose |size| is its byte count); |what| names the
// entry point, and its operand where it has two.
template <class B>
void CheckBufferRange(const B* buffer, uint64_t offset, uint64_t size, const char* what) {
  if (buffer == nullptr) throw Error(WEFT_INVALID_ARGUMENT, std::string(what) + ": NULL buffer");
  if (offset > buffer->size || size > buffer->size - offset) {
    throw Error(WEFT_OUT_OF_RANGE, std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                                       std::to_string(offset + size) + ") outside a buffer of " +
                                       std::to_string(buffer->size) + " bytes");
  }
}

namespace internal {

// Whether Op<Entry> names something: whether Entry has an optional member.
template <template <class> class Op, class Entry, class = void>
struct Has : std::false_type {};
template <template <class> class Op, class Entry>
struct Has<Op, Entry, std::void_t<Op<Entry>>> : std::true_type {};

template <class Entry>
using BufferHostPointerOf = decltype(&Entry::BufferHostPointer);
template <class Entry>
using CopyPeerOf = decltype(&Entry::CopyPeer);
template <class Entry>
using MemoryRegisterOf = decltype(&Entry::MemoryRegister);
template <class Entry>
using SetMaxMessageOf = decltype(&Entry::ConnectionSetMaxMessage);

}  // namespace internal

// The kernels of |families| (functions that each register one family),
// registered in order; |query|, when given, is set first (set_query), so
// it answers for every kernel without a Query of its own.
template <class Registry>
Registry MakeRegistry(std::initializer_list<void (*)(Registry&)> families, typename Registry::QueryFn query = nullptr) {
  Registry r;
  if (query != nullptr) r.set_query(query);
  for (void (*family)(Registry&) : families) family(r);
  return r;
}

// The table of a device |device_type| whose entry points are Entry's and
// whose kernels are |kernels| (a KernelRegistry, which must outlive the
// table).
template <class Entry, class Registry>
weft_device_plugin_t DeviceTableOf(const char* device_type, const Registry& kernels) {
  auto t = Make<weft_device_plugin_t>();
  t.device_type = device_type;
  t.kernels = kernels.data();
  t.num_kernels = kernels.size();
  t.device_count = Entry::DeviceCount;
  t.device_open = Entry::DeviceOpen;
  t.device_close = Entry::DeviceClose;
  t.device_properties = Entry::DeviceProperties;
  t.buffer_alloc = Entry::BufferAlloc;
  t.buffer_free = Entry::BufferFree;
  t.stream_create = Entry::StreamCreate;
  t.stream_destroy = Entry::StreamDestroy;
  t.stream_synchronize = Entry::StreamSynchronize;
  t.event_create = Entry::EventCreate;
  t.event_destroy = Entry::EventDestroy;
  t.event_record = Entry::EventRecord;
  t.stream_wait_event = Entry::StreamWaitEvent;
  t.event_synchronize = Entry::EventSynchronize;
  t.event_on_ready = Entry::EventOnReady;
  t.copy_host_to_device = Entry::CopyHostToDevice;
  t.copy_device_to_host = Entry::CopyDeviceToHost;
  t.copy_device_to_device = Entry::CopyDeviceToDevice;
  t.buffer_memset = Entry::BufferMemset;
  if constexpr (internal::Has<internal::BufferHostPointerOf, Entry>::value) {
    t.buffer_host_pointer = Entry::BufferHostPointer;
  }
  if constexpr (internal::Has<internal::CopyPeerOf, Entry>::value) t.copy_peer = Entry::CopyPeer;
  return t;
}

// The table of a transport for URLs of |scheme| whose entry points are
// Entry's.
template <class Entry>
weft_transport_plugin_t TransportTableOf(const char* scheme) {
  auto t = Make<weft_transport_plugin_t>();
  t.scheme = scheme;
  if constexpr (internal::Has<internal::MemoryRegisterOf, Entry>::value) {
    t.memory_register = Entry::MemoryRegister;
    t.memory_unregister = Entry::MemoryUnregister;
  }
  if constexpr (internal::Has<internal::SetMaxMessageOf, Entry>::value) {
    t.connection_set_max_message = Entry::ConnectionSetMaxMessage;
  }
  t.endpoint_open = Entry::EndpointOpen;
  t.endpoint_close = Entry::EndpointClose;
  t.endpoint_address = Entry::EndpointAddress;
  t.connection_open = Entry::ConnectionOpen;
  t.connection_close = Entry::ConnectionClose;
  t.send = Entry::Send;
  return t;
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_TABLES_H_
