// Helpers shared by the zmq transport's files: socket options, reading
// multipart and monitor messages, and the timing constants of closing.
#ifndef WEFT_PLUGINS_TRANSPORTS_ZMQ_SOCKETS_H_
#define WEFT_PLUGINS_TRANSPORTS_ZMQ_SOCKETS_H_

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "endpoint.h"

namespace weft::zmq_transport {

using std::chrono::milliseconds;

// How long a close waits for its bye (and every message queued before it)
// to be written before the socket is closed with ZMQ_LINGER 0, and how long
// connection_close waits for the dones of its sends.
inline constexpr milliseconds kByeFlush{2000};
inline constexpr milliseconds kDoneWait{10000};
// How long on_closed for a failed connection waits for the dones of the
// sends ZeroMQ is dropping, so that they come first.
inline constexpr milliseconds kClosedAfterDones{1000};
// Messages read from one socket per loop iteration, so one busy peer does
// not starve the others.
inline constexpr int kBatch = 64;

// A name for the inproc socket of a new zmq_socket_monitor.
std::string NextMonitorName();

// Linger 0, no high-water marks, ZMQ_MAXMSGSIZE, TCP keepalive and
// ZeroMQ heartbeats.
// |server|: the listening (ROUTER) socket, which takes CURVE's server role.
void ConfigureSocket(zmq::socket_t& socket, const Settings& settings, bool ipv6, bool server);

// Reads one multipart message without waiting; false when none is queued.
// Frames past |max_frames| are read and dropped, and |*too_many| set.
bool RecvMultipart(zmq::socket_t& socket, std::vector<zmq::message_t>& frames, std::size_t max_frames, bool* too_many);

struct MonitorEvent {
  uint16_t event;
  int32_t value;
};
// Reads one event of a zmq_socket_monitor without waiting.
bool RecvMonitorEvent(zmq::socket_t& monitor, MonitorEvent* out);
// Stops the monitor of |socket| (NULL is fine).
void StopMonitor(zmq::socket_t* socket);

// The first byte of |frame|, '\0' when it is empty.
char KindOf(const zmq::message_t& frame);
// |frame| from byte |from| as printable ASCII ('?' for the rest), cut to
// wire::kMaxReason bytes.
std::string Printable(const zmq::message_t& frame, std::size_t from);

}  // namespace weft::zmq_transport

#endif  // WEFT_PLUGINS_TRANSPORTS_ZMQ_SOCKETS_H_
