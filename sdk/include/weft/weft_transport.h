/* Weft plugin ABI: transports.
 *
 * A transport plugin moves opaque messages between processes: TCP (Boost
 * Asio), ZeroMQ, RDMA. It knows nothing of graphs or tensors. Framing of
 * control messages, RPC, authentication, deadlines and retries live in the
 * core (core/distributed), so a transport stays small:
 *
 *  endpoint    a local communication point; listens when given an address
 *  connection  a bidirectional, ordered, reliable link to one peer
 *  message     a small header plus payload slices, sent without copying
 *              the payload where the transport can (scatter/gather)
 *
 * Addresses are URLs whose scheme names the transport:
 * "tcp://10.0.0.5:7070", "zmq+tcp://host:7071", "rdma://mlx5_0/10.0.0.5:7072".
 *
 * Callbacks may run on any thread of the transport, never concurrently for
 * one connection; they must not block for long.
 */
#ifndef WEFT_TRANSPORT_H_
#define WEFT_TRANSPORT_H_

#include "weft/weft_abi.h"
#include "weft/weft_status.h"

WEFT_EXTERN_C_BEGIN

typedef struct weft_endpoint_s* weft_endpoint_t;
typedef struct weft_connection_s* weft_connection_t;

/* A message to send: a header and |num_slices| payload slices, sent as one
 * message and received as header plus one contiguous payload. Set up by the
 * sender; everything it points to must stay valid until the send's done
 * callback runs. A pointer may be NULL only when its size or count is 0. */
typedef struct weft_message_t {
  size_t struct_size;
  const void* header;
  uint64_t header_size;
  const void* const* slice_data;
  const uint64_t* slice_sizes;
  size_t num_slices;
} weft_message_t;

#define WEFT_MESSAGE_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_message_t, num_slices)

/* A message that arrived, handed to on_message. Provided by the
 * transport; lent until on_message returns unless retained. */
typedef struct weft_received_t {
  size_t struct_size;
  weft_connection_t connection;
  /* NULL exactly when the size is 0. */
  const void* header;
  uint64_t header_size;
  const void* payload;
  uint64_t payload_size;
  /* Keeps |header| and |payload| valid after on_message returns, until
   * |release| is called with the token it returns. Lets the host hand a
   * received tensor to the runtime without a copy. Optional: NULL means the
   * data lives only as long as the callback, and the host copies what it
   * keeps. */
  void* (*retain)(const struct weft_received_t* message);
  /* Required when retain is provided, NULL otherwise. */
  void (*release)(void* token);
} weft_received_t;

#define WEFT_RECEIVED_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_received_t, release)

/* What the host wants to hear from an endpoint. Provided by the host to
 * endpoint_open; valid until endpoint_close returns. */
typedef struct weft_transport_callbacks_t {
  size_t struct_size;
  void* user;
  /* A peer connected to a listening endpoint. |peer| is its address, lent
   * for the call. The host owns |connection| from here on and releases it
   * with connection_close. Required for an endpoint that listens. */
  void (*on_accept)(void* user, weft_connection_t connection, const char* peer);
  /* A message arrived (see weft_received_t). Required. */
  void (*on_message)(void* user, const weft_received_t* message);
  /* The peer or the network ended the connection; |status| (owned by the
   * callback) says why, NULL for an orderly close. No message for it
   * follows, and sends fail. The handle stays valid: the host still calls
   * connection_close for it. Required. */
  void (*on_closed)(void* user, weft_connection_t connection, weft_status_t status);
} weft_transport_callbacks_t;

#define WEFT_TRANSPORT_CALLBACKS_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_transport_callbacks_t, on_closed)

/* The table a transport plugin provides (weft_plugin_t.transport). */
typedef struct weft_transport_plugin_t {
  size_t struct_size;
  /* The URL scheme this transport serves ("tcp"). Required; unique among
   * loaded transports. */
  const char* scheme;
  /* Opens an endpoint that listens on |listen_address| (binding only that
   * interface), or one that only connects out when |listen_address| is
   * NULL. Required. */
  weft_status_t (*endpoint_open)(const char* listen_address, const weft_transport_callbacks_t* callbacks,
                                 weft_endpoint_t* out_endpoint);
  /* Closes the endpoint and every connection of it still open; no
   * callback runs after it returns. Connections already handed to the host
   * must then still be released with connection_close. Required. */
  void (*endpoint_close)(weft_endpoint_t endpoint);
  /* The address the endpoint actually listens on (the port chosen for
   * ":0"), written NUL-terminated into |buffer| of |size| bytes.
   * RESOURCE_EXHAUSTED when it does not fit. Required. */
  weft_status_t (*endpoint_address)(weft_endpoint_t endpoint, char* buffer, size_t size);
  /* Connects to |address|, waiting at most |timeout_ms| milliseconds
   * (DEADLINE_EXCEEDED; UNAVAILABLE when refused). The caller owns the
   * connection. Required. */
  weft_status_t (*connection_open)(weft_endpoint_t endpoint, const char* address, int64_t timeout_ms,
                                   weft_connection_t* out_connection);
  /* Releases a connection, closing it if it is still open. No callback
   * for it runs after this returns; on_closed is not called for a close the
   * host asked for. Required. */
  void (*connection_close)(weft_connection_t connection);
  /* Queues |message| on |connection|; messages arrive in order. |done|
   * runs once the message's memory may be reused, or the send failed; it
   * runs exactly once if and only if this returns NULL, possibly before
   * send returns. Required. */
  weft_status_t (*send)(weft_connection_t connection, const weft_message_t* message, weft_done_fn done, void* user);
  /* Registers host memory for zero-copy transfers (RDMA). Optional: NULL
   * means the transport needs no registration. */
  weft_status_t (*memory_register)(weft_endpoint_t endpoint, void* address, uint64_t size, void** out_registration);
  /* Releases a registration. NULL exactly when memory_register is NULL. */
  void (*memory_unregister)(weft_endpoint_t endpoint, void* registration);
  /* ABI 1.3. Sets the largest message |connection| accepts from now on, in
   * bytes (header plus payload). A larger one the peer announces is refused
   * before any memory is allocated for it: the connection closes, with
   * on_closed's status naming both sizes. 0 restores the transport's own
   * limit; a limit above the transport's own is capped to it. The host
   * calls it from on_accept, to hold a peer that has not authenticated yet
   * to the few bytes of the handshake, and again once it has. A transport
   * that provides it must therefore read nothing from an accepted
   * connection before on_accept returns. Optional: NULL means the transport
   * applies only its own limit (the host still refuses an oversized
   * handshake, but only after the transport received it). */
  weft_status_t (*connection_set_max_message)(weft_connection_t connection, uint64_t max_bytes);
} weft_transport_plugin_t;

#define WEFT_TRANSPORT_PLUGIN_SIZE_V1_0 WEFT_STRUCT_SIZE_THROUGH(weft_transport_plugin_t, memory_unregister)
#define WEFT_TRANSPORT_PLUGIN_SIZE_V1_3 WEFT_STRUCT_SIZE_THROUGH(weft_transport_plugin_t, connection_set_max_message)

WEFT_EXTERN_C_END

#endif /* WEFT_TRANSPORT_H_ */
