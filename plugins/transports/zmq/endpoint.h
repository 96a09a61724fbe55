// A zmq transport endpoint: one I/O thread (the loop) owning every ZeroMQ
// socket of the endpoint, and the connections presented on top of them
// (see wire.h for the protocol).
//
// Threads. ZeroMQ sockets are not thread-safe, so only the loop touches
// them once they are set up. Other threads hand it work through a
// mutex-protected command queue and an eventfd the loop polls beside its
// sockets. All callbacks run on the loop, so never concurrently for one
// connection. connection_open does its handshake on the caller's thread
// with a socket of its own, then hands that socket to the loop. Dones run on
// the loop too: ZeroMQ's free callback only queues them.
//
// Closing. From another thread, connection_close returns once the loop has
// closed the connection and every done of its sends has run (it waits for
// the dones at most 10 s, logging a warning: a peer that stopped reading
// can hold them), and endpoint_close once the context is terminated, when
// every frame is released. Called from inside a callback neither can wait
// for the loop it runs on: no on_accept, on_message or on_closed follows,
// but the dones of frames ZeroMQ still holds run later on the loop. A
// close sends a bye after what is queued and waits up to 2 s for it to be
// written, so the peer sees on_closed without a status.
//
// Topology. A listening endpoint binds one ROUTER; every connection_open
// makes its own DEALER (one TCP stream per connection). The alternative, one
// DEALER per pair of endpoints shared by all their connections (told apart
// by an id frame), was measured with bench/dealer_layout_bench.cc on
// loopback, best of 3 runs, on a 2-core machine under a load of ~9 (so the
// absolute numbers are poor; the comparison is what counts):
//
//                                   per-connection    shared
//   4 KiB round trip, 1 connection       140 us        132 us
//   4 KiB round trip, 4 at once          290 us        217 us
//   64 MiB transfers, 1 connection      0.17 GB/s     0.12 GB/s
//   64 MiB transfers, 4 at once         0.13 GB/s     0.12 GB/s
//   4 KiB round trip beside 2x64 MiB     30 ms         53 ms
//
// Small round trips are a wash (sharing batches 4 messages into one TCP
// write), bulk transfers are no worse per connection, and a shared stream
// makes a small control message wait behind another connection's tensor.
// Per-connection DEALERs also let one connection fail, close or drop its
// queue without touching the others, so they were kept.
#ifndef WEFT_PLUGINS_TRANSPORTS_ZMQ_ENDPOINT_H_
#define WEFT_PLUGINS_TRANSPORTS_ZMQ_ENDPOINT_H_

#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "address.h"
#include "send_state.h"
#include "weft/weft_transport.h"

namespace weft::zmq_transport {

using Clock = std::chrono::steady_clock;

struct Settings {
  // ZMQ_MAXMSGSIZE, and the bound on a whole message (header + payload).
  int64_t max_message_bytes = int64_t{2048} << 20;
  // CURVE (encryption of every link): the cluster's key pair, Z85 (40
  // characters each); both empty when off. Every listening socket is a
  // CURVE server with the secret key; every connecting socket a client
  // that expects the public key and presents the same pair.
  std::string curve_public_key;
  std::string curve_secret_key;
};

class Endpoint;
struct Connection;

// What the host holds as a weft_connection_t.
struct ConnectionHandle {
  std::shared_ptr<Connection> connection;
};

// Signalled once; waited on with a bound.
class Latch {
 public:
  void Set();
  bool Wait(std::chrono::milliseconds timeout);
  void Wait();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool set_ = false;
};

struct Command {
  enum class Type { kAdopt, kSend, kClose, kStop };
  Type type;
  std::shared_ptr<Connection> connection;
  // kSend: the frames (kind, header, slices) and their state.
  std::vector<zmq::message_t> frames;
  SendState* send = nullptr;
  // kClose: set once the loop has closed the connection.
  std::shared_ptr<Latch> closed;
};

// The part of an endpoint that outlives it: connection handles keep it, so
// that connection_close after endpoint_close is safe.
struct EndpointCore : public DoneSink {
  EndpointCore();
  ~EndpointCore() override;
  EndpointCore(const EndpointCore&) = delete;
  EndpointCore& operator=(const EndpointCore&) = delete;

  // Queues |command| and wakes the loop; false (leaving |command| as it
  // was) once the endpoint is closing.
  bool Post(Command& command);
  void Wake();
  bool OnLoopThread() const { return std::this_thread::get_id() == loop_id; }
  // Blocks until the loop thread has finished (or returns at once on it).
  void WaitLoopFinished();
  // Queues a finished send for the loop, which runs its done; runs it at
  // once when the loop no longer takes them (the endpoint is closing).
  void Complete(SendState* state) noexcept override;
  // Runs the dones queued so far (on the loop).
  void RunDones();

  zmq::context_t context;
  int wake_fd = -1;
  std::mutex mutex;
  std::condition_variable finished_cv;
  std::deque<Command> commands;   // guarded by mutex
  bool closed = false;            // guarded by mutex; no new commands or sockets
  bool loop_finished = false;     // guarded by mutex
  std::vector<SendState*> dones;  // guarded by mutex
  bool dones_direct = false;      // guarded by mutex
  std::thread::id loop_id;        // set before the loop runs
  Endpoint* endpoint = nullptr;   // valid while the loop runs
  Settings settings;
};

struct Connection {
  enum class Side { kOutgoing, kAccepted };
  Connection(Side side, std::shared_ptr<EndpointCore> core, std::string peer);

