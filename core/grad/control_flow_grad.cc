#include "core/grad/control_flow_grad.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "core/grad/gradients.h"
#include "core/graph/control_flow.h"

namespace weft::grad {
namespace internal {

bool Frames::Within(int f, int ancestor) const {
  for (; f >= 0; f = frames[static_cast<std::size_t>(f)].parent) {
    if (f == ancestor) return true;
  }
  return false;
}

int Frames::ChildOf(int f, int ancestor) const {
  int child = -1;
  while (f >= 0 && f != ancestor) {
    child = f;
    f = frames[static_cast<std::size_t>(f)].parent;
  }
  return f == ancestor ? child : -1;
}

std::vector<int> ControlInputs(const GraphBuilder& b, int node) {
  std::vector<int> result;
  for (const std::string& in : b.node_def(node).inputs) {
    if (in.empty() || in[0] != '^') continue;
    const Output source = b.Find(std::string_view(in).substr(1));
    if (source.valid()) result.push_back(source.node());
  }
  return result;
}

bool IsBackEdge(const GraphBuilder& b, int node, const Output& input) {
  return b.node_def(node).op == "Merge" && b.node_def(input.node()).op == "NextIteration";
}

Frames AnalyzeFrames(const GraphBuilder& b) {
  Frames f;
  f.frames.push_back({-1, ""});
  std::map<std::pair<int, std::string>, int> ids;
  const int n = b.num_nodes();
  f.frame_of.assign(static_cast<std::size_t>(n), 0);
  for (int id = 0; id < n; ++id) {
    const NodeDef& def = b.node_def(id);
    int frame = -1;
    // Every input but a back edge was added before the node.
    for (const Output& in : b.Inputs(id)) {
      if (in.node() >= id || IsBackEdge(b, id, in)) continue;
      frame = f.frame_of[static_cast<std::size_t>(in.node())];
      break;
    }
    if (frame < 0) {
      for (int c : ControlInputs(b, id)) {
        if (c >= id) continue;
        frame = f.frame_of[static_cast<std::size_t>(c)];
        break;
      }
    }
    if (frame < 0) frame = 0;
    if (def.op == "Enter") {
      auto attr = def.attrs.find("frame_name");
      std::string name = attr == def.attrs.end() ? std::string() : attr->second.get<std::string>();
      auto [it, added] = ids.emplace(std::make_pair(frame, name), static_cast<int>(f.frames.size()));
      if (added) f.frames.push_back({frame, std::move(name)});
      frame = it->second;
    } else if (def.op == "Exit" && frame > 0) {
      frame = f.frames[static_cast<std::size_t>(frame)].parent;
    }
    f.frame_of[static_cast<std::size_t>(id)] = frame;
  }
  return f;
}

namespace {

using Key = std::pair<int, int>;

struct LoopVar {
  int enter = -1;
  int merge = -1;
  int sw = -1;
  int next = -1;
  int exit = -1;
};

const AttrValue* FindAttr(const NodeDef& def, const char* name) {
  auto it = def.attrs.find(name);
  return it == def.attrs.end() ? nullptr : &it->second;
}

// The variable behind a resource that reaches a loop (through Enter and
// Identity nodes): its VarHandle node, or -1.
int VariableBehind(const GraphBuilder& b, Output value) {
  for (int hops = 0; hops < 64 && value.valid(); ++hops) {
    const NodeDef& def = b.node_def(value.node());
    if (def.op == "VarHandle") return value.node();
    if (def.op != "Enter" && def.op != "Identity") return -1;
    value = b.Inputs(value.node())[0];
  }
  return -1;
}

// Ops a loop body may hold although they are stateful: reading a variable
// gives the same value when the body is run again for the gradient.
bool RecomputeSafe(std::string_view op) { return op == "ReadVariable" || op == "ResourceGather"; }

// An invariant whose gradient is wanted, and what its sum starts from.
struct Accumulated {
  int enter;
  Output input;  // what the Enter reads
  Output zeros;
  Shape shape;
};

// One backward iteration's copies of forward values.
struct Copies {
  std::map<Key, Output> value;    // forward output -> its value here
  std::map<int, int> node_value;  // forward node -> the node standing for it here (control inputs)
};

// What FindBody's walk from the carried variables' next values reads and
// grows.
struct BodyWalk {
  std::map<int, std::size_t> switch_var;
  std::set<int> structure;
  std::set<int> invariant_set;
  std::vector<int> work;
};

// The gradient of one while loop (LoopGradient); the members are what its
// phases share, set in the order Run runs them.
class LoopGradientBuilder {
 public:
  LoopGradientBuilder(GraphBuilder& b, const Frames& frames, int frame, const std::vector<int>& nodes,
                      const std::function<Output(const Output&)>& exit_grad,
                      const std::function<bool(const Output&)>& wants)
      : b_(b),
        frames_(frames),
        frame_(frame),
        nodes_(nodes),
        exit_grad_(exit_grad),
        wants_(wants),
        frame_name_(frames.frames[static_cast<std::size_t>(frame)].name),
        what_(StrCat("gradient of while loop '", frame_name_, "'")),
        members_(nodes.begin(), nodes.end()) {}
  LoopGradientBuilder(const LoopGradientBuilder&) = delete;
  LoopGradientBuilder& operator=(const LoopGradientBuilder&) = delete;

