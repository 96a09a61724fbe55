// The executor's step loop, shared by its two propagators (executor.h):
// which ready nodes run on this thread and which go to the inter-op pool,
// running a node's kernel (synchronous or async), its trace event, the
// check of its outputs, the first failure that cancels the step, and the
// end of the step. Internal to core/runtime: included by executor.cc and
// frame_propagator.cc, which instantiate it with their propagator.
//
// A propagator P gives:
//   kFrames              whether tasks carry frames (dead values, control-flow
//                        nodes); false compiles those paths away
//   Task, Step, Lock     a ready node; the step's state (a StepBase); the lock
//                        held while propagating (a no-op for the plain one)
//   Id(task)             the node's id
//   RunsHere(item, task) whether the node runs on the thread that made it ready
//   Inputs(step, item, task)   the node's input slots
//   SetFrame(ctx, task)  tells the kernel its frame and iteration
//   Propagate(exec, step, task, outputs, dead, ready)   delivers outputs (null:
//                        the node is dead) and appends the nodes made ready
//   Retire(exec, step, task)   accounts for a node that will not propagate
//   Where(step, task)    where the node ran, for an error (" (in loop ...)")
//   CheckAsyncDead(ctx)  whether an async kernel may have received a dead value
// and, with kFrames, RunDead and RunControlFlow (frame_propagator.cc).
#ifndef WEFT_CORE_RUNTIME_EXECUTOR_RUNNER_H_
#define WEFT_CORE_RUNTIME_EXECUTOR_RUNNER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/runtime/executor.h"

namespace weft::runtime {

struct Executor::StepBase {
  StepInfo* info = nullptr;
  TraceRecorder* trace = nullptr;
  // Threads (and async kernels) working on the step; the step is over when
  // it drops to zero.
  std::atomic<int> outstanding{0};
  // Guards |status|; the frame propagator's bookkeeping too.
  std::mutex mutex;
  Status status;
  // A node was retired without running because the step was cancelled:
  // the step then ends CANCELLED even if none of its own nodes failed, so
  // that its outputs are never taken as made.
  std::atomic<bool> skipped{false};
  std::function<void(Status)> done;
};

template <class P>
struct Executor::Runner {
  using Task = typename P::Task;
  using Step = typename P::Step;
  using Lock = typename P::Lock;

  const Executor* exec;
  Step* step;

  const NodeItem& Item(const Task& t) const { return exec->items_[static_cast<std::size_t>(P::Id(t))]; }

  // This thread becomes one worker of the step and runs |ready| (the
  // roots) and what they make ready.
  void Start(std::vector<Task> ready) const {
    step->outstanding.store(1);
    std::vector<Task> stack;
    Dispatch(ready, &stack);
    Process(std::move(stack));
  }

  // Runs the nodes of |stack| and whatever they make ready that stays on
  // this thread; accounts for one unit of the step's outstanding work.
  void Process(std::vector<Task> stack) const {
    // Whichever thread runs the step's nodes, its kernels see the step's pool.
    const plugin::ScopedIntraOpPool intra_op(step->info->intra_op);
    std::vector<Task> ready;
    // The frame propagator's lock is taken for propagation and kept across
    // a run of control-flow nodes (they only pass tensors along); let go
    // before a kernel runs, before the pool is given work, and at the end.
    Lock lock(step);
    while (!stack.empty()) {
      const Task t = stack.back();
      stack.pop_back();
      const NodeItem& item = Item(t);
      if (step->info->cancelled.load(std::memory_order_relaxed)) {
        // Retired without running, so that frames still account for it.
        step->skipped.store(true, std::memory_order_relaxed);
        lock.Hold();
        P::Retire(*exec, step, t);
        continue;
      }
      bool ran = false;
      if constexpr (P::kFrames) {
        if (t.dead) {
          if (!P::RunDead(*this, t, lock, &ready)) continue;
          ran = true;
        }
      }
      if (!ran) {
        if (item.kind == Kind::kKernel && item.is_async) {
          lock.Release();
          RunAsync(t);
          continue;
        }
        if (!RunNode(t, &ready, lock)) continue;
      }
      if (Dispatch(ready, &stack)) lock.Release();
    }
    lock.Release();
    if (step->outstanding.fetch_sub(1) == 1) Finish();
  }

  // Cheap nodes run here; of the expensive ones, all but the last go to the
  // pool and the last runs here too, so a chain stays on one thread (under
  // OnlyCheapNodesHere, the last goes to the pool it names). With no pool
  // threads, everything runs here. True when it gave the pool work.
  bool Dispatch(std::vector<Task>& ready, std::vector<Task>* stack) const {
    const bool have_pool = exec->pool_ != nullptr && exec->pool_->num_threads() > 0;
    const bool keep_one = !OnlyCheapNodesHere::Active();
    bool kept = false;
    bool scheduled = false;
    Task keep{};
    auto to_pool = [&](const Task& t, ThreadPool* pool) {
      step->outstanding.fetch_add(1);
      const Runner runner = *this;
      pool->Schedule([runner, t] { runner.Process({t}); });
      scheduled = true;
    };
    for (const Task& t : ready) {
      if (!have_pool || P::RunsHere(Item(t), t)) {
        stack->push_back(t);
        continue;
      }
      if (kept) to_pool(keep, exec->pool_);
      keep = t;
      kept = true;
    }
    if (kept) {
      if (keep_one) {
        stack->push_back(keep);
      } else {
        to_pool(keep, OnlyCheapNodesHere::Elsewhere(exec->pool_));
      }
    }
    ready.clear();
    return scheduled;
  }

