// The task service: what `weft serve` runs. A generic worker of a cluster
// (parameter servers need no code of their own): it lists its devices,
// answers which of them can run each node of a graph, keeps graph
// partitions registered by clients, runs them for a step, hands tensors to
// the tasks that pull them, and cancels or cleans up a step on request.
// Its devices are named "/job:<job>/task:<i>/device:CPU:0" and so on; its
// variables live in its devices' resource managers, so they persist from
// one step to the next.
//
//   TaskService::Options o;
//   o.name = "/job:ps/task:0";  o.listen_address = "tcp://127.0.0.1:7070";  ...
//   WEFT_ASSIGN_OR_RETURN(auto service, TaskService::Start(o, plugins,
//   devices));
#ifndef WEFT_CORE_DIST_TASK_SERVICE_H_
#define WEFT_CORE_DIST_TASK_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/base/thread_pool.h"
#include "core/distributed/heartbeat.h"
#include "core/distributed/kv_store.h"
#include "core/distributed/remote_rendezvous.h"
#include "core/distributed/rpc.h"
#include "core/distributed/status_board.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/device_set.h"
#include "core/runtime/executor.h"

namespace weft::dist {

class TaskService {
 public:
  struct Options {
    std::string name;            // "/job:ps/task:0"
    std::string listen_address;  // "tcp://127.0.0.1:7070"
    // Every task of the cluster by name, with its address (for pulls).
    std::map<std::string, std::string> peers;
    uint64_t cluster_fingerprint = 0;
    int64_t connect_timeout_ms = 10000;
    int64_t rpc_timeout_ms = 60000;
    RpcSecurity security;
    // Failure detection of its peers (core/distributed/heartbeat.h); a timeout of
    // 0 turns it off.
    int64_t heartbeat_interval_ms = 1000;
    int64_t heartbeat_timeout_ms = 10000;
    // Threads running graph nodes, and threads each kernel may use ([runtime]
    // inter_op_threads, intra_op_threads; 0: from the cores, as a session's).
    int inter_op_threads = 0;
    int intra_op_threads = 0;
    // When set, a Shutdown request is answered and then passed here (the
    // caller, its reason): a task started for one training run stops when
    // the chief ends it. Unset (`weft serve`): Shutdown is refused.
    std::function<void(const std::string& caller, const std::string& reason)> on_shutdown;
    // What it answers to Status; a new board (role "weft serve",
    // state "serving") when unset. The service times its RunGraphs on it.
    std::shared_ptr<StatusBoard> board;
  };

  static Expected<std::unique_ptr<TaskService>> Start(Options options, const plugin::PluginHost& plugins,
                                                      std::shared_ptr<runtime::DeviceSet> devices);
  // Stops serving: steps still running are cancelled.
  ~TaskService();

  const std::string& address() const { return rpc_->address(); }
  const std::string& name() const { return options_.name; }
  uint64_t incarnation() const { return incarnation_; }
  StatusBoard& board() const { return *options_.board; }
  // Requests its handler served, and connections it refused before any
  // (RpcNode::requests_handled, connections_refused).
  uint64_t requests_handled() const { return rpc_->requests_handled(); }
  uint64_t connections_refused() const { return rpc_->connections_refused(); }
  // The full names of its devices.
  std::vector<std::string> DeviceNames() const;
  // Whether task |name| of the cluster answers a Heartbeat within
  // |timeout_ms|; the error names it.
  Status Ping(const std::string& name, int64_t timeout_ms);
  // What this task's heartbeats know of task |name| (its state, how long
  // it has been silent); nothing when heartbeats are off or |name| is not
  // a peer of the cluster.
  std::optional<HeartbeatMonitor::PeerState> PeerStateOf(const std::string& name) const;
  // The incarnation task |name| answers a Heartbeat with.
  Expected<uint64_t> IncarnationOf(const std::string& name, int64_t timeout_ms);
  // Sets |key| in task |name|'s rendezvous store without waiting for the
  // answer (best effort: a task that is gone loses it).
  void NotifyKvSet(const std::string& name, std::string key, std::string value);
  // Asks task |name| to stop (a Shutdown saying |reason|): tasks serving
  // one training run stop, `weft serve` refuses.
  Status AskToStop(const std::string& name, const std::string& reason, int64_t timeout_ms);
  // The rendezvous store of task |name| (this task's own, or another's
  // over RPC); it must not outlive this service.
  Expected<std::shared_ptr<runtime::KvStore>> KvStoreOf(const std::string& name);

