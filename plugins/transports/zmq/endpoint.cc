#include "endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "received.h"
#include "sockets.h"
#include "weft/sdk/log.h"
#include "weft/sdk/status.h"
#include "wire.h"

namespace weft::zmq_transport {
namespace {

// "E" + code + reason, the frame that closes a connection with an error.
std::string ErrorFrame(weft_code_t code, const std::string& reason) {
  std::string frame(1, wire::kError);
  frame += static_cast<char>(code);
  frame += reason.substr(0, wire::kMaxReason);
  return frame;
}

std::string PeerUrlOf(int fd, const zmq::message_t& frame) {
  if (fd >= 0) {
    sockaddr_storage storage{};
    socklen_t length = sizeof storage;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &length) == 0) {
      char host[INET6_ADDRSTRLEN] = "";
      if (storage.ss_family == AF_INET) {
        const auto* in = reinterpret_cast<const sockaddr_in*>(&storage);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        return "zmq+tcp://" + std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
      }
      if (storage.ss_family == AF_INET6) {
        const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        return "zmq+tcp://[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
      }
    }
  }
  const char* address = zmq_msg_gets(frame.handle(), "Peer-Address");
  return "zmq+tcp://" + std::string(address != nullptr ? address : "unknown");
}

// Frees the heap copy of a control frame and sets its latch.
struct ControlFrame {
  std::string bytes;
  std::shared_ptr<Latch> written;
  static void Free(void*, void* hint) noexcept {
    auto* self = static_cast<ControlFrame*>(hint);
    self->written->Set();
    delete self;
  }
};

}  // namespace

// --- Latch -------------------------------------------------------------

void Latch::Set() {
  std::lock_guard<std::mutex> lock(mutex_);
  set_ = true;
  cv_.notify_all();
}

bool Latch::Wait(milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return set_; });
}

void Latch::Wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return set_; });
}

// --- EndpointCore ----------------------------------------------------------

EndpointCore::EndpointCore() {
  wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    throw sdk::Error(WEFT_RESOURCE_EXHAUSTED,
                     std::string("zmq transport: cannot make an eventfd: ") + std::strerror(errno));
  }
  // Each outgoing connection takes three sockets (its DEALER and the two
  // ends of its monitor); ZeroMQ's default cap is 1023 per context.
  context.set(zmq::ctxopt::max_sockets, 16384);
}

EndpointCore::~EndpointCore() {
  if (wake_fd >= 0) close(wake_fd);
}

bool EndpointCore::Post(Command& command) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (closed && command.type != Command::Type::kStop) return false;
    // One wake per batch: the loop reads the eventfd before it takes the
    // queue, so a push onto a non-empty queue is seen with the first.
    wake = commands.empty();
    commands.push_back(std::move(command));
  }
  if (wake) Wake();
  return true;
}

void EndpointCore::Wake() {
  const uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the loop wakes anyway.
  [[maybe_unused]] ssize_t n = write(wake_fd, &one, sizeof one);
}

void EndpointCore::Complete(SendState* state) noexcept {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!dones_direct) {
      try {
        wake = dones.empty();
        dones.push_back(state);
        state = nullptr;
      } catch (...) {
        // Out of memory: run it here instead.
      }
    }
  }
  if (state != nullptr) {
    state->RunDone();
  } else if (wake) {
    Wake();
  }
}

void EndpointCore::RunDones() {
  std::vector<SendState*> ready;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ready.swap(dones);
  }
  for (SendState* state : ready) state->RunDone();
}

void EndpointCore::WaitLoopFinished() {
  if (OnLoopThread()) return;
  std::unique_lock<std::mutex> lock(mutex);
  finished_cv.wait(lock, [&] { return loop_finished; });
}

Connection::Connection(Side s, std::shared_ptr<EndpointCore> c, std::string p)
    : side(s), core(std::move(c)), peer(std::move(p)), tracker(std::make_shared<SendTracker>(peer)) {}

