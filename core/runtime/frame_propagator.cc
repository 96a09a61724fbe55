// The frame propagator (executor.h): how the executor runs graphs with
// control flow (docs/architecture.md, "Control flow"): frames, iterations
// and dead values. Graphs without Switch/Merge/Enter/Exit/NextIteration/
// LoopCond never come here.
//
// Each node belongs to a static frame, found once from the graph: a node
// runs in the frame of its inputs, except that an Enter's consumers run in
// the child frame it names and an Exit's consumers in the parent frame. At
// run time a frame instance exists per (parent instance, parent iteration,
// frame name); it runs iterations, each with its own input slots, pending
// counts and dead counts. Up to parallel_iterations iterations are in
// flight: a NextIteration that would start one more is held back until the
// oldest iteration finishes. Iterations finish in order; a frame finishes
// when all its Enters have arrived and its last iteration is done, and then
// gives every Exit that never produced a live value a dead one in the
// parent (a loop that did not run, in a branch not taken).
//
// The bookkeeping (slots, counts, frames) is guarded by one mutex per step;
// kernels run outside it. Finished iterations are recycled, so a loop's
// memory is bounded by parallel_iterations, not by its length.
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "core/base/hash.h"
#include "core/runtime/executor.h"
#include "core/runtime/executor_runner.h"

namespace weft::runtime {

struct Executor::FramePropagator {
  static constexpr bool kFrames = true;
  struct Iteration {
    std::vector<Tensor> inputs;
    std::vector<int> pending;    // a Merge: control inputs left
    std::vector<int> dead;       // dead inputs seen
    std::vector<char> fired;     // a Merge: already ran in this iteration
    std::vector<char> has_live;  // a Merge: a live input arrived
    int outstanding_ops = 0;     // ready or running nodes
    int outstanding_frames = 0;  // child frame instances not finished
  };

  struct Frame {
    const StaticFrame* sf = nullptr;
    int static_id = 0;
    Frame* parent = nullptr;
    int64_t parent_iter = 0;
    int64_t id = 0;  // for rendezvous keys: the same on every device
    int parallel = 1;
    int64_t iteration_count = 0;  // the newest iteration started
    int num_outstanding_iterations = 1;
    int num_pending_inputs = 0;  // Enters of this instance yet to arrive
    int64_t first_iter = 0;      // the oldest iteration not finished
    std::deque<std::unique_ptr<Iteration>> iterations;
    // NextIteration values held back by parallel_iterations.
    std::vector<std::pair<int, Tensor>> next_iter_roots;
    // Loop invariants: (Enter node, value, dead), given to every iteration.
    struct Invariant {
      int node;
      Tensor value;
      bool dead;
    };
    std::vector<Invariant> invariants;
    std::vector<int> live_exits;
    std::map<std::pair<int64_t, int>, std::unique_ptr<Frame>> children;  // (iteration, static frame)

    Iteration* iteration(int64_t iter) {
      const int64_t k = iter - first_iter;
      return k >= 0 && k < static_cast<int64_t>(iterations.size()) ? iterations[static_cast<std::size_t>(k)].get()
                                                                   : nullptr;
    }
  };

  // A ready node: which one, in which frame and iteration, and whether it is
  // dead.
  struct Task {
    int id = 0;
    Frame* frame = nullptr;
    int64_t iter = 0;
    bool dead = false;
    // The iteration's state: it stays put while the node is outstanding, so
    // the node reads its inputs without taking the step's mutex.
    Iteration* it = nullptr;
  };
  struct Step : StepBase {
    std::unique_ptr<Frame> root;
    std::vector<std::unique_ptr<Iteration>> free_iterations;
  };
  // The step's mutex, which guards the frames and their iterations.
  class Lock {
   public:
    explicit Lock(Step* step) : lock_(step->mutex, std::defer_lock) {}
    void Hold() {
      if (!lock_.owns_lock()) lock_.lock();
    }
    void Release() {
      if (lock_.owns_lock()) lock_.unlock();
    }

   private:
    std::unique_lock<std::mutex> lock_;
  };
  struct Propagation;