 private:
  struct Part {
    std::shared_ptr<const Graph> graph;
    std::unique_ptr<runtime::Executor> executor;
    const runtime::RuntimeDevice* device = nullptr;
  };
  struct Registered {
    std::vector<Part> parts;
    int64_t num_retvals = 0;
    // The tensors its parts receive from other tasks once per step, as the
    // step starts (_Recv nodes with no inputs), by sending task: pulled
    // together, one RecvTensors per task (RemoteRendezvous::Prefetch).
    std::map<std::string, std::vector<runtime::RendezvousKey>> prefetch;
  };
  struct Step;

  explicit TaskService(Options options) : options_(std::move(options)) {}
  void Handle(const std::string& caller, Request request, RpcNode::Reply reply);
  Response GetDevices() const;
  Response StatusAnswer() const;
  Expected<Response> QuerySupport(const Request& request) const;
  Expected<Response> RegisterGraph(const Request& request);
  void RunGraph(const std::string& caller, Request request, RpcNode::Reply reply);
  void RecvTensor(const Request& request, RpcNode::Reply reply);
  // Whether a transfer from |device_name| (a device of this task) at
  // |incarnation| is one of this start's; ABORTED when it is an earlier's.
  Status CheckSendIncarnation(const std::string& device_name, uint64_t incarnation, const std::string& what) const;
  // Aborts and drops the steps |caller| ran: it was restarted from
  // |incarnation| (RpcNode::Options::on_caller_restarted).
  void AbortStepsOf(const std::string& caller, uint64_t incarnation);
  std::shared_ptr<Step> GetStep(int64_t step_id, bool create);
  const runtime::RuntimeDevice* LocalDevice(const std::string& full_name) const;
  Expected<std::shared_ptr<runtime::OpKernel>> KernelFor(const Graph& graph, const Graph::Node& node,
                                                         const runtime::RuntimeDevice& device);

  Options options_;
  uint64_t incarnation_ = 0;
  std::shared_ptr<runtime::DeviceSet> devices_;
  std::unique_ptr<ThreadPool> pool_;
  std::shared_ptr<const plugin::IntraOpPool> intra_op_pool_;  // its kernels' parallel loops
  std::unique_ptr<RpcNode> rpc_;
  // Stopped before rpc_ (the destructor resets it first). Guarded by
  // monitor_mutex_: requests (a status request) read it on the RPC pool's
  // threads, which serve until rpc_ goes, and Start sets it after rpc_
  // serves.
  std::unique_ptr<HeartbeatMonitor> monitor_;
  mutable std::mutex monitor_mutex_;
  // What the heartbeats know of each peer; empty when they are off.
  std::vector<HeartbeatMonitor::PeerState> PeerStates() const;
  // Declared after rpc_: destroyed (answering parked gets) while it lives.
  std::shared_ptr<KvStoreService> kv_;

  std::mutex mutex_;
  std::map<uint64_t, std::shared_ptr<Registered>> graphs_;
  uint64_t next_handle_ = 1;
  std::map<int64_t, std::shared_ptr<Step>> steps_;
  std::mutex kernels_mutex_;
  // By (node name, device, op and attrs): a node of the same name defined
  // otherwise by another client's graph (a variable of another shape) gets
  // a kernel of its own, and so the resource's own check.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<runtime::OpKernel>> stateful_kernels_;
};

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_TASK_SERVICE_H_
