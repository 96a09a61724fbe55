// RpcNode's connecting half: the node's life, channels to peers, calls
// with deadlines, connecting with backoff and the handshake (Hello, and
// the HMAC handshake with a secret). The serving half is rpc_serve.cc.
#include "core/distributed/rpc.h"

#include <algorithm>
#include <future>

#include "core/base/logging.h"
#include "core/distributed/rpc_internal.h"

namespace weft::dist {
using rpc_internal::BusyStatus;
using rpc_internal::Describe;
using rpc_internal::kHelloMaxMessage;
using rpc_internal::kRefusalHint;

std::string SchemeOf(const std::string& address) {
  const std::size_t colon = address.find("://");
  return colon == std::string::npos ? std::string() : address.substr(0, colon);
}

Expected<std::unique_ptr<RpcNode>> RpcNode::Create(Options options, Handler handler) {
  if (options.plugins == nullptr) return InternalError("RpcNode needs the plugin host");
  std::unique_ptr<RpcNode> node(new RpcNode(std::move(options)));
  node->handler_ = std::move(handler);
  if (!node->options_.security.secret_file.empty()) {
    auto secret = ReadSecretFile(node->options_.security.secret_file);
    if (!secret.ok()) return secret.status().WithContext(node->options_.identity);
    node->secret_ = std::move(*secret);
  }
  if (node->options_.security.handshake_timeout_ms <= 0) {
    return InvalidArgumentError("the handshake timeout must be positive, not ",
                                node->options_.security.handshake_timeout_ms, " ms");
  }
  node->pool_ = std::make_unique<ThreadPool>(std::max(1, node->options_.handler_threads), "rpc");
  if (!node->options_.listen_address.empty()) {
    WEFT_ASSIGN_OR_RETURN(Endpoint * endpoint, node->EndpointFor(node->options_.listen_address));
    WEFT_ASSIGN_OR_RETURN(node->address_, endpoint->Address());
  }
  node->deadline_thread_ = std::thread([raw = node.get()] { raw->DeadlineLoop(); });
  return node;
}

RpcNode::~RpcNode() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  deadline_cv_.notify_all();
  if (deadline_thread_.joinable()) deadline_thread_.join();
  // Every waiting call fails (a connecting thread waiting for its Hello
  // too), then the connecting threads end.
  std::unordered_map<uint64_t, PendingCall> pending;
  std::vector<ConnectThread> connecting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending.swap(pending_);
    deadlines_.clear();
  }
  for (auto& [id, call] : pending) {
    if (call.done) call.done(CancelledError(options_.identity, " is shutting down"), Response());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connecting.swap(connect_threads_);
  }
  for (ConnectThread& t : connecting) t.thread.join();
  // No transport callback after the endpoints are closed.
  std::map<std::string, std::unique_ptr<Endpoint>> endpoints;
  std::map<std::string, std::shared_ptr<Channel>> channels;
  // Released outside the lock: closing a connection waits for its I/O
  // thread, which may be in OnClosed waiting for the lock (a peer that
  // hung up just then).
  std::map<Connection*, Accepted> accepted;
  std::map<std::shared_ptr<Connection>, std::chrono::steady_clock::time_point> turned_away;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    endpoints.swap(endpoints_);
    channels.swap(channels_);
    accepted.swap(accepted_);
    turned_away.swap(turned_away_);
    handshake_deadlines_.clear();
  }
  accepted.clear();
  turned_away.clear();
  endpoints.clear();
  channels.clear();
  pool_.reset();
}

