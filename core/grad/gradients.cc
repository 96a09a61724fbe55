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

namespace {

// A node of the ys' frame, or a whole loop in it.
struct Unit {
  int node = -1;   // a single node, or
  int frame = -1;  // a loop
  std::vector<int> nodes;
  std::vector<Output> inputs;  // data inputs from other units
};

// One AddGradients call; the members are what its phases share, set in the
// order Run runs them.
class Backprop {
 public:
  Backprop(GraphBuilder& b, const std::vector<Output>& ys, const std::vector<Output>& xs,
           const std::vector<Output>& grad_ys, const GradientOptions& options)
      : b_(b), ys_(ys), xs_(xs), grad_ys_(grad_ys), options_(options) {}
  Backprop(const Backprop&) = delete;
  Backprop& operator=(const Backprop&) = delete;

  Expected<std::vector<Output>> Run();

 private:
  int FrameOf(int node) const { return frames_.frame_of[static_cast<std::size_t>(node)]; }
  int UnitOf(int node) const { return unit_of_[static_cast<std::size_t>(node)]; }
  Status CheckArguments() const;
  Status CheckFrames() const;
  void FormUnits();
  Status OrderUnits();
  void MarkPaths();
  bool Receives(const Output& in) const;
  Status SeedGradYs();
  Output Total(const Key& key);
  Status Backward();
  Status DifferentiateLoop(const Unit& u);
  Status DifferentiateNode(int id);
  Expected<std::vector<Output>> Results();

