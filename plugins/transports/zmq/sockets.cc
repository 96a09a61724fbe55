#include "sockets.h"

#include <cstring>

#include "wire.h"

namespace weft::zmq_transport {

std::string NextMonitorName() {
  static std::atomic<uint64_t> next{0};
  return "inproc://weft-zmq-monitor-" + std::to_string(next.fetch_add(1));
}

void ConfigureSocket(zmq::socket_t& socket, const Settings& settings, bool ipv6, bool server) {
  socket.set(zmq::sockopt::linger, 0);
  // No high-water mark: the host bounds what it queues, and a send must
  // never block the loop or drop a message.
  socket.set(zmq::sockopt::sndhwm, 0);
  socket.set(zmq::sockopt::rcvhwm, 0);
  socket.set(zmq::sockopt::maxmsgsize, settings.max_message_bytes);
  socket.set(zmq::sockopt::tcp_keepalive, 1);
  socket.set(zmq::sockopt::tcp_keepalive_idle, 30);
  socket.set(zmq::sockopt::tcp_keepalive_intvl, 10);
  socket.set(zmq::sockopt::tcp_keepalive_cnt, 3);
  // ZeroMQ's heartbeat catches a peer that vanished without a TCP reset
  // (cable pulled, machine frozen). The timeout is long because a PONG
  // waits behind whatever the peer is sending: up to max_message_mb.
  socket.set(zmq::sockopt::heartbeat_ivl, 5000);
  socket.set(zmq::sockopt::heartbeat_timeout, 60000);
  socket.set(zmq::sockopt::heartbeat_ttl, 60000);
  if (ipv6) socket.set(zmq::sockopt::ipv6, true);
  if (!settings.curve_public_key.empty()) {
    if (server) {
      socket.set(zmq::sockopt::curve_server, true);
      socket.set(zmq::sockopt::curve_secretkey, settings.curve_secret_key);
    } else {
      socket.set(zmq::sockopt::curve_serverkey, settings.curve_public_key);
      socket.set(zmq::sockopt::curve_publickey, settings.curve_public_key);
      socket.set(zmq::sockopt::curve_secretkey, settings.curve_secret_key);
    }
  }
}

// Reads one multipart message without waiting; false when none is queued.
// Frames past |max_frames| are read and dropped, and |*too_many| set.
bool RecvMultipart(zmq::socket_t& socket, std::vector<zmq::message_t>& frames, std::size_t max_frames, bool* too_many) {
  frames.clear();
  *too_many = false;
  zmq::message_t frame;
  if (!socket.recv(frame, zmq::recv_flags::dontwait)) return false;
  for (;;) {
    const bool more = frame.more();
    if (frames.size() < max_frames) {
      frames.push_back(std::move(frame));
    } else {
      *too_many = true;
    }
    if (!more) return true;
    frame = zmq::message_t();
    // The rest of a multipart message is already queued (ZeroMQ delivers
    // them atomically).
    if (!socket.recv(frame, zmq::recv_flags::dontwait)) return true;
  }
}

bool RecvMonitorEvent(zmq::socket_t& monitor, MonitorEvent* out) {
  std::vector<zmq::message_t> frames;
  bool too_many = false;
  if (!RecvMultipart(monitor, frames, 2, &too_many)) return false;
  if (frames.empty() || frames[0].size() < 6) {
    out->event = 0;
    out->value = 0;
    return true;
  }
  std::memcpy(&out->event, frames[0].data(), 2);
  std::memcpy(&out->value, static_cast<const char*>(frames[0].data()) + 2, 4);
  return true;
}

void StopMonitor(zmq::socket_t* socket) {
  if (socket != nullptr && socket->handle() != nullptr) zmq_socket_monitor(socket->handle(), nullptr, 0);
}

char KindOf(const zmq::message_t& frame) { return frame.size() >= 1 ? *static_cast<const char*>(frame.data()) : '\0'; }

std::string Printable(const zmq::message_t& frame, std::size_t from) {
  std::string text;
  const auto* data = static_cast<const unsigned char*>(frame.data());
  for (std::size_t i = from; i < frame.size() && text.size() < wire::kMaxReason; ++i) {
    text += (data[i] >= 32 && data[i] < 127) ? static_cast<char>(data[i]) : '?';
  }
  return text;
}

}  // namespace weft::zmq_transport
