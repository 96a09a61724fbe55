#include "core/runtime/executor.h"

#include <condition_variable>
#include <mutex>

#include "core/ops/control_flow_ops.h"
#include "core/runtime/executor_runner.h"

namespace weft::runtime {

// Graphs without control flow: one input slot per edge, and a pending
// count per node that the producers decrement without a lock.
struct Executor::PlainPropagator {
  static constexpr bool kFrames = false;
  using Task = int;
  struct Step : StepBase {
    std::vector<Tensor> inputs;
    std::unique_ptr<std::atomic<int>[]> pending;
  };
  struct Lock {
    explicit Lock(Step* /*step*/) {}
    void Hold() {}
    void Release() {}
  };

  static int Id(int id) { return id; }
  static bool RunsHere(const NodeItem& item, int /*id*/) { return item.is_inline; }
  static Tensor* Inputs(Step* step, const NodeItem& item, int /*id*/) { return step->inputs.data() + item.input_start; }
  static void SetFrame(OpKernelContext& /*ctx*/, int /*id*/) {}
  static void Retire(const Executor& /*exec*/, Step* /*step*/, int /*id*/) {}
  static std::string Where(Step* /*step*/, int /*id*/) { return {}; }
  static Status CheckAsyncDead() {
    // Only a partition with control flow can receive a dead value, and
    // those run with the frame propagator.
    return InternalError(
        "received a dead value, but this part of the graph has no control flow; a _Recv "
        "that may receive one needs may_be_dead = true");
  }

  static void Propagate(const Executor& exec, Step* step, int id, Tensor* outputs, const bool* /*dead*/,
                        std::vector<int>* ready) {
    const NodeItem& item = exec.items_[static_cast<std::size_t>(id)];
    // The node's inputs are no longer needed: free them as early as possible.
    for (int k = 0; k < item.num_inputs; ++k) step->inputs[static_cast<std::size_t>(item.input_start + k)] = Tensor();
    for (const OutEdge& e : item.edges) {
      if (e.output >= 0) {
        Tensor& value = outputs[e.output];
        Tensor& slot = step->inputs[static_cast<std::size_t>(e.dst_slot)];
        if (e.last_use) {
          slot = std::move(value);
        } else {
          slot = value;
        }
      }
      if (step->pending[static_cast<std::size_t>(e.dst)].fetch_sub(1, std::memory_order_acq_rel) == 1) {
        ready->push_back(e.dst);
      }
    }
  }
};

Executor::~Executor() = default;

Expected<std::unique_ptr<Executor>> Executor::Create(std::shared_ptr<const Graph> graph,
                                                     std::vector<const RuntimeDevice*> node_devices, ThreadPool* pool,
                                                     const KernelFactory& factory) {
  std::unique_ptr<Executor> exec(new Executor());
  exec->graph_ = std::move(graph);
  exec->pool_ = pool;
  const Graph& g = *exec->graph_;
  exec->items_.resize(static_cast<std::size_t>(g.num_nodes()));
  int slot = 0;
  for (const Graph::Node& node : g.nodes()) {
    NodeItem& item = exec->items_[static_cast<std::size_t>(node.id)];
    item.node = &node;
    item.device = node_devices[static_cast<std::size_t>(node.id)];
    item.input_start = slot;
    item.num_inputs = static_cast<int>(node.inputs.size());
    item.num_outputs = node.num_outputs();
    item.pending = static_cast<int>(node.inputs.size() + node.control_inputs.size());
    slot += item.num_inputs;
    auto kernel = factory(g, node, *item.device);
    if (!kernel.ok()) {
      return kernel.status().WithContext(StrCat(node.Describe(), " on ", item.device->name()));
    }
    item.kernel = kernel->get();
    item.is_inline = (*kernel)->IsInline();
    item.is_async = (*kernel)->IsAsync();
    exec->kernels_.push_back(std::move(*kernel));
    if (item.pending == 0) exec->roots_.push_back(node.id);
  }
  exec->total_inputs_ = slot;
  for (const Graph::Node& node : g.nodes()) {
    // A part of a graph with control flow that was cut across devices may
    // have no control-flow node of its own (a cond's branch on another
    // device) but still receive dead values: the partitioner marks its
    // _Recv nodes.
    if (ops::IsControlFlowOp(node.op_name())) exec->has_control_flow_ = true;
    if (node.op_name() == "_Recv") {
      auto dead = node.def.attrs.find("may_be_dead");
      if (dead != node.def.attrs.end() && dead->second.get<bool>()) exec->has_control_flow_ = true;
    }
  }
  for (const Graph::Node& node : g.nodes()) {
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const Endpoint& src = node.inputs[k];
      exec->items_[static_cast<std::size_t>(src.node)].edges.push_back(
          OutEdge{src.index, node.id, exec->items_[static_cast<std::size_t>(node.id)].input_start + static_cast<int>(k),
                  false});
    }
    for (int c : node.control_inputs) {
      exec->items_[static_cast<std::size_t>(c)].edges.push_back(OutEdge{-1, node.id, -1, false});
    }
  }
  // The last reader of each output is given the tensor rather than a copy
  // (one reference count less to take and drop per edge).
  for (NodeItem& item : exec->items_) {
    std::vector<char> seen(static_cast<std::size_t>(item.num_outputs), 0);
    for (auto e = item.edges.rbegin(); e != item.edges.rend(); ++e) {
      if (e->output < 0 || e->output >= item.num_outputs || seen[static_cast<std::size_t>(e->output)]) continue;
      seen[static_cast<std::size_t>(e->output)] = 1;
      e->last_use = true;
    }
  }
  if (exec->has_control_flow_) WEFT_RETURN_IF_ERROR(exec->BuildFrames());
  return exec;
}