  static int Id(const Task& t) { return t.id; }
  static bool RunsHere(const NodeItem& item, const Task& t) { return t.dead || item.cf_inline; }
  static Tensor* Inputs(Step* /*step*/, const NodeItem& item, const Task& t) {
    return t.it->inputs.data() + item.local_input_start;
  }
  static void SetFrame(OpKernelContext& ctx, const Task& t) { ctx.set_frame(t.frame->id, t.iter); }
  // A _Recv of a dead value: its outputs are dead, and propagate as such.
  static Status CheckAsyncDead() { return Status(); }
  static std::string Where(Step* step, const Task& t);
  // Propagates the outputs of |t| and retires it; called with the
  // outputs (and, for dead nodes, none), with the step's mutex held. With
  // no |ready|, a failed or cancelled step: only the inputs are freed.
  static void Propagate(const Executor& exec, Step* step, const Task& t, Tensor* outputs, const bool* output_dead,
                        std::vector<Task>* ready);
  static void Retire(const Executor& exec, Step* step, const Task& t) {
    Propagate(exec, step, t, nullptr, nullptr, nullptr);
  }
  // A dead node: a _Retval fails, a _Send tells its receiver, the others
  // pass the death on. False when the node failed.
  static bool RunDead(const Runner<FramePropagator>& runner, const Task& t, Lock& lock, std::vector<Task>* ready);
  // Switch, Merge, Enter, Exit, NextIteration and LoopCond: they move a
  // tensor (a Switch marks the branch not taken dead).
  static Status RunControlFlow(const Executor& exec, const NodeItem& item, Tensor* inputs, Tensor* outputs, bool* dead);
};

namespace {

uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

Status Executor::BuildFrames() {
  const Graph& g = *graph_;
  frames_.clear();
  frames_.push_back(StaticFrame{});
  frames_[0].name = "";
  std::map<std::pair<int, std::string>, int> frame_ids;  // (parent, name)
  std::vector<int> frame_of(static_cast<std::size_t>(g.num_nodes()), -1);
  auto describe_frame = [this](int f) {
    return f == 0 ? std::string("the root frame")
                  : StrCat("loop frame ", Quote(frames_[static_cast<std::size_t>(f)].name));
  };

  for (NodeItem& item : items_) {
    const std::string& op = item.node->op_name();
    item.kind = op == "Switch"          ? Kind::kSwitch
                : op == "Merge"         ? Kind::kMerge
                : op == "Enter"         ? Kind::kEnter
                : op == "Exit"          ? Kind::kExit
                : op == "NextIteration" ? Kind::kNextIteration
                : op == "LoopCond"      ? Kind::kLoopCond
                                        : Kind::kKernel;
    item.is_send = op == "_Send";
  }
  // The frame each node's consumers run in.
  auto output_frame = [&](int src) -> Expected<int> {
    const NodeItem& item = items_[static_cast<std::size_t>(src)];
    const int f = frame_of[static_cast<std::size_t>(src)];
    if (item.kind == Kind::kEnter) return item.child_frame;
    if (item.kind == Kind::kExit) {
      if (f == 0) return InvalidArgumentError(item.node->Describe(), " is an Exit outside any loop");
      return frames_[static_cast<std::size_t>(f)].parent;
    }
    return f;
  };
  for (int id : g.topological_order()) {
    NodeItem& item = items_[static_cast<std::size_t>(id)];
    const Graph::Node& node = *item.node;
    int frame = -1;
    int from = -1;
    auto consider = [&](int src) -> Status {
      if (items_[static_cast<std::size_t>(src)].kind == Kind::kNextIteration) return Status();  // back edge
      WEFT_ASSIGN_OR_RETURN(int f, output_frame(src));
      if (frame < 0) {
        frame = f;
        from = src;
      } else if (f != frame) {
        return InvalidArgumentError(node.Describe(), " has inputs from two frames: ", Quote(g.node(from).name()),
                                    " in ", describe_frame(frame), " and ", Quote(g.node(src).name()), " in ",
                                    describe_frame(f),
                                    "; a value enters a loop through Enter and leaves it "
                                    "through Exit");
      }
      return Status();
    };
    for (const Endpoint& e : node.inputs) WEFT_RETURN_IF_ERROR(consider(e.node));
    for (int c : node.control_inputs) WEFT_RETURN_IF_ERROR(consider(c));
    if (frame < 0) frame = 0;
    frame_of[static_cast<std::size_t>(id)] = frame;
    item.frame = frame;
    if (item.kind == Kind::kEnter) {
      const std::string& name = node.def.attrs.find("frame_name")->second.get<std::string>();
      auto [it, added] = frame_ids.emplace(std::make_pair(frame, name), static_cast<int>(frames_.size()));
      if (added) {
        StaticFrame sf;
        sf.name = name;
        sf.parent = frame;
        sf.parallel_iterations =
            static_cast<int>(std::max<int64_t>(1, node.def.attrs.find("parallel_iterations")->second.get<int64_t>()));
        frames_.push_back(std::move(sf));
      }
      item.child_frame = it->second;
      item.is_constant = node.def.attrs.find("is_constant")->second.get<bool>();
      StaticFrame& child = frames_[static_cast<std::size_t>(item.child_frame)];
      ++child.num_enters;
      child.parallel_iterations = std::min<int>(
          child.parallel_iterations,
          static_cast<int>(std::max<int64_t>(1, node.def.attrs.find("parallel_iterations")->second.get<int64_t>())));
    }
  }
  // A NextIteration feeds the Merge of its own frame.
  for (const NodeItem& item : items_) {
    if (item.kind != Kind::kNextIteration) continue;
    for (const OutEdge& e : item.edges) {
      const NodeItem& dst = items_[static_cast<std::size_t>(e.dst)];
      if (dst.frame != item.frame || item.frame == 0) {
        return InvalidArgumentError(item.node->Describe(), " feeds ", dst.node->Describe(), " in ",
                                    describe_frame(dst.frame), " from ", describe_frame(item.frame),
                                    "; a NextIteration must feed the Merge of its own loop");
      }
    }
  }

  // Local ids, input slots and initial counts per frame.
  for (NodeItem& item : items_) {
    StaticFrame& sf = frames_[static_cast<std::size_t>(item.frame)];
    item.local_id = static_cast<int>(sf.nodes.size());
    sf.nodes.push_back(item.node->id);
    item.local_input_start = sf.num_inputs;
    sf.num_inputs += item.num_inputs;
    int pending = item.pending;
    if (item.kind == Kind::kMerge) {
      pending = static_cast<int>(item.node->control_inputs.size());
      int needed = 0;
      for (const Endpoint& e : item.node->inputs) {
        if (items_[static_cast<std::size_t>(e.node)].kind != Kind::kNextIteration) ++needed;
      }
      item.merge_dead_needed = needed;
    }
    sf.initial_pending.push_back(pending);
    if (item.kind == Kind::kExit) sf.exits.push_back(item.node->id);
  }
  // In a loop, handing a node to another thread costs more than a small
  // kernel: nodes whose outputs are known to be small (a loop's counters
  // and conditions) run on the thread that made them ready.
  for (NodeItem& item : items_) {
    bool small = item.kind != Kind::kKernel || item.is_inline;
    if (!small && !item.is_async) {
      small = true;
      for (const Shape& shape : item.node->output_shapes) {
        if (shape.unknown_rank() || shape.num_elements() < 0 || shape.num_elements() > 256) small = false;
      }
    }
    item.cf_inline = small;
  }
  int max_merge_inputs = 1;
  for (const NodeItem& item : items_) {
    if (item.kind == Kind::kMerge) max_merge_inputs = std::max(max_merge_inputs, item.num_inputs);
  }
  for (int k = 0; k < max_merge_inputs; ++k) merge_index_values_.push_back(Tensor::Scalar<int32_t>(k));
  // Roots run in the root frame, once.
  roots_.clear();
  for (const NodeItem& item : items_) {
    if (item.pending == 0) {
      if (item.frame != 0) {
        return InternalError(item.node->Describe(), " has no inputs but runs in ", describe_frame(item.frame));
      }
      roots_.push_back(item.node->id);
    }
  }
  return Status();
}

void Executor::RunWithFrames(StepInfo& step, TraceRecorder* trace, std::function<void(Status)> done) const {
  auto* state = new FramePropagator::Step();
  state->info = &step;
  state->trace = trace;
  state->done = std::move(done);
  auto root = std::make_unique<FramePropagator::Frame>();
  root->sf = &frames_[0];
  root->static_id = 0;
  root->parallel = 1;
  auto iteration = std::make_unique<FramePropagator::Iteration>();
  iteration->inputs.resize(static_cast<std::size_t>(frames_[0].num_inputs));
  iteration->pending = frames_[0].initial_pending;
  iteration->dead.assign(frames_[0].nodes.size(), 0);
  iteration->fired.assign(frames_[0].nodes.size(), 0);
  iteration->has_live.assign(frames_[0].nodes.size(), 0);
  iteration->outstanding_ops = static_cast<int>(roots_.size());
  root->iterations.push_back(std::move(iteration));
  FramePropagator::Frame* root_frame = root.get();
  FramePropagator::Iteration* root_iteration = root_frame->iterations.front().get();
  state->root = std::move(root);

  std::vector<FramePropagator::Task> ready;
  for (int id : roots_) ready.push_back(FramePropagator::Task{id, root_frame, 0, false, root_iteration});
  Runner<FramePropagator>{this, state}.Start(std::move(ready));
}

bool Executor::FramePropagator::RunDead(const Runner<FramePropagator>& runner, const Task& t, Lock& lock,
                                        std::vector<Task>* ready) {
  const Executor& exec = *runner.exec;
  Step* state = runner.step;
  const NodeItem& item = exec.items_[static_cast<std::size_t>(t.id)];
  if (item.node->op_name() == "_Retval") {
    lock.Release();
    runner.Fail(t, InvalidArgumentError("the fetched value is dead: it comes from the branch of a cond that "
                                        "was not taken"));
    lock.Hold();
    Retire(exec, state, t);
    return false;
  }
  if (item.is_send) {
    // The receiver, in another partition, waits for this iteration's
    // value: it is told that the value is dead.
    lock.Release();
    OpKernelContext ctx(item.device, item.node, nullptr, 0, nullptr, state->info);
    ctx.set_frame(t.frame->id, t.iter);
    ctx.set_input_dead(true);
    Status sent = item.kernel->Compute(ctx);
    if (!sent.ok()) {
      runner.Fail(t, sent);
      lock.Hold();
      Retire(exec, state, t);
      return false;
    }
  }
  lock.Hold();
  Propagate(exec, state, t, nullptr, nullptr, ready);
  return true;
}

Status Executor::FramePropagator::RunControlFlow(const Executor& exec, const NodeItem& item, Tensor* inputs,
                                                 Tensor* outputs, bool* dead) {
  switch (item.kind) {
    case Kind::kEnter:
    case Kind::kExit:
    case Kind::kNextIteration:
    case Kind::kLoopCond:
      // The input slot is cleared once the node has run: move, not copy.
      outputs[0] = std::move(inputs[0]);
      break;
    case Kind::kSwitch: {
      bool taken;
      if (item.device->host_visible()) {
        taken = *inputs[1].data<bool>();
      } else {
        auto host = item.device->CopyToHost(inputs[1]);
        if (!host.ok()) {
          return host.status();
        }
        taken = *host->data<bool>();
      }
      outputs[taken ? 1 : 0] = std::move(inputs[0]);
      dead[taken ? 0 : 1] = true;
      break;
    }
    case Kind::kMerge: {
      int index = -1;
      for (int k = 0; k < item.num_inputs && index < 0; ++k) {
        if (inputs[k].valid()) index = k;
      }
      if (index < 0) {
        return InternalError("a live Merge has no input");
      }
      outputs[0] = std::move(inputs[index]);
      outputs[1] = exec.merge_index_values_[static_cast<std::size_t>(index)];
      break;
    }
    case Kind::kKernel: break;
  }
  return Status();
}

// Delivers values to consumers and keeps the frames' counts; one per
// propagation, with the step's mutex held.
struct Executor::FramePropagator::Propagation {
  const Executor& exec;
  Step* state;
  const NodeItem& item;     // the node that ran
  Tensor* outputs;          // its outputs; null when it was dead
  const bool* output_dead;  // per output; null when none is dead
  std::vector<Task>* ready;
  bool movable;  // its outputs go to one iteration: they may be moved