  GraphBuilder& b_;
  const std::vector<Output>& ys_;
  const std::vector<Output>& xs_;
  const std::vector<Output>& grad_ys_;
  const GradientOptions& options_;
  const GradRegistry* registry_ = nullptr;
  int forward_nodes_ = 0;
  internal::Frames frames_;
  int root_ = 0;  // the ys' frame
  std::vector<Unit> units_;
  std::vector<int> unit_of_;  // per forward node, or -1
  std::map<int, int> loop_units_;
  std::vector<int> order_;  // units, each after its inputs
  std::vector<char> from_x_, to_y_;
  std::map<Key, std::vector<Output>> pending_;
};

Expected<std::vector<Output>> Backprop::Run() {
  WEFT_RETURN_IF_ERROR(CheckArguments());
  registry_ = &GradRegistry::Global();
  forward_nodes_ = b_.num_nodes();
  // Backward ops read forward values from inside conds as they are.
  auto inner = b_.AllowInnerTensors();

  // Loops are differentiated whole: the graph is seen as units, each a
  // node of the ys' frame or a whole loop in it (every node in the loop or
  // nested in it, and its Exits), which form a DAG.
  frames_ = internal::AnalyzeFrames(b_);
  root_ = FrameOf(ys_[0].node());
  WEFT_RETURN_IF_ERROR(CheckFrames());
  FormUnits();
  WEFT_RETURN_IF_ERROR(OrderUnits());
  MarkPaths();

  auto outer = b_.NameScope(options_.scope);
  WEFT_RETURN_IF_ERROR(SeedGradYs());
  WEFT_RETURN_IF_ERROR(Backward());
  return Results();
}

Status Backprop::CheckArguments() const {
  WEFT_RETURN_IF_ERROR(b_.status());
  if (!grad_ys_.empty() && grad_ys_.size() != ys_.size()) {
    return InvalidArgumentError("gradients: ", ys_.size(), " ys but ", grad_ys_.size(), " grad_ys");
  }
  for (const Output& y : ys_) {
    if (!y.valid() || y.index() < 0) return InvalidArgumentError("gradients: a y is not a tensor");
    if (!IsFloating(y.dtype())) {
      return InvalidArgumentError("gradients: y '", y.name(), "' is ", DTypeName(y.dtype()),
                                  "; only floating-point tensors can be differentiated");
    }
  }
  for (const Output& x : xs_) {
    if (!x.valid() || x.index() < 0) return InvalidArgumentError("gradients: an x is not a tensor");
    if (!CarriesGradient(x.dtype())) {
      return InvalidArgumentError("gradients: x '", x.name(), "' is ", DTypeName(x.dtype()),
                                  "; only floating-point tensors and variables can be differentiated against");
    }
  }
  return Status();
}

Status Backprop::CheckFrames() const {
  for (const Output& y : ys_) {
    if (FrameOf(y.node()) != root_) {
      return InvalidArgumentError("gradients: y '", y.name(), "' and y '", ys_[0].name(),
                                  "' are in different loop frames; differentiate values of one frame");
    }
  }
  for (const Output& x : xs_) {
    if (FrameOf(x.node()) != root_) {
      return InvalidArgumentError("gradients: x '", x.name(),
                                  "' is made inside a while loop; differentiate with respect to a value outside "
                                  "the loop, or to the loop's result");
    }
  }
  return Status();
}

// Units of the forward nodes in the ys' frame, and their inputs from
// other units.
void Backprop::FormUnits() {
  unit_of_.assign(static_cast<std::size_t>(forward_nodes_), -1);
  for (int id = 0; id < forward_nodes_; ++id) {
    const int f = FrameOf(id);
    if (!frames_.Within(f, root_)) continue;
    int loop = f == root_ ? -1 : frames_.ChildOf(f, root_);
    if (loop < 0 && b_.node_def(id).op == "Exit") {
      const std::vector<Output> in = b_.Inputs(id);
      if (!in.empty() && FrameOf(in[0].node()) != root_) loop = frames_.ChildOf(FrameOf(in[0].node()), root_);
    }
    int u = -1;
    if (loop < 0) {
      u = static_cast<int>(units_.size());
      units_.push_back(Unit{id, -1, {id}, {}});
    } else {
      auto [it, added] = loop_units_.emplace(loop, static_cast<int>(units_.size()));
      if (added) units_.push_back(Unit{-1, loop, {}, {}});
      u = it->second;
      units_[static_cast<std::size_t>(u)].nodes.push_back(id);
    }
    unit_of_[static_cast<std::size_t>(id)] = u;
  }
  for (int id = 0; id < forward_nodes_; ++id) {
    const int u = UnitOf(id);
    if (u < 0) continue;
    for (const Output& in : b_.Inputs(id)) {
      const int v = UnitOf(in.node());
      if (v < 0 || v == u || internal::IsBackEdge(b_, id, in)) continue;
      units_[static_cast<std::size_t>(u)].inputs.push_back(in);
    }
  }
}

// Units in an order where each comes after its inputs: node order when
// there is no loop, else a depth-first order of the unit DAG.
Status Backprop::OrderUnits() {
  if (loop_units_.empty()) {
    for (int u = 0; u < static_cast<int>(units_.size()); ++u) order_.push_back(u);
    return Status();
  }
  std::vector<char> state(units_.size(), 0);  // 0 new, 1 open, 2 done
  for (int start = 0; start < static_cast<int>(units_.size()); ++start) {
    if (state[static_cast<std::size_t>(start)] != 0) continue;
    std::vector<std::pair<int, std::size_t>> stack = {{start, 0}};
    state[static_cast<std::size_t>(start)] = 1;
    while (!stack.empty()) {
      auto& [u, next] = stack.back();
      const std::vector<Output>& ins = units_[static_cast<std::size_t>(u)].inputs;
      if (next < ins.size()) {
        const int v = UnitOf(ins[next++].node());
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
      order_.push_back(u);
      stack.pop_back();
    }
  }
  return Status();
}

// The units on a path from an x to a y.
void Backprop::MarkPaths() {
  from_x_.assign(units_.size(), 0);
  for (const Output& x : xs_) from_x_[static_cast<std::size_t>(UnitOf(x.node()))] = 1;
  for (int u : order_) {
    for (const Output& in : units_[static_cast<std::size_t>(u)].inputs) {
      if (from_x_[static_cast<std::size_t>(UnitOf(in.node()))] && CarriesGradient(in.dtype())) {
        from_x_[static_cast<std::size_t>(u)] = 1;
      }
    }
  }
  to_y_.assign(units_.size(), 0);
  for (const Output& y : ys_) to_y_[static_cast<std::size_t>(UnitOf(y.node()))] = 1;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    if (!to_y_[static_cast<std::size_t>(*it)]) continue;
    for (const Output& in : units_[static_cast<std::size_t>(*it)].inputs)
      to_y_[static_cast<std::size_t>(UnitOf(in.node()))] = 1;
  }
}

// Whether input |in| of a unit on a path receives a gradient.
bool Backprop::Receives(const Output& in) const {
  const int v = UnitOf(in.node());
  return v >= 0 && from_x_[static_cast<std::size_t>(v)] && CarriesGradient(in.dtype());
}

// The ys' gradients: grad_ys, or ones.
Status Backprop::SeedGradYs() {
  for (std::size_t i = 0; i < ys_.size(); ++i) {
    Output g = grad_ys_.empty() ? b_.Op("OnesLike", {ys_[i]}, {}, "grad_ys") : grad_ys_[i];
    if (!grad_ys_.empty() && (g.dtype() != ys_[i].dtype() || !g.shape().IsCompatibleWith(ys_[i].shape()))) {
      return InvalidArgumentError("gradients: grad_ys[", i, "] is ", DTypeName(g.dtype()), g.shape().ToString(),
                                  " but y '", ys_[i].name(), "' is ", DTypeName(ys_[i].dtype()),
                                  ys_[i].shape().ToString());
    }
    pending_[{ys_[i].node(), ys_[i].index()}].push_back(g);
  }
  return b_.status();
}

// The gradient of one output: the sum of what its consumers sent back.
Output Backprop::Total(const Key& key) {
  auto it = pending_.find(key);
  if (it == pending_.end() || it->second.empty()) return Output();
  std::vector<Output>& parts = it->second;
  if (parts.size() > 1) {
    Output sum = b_.Op("AddN", parts, {}, "AddN");
    parts.assign(1, sum);
  }
  return parts[0];
}

// The units on a path, from the ys back to the xs.
Status Backprop::Backward() {
  for (auto unit_it = order_.rbegin(); unit_it != order_.rend(); ++unit_it) {
    const Unit& u = units_[static_cast<std::size_t>(*unit_it)];
    if (!from_x_[static_cast<std::size_t>(*unit_it)] || !to_y_[static_cast<std::size_t>(*unit_it)]) continue;
    if (u.frame >= 0) {
      WEFT_RETURN_IF_ERROR(DifferentiateLoop(u));
    } else {
      WEFT_RETURN_IF_ERROR(DifferentiateNode(u.node));
    }
  }
  return Status();
}

Status Backprop::DifferentiateLoop(const Unit& u) {
  const std::string loop_name = frames_.frames[static_cast<std::size_t>(u.frame)].name;
  auto scope = b_.NameScope(loop_name);
  // Both functions are called only during LoopGradient, while *this lives.
  auto handed_on = internal::LoopGradient(
      b_, frames_, u.frame, u.nodes,
      [this](const Output& exit) {
        return Total({exit.node(), exit.index()});
      },
      [this](const Output& in) { return Receives(in); });
  if (handed_on.ok() && !b_.status().ok()) handed_on = b_.status();
  if (!handed_on.ok()) return handed_on.status().WithContext(StrCat("gradient of while loop '", loop_name, "'"));
  for (auto& [in, g] : *handed_on) pending_[{in.node(), in.index()}].push_back(g);
  return Status();
}

// Node |id|'s gradient function, given the gradients of its outputs;
// hands on the gradients of its inputs.
Status Backprop::DifferentiateNode(int id) {
  const NodeDef& def = b_.node_def(id);
  const int num_outputs = static_cast<int>(b_.node_types(id).output_types.size());
  const std::string node_name = def.name;
  const std::string op = def.op;
  const std::string device = def.device;
  auto scope = b_.NameScope(node_name);
  std::vector<Output> grads(static_cast<std::size_t>(num_outputs));
  bool any = false;
  for (int k = 0; k < num_outputs; ++k) {
    grads[static_cast<std::size_t>(k)] = Total({id, k});
    any = any || grads[static_cast<std::size_t>(k)].valid();
  }
  WEFT_RETURN_IF_ERROR(b_.status());
  if (!any) return Status();
  const std::vector<Output> node_inputs = b_.Inputs(id);
  const bool feeds_gradient =
      std::any_of(node_inputs.begin(), node_inputs.end(), [this](const Output& in) { return Receives(in); });
  if (!feeds_gradient) return Status();  // an x itself with nothing upstream
  bool not_differentiable = false;
  const GradFn* fn = registry_->Find(op, &not_differentiable);
  if (not_differentiable) return Status();
  if (fn == nullptr) {
    return UnimplementedError("gradients: op ", op, " (node '", node_name,
                              "') has no gradient function, and it lies between the xs and the ys");
  }
  std::optional<GraphBuilder::Scope> on_device;
  if (!device.empty()) on_device.emplace(b_.DeviceScope(device));
  GradContext ctx(b_, id, std::move(grads));
  std::vector<Output> dx(node_inputs.size());
  Status status = (*fn)(ctx, dx);
  if (status.ok()) status = b_.status();
  if (!status.ok()) return status.WithContext(StrCat("gradient of node '", node_name, "' (", op, ")"));
  if (dx.size() != node_inputs.size()) {
    return InternalError("gradient of node '", node_name, "' (", op, "): ", dx.size(), " input gradients for ",
                         node_inputs.size(), " inputs");
  }
  for (std::size_t i = 0; i < dx.size(); ++i) {
    const Output& in = node_inputs[i];
    if (!dx[i].valid() || !Receives(in)) continue;
    pending_[{in.node(), in.index()}].push_back(dx[i]);
  }
  return Status();
}

// Per x, its gradient, or zeros of its shape when no y depends on it (and
// options_.unreachable allows that).
Expected<std::vector<Output>> Backprop::Results() {
  std::vector<Output> result;
  for (const Output& x : xs_) {
    Output g = Total({x.node(), x.index()});
    WEFT_RETURN_IF_ERROR(b_.status());
    if (!g.valid()) {
      if (options_.unreachable == GradientOptions::Unreachable::kError) {
        return InvalidArgumentError("gradients: no y depends on x '", x.name(), "'");
      }
      Output like = x;
      if (x.dtype() == DType::kResource) {
        const NodeDef& var = b_.node_def(x.node());
        auto dtype = var.attrs.find("dtype");
        if (dtype == var.attrs.end()) {
          return InvalidArgumentError("gradients: x '", x.name(), "' is a resource that is not a variable");
        }
        like = b_.Op("ReadVariable", {x}, {{"dtype", dtype->second}});
      }
      g = b_.Op("ZerosLike", {like});
      WEFT_RETURN_IF_ERROR(b_.status());
    }
    result.push_back(g);
  }
  return result;
}

}  // namespace

Expected<std::vector<Output>> AddGradients(GraphBuilder& b, const std::vector<Output>& ys,
                                           const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                                           const GradientOptions& options) {
  Backprop backprop(b, ys, xs, grad_ys, options);
  return backprop.Run();
}

}  // namespace weft::grad