  Expected<std::vector<std::pair<Output, Output>>> Run();

 private:
  Output Out(int node, int index) const { return Output(&b_, node, index); }
  const std::string& OpOf(int node) const { return b_.node_def(node).op; }
  const std::string& NameOf(int node) const { return b_.node_def(node).name; }

  Status FindLoopVariables();
  Status FindBody();
  Status Visit(BodyWalk& walk, int node, int index, int consumer);
  Status CheckBodyIsRecomputable() const;
  Status AddCounterAndPushes();
  Status FindAccumulated();
  Expected<std::vector<Output>> BackwardBody(const std::vector<Output>& v);
  Status PopSaved(const Output& i, Copies& copies);
  Status RecomputeBody(Copies& copies);
  Expected<std::vector<Output>> DifferentiateCopy(const std::vector<Output>& v, const Copies& copies);

  GraphBuilder& b_;
  const Frames& frames_;
  const int frame_;
  const std::vector<int>& nodes_;
  const std::function<Output(const Output&)>& exit_grad_;
  const std::function<bool(const Output&)>& wants_;
  const std::string frame_name_;
  const std::string what_;
  const std::set<int> members_;
  std::map<Key, std::vector<int>> consumers_;
  std::vector<LoopVar> vars_;
  std::vector<int> invariants_;
  int64_t parallel_iterations_ = 10;
  Output loop_cond_;
  std::vector<std::size_t> carried_;  // the loop variables that carry a gradient
  std::set<int> body_;
  std::set<std::size_t> saved_;
  std::set<int> used_invariants_;
  std::map<std::size_t, Output> stacks_;
  Output count_;
  std::vector<Accumulated> accumulated_;
};

Expected<std::vector<std::pair<Output, Output>>> LoopGradientBuilder::Run() {
  for (int id : nodes_) {
    for (const Output& in : b_.Inputs(id)) consumers_[{in.node(), in.index()}].push_back(id);
  }
  WEFT_RETURN_IF_ERROR(FindLoopVariables());
  for (std::size_t k = 0; k < vars_.size(); ++k) {
    if (IsFloating(Out(vars_[k].merge, 0).dtype())) carried_.push_back(k);
  }
  WEFT_RETURN_IF_ERROR(FindBody());
  WEFT_RETURN_IF_ERROR(CheckBodyIsRecomputable());
  WEFT_RETURN_IF_ERROR(AddCounterAndPushes());
  WEFT_RETURN_IF_ERROR(FindAccumulated());

  // Backward loop: i from count - 1 down to 0; one gradient per carried
  // variable, one sum per wanted invariant.
  std::vector<Output> init = {b_.Op("Sub", {count_, b_.Scalar<int64_t>(1)}, {}, "last_index")};
  WhileOptions options;
  options.parallel_iterations = static_cast<int>(std::max<int64_t>(1, parallel_iterations_));
  options.name = "backward";
  options.shape_invariants.push_back(Shape{});
  for (std::size_t k : carried_) {
    Output g;
    if (vars_[k].exit >= 0) g = exit_grad_(Out(vars_[k].exit, 0));
    if (!g.valid()) {
      g = b_.Op("ZerosLike", {vars_[k].exit >= 0 ? Out(vars_[k].exit, 0) : b_.Inputs(vars_[k].enter)[0]});
    }
    init.push_back(g);
    options.shape_invariants.push_back(Out(vars_[k].merge, 0).shape());
  }
  for (const Accumulated& a : accumulated_) {
    init.push_back(a.zeros);
    options.shape_invariants.push_back(a.shape);
  }
  WEFT_RETURN_IF_ERROR(b_.status());

  // WhileLoop calls both before it returns, while *this lives.
  auto cond_fn = [this](const std::vector<Output>& v) -> Expected<Output> {
    return b_.Op("GreaterEqual", {v[0], b_.Scalar<int64_t>(0)}, {}, "more");
  };
  auto body_fn = [this](const std::vector<Output>& v) -> Expected<std::vector<Output>> { return BackwardBody(v); };
  WEFT_ASSIGN_OR_RETURN(std::vector<Output> final_values, WhileLoop(b_, cond_fn, body_fn, init, options));

  std::vector<std::pair<Output, Output>> result;
  for (std::size_t c = 0; c < carried_.size(); ++c) {
    const Output input = b_.Inputs(vars_[carried_[c]].enter)[0];
    if (wants_(input)) result.emplace_back(input, final_values[1 + c]);
  }
  for (std::size_t a = 0; a < accumulated_.size(); ++a) {
    result.emplace_back(accumulated_[a].input, final_values[1 + carried_.size() + a]);
  }
  return result;
}

// The loop's structure: per loop variable Enter -> Merge -> Switch (on
// the LoopCond) -> Identity... -> NextIteration -> Merge, and
// Switch:0 -> Exit; the loop invariants are Enter nodes with is_constant.
Status LoopGradientBuilder::FindLoopVariables() {
  for (int id : nodes_) {
    if (frames_.frame_of[static_cast<std::size_t>(id)] != frame_ || OpOf(id) != "Enter") continue;
    const NodeDef& def = b_.node_def(id);
    if (const AttrValue* p = FindAttr(def, "parallel_iterations")) parallel_iterations_ = p->get<int64_t>();
    const AttrValue* constant = FindAttr(def, "is_constant");
    if (constant != nullptr && constant->get<bool>()) {
      invariants_.push_back(id);
      continue;
    }
    LoopVar v;
    v.enter = id;
    for (int c : consumers_[{id, 0}]) {
      if (OpOf(c) == "Merge") v.merge = c;
    }
    if (v.merge < 0) {
      return InvalidArgumentError(what_, ": the loop variable entering through '", def.name, "' reaches no Merge");
    }
    for (const Output& in : b_.Inputs(v.merge)) {
      if (OpOf(in.node()) == "NextIteration") v.next = in.node();
    }
    for (int c : consumers_[{v.merge, 0}]) {
      if (OpOf(c) == "Switch" && OpOf(b_.Inputs(c)[1].node()) == "LoopCond") v.sw = c;
    }
    if (v.next < 0 || v.sw < 0) {
      return InvalidArgumentError(what_, ": the Merge '", NameOf(v.merge), "' of the loop variable entering through '",
                                  def.name, "' has no ", v.next < 0 ? "NextIteration input" : "Switch on the LoopCond");
    }
    loop_cond_ = b_.Inputs(v.sw)[1];
    for (int c : consumers_[{v.sw, 0}]) {
      if (OpOf(c) == "Exit") v.exit = c;
    }
    vars_.push_back(v);
  }
  if (vars_.empty()) return InvalidArgumentError(what_, ": it has no loop variable (an Enter without is_constant)");
  return Status();
}

// The body: what the carried variables' next values are computed from,
// back to the variables' values at the start of the iteration (Switch
// output 1) and the loop invariants.
Status LoopGradientBuilder::FindBody() {
  BodyWalk walk;
  walk.structure = {loop_cond_.node()};
  for (std::size_t k = 0; k < vars_.size(); ++k) {
    walk.switch_var[vars_[k].sw] = k;
    walk.structure.insert({vars_[k].enter, vars_[k].merge, vars_[k].next});
  }
  walk.invariant_set = std::set<int>(invariants_.begin(), invariants_.end());
  for (std::size_t k : carried_) {
    const Output next_value = b_.Inputs(vars_[k].next)[0];
    WEFT_RETURN_IF_ERROR(Visit(walk, next_value.node(), next_value.index(), vars_[k].next));
  }
  while (!walk.work.empty()) {
    const int id = walk.work.back();
    walk.work.pop_back();
    for (const Output& in : b_.Inputs(id)) WEFT_RETURN_IF_ERROR(Visit(walk, in.node(), in.index(), id));
    for (int c : ControlInputs(b_, id)) WEFT_RETURN_IF_ERROR(Visit(walk, c, -1, id));
  }
  return Status();
}

// Output |index| of |node|, read by |consumer| of the body: a loop
// variable (saved_), an invariant (used_invariants_) or one more node of
// the body.
Status LoopGradientBuilder::Visit(BodyWalk& walk, int node, int index, int consumer) {
  if (auto it = walk.switch_var.find(node); it != walk.switch_var.end()) {
    if (index == 0) {
      return InvalidArgumentError(what_, ": node '", NameOf(consumer), "' reads '", NameOf(node),
                                  ":0', the value that leaves the loop; the body reads output 1");
    }
    saved_.insert(it->second);
    return Status();
  }
  if (walk.invariant_set.count(node) != 0) {
    used_invariants_.insert(node);
    return Status();
  }
  if (members_.count(node) == 0) {
    return InvalidArgumentError(what_, ": node '", NameOf(consumer), "' in the loop body reads '", NameOf(node),
                                "', which is outside the loop and does not enter it through an Enter");
  }
  if (walk.structure.count(node) != 0) {
    return InvalidArgumentError(what_, ": node '", NameOf(consumer), "' in the loop body reads '", NameOf(node), "' (",
                                OpOf(node),
                                "), part of the loop's own structure; the body may read the "
                                "loop variables (Switch output 1) and the loop invariants");
  }
  if (body_.insert(node).second) walk.work.push_back(node);
  return Status();
}

Status LoopGradientBuilder::CheckBodyIsRecomputable() const {
  for (int id : body_) {
    const OpDef* op = OpRegistry::Global().Find(OpOf(id));
    if (op != nullptr && op->stateful && !RecomputeSafe(op->name)) {
      return UnimplementedError(what_, ": node '", NameOf(id), "' (", op->name, ") in the loop body is stateful. ",
                                "The gradient runs the body again from the saved loop variables, which would "
                                "give it other values; compute it before the loop and read it inside");
    }
  }
  return Status();
}

// Forward side, in the loop's own frame: an iteration counter, and a
// StackPush of every saved variable's value under the iteration's index.
// The counter's NextIteration waits for the pushes, so they run whenever
// the loop's result is needed.
Status LoopGradientBuilder::AddCounterAndPushes() {
  ControlFlowContext* here = b_.current_context();
  const Output anchor = b_.Inputs(vars_[0].enter)[0];
  const AttrValue frame_attr(frame_name_);
  const AttrValue parallel_attr(parallel_iterations_);
  auto raw = b_.RawContext(here);
  Output zero;
  {
    auto deps = b_.ControlDependencies({Out(anchor.node(), -1)});
    zero = b_.Scalar<int64_t>(0, "counter_start");
    for (std::size_t k : saved_) {
      stacks_[k] = b_.Op("Stack", {},
                         {{"elem_type", AttrValue(Out(vars_[k].sw, 1).dtype())},
                          {"stack_name", AttrValue(StrCat(frame_name_, " loop variable ", k))}},
                         "stack");
    }
  }
  Output enter =
      b_.Op("Enter", {zero},
            {{"frame_name", frame_attr}, {"is_constant", AttrValue(false)}, {"parallel_iterations", parallel_attr}},
            "counter_enter");
  std::vector<Output> merge = b_.AddNode("Merge", {enter, enter}, {}, "counter_merge");
  WEFT_RETURN_IF_ERROR(b_.status());
  std::vector<Output> sw = b_.AddNode("Switch", {merge[0], loop_cond_}, {}, "counter_switch");
  WEFT_RETURN_IF_ERROR(b_.status());
  Output index = b_.Op("Identity", {sw[1]}, {}, "index");
  std::vector<Output> pushes;
  for (auto& [k, stack] : stacks_) {
    Output handle =
        b_.Op("Enter", {stack},
              {{"frame_name", frame_attr}, {"is_constant", AttrValue(true)}, {"parallel_iterations", parallel_attr}},
              "stack_enter");
    pushes.push_back(b_.Op("StackPush", {handle, index, Out(vars_[k].sw, 1)}, {}, "push"));
  }
  Output one;
  {
    auto deps = b_.ControlDependencies({Out(index.node(), -1)});
    one = b_.Scalar<int64_t>(1, "one");
  }
  Output next_index = b_.Op("Add", {index, one}, {}, "next_index");
  Output next;
  {
    auto deps = b_.ControlDependencies(pushes);
    next = b_.Op("NextIteration", {next_index}, {}, "counter_next");
  }
  WEFT_RETURN_IF_ERROR(b_.status());
  WEFT_RETURN_IF_ERROR(b_.Fail(b_.SetInput(merge[0].node(), 1, next)));
  count_ = b_.Op("Exit", {sw[0]}, {}, "count");
  return b_.status();
}

// The invariants whose gradient is wanted, and what it starts from.
Status LoopGradientBuilder::FindAccumulated() {
  for (int inv : used_invariants_) {
    const Output input = b_.Inputs(inv)[0];
    if (!wants_(input)) continue;
    Accumulated a{inv, input, Output(), input.shape()};
    if (input.dtype() == DType::kResource) {
      const int var = VariableBehind(b_, input);
      if (var < 0) {
        return UnimplementedError(what_, ": the loop reads the resource '", input.name(),
                                  "', which is not a variable, and a gradient is asked of it");
      }
      const NodeDef& var_def = b_.node_def(var);
      a.shape = var_def.attrs.at("shape").get<Shape>();
      a.zeros = b_.Op("ZerosLike", {b_.Op("ReadVariable", {input}, {{"dtype", var_def.attrs.at("dtype")}})});
    } else if (IsFloating(input.dtype())) {
      a.zeros = b_.Op("ZerosLike", {input});
    } else {
      continue;
    }
    accumulated_.push_back(std::move(a));
  }
  return Status();
}

// One backward iteration: the saved values popped, the body recomputed
// from them and differentiated.
Expected<std::vector<Output>> LoopGradientBuilder::BackwardBody(const std::vector<Output>& v) {
  const Output i = v[0];
  Copies copies;
  WEFT_RETURN_IF_ERROR(PopSaved(i, copies));
  for (int inv : used_invariants_) {
    WEFT_ASSIGN_OR_RETURN(Output here_value, b_.Capture(b_.Inputs(inv)[0], what_));
    copies.value[{inv, 0}] = here_value;
    copies.node_value[inv] = here_value.node();
  }
  WEFT_RETURN_IF_ERROR(RecomputeBody(copies));
  return DifferentiateCopy(v, copies);
}

// The saved loop variables' values of iteration |i|.
Status LoopGradientBuilder::PopSaved(const Output& i, Copies& copies) {
  for (auto& [k, stack] : stacks_) {
    const Output start = Out(vars_[k].sw, 1);
    Output popped = b_.Op(
        "StackPop", {stack, i},
        {{"elem_type", AttrValue(start.dtype())}, {"elem_shape", AttrValue(std::vector<Shape>{start.shape()})}}, "pop");
    WEFT_RETURN_IF_ERROR(b_.status());
    copies.value[{vars_[k].sw, 1}] = popped;
    copies.node_value[vars_[k].sw] = popped.node();
  }
  return Status();
}

// The body again, reading the popped values.
Status LoopGradientBuilder::RecomputeBody(Copies& copies) {
  auto raw = b_.RawContext(b_.current_context());
  auto scope = b_.NameScope("recompute");
  std::vector<std::pair<int, std::pair<int, Output>>> back_edges;  // (copy, (input, forward value))
  for (int id : body_) {
    const NodeDef def = b_.node_def(id);
    const std::vector<Output> forward_inputs = b_.Inputs(id);
    std::vector<Output> inputs;
    std::vector<std::pair<int, Output>> patch;
    for (std::size_t j = 0; j < forward_inputs.size(); ++j) {
      const Output& in = forward_inputs[j];
      auto it = copies.value.find({in.node(), in.index()});
      if (it != copies.value.end()) {
        inputs.push_back(it->second);
      } else if (IsBackEdge(b_, id, in) && !inputs.empty()) {
        inputs.push_back(inputs[0]);  // set once the NextIteration is copied
        patch.emplace_back(static_cast<int>(j), in);
      } else {
        return InternalError(what_, ": copying '", def.name, "': input '", in.name(), "' has no copy yet");
      }
    }
    std::vector<Output> deps;
    for (int c : ControlInputs(b_, id)) {
      if (auto it = copies.node_value.find(c); it != copies.node_value.end()) deps.push_back(Out(it->second, -1));
    }
    auto dep_scope = b_.ControlDependencies(deps);
    std::optional<GraphBuilder::Scope> device;
    if (!def.device.empty()) device.emplace(b_.DeviceScope(def.device));
    std::vector<Output> outputs = b_.AddNode(def.op, inputs, def.attrs, def.name);
    WEFT_RETURN_IF_ERROR(b_.status());
    const int copy = b_.num_nodes() - 1;
    copies.node_value[id] = copy;
    for (std::size_t o = 0; o < outputs.size(); ++o) copies.value[{id, static_cast<int>(o)}] = outputs[o];
    for (auto& p : patch) back_edges.emplace_back(copy, p);
  }
  for (auto& [copy, edge] : back_edges) {
    auto it = copies.value.find({edge.second.node(), edge.second.index()});
    if (it == copies.value.end()) {
      return InternalError(what_, ": the back edge '", edge.second.name(), "' was not copied");
    }
    WEFT_RETURN_IF_ERROR(b_.Fail(b_.SetInput(copy, edge.first, it->second)));
  }
  return Status();
}

// Differentiate the copy: the next loop values (v without v[0], the
// index) for the index before, and the invariants' sums grown.
Expected<std::vector<Output>> LoopGradientBuilder::DifferentiateCopy(const std::vector<Output>& v,
                                                                     const Copies& copies) {
  const Output i = v[0];
  std::vector<Output> ys, grad_ys, xs;
  for (std::size_t c = 0; c < carried_.size(); ++c) {
    const Output next_value = b_.Inputs(vars_[carried_[c]].next)[0];
    ys.push_back(copies.value.at({next_value.node(), next_value.index()}));
    grad_ys.push_back(v[1 + c]);
  }
  std::map<std::size_t, std::size_t> x_of_var;
  for (std::size_t k : carried_) {
    if (saved_.count(k) == 0) continue;
    x_of_var[k] = xs.size();
    xs.push_back(copies.value.at({vars_[k].sw, 1}));
  }
  const std::size_t first_invariant = xs.size();
  for (const Accumulated& a : accumulated_) xs.push_back(copies.value.at({a.enter, 0}));
  std::vector<Output> grads;
  if (!xs.empty()) {
    GradientOptions go;
    go.scope = "grad";
    WEFT_ASSIGN_OR_RETURN(grads, AddGradients(b_, ys, xs, grad_ys, go));
  }
  std::vector<Output> results = {b_.Op("Sub", {i, b_.Scalar<int64_t>(1)}, {}, "previous")};
  for (std::size_t c = 0; c < carried_.size(); ++c) {
    auto it = x_of_var.find(carried_[c]);
    results.push_back(it != x_of_var.end() ? grads[it->second] : b_.Op("ZerosLike", {v[1 + c]}));
  }
  for (std::size_t a = 0; a < accumulated_.size(); ++a) {
    results.push_back(b_.Op("Add", {v[1 + carried_.size() + a], grads[first_invariant + a]}, {}, "accumulate"));
  }
  WEFT_RETURN_IF_ERROR(b_.status());
  return results;
}

}  // namespace

Expected<std::vector<std::pair<Output, Output>>> LoopGradient(GraphBuilder& b, const Frames& frames, int frame,
                                                              const std::vector<int>& nodes,
                                                              const std::function<Output(const Output&)>& exit_grad,
                                                              const std::function<bool(const Output&)>& wants) {
  LoopGradientBuilder builder(b, frames, frame, nodes, exit_grad, wants);
  return builder.Run();
}

}  // namespace internal

void RegisterControlFlowGradients(GradRegistry& r) {
  // Only the output of the branch taken is alive; what comes back through
  // it (zeros when nothing does) is the gradient, the other side is dead.
  r.Register("Switch", [](GradContext& c, std::vector<Output>& dx) {
    dx[0] = c.Node("Merge", {c.grad_or_zeros(0), c.grad_or_zeros(1)})[0];
    return Status();
  });
  // The gradient goes back to the input the Merge forwarded (its
  // value_index); the others get dead values.
  r.Register("Merge", [](GradContext& c, std::vector<Output>& dx) {
    for (const Output& in : c.inputs()) {
      if (c.b().node_def(in.node()).op == "NextIteration") {
        return InternalError("the Merge '", c.node().name, "' closes a loop; loops are differentiated whole");
      }
    }
    const Output g = c.grad(0);
    if (!g.valid()) return Status();
    for (std::size_t i = 0; i < dx.size(); ++i) {
      Output taken = c.Op("Equal", {c.output(1), c.b().Scalar<int32_t>(static_cast<int32_t>(i))});
      dx[i] = c.Node("Switch", {g, taken})[1];
    }
    return Status();
  });
  r.NotDifferentiable("LoopCond");
}

}  // namespace weft::grad
