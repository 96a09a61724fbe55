/* Weft plugin ABI: kernels.
 *
 * A kernel is a device's implementation of one op for one combination of
 * dtypes. A device plugin lists its kernels statically (weft_kernel_def_t,
 * in weft_device_plugin_t.kernels); the host picks one per node, creates it
 * once when a graph is prepared, and calls `compute` once per step.
 *
 * A kernel sees its node only through the two opaque handles below and the
 * host's kernel services table (weft_kernel_api_t, reached as
 * weft_host_t.kernel):
 *
 *  weft_kernel_init_t     at creation: the node's name, attrs, dtypes and
 *                         (when known) input shapes;
 *  weft_kernel_context_t  during one compute: inputs, outputs, temporaries,
 *                         the stream, cancellation.
 *
 * A minimal elementwise kernel for a device whose memory is host-visible
 * (weft_device_properties_t.host_visible, as the CPU's is), where
 * weft_tensor_t.data is the address of the first element. On memory the
 * host cannot address, |data| is NULL: a kernel works on |buffer| (the
 * plugin's own handle, from its buffer_alloc) at byte |offset| instead, on
 * its device's stream.
 *
 *   static const weft_host_t* g_host;  // saved by weft_plugin_init_v1
 *
 *   static weft_status_t neg_f32(void* state, weft_kernel_context_t* ctx) {
 *     const weft_kernel_api_t* k = g_host->kernel;
 *     weft_tensor_t x = {.struct_size = sizeof x};
 *     weft_tensor_t y = {.struct_size = sizeof y};
 *     weft_status_t s = k->input(ctx, 0, &x);
 *     (void)state;
 *     if (s) return s;
 *     s = k->allocate_output(ctx, 0, x.rank, x.dims, &y);
 *     if (s) return s;
 *     for (int64_t i = 0; i < x.num_elements; ++i)
 *       ((float*)y.data)[i] = -((const float*)x.data)[i];
 *     return NULL;
 *   }
 */
#ifndef WEFT_KERNEL_H_
#define WEFT_KERNEL_H_

#include "weft/weft_abi.h"
#include "weft/weft_status.h"
#include "weft/weft_tensor.h"

WEFT_EXTERN_C_BEGIN

typedef struct weft_kernel_init_s weft_kernel_init_t;
typedef struct weft_kernel_context_s weft_kernel_context_t;

/* weft_kernel_def_t.flags; a host ignores bits it does not know. */
enum {
  /* The kernel completes through a callback (compute_async), e.g. a
   * receive or a queue dequeue. */
  WEFT_KERNEL_ASYNC = 1u << 0,
  /* The kernel is cheap (a few hundred nanoseconds): the executor runs it
   * inline on the thread that made it ready instead of scheduling it. */
  WEFT_KERNEL_INLINE = 1u << 1
};

/* The answer of a shape-aware query (weft_kernel_def_t.query). The host
 * zeroes it and sets struct_size; zero means "supported, cost unknown", and
 * the kernel changes what it knows better. */
typedef struct weft_kernel_query_t {
  size_t struct_size;
  /* Nonzero when this kernel cannot run the node as shaped. */
  weft_bool_t unsupported;
  /* When unsupported: why, for `weft place --explain`. Static string,
   * lent; NULL gives no reason. */
  const char* reason;
  /* An estimate of the run time in nanoseconds, used to break placement
   * ties. 0 (the default) means unknown. */
  double cost_ns;
} weft_kernel_query_t;

#define WEFT_KERNEL_QUERY_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_kernel_query_t, cost_ns)

/* One kernel registration: an op, on this plugin's device type, for one
 * binding of the op's type attrs. Static data of the plugin. */