  const Side side;
  const std::shared_ptr<EndpointCore> core;
  // The peer's address, for messages: "zmq+tcp://10.0.0.5:7071".
  const std::string peer;
  const std::shared_ptr<SendTracker> tracker;
  weft_connection_t handle = nullptr;
  // False once the connection closed or failed: sends are refused.
  std::atomic<bool> open{true};
  // connection_set_max_message's limit; 0: max_message_mb. libzmq has
  // already received a message when it is checked (its own limit is per
  // socket), so this bounds what reaches the host, not what zmq buffers.
  std::atomic<uint64_t> max_message{0};

  // --- The loop's own (or the connecting thread's, before adoption) ---
  bool released = false;                   // the host closed it
  bool ended = false;                      // closed, failed or lost: no more callbacks
  bool lost = false;                       // disconnected; fail once its queued messages are read
  std::unique_ptr<zmq::socket_t> dealer;   // kOutgoing
  std::unique_ptr<zmq::socket_t> monitor;  // kOutgoing: events of |dealer|
  std::string routing_id;                  // kAccepted
  int fd = -1;                             // kAccepted: the TCP socket
};

class Endpoint {
 public:
  // Binds |listen| when given. Throws sdk::Error.
  Endpoint(const std::optional<Address>& listen, const weft_transport_callbacks_t& callbacks, const Settings& settings);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // endpoint_close: stops the loop and deletes the endpoint (at once, or
  // when the current callback returns if called from one).
  void Close();

  // "zmq+tcp://HOST:PORT" with the port actually bound; "" when the
  // endpoint does not listen.
  const std::string& address() const { return address_; }

  // connection_open. Throws sdk::Error.
  ConnectionHandle* Connect(const Address& address, int64_t timeout_ms);

  // connection_close, on the loop thread.
  void CloseOnLoop(const std::shared_ptr<Connection>& connection);
  // send from a callback, on the loop thread: hands |command|'s frames to
  // ZeroMQ at once, saving a trip through the queue. False (leaving
  // |command| as it was) when it must be queued to keep the order.
  bool SendNowOnLoop(Command& command);

 private:
  void Run();
  void RunOnce();
  void Shutdown();
  void ProcessCommands();
  // |from_callback|: inside the host's send, so a failure is reported at
  // the next iteration instead of by an on_closed nested in it.
  void DoSend(Command& command, bool from_callback);

  void DrainRouterMonitor();
  void DrainRouter();
  void Accept(const std::string& id, std::vector<zmq::message_t>& frames);
  void DrainDealerMonitor(const std::shared_ptr<Connection>& connection);
  void DrainDealer(const std::shared_ptr<Connection>& connection);
  // Handles one message from |connection|, whose kind frame is
  // frames[first].
  void Dispatch(const std::shared_ptr<Connection>& connection, std::vector<zmq::message_t>& frames, std::size_t first,
                bool too_many_frames);

  // Whether callbacks for |connection| may still run.
  bool Live(const Connection& connection) const { return !stop_ && !connection.ended && !connection.released; }
  // Ends |connection| and tells the host with on_closed(|code|, |message|)
  // (no status when |code| is WEFT_OK). |tell_peer| sends an E frame with
  // the reason first.
  void Fail(const std::shared_ptr<Connection>& connection, weft_code_t code, const std::string& message,
            bool tell_peer);
  // Sends a control frame (B, E) to the peer; the returned latch is set
  // once ZeroMQ has written it (or dropped it). Never throws.
  std::shared_ptr<Latch> SendControl(Connection& connection, const std::string& frame);
  // Forgets |connection|'s sockets and routing entries; the sockets close
  // at the top of the next loop iteration.
  void Detach(const std::shared_ptr<Connection>& connection);

  const std::shared_ptr<EndpointCore> core_;
  const weft_transport_callbacks_t callbacks_;
  std::string address_;

  // --- The loop's own ---
  std::unique_ptr<zmq::socket_t> router_;
  std::unique_ptr<zmq::socket_t> router_monitor_;
  std::map<std::string, std::shared_ptr<Connection>> accepted_;  // by routing id
  std::map<int, std::string> fd_ids_;                            // TCP fd -> routing id
  std::vector<std::string> lost_ids_;                            // disconnected; fail after reading what they sent
  std::vector<std::shared_ptr<Connection>> outgoing_;
  std::vector<std::unique_ptr<zmq::socket_t>> graveyard_;
  std::vector<std::pair<std::shared_ptr<Connection>, std::string>> deferred_failures_;
  // on_closed waits (bounded) until the dones of the connection's dropped
  // sends have run, so the host hears of the failed sends first.
  struct PendingClose {
    std::shared_ptr<Connection> connection;
    weft_status_t status;
    Clock::time_point deadline;
  };
  std::vector<PendingClose> pending_closes_;
  // Runs the on_closed whose sends are finished or whose wait is over.
  void FlushPendingCloses();
  bool processing_ = false;  // inside ProcessCommands' batch
  bool stop_ = false;
  bool self_delete_ = false;
  std::thread thread_;
};

// connection_close and send for a handle.
void CloseConnection(ConnectionHandle* handle);
weft_status_t SendMessage(ConnectionHandle* handle, const weft_message_t* message, weft_done_fn done, void* user);

}  // namespace weft::zmq_transport

#endif  // WEFT_PLUGINS_TRANSPORTS_ZMQ_ENDPOINT_H_