// --- Endpoint: setup and teardown --------------------------------------------

Endpoint::Endpoint(const std::optional<Address>& listen, const weft_transport_callbacks_t& callbacks,
                   const Settings& settings)
    : core_(std::make_shared<EndpointCore>()), callbacks_(callbacks) {
  core_->settings = settings;
  if (listen) {
    router_ = std::make_unique<zmq::socket_t>(core_->context, zmq::socket_type::router);
    router_monitor_ = std::make_unique<zmq::socket_t>(core_->context, zmq::socket_type::pair);
    ConfigureSocket(*router_, settings, listen->ipv6, /*server=*/true);
    // A send to a peer that is gone fails (EHOSTUNREACH) instead of
    // vanishing.
    router_->set(zmq::sockopt::router_mandatory, true);
    router_monitor_->set(zmq::sockopt::linger, 0);
    const std::string monitor_name = NextMonitorName();
    if (zmq_socket_monitor(router_->handle(), monitor_name.c_str(), ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0) {
      throw sdk::Error(WEFT_INTERNAL,
                       std::string("zmq transport: cannot monitor the listening socket: ") + zmq_strerror(zmq_errno()));
    }
    router_monitor_->connect(monitor_name);
    try {
      router_->bind(listen->ZmqEndpoint());
    } catch (const zmq::error_t& e) {
      StopMonitor(router_.get());
      router_monitor_.reset();
      router_.reset();
      const weft_code_t code =
          e.num() == EADDRINUSE || e.num() == EADDRNOTAVAIL ? WEFT_UNAVAILABLE : WEFT_INVALID_ARGUMENT;
      throw sdk::Error(code, "zmq transport: cannot listen on " + listen->Url() + ": " + e.what());
    }
    address_ = UrlFromZmqEndpoint(router_->get(zmq::sockopt::last_endpoint));
  }
  std::lock_guard<std::mutex> lock(core_->mutex);
  core_->endpoint = this;
  thread_ = std::thread([this] { Run(); });
  core_->loop_id = thread_.get_id();
}

Endpoint::~Endpoint() = default;

void Endpoint::Close() {
  if (core_->OnLoopThread()) {
    // From inside a callback: the loop stops once the callback returns,
    // running no other callback, and then deletes the endpoint.
    std::lock_guard<std::mutex> lock(core_->mutex);
    core_->closed = true;
    stop_ = true;
    self_delete_ = true;
    return;
  }
  Command stop{Command::Type::kStop, nullptr, {}, nullptr, nullptr};
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    core_->closed = true;
  }
  core_->Post(stop);
  thread_.join();
  delete this;
}

void Endpoint::Run() {
  {
    // Waits until the constructor has published loop_id.
    std::lock_guard<std::mutex> lock(core_->mutex);
  }
  while (!stop_) {
    try {
      RunOnce();
    } catch (const std::exception& e) {
      // Errors of one connection are handled where they happen; this is a
      // broken invariant. Keep serving the others.
      WEFT_SDK_LOG(ERROR) << "zmq transport: endpoint " << address_ << ": " << e.what();
    }
  }
  Shutdown();
  std::shared_ptr<EndpointCore> core = core_;
  const bool self_delete = self_delete_;
  if (self_delete) {
    thread_.detach();
    delete this;
  }
  std::lock_guard<std::mutex> lock(core->mutex);
  core->endpoint = nullptr;
  core->loop_finished = true;
  core->finished_cv.notify_all();
}

