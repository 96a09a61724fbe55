#include "core/grad/gradients.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "core/grad/control_flow_grad.h"

namespace weft::grad {
namespace {

bool CarriesGradient(DType dtype) { return IsFloating(dtype) || dtype == DType::kResource; }

// A key for one output of a node.
using Key = std::pair<int, int>;

}  // namespace

// --- GradContext ---------------------------------------------------------------------------------

GradContext::GradContext(GraphBuilder& b, int node, std::vector<Output> grads)
    : b_(b), node_(node), inputs_(b.Inputs(node)), outputs_(b.Outputs(node)), grads_(std::move(grads)) {}

Output GradContext::grad_or_zeros(int i) {
  const Output g = grad(i);
  return g.valid() ? g : Op("ZerosLike", {output(i)});
}

const AttrValue& GradContext::attr(std::string_view name) const {
  static const AttrValue kNone;
  auto it = node().attrs.find(std::string(name));
  return it == node().attrs.end() ? kNone : it->second;
}

Output GradContext::Op(std::string_view op, const std::vector<Output>& inputs, AttrMap attrs) {
  return b_.Op(op, inputs, std::move(attrs));
}

std::vector<Output> GradContext::Node(std::string_view op, const std::vector<Output>& inputs, AttrMap attrs) {
  return b_.AddNode(op, inputs, std::move(attrs));
}

Output GradContext::Scalar(double value, const Output& like) {
  switch (like.dtype()) {
    case DType::kF32: return b_.Const(Tensor::Scalar<float>(static_cast<float>(value)));
    case DType::kF64: return b_.Const(Tensor::Scalar<double>(value));
    default: return b_.Op("Cast", {b_.Const(Tensor::Scalar<double>(value))}, {{"DstT", AttrValue(like.dtype())}});
  }
}

Output GradContext::ShapeOf(const Output& x) {
  if (x.shape().IsFullyDefined()) return b_.Const(Tensor::FromVector<int64_t>(x.shape().dims()));
  return b_.Op("Shape", {x}, {{"out_type", AttrValue(DType::kI64)}});
}

Output GradContext::ReduceLike(const Output& dx, const Output& x) {
  if (dx.shape().IsFullyDefined() && dx.shape() == x.shape()) return dx;
  return b_.Op("SumToShape", {dx, ShapeOf(x)});
}

// --- GradRegistry --------------------------------------------------------------------------------

const GradRegistry& GradRegistry::Global() {
  static const GradRegistry* registry = [] {
    auto* r = new GradRegistry;
    RegisterMathGradients(*r);
    RegisterArrayGradients(*r);
    RegisterNnGradients(*r);
    RegisterStateGradients(*r);
    RegisterControlFlowGradients(*r);
    return r;
  }();
  return *registry;
}

void GradRegistry::Register(std::string op, GradFn fn) { fns_[std::move(op)] = std::move(fn); }

void GradRegistry::NotDifferentiable(std::string op) { none_.insert(std::move(op)); }

const GradFn* GradRegistry::Find(std::string_view op, bool* not_differentiable) const {
  *not_differentiable = none_.count(op) != 0;
  auto it = fns_.find(op);
  return it == fns_.end() ? nullptr : &it->second;
}

std::vector<std::string> GradRegistry::Differentiable() const {
  std::vector<std::string> ops;
  for (const auto& [op, fn] : fns_) ops.push_back(op);
  return ops;
}

std::vector<std::string> GradRegistry::NotDifferentiableOps() const { return {none_.begin(), none_.end()}; }

// --- AddGradients --------------------------------------------------------------------------------

Expected<std::vector<Output>> AddGradients(GraphBuilder& b, const std::vector<Output>& ys,
                                           const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                                           const GradientOptions& options) {
  WEFT_RETURN_IF_ERROR(b.status());
  if (!grad_ys.empty() && grad_ys.size() != ys.size()) {
    return InvalidArgumentError("gradients: ", ys.size(), " ys but ", grad_ys.size(), " grad_ys");
  }
  for (const Output& y : ys) {
    if (!y.valid() || y.index() < 0) return InvalidArgumentError("gradients: a y is not a tensor");
    if (!IsFloating(y.dtype())) {
      return InvalidArgumentError("gradients: y '", y.name(), "' is ", DTypeName(y.dtype()),
                                  "; only floating-point tensors can be differentiated");
    }
  }
  for (const Output& x : xs) {
    if (!x.valid() || x.index() < 0) return InvalidArgumentError("gradients: an x is not a tensor");
    if (!CarriesGradient(x.dtype())) {
      return InvalidArgumentError("gradients: x '", x.name(), "' is ", DTypeName(x.dtype()),
                                  "; only floating-point tensors and variables can be differentiated against");
    }
  }
  const GradRegistry& registry = GradRegistry::Global();
  const int forward_nodes = b.num_nodes();
  // Backward ops read forward values from inside conds as they are.
  auto inner = b.AllowInnerTensors();

  // Loops are differentiated whole: the graph is seen as units, each a
  // node of the ys' frame or a whole loop in it (every node in the loop or
  // nested in it, and its Exits), which form a DAG.
  const internal::Frames frames = internal::AnalyzeFrames(b);
  auto frame_of = [&](int node) { return frames.frame_of[static_cast<std::size_t>(node)]; };
  const int root = frame_of(ys[0].node());
  for (const Output& y : ys) {
    if (frame_of(y.node()) != root) {
      return InvalidArgumentError("gradients: y '", y.name(), "' and y '", ys[0].name(),
                                  "' are in different loop frames; differentiate values of one frame");
    }
  }
  for (const Output& x : xs) {
    if (frame_of(x.node()) != root) {
      return InvalidArgumentError("gradients: x '", x.name(),
                                  "' is made inside a while loop; differentiate with respect to a value outside "
                                  "the loop, or to the loop's result");
    }
  }
  struct Unit {
    int node = -1;   // a single node, or
    int frame = -1;  // a loop
    std::vector<int> nodes;
    std::vector<Output> inputs;  // data inputs from other units
  };
  std::vector<Unit> units;
  std::vector<int> unit_of(static_cast<std::size_t>(forward_nodes), -1);
  std::map<int, int> loop_units;
  for (int id = 0; id < forward_nodes; ++id) {
    const int f = frame_of(id);
    if (!frames.Within(f, root)) continue;
    int loop = f == root ? -1 : frames.ChildOf(f, root);
    if (loop < 0 && b.node_def(id).op == "Exit") {
      const std::vector<Output> in = b.Inputs(id);
      if (!in.empty() && frame_of(in[0].node()) != root) loop = frames.ChildOf(frame_of(in[0].node()), root);
    }
    int u = -1;
    if (loop < 0) {
      u = static_cast<int>(units.size());
      units.push_back(Unit{id, -1, {id}, {}});
    } else {
      auto [it, added] = loop_units.emplace(loop, static_cast<int>(units.size()));
      if (added) units.push_back(Unit{-1, loop, {}, {}});
      u = it->second;
      units[static_cast<std::size_t>(u)].nodes.push_back(id);
    }
    unit_of[static_cast<std::size_t>(id)] = u;
  }
  auto unit = [&](int node) { return unit_of[static_cast<std::size_t>(node)]; };
  for (int id = 0; id < forward_nodes; ++id) {
    const int u = unit(id);
    if (u < 0) continue;
    for (const Output& in : b.Inputs(id)) {
      const int v = unit(in.node());
      if (v < 0 || v == u || internal::IsBackEdge(b, id, in)) continue;
      units[static_cast<std::size_t>(u)].inputs.push_back(in);
    }
  }
  // Units in an order where each comes after its inputs: node order when
  // there is no loop, else a depth-first order of the unit DAG.
  std::vector<int> order;
  if (loop_units.empty()) {
    for (int u = 0; u < static_cast<int>(units.size()); ++u) order.push_back(u);
  } else {
    std::vector<char> state(units.size(), 0);  // 0 new, 1 open, 2 done
    for (int start = 0; start < static_cast<int>(units.size()); ++start) {
      if (state[static_cast<std::size_t>(start)] != 0) continue;
      std::vector<std::pair<int, std::size_t>> stack = {{start, 0}};
      state[static_cast<std::size_t>(start)] = 1;
      while (!stack.empty()) {
        auto& [u, next] = stack.back();
        const std::vector<Output>& ins = units[static_cast<std::size_t>(u)].inputs;
        if (next < ins.size()) {
          const int v = unit(ins[next++].node());
          if (state[static_cast<std::size_t>(v)] == 1) {
            return InternalError("gradients: a cycle through node '", ins[next - 1].node_name(),
                                 "' that is not a loop's back edge");
          }
          if (state[static_cast<std::size_t>(v)] == 0) {
            state[static_cast<std::size_t>(v)] = 1;
            stack.emplace_back(v, 0);
          }
          continue;
        }
        state[static_cast<std::size_t>(u)] = 2;
        order.push_back(u);
        stack.pop_back();
      }
    }
  }

  // The units on a path from an x to a y.
  std::vector<char> from_x(units.size(), 0);
  for (const Output& x : xs) from_x[static_cast<std::size_t>(unit(x.node()))] = 1;
  for (int u : order) {
    for (const Output& in : units[static_cast<std::size_t>(u)].inputs) {
      if (from_x[static_cast<std::size_t>(unit(in.node()))] && CarriesGradient(in.dtype())) {
        from_x[static_cast<std::size_t>(u)] = 1;
      }
    }
  }
  std::vector<char> to_y(units.size(), 0);
  for (const Output& y : ys) to_y[static_cast<std::size_t>(unit(y.node()))] = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!to_y[static_cast<std::size_t>(*it)]) continue;
    for (const Output& in : units[static_cast<std::size_t>(*it)].inputs)
      to_y[static_cast<std::size_t>(unit(in.node()))] = 1;
  }
  // Whether input |in| of a unit on a path receives a gradient.
  auto receives = [&](const Output& in) {
    const int v = unit(in.node());
    return v >= 0 && from_x[static_cast<std::size_t>(v)] && CarriesGradient(in.dtype());
  };

  auto outer = b.NameScope(options.scope);
  std::map<Key, std::vector<Output>> pending;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    Output g = grad_ys.empty() ? b.Op("OnesLike", {ys[i]}, {}, "grad_ys") : grad_ys[i];
    if (!grad_ys.empty() && (g.dtype() != ys[i].dtype() || !g.shape().IsCompatibleWith(ys[i].shape()))) {
      return InvalidArgumentError("gradients: grad_ys[", i, "] is ", DTypeName(g.dtype()), g.shape().ToString(),
                                  " but y '", ys[i].name(), "' is ", DTypeName(ys[i].dtype()),
                                  ys[i].shape().ToString());
    }
    pending[{ys[i].node(), ys[i].index()}].push_back(g);
  }
  WEFT_RETURN_IF_ERROR(b.status());

  // The gradient of one output: the sum of what its consumers sent back.
  auto total = [&](const Key& key) -> Output {
    auto it = pending.find(key);
    if (it == pending.end() || it->second.empty()) return Output();
    std::vector<Output>& parts = it->second;
    if (parts.size() > 1) {
      Output sum = b.Op("AddN", parts, {}, "AddN");
      parts.assign(1, sum);
    }
    return parts[0];
  };

  for (auto unit_it = order.rbegin(); unit_it != order.rend(); ++unit_it) {
    const Unit& u = units[static_cast<std::size_t>(*unit_it)];
    if (!from_x[static_cast<std::size_t>(*unit_it)] || !to_y[static_cast<std::size_t>(*unit_it)]) continue;
    if (u.frame >= 0) {
      const std::string loop_name = frames.frames[static_cast<std::size_t>(u.frame)].name;
      auto scope = b.NameScope(loop_name);
      auto handed_on = internal::LoopGradient(
          b, frames, u.frame, u.nodes,
          [&](const Output& exit) {
            return total({exit.node(), exit.index()});
          },
          receives);
      if (handed_on.ok() && !b.status().ok()) handed_on = b.status();
      if (!handed_on.ok()) return handed_on.status().WithContext(StrCat("gradient of while loop '", loop_name, "'"));
      for (auto& [in, g] : *handed_on) pending[{in.node(), in.index()}].push_back(g);
      continue;
    }
    const int id = u.node;
    const NodeDef& def = b.node_def(id);
    const int num_outputs = static_cast<int>(b.node_types(id).output_types.size());
    const std::string node_name = def.name;
    const std::string op = def.op;
    const std::string device = def.device;
    auto scope = b.NameScope(node_name);
    std::vector<Output> grads(static_cast<std::size_t>(num_outputs));
    bool any = false;
    for (int k = 0; k < num_outputs; ++k) {
      grads[static_cast<std::size_t>(k)] = total({id, k});
      any = any || grads[static_cast<std::size_t>(k)].valid();
    }
    WEFT_RETURN_IF_ERROR(b.status());
    if (!any) continue;
    const std::vector<Output> node_inputs = b.Inputs(id);
    const bool feeds_gradient = std::any_of(node_inputs.begin(), node_inputs.end(), receives);
    if (!feeds_gradient) continue;  // an x itself with nothing upstream
    bool not_differentiable = false;
    const GradFn* fn = registry.Find(op, &not_differentiable);
    if (not_differentiable) continue;
    if (fn == nullptr) {
      return UnimplementedError("gradients: op ", op, " (node '", node_name,
                                "') has no gradient function, and it lies between the xs and the ys");
    }
    std::optional<GraphBuilder::Scope> on_device;
    if (!device.empty()) on_device.emplace(b.DeviceScope(device));
    GradContext ctx(b, id, std::move(grads));
    std::vector<Output> dx(node_inputs.size());
    Status status = (*fn)(ctx, dx);
    if (status.ok()) status = b.status();
    if (!status.ok()) return status.WithContext(StrCat("gradient of node '", node_name, "' (", op, ")"));
    if (dx.size() != node_inputs.size()) {
      return InternalError("gradient of node '", node_name, "' (", op, "): ", dx.size(), " input gradients for ",
                           node_inputs.size(), " inputs");
    }
    for (std::size_t i = 0; i < dx.size(); ++i) {
      const Output& in = node_inputs[i];
      if (!dx[i].valid() || !receives(in)) continue;
      pending[{in.node(), in.index()}].push_back(dx[i]);
    }
  }

  std::vector<Output> result;
  for (const Output& x : xs) {
    Output g = total({x.node(), x.index()});
    WEFT_RETURN_IF_ERROR(b.status());
    if (!g.valid()) {
      if (options.unreachable == GradientOptions::Unreachable::kError) {
        return InvalidArgumentError("gradients: no y depends on x '", x.name(), "'");
      }
      Output like = x;
      if (x.dtype() == DType::kResource) {
        const NodeDef& var = b.node_def(x.node());
        auto dtype = var.attrs.find("dtype");
        if (dtype == var.attrs.end()) {
          return InvalidArgumentError("gradients: x '", x.name(), "' is a resource that is not a variable");
        }
        like = b.Op("ReadVariable", {x}, {{"dtype", dtype->second}});
      }
      g = b.Op("ZerosLike", {like});
      WEFT_RETURN_IF_ERROR(b.status());
    }
    result.push_back(g);
  }
  return result;
}

}  // namespace weft::grad
