// The connecting side of an endpoint: connection_open's handshake on the
// caller's thread, and the loop's reading of each connection's DEALER.
#include <array>
#include <cerrno>

#include "endpoint.h"
#include "sockets.h"
#include "weft/sdk/status.h"
#include "wire.h"

namespace weft::zmq_transport {

ConnectionHandle* Endpoint::Connect(const Address& address, int64_t timeout_ms) {
  // Only |core| from here on: an endpoint_close racing with this call may
  // delete the Endpoint once its context no longer has this thread's
  // sockets, but the core stays.
  const std::shared_ptr<EndpointCore> core = core_;
  const std::string url = address.Url();
  if (timeout_ms < 0) {
    throw sdk::Error(WEFT_INVALID_ARGUMENT, "zmq transport: connecting to " + url + ": the timeout is negative (" +
                                                std::to_string(timeout_ms) + " ms)");
  }
  const auto deadline = Clock::now() + milliseconds(timeout_ms);
  std::unique_ptr<zmq::socket_t> dealer;
  std::unique_ptr<zmq::socket_t> monitor;
  {
    std::lock_guard<std::mutex> lock(core->mutex);
    if (core->closed) {
      throw sdk::Error(WEFT_FAILED_PRECONDITION,
                       "zmq transport: cannot connect to " + url + ": the endpoint is closed");
    }
    dealer = std::make_unique<zmq::socket_t>(core->context, zmq::socket_type::dealer);
    monitor = std::make_unique<zmq::socket_t>(core->context, zmq::socket_type::pair);
  }
  auto fail = [&](weft_code_t code, const std::string& why) {
    StopMonitor(dealer.get());
    monitor.reset();
    dealer.reset();
    throw sdk::Error(code, "zmq transport: cannot connect to " + url + ": " + why);
  };
  try {
    ConfigureSocket(*dealer, core->settings, address.ipv6, /*server=*/false);
    monitor->set(zmq::sockopt::linger, 0);
    const std::string monitor_name = NextMonitorName();
    if (zmq_socket_monitor(dealer->handle(), monitor_name.c_str(),
                           ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0) {
      throw zmq::error_t();
    }
    monitor->connect(monitor_name);
    try {
      dealer->connect(address.ZmqEndpoint());
    } catch (const zmq::error_t& e) {
      fail(WEFT_INVALID_ARGUMENT, e.what());
    }
    const std::string hello = std::string(1, wire::kHello) + std::string(wire::kHelloMagic);
    dealer->send(zmq::buffer(hello), zmq::send_flags::dontwait);
    std::vector<zmq::message_t> frames;
    bool too_many = false;
    for (;;) {
      // Rounded up, so that the wait is never cut short of |timeout_ms|.
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        fail(WEFT_DEADLINE_EXCEEDED, "no answer to the handshake within " + std::to_string(timeout_ms) +
                                         " ms (is a weft zmq endpoint listening there?)");
      }
      std::array<zmq_pollitem_t, 2> items = {
          {{monitor->handle(), 0, ZMQ_POLLIN, 0}, {dealer->handle(), 0, ZMQ_POLLIN, 0}}};
      try {
        zmq::poll(items, left);
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        throw;
      }
      // An answer already queued wins over a later disconnect.
      if (RecvMultipart(*dealer, frames, 4, &too_many)) {
        const char kind = frames.empty() ? '\0' : KindOf(frames[0]);
        if (kind == wire::kAccept && frames.size() == 1 && frames[0].size() == 1) break;
        if (kind == wire::kRefuse || kind == wire::kError) {
          fail(WEFT_UNAVAILABLE,
               "the peer refused the connection: " + Printable(frames[0], kind == wire::kError ? 2 : 1));
        }
        fail(WEFT_UNAVAILABLE, "the peer answered the handshake with a malformed message (" +
                                   std::to_string(frames.size()) + " frame(s) starting '" +
                                   (frames.empty() ? std::string() : Printable(frames[0], 0)) + "')");
      }
      MonitorEvent event{};
      while (RecvMonitorEvent(*monitor, &event)) {
        switch (event.event) {
          case ZMQ_EVENT_CONNECT_RETRIED:
            fail(WEFT_UNAVAILABLE, "connection refused (nothing listens there, or the host is unreachable)");
            break;
          case ZMQ_EVENT_DISCONNECTED:
            fail(WEFT_UNAVAILABLE, "the peer closed the connection during the handshake");
            break;
          case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
          case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
          case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
            fail(WEFT_UNAVAILABLE, "the ZeroMQ handshake failed (is it a weft zmq endpoint?)");
            break;
          default: break;
        }
      }
    }
  } catch (const zmq::error_t& e) {
    fail(e.num() == ETERM ? WEFT_FAILED_PRECONDITION : WEFT_UNAVAILABLE,
         e.num() == ETERM ? std::string("the endpoint was closed") : std::string(e.what()));
  }
  auto connection = std::make_shared<Connection>(Connection::Side::kOutgoing, core, url);
  connection->dealer = std::move(dealer);
  connection->monitor = std::move(monitor);
  auto* handle = new ConnectionHandle{connection};
  connection->handle = reinterpret_cast<weft_connection_t>(handle);
  Command adopt{Command::Type::kAdopt, connection, {}, nullptr, nullptr};
  if (!core->Post(adopt)) {
    StopMonitor(connection->dealer.get());
    connection->monitor.reset();
    connection->dealer.reset();
    delete handle;
    throw sdk::Error(WEFT_FAILED_PRECONDITION, "zmq transport: cannot connect to " + url + ": the endpoint was closed");
  }
  return handle;
}

void Endpoint::DrainDealerMonitor(const std::shared_ptr<Connection>& connection) {
  MonitorEvent event{};
  while (RecvMonitorEvent(*connection->monitor, &event)) {
    if (event.event == ZMQ_EVENT_DISCONNECTED) {
      // Failed once what it sent is read (DrainDealer); its sends fail now.
      connection->lost = true;
      connection->tracker->MarkDead();
    }
  }
}

void Endpoint::DrainDealer(const std::shared_ptr<Connection>& connection) {
  std::vector<zmq::message_t> frames;
  bool too_many = false;
  int n = 0;
  // A lost connection is read to the end before it is failed: everything
  // the peer sent before it went is delivered.
  for (; (n < kBatch || connection->lost) && Live(*connection); ++n) {
    if (!RecvMultipart(*connection->dealer, frames, wire::kMaxPayloadFrames + 2, &too_many)) break;
    if (frames.empty()) continue;
    Dispatch(connection, frames, 0, too_many);
  }
  if (connection->lost && Live(*connection)) {
    Fail(connection, WEFT_UNAVAILABLE,
         "zmq transport: the connection to " + connection->peer +
             " was lost: the peer closed its socket or its process ended",
         /*tell_peer=*/false);
  }
}

}  // namespace weft::zmq_transport
