#include "core/grad/gradients.h"

#include <algorithm>
#include <map>
#include <mutex>

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
    default:
      return b_.Op("Cast", {b_.Const(Tensor::Scalar<double>(value))}, {{"DstT", AttrValue(like.dtype())}});
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

  // The nodes on a path from an x to a y: reachable from an x (ids are in
  // topological order, as every node is added after its inputs) and
  // reaching a y.
  std::vector<char> from_x(static_cast<std::size_t>(forward_nodes), 0);
  for (const Output& x : xs) from_x[static_cast<std::size_t>(x.node())] = 1;
  std::vector<std::vector<Output>> inputs(static_cast<std::size_t>(forward_nodes));
  for (int id = 0; id < forward_nodes; ++id) {
    inputs[static_cast<std::size_t>(id)] = b.Inputs(id);
    for (const Output& in : inputs[static_cast<std::size_t>(id)]) {
      if (from_x[static_cast<std::size_t>(in.node())] && CarriesGradient(in.dtype())) {
        from_x[static_cast<std::size_t>(id)] = 1;
      }
    }
  }
  std::vector<char> to_y(static_cast<std::size_t>(forward_nodes), 0);
  for (const Output& y : ys) to_y[static_cast<std::size_t>(y.node())] = 1;
  for (int id = forward_nodes - 1; id >= 0; --id) {
    if (!to_y[static_cast<std::size_t>(id)]) continue;
    for (const Output& in : inputs[static_cast<std::size_t>(id)]) to_y[static_cast<std::size_t>(in.node())] = 1;
  }

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

  for (int id = forward_nodes - 1; id >= 0; --id) {
    if (!from_x[static_cast<std::size_t>(id)] || !to_y[static_cast<std::size_t>(id)]) continue;
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
    const std::vector<Output>& node_inputs = inputs[static_cast<std::size_t>(id)];
    const bool feeds_gradient = std::any_of(node_inputs.begin(), node_inputs.end(), [&](const Output& in) {
      return from_x[static_cast<std::size_t>(in.node())] && CarriesGradient(in.dtype());
    });
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
      if (!dx[i].valid() || !from_x[static_cast<std::size_t>(in.node())] || !CarriesGradient(in.dtype())) continue;
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