Expected<Endpoint*> RpcNode::EndpointFor(const std::string& address) {
  const std::string scheme = SchemeOf(address);
  if (scheme.empty()) {
    return InvalidArgumentError("address ", Quote(address), " names no transport (expected e.g. tcp://host:port)");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = endpoints_.find(scheme);
  if (it != endpoints_.end()) return it->second.get();
  const plugin::TransportPlugin* transport = options_.plugins->transports().Find(scheme);
  if (transport == nullptr) {
    std::string why;
    for (const plugin::PluginInfo& info : options_.plugins->plugins()) {
      if (info.name == scheme) why = StrCat(" (the plugin is ", plugin::StateName(info.state), ": ", info.reason, ")");
    }
    return UnavailableError("no transport plugin for '", scheme, "://' is loaded", why,
                            "; `weft plugins` lists the transports this machine has");
  }
  Endpoint::Handlers handlers;
  handlers.on_message = [this](const std::shared_ptr<Connection>& c, ReceivedMessage m) { OnMessage(c, std::move(m)); };
  handlers.on_closed = [this](const std::shared_ptr<Connection>& c, const Status& s) { OnClosed(c, s); };
  handlers.on_accept = [this](const std::shared_ptr<Connection>& c) { OnAccept(c); };
  const bool listen = !options_.listen_address.empty() && SchemeOf(options_.listen_address) == scheme;
  auto endpoint = Endpoint::Open(transport->table, listen ? options_.listen_address : std::string(), handlers);
  if (!endpoint.ok()) {
    return endpoint.status().WithContext(listen ? StrCat(options_.identity, ": listening on ", options_.listen_address)
                                                : StrCat("opening a ", scheme, " endpoint"));
  }
  Endpoint* raw = endpoint->get();
  endpoints_[scheme] = std::move(*endpoint);
  return raw;
}

std::shared_ptr<RpcNode::Channel> RpcNode::ChannelFor(const Peer& peer) {
  auto& channel = channels_[peer.name];
  if (channel == nullptr || channel->peer.address != peer.address) {
    channel = std::make_shared<Channel>();
    channel->peer = peer;
  }
  return channel;
}

void RpcNode::Call(const Peer& peer, Request request, int64_t timeout_ms, std::function<void(Status, Response)> done,
                   AnswerOn answer_on) {
  std::vector<std::function<void(Status, Response)>> dones;
  dones.push_back(std::move(done));
  Enqueue(peer, std::move(request), timeout_ms, std::move(dones), answer_on);
}

void RpcNode::CallRecvTensors(const Peer& peer, Request request, int64_t timeout_ms,
                              std::vector<std::function<void(Status, Response)>> dones, AnswerOn answer_on) {
  if (request.method != Method::kRecvTensors || request.keys.size() != dones.size() || dones.empty()) {
    const Status wrong = InternalError("CallRecvTensors with a ", MethodName(request.method), " of ",
                                       request.keys.size(), " keys and ", dones.size(), " callbacks");
    for (auto& done : dones) {
      pool_->Schedule([done = std::move(done), wrong] { done(wrong, Response()); });
    }
    return;
  }
  Enqueue(peer, std::move(request), timeout_ms, std::move(dones), answer_on);
}

void RpcNode::Enqueue(const Peer& peer, Request request, int64_t timeout_ms,
                      std::vector<std::function<void(Status, Response)>> dones, AnswerOn answer_on) {
  std::shared_ptr<Channel> channel;
  uint64_t id = 0;
  bool connect = false, send = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      for (auto& done : dones) {
        pool_->Schedule([done = std::move(done)] { done(CancelledError("the caller is shutting down"), Response()); });
      }
      return;
    }
    channel = ChannelFor(peer);
    id = next_call_id_;
    next_call_id_ += dones.size();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (std::size_t i = 0; i < dones.size(); ++i) {
      PendingCall call;
      call.channel = channel;
      call.method = request.method;
      call.answer_on = answer_on;
      call.done = std::move(dones[i]);
      if (timeout_ms > 0) {
        call.has_deadline = true;
        call.deadline = deadline;
        deadlines_.emplace(call.deadline, id + i);
      }
      pending_.emplace(id + i, std::move(call));
    }
    channel->unsent.emplace(id, std::move(request));
    switch (channel->state) {
      case Channel::State::kReady: send = true; break;
      case Channel::State::kIdle:
        channel->state = Channel::State::kConnecting;
        channel->waiting.push_back(id);
        connect = true;
        break;
      case Channel::State::kConnecting: channel->waiting.push_back(id); break;
    }
  }
  if (timeout_ms > 0) deadline_cv_.notify_all();
  if (connect) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = connect_threads_.begin(); it != connect_threads_.end();) {
      if (it->finished->load()) {
        it->thread.join();
        it = connect_threads_.erase(it);
      } else {
        ++it;
      }
    }
    auto finished = std::make_shared<std::atomic<bool>>(false);
    connect_threads_.push_back({std::thread([this, channel, finished] {
                                  Connect(channel);
                                  finished->store(true);
                                }),
                                finished});
  }
  if (send) SendCall(channel, id);
}