  // Delivers the node's own outputs (|own|), or |value0| for another
  // delivery (a held-back NextIteration, a loop invariant, a dead Exit),
  // from |src| to its consumers in iteration |iter| of |f|. A held-back
  // value may come from the very node that just ran, in a newer iteration
  // than the one that ran: only |own| says which value is meant.
  void Activate(const NodeItem& src, Frame* f, int64_t iter, const Tensor* value0, bool all_dead,
                bool own = false) const {
    Iteration* target = f->iteration(iter);
    const bool ran = own && outputs != nullptr;
    for (const OutEdge& e : src.edges) {
      const NodeItem& dst = exec.items_[static_cast<std::size_t>(e.dst)];
      const auto local = static_cast<std::size_t>(dst.local_id);
      const bool dead = all_dead || (ran && e.output >= 0 && output_dead != nullptr && output_dead[e.output]);
      Tensor* value = nullptr;
      if (!dead && e.output >= 0) value = ran ? &outputs[e.output] : const_cast<Tensor*>(value0);
      // The last reader of a node's own output takes it (one reference
      // count less); a value delivered to several iterations is copied.
      const bool take = ran && movable && e.last_use;
      bool fire = false;
      bool fire_dead = false;
      if (dst.kind == Kind::kMerge) {
        if (e.output < 0) {
          --target->pending[local];
        } else if (!dead) {
          if (!target->has_live[local]) {
            target->has_live[local] = 1;
            Deliver(target->inputs[static_cast<std::size_t>(dst.local_input_start + (e.dst_slot - dst.input_start))],
                    value, take);
          }
        } else {
          ++target->dead[local];
        }
        if (!target->fired[local] && target->pending[local] == 0 &&
            (target->has_live[local] || target->dead[local] >= dst.merge_dead_needed)) {
          target->fired[local] = 1;
          fire = true;
          fire_dead = !target->has_live[local];
        }
      } else {
        if (dead) {
          ++target->dead[local];
        } else if (value != nullptr) {
          Deliver(target->inputs[static_cast<std::size_t>(dst.local_input_start + (e.dst_slot - dst.input_start))],
                  value, take);
        }
        if (--target->pending[local] == 0) {
          fire = true;
          fire_dead = target->dead[local] > 0;
        }
      }
      if (fire) {
        ++target->outstanding_ops;
        ready->push_back(Task{e.dst, f, iter, fire_dead, target});
      }
    }
  }

