#include "core/runtime/session.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/base/logging.h"
#include "core/plugin/host_services.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/run_rewrite.h"

namespace weft::runtime {

struct Session::Prepared {
  // One per device that runs part of the step.
  struct Part {
    std::shared_ptr<const Graph> graph;
    std::unique_ptr<Executor> executor;
  };
  std::vector<Part> parts;
  // In the signature's (sorted) order.
  std::vector<std::string> feeds;
  std::vector<DType> feed_types;
  std::vector<Shape> feed_shapes;
  std::vector<std::string> fetches;
  std::vector<const RuntimeDevice*> fetch_devices;
};

SessionOptions SessionOptions::FromConfig(const config::Config& config) {
  SessionOptions options;
  if (config.runtime.inter_op_threads) options.inter_op_threads = static_cast<int>(*config.runtime.inter_op_threads);
  if (config.runtime.intra_op_threads) options.intra_op_threads = static_cast<int>(*config.runtime.intra_op_threads);
  options.placement = PlacementOptionsFromConfig(config);
  if (config.graph_optimizer.level) options.optimizer.level = static_cast<int>(*config.graph_optimizer.level);
  options.optimizer.disable = config.graph_optimizer.disable;
  return options;
}

std::pair<int, int> ResolveThreads(const SessionOptions& options) {
  const int cores = AvailableCores();
  // One budget of cores for both. Kernels get every core (oneDNN, parallel
  // loops), since the chains of big ops that dominate training run one
  // node at a time; independent nodes run concurrently on a pool sized so
  // that inter x intra stays within the cores. Set only one of the two and
  // the other takes what is left.
  int intra = options.intra_op_threads;
  int inter = options.inter_op_threads;
  if (intra <= 0 && inter <= 0) {
    intra = cores;
    inter = 1;
  } else if (intra <= 0) {
    intra = std::max(1, cores / inter);
  } else if (inter <= 0) {
    inter = std::max(1, cores / intra);
  }
  return {inter, intra};
}

Expected<std::unique_ptr<Session>> Session::Create(Graph graph, std::shared_ptr<DeviceSet> devices,
                                                   const SessionOptions& options) {
  if (devices == nullptr || devices->types().empty()) return FailedPreconditionError("a session needs devices");
#if defined(WEFT_LITE)
  // The lite build (docs/lite.md) runs graphs as given, optimized
  // beforehand by the full build's `weft optimize`.
  if (options.optimizer.level != 0) {
    return InvalidArgumentError(
        "the lite build has no graph optimizer: run at level 0 a graph that the full build's "
        "`weft optimize MODEL -o MODEL.wg` optimized (level ",
        options.optimizer.level, " asked)");
  }
#else
  WEFT_RETURN_IF_ERROR(passes::ValidateOptions(options.optimizer).WithContext("[graph_optimizer]"));
#endif
  std::unique_ptr<Session> session(new Session(std::move(graph), std::move(devices)));
  const auto [inter, intra] = ResolveThreads(options);
  session->inter_op_threads_ = inter;
  session->intra_op_threads_ = intra;
  session->placement_ = options.placement;
  session->optimizer_ = options.optimizer;
  // Its kernels' parallel loops use a pool of its own size, shared with
  // other sessions of that size: another session's setting never changes it.
  session->intra_op_pool_ = plugin::IntraOpPoolFor(intra);
  EnableKernelServices();
  // The calling thread of Run works too, so the pool has one thread fewer.
  session->pool_ = std::make_unique<ThreadPool>(inter - 1, "inter_op");
  return session;
}

Session::~Session() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cache_.clear();
  }
  stateful_kernels_.clear();
  pool_.reset();
}

std::size_t Session::cached_executors() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

std::vector<passes::PassReport> Session::last_optimization() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return last_optimization_;
}