Expected<Response> RpcNode::CallSync(const Peer& peer, Request request, int64_t timeout_ms) {
  std::promise<std::pair<Status, Response>> promise;
  auto future = promise.get_future();
  Call(peer, std::move(request), timeout_ms, [&promise](Status s, Response r) {
    promise.set_value({std::move(s), std::move(r)});
  });
  auto [status, response] = future.get();
  if (!status.ok()) return status;
  return std::move(response);
}

void RpcNode::Notify(const Peer& peer, Request request) {
  // A call whose answer nobody reads; it still gets a deadline so that it
  // never lingers.
  Call(peer, std::move(request), options_.connect_timeout_ms * 2, [](Status, Response) {});
}

void RpcNode::Disconnect(const std::string& peer_name) {
  std::shared_ptr<Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = channels_.find(peer_name);
    if (it == channels_.end()) return;
    channel = it->second;
  }
  FailChannel(channel, UnavailableError("disconnected from ", Describe(channel->peer)));
}

void RpcNode::FailPeer(const std::string& peer_name, const Status& status) {
  std::shared_ptr<Channel> channel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = channels_.find(peer_name);
    if (it == channels_.end()) return;
    channel = it->second;
  }
  FailChannel(channel, status);
}

uint64_t RpcNode::PeerIncarnation(const std::string& peer_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = channels_.find(peer_name);
  if (it == channels_.end() || it->second->state != Channel::State::kReady) return 0;
  return it->second->peer_incarnation;
}

