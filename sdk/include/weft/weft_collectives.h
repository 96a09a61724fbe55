/* Weft plugin ABI: collectives (since 1.2).
 *
 * A collectives plugin runs AllReduce, AllGather and Broadcast among the
 * ranks of a communicator, for buffers of the device types it names (Gloo
 * for host memory, NCCL for CUDA memory). The host
 *  - creates communicators: it knows the ranks from the cluster and lends a
 *    key-value store, served by the cluster itself, for the rendezvous;
 *  - guarantees that every rank issues the same operations, with the same
 *    tags, in the same order, one communicator at a time;
 *  - maps a failure to the task that caused it (the plugin's message says
 *    what the backend saw; the host adds which peer does not answer).
 *
 * The rules of weft/weft_plugin.h apply (struct_size, NULL members,
 * ownership, no exceptions across the boundary).
 */
#ifndef WEFT_COLLECTIVES_H_
#define WEFT_COLLECTIVES_H_

#include "weft/weft_abi.h"
#include "weft/weft_status.h"
#include "weft/weft_tensor.h"

WEFT_EXTERN_C_BEGIN

typedef struct weft_communicator_s* weft_communicator_t;

/* A rendezvous store: keys are set once and never deleted. Provided by the
 * host, lent for the duration of comm_create only; safe to call from any
 * thread. */
typedef struct weft_kv_store_t {
  size_t struct_size;
  void* user;
  /* Stores |size| bytes under |key| (a later set of one key replaces it). */
  weft_status_t (*set)(void* user, const char* key, const void* data, size_t size);
  /* Waits up to |timeout_ms| for |key| to exist, then returns its value in
   * |*out_data| (allocated with the host's host_alloc; the caller frees it
   * with host_free; NULL when |*out_size| is 0). DEADLINE_EXCEEDED names
   * the key when it did not appear in time. */
  weft_status_t (*get)(void* user, const char* key, int64_t timeout_ms, void** out_data, size_t* out_size);
  /* Waits up to |timeout_ms| for all of |keys| to exist. */
  weft_status_t (*wait)(void* user, const char* const* keys, size_t num_keys, int64_t timeout_ms);
} weft_kv_store_t;

#define WEFT_KV_STORE_SIZE_V1_2 WEFT_STRUCT_SIZE_THROUGH(weft_kv_store_t, wait)

/* Who the ranks are. Provided by the host to comm_create, lent for the
 * call (the plugin copies what it keeps). */
typedef struct weft_comm_args_t {
  size_t struct_size;
  int32_t rank;
  int32_t size;
  /* |size| entries: each rank's task ("/job:worker/task:1"), for messages. */
  const char* const* rank_names;
  /* |size| entries: the host each rank's task listens on; a rank binds its
   * own links to rank_hosts[rank]. */
  const char* const* rank_hosts;
  /* Unique to this communicator (keys are never deleted): prefix every
   * store key with it. */
  const char* key_prefix;
  const weft_kv_store_t* store;
  /* The deadline of the rendezvous, and of an operation whose own timeout
   * is 0. */
  int64_t timeout_ms;
  /* The memory the operations see: "CPU" (host memory) or a device type
   * the plugin lists ("CUDA"), and that device's ordinal. */
  const char* device_type;
  int32_t device_ordinal;
} weft_comm_args_t;

#define WEFT_COMM_ARGS_SIZE_V1_2 WEFT_STRUCT_SIZE_THROUGH(weft_comm_args_t, device_ordinal)

typedef int32_t weft_reduction_t;
enum { WEFT_REDUCE_SUM = 1, WEFT_REDUCE_PROD = 2, WEFT_REDUCE_MIN = 3, WEFT_REDUCE_MAX = 4 };

/* A buffer an operation reads or writes. Provided by the host and lent
 * for the call only (a plugin that works after returning copies the
 * struct); the memory |data| points to stays valid until the operation's
 * done runs. */