Expected<std::vector<Tensor>> Session::EvaluateOnHost(GraphDef graph, const std::vector<std::string>& fetches) {
  const RuntimeDevice* host = devices_->default_device();
  if (host == nullptr || host->type() != "CPU") return FailedPreconditionError("no CPU device to evaluate on");
  WEFT_ASSIGN_OR_RETURN(Graph g, Graph::FromGraphDef(std::move(graph)));
  WEFT_ASSIGN_OR_RETURN(RunGraph run, RewriteForRun(g, {}, fetches, {}));
  std::vector<const RuntimeDevice*> node_devices(static_cast<std::size_t>(run.graph->num_nodes()), host);
  auto factory = [](const Graph& part, const Graph::Node& node,
                    const RuntimeDevice& device) -> Expected<std::shared_ptr<OpKernel>> {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, CreateKernel(part, node, device));
    return std::shared_ptr<OpKernel>(std::move(kernel));
  };
  WEFT_ASSIGN_OR_RETURN(auto executor, Executor::Create(run.graph, std::move(node_devices), pool_.get(), factory));
  std::vector<Tensor> args;
  std::vector<Tensor> retvals(fetches.size());
  StepInfo step;
  step.args = &args;
  step.retvals = &retvals;
  step.intra_op = intra_op_pool_.get();
  WEFT_RETURN_IF_ERROR(executor->Run(step, nullptr));
  // Host copies of their own: the values outlive this step in the graph.
  std::vector<Tensor> out;
  for (const Tensor& t : retvals) {
    WEFT_ASSIGN_OR_RETURN(Tensor host_copy, host->CopyToHost(t));
    WEFT_ASSIGN_OR_RETURN(Tensor owned, host_copy.DeepCopy());
    out.push_back(std::move(owned));
  }
  return out;
}

Expected<std::shared_ptr<OpKernel>> Session::KernelFor(const Graph& graph, const Graph::Node& node,
                                                       const RuntimeDevice& device) {
  if (!node.op->stateful) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, CreateKernel(graph, node, device));
    return std::shared_ptr<OpKernel>(std::move(kernel));
  }
  std::lock_guard<std::mutex> lock(stateful_mutex_);
  auto& slot = stateful_kernels_[{node.name(), device.name()}];
  if (slot == nullptr) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, CreateKernel(graph, node, device));
    slot = std::move(kernel);
  }
  return slot;
}

Expected<std::shared_ptr<Session::Prepared>> Session::Prepare(const std::vector<std::string>& feeds,
                                                              const std::vector<std::string>& fetches,
                                                              const std::vector<std::string>& targets) {
  auto prepared = std::make_shared<Prepared>();
  prepared->feeds = feeds;
  prepared->fetches = fetches;
  // Where preparing a signature's time goes, at debug level.
  auto lap = [last = std::chrono::steady_clock::now()]() mutable {
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - last).count();
    last = now;
    return ms;
  };

  WEFT_ASSIGN_OR_RETURN(RunGraph rewritten, RewriteForRun(graph_, feeds, fetches, targets));
  WEFT_LOG(DEBUG) << "prepare: feeds, fetches and pruning in " << lap() << " ms (" << rewritten.graph->num_nodes()
                  << " nodes)";
  prepared->feed_types = std::move(rewritten.feed_types);
  prepared->feed_shapes = std::move(rewritten.feed_shapes);
  std::shared_ptr<const Graph> shared = std::move(rewritten.graph);
  const std::vector<std::string>& roots = rewritten.roots;

  // The graph optimizer (docs/optimizer.md), on what this signature runs.
#if !defined(WEFT_LITE)
  if (optimizer_.level > 0) {
    passes::PassContext context;
    context.keep.insert(roots.begin(), roots.end());
    context.evaluate = [this](GraphDef def, const std::vector<std::string>& outputs) {
      return EvaluateOnHost(std::move(def), outputs);
    };
    context.requested_device = [this](const NodeDef& node) { return RequestedDevice(placement_, node); };
    context.has_fused_kernel = [this](const NodeDef& node, const NodeDef& fused) {
      return FusedKernelEverywhere(*devices_, placement_, node, fused);
    };
    WEFT_ASSIGN_OR_RETURN(passes::OptimizeResult optimized, passes::Optimize(shared, optimizer_, context));
    shared = std::move(optimized.graph);
    WEFT_LOG(DEBUG) << "prepare: optimizer in " << lap() << " ms (" << shared->num_nodes() << " nodes)";
    std::lock_guard<std::mutex> lock(mutex_);
    last_optimization_ = std::move(optimized.reports);
  }
