// A session over a cluster: the client side of the distributed runtime.
//
// It asks every task for its devices, places a Run's graph on the union of
// them with the same placer as one process (each task says which of its
// devices can run each node), cuts it into one partition per device with
// _Send/_Recv pairs at the cuts, registers each task's partitions with
// that task, and runs steps: every task runs its partitions under the step
// id, a _Recv whose sender is on another task pulls the tensor over the
// transport, and the first error anywhere aborts the step on every task
// and comes back here, naming the task. Variables live on the tasks, so
// they persist from one Run to the next.
//
//   WEFT_ASSIGN_OR_RETURN(auto session, DistSession::Create(graph, options,
//   plugins)); WEFT_RETURN_IF_ERROR(session->Run({{"x", x}}, {"y"}, {},
//   &outputs));
#ifndef WEFT_CORE_DIST_DIST_SESSION_H_
#define WEFT_CORE_DIST_DIST_SESSION_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/distributed/heartbeat.h"
#include "core/distributed/rpc.h"
#include "core/graph/graph.h"
#include "core/passes/pass.h"
#include "core/placement/partitioner.h"
#include "core/placement/placer.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/session.h"
#include "core/runtime/trace.h"

namespace weft::dist {

struct DistSessionOptions {
  // Every task, the one unpinned nodes prefer first (placement breaks
  // ties by device order).
  std::vector<Peer> tasks;
  uint64_t cluster_fingerprint = 0;
  int64_t connect_timeout_ms = 10000;
  int64_t rpc_timeout_ms = 60000;
  RpcSecurity security;
  // Failure detection (core/distributed/heartbeat.h); a timeout of 0 turns it off.
  int64_t heartbeat_interval_ms = 1000;
  int64_t heartbeat_timeout_ms = 10000;
  placement::PlacementOptions placement;
  // The graph optimizer ([graph_optimizer]; docs/optimizer.md), run on each
  // signature's graph before placement. Constant folding needs a host
  // device to evaluate on, which a client does not have: it is left to the
  // tasks' own level.
  passes::OptimizeOptions optimizer;
  // [cluster] transfer_dtype: kBF16 narrows the f32 tensors that cross
  // between tasks (placement::PartitionOptions).
  DType transfer_f32_as = DType::kF32;
  // [cluster] variable_reads = "late": a variable read cut to another task
  // is pulled shortly before its first use, not as the step starts
  // (placement::PartitionOptions::late_variable_reads).
  bool late_variable_reads = false;
  // Who the client is, for the tasks' messages.
  std::string identity = "client";
  // Its incarnation (core/distributed/incarnation.h); 0: a new one. A worker
  // gives its task service's, so that the process has one.
  uint64_t incarnation = 0;
};

// A graph placed on a cluster: for `weft place --config`.
struct ClusterPlacement {
  placement::Placement placement;
  std::vector<DeviceInfo> devices;  // what placement indices refer to
  std::vector<placement::Transfer> transfers;
};

class DistSession {
 public:
  static Expected<std::unique_ptr<DistSession>> Create(Graph graph, DistSessionOptions options,
                                                       const plugin::PluginHost& plugins);
  // Deregisters its graphs from the tasks (best effort).
  ~DistSession();

  // As runtime::Session::Run.
  Status Run(const std::vector<std::pair<std::string, Tensor>>& feeds, const std::vector<std::string>& fetches,
             const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
             const runtime::RunOptions& options = {});

  // Asks each task of |task_names| ("/job:ps/task:0") to stop, saying
  // |reason|: tasks serving one training run stop; `weft serve` refuses.
  // Errors name the tasks that did not agree.
  Status StopTasks(const std::vector<std::string>& task_names, const std::string& reason);

  // The newest incarnation of |task| this session knows, from its replies
  // and heartbeats (0: none yet).
  uint64_t KnownIncarnation(const std::string& task);
  // Every device of the cluster, task by task (as the last placement saw them).
  std::vector<DeviceInfo> devices();
  // Places |graph| (all of it) on the cluster without running it.
  Expected<ClusterPlacement> Place(const Graph& graph);

  // Asks every task of |options| for its devices (`weft devices --config`).
  static Expected<std::vector<DeviceInfo>> ListDevices(const DistSessionOptions& options,
                                                       const plugin::PluginHost& plugins);

 private:
  struct Prepared;
  DistSession(Graph graph, DistSessionOptions options) : graph_(std::move(graph)), options_(std::move(options)) {}
  Status Connect(const plugin::PluginHost& plugins);
  Expected<std::shared_ptr<Prepared>> Prepare(const std::vector<std::string>& feeds,
                                              const std::vector<std::string>& fetches,
                                              const std::vector<std::string>& targets);
  const Peer& TaskOf(const std::string& device) const;
  void LearnIncarnation(const std::string& task, uint64_t incarnation);
  // The tasks that were restarted since their devices were listed.
  std::vector<std::string> RestartedTasks();
  // Forgets every prepared graph that involves one of |tasks| (deregistering
  // its partitions on the other tasks) and asks them for their devices
  // again (new device incarnations): the next step places, cuts and
  // registers again.
  Status Invalidate(const std::vector<std::string>& tasks);
  // |task|'s steady clock minus this process's, and half the round trip
  // that measured it (ns), once per incarnation of the task.
  Expected<std::pair<int64_t, int64_t>> ClockOffset(const Peer& task);
  // Puts the events the tasks recorded for |step_id| on |trace|'s clock,
  // a process per task, with a flow from each _Send to its _Recv.
  void RecordTrace(const Prepared& prepared, int64_t step_id,
                   const std::vector<std::vector<runtime::TraceRecorder::Event>>& traced,
                   const std::vector<int64_t>& origins, runtime::TraceRecorder& trace);

  Graph graph_;
  DistSessionOptions options_;
  std::unique_ptr<RpcNode> rpc_;
  // After rpc_: stopped before it.
  std::unique_ptr<HeartbeatMonitor> monitor_;
  std::mutex mutex_;
  std::vector<DeviceInfo> devices_;  // under mutex_ once steps run
  // The newest incarnation seen of each task: its heartbeats and replies.
  std::map<std::string, uint64_t> known_incarnation_;
  // The incarnation of each task when its devices_ were listed.
  std::map<std::string, uint64_t> devices_from_;
  struct ClockOffsetOf {
    uint64_t incarnation = 0;
    int64_t offset_ns = 0;
    int64_t uncertainty_ns = 0;
  };
  std::map<std::string, ClockOffsetOf> clock_offsets_;
  std::map<std::string, std::shared_ptr<Prepared>> cache_;
  // Where earlier steps placed stateful nodes (variables, queues): later
  // placements keep them there, since their state lives on that device.
  std::map<std::string, std::string> stateful_placements_;
  std::atomic<int64_t> next_step_{0};
};

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_DIST_SESSION_H_