namespace {
thread_local const Executor::OnlyCheapNodesHere* only_cheap_nodes_here = nullptr;
}  // namespace

Executor::OnlyCheapNodesHere::OnlyCheapNodesHere(ThreadPool* elsewhere)
    : elsewhere_(elsewhere), previous_(only_cheap_nodes_here) {
  only_cheap_nodes_here = this;
}
Executor::OnlyCheapNodesHere::~OnlyCheapNodesHere() { only_cheap_nodes_here = previous_; }
bool Executor::OnlyCheapNodesHere::Active() { return only_cheap_nodes_here != nullptr; }
ThreadPool* Executor::OnlyCheapNodesHere::Elsewhere(ThreadPool* otherwise) {
  ThreadPool* pool = only_cheap_nodes_here != nullptr ? only_cheap_nodes_here->elsewhere_ : nullptr;
  return pool != nullptr ? pool : otherwise;
}

void Executor::RunAsync(StepInfo& step, TraceRecorder* trace, std::function<void(Status)> done) const {
  if (roots_.empty()) {
    done(Status());
    return;
  }
  if (has_control_flow_) {
    RunWithFrames(step, trace, std::move(done));
    return;
  }
  RunPlain(step, trace, std::move(done));
}

void Executor::RunPlain(StepInfo& step, TraceRecorder* trace, std::function<void(Status)> done) const {
  auto* state = new PlainPropagator::Step();
  state->info = &step;
  state->trace = trace;
  state->done = std::move(done);
  state->inputs.resize(static_cast<std::size_t>(total_inputs_));
  state->pending.reset(new std::atomic<int>[items_.size()]);
  for (std::size_t i = 0; i < items_.size(); ++i) state->pending[i].store(items_[i].pending, std::memory_order_relaxed);
  Runner<PlainPropagator>{this, state}.Start(roots_);
}

Status Executor::Run(StepInfo& step, TraceRecorder* trace) const {
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;
  Status result;
  RunAsync(step, trace, [&](Status status) {
    std::lock_guard<std::mutex> lock(mutex);
    result = std::move(status);
    finished = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mutex);
  if (step.deadline && !cv.wait_until(lock, *step.deadline, [&] { return finished; })) {
    lock.unlock();
    CancelForDeadline(step);
    lock.lock();
  }
  cv.wait(lock, [&] { return finished; });
  if (step.deadline_exceeded.load()) return DeadlineStatus(step);
  return result;
}

Status DeadlineStatus(const StepInfo& step) {
  return Status(Code::kDeadlineExceeded, StrCat("step ", step.step_id,
                                                " did not finish before its deadline "
                                                "(RunOptions::timeout_ms) and was cancelled"));
}

void CancelForDeadline(StepInfo& step) {
  step.deadline_exceeded.store(true);
  step.cancelled.store(true);
  step.cancellation.StartCancel();
}

}  // namespace weft::runtime
