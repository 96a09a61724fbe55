// A Session runs a graph: Run(feeds, fetches, targets) prunes the graph to
// what the fetches and targets need, rewrites feeds and fetches into
// internal _Arg/_Retval nodes, places every node on a device, builds an
// executor, and caches it under the call's signature (the sets of feeds,
// fetches and targets, in any order). Concurrent Run calls are safe and
// overlap; they share variables and nothing else.
//
//   WEFT_ASSIGN_OR_RETURN(auto session, Session::Create(graph, devices, options));
//   std::vector<Tensor> out;
//   WEFT_RETURN_IF_ERROR(session->Run({{"x", x}}, {"logits"}, {}, &out));
#ifndef WEFT_CORE_RUNTIME_SESSION_H_
#define WEFT_CORE_RUNTIME_SESSION_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/base/thread_pool.h"
#include "core/config/config.h"
#include "core/graph/graph.h"
#include "core/passes/pass.h"
#include "core/placement/placer.h"
#include "core/runtime/cancellation.h"
#include "core/runtime/device_set.h"
#include "core/runtime/executor.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/step_profile.h"
#include "core/runtime/trace.h"

namespace weft::runtime {

struct SessionOptions {
  // Threads running independent nodes; 0 derives it from the cores.
  int inter_op_threads = 0;
  // Threads one kernel may use; 0 derives it from the cores.
  int intra_op_threads = 0;
  // Where nodes run: soft placement, type priority, pins ([placement]).
  placement::PlacementOptions placement;
  // The graph optimizer's level and disabled passes ([graph_optimizer],
  // `--optimize`; docs/optimizer.md). Each run's graph is optimized after
  // pruning, before placement.
  passes::OptimizeOptions optimizer;

  // The options of [runtime], [placement] and [graph_optimizer] in |config|.
  static SessionOptions FromConfig(const config::Config& config);
};

struct RunOptions {
  // Record a trace of the step (see trace.h).
  TraceRecorder* trace = nullptr;
  // Add where the step's time went, per task, to this (step_profile.h).
  StepProfile* profile = nullptr;
  // Cancel the step and return DEADLINE_EXCEEDED when it runs longer than
  // this (a dequeue from a queue nobody fills); 0 = no limit.
  int64_t timeout_ms = 0;
  // Cancel the step (CANCELLED) when this is cancelled, from any thread:
  // how a caller interrupts a running step (Ctrl-C in Python,
  // docs/python.md). The session keeps working for later runs.
  CancellationManager* cancel = nullptr;
};

class Session {
 public:
  static Expected<std::unique_ptr<Session>> Create(Graph graph, std::shared_ptr<DeviceSet> devices,
                                                   const SessionOptions& options = {});
  ~Session();

  // Feeds name tensors ("x" or "x:1") with values (host or device tensors);
  // fetches name tensors to return; targets name nodes to run for their
  // effects. Outputs come back in the order of |fetches|, in host memory.
  Status Run(const std::vector<std::pair<std::string, Tensor>>& feeds, const std::vector<std::string>& fetches,
             const std::vector<std::string>& targets, std::vector<Tensor>* outputs, const RunOptions& options = {});

  const Graph& graph() const { return graph_; }
  const DeviceSet& devices() const { return *devices_; }
  int inter_op_threads() const { return inter_op_threads_; }
  int intra_op_threads() const { return intra_op_threads_; }
  // How many executors the cache holds (one per signature seen).
  std::size_t cached_executors() const;
  // What the graph optimizer did for the latest signature prepared (empty
  // before the first Run, or at level 0).
  std::vector<passes::PassReport> last_optimization() const;
  // Runs |graph| (Const nodes and what reads them, no device requests) on
  // the host device and returns |fetches|: how constant folding evaluates.
  Expected<std::vector<Tensor>> EvaluateOnHost(GraphDef graph, const std::vector<std::string>& fetches);

 private:
  struct Prepared;
  Session(Graph graph, std::shared_ptr<DeviceSet> devices) : graph_(std::move(graph)), devices_(std::move(devices)) {}
  Expected<std::shared_ptr<Prepared>> Prepare(const std::vector<std::string>& feeds,
                                              const std::vector<std::string>& fetches,
                                              const std::vector<std::string>& targets);

  Status RunParts(const Prepared& prepared, StepInfo& step, TraceRecorder* trace);
  // RunParts, cancelled with |cancel| (RunOptions::cancel) when it is set.
  Status RunCancellable(const Prepared& prepared, StepInfo& step, TraceRecorder* trace, CancellationManager* cancel);
  Expected<std::shared_ptr<OpKernel>> KernelFor(const Graph& graph, const Graph::Node& node,
                                                const RuntimeDevice& device);

  Graph graph_;
  std::shared_ptr<DeviceSet> devices_;
  // Kernels of stateful nodes, by (node, device): every executor of the
  // session shares them, so a random op's run counter (or any kernel
  // state) continues whatever fetches a Run names.
  std::mutex stateful_mutex_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<OpKernel>> stateful_kernels_;
  placement::PlacementOptions placement_;
  passes::OptimizeOptions optimizer_;
  std::vector<passes::PassReport> last_optimization_;  // under mutex_
  std::unique_ptr<ThreadPool> pool_;
  int inter_op_threads_ = 1;
  int intra_op_threads_ = 1;
  std::shared_ptr<const plugin::IntraOpPool> intra_op_pool_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Prepared>> cache_;
  std::atomic<int64_t> next_step_{1};
};

// The thread counts (inter, intra) SessionOptions resolve to on this
// machine, from one budget of the cores the process may use so that
// inter-op and intra-op work together do not oversubscribe them: by
// default every core for kernels and one thread running nodes; with one of
// the two set, the other gets cores / it (at least 1).
std::pair<int, int> ResolveThreads(const SessionOptions& options);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_SESSION_H_