void RpcNode::Connect(std::shared_ptr<Channel> channel) {
  const Peer peer = channel->peer;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(options_.connect_timeout_ms);
  auto endpoint = EndpointFor(peer.address);
  if (!endpoint.ok()) {
    FailChannel(channel, endpoint.status().WithContext(StrCat("reaching ", Describe(peer))));
    return;
  }
  Status last;
  Status busy;     // the last attempt a task turned away (BusyFrame)
  Status telling;  // the last attempt that failed for a reason, not for the deadline
  int attempts = 0;
  std::shared_ptr<Connection> connection;
  auto backoff = std::chrono::milliseconds(20);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    ++attempts;
    // Attempts of at most a second, so that shutting down is never slow.
    auto c = (*endpoint)->Connect(peer.address, std::clamp<int64_t>(left, 1, 1000));
    if (c.ok() && secret_.empty()) {
      connection = std::move(*c);
      break;
    }
    if (c.ok()) {
      // Authenticated before anything else; a task that closes before its
      // challenge (too many handshakes at once, or still starting) is
      // tried again, one that fails the handshake is not.
      Status auth = AuthenticateTo(channel, *c, deadline);
      if (auth.ok()) {
        std::lock_guard<std::mutex> lock(mutex_);
        channel->authenticating = false;
        connection = std::move(*c);
        break;
      }
      // Closed before the handshake ends (no callback runs for it after
      // Close), so that a close the peer sent cannot fail the channel's
      // calls with less than what this thread knows.
      (*c)->Close();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (channel->connection == *c) channel->connection = nullptr;
        channel->authenticating = false;
      }
      // Turned away by a task under a flood of connections: tried again
      // until the connect timeout, like one that is not up yet.
      if (auth.code() != Code::kUnavailable && auth.code() != Code::kResourceExhausted) {
        FailChannel(channel, auth.WithContext(StrCat("authenticating with ", Describe(peer))));
        return;
      }
      if (auth.code() == Code::kResourceExhausted) busy = auth;
      last = auth;
    } else {
      last = c.status();
    }
    if (last.code() != Code::kDeadlineExceeded) telling = last;
    // A malformed address, or credentials refused: retrying cannot help.
    if (last.code() == Code::kInvalidArgument || last.code() == Code::kUnauthenticated ||
        last.code() == Code::kPermissionDenied) {
      break;
    }
    std::this_thread::sleep_for(std::min(
        backoff, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  if (connection == nullptr && (last.code() == Code::kUnauthenticated || last.code() == Code::kPermissionDenied)) {
    FailChannel(channel, last.WithContext(StrCat("reaching ", Describe(peer))));
    return;
  }
  // A task that turned attempts away is up, under a flood: that is the
  // news, not a last attempt cut short by the deadline. Nor is a last
  // attempt that had a millisecond left when earlier ones said why they
  // failed (a host that does not resolve, a refused connection).
  if (connection == nullptr && last.code() == Code::kDeadlineExceeded && !telling.ok()) last = telling;
  if (connection == nullptr && !busy.ok()) last = busy;
  if (connection == nullptr) {
    const bool up = last.code() == Code::kInvalidArgument || last.code() == Code::kResourceExhausted;
    FailChannel(channel,
                Status(up ? last.code() : Code::kUnavailable,
                       StrCat("cannot reach ", Describe(peer), " within ", options_.connect_timeout_ms, " ms (",
                              attempts, " attempt", attempts == 1 ? "" : "s", "): ", last.message(),
                              up ? "" : ". Is the task started (`weft serve --config ... --job ... --task ...`)?")));
    return;
  }
  // Hello: the first message on the connection.
  uint64_t hello_id = 0;
  std::promise<std::pair<Status, Response>> hello_done;
  auto hello_future = hello_done.get_future();
  bool turned_away = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    turned_away = turned_away_.erase(connection) != 0;
    if (!turned_away) {
      channel->connection = connection;
      if (peer.name == options_.identity) connection->MarkSelf();
      hello_id = next_call_id_++;
      PendingCall call;
      call.channel = channel;
      call.method = Method::kHello;
      call.has_deadline = true;
      call.deadline = std::max(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(1000));
      call.done = [&hello_done](Status s, Response r) { hello_done.set_value({std::move(s), std::move(r)}); };
      deadlines_.emplace(call.deadline, hello_id);
      pending_.emplace(hello_id, std::move(call));
      Request hello;
      hello.method = Method::kHello;
      hello.cluster_fingerprint = options_.cluster_fingerprint;
      hello.caller = options_.identity;
      hello.caller_incarnation = options_.incarnation;
      hello.expected_task = peer.name;
      channel->unsent.emplace(hello_id, std::move(hello));
    }
  }
  if (turned_away) {
    connection->Close();
    FailChannel(channel, BusyStatus(peer).WithContext(StrCat("handshake with ", peer.name)));
    return;
  }
  deadline_cv_.notify_all();
  SendCall(channel, hello_id);
  auto [status, reply] = hello_future.get();
  if (!status.ok()) {
    if (status.code() == Code::kDeadlineExceeded) {
      status = UnavailableError(Describe(peer), " accepted the connection but did not answer Weft's handshake in time",
                                " (is another program listening on that port?)");
    } else if (secret_.empty() && status.code() == Code::kUnavailable) {
      status =
          UnavailableError(status.message(),
                           " (if the cluster authenticates or encrypts its connections, this config needs the same "
                           "[cluster] secret_file and [transports.tcp] tls settings as the task's)");
    }
    connection->Close();
    FailChannel(channel, status.WithContext(StrCat("handshake with ", peer.name)));
    return;
  }
  std::vector<uint64_t> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (channel->connection != connection) return;  // failed meanwhile
    channel->state = Channel::State::kReady;
    channel->peer_incarnation = reply.incarnation;
    waiting.swap(channel->waiting);
  }
  for (uint64_t id : waiting) SendCall(channel, id);
}

