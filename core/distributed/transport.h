// The core's side of a transport plugin (weft_transport.h): an Endpoint
// and its Connections as C++ objects with std::function handlers, so that
// the RPC layer never touches the C table.
//
//   auto endpoint = Endpoint::Open(tcp_table, "tcp://127.0.0.1:0", handlers);
//   auto connection = (*endpoint)->Connect("tcp://127.0.0.1:7070", 5000);
//   (*connection)->Send(header, {{data, size}}, keepalive, [](Status s) {...});
//
// Handlers run on the transport's threads, never concurrently for one
// connection; they must not block for long (the RPC layer hands work to a
// thread pool).
#ifndef WEFT_CORE_DIST_TRANSPORT_H_
#define WEFT_CORE_DIST_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "weft/weft_transport.h"

namespace weft::dist {

// A message that arrived: its header and payload, kept alive by |owner|
// (the transport's retain token, or a copy when it has none). Copying a
// ReceivedMessage shares the memory.
class ReceivedMessage {
 public:
  ReceivedMessage() = default;
  // Takes what |message| lends, retaining it (or copying it).
  static ReceivedMessage Keep(const weft_received_t* message);

  std::string_view header() const { return {static_cast<const char*>(header_), header_size_}; }
  const void* payload() const { return payload_; }
  uint64_t payload_size() const { return payload_size_; }
  // Holds the memory: give it to anything (a tensor buffer) that points
  // into the payload.
  const std::shared_ptr<void>& owner() const { return owner_; }

 private:
  const void* header_ = nullptr;
  std::size_t header_size_ = 0;
  const void* payload_ = nullptr;
  uint64_t payload_size_ = 0;
  std::shared_ptr<void> owner_;
};

struct Slice {
  const void* data;
  uint64_t size;
};

// What this process has put on and taken off the wire through every
// transport since it started (headers and payloads; not the transport's
// own framing), leaving out connections to itself (Connection::MarkSelf):
// how `weft train` reports bytes per step on a cluster.
struct WireCounters {
  uint64_t sent_bytes = 0;
  uint64_t sent_messages = 0;
  uint64_t received_bytes = 0;
  uint64_t received_messages = 0;
};
WireCounters ReadWireCounters();

class Endpoint;
class Connection;

namespace internal {
// An endpoint's connections by handle, for its callbacks. Shared with the
// connections, which may outlive the endpoint.
struct ConnectionRegistry {
  std::mutex mutex;
  // Weak, so that dropping the last reference closes a connection.
  std::unordered_map<weft_connection_t, std::weak_ptr<Connection>> by_handle;
};
}  // namespace internal

class Connection {
 public:
  ~Connection();  // releases the transport's handle
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends |header| and |slices| as one message. |keepalive| holds whatever
  // the slices point into until the transport is done with them; |done|
  // (optional) hears the outcome. An error returned here means |done|
  // never runs.
  Status Send(std::string header, const std::vector<Slice>& slices, std::shared_ptr<const void> keepalive,
              std::function<void(Status)> done = nullptr);
  // Closes it; no handler runs for it afterwards. Idempotent.
  void Close();
  // The peer's address as the transport reported it.
  const std::string& peer() const { return peer_; }
  // Marks a connection from this process's client to its own task: what it
  // carries never leaves the machine, and ReadWireCounters leaves it out.
  void MarkSelf() { self_.store(true, std::memory_order_relaxed); }
  bool self() const { return self_.load(std::memory_order_relaxed); }
  // The largest message it accepts from now on (0: the transport's own
  // limit), refused by the transport before allocating; false when the
  // transport cannot hold one connection to a limit (ABI < 1.3, or it
  // provides none), and the caller must check what arrives itself.
  bool SetMaxMessage(uint64_t max_bytes);
  // Whether the peer or network ended it (on_closed ran) or Close was called.
  bool closed() const;

 private:
  std::atomic<bool> self_{false};
  friend class Endpoint;
  Connection(std::shared_ptr<internal::ConnectionRegistry> registry, const weft_transport_plugin_t* table,
             weft_connection_t handle, std::string peer)
      : registry_(std::move(registry)), table_(table), handle_(handle), peer_(std::move(peer)) {}
  std::shared_ptr<internal::ConnectionRegistry> registry_;
  const weft_transport_plugin_t* table_;
  mutable std::mutex mutex_;
  weft_connection_t handle_;
  std::string peer_;
  bool peer_closed_ = false;
};

class Endpoint {
 public:
  struct Handlers {
    // A peer connected (listening endpoints). Optional.
    std::function<void(const std::shared_ptr<Connection>&)> on_accept;
    std::function<void(const std::shared_ptr<Connection>&, ReceivedMessage)> on_message;
    // The peer or network ended the connection; OK for an orderly close.
    std::function<void(const std::shared_ptr<Connection>&, const Status&)> on_closed;
  };

  // Opens an endpoint of |transport| listening on |listen_address|, or
  // one that only connects out when it is empty.
  static Expected<std::unique_ptr<Endpoint>> Open(const weft_transport_plugin_t* transport,
                                                  const std::string& listen_address, Handlers handlers);
  // Closes the endpoint: no handler runs after it returns.
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // The address it listens on (the port chosen for ":0").
  Expected<std::string> Address() const;
  // Connects, waiting at most |timeout_ms|.
  Expected<std::shared_ptr<Connection>> Connect(const std::string& address, int64_t timeout_ms);
  const weft_transport_plugin_t* transport() const { return table_; }

 private:
  Endpoint(const weft_transport_plugin_t* table, Handlers handlers) : table_(table), handlers_(std::move(handlers)) {}
  static void OnAccept(void* user, weft_connection_t connection, const char* peer);
  static void OnMessage(void* user, const weft_received_t* message);
  static void OnClosed(void* user, weft_connection_t connection, weft_status_t status);
  std::shared_ptr<Connection> Adopt(weft_connection_t handle, std::string peer);
  std::shared_ptr<Connection> Lookup(weft_connection_t handle);

  const weft_transport_plugin_t* table_;
  Handlers handlers_;
  weft_transport_callbacks_t callbacks_{};
  weft_endpoint_t endpoint_ = nullptr;
  std::shared_ptr<internal::ConnectionRegistry> registry_ = std::make_shared<internal::ConnectionRegistry>();
};

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_TRANSPORT_H_