void Endpoint::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    core_->closed = true;
  }
  for (PendingClose& close : pending_closes_) sdk::host()->status_free(close.status);
  pending_closes_.clear();
  // An orderly bye to every peer, so that they see on_closed without a
  // status; everything queued before it goes out first, within a bound.
  std::vector<std::shared_ptr<Latch>> byes;
  std::vector<std::shared_ptr<Connection>> all = outgoing_;
  for (auto& [id, connection] : accepted_) all.push_back(connection);
  for (auto& connection : all) {
    connection->open = false;
    if (!connection->ended && !connection->released) byes.push_back(SendControl(*connection, {wire::kBye}));
    connection->ended = true;
  }
  const auto deadline = Clock::now() + kByeFlush;
  for (auto& bye : byes) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || !bye->Wait(left)) break;
  }
  for (auto& connection : all) connection->tracker->MarkDead();

  // Commands that raced with the close: sends fail, closes are done,
  // adopted sockets are closed.
  std::deque<Command> commands;
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    commands.swap(core_->commands);
  }
  for (Command& command : commands) {
    switch (command.type) {
      case Command::Type::kSend:
        command.send->MarkFailed();
        command.frames.clear();
        break;
      case Command::Type::kClose:
        command.connection->released = true;
        command.closed->Set();
        break;
      case Command::Type::kAdopt:
        command.connection->open = false;
        command.connection->ended = true;
        command.connection->tracker->MarkDead();
        StopMonitor(command.connection->dealer.get());
        command.connection->monitor.reset();
        command.connection->dealer.reset();
        break;
      case Command::Type::kStop: break;
    }
  }
  commands.clear();

  for (auto& connection : outgoing_) {
    StopMonitor(connection->dealer.get());
    connection->monitor.reset();
    connection->dealer.reset();
  }
  outgoing_.clear();
  accepted_.clear();
  graveyard_.clear();
  StopMonitor(router_.get());
  router_monitor_.reset();
  router_.reset();
  // From here on a released frame runs its done where it is released
  // (ZeroMQ's threads, or this one), all before endpoint_close returns.
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    core_->dones_direct = true;
  }
  core_->RunDones();
  // Makes a connection_open still in its handshake give up (ETERM), then
  // waits until every socket is closed and every frame released: all the
  // dones have run when this returns.
  core_->context.shutdown();
  core_->context.close();
}

// --- Endpoint: the loop --------------------------------------------------------

void Endpoint::RunOnce() {
  graveyard_.clear();
  std::vector<zmq_pollitem_t> items;
  items.push_back({nullptr, core_->wake_fd, ZMQ_POLLIN, 0});
  if (router_) {
    items.push_back({router_monitor_->handle(), 0, ZMQ_POLLIN, 0});
    items.push_back({router_->handle(), 0, ZMQ_POLLIN, 0});
  }
  const std::vector<std::shared_ptr<Connection>> outgoing = outgoing_;
  for (const auto& connection : outgoing) {
    items.push_back({connection->monitor->handle(), 0, ZMQ_POLLIN, 0});
    items.push_back({connection->dealer->handle(), 0, ZMQ_POLLIN, 0});
  }
  try {
    // Lost peers are closed once the ROUTER's queue is read: come back at
    // once when that is still to do, or when an on_closed stops waiting.
    milliseconds timeout(-1);
    if (!lost_ids_.empty()) {
      timeout = milliseconds(0);
    } else if (!pending_closes_.empty()) {
      auto first = pending_closes_.front().deadline;
      for (const PendingClose& close : pending_closes_) first = std::min(first, close.deadline);
      timeout = std::max(milliseconds(0), std::chrono::ceil<milliseconds>(first - Clock::now()));
    }
    zmq::poll(items, timeout);
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return;
    throw;
  }
  if (items[0].revents != 0) {
    uint64_t count = 0;
    [[maybe_unused]] ssize_t n = read(core_->wake_fd, &count, sizeof count);
  }
  // Deaths first. ZeroMQ posts a DISCONNECTED event before it drops the
  // frames still queued to that peer, so reading the monitors before the
  // queued dones run makes those dones report failure, not success.
  std::size_t at = 1;
  if (router_) {
    if (items[at].revents != 0) DrainRouterMonitor();
    at += 2;
  }
  for (const auto& connection : outgoing) {
    if (items[at].revents != 0 && Live(*connection)) DrainDealerMonitor(connection);
    at += 2;
  }
  ProcessCommands();
  FlushPendingCloses();
  std::vector<std::pair<std::shared_ptr<Connection>, std::string>> failures;
  failures.swap(deferred_failures_);
  for (auto& [connection, message] : failures) Fail(connection, WEFT_UNAVAILABLE, message, /*tell_peer=*/false);
  at = 1;
  if (router_) {
    if (!stop_ && (items[at + 1].revents != 0 || !lost_ids_.empty())) DrainRouter();
    at += 2;
  }
  for (const auto& connection : outgoing) {
    const bool dealer_ready = items[at + 1].revents != 0;
    at += 2;
    if (!Live(*connection)) continue;
    if (dealer_ready || connection->lost) DrainDealer(connection);
  }
}