typedef struct weft_kernel_def_t {
  size_t struct_size;
  /* The op it implements, as registered in the core ("MatMul"). Required,
   * non-empty. */
  const char* op;
  /* The type attrs this kernel is for: constraint_attrs[i] must equal
   * constraint_dtypes[i] ("T" = WEFT_DTYPE_F32). Both NULL when
   * num_constraints is 0 (the kernel takes every binding). */
  const char* const* constraint_attrs;
  const weft_dtype_t* constraint_dtypes;
  size_t num_constraints;
  /* Names of input and output args that live in host memory even on a
   * device with its own memory (a Reshape's shape, a Slice's begin). NULL
   * when num_host_memory_args is 0. */
  const char* const* host_memory_args;
  size_t num_host_memory_args;
  /* WEFT_KERNEL_* flags. */
  uint32_t flags;
  /* Prepares per-node state (parsed attrs, a primitive cache) and stores
   * it in |*out_state|. Called once per node, possibly from any thread.
   * Optional: NULL means the kernel needs no state, and compute receives
   * NULL. An error here fails graph preparation and names the node. */
  weft_status_t (*create)(weft_device_t device, const weft_kernel_init_t* init, void** out_state);
  /* Releases what create made. Optional: NULL when create is NULL or the
   * state needs no release. */
  void (*destroy)(void* state);
  /* Runs the node once, synchronously (or by enqueueing work on the
   * context's stream). Must be safe to call concurrently with itself for
   * the same |state| from different steps. Required unless the
   * WEFT_KERNEL_ASYNC flag is set, NULL otherwise. */
  weft_status_t (*compute)(void* state, weft_kernel_context_t* ctx);
  /* Runs the node and calls |done| exactly once, from any thread, when the
   * outputs are set or an error occurred. |ctx| stays valid until |done|
   * is called. Required with WEFT_KERNEL_ASYNC, NULL otherwise. */
  void (*compute_async)(void* state, weft_kernel_context_t* ctx, weft_done_fn done, void* done_user);
  /* Whether the kernel can run the node on |device| with the shapes known
   * at placement time, and at what cost. Optional: NULL means "always
   * supported, cost unknown". */
  weft_status_t (*query)(weft_device_t device, const weft_kernel_init_t* init, weft_kernel_query_t* out_query);
} weft_kernel_def_t;

#define WEFT_KERNEL_DEF_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_kernel_def_t, query)

/* The host's kernel services, reached as weft_host_t.kernel. Every member
 * is provided by the host (none is NULL in 1.0). Getters that return a
 * status give NOT_FOUND for a missing attr or index and INVALID_ARGUMENT
 * for a value of another type, with the node's name in the message. */
