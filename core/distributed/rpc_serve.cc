// RpcNode's serving half: accepting connections, the handshake and
// authentication of those who connect, and the messages that come in
// (requests to serve, responses to this node's calls). The connecting
// half is rpc.cc.
#include <algorithm>
#include <future>

#include "core/base/logging.h"
#include "core/distributed/rpc.h"
#include "core/distributed/rpc_internal.h"

namespace weft::dist {
using rpc_internal::BusyStatus;
using rpc_internal::Describe;
using rpc_internal::kHelloMaxMessage;
using rpc_internal::kRefusalHint;

void RpcNode::OnAccept(const std::shared_ptr<Connection>& connection) {
  const bool authenticate = !secret_.empty();
  // Until it proves itself the peer may send only what the handshake needs.
  connection->SetMaxMessage(authenticate ? kAuthMaxFrame : kHelloMaxMessage);
  const auto now = std::chrono::steady_clock::now();
  const std::size_t most = static_cast<std::size_t>(std::max(1, options_.security.max_pending_handshakes));
  std::shared_ptr<Connection> evicted;
  std::string evicted_why;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (handshake_deadlines_.size() >= most) {
      // Room for the new one: the oldest connection that has not sent a
      // whole message, or else the oldest of all (deadlines are in order of
      // acceptance). A real peer speaks at once and ends its handshake in a
      // round trip, so connections that idle or stall cannot keep the
      // cluster's own tasks and clients out.
      Connection* victim = nullptr;
      for (const auto& [deadline, raw] : handshake_deadlines_) {
        auto it = accepted_.find(raw);
        if (it == accepted_.end()) continue;
        if (victim == nullptr) victim = raw;
        if (!it->second.spoke) {
          victim = raw;
          break;
        }
      }
      if (victim != nullptr) {
        const Accepted& a = accepted_.at(victim);
        evicted = a.connection;
        ++evicted_unlogged_;
        if (now - evictions_logged_at_ >= std::chrono::seconds(1)) {
          const int64_t age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - a.accepted_at).count();
          evicted_why = StrCat(
              options_.identity, " made room for a new connection: it closed the one from ", evicted->peer(),
              ", which had ", a.spoke ? "not finished its handshake" : "sent nothing", " in ", age_ms, " ms while ",
              handshake_deadlines_.size(), " connections were in their handshake (at most ", most, ")",
              evicted_unlogged_ > 1 ? StrCat("; ", evicted_unlogged_ - 1, " more since the last such line") : "",
              ": a flood of connections?; nothing was run");
          evicted_unlogged_ = 0;
          evictions_logged_at_ = now;
        }
        ForgetAcceptedLocked(victim);
      }
    }
    Accepted accepted;
    accepted.connection = connection;
    if (authenticate) accepted.auth = std::make_unique<AuthServer>(secret_);
    accepted.accepted_at = now;
    accepted.handshake_deadline = now + std::chrono::milliseconds(options_.security.handshake_timeout_ms);
    handshake_deadlines_.emplace(accepted.handshake_deadline, connection.get());
    accepted_[connection.get()] = std::move(accepted);
  }
  if (evicted != nullptr) {
    // Logged at most once a second, counting the others: a flood must not
    // flood the log too.
    if (!evicted_why.empty()) {
      WEFT_LOG(WARNING) << evicted_why;
    }
    RefuseConnection(evicted, "", BusyFrame(), /*log=*/false);
  }
  deadline_cv_.notify_all();
}

void RpcNode::EndHandshakeLocked(Connection* connection, const Accepted& accepted) {
  if (!accepted.caller.empty()) return;  // ended at its Hello
  auto range = handshake_deadlines_.equal_range(accepted.handshake_deadline);
  for (auto d = range.first; d != range.second; ++d) {
    if (d->second == connection) {
      handshake_deadlines_.erase(d);
      return;
    }
  }
}

void RpcNode::ForgetAcceptedLocked(Connection* connection) {
  auto it = accepted_.find(connection);
  if (it == accepted_.end()) return;
  EndHandshakeLocked(connection, it->second);
  accepted_.erase(it);
}