#endif

  // Place every node, and cut the graph where devices meet.
  WEFT_ASSIGN_OR_RETURN(PlacedGraph placed, PlaceAndPartition(*shared, *devices_, placement_));
  WEFT_LOG(DEBUG) << "prepare: placement in " << lap() << " ms";
  for (const std::string& root : roots) {
    const Graph::Node* node = shared->Find(root);
    if (node->op_name() == "_Retval") {
      prepared->fetch_devices.push_back(
          placed.devices[static_cast<std::size_t>(placed.placement.device[static_cast<std::size_t>(node->id)])]);
    }
  }
  auto factory = [this](const Graph& g, const Graph::Node& node, const RuntimeDevice& device) {
    return KernelFor(g, node, device);
  };
  if (placed.partitions.empty()) {
    std::vector<const RuntimeDevice*> node_devices;
    for (int d : placed.placement.device) node_devices.push_back(placed.devices[static_cast<std::size_t>(d)]);
    Prepared::Part part;
    WEFT_ASSIGN_OR_RETURN(part.executor, Executor::Create(shared, std::move(node_devices), pool_.get(), factory));
    part.graph = std::move(shared);
    prepared->parts.push_back(std::move(part));
    WEFT_LOG(DEBUG) << "prepare: kernels and executor in " << lap() << " ms";
    return prepared;
  }
  // Every device's part runs under an executor of its own, also with loops
  // and conds: the partitioner gave each part of a loop a control loop that
  // keeps its frames in step with the others (docs/graphs.md).
  for (auto& [d, part_def] : placed.partitions) {
    const RuntimeDevice* device = placed.devices[static_cast<std::size_t>(d)];
    auto part_graph = Graph::FromGraphDef(std::move(part_def));
    if (!part_graph.ok()) return part_graph.status().WithContext(StrCat("the part of the graph on ", device->name()));
    Prepared::Part part;
    part.graph = std::make_shared<const Graph>(std::move(*part_graph));
    std::vector<const RuntimeDevice*> node_devices(static_cast<std::size_t>(part.graph->num_nodes()), device);
    WEFT_ASSIGN_OR_RETURN(part.executor, Executor::Create(part.graph, std::move(node_devices), pool_.get(), factory));
    prepared->parts.push_back(std::move(part));
  }
  WEFT_LOG(DEBUG) << "prepare: " << prepared->parts.size() << " parts' kernels and executors in " << lap() << " ms";
  return prepared;
}