Status RpcNode::AuthenticateTo(const std::shared_ptr<Channel>& channel, const std::shared_ptr<Connection>& connection,
                               std::chrono::steady_clock::time_point deadline) {
  const Peer& peer = channel->peer;
  AuthClient client(secret_);
  WEFT_ASSIGN_OR_RETURN(std::string hello, client.Start());
  auto reply = std::make_shared<std::promise<std::pair<Status, std::string>>>();
  auto future = reply->get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return CancelledError(options_.identity, " is shutting down");
    if (turned_away_.erase(connection) != 0) return BusyStatus(peer);
    channel->connection = connection;
    channel->auth_reply = reply;
    channel->authenticating = true;
  }
  auto forget = [&] {
    std::lock_guard<std::mutex> lock(mutex_);
    if (channel->auth_reply == reply) channel->auth_reply.reset();
  };
  // The task is not trusted yet either: its answer is a small frame.
  connection->SetMaxMessage(kAuthMaxFrame);
  if (Status sent = connection->Send(std::move(hello), {}, nullptr); !sent.ok()) {
    forget();
    return UnavailableError("sending the authentication handshake: ", sent.message());
  }
  const int64_t wait_ms = options_.security.handshake_timeout_ms;
  const auto until = std::max(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms));
  if (future.wait_until(until) != std::future_status::ready) {
    forget();
    return Status(Code::kDeadlineExceeded,
                  StrCat(Describe(peer), " accepted the connection but did not answer the authentication handshake ",
                         "in time (does its config set [cluster] secret_file? Is another program listening there?)"));
  }
  auto [status, challenge] = future.get();
  if (status.ok() && IsBusyFrame(challenge)) return BusyStatus(peer);
  if (status.ok() && IsAuthRefusal(challenge)) {
    return Status(Code::kUnauthenticated,
                  StrCat(Describe(peer), " has no [cluster] secret_file, and so refuses to authenticate; every task ",
                         "and client of the cluster needs the same one"));
  }
  if (!status.ok()) {
    return UnavailableError(Describe(peer), " closed the connection during the authentication handshake (",
                            status.message(), "): it has no [cluster] secret_file, another secret, or too many ",
                            "handshakes at once");
  }
  WEFT_ASSIGN_OR_RETURN(std::string proof, client.Answer(challenge));
  if (Status sent = connection->Send(std::move(proof), {}, nullptr); !sent.ok()) {
    return UnavailableError("sending the authentication proof: ", sent.message());
  }
  connection->SetMaxMessage(options_.security.max_message_bytes);
  return Status();
}

void RpcNode::RefuseConnection(const std::shared_ptr<Connection>& connection, const std::string& why,
                               std::string farewell, bool log) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ForgetAcceptedLocked(connection.get());
  }
  connections_refused_.fetch_add(1);
  if (log) {
    WEFT_LOG(WARNING) << options_.identity << " refused a connection from " << connection->peer() << ": " << why
                      << (secret_.empty() ? "; nothing was run" : kRefusalHint);
  }
  if (!farewell.empty()) {
    // Closed once the farewell is out (or could not go).
    Status sent = connection->Send(std::move(farewell), {}, nullptr, [connection](Status) { connection->Close(); });
    if (sent.ok()) return;
  }
  connection->Close();
}

void RpcNode::SendCall(const std::shared_ptr<Channel>& channel, uint64_t call_id) {
  Envelope envelope;
  std::shared_ptr<Connection> connection;
  int64_t deadline_ms = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = channel->unsent.find(call_id);
    if (it == channel->unsent.end()) return;  // finished meanwhile
    envelope.request = std::move(it->second);
    channel->unsent.erase(it);
    connection = channel->connection;
    auto call = pending_.find(call_id);
    if (call == pending_.end()) return;
    if (call->second.has_deadline) {
      deadline_ms = std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(
                                             call->second.deadline - std::chrono::steady_clock::now())
                                             .count());
    }
  }
  const Method method = envelope.request.method;
  const std::size_t answers = method == Method::kRecvTensors ? envelope.request.keys.size() : 1;
  if (connection == nullptr) {
    FinishAll(call_id, answers, UnavailableError("no connection to ", Describe(channel->peer)));
    return;
  }
  envelope.call_id = call_id;
  envelope.deadline_ms = deadline_ms;
  auto encoded = Encode(envelope);
  if (!encoded.ok()) {
    FinishAll(call_id, answers, encoded.status().WithContext(StrCat(MethodName(method), " to ", channel->peer.name)));
    return;
  }
  Status sent = connection->Send(
      std::move(encoded->header), encoded->slices, encoded->keepalive,
      [this, call_id, answers, channel, method](Status s) {
        if (!s.ok()) {
          FinishAll(call_id, answers,
                    s.WithContext(StrCat("sending ", MethodName(method), " to ", Describe(channel->peer))));
        }
      });
  if (!sent.ok()) {
    FinishAll(call_id, answers,
              sent.WithContext(StrCat("sending ", MethodName(method), " to ", Describe(channel->peer))));
  }
}