bool RpcNode::Authenticate(const std::shared_ptr<Connection>& connection, const ReceivedMessage& message) {
  Expected<std::string> reply = std::string();
  bool done = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = accepted_.find(connection.get());
    if (it == accepted_.end()) return false;  // refused meanwhile
    if (it->second.auth == nullptr) return true;
    if (message.payload_size() != 0 || message.header().size() > kAuthMaxFrame) {
      reply =
          Status(Code::kUnauthenticated, StrCat("sent a message of ", message.header().size() + message.payload_size(),
                                                " bytes where a handshake frame was due"));
    } else {
      reply = it->second.auth->OnFrame(message.header());
      done = reply.ok() && it->second.auth->authenticated();
      if (done) it->second.auth.reset();
    }
  }
  if (!reply.ok()) {
    RefuseConnection(connection, StrCat("it ", reply.status().message()));
    return false;
  }
  if (!reply->empty()) {
    if (Status sent = connection->Send(std::move(*reply), {}, nullptr); !sent.ok()) {
      RefuseConnection(connection, StrCat("answering its handshake: ", sent.message()));
      return false;
    }
  }
  if (done) connection->SetMaxMessage(kHelloMaxMessage);
  return true;
}

void RpcNode::OnMessage(const std::shared_ptr<Connection>& connection, ReceivedMessage message) {
  const int64_t arrived_ns = SteadyNowNs();
  std::string from = StrCat("peer ", connection->peer());
  std::shared_ptr<Channel> channel;
  std::shared_ptr<std::promise<std::pair<Status, std::string>>> auth_reply;
  bool authenticating = false, before_hello = false, known = false, busy_fails_channel = false;
  // A task turned this process's new connection away (BusyFrame).
  const bool busy = message.payload_size() == 0 && IsBusyFrame(message.header());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, c] : channels_) {
      if (c->connection == connection) {
        channel = c;
        from = Describe(c->peer);
      }
    }
    if (auto it = accepted_.find(connection.get()); it != accepted_.end()) {
      authenticating = it->second.auth != nullptr;
      before_hello = it->second.caller.empty();
      it->second.spoke = true;
      known = true;
    }
    if (busy && !known) {
      if (channel == nullptr) {
        // Before the connecting thread tied the connection to its channel:
        // it finds it here (Connect, AuthenticateTo). Entries no thread
        // takes (a connection forgotten meanwhile) go after a while.
        const auto now = std::chrono::steady_clock::now();
        std::erase_if(turned_away_, [&](const auto& entry) { return now - entry.second > std::chrono::seconds(30); });
        turned_away_[connection] = now;
        return;
      }
      // Without a secret, the connecting thread waits for Hello's answer;
      // with one, for the challenge, which this frame is read as below.
      busy_fails_channel = channel->state != Channel::State::kReady && channel->auth_reply == nullptr;
    }
    if (channel != nullptr) auth_reply.swap(channel->auth_reply);
  }
  if (busy_fails_channel) {
    FailChannel(channel, BusyStatus(channel->peer));
    return;
  }
  if (auth_reply != nullptr) {
    // The challenge of a task this process is connecting to.
    if (message.payload_size() != 0) {
      auth_reply->set_value({DataLossError(from, " answered the authentication handshake with a payload"), ""});
    } else {
      auth_reply->set_value({Status(), std::string(message.header())});
    }
    return;
  }
  if (authenticating) {
    Authenticate(connection, message);
    return;
  }
  auto envelope = Decode(message, from);
  if (!envelope.ok()) {
    if (channel == nullptr && before_hello) {
      if (LooksLikeAuthFrame(message.header())) {
        RefuseConnection(connection,
                         "it began the authentication handshake, but this task has no [cluster] secret_file (every "
                         "task of the cluster needs the same one)",
                         AuthRefusalFrame());
      } else {
        RefuseConnection(connection, StrCat("its first message is not Weft's Hello: ", envelope.status().message()));
      }
      return;
    }
    WEFT_LOG(WARNING) << envelope.status().message() << "; closing the connection";
    if (channel != nullptr) {
      FailChannel(channel, envelope.status());
    } else {
      connection->Close();
      std::lock_guard<std::mutex> lock(mutex_);
      ForgetAcceptedLocked(connection.get());
    }
    return;
  }
  if (envelope->is_response) {
    if (channel == nullptr) {
      WEFT_LOG(WARNING) << "a response from " << from << ", which this process never called; ignored";
      return;
    }
    Finish(envelope->call_id, envelope->status, std::move(envelope->response));
    return;
  }
  if (envelope->request.method == Method::kRecvTensors) {
    // Each key is a RecvTensor of its own, answered under call id + i
    // (Decode checked that the ids do not wrap).
    Envelope& batch = *envelope;
    for (std::size_t i = 0; i < batch.request.keys.size(); ++i) {
      Envelope one;
      one.version = batch.version;
      one.call_id = batch.call_id + i;
      one.deadline_ms = batch.deadline_ms;
      one.incarnation = batch.incarnation;
      one.request.method = Method::kRecvTensor;
      one.request.step_id = batch.request.step_id;
      one.request.key = std::move(batch.request.keys[i]);
      one.request.target_incarnation = batch.request.target_incarnation;
      ServeRequest(connection, std::move(one));
    }
    return;
  }
  if (envelope->request.method == Method::kRecvTensor) {
    // A tensor pull is served here, on the transport's thread: it looks the
    // tensor up and answers at once, or later from the thread of the _Send
    // that produces it, which costs less than waking a pool thread for it
    // (docs/distributed-internals.md, "A tensor's trip").
    ServeRequest(connection, std::move(*envelope));
    return;
  }
  envelope->request.received_ns = arrived_ns;
  pool_->Schedule([this, connection, e = std::move(*envelope)]() mutable {
    CountQueued(SteadyNowNs() - e.request.received_ns);
    ServeRequest(connection, std::move(e));
  });
}