Status Session::RunParts(const Prepared& prepared, StepInfo& step, TraceRecorder* trace) {
  if (prepared.parts.size() == 1) {
    return prepared.parts.front().executor->Run(step, trace);
  }
  // The parts meet in one rendezvous; the first failure cancels the step,
  // which aborts the rendezvous so that no part waits for a tensor that
  // will never come.
  Rendezvous rendezvous;
  step.rendezvous = &rendezvous;
  const CancellationManager::Token token = step.cancellation.Register(
      [&rendezvous] { rendezvous.Abort(CancelledError("another part of the step failed")); });
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t remaining = prepared.parts.size();
  std::vector<Status> statuses(prepared.parts.size());
  for (std::size_t i = 0; i < prepared.parts.size(); ++i) {
    prepared.parts[i].executor->RunAsync(step, trace, [&, i](Status status) {
      std::lock_guard<std::mutex> lock(mutex);
      statuses[i] = std::move(status);
      if (--remaining == 0) cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    if (step.deadline && !cv.wait_until(lock, *step.deadline, [&] { return remaining == 0; })) {
      lock.unlock();
      CancelForDeadline(step);
      lock.lock();
    }
    cv.wait(lock, [&] { return remaining == 0; });
  }
  step.cancellation.Deregister(token);
  step.rendezvous = nullptr;
  if (step.deadline_exceeded.load()) return DeadlineStatus(step);
  // The cause, rather than the cancellations it set off.
  for (const Status& s : statuses) {
    if (!s.ok() && s.code() != Code::kCancelled) return s;
  }
  for (const Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return Status();
}

Status Session::RunCancellable(const Prepared& prepared, StepInfo& step, TraceRecorder* trace,
                               CancellationManager* cancel) {
  if (cancel == nullptr) return RunParts(prepared, step, trace);
  // The callback may be running on another thread when the step ends: it
  // reaches the step through |link|, which is cleared under its lock
  // before the step goes.
  struct Link {
    std::mutex mutex;
    StepInfo* step = nullptr;
  };
  auto link = std::make_shared<Link>();
  link->step = &step;
  const CancellationManager::Token token = cancel->Register([link] {
    std::lock_guard<std::mutex> lock(link->mutex);
    if (link->step == nullptr) return;
    link->step->cancelled.store(true);
    link->step->cancellation.StartCancel();
  });
  Status status;
  if (token != CancellationManager::kInvalidToken) {
    status = RunParts(prepared, step, trace);
    cancel->Deregister(token);
  }
  {
    std::lock_guard<std::mutex> lock(link->mutex);
    link->step = nullptr;
  }
  if (cancel->IsCancelled()) {
    return CancelledError("step ", step.step_id, " was cancelled by its caller (RunOptions::cancel)");
  }
  return status;
}

Status Session::Run(const std::vector<std::pair<std::string, Tensor>>& feeds, const std::vector<std::string>& fetches,
                    const std::vector<std::string>& targets, std::vector<Tensor>* outputs, const RunOptions& options) {
  WEFT_ASSIGN_OR_RETURN(RunSignature signature, RunSignature::Make(feeds, fetches, targets));
  std::shared_ptr<Prepared> prepared;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(signature.key);
    if (it != cache_.end()) prepared = it->second;
  }
  if (prepared == nullptr) {
    WEFT_ASSIGN_OR_RETURN(prepared, Prepare(signature.feeds, signature.fetches, signature.targets));
    std::lock_guard<std::mutex> lock(mutex_);
    prepared = cache_.emplace(signature.key, prepared).first->second;
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<Tensor> args, signature.Args(feeds, prepared->feed_types, prepared->feed_shapes));
  std::vector<Tensor> retvals(signature.fetches.size());
  StepInfo step;
  step.step_id = next_step_.fetch_add(1);
  step.args = &args;
  step.retvals = &retvals;
  step.intra_op = intra_op_pool_.get();
  if (options.timeout_ms > 0) {
    step.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options.timeout_ms);
  }
  // A profiled step is traced (into a recorder of its own when the caller
  // wants no trace) and its events summed up.
  std::optional<TraceRecorder> profile_trace;
  TraceRecorder* trace = options.trace;
  if (options.profile != nullptr && trace == nullptr) trace = &profile_trace.emplace();
  const int64_t started_us = trace != nullptr ? trace->NowMicros() : 0;
  WEFT_RETURN_IF_ERROR(RunCancellable(*prepared, step, trace, options.cancel));
  if (options.profile != nullptr) {
    std::vector<TraceRecorder::Event> events;
    for (TraceRecorder::Event& e : trace->events()) {
      if (e.step_id == step.step_id && e.process.empty()) events.push_back(std::move(e));
    }
    const BusyTime busy = SummarizeBusy(events);
    TaskStepTime part;
    part.run_ms = static_cast<double>(trace->NowMicros() - started_us) / 1000.0;
    part.compute_ms = static_cast<double>(busy.compute_us) / 1000.0;
    part.wait_ms = static_cast<double>(busy.wait_us) / 1000.0;
    options.profile->Add({step.step_id, part.run_ms, {part}});
  }

  if (outputs != nullptr) {
    outputs->clear();
    for (const std::string& fetch : fetches) {
      const std::size_t i = signature.FetchIndex(fetch);
      WEFT_ASSIGN_OR_RETURN(Tensor host, prepared->fetch_devices[i]->CopyToHost(retvals[i]));
      outputs->push_back(std::move(host));
    }
  }
  return Status();
}

}  // namespace weft::runtime