void RpcNode::FinishAll(uint64_t first_call_id, std::size_t answers, const Status& status) {
  for (std::size_t i = 0; i < answers; ++i) Finish(first_call_id + i, status, Response());
}

void RpcNode::Finish(uint64_t call_id, Status status, Response response) {
  std::function<void(Status, Response)> done;
  AnswerOn answer_on = AnswerOn::kPool;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pending_.find(call_id);
    if (it == pending_.end()) return;
    done = std::move(it->second.done);
    answer_on = it->second.answer_on;
    if (it->second.has_deadline) {
      auto range = deadlines_.equal_range(it->second.deadline);
      for (auto d = range.first; d != range.second; ++d) {
        if (d->second == call_id) {
          deadlines_.erase(d);
          break;
        }
      }
    }
    it->second.channel->unsent.erase(call_id);
    pending_.erase(it);
  }
  if (!done) return;
  // Only an answer comes with an OK status, and only on the transport's
  // thread, which holds no lock of this node here.
  if (answer_on == AnswerOn::kTransportThreadIfSmall && IsSmallAnswer(status, response)) {
    done(std::move(status), std::move(response));
    return;
  }
  pool_->Schedule([done = std::move(done), status = std::move(status), response = std::move(response)]() mutable {
    done(std::move(status), std::move(response));
  });
}

void RpcNode::FailChannel(const std::shared_ptr<Channel>& channel, const Status& status) {
  std::vector<uint64_t> ids;
  std::shared_ptr<Connection> connection;
  std::shared_ptr<std::promise<std::pair<Status, std::string>>> auth_reply;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auth_reply.swap(channel->auth_reply);
    channel->state = Channel::State::kIdle;
    connection = std::move(channel->connection);
    channel->waiting.clear();
    for (const auto& [id, call] : pending_) {
      if (call.channel == channel) ids.push_back(id);
    }
    auto it = channels_.find(channel->peer.name);
    if (it != channels_.end() && it->second == channel) channels_.erase(it);
  }
  if (connection != nullptr) connection->Close();
  if (auth_reply != nullptr) auth_reply->set_value({status, std::string()});
  for (uint64_t id : ids) Finish(id, status, Response());
}

void RpcNode::DeadlineLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (deadlines_.empty() && handshake_deadlines_.empty()) {
      deadline_cv_.wait(lock);
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!handshake_deadlines_.empty() && handshake_deadlines_.begin()->first <= now) {
      Connection* raw = handshake_deadlines_.begin()->second;
      handshake_deadlines_.erase(handshake_deadlines_.begin());
      auto it = accepted_.find(raw);
      if (it == accepted_.end()) continue;
      std::shared_ptr<Connection> connection = it->second.connection;
      const bool authenticating = it->second.auth != nullptr;
      accepted_.erase(it);
      lock.unlock();
      RefuseConnection(
          connection,
          StrCat(authenticating ? "it did not complete the authentication handshake" : "it did not say Hello",
                 " within ", options_.security.handshake_timeout_ms, " ms ([cluster] handshake_timeout_ms)"));
      lock.lock();
      continue;
    }
    if (deadlines_.empty()) {
      // A copy: the entry may be erased while this waits without the lock.
      const auto next_handshake = handshake_deadlines_.begin()->first;
      deadline_cv_.wait_until(lock, next_handshake);
      continue;
    }
    auto next = deadlines_.begin()->first;
    if (!handshake_deadlines_.empty()) next = std::min(next, handshake_deadlines_.begin()->first);
    if (now < next) {
      deadline_cv_.wait_until(lock, next);
      continue;
    }
    const uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    it->second.has_deadline = false;  // already off the list
    const std::string what = StrCat(MethodName(it->second.method), " to ", Describe(it->second.channel->peer));
    lock.unlock();
    Finish(id, Status(Code::kDeadlineExceeded, StrCat(what, " got no answer before its deadline")), Response());
    lock.lock();
  }
}

}  // namespace weft::dist