  static void Deliver(Tensor& slot, Tensor* value, bool take) {
    if (take) {
      slot = std::move(*value);
    } else {
      slot = *value;
    }
  }

  static std::unique_ptr<Iteration> NewIteration(std::vector<std::unique_ptr<Iteration>>& free_list) {
    if (free_list.empty()) return std::make_unique<Iteration>();
    std::unique_ptr<Iteration> it = std::move(free_list.back());
    free_list.pop_back();
    it->outstanding_ops = 0;
    it->outstanding_frames = 0;
    for (Tensor& t : it->inputs) t = Tensor();
    return it;
  }

  Iteration* AddIteration(Frame* f) const {
    f->iterations.push_back(NewIteration(state->free_iterations));
    Iteration* fresh = f->iterations.back().get();
    const StaticFrame& sf = *f->sf;
    fresh->inputs.resize(static_cast<std::size_t>(sf.num_inputs));
    fresh->pending = sf.initial_pending;
    fresh->dead.assign(sf.nodes.size(), 0);
    fresh->fired.assign(sf.nodes.size(), 0);
    fresh->has_live.assign(sf.nodes.size(), 0);
    return fresh;
  }

  // Starts the next iteration of |f| and gives it the held-back values and
  // the loop invariants.
  void IncrementIteration(Frame* f) const {
    ++f->iteration_count;
    ++f->num_outstanding_iterations;
    AddIteration(f);
    const int64_t next = f->iteration_count;
    std::vector<std::pair<int, Tensor>> held = std::move(f->next_iter_roots);
    f->next_iter_roots.clear();
    for (const auto& [id, value] : held) Activate(exec.items_[static_cast<std::size_t>(id)], f, next, &value, false);
    for (const Frame::Invariant& inv : f->invariants) {
      Activate(exec.items_[static_cast<std::size_t>(inv.node)], f, next, inv.dead ? nullptr : &inv.value, inv.dead);
    }
  }