void RpcNode::ServeRequest(const std::shared_ptr<Connection>& connection, Envelope envelope) {
  const uint64_t call_id = envelope.call_id;
  const Method method = envelope.request.method;
  // It may run after the node is gone (a step that ends as its task shuts
  // down): it holds what it needs, never the node.
  auto reply = [connection, call_id, method, incarnation = options_.incarnation, identity = options_.identity](
                   Status status, Response response) {
    if (call_id == 0) return;
    Envelope out;
    out.call_id = call_id;
    out.is_response = true;
    out.incarnation = incarnation;
    out.status = std::move(status);
    out.response = std::move(response);
    if (out.status.ok() && out.response.method == Method::kNone) out.response.method = Method::kNone;
    auto encoded = Encode(out);
    if (!encoded.ok()) {
      // Tell the caller rather than leave it waiting.
      Envelope error;
      error.call_id = call_id;
      error.is_response = true;
      error.incarnation = incarnation;
      error.status = encoded.status().WithContext(StrCat(identity, ": answering ", MethodName(method)));
      encoded = Encode(error);
      if (!encoded.ok()) return;
    }
    Status sent = connection->Send(std::move(encoded->header), encoded->slices, encoded->keepalive);
    if (!sent.ok()) {
      WEFT_LOG(DEBUG) << "answering " << MethodName(method) << ": " << sent.message();
    }
  };
  std::string caller;
  uint64_t caller_incarnation = 0, newest = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = accepted_.find(connection.get());
    if (it != accepted_.end()) {
      caller = it->second.caller;
      caller_incarnation = it->second.caller_incarnation;
      if (auto n = newest_incarnation_.find(caller); n != newest_incarnation_.end()) newest = n->second;
    }
  }
  if (method == Method::kHello) {
    const Request& hello = envelope.request;
    if (hello.cluster_fingerprint != options_.cluster_fingerprint && hello.cluster_fingerprint != 0 &&
        options_.cluster_fingerprint != 0) {
      reply(FailedPreconditionError(options_.identity, " at ", address_, " belongs to another cluster (its config ",
                                    "lists other tasks or addresses than the caller's): two clusters' configs use ",
                                    "the same address"),
            Response());
      return;
    }
    if (hello.expected_task != options_.identity) {
      reply(FailedPreconditionError(address_, " is ", options_.identity, ", not ", hello.expected_task,
                                    ": the caller's cluster config does not match this task's"),
            Response());
      return;
    }
    const std::string who = hello.caller.empty() ? std::string("client") : hello.caller;
    // Tasks of the cluster are told apart by incarnation; clients ("client",
    // `weft cluster status`) are many processes under one name.
    const bool tracked = who.rfind("/job:", 0) == 0 && hello.caller_incarnation != 0;
    uint64_t before = 0;
    Status older;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = accepted_.find(connection.get());
      if (it == accepted_.end()) return;  // refused or closed meanwhile
      uint64_t* known = tracked ? &newest_incarnation_[who] : nullptr;
      if (known != nullptr && hello.caller_incarnation < *known) {
        older = OlderCallerError(options_.identity, "Hello", who, hello.caller_incarnation, *known);
      } else {
        if (known != nullptr && hello.caller_incarnation > *known) {
          before = *known;
          *known = hello.caller_incarnation;
        }
        EndHandshakeLocked(connection.get(), it->second);
        it->second.caller = who;
        it->second.caller_incarnation = hello.caller_incarnation;
      }
    }
    if (!older.ok()) {
      // Refused, not served: it stays on the handshake clock and goes.
      WEFT_LOG(WARNING) << older.message();
      reply(older, Response());
      return;
    }
    if (before != 0) {
      WEFT_LOG_AT(FirstToSeeRestart(who, hello.caller_incarnation) ? LogLevel::kInfo : LogLevel::kDebug)
          << options_.identity << ": " << who << " was restarted (incarnation " << FormatIncarnation(before) << " -> "
          << FormatIncarnation(hello.caller_incarnation) << ")";
      if (options_.on_caller_restarted) options_.on_caller_restarted(who, before, hello.caller_incarnation);
    }
    connection->SetMaxMessage(options_.security.max_message_bytes);
    if (hello.caller == options_.identity) connection->MarkSelf();
    Response r;
    r.method = Method::kHello;
    r.task = options_.identity;
    r.incarnation = options_.incarnation;
    reply(Status(), std::move(r));
    return;
  }
  if (caller.empty()) {
    reply(FailedPreconditionError("the first message on a connection to ", options_.identity, " must be Hello"),
          Response());
    return;
  }
  if (newest != 0 && caller_incarnation < newest) {
    reply(OlderCallerError(options_.identity, std::string(MethodName(method)), caller, caller_incarnation, newest),
          Response());
    return;
  }
  if (envelope.incarnation != 0 && envelope.incarnation != options_.incarnation) {
    reply(RestartedTaskError(options_.identity, address_, options_.incarnation, envelope.incarnation, caller),
          Response());
    return;
  }
  if (!handler_) {
    reply(UnimplementedError(options_.identity, " serves no requests"), Response());
    return;
  }
  requests_handled_.fetch_add(1);
  handler_(caller, std::move(envelope.request), reply);
}

