#include "core/runtime/executor.h"

#include <condition_variable>
#include <mutex>

#include "core/ops/control_flow_ops.h"

namespace weft::runtime {

struct Executor::StepState {
  StepInfo* info = nullptr;
  TraceRecorder* trace = nullptr;
  std::vector<Tensor> inputs;
  std::unique_ptr<std::atomic<int>[]> pending;
  // Threads (and async kernels) working on the step; the step is over when
  // it drops to zero.
  std::atomic<int> outstanding{0};
  std::mutex mutex;
  Status status;
  std::function<void(Status)> done;
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

void Executor::RunAsync(StepInfo& step, TraceRecorder* trace, std::function<void(Status)> done) const {
  if (roots_.empty()) {
    done(Status());
    return;
  }
  if (has_control_flow_) {
    RunWithFrames(step, trace, std::move(done));
    return;
  }
  auto* state = new StepState();
  state->info = &step;
  state->trace = trace;
  state->done = std::move(done);
  state->inputs.resize(static_cast<std::size_t>(total_inputs_));
  state->pending.reset(new std::atomic<int>[items_.size()]);
  for (std::size_t i = 0; i < items_.size(); ++i) state->pending[i].store(items_[i].pending, std::memory_order_relaxed);

  // This thread is one worker of the step, like each pool task.
  state->outstanding.store(1);
  std::vector<int> ready = roots_;
  std::vector<int> stack;
  Dispatch(state, ready, &stack);
  Process(state, std::move(stack));
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

void Executor::Dispatch(StepState* state, std::vector<int>& ready, std::vector<int>* stack) const {
  // Cheap nodes run here; of the expensive ones, all but the last go to the
  // pool and the last runs here too, so a chain stays on one thread. With
  // no pool threads, everything runs here.
  const bool have_pool = pool_ != nullptr && pool_->num_threads() > 0;
  int keep = -1;
  for (int id : ready) {
    const NodeItem& item = items_[static_cast<std::size_t>(id)];
    if (item.is_inline || !have_pool) {
      stack->push_back(id);
      continue;
    }
    if (keep >= 0) {
      state->outstanding.fetch_add(1);
      const int other = keep;
      pool_->Schedule([this, state, other] { Process(state, {other}); });
    }
    keep = id;
  }
  if (keep >= 0) stack->push_back(keep);
  ready.clear();
}

void Executor::Process(StepState* state, std::vector<int> stack) const {
  // Whichever thread runs the step's nodes, its kernels see the step's pool.
  const plugin::ScopedIntraOpPool intra_op(state->info->intra_op);
  std::vector<int> ready;
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (state->info->cancelled.load(std::memory_order_relaxed)) continue;
    const NodeItem& item = items_[static_cast<std::size_t>(id)];
    if (item.is_async) {
      state->outstanding.fetch_add(1);
      auto outputs = std::make_shared<std::vector<Tensor>>(static_cast<std::size_t>(item.num_outputs));
      auto ctx = std::make_shared<OpKernelContext>(item.device, item.node, state->inputs.data() + item.input_start,
                                                   item.num_inputs, outputs->data(), state->info);
      const int64_t start = state->trace != nullptr ? state->trace->NowMicros() : 0;
      // The callback owns the context and outputs, and drops them before
      // the step can end (the callback may run inside ComputeAsync).
      OpKernelContext& context = *ctx;
      item.kernel->ComputeAsync(
          context, [this, state, id, outputs = std::move(outputs), ctx = std::move(ctx), start](Status status) mutable {
            const NodeItem& done_item = items_[static_cast<std::size_t>(id)];
            if (state->trace != nullptr) {
              state->trace->Record({done_item.node->name(),
                                    done_item.node->op_name(),
                                    done_item.device->name(),
                                    state->info->step_id,
                                    TraceThreadId(),
                                    start,
                                    state->trace->NowMicros() - start,
                                    {}});
            }
            if (status.ok() && ctx->output_dead()) {
              // Only a partition with control flow can receive a dead value, and
              // those run on the frames' path.
              status = InternalError(
                  "received a dead value, but this part of the graph has no control flow; a _Recv "
                  "that may receive one needs may_be_dead = true");
            }
            if (!status.ok()) {
              Fail(state, id, status);
            } else {
              std::vector<int> newly_ready;
              Propagate(state, id, *outputs, &newly_ready);
              std::vector<int> local;
              Dispatch(state, newly_ready, &local);
              if (!local.empty()) {
                state->outstanding.fetch_add(1);
                Process(state, std::move(local));
              }
            }
            // Let go of the context (and the tensors it holds) before the step
            // can end: once it has, the caller may close the devices.
            outputs.reset();
            ctx.reset();
            if (state->outstanding.fetch_sub(1) == 1) Finish(state);
          });
      continue;
    }
    if (RunNode(state, id, &ready)) Dispatch(state, ready, &stack);
  }
  if (state->outstanding.fetch_sub(1) == 1) Finish(state);
}

bool Executor::RunNode(StepState* state, int id, std::vector<int>* ready) const {
  const NodeItem& item = items_[static_cast<std::size_t>(id)];
  std::vector<Tensor> outputs(static_cast<std::size_t>(item.num_outputs));
  Status status;
  const int64_t start = state->trace != nullptr ? state->trace->NowMicros() : 0;
  {
    OpKernelContext ctx(item.device, item.node, state->inputs.data() + item.input_start, item.num_inputs,
                        outputs.data(), state->info);
    status = item.kernel->Compute(ctx);
  }
  if (state->trace != nullptr) {
    state->trace->Record({item.node->name(),
                          item.node->op_name(),
                          item.device->name(),
                          state->info->step_id,
                          TraceThreadId(),
                          start,
                          state->trace->NowMicros() - start,
                          {}});
  }
  if (!status.ok()) {
    Fail(state, id, status);
    return false;
  }
  Propagate(state, id, outputs, ready);
  return true;
}

void Executor::Propagate(StepState* state, int id, std::vector<Tensor>& outputs, std::vector<int>* ready) const {
  const NodeItem& item = items_[static_cast<std::size_t>(id)];
  for (int i = 0; i < item.num_outputs; ++i) {
    if (!outputs[static_cast<std::size_t>(i)].valid() &&
        item.node->output_types[static_cast<std::size_t>(i)] != DType::kInvalid) {
      Fail(state, id, InternalError("the kernel did not set output ", i));
      return;
    }
  }
  // The node's inputs are no longer needed: free them as early as possible.
  for (int k = 0; k < item.num_inputs; ++k) state->inputs[static_cast<std::size_t>(item.input_start + k)] = Tensor();
  for (const OutEdge& e : item.edges) {
    if (e.output >= 0) {
      Tensor& value = outputs[static_cast<std::size_t>(e.output)];
      Tensor& slot = state->inputs[static_cast<std::size_t>(e.dst_slot)];
      if (e.last_use) {
        slot = std::move(value);
      } else {
        slot = value;
      }
    }
    if (state->pending[static_cast<std::size_t>(e.dst)].fetch_sub(1, std::memory_order_acq_rel) == 1) {
      ready->push_back(e.dst);
    }
  }
}

void Executor::Fail(StepState* state, int id, const Status& status) const {
  const NodeItem& item = items_[static_cast<std::size_t>(id)];
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    if (state->status.ok()) {
      state->status =
          Status(status.code(), StrCat(item.node->Describe(), " on ", item.device->name(), ": ", status.message()));
    }
    state->info->cancelled.store(true);
  }
  // Wakes kernels parked on queues; they finish through their callbacks,
  // which may fail here again, so no lock is held.
  state->info->cancellation.StartCancel();
}

void Executor::Finish(StepState* state) const {
  std::function<void(Status)> done = std::move(state->done);
  Status status = std::move(state->status);
  delete state;
  done(std::move(status));
}

}  // namespace weft::runtime
