// The rdma transport's data path on libibverbs: endpoints, reliable
// connected queue pairs and the ring protocol between them.
//
// NOT RUN ON REAL HARDWARE. This code compiles and is written to the verbs
// API, but the machines it was written on have no RDMA device (and no
// rxe/siw link), so nothing below the plugin's device probe has ever
// executed. Treat it as a first draft to be brought up on a machine with a
// device; the pure logic it is built on (frame.h, handshake.h,
// connection_state.h, registration_cache.h, address.h) is unit-tested.
//
// The code: device.h (the device, registered buffers), connection.h (a
// queue pair, its rings and the protocol below), endpoint.h (accepting and
// the progress thread) and rdma_transport.cc (options and entry points).
//
// The protocol, per connection:
//  - Each side has a receive ring of `ring_slots` slots of `slot_size`
//    bytes, registered for remote write, and a send staging area of the
//    same shape registered locally. The TCP side channel carries the
//    handshake (handshake.h): QP number, PSN, LID/GID, MTU and the ring's
//    address and rkey. After both QPs reach RTS each side writes one byte
//    'R' on the side channel and waits for the peer's, so that no RDMA
//    write reaches a QP that is not yet ready to receive.
//  - A message is a frame (frame.h) cut into chunks of at most one slot.
//    Chunk k goes to remote slot k % peer_slots with
//    IBV_WR_RDMA_WRITE_WITH_IMM, the immediate being the chunk's length.
//    Its gather list takes registered payload slices directly (found or
//    registered in the registration cache) and copies everything else
//    (prefix, header, small or unregistrable slices) into the staging slot:
//    the bounce buffer.
//  - The receiver reassembles chunks in completion order (FrameAssembler),
//    hands each message to on_message, and returns slots to the sender as
//    credits: a zero-length RDMA write with immediate, bit 31 set, the
//    low bits the number of slots freed. The sender never has more chunks
//    in flight than it holds credits.
//  - Orderly close: the closing side writes 'B' on the side channel and
//    closes it; the peer reports on_closed with no status. EOF without
//    'B', a completion with an error, or an asynchronous QP error is
//    reported through on_closed with a status naming it.
//
// One progress thread per endpoint polls the listening socket, the
// completion channel, the device's async event fd and every connection's
// side channel; all callbacks run on it. Accepting runs the handshake on
// that thread, bounded by `handshake_timeout_ms`.
#ifndef WEFT_PLUGINS_TRANSPORTS_RDMA_RDMA_TRANSPORT_H_
#define WEFT_PLUGINS_TRANSPORTS_RDMA_RDMA_TRANSPORT_H_

#include <cstdint>

#include "rdma/frame.h"
#include "weft/weft_transport.h"

namespace weft::rdma {

// The plugin's options ([transports.rdma]).
struct Options {
  FrameLimits limits;
  uint32_t ring_slots = 16;
  uint32_t slot_size = 1u << 20;
  uint64_t registration_cache_bytes = uint64_t{1} << 30;
  // Payload slices smaller than this are copied into the staging slot.
  uint64_t zero_copy_threshold = 64 * 1024;
  uint32_t gid_index = 0;
  int64_t handshake_timeout_ms = 10000;
};

void SetOptions(const Options& options);

// Throws weft::sdk::Error(WEFT_UNAVAILABLE) with the verbs reason when this
// machine has no usable RDMA device.
void ProbeDevices();

// The transport table's entry points; each runs inside weft::sdk::Guard.
weft_status_t EndpointOpen(const char* listen_address, const weft_transport_callbacks_t* callbacks,
                           weft_endpoint_t* out_endpoint);
void EndpointClose(weft_endpoint_t endpoint);
weft_status_t EndpointAddress(weft_endpoint_t endpoint, char* buffer, size_t size);
weft_status_t ConnectionOpen(weft_endpoint_t endpoint, const char* address, int64_t timeout_ms,
                             weft_connection_t* out_connection);
void ConnectionClose(weft_connection_t connection);
weft_status_t Send(weft_connection_t connection, const weft_message_t* message, weft_done_fn done, void* user);
weft_status_t MemoryRegister(weft_endpoint_t endpoint, void* address, uint64_t size, void** out_registration);
void MemoryUnregister(weft_endpoint_t endpoint, void* registration);

}  // namespace weft::rdma

#endif  // WEFT_PLUGINS_TRANSPORTS_RDMA_RDMA_TRANSPORT_H_