void RpcNode::OnClosed(const std::shared_ptr<Connection>& connection, const Status& status) {
  std::shared_ptr<Channel> channel;
  std::shared_ptr<std::promise<std::pair<Status, std::string>>> auth_reply;
  bool in_handshake = false, authenticating = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = accepted_.find(connection.get()); it != accepted_.end()) {
      in_handshake = it->second.caller.empty();
      ForgetAcceptedLocked(connection.get());
    }
    for (const auto& [name, c] : channels_) {
      if (c->connection == connection) channel = c;
    }
    if (channel != nullptr) {
      auth_reply.swap(channel->auth_reply);
      authenticating = channel->authenticating;
    }
  }
  if (in_handshake) {
    // The transport refused what it sent (a length past the handshake's
    // limit), the link broke, or the peer hung up mid-handshake (as one
    // does that finds the secret wrong): refused all the same.
    connections_refused_.fetch_add(1);
    WEFT_LOG(WARNING) << options_.identity << " refused a connection from " << connection->peer() << ": "
                      << (status.ok() ? std::string("it hung up during its handshake") : status.message())
                      << (secret_.empty() ? "; nothing was run" : kRefusalHint);
  }
  if (auth_reply != nullptr) {
    // The connecting thread reports it, with what it knows.
    auth_reply->set_value({status.ok() ? UnavailableError("closed") : status, std::string()});
    return;
  }
  if (authenticating) return;  // the connecting thread reports it
  if (channel == nullptr) return;
  const bool connecting = channel->state != Channel::State::kReady;
  // "during Weft's handshake": not a task lost mid-run (core/distributed/lost_task.h).
  FailChannel(channel, UnavailableError(Describe(channel->peer), " closed the connection",
                                        connecting ? " during Weft's handshake" : "",
                                        status.ok() ? std::string() : StrCat(": ", status.message()),
                                        connecting && secret_.empty()
                                            ? " (if the cluster authenticates or encrypts its connections, this config "
                                              "needs the same [cluster] secret_file and [transports.tcp] tls "
                                              "settings as the task's)"
                                            : ""));
}

}  // namespace weft::dist
