// RPC between the tasks of a cluster: requests and responses (wire.h)
// over transport plugins, with a deadline on every call.
//
// An RpcNode is one process's end: it listens on its task's address (when
// it serves) and calls other tasks, opening one connection per peer on
// first use. A new connection first exchanges Hello, which checks that
// the peer is the task the caller expects, of the same cluster, speaking
// the same wire version; only then do calls go out. Connecting retries
// with backoff until the connect timeout, so tasks may start in any order.
//
//   RpcNode::Options o;  o.identity = "client";  ...
//   WEFT_ASSIGN_OR_RETURN(auto node, RpcNode::Create(o, nullptr));
//   node->Call(peer, request, 5000, [](Status s, Response r) { ... });
//
// Callbacks (responses and the server's handler) run on the node's own
// thread pool and may block briefly. Two exceptions run on the transport's
// thread and must not block: the handler of RecvTensor (it answers from a
// rendezvous, core/distributed/task_service.cc), and a small successful
// answer of a call made with AnswerOn::kTransportThreadIfSmall (a tensor
// pull, whose answer continues the step:
// core/distributed/remote_rendezvous.cc).
#ifndef WEFT_CORE_DIST_RPC_H_
#define WEFT_CORE_DIST_RPC_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/base/status.h"
#include "core/base/thread_pool.h"
#include "core/distributed/auth.h"
#include "core/distributed/incarnation.h"
#include "core/distributed/transport.h"
#include "core/distributed/wire.h"
#include "core/plugin/plugin_host.h"

namespace weft::dist {

// Another task as a caller sees it.
struct Peer {
  std::string name;     // "/job:ps/task:0"
  std::string address;  // with the transport's scheme: "tcp://127.0.0.1:7070"
};

// How a node guards its connections (docs/distributed.md, "Security").
struct RpcSecurity {
  // [cluster] secret_file: when set, every connection runs the handshake
  // of core/distributed/auth.h before anything else is read from it, both ways.
  std::string secret_file;
  // [cluster] max_message_mb, in bytes: the largest message an
  // authenticated peer may send (0: the transport's own limit). Before it
  // authenticated, a peer may send kAuthMaxFrame bytes; before Hello, 64 KiB.
  uint64_t max_message_bytes = 0;
  // [cluster] handshake_timeout_ms: an accepted connection that has not
  // authenticated and said Hello by then is closed.
  int64_t handshake_timeout_ms = 10000;
  // At most this many connections are in their handshake at once (a flood
  // of connections must not take every descriptor). A new connection past
  // it takes the place of the oldest one that has not sent a whole message
  // yet, or else of the oldest, which is closed after a frame that tells
  // it why (BusyFrame): connections that idle or stall cannot lock the
  // cluster's own tasks and clients out.
  int max_pending_handshakes = 256;
};

class RpcNode {
 public:
  struct Options {
    // Where transports come from (by the scheme of each address).
    const plugin::PluginHost* plugins = nullptr;
    // Listen here (with its scheme); empty for a node that only calls.
    std::string listen_address;
    // Who this node is: "/job:ps/task:0", or "client".
    std::string identity = "client";
    uint64_t incarnation = 0;
    uint64_t cluster_fingerprint = 0;
    // How long to keep trying to reach a peer (connect and Hello).
    int64_t connect_timeout_ms = 10000;
    int handler_threads = 4;
    RpcSecurity security;
    // A task of the cluster ("/job:..."), known by an earlier incarnation,
    // said Hello with a newer one: it was restarted. Runs before the Hello
    // is answered, so before any request of the new process.
    std::function<void(const std::string& caller, uint64_t before, uint64_t now)> on_caller_restarted;
  };
  using Reply = std::function<void(Status, Response)>;
  // Serves one request; calls |reply| exactly once, from any thread.
  using Handler = std::function<void(const std::string& caller, Request request, Reply reply)>;

  static Expected<std::unique_ptr<RpcNode>> Create(Options options, Handler handler);
  // Stops listening and fails every call still waiting (CANCELLED).
  ~RpcNode();