void Endpoint::ProcessCommands() {
  std::deque<Command> commands;
  {
    std::lock_guard<std::mutex> lock(core_->mutex);
    commands.swap(core_->commands);
  }
  processing_ = true;
  for (Command& command : commands) {
    switch (command.type) {
      case Command::Type::kAdopt: outgoing_.push_back(command.connection); break;
      case Command::Type::kSend: DoSend(command, /*from_callback=*/false); break;
      case Command::Type::kClose:
        CloseOnLoop(command.connection);
        command.closed->Set();
        break;
      case Command::Type::kStop: stop_ = true; break;
    }
    // Frames left (a send that failed) are released here, outside the
    // lock.
    command.frames.clear();
  }
  processing_ = false;
  core_->RunDones();
}

bool Endpoint::SendNowOnLoop(Command& command) {
  if (stop_ || processing_ || !Live(*command.connection)) return false;
  {
    // Sends queued by other threads go first.
    std::lock_guard<std::mutex> lock(core_->mutex);
    if (core_->closed || !core_->commands.empty()) return false;
  }
  DoSend(command, /*from_callback=*/true);
  command.frames.clear();
  return true;
}

void Endpoint::DoSend(Command& command, bool from_callback) {
  Connection& connection = *command.connection;
  if (connection.ended || connection.released) {
    command.send->MarkFailed();
    return;
  }
  zmq::socket_t& socket = connection.side == Connection::Side::kOutgoing ? *connection.dealer : *router_;
  try {
    if (connection.side == Connection::Side::kAccepted) {
      if (!socket.send(zmq::buffer(connection.routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
        throw zmq::error_t();
      }
    }
    for (std::size_t i = 0; i < command.frames.size(); ++i) {
      const bool last = i + 1 == command.frames.size();
      const auto flags = last ? zmq::send_flags::dontwait : zmq::send_flags::sndmore | zmq::send_flags::dontwait;
      // With no high-water mark ZeroMQ never answers EAGAIN here.
      if (!socket.send(command.frames[i], flags)) throw zmq::error_t();
    }
  } catch (const zmq::error_t& e) {
    command.send->MarkFailed();
    std::string message =
        "zmq transport: the connection to " + connection.peer + " was lost: sending failed: " + e.what();
    if (from_callback) {
      // Not on_closed inside the host's own send: at the next iteration.
      deferred_failures_.emplace_back(command.connection, std::move(message));
      core_->Wake();
    } else {
      Fail(command.connection, WEFT_UNAVAILABLE, message, /*tell_peer=*/false);
    }
  }
}

// --- Endpoint: the listening side ------------------------------------------------

void Endpoint::DrainRouterMonitor() {
  MonitorEvent event{};
  while (RecvMonitorEvent(*router_monitor_, &event)) {
    if (event.event != ZMQ_EVENT_DISCONNECTED && event.event != ZMQ_EVENT_ACCEPTED) continue;
    // A DISCONNECTED of fd N always comes before the ACCEPTED of a new
    // connection reusing N, and both before that connection's hello (which
    // Accept reads only after draining these events).
    auto it = fd_ids_.find(event.value);
    if (it == fd_ids_.end()) continue;
    // Failed once what it sent is read (DrainRouter); its sends fail now.
    auto connection = accepted_.find(it->second);
    if (connection != accepted_.end()) connection->second->tracker->MarkDead();
    lost_ids_.push_back(it->second);
    fd_ids_.erase(it);
  }
}

void Endpoint::DrainRouter() {
  std::vector<zmq::message_t> frames;
  bool too_many = false;
  int n = 0;
  for (; n < kBatch && !stop_; ++n) {
    if (!RecvMultipart(*router_, frames, wire::kMaxPayloadFrames + 3, &too_many)) break;
    if (frames.size() < 2) continue;  // a ROUTER always gives [id][...]
    const std::string id = frames[0].to_string();
    auto it = accepted_.find(id);
    if (it == accepted_.end()) {
      if (KindOf(frames[1]) == wire::kHello) {
        Accept(id, frames);
      } else {
        // A late message from a connection closed here: dropped.
        WEFT_SDK_LOG(DEBUG) << "zmq transport: " << address_ << ": dropped a message from a closed connection";
      }
      continue;
    }
    std::shared_ptr<Connection> connection = it->second;
    Dispatch(connection, frames, 1, too_many);
  }
  if (n < kBatch && !stop_) {
    // Everything the lost peers sent before they went is read: now they
    // can be closed.
    std::vector<std::string> lost;
    lost.swap(lost_ids_);
    for (const std::string& id : lost) {
      auto it = accepted_.find(id);
      if (it == accepted_.end()) continue;
      std::shared_ptr<Connection> connection = it->second;
      Fail(connection, WEFT_UNAVAILABLE,
           "zmq transport: the connection from " + connection->peer +
               " was lost: the peer closed its socket or its process ended",
           /*tell_peer=*/false);
    }
  }
}

void Endpoint::Accept(const std::string& id, std::vector<zmq::message_t>& frames) {
  const int fd = zmq_msg_get(frames[1].handle(), ZMQ_SRCFD);
  const std::string peer = PeerUrlOf(fd, frames[1]);
  const std::string expected = std::string(1, wire::kHello) + std::string(wire::kHelloMagic);
  if (frames.size() != 2 || frames[1].to_string() != expected) {
    std::string reason = "bad handshake from " + peer + ": expected one frame 'H" + std::string(wire::kHelloMagic) +
                         "', got " + std::to_string(frames.size() - 1) + " frame(s) starting '" +
                         Printable(frames[1], 0) + "'";
    WEFT_SDK_LOG(WARNING) << "zmq transport: " << address_ << ": " << reason;
    try {
      router_->send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router_->send(zmq::buffer(ErrorFrame(WEFT_INVALID_ARGUMENT, reason)), zmq::send_flags::dontwait);
    } catch (const zmq::error_t&) {
      // The peer is gone already.
    }
    return;
  }
  // Reads pending DISCONNECTED events first, so that a stale entry for a
  // reused fd is retired before this connection takes the fd.
  DrainRouterMonitor();
  auto connection = std::make_shared<Connection>(Connection::Side::kAccepted, core_, peer);
  connection->routing_id = id;
  connection->fd = fd;
  auto* handle = new ConnectionHandle{connection};
  connection->handle = reinterpret_cast<weft_connection_t>(handle);
  accepted_[id] = connection;
  if (fd >= 0) fd_ids_[fd] = id;
  try {
    router_->send(zmq::buffer(id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    router_->send(zmq::buffer(std::string(1, wire::kAccept)), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // The peer left during its handshake; its DISCONNECTED event ends the
    // connection after the host has seen it.
  }
  callbacks_.on_accept(callbacks_.user, connection->handle, peer.c_str());
}

// --- Endpoint: messages --------------------------------------------------------------

void Endpoint::Dispatch(const std::shared_ptr<Connection>& connection, std::vector<zmq::message_t>& frames,
                        std::size_t first, bool too_many_frames) {
  if (!Live(*connection)) return;
  const std::size_t count = frames.size() - first;
  const zmq::message_t& kind_frame = frames[first];
  const char kind = KindOf(kind_frame);
  auto malformed = [&](const std::string& what) {
    Fail(connection, WEFT_DATA_LOSS,
         "zmq transport: " + connection->peer + " sent a malformed message (" + what + "); the connection is closed",
         /*tell_peer=*/true);
  };
  if (too_many_frames) {
    malformed("more than " + std::to_string(wire::kMaxPayloadFrames) + " payload frames");
    return;
  }
  if (kind == wire::kMessage) {
    if (kind_frame.size() != 1 || count < 2) {
      malformed(std::to_string(count) + " frame(s) of kind 'M'; a message has a kind, a header and payload frames");
      return;
    }
    uint64_t header = frames[first + 1].size();
    uint64_t payload = 0;
    for (std::size_t i = first + 2; i < frames.size(); ++i) payload += frames[i].size();
    const auto limit = static_cast<uint64_t>(core_->settings.max_message_bytes);
    const uint64_t own = connection->max_message.load(std::memory_order_relaxed);
    if (own != 0 && own < limit && header + payload > own) {
      Fail(connection, WEFT_RESOURCE_EXHAUSTED,
           "zmq transport: " + connection->peer + " sent a message of " + std::to_string(header + payload) +
               " bytes, more than this connection's limit of " + std::to_string(own) +
               " bytes, set by the host; the connection is closed",
           /*tell_peer=*/true);
      return;
    }
    if (header + payload > limit) {
      Fail(connection, WEFT_RESOURCE_EXHAUSTED,
           "zmq transport: " + connection->peer + " sent a message of " + std::to_string(header + payload) +
               " bytes, more than transports.zmq.max_message_mb allows (" + std::to_string(limit >> 20) +
               " MiB); the connection is closed",
           /*tell_peer=*/true);
      return;
    }
    Received* received = nullptr;
    try {
      received = new Received(connection->handle, frames, first + 1, payload);
    } catch (const std::bad_alloc&) {
      Fail(connection, WEFT_RESOURCE_EXHAUSTED,
           "zmq transport: out of memory joining a message of " + std::to_string(payload) + " bytes from " +
               connection->peer + "; the connection is closed",
           /*tell_peer=*/true);
      return;
    }
    callbacks_.on_message(callbacks_.user, received);
    received->Unref();
    return;
  }
  if (kind == wire::kBye && count == 1 && kind_frame.size() == 1) {
    Fail(connection, WEFT_OK, "", /*tell_peer=*/false);
    return;
  }
  if ((kind == wire::kError && kind_frame.size() >= 2) ||
      (kind == wire::kRefuse && connection->side == Connection::Side::kOutgoing)) {
    weft_code_t code = WEFT_UNAVAILABLE;
    std::size_t from = 1;
    if (kind == wire::kError) {
      code = static_cast<unsigned char>(static_cast<const char*>(kind_frame.data())[1]);
      if (code <= WEFT_OK || code > WEFT_CODE_MAX) code = WEFT_UNKNOWN;
      from = 2;
    }
    Fail(connection, code,
         "zmq transport: " + connection->peer + " closed the connection: " + Printable(kind_frame, from),
         /*tell_peer=*/false);
    return;
  }
  malformed("kind '" + Printable(kind_frame, 0).substr(0, 8) + "' with " + std::to_string(count) + " frame(s)");
}

// --- Endpoint: closing connections -------------------------------------------------------

std::shared_ptr<Latch> Endpoint::SendControl(Connection& connection, const std::string& bytes) {
  auto latch = std::make_shared<Latch>();
  auto* frame = new ControlFrame{bytes, latch};
  zmq::message_t message(frame->bytes.data(), frame->bytes.size(), &ControlFrame::Free, frame);
  try {
    if (connection.side == Connection::Side::kAccepted) {
      if (router_ == nullptr) return latch;
      router_->send(zmq::buffer(connection.routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router_->send(message, zmq::send_flags::dontwait);
    } else if (connection.dealer != nullptr) {
      connection.dealer->send(message, zmq::send_flags::dontwait);
    }
  } catch (const zmq::error_t&) {
    // The peer is gone; |message| releases the frame and sets the latch.
  }
  return latch;
}

void Endpoint::Detach(const std::shared_ptr<Connection>& connection) {
  connection->open = false;
  if (connection->side == Connection::Side::kOutgoing) {
    connection->tracker->MarkDead();
    StopMonitor(connection->dealer.get());
    if (connection->monitor) graveyard_.push_back(std::move(connection->monitor));
    if (connection->dealer) graveyard_.push_back(std::move(connection->dealer));
    std::erase(outgoing_, connection);
  } else {
    accepted_.erase(connection->routing_id);
    auto it = fd_ids_.find(connection->fd);
    if (it != fd_ids_.end() && it->second == connection->routing_id) fd_ids_.erase(it);
  }
}

void Endpoint::Fail(const std::shared_ptr<Connection>& connection, weft_code_t code, const std::string& message,
                    bool tell_peer) {
  if (connection->ended || connection->released) return;
  connection->ended = true;
  connection->open = false;
  if (tell_peer) {
    std::shared_ptr<Latch> written = SendControl(*connection, ErrorFrame(code, message));
    // A DEALER drops what is queued when it closes: give the reason a
    // moment to go out. A ROUTER keeps it queued.
    if (connection->side == Connection::Side::kOutgoing) written->Wait(milliseconds(200));
  }
  if (code != WEFT_OK) {
    WEFT_SDK_LOG(INFO) << message;
  }
  // Whatever is still queued to the peer will not reach it.
  connection->tracker->MarkDead();
  Detach(connection);
  if (stop_) return;
  weft_status_t status = code == WEFT_OK ? nullptr : sdk::MakeStatus(code, message.c_str());
  if (connection->tracker->pending() == 0) {
    callbacks_.on_closed(callbacks_.user, connection->handle, status);
    return;
  }
  pending_closes_.push_back({connection, status, Clock::now() + kClosedAfterDones});
}

void Endpoint::FlushPendingCloses() {
  if (pending_closes_.empty()) return;
  std::vector<PendingClose> waiting;
  waiting.swap(pending_closes_);
  const auto now = Clock::now();
  for (std::size_t i = 0; i < waiting.size(); ++i) {
    PendingClose& close = waiting[i];
    if (stop_ || close.connection->released) {
      // The host closed it first: it hears nothing.
      sdk::host()->status_free(close.status);
    } else if (close.connection->tracker->pending() == 0 || now >= close.deadline) {
      callbacks_.on_closed(callbacks_.user, close.connection->handle, close.status);
    } else {
      pending_closes_.push_back(std::move(close));
    }
  }
}

void Endpoint::CloseOnLoop(const std::shared_ptr<Connection>& connection) {
  if (connection->released) return;
  connection->released = true;
  connection->open = false;
  if (connection->ended) return;
  connection->ended = true;
  std::shared_ptr<Latch> bye = SendControl(*connection, {wire::kBye});
  if (connection->side == Connection::Side::kOutgoing) {
    // ZMQ_LINGER is 0, so what is still queued when the DEALER closes is
    // dropped: wait (bounded) until the bye, and so everything before it,
    // is written.
    bye->Wait(kByeFlush);
  }
  Detach(connection);
}

}  // namespace weft::zmq_transport
