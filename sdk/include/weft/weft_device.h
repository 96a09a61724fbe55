/* Weft plugin ABI: devices.
 *
 * A device plugin serves one device type ("CPU", "OPENCL", "CUDA") and any
 * number of devices of that type, named /device:<TYPE>:<ordinal>. Its table
 * covers what the runtime needs from a device and nothing more:
 *
 *  devices   count, open, close, properties
 *  memory    buffers (alloc, free, host pointer when host-visible)
 *  streams   ordered queues of work, and events that mark a point in one
 *  copies    asynchronous host<->device and device<->device copies
 *  kernels   a static list of (op, dtypes) implementations (weft_kernel.h)
 *
 * Threading: every function may be called from any thread, concurrently,
 * except that one stream is never used by two threads at once and a
 * handle is never used after it was closed or freed.
 *
 * Streams execute their work in order. A plugin whose device has no
 * asynchrony (the CPU) may run each operation immediately when it is
 * enqueued; its events are then ready as soon as they are recorded.
 */
#ifndef WEFT_DEVICE_H_
#define WEFT_DEVICE_H_

#include "weft/weft_abi.h"
#include "weft/weft_kernel.h"
#include "weft/weft_status.h"

WEFT_EXTERN_C_BEGIN

/* A free-form property of a device, shown by `weft devices`
 * ("isa" = "avx512f avx512_bf16 amx_bf16"). Static or device-lifetime data
 * of the plugin. */
typedef struct weft_property_t {
  size_t struct_size;
  const char* key;
  const char* value;
} weft_property_t;

#define WEFT_PROPERTY_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_property_t, value)

/* What a device is. The host sets struct_size and zeroes the struct; the
 * plugin fills in the members that fit. Strings and arrays are lent for as
 * long as the device is open. A member left 0 or NULL means unknown. */
typedef struct weft_device_properties_t {
  size_t struct_size;
  /* The hardware's own name ("AMD EPYC 9454", "pthread-AVX512 (PoCL)"). */
  const char* model;
  const char* vendor;
  /* Driver or runtime version ("OpenCL 1.2 PoCL 3.1", "CUDA 12.4"). */
  const char* driver;
  /* Memory this device can allocate, in bytes. */
  uint64_t memory_bytes;
  /* The alignment, in bytes, of every buffer buffer_alloc returns: a
   * power of two of at least 8. The host reads and writes host-visible
   * buffers in place as arrays of any dtype (8 bytes is the widest
   * element), and kernels for vector units want more (the CPU plugin
   * gives 64). A tensor's offset into its buffer is a multiple of its
   * element size. */
  uint64_t alignment;
  /* Whether buffers are addressable by the host (buffer_host_pointer
   * works). */
  weft_bool_t host_visible;
  /* Cores, compute units or multiprocessors. */
  int32_t compute_units;
  /* Copy bandwidths in GB/s, used by placement to weigh transfers. */
  double host_to_device_gbps;
  double device_to_host_gbps;
  double device_to_device_gbps;
  /* Further properties for people (ISA extensions, clock, NUMA node). */
  const weft_property_t* extra;
  size_t num_extra;
} weft_device_properties_t;

#define WEFT_DEVICE_PROPERTIES_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_device_properties_t, num_extra)