  // The address it listens on, with the port chosen for ":0".
  const std::string& address() const { return address_; }
  const Options& options() const { return options_; }
  // The pool that runs callbacks (and, from a pulled tensor's answer, the
  // expensive nodes after it: core/distributed/remote_rendezvous.cc).
  ThreadPool* pool() const { return pool_.get(); }

  // Where a call's |done| runs: on the node's pool, or, for a successful
  // answer whose tensor (if any) has at most kSmallAnswerBytes, on the
  // transport's thread that received it (saving the wake-up of a pool
  // thread; |done| must then not block). A larger answer, whose bytes took
  // longer to come than a wake-up, and an error, which may come from a
  // thread that holds locks, go through the pool.
  enum class AnswerOn { kPool, kTransportThreadIfSmall };
  static constexpr uint64_t kSmallAnswerBytes = 16 << 10;
  // Whether an answer is one that kTransportThreadIfSmall completes on the
  // transport's thread.
  static bool IsSmallAnswer(const Status& status, const Response& response) {
    return status.ok() && response.tensor.byte_size() <= kSmallAnswerBytes;
  }
  // Calls |peer|; |done| runs once with the response or why there is
  // none. |timeout_ms| <= 0 means no deadline (avoid).
  void Call(const Peer& peer, Request request, int64_t timeout_ms, std::function<void(Status, Response)> done,
            AnswerOn answer_on = AnswerOn::kPool);
  // Many tensor pulls from |peer| in one message: |request| is a
  // RecvTensors (Request::keys), and dones[i] runs once with keys[i]'s
  // answer, when it comes, or why none does, as Call's |done| would. One
  // deadline for all; dones.size() must equal the keys'.
  void CallRecvTensors(const Peer& peer, Request request, int64_t timeout_ms,
                       std::vector<std::function<void(Status, Response)>> dones, AnswerOn answer_on);
  // Call, waiting for the answer.
  Expected<Response> CallSync(const Peer& peer, Request request, int64_t timeout_ms);
  // Sends |request| to |peer| without waiting for an answer (best effort).
  void Notify(const Peer& peer, Request request);

  // Forgets |peer|'s connection (the next call reconnects).
  void Disconnect(const std::string& peer_name);
  // Fails every call waiting on |peer_name| with |status| and drops its
  // connection: what a lost task's heartbeats lead to.
  void FailPeer(const std::string& peer_name, const Status& status);
  // The incarnation |peer_name| gave in its Hello on the current
  // connection; 0 when there is none.
  uint64_t PeerIncarnation(const std::string& peer_name);

  // How many requests reached the handler, and how many accepted
  // connections were refused before any did (a failed handshake, a first
  // message that is not one, silence past the handshake timeout, too many
  // handshakes at once): what the security tests watch.
  uint64_t requests_handled() const { return requests_handled_.load(); }
  uint64_t connections_refused() const { return connections_refused_.load(); }

 private:
  struct Channel;
  struct PendingCall {
    std::shared_ptr<Channel> channel;
    Method method;
    std::chrono::steady_clock::time_point deadline;
    bool has_deadline = false;
    AnswerOn answer_on = AnswerOn::kPool;
    std::function<void(Status, Response)> done;
  };