  // Retires the finished iterations of |f| in order, and |f| itself when
  // it is done; cascades to the parent.
  void Cleanup(Frame* f) const {
    while (f->parent != nullptr && !f->iterations.empty()) {
      Iteration* oldest = f->iterations.front().get();
      if (oldest->outstanding_ops > 0 || oldest->outstanding_frames > 0 ||
          (f->first_iter == 0 && f->num_pending_inputs > 0)) {
        return;
      }
      state->free_iterations.push_back(std::move(f->iterations.front()));
      f->iterations.pop_front();
      ++f->first_iter;
      --f->num_outstanding_iterations;
      if (!f->next_iter_roots.empty()) IncrementIteration(f);
    }
    if (f->parent == nullptr || f->num_pending_inputs > 0) return;
    // The frame is done: every Exit that gave no live value gives a dead
    // one (the loop did not run: it sits in a branch not taken).
    Frame* parent = f->parent;
    const int64_t parent_iter = f->parent_iter;
    for (int exit : f->sf->exits) {
      if (std::find(f->live_exits.begin(), f->live_exits.end(), exit) == f->live_exits.end()) {
        Activate(exec.items_[static_cast<std::size_t>(exit)], parent, parent_iter, nullptr, true);
      }
    }
    Iteration* pit = parent->iteration(parent_iter);
    parent->children.erase({parent_iter, f->static_id});  // deletes f
    if (--pit->outstanding_frames == 0 && pit->outstanding_ops == 0) Cleanup(parent);
  }