/* The table a device plugin provides (weft_plugin_t.device). */
typedef struct weft_device_plugin_t {
  size_t struct_size;
  /* The device type, upper case letters, digits and '_', used in device
   * names: "CPU" gives /device:CPU:0. Required; unique among loaded device
   * plugins. */
  const char* device_type;

  /* --- Devices ------------------------------------------------------- */

  /* How many devices this plugin can open. Returns UNAVAILABLE, with the
   * reason (e.g. the driver's error string), when it cannot serve on this
   * machine; the host then lists the plugin as unavailable and goes on.
   * Required. */
  weft_status_t (*device_count)(int32_t* out_count);
  /* Opens device |ordinal| (0 <= ordinal < count). Required. */
  weft_status_t (*device_open)(int32_t ordinal, weft_device_t* out_device);
  /* Closes a device opened by device_open, after every buffer, stream and
   * event of it was released. Required. */
  void (*device_close)(weft_device_t device);
  /* Fills in |out_properties| (see weft_device_properties_t). Required. */
  weft_status_t (*device_properties)(weft_device_t device, weft_device_properties_t* out_properties);

  /* --- Memory -------------------------------------------------------- */

  /* Allocates |size| bytes (size may be 0), aligned to the device's
   * alignment. RESOURCE_EXHAUSTED when memory is out. Required. */
  weft_status_t (*buffer_alloc)(weft_device_t device, uint64_t size, weft_buffer_t* out_buffer);
  /* Frees a buffer; pending stream work that uses it must have completed.
   * NULL |buffer| is ignored. Required. */
  void (*buffer_free)(weft_device_t device, weft_buffer_t buffer);
  /* The host address of |buffer|. Optional: NULL means buffers are not
   * host-addressable, and the host moves data with the copy functions.
   * Provided exactly when the device properties say host_visible. */
  void* (*buffer_host_pointer)(weft_device_t device, weft_buffer_t buffer);

  /* --- Streams and events -------------------------------------------- */

  /* Required, all of them. */
  weft_status_t (*stream_create)(weft_device_t device, weft_stream_t* out_stream);
  void (*stream_destroy)(weft_device_t device, weft_stream_t stream);
  /* Blocks until all work enqueued on |stream| so far has completed, and
   * returns the first error any of it hit. */
  weft_status_t (*stream_synchronize)(weft_device_t device, weft_stream_t stream);
  weft_status_t (*event_create)(weft_device_t device, weft_event_t* out_event);
  void (*event_destroy)(weft_device_t device, weft_event_t event);
  /* Marks the point in |stream| reached once all work enqueued so far
   * completes. */
  weft_status_t (*event_record)(weft_device_t device, weft_event_t event, weft_stream_t stream);
  /* Makes later work on |stream| wait for |event|, without blocking the
   * calling thread. */
  weft_status_t (*stream_wait_event)(weft_device_t device, weft_stream_t stream, weft_event_t event);
  /* Blocks the calling thread until |event| is ready. */
  weft_status_t (*event_synchronize)(weft_device_t device, weft_event_t event);
  /* Calls |done|(|user|, status) when |event| is ready, from any thread,
   * possibly before event_on_ready returns. |done| runs exactly once if and
   * only if this returns NULL. An event never recorded counts as ready. */
  weft_status_t (*event_on_ready)(weft_device_t device, weft_event_t event, weft_done_fn done, void* user);

  /* --- Copies (asynchronous, ordered on |stream|) --------------------- */

  /* Host memory at |src| must stay valid, and at |dst| untouched, until the
   * copy completes (record an event after it). All three are required. */
  weft_status_t (*copy_host_to_device)(weft_device_t device, weft_stream_t stream, const void* src, weft_buffer_t dst,
                                       uint64_t dst_offset, uint64_t size);
  weft_status_t (*copy_device_to_host)(weft_device_t device, weft_stream_t stream, weft_buffer_t src,
                                       uint64_t src_offset, void* dst, uint64_t size);
  /* Between two buffers of one device. */
  weft_status_t (*copy_device_to_device)(weft_device_t device, weft_stream_t stream, weft_buffer_t src,
                                         uint64_t src_offset, weft_buffer_t dst, uint64_t dst_offset, uint64_t size);
  /* Between two devices of this plugin (peer copy, ordered on
   * |src_stream| of |src_device|). Optional: NULL means the host copies
   * through host memory. May return UNIMPLEMENTED for a pair of devices
   * that cannot reach each other, with the same effect. */
  weft_status_t (*copy_peer)(weft_device_t src_device, weft_stream_t src_stream, weft_buffer_t src, uint64_t src_offset,
                             weft_device_t dst_device, weft_buffer_t dst, uint64_t dst_offset, uint64_t size);
  /* Sets |size| bytes of |buffer| from |offset| to |value|. Optional: NULL
   * means the host writes zeros with copy_host_to_device. */
  weft_status_t (*buffer_memset)(weft_device_t device, weft_stream_t stream, weft_buffer_t buffer, uint64_t offset,
                                 uint8_t value, uint64_t size);

  /* --- Kernels ------------------------------------------------------- */

  /* The kernels of this device type (see weft_kernel.h), walked with the
   * stride of kernels[0].struct_size. NULL when num_kernels is 0 (a plugin
   * that only moves memory). */
  const weft_kernel_def_t* kernels;
  size_t num_kernels;

  /* --- Native handles (since 1.2) ------------------------------------ */

  /* The device address of |buffer| (a CUDA device pointer) and the native
   * stream behind |stream| (a cudaStream_t), for a collectives plugin of
   * this device type (NCCL) that reads and writes device memory directly.
   * Optional, both or neither: NULL means collectives on this device's
   * tensors are refused, naming the device. */
  void* (*buffer_device_pointer)(weft_device_t device, weft_buffer_t buffer);
  void* (*stream_native)(weft_device_t device, weft_stream_t stream);
} weft_device_plugin_t;

#define WEFT_DEVICE_PLUGIN_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_device_plugin_t, num_kernels)

WEFT_EXTERN_C_END

#endif /* WEFT_DEVICE_H_ */