typedef struct weft_comm_buffer_t {
  size_t struct_size;
  weft_dtype_t dtype;
  /* Elements. */
  uint64_t count;
  /* A host address for "CPU"; a device address otherwise. */
  void* data;
} weft_comm_buffer_t;

#define WEFT_COMM_BUFFER_SIZE_V1_2 WEFT_STRUCT_SIZE_THROUGH(weft_comm_buffer_t, data)

/* How to run one operation. Provided by the host; lent for the call. */
typedef struct weft_comm_op_t {
  size_t struct_size;
  /* Equal on every rank for one operation; distinct among operations in
   * flight on one communicator. */
  uint32_t tag;
  /* Device memory: the device's native stream (cudaStream_t) the
   * operation is ordered on. NULL for host memory. */
  void* stream;
  /* Milliseconds; 0 means the communicator's timeout_ms. */
  int64_t timeout_ms;
} weft_comm_op_t;

#define WEFT_COMM_OP_SIZE_V1_2 WEFT_STRUCT_SIZE_THROUGH(weft_comm_op_t, timeout_ms)

/* The table a collectives plugin provides (weft_plugin_t.collectives). */
typedef struct weft_collectives_plugin_t {
  size_t struct_size;
  /* The name [cluster] collectives selects ("gloo", "nccl"). Required;
   * unique among loaded collectives plugins, lower_snake_case. */
  const char* backend;
  /* The memory the plugin serves: "CPU" for host memory, device types
   * ("CUDA") for device memory. Required, at least one. */
  const char* const* device_types;
  size_t num_device_types;
  /* The element types it reduces and moves. Required, at least one. */
  const weft_dtype_t* dtypes;
  size_t num_dtypes;

  /* Joins the communicator described by |args|: blocks until every rank
   * joined (through args->store) or args->timeout_ms passed. The caller
   * owns |*out_comm| and releases it with comm_destroy. Required. */
  weft_status_t (*comm_create)(const weft_comm_args_t* args, weft_communicator_t* out_comm);
  /* Waits for the communicator's operations to finish (or fail), then
   * releases it. Required. */
  void (*comm_destroy)(weft_communicator_t comm);
  /* Fails the operations in flight and every later one with |reason|, and
   * closes the communicator's links so that the peers fail at once instead
   * of waiting out their timeout. Safe from any thread. Optional: NULL
   * means the host can only wait for the timeout. */
  void (*comm_abort)(weft_communicator_t comm, const char* reason);

  /* The operations. Each returns NULL and then calls |done| exactly once
   * (from any thread, possibly before returning), or returns an error and
   * never calls |done|. For host memory |done| means complete; for device
   * memory with a stream it means enqueued in the stream's order. An
   * operation that fails leaves the communicator failed: every later one
   * fails too. Required, all three. */
  /* |out| = reduction over the ranks of |in|, elementwise; in->data ==
   * out->data is in place. Counts and dtypes are equal. */
  weft_status_t (*all_reduce)(weft_communicator_t comm, const weft_comm_op_t* op, const weft_comm_buffer_t* in,
                              const weft_comm_buffer_t* out, weft_reduction_t reduction, weft_done_fn done, void* user);
  /* |out| = the ranks' |in| concatenated in rank order; out->count is
   * in->count * size. */
  weft_status_t (*all_gather)(weft_communicator_t comm, const weft_comm_op_t* op, const weft_comm_buffer_t* in,
                              const weft_comm_buffer_t* out, weft_done_fn done, void* user);
  /* Every rank's |buffer| = rank |root|'s |buffer|. */
  weft_status_t (*broadcast)(weft_communicator_t comm, const weft_comm_op_t* op, const weft_comm_buffer_t* buffer,
                             int32_t root, weft_done_fn done, void* user);
} weft_collectives_plugin_t;

#define WEFT_COLLECTIVES_PLUGIN_SIZE_V1_2 WEFT_STRUCT_SIZE_THROUGH(weft_collectives_plugin_t, broadcast)

WEFT_EXTERN_C_END

#endif /* WEFT_COLLECTIVES_H_ */
