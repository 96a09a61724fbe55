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

}  // namespace

Expected<std::vector<std::pair<Output, Output>>> LoopGradient(GraphBuilder& b, const Frames& frames, int frame,
                                                              const std::vector<int>& nodes,
                                                              const std::function<Output(const Output&)>& exit_grad,
                                                              const std::function<bool(const Output&)>& wants) {
  const std::string frame_name = frames.frames[static_cast<std::size_t>(frame)].name;
  const std::string what = StrCat("gradient of while loop '", frame_name, "'");
  const std::set<int> members(nodes.begin(), nodes.end());
  std::map<Key, std::vector<int>> consumers;
  for (int id : nodes) {
    for (const Output& in : b.Inputs(id)) consumers[{in.node(), in.index()}].push_back(id);
  }
  auto out = [&](int node, int index) { return Output(&b, node, index); };
  auto op_of = [&](int node) -> const std::string& { return b.node_def(node).op; };
  auto name_of = [&](int node) -> const std::string& { return b.node_def(node).name; };

  // The loop's structure: per loop variable Enter -> Merge -> Switch (on
  // the LoopCond) -> Identity... -> NextIteration -> Merge, and
  // Switch:0 -> Exit; the loop invariants are Enter nodes with is_constant.
  std::vector<LoopVar> vars;
  std::vector<int> invariants;
  int64_t parallel_iterations = 10;
  Output loop_cond;
  for (int id : nodes) {
    if (frames.frame_of[static_cast<std::size_t>(id)] != frame || op_of(id) != "Enter") continue;
    const NodeDef& def = b.node_def(id);
    if (const AttrValue* p = FindAttr(def, "parallel_iterations")) parallel_iterations = p->get<int64_t>();
    const AttrValue* constant = FindAttr(def, "is_constant");
    if (constant != nullptr && constant->get<bool>()) {
      invariants.push_back(id);
      continue;
    }
    LoopVar v;
    v.enter = id;
    for (int c : consumers[{id, 0}]) {
      if (op_of(c) == "Merge") v.merge = c;
    }
    if (v.merge < 0) {
      return InvalidArgumentError(what, ": the loop variable entering through '", def.name, "' reaches no Merge");
    }
    for (const Output& in : b.Inputs(v.merge)) {
      if (op_of(in.node()) == "NextIteration") v.next = in.node();
    }
    for (int c : consumers[{v.merge, 0}]) {
      if (op_of(c) == "Switch" && op_of(b.Inputs(c)[1].node()) == "LoopCond") v.sw = c;
    }
    if (v.next < 0 || v.sw < 0) {
      return InvalidArgumentError(what, ": the Merge '", name_of(v.merge), "' of the loop variable entering through '",
                                  def.name, "' has no ", v.next < 0 ? "NextIteration input" : "Switch on the LoopCond");
    }
    loop_cond = b.Inputs(v.sw)[1];
    for (int c : consumers[{v.sw, 0}]) {
      if (op_of(c) == "Exit") v.exit = c;
    }
    vars.push_back(v);
  }
  if (vars.empty()) return InvalidArgumentError(what, ": it has no loop variable (an Enter without is_constant)");

  // The loop variables that carry a gradient.
  std::vector<std::size_t> carried;
  for (std::size_t k = 0; k < vars.size(); ++k) {
    if (IsFloating(out(vars[k].merge, 0).dtype())) carried.push_back(k);
  }

  // The body: what the carried variables' next values are computed from,
  // back to the variables' values at the start of the iteration (Switch
  // output 1) and the loop invariants.
  std::map<int, std::size_t> switch_var;
  std::set<int> structure = {loop_cond.node()};
  for (std::size_t k = 0; k < vars.size(); ++k) {
    switch_var[vars[k].sw] = k;
    structure.insert({vars[k].enter, vars[k].merge, vars[k].next});
  }
  const std::set<int> invariant_set(invariants.begin(), invariants.end());
  std::set<int> body;
  std::set<std::size_t> saved;
  std::set<int> used_invariants;
  std::vector<int> work;
  auto visit = [&](int node, int index, int consumer) -> Status {
    if (auto it = switch_var.find(node); it != switch_var.end()) {
      if (index == 0) {
        return InvalidArgumentError(what, ": node '", name_of(consumer), "' reads '", name_of(node),
                                    ":0', the value that leaves the loop; the body reads output 1");
      }
      saved.insert(it->second);
      return Status();
    }
    if (invariant_set.count(node) != 0) {
      used_invariants.insert(node);
      return Status();
    }
    if (members.count(node) == 0) {
      return InvalidArgumentError(what, ": node '", name_of(consumer), "' in the loop body reads '", name_of(node),
                                  "', which is outside the loop and does not enter it through an Enter");
    }
    if (structure.count(node) != 0) {
      return InvalidArgumentError(what, ": node '", name_of(consumer), "' in the loop body reads '", name_of(node),
                                  "' (", op_of(node),
                                  "), part of the loop's own structure; the body may read the "
                                  "loop variables (Switch output 1) and the loop invariants");
    }
    if (body.insert(node).second) work.push_back(node);
    return Status();
  };
  for (std::size_t k : carried) {
    const Output next_value = b.Inputs(vars[k].next)[0];
    WEFT_RETURN_IF_ERROR(visit(next_value.node(), next_value.index(), vars[k].next));
  }
  while (!work.empty()) {
    const int id = work.back();
    work.pop_back();
    for (const Output& in : b.Inputs(id)) WEFT_RETURN_IF_ERROR(visit(in.node(), in.index(), id));
    for (int c : ControlInputs(b, id)) WEFT_RETURN_IF_ERROR(visit(c, -1, id));
  }
  for (int id : body) {
    const OpDef* op = OpRegistry::Global().Find(op_of(id));
    if (op != nullptr && op->stateful && !RecomputeSafe(op->name)) {
      return UnimplementedError(what, ": node '", name_of(id), "' (", op->name, ") in the loop body is stateful. ",
                                "The gradient runs the body again from the saved loop variables, which would "
                                "give it other values; compute it before the loop and read it inside");
    }
  }

  // Forward side, in the loop's own frame: an iteration counter, and a
  // StackPush of every saved variable's value under the iteration's index.
  // The counter's NextIteration waits for the pushes, so they run whenever
  // the loop's result is needed.
  ControlFlowContext* here = b.current_context();
  const Output anchor = b.Inputs(vars[0].enter)[0];
  const AttrValue frame_attr(frame_name);
  const AttrValue parallel_attr(parallel_iterations);
  std::map<std::size_t, Output> stacks;
  Output count;
  {
    auto raw = b.RawContext(here);
    Output zero;
    {
      auto deps = b.ControlDependencies({out(anchor.node(), -1)});
      zero = b.Scalar<int64_t>(0, "counter_start");
      for (std::size_t k : saved) {
        stacks[k] = b.Op("Stack", {},
                         {{"elem_type", AttrValue(out(vars[k].sw, 1).dtype())},
                          {"stack_name", AttrValue(StrCat(frame_name, " loop variable ", k))}},
                         "stack");
      }
    }
    Output enter =
        b.Op("Enter", {zero},
             {{"frame_name", frame_attr}, {"is_constant", AttrValue(false)}, {"parallel_iterations", parallel_attr}},
             "counter_enter");
    std::vector<Output> merge = b.AddNode("Merge", {enter, enter}, {}, "counter_merge");
    WEFT_RETURN_IF_ERROR(b.status());
    std::vector<Output> sw = b.AddNode("Switch", {merge[0], loop_cond}, {}, "counter_switch");
    WEFT_RETURN_IF_ERROR(b.status());
    Output index = b.Op("Identity", {sw[1]}, {}, "index");
    std::vector<Output> pushes;
    for (auto& [k, stack] : stacks) {
      Output handle =
          b.Op("Enter", {stack},
               {{"frame_name", frame_attr}, {"is_constant", AttrValue(true)}, {"parallel_iterations", parallel_attr}},
               "stack_enter");
      pushes.push_back(b.Op("StackPush", {handle, index, out(vars[k].sw, 1)}, {}, "push"));
    }
    Output one;
    {
      auto deps = b.ControlDependencies({out(index.node(), -1)});
      one = b.Scalar<int64_t>(1, "one");
    }
    Output next_index = b.Op("Add", {index, one}, {}, "next_index");
    Output next;
    {
      auto deps = b.ControlDependencies(pushes);
      next = b.Op("NextIteration", {next_index}, {}, "counter_next");
    }
    WEFT_RETURN_IF_ERROR(b.status());
    WEFT_RETURN_IF_ERROR(b.Fail(b.SetInput(merge[0].node(), 1, next)));
    count = b.Op("Exit", {sw[0]}, {}, "count");
    WEFT_RETURN_IF_ERROR(b.status());
  }

  // The invariants whose gradient is wanted, and what it starts from.
  struct Accumulated {
    int enter;
    Output input;  // what the Enter reads
    Output zeros;
    Shape shape;
  };
  std::vector<Accumulated> accumulated;
  for (int inv : used_invariants) {
    const Output input = b.Inputs(inv)[0];
    if (!wants(input)) continue;
    Accumulated a{inv, input, Output(), input.shape()};
    if (input.dtype() == DType::kResource) {
      const int var = VariableBehind(b, input);
      if (var < 0) {
        return UnimplementedError(what, ": the loop reads the resource '", input.name(),
                                  "', which is not a variable, and a gradient is asked of it");
      }
      const NodeDef& var_def = b.node_def(var);
      a.shape = var_def.attrs.at("shape").get<Shape>();
      a.zeros = b.Op("ZerosLike", {b.Op("ReadVariable", {input}, {{"dtype", var_def.attrs.at("dtype")}})});
    } else if (IsFloating(input.dtype())) {
      a.zeros = b.Op("ZerosLike", {input});
    } else {
      continue;
    }
    accumulated.push_back(std::move(a));
  }

  // Backward loop: i from count - 1 down to 0; one gradient per carried
  // variable, one sum per wanted invariant.
  std::vector<Output> init = {b.Op("Sub", {count, b.Scalar<int64_t>(1)}, {}, "last_index")};
  WhileOptions options;
  options.parallel_iterations = static_cast<int>(std::max<int64_t>(1, parallel_iterations));
  options.name = "backward";
  options.shape_invariants.push_back(Shape{});
  for (std::size_t k : carried) {
    Output g;
    if (vars[k].exit >= 0) g = exit_grad(out(vars[k].exit, 0));
    if (!g.valid()) {
      g = b.Op("ZerosLike", {vars[k].exit >= 0 ? out(vars[k].exit, 0) : b.Inputs(vars[k].enter)[0]});
    }
    init.push_back(g);
    options.shape_invariants.push_back(out(vars[k].merge, 0).shape());
  }
  for (const Accumulated& a : accumulated) {
    init.push_back(a.zeros);
    options.shape_invariants.push_back(a.shape);
  }
  WEFT_RETURN_IF_ERROR(b.status());

  auto cond_fn = [&](const std::vector<Output>& v) -> Expected<Output> {
    return b.Op("GreaterEqual", {v[0], b.Scalar<int64_t>(0)}, {}, "more");
  };
  auto body_fn = [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
    const Output i = v[0];
    std::map<Key, Output> value;    // forward output -> its value here
    std::map<int, int> node_value;  // forward node -> the node standing for it here (control inputs)
    for (auto& [k, stack] : stacks) {
      const Output start = out(vars[k].sw, 1);
      Output popped =
          b.Op("StackPop", {stack, i},
               {{"elem_type", AttrValue(start.dtype())}, {"elem_shape", AttrValue(std::vector<Shape>{start.shape()})}},
               "pop");
      WEFT_RETURN_IF_ERROR(b.status());
      value[{vars[k].sw, 1}] = popped;
      node_value[vars[k].sw] = popped.node();
    }
    for (int inv : used_invariants) {
      WEFT_ASSIGN_OR_RETURN(Output here_value, b.Capture(b.Inputs(inv)[0], what));
      value[{inv, 0}] = here_value;
      node_value[inv] = here_value.node();
    }
    // The body again, reading the popped values.
    {
      auto raw = b.RawContext(b.current_context());
      auto scope = b.NameScope("recompute");
      std::vector<std::pair<int, std::pair<int, Output>>> back_edges;  // (copy, (input, forward value))
      for (int id : body) {
        const NodeDef def = b.node_def(id);
        const std::vector<Output> forward_inputs = b.Inputs(id);
        std::vector<Output> inputs;
        std::vector<std::pair<int, Output>> patch;
        for (std::size_t j = 0; j < forward_inputs.size(); ++j) {
          const Output& in = forward_inputs[j];
          auto it = value.find({in.node(), in.index()});
          if (it != value.end()) {
            inputs.push_back(it->second);
          } else if (IsBackEdge(b, id, in) && !inputs.empty()) {
            inputs.push_back(inputs[0]);  // set once the NextIteration is copied
            patch.emplace_back(static_cast<int>(j), in);
          } else {
            return InternalError(what, ": copying '", def.name, "': input '", in.name(), "' has no copy yet");
          }
        }
        std::vector<Output> deps;
        for (int c : ControlInputs(b, id)) {
          if (auto it = node_value.find(c); it != node_value.end()) deps.push_back(out(it->second, -1));
        }
        auto dep_scope = b.ControlDependencies(deps);
        std::optional<GraphBuilder::Scope> device;
        if (!def.device.empty()) device.emplace(b.DeviceScope(def.device));
        std::vector<Output> outputs = b.AddNode(def.op, inputs, def.attrs, def.name);
        WEFT_RETURN_IF_ERROR(b.status());
        const int copy = b.num_nodes() - 1;
        node_value[id] = copy;
        for (std::size_t o = 0; o < outputs.size(); ++o) value[{id, static_cast<int>(o)}] = outputs[o];
        for (auto& p : patch) back_edges.emplace_back(copy, p);
      }
      for (auto& [copy, edge] : back_edges) {
        auto it = value.find({edge.second.node(), edge.second.index()});
        if (it == value.end()) return InternalError(what, ": the back edge '", edge.second.name(), "' was not copied");
        WEFT_RETURN_IF_ERROR(b.Fail(b.SetInput(copy, edge.first, it->second)));
      }
    }

    // Differentiate the copy.
    std::vector<Output> ys, grad_ys, xs;
    for (std::size_t c = 0; c < carried.size(); ++c) {
      const Output next_value = b.Inputs(vars[carried[c]].next)[0];
      ys.push_back(value.at({next_value.node(), next_value.index()}));
      grad_ys.push_back(v[1 + c]);
    }
    std::map<std::size_t, std::size_t> x_of_var;
    for (std::size_t k : carried) {
      if (saved.count(k) == 0) continue;
      x_of_var[k] = xs.size();
      xs.push_back(value.at({vars[k].sw, 1}));
    }
    const std::size_t first_invariant = xs.size();
    for (const Accumulated& a : accumulated) xs.push_back(value.at({a.enter, 0}));
    std::vector<Output> grads;
    if (!xs.empty()) {
      GradientOptions go;
      go.scope = "grad";
      WEFT_ASSIGN_OR_RETURN(grads, AddGradients(b, ys, xs, grad_ys, go));
    }
    std::vector<Output> results = {b.Op("Sub", {i, b.Scalar<int64_t>(1)}, {}, "previous")};
    for (std::size_t c = 0; c < carried.size(); ++c) {
      auto it = x_of_var.find(carried[c]);
      results.push_back(it != x_of_var.end() ? grads[it->second] : b.Op("ZerosLike", {v[1 + c]}));
    }
    for (std::size_t a = 0; a < accumulated.size(); ++a) {
      results.push_back(b.Op("Add", {v[1 + carried.size() + a], grads[first_invariant + a]}, {}, "accumulate"));
    }
    WEFT_RETURN_IF_ERROR(b.status());
    return results;
  };
  WEFT_ASSIGN_OR_RETURN(std::vector<Output> final_values, WhileLoop(b, cond_fn, body_fn, init, options));

  std::vector<std::pair<Output, Output>> result;
  for (std::size_t c = 0; c < carried.size(); ++c) {
    const Output input = b.Inputs(vars[carried[c]].enter)[0];
    if (wants(input)) result.emplace_back(input, final_values[1 + c]);
  }
  for (std::size_t a = 0; a < accumulated.size(); ++a) {
    result.emplace_back(accumulated[a].input, final_values[1 + carried.size() + a]);
  }
  return result;
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