  explicit RpcNode(Options options) : options_(std::move(options)) {}
  // Call and CallRecvTensors: one request, answered under consecutive
  // call ids, one per done.
  void Enqueue(const Peer& peer, Request request, int64_t timeout_ms,
               std::vector<std::function<void(Status, Response)>> dones, AnswerOn answer_on);
  // Finish for each of a request's answers (call_id and the ids after it).
  void FinishAll(uint64_t first_call_id, std::size_t answers, const Status& status);
  Expected<Endpoint*> EndpointFor(const std::string& address);
  std::shared_ptr<Channel> ChannelFor(const Peer& peer);
  void Connect(std::shared_ptr<Channel> channel);
  void SendCall(const std::shared_ptr<Channel>& channel, uint64_t call_id);
  void FailChannel(const std::shared_ptr<Channel>& channel, const Status& status);
  void Finish(uint64_t call_id, Status status, Response response);
  void OnMessage(const std::shared_ptr<Connection>& connection, ReceivedMessage message);
  void OnClosed(const std::shared_ptr<Connection>& connection, const Status& status);
  void ServeRequest(const std::shared_ptr<Connection>& connection, Envelope envelope);
  void DeadlineLoop();
  // An accepted connection that has not yet said Hello.
  struct Accepted {
    std::shared_ptr<Connection> connection;
    std::string caller;                // after Hello
    uint64_t caller_incarnation = 0;   // from its Hello
    std::unique_ptr<AuthServer> auth;  // while authenticating
    std::chrono::steady_clock::time_point handshake_deadline;
    std::chrono::steady_clock::time_point accepted_at;
    bool spoke = false;  // a whole message arrived from it
  };
  void OnAccept(const std::shared_ptr<Connection>& connection);
  // Runs the handshake on a frame from an accepted connection that has not
  // authenticated; false when it was refused (and closed).
  bool Authenticate(const std::shared_ptr<Connection>& connection, const ReceivedMessage& message);
  // Logs (unless |log| is false) and closes; |farewell|, when given, is
  // sent first.
  void RefuseConnection(const std::shared_ptr<Connection>& connection, const std::string& why,
                        std::string farewell = {}, bool log = true);
  // Takes an accepted connection off the handshake clock (a no-op once it
  // said Hello); under mutex_.
  void EndHandshakeLocked(Connection* connection, const Accepted& accepted);
  // Drops an accepted connection and its handshake deadline; under mutex_.
  void ForgetAcceptedLocked(Connection* connection);
  // The client's side of the handshake, on a new connection of |channel|.
  Status AuthenticateTo(const std::shared_ptr<Channel>& channel, const std::shared_ptr<Connection>& connection,
                        std::chrono::steady_clock::time_point deadline);

  Options options_;
  Handler handler_;
  std::string address_;
  std::unique_ptr<ThreadPool> pool_;

  std::mutex mutex_;
  std::condition_variable deadline_cv_;
  bool stopping_ = false;
  std::map<std::string, std::unique_ptr<Endpoint>> endpoints_;  // by scheme
  std::map<std::string, std::shared_ptr<Channel>> channels_;    // by peer name
  std::unordered_map<uint64_t, PendingCall> pending_;
  std::multimap<std::chrono::steady_clock::time_point, uint64_t> deadlines_;
  // Accepted connections and who is on the other end (after Hello).
  std::map<Connection*, Accepted> accepted_;
  // Accepted connections still in their handshake, by deadline.
  std::multimap<std::chrono::steady_clock::time_point, Connection*> handshake_deadlines_;
  // This process's new connections that a task turned away (BusyFrame)
  // before the connecting thread tied them to their channel, and when.
  std::map<std::shared_ptr<Connection>, std::chrono::steady_clock::time_point> turned_away_;
  std::string secret_;  // read from security.secret_file; empty: none
  // The newest incarnation each task of the cluster said Hello with:
  // connections of an older one are refused (core/distributed/incarnation.h).
  std::map<std::string, uint64_t> newest_incarnation_;
  // Evictions of idle connections (OnAccept), logged at most once a second.
  uint64_t evicted_unlogged_ = 0;
  std::chrono::steady_clock::time_point evictions_logged_at_;
  std::atomic<uint64_t> requests_handled_{0};
  std::atomic<uint64_t> connections_refused_{0};
  uint64_t next_call_id_ = 1;
  std::thread deadline_thread_;
  // Threads connecting to peers, each with a flag it sets when it ends:
  // finished ones are joined when the next starts, the rest when the node
  // goes, so reconnections do not pile up threads.
  struct ConnectThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<ConnectThread> connect_threads_;
};

// "tcp://127.0.0.1:7070" -> "tcp".
std::string SchemeOf(const std::string& address);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_RPC_H_