typedef struct weft_kernel_api_t {
  size_t struct_size;

  /* --- At creation (weft_kernel_init_t) --------------------------------*/

  /* The node's name ("dense1/matmul") and op ("MatMul"). Lent. */
  const char* (*init_node_name)(const weft_kernel_init_t* init);
  const char* (*init_op)(const weft_kernel_init_t* init);
  int32_t (*init_num_inputs)(const weft_kernel_init_t* init);
  int32_t (*init_num_outputs)(const weft_kernel_init_t* init);
  weft_dtype_t (*init_input_dtype)(const weft_kernel_init_t* init, int32_t index);
  weft_dtype_t (*init_output_dtype)(const weft_kernel_init_t* init, int32_t index);
  /* The statically known shape of input |index|: |*out_rank| is -1 when
   * the rank is unknown, and a dimension is -1 when that size is unknown. */
  weft_status_t (*init_input_shape)(const weft_kernel_init_t* init, int32_t index, int32_t* out_rank,
                                    const int64_t** out_dims);

  weft_status_t (*attr_int)(const weft_kernel_init_t* init, const char* name, int64_t* out_value);
  weft_status_t (*attr_float)(const weft_kernel_init_t* init, const char* name, double* out_value);
  weft_status_t (*attr_bool)(const weft_kernel_init_t* init, const char* name, weft_bool_t* out_value);
  weft_status_t (*attr_dtype)(const weft_kernel_init_t* init, const char* name, weft_dtype_t* out_value);
  /* |*out_data| is not NUL-terminated; use |*out_size|. */
  weft_status_t (*attr_string)(const weft_kernel_init_t* init, const char* name, const char** out_data,
                               size_t* out_size);
  /* A shape attr; rank -1 for an unknown rank, -1 dims for unknown sizes. */
  weft_status_t (*attr_shape)(const weft_kernel_init_t* init, const char* name, int32_t* out_rank,
                              const int64_t** out_dims);
  weft_status_t (*attr_int_list)(const weft_kernel_init_t* init, const char* name, const int64_t** out_values,
                                 size_t* out_count);
  weft_status_t (*attr_float_list)(const weft_kernel_init_t* init, const char* name, const double** out_values,
                                   size_t* out_count);
  /* A tensor attr (a Const's value), in host memory. */
  weft_status_t (*attr_tensor)(const weft_kernel_init_t* init, const char* name, weft_tensor_t* out_tensor);

  /* --- During compute (weft_kernel_context_t) ------------------------- */

  const char* (*node_name)(const weft_kernel_context_t* ctx);
  int32_t (*num_inputs)(const weft_kernel_context_t* ctx);
  int32_t (*num_outputs)(const weft_kernel_context_t* ctx);
  /* Input |index|, lent for the duration of the compute and of the stream
   * work it enqueues (see allocate_temp). */
  weft_status_t (*input)(weft_kernel_context_t* ctx, int32_t index, weft_tensor_t* out_tensor);
  /* Allocates output |index| with the dtype the op's signature gives it and
   * the shape |dims| (|rank| entries), on the kernel's device (or in host
   * memory for a host-memory arg). RESOURCE_EXHAUSTED when memory is out. */
  weft_status_t (*allocate_output)(weft_kernel_context_t* ctx, int32_t index, int32_t rank, const int64_t* dims,
                                   weft_tensor_t* out_tensor);
  /* Makes output |output_index| share input |input_index|'s buffer, with
   * the input's shape (Identity, Reshape in place). */
  weft_status_t (*forward_input)(weft_kernel_context_t* ctx, int32_t input_index, int32_t output_index);
  /* Like forward_input but with a new shape of the same element count. */
  weft_status_t (*forward_input_reshaped)(weft_kernel_context_t* ctx, int32_t input_index, int32_t output_index,
                                          int32_t rank, const int64_t* dims);
  /* Scratch memory on the kernel's device. The host releases it, and
   * stops holding the inputs, once the compute has returned (for an async
   * kernel: called done) and all work it enqueued on its stream so far has
   * completed; a kernel that only enqueues work may therefore use both
   * from that work. */
  weft_status_t (*allocate_temp)(weft_kernel_context_t* ctx, weft_dtype_t dtype, int32_t rank, const int64_t* dims,
                                 weft_tensor_t* out_tensor);
  /* The stream the kernel's work goes on; the host orders streams with
   * events. */
  weft_stream_t (*stream)(const weft_kernel_context_t* ctx);
  /* The id of the step this compute belongs to; unique per session. */
  int64_t (*step_id)(const weft_kernel_context_t* ctx);
  /* Whether the step has been cancelled (another node failed); a long
   * kernel may poll this and return WEFT_CANCELLED. */
  weft_bool_t (*is_cancelled)(const weft_kernel_context_t* ctx);

  /* Locks the variable that resource input |index| refers to and lends its
   * value in |out_value|: shared (exclusive = 0) to read it, or exclusive
   * (exclusive = 1) to update it in place. The lock is held until the
   * compute returns (an async kernel: until it calls done); locking the
   * same variable twice in one compute is an error. FAILED_PRECONDITION,
   * naming the variable, when it was never assigned. */
  weft_status_t (*variable_lock)(weft_kernel_context_t* ctx, int32_t index, weft_bool_t exclusive,
                                 weft_tensor_t* out_value);
  /* The name of the variable resource input |index| refers to
   * ("dense1/kernel"), for messages; lent for the compute. */
  const char* (*variable_name)(const weft_kernel_context_t* ctx, int32_t index);
} weft_kernel_api_t;

#define WEFT_KERNEL_API_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_kernel_api_t, variable_name)

WEFT_EXTERN_C_END

#endif /* WEFT_KERNEL_H_ */
