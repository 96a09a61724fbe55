// The zmq transport's wire protocol: what the frames of one ZeroMQ
// multipart message mean.
//
// ZeroMQ has no per-peer connection events, so the transport makes its own
// connections on top of it. The listening endpoint binds one ROUTER; every
// connection_open makes its own DEALER (one TCP stream per connection) and
// opens with a handshake:
//
//   DEALER -> ROUTER   [H "weft-zmq/1"]         hello
//   ROUTER -> DEALER   [A]                      accepted (on_accept ran)
//                      [R reason]               refused (endpoint closing)
//
// after which both sides send, in either direction:
//
//   [M][header][slice]...[slice]   a message: the kind, the header (maybe
//                                  empty) and zero or more payload frames,
//                                  joined into one payload on receipt
//   [B]                            bye: an orderly close (on_closed NULL)
//   [E code reason]                the sender closed the connection
//                                  because of an error: one byte with the
//                                  weft_code_t, then the message, which the
//                                  receiver's on_closed status carries
//
// The ROUTER prefixes each of these with the peer's routing id. Anything
// else closes the connection with an error naming what was wrong. A dead
// peer is seen through zmq_socket_monitor's DISCONNECTED event (TCP reset
// or FIN, or ZeroMQ's heartbeat timing out).
#ifndef WEFT_PLUGINS_TRANSPORTS_ZMQ_WIRE_H_
#define WEFT_PLUGINS_TRANSPORTS_ZMQ_WIRE_H_

#include <cstddef>
#include <string_view>

namespace weft::zmq_transport::wire {

inline constexpr char kHello = 'H';
inline constexpr char kAccept = 'A';
inline constexpr char kRefuse = 'R';
inline constexpr char kMessage = 'M';
inline constexpr char kBye = 'B';
inline constexpr char kError = 'E';

// Follows kHello in the hello frame; a different protocol version is
// refused with a message saying both.
inline constexpr std::string_view kHelloMagic = "weft-zmq/1";

// A reason text in R and E frames is cut to this many bytes.
inline constexpr std::size_t kMaxReason = 1024;

// At most this many payload frames in one message (a sender makes one per
// slice); more is refused as malformed.
inline constexpr std::size_t kMaxPayloadFrames = 1 << 16;

}  // namespace weft::zmq_transport::wire

#endif  // WEFT_PLUGINS_TRANSPORTS_ZMQ_WIRE_H_