  // Runs |t| (not dead, not async) and propagates; false on error. |lock|
  // is held or not on entry and held on return.
  bool RunNode(const Task& t, std::vector<Task>* ready, Lock& lock) const {
    const NodeItem& item = Item(t);
    // Kernels, and a Switch that copies its predicate from the device, run
    // without the lock; the other control-flow nodes only move a tensor.
    const bool kernel = !P::kFrames || item.kind == Kind::kKernel;
    if (kernel || (item.kind == Kind::kSwitch && !item.device->host_visible())) lock.Release();
    Tensor* inputs = P::Inputs(step, item, t);
    // Most nodes have few outputs: no allocation for them.
    Tensor few[4];
    std::vector<Tensor> many;
    Tensor* outputs = few;
    if (item.num_outputs > 4) {
      many.resize(static_cast<std::size_t>(item.num_outputs));
      outputs = many.data();
    }
    // Only a Switch has a dead output (the branch not taken).
    bool dead[2] = {false, false};
    Status status;
    const int64_t start = step->trace != nullptr ? step->trace->NowMicros() : 0;
    if (kernel) {
      OpKernelContext ctx(item.device, item.node, inputs, item.num_inputs, outputs, step->info);
      P::SetFrame(ctx, t);
      status = item.kernel->Compute(ctx);
    } else if constexpr (P::kFrames) {
      status = P::RunControlFlow(*exec, item, inputs, outputs, dead);
    }
    Record(item, start);
    if (status.ok() && kernel) status = CheckOutputs(item, outputs);
    if (!status.ok()) {
      lock.Release();
      Fail(t, status);
      lock.Hold();
      P::Retire(*exec, step, t);
      return false;
    }
    lock.Hold();
    P::Propagate(*exec, step, t, outputs, item.kind == Kind::kSwitch ? dead : nullptr, ready);
    return true;
  }

  // Starts |t|'s async kernel; it finishes through its callback.
  void RunAsync(const Task& t) const {
    const NodeItem& item = Item(t);
    step->outstanding.fetch_add(1);
    auto outputs = std::make_shared<std::vector<Tensor>>(static_cast<std::size_t>(item.num_outputs));
    auto ctx = std::make_shared<OpKernelContext>(item.device, item.node, P::Inputs(step, item, t), item.num_inputs,
                                                 outputs->data(), step->info);
    P::SetFrame(*ctx, t);
    const int64_t start = step->trace != nullptr ? step->trace->NowMicros() : 0;
    // The callback owns the context and outputs, and drops them before
    // the step can end (the callback may run inside ComputeAsync).
    OpKernelContext& context = *ctx;
    const Runner runner = *this;
    item.kernel->ComputeAsync(
        context, [runner, t, outputs = std::move(outputs), ctx = std::move(ctx), start](Status status) mutable {
          runner.AsyncDone(t, std::move(status), *outputs, *ctx, start);
          // Let go of the context (and the tensors it holds) before the
          // step can end: once it has, the caller may close the devices.
          outputs.reset();
          ctx.reset();
          if (runner.step->outstanding.fetch_sub(1) == 1) runner.Finish();
        });
  }

  void AsyncDone(const Task& t, Status status, std::vector<Tensor>& outputs, const OpKernelContext& ctx,
                 int64_t start) const {
    const NodeItem& item = Item(t);
    Record(item, start);
    // A _Recv of a dead value: its outputs are dead.
    const bool dead = ctx.output_dead();
    if (status.ok() && dead) status = P::CheckAsyncDead();
    if (status.ok() && !dead) status = CheckOutputs(item, outputs.data());
    if (!status.ok()) {
      Fail(t, status);
      Lock lock(step);
      lock.Hold();
      P::Retire(*exec, step, t);
      return;
    }
    std::vector<Task> newly_ready;
    {
      Lock lock(step);
      lock.Hold();
      P::Propagate(*exec, step, t, dead ? nullptr : outputs.data(), nullptr, &newly_ready);
    }
    std::vector<Task> local;
    Dispatch(newly_ready, &local);
    if (!local.empty()) {
      step->outstanding.fetch_add(1);
      Process(std::move(local));
    }
  }

  void Record(const NodeItem& item, int64_t start) const {
    if (step->trace == nullptr) return;
    step->trace->Record({item.node->name(),
                         item.node->op_name(),
                         item.device->name(),
                         step->info->step_id,
                         TraceThreadId(),
                         start,
                         step->trace->NowMicros() - start,
                         {}});
  }

  static Status CheckOutputs(const NodeItem& item, const Tensor* outputs) {
    for (int i = 0; i < item.num_outputs; ++i) {
      if (!outputs[i].valid() && item.node->output_types[static_cast<std::size_t>(i)] != DType::kInvalid) {
        return InternalError("the kernel did not set output ", i);
      }
    }
    return Status();
  }

  // The first failure names the node, its device and (in a loop) the
  // iteration, and cancels the step.
  void Fail(const Task& t, const Status& status) const {
    const NodeItem& item = Item(t);
    {
      std::lock_guard<std::mutex> guard(step->mutex);
      if (step->status.ok()) {
        step->status = Status(status.code(), StrCat(item.node->Describe(), " on ", item.device->name(),
                                                    P::Where(step, t), ": ", status.message()));
      }
      step->info->cancelled.store(true);
    }
    // Wakes kernels parked on queues; they finish through their callbacks,
    // which may fail here again, so no lock is held.
    step->info->cancellation.StartCancel();
  }

  void Finish() const {
    std::function<void(Status)> done = std::move(step->done);
    Status status = std::move(step->status);
    if (status.ok() && step->skipped.load()) {
      status = CancelledError("the step was cancelled before all of its nodes here ran");
    }
    delete step;
    done(std::move(status));
  }
};

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_EXECUTOR_RUNNER_H_