  Frame* ChildFrame(Frame* frame, int64_t iter) const {
    const auto key = std::make_pair(iter, item.child_frame);
    auto found = frame->children.find(key);
    if (found != frame->children.end()) return found->second.get();
    auto created = std::make_unique<Frame>();
    Frame* child = created.get();
    const StaticFrame& sf = exec.frames_[static_cast<std::size_t>(item.child_frame)];
    child->sf = &sf;
    child->static_id = item.child_frame;
    child->parent = frame;
    child->parent_iter = iter;
    child->id = static_cast<int64_t>(
        Mix(Mix(static_cast<uint64_t>(frame->id), static_cast<uint64_t>(iter)), Fnv1aHash(sf.name)));
    child->parallel = sf.parallel_iterations;
    child->num_pending_inputs = sf.num_enters;
    AddIteration(child);
    frame->children.emplace(key, std::move(created));
    ++frame->iteration(iter)->outstanding_frames;
    return child;
  }
};

void Executor::FramePropagator::Propagate(const Executor& exec, Step* state, const Task& t, Tensor* outputs,
                                          const bool* output_dead, std::vector<Task>* ready) {
  const NodeItem& item = exec.items_[static_cast<std::size_t>(t.id)];
  Frame* frame = t.frame;
  Iteration* it = t.it;
  // Free the node's inputs as early as possible.
  for (int k = 0; k < item.num_inputs; ++k) it->inputs[static_cast<std::size_t>(item.local_input_start + k)] = Tensor();
  if (ready == nullptr) return;
  const bool node_dead = outputs == nullptr;
  // A loop invariant's Enter gives its value to every iteration: copied.
  const Propagation p{exec, state, item, outputs, output_dead, ready, !(item.kind == Kind::kEnter && item.is_constant)};
  const Tensor* value = node_dead ? nullptr : &outputs[0];
  switch (item.kind) {
    case Kind::kEnter: {
      Frame* child = p.ChildFrame(frame, t.iter);
      if (item.is_constant) {
        child->invariants.push_back(Frame::Invariant{t.id, node_dead ? Tensor() : *value, node_dead});
        for (int64_t i = child->first_iter; i <= child->iteration_count; ++i) {
          p.Activate(item, child, i, value, node_dead, true);
        }
      } else {
        p.Activate(item, child, 0, value, node_dead, true);
      }
      if (--child->num_pending_inputs == 0) {
        Iteration* first = child->iteration(0);
        if (first != nullptr && first->outstanding_ops == 0 && first->outstanding_frames == 0) p.Cleanup(child);
      }
      break;
    }
    case Kind::kExit:
      if (!node_dead) {
        frame->live_exits.push_back(t.id);
        p.Activate(item, frame->parent, frame->parent_iter, value, false, true);
      }
      break;
    case Kind::kNextIteration:
      if (!node_dead) {
        if (t.iter == frame->iteration_count) {
          if (frame->num_outstanding_iterations >= frame->parallel) {
            frame->next_iter_roots.emplace_back(t.id, *value);
            break;
          }
          p.IncrementIteration(frame);
        }
        p.Activate(item, frame, t.iter + 1, value, false, true);
      }
      break;
    default: p.Activate(item, frame, t.iter, nullptr, node_dead, true); break;
  }
  if (--it->outstanding_ops == 0 && it->outstanding_frames == 0) p.Cleanup(frame);
}

std::string Executor::FramePropagator::Where(Step* /*step*/, const Task& t) {
  std::vector<std::string> parts;
  int64_t iter = t.iter;
  for (const Frame* f = t.frame; f != nullptr && f->parent != nullptr; f = f->parent) {
    parts.push_back(StrCat("loop ", Quote(f->sf->name), " iteration ", iter));
    iter = f->parent_iter;
  }
  if (parts.empty()) return {};
  std::reverse(parts.begin(), parts.end());
  return StrCat(" (in ", StrJoin(parts, ", "), ")");
}

}  // namespace weft::runtime
