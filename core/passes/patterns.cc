// Level-2 rewrites that put exported graphs in the shape the fusions take
// (docs/optimizer.md): the erf form of GELU that ONNX exports write as five
// ops becomes one Gelu, and a Reshape moves after the elementwise ops that
// follow it, so that a MatMul (which is 2-D) meets its bias and activation
// and two Reshapes meet and cancel.
#include <cmath>
#include <optional>

#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes::internal {
namespace {

std::optional<double> ScalarOf(const Graph& g, const Endpoint& e) {
  const Tensor* v = ConstValue(g.node(e.node));
  if (v == nullptr || v->num_elements() != 1 || !v->host_visible()) return std::nullopt;
  if (v->dtype() == DType::kF32) return v->data<float>()[0];
  if (v->dtype() == DType::kF64) return v->data<double>()[0];
  return std::nullopt;
}

bool Near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want); }

class Matcher {
 public:
  Matcher(const Graph& g, const PassContext& context, const std::vector<bool>& used)
      : g_(g), context_(context), used_(used) {}

  // |node|, when it is |op|, free to rewrite, and read only by |reader|.
  const Graph::Node* Inner(const Endpoint& e, const char* op, const Graph::Node& reader) const {
    const Graph::Node& node = g_.node(e.node);
    if (e.index != 0 || node.op_name() != op || used_[static_cast<std::size_t>(node.id)] || !IsRewritable(node) ||
        !node.control_inputs.empty() || context_.keep.contains(node.name())) {
      return nullptr;
    }
    const auto& readers = g_.consumers()[static_cast<std::size_t>(node.id)];
    if (readers.size() != 1 || readers[0].first != reader.id || readers[0].second < 0) return nullptr;
    if (Device(node) != Device(reader)) return nullptr;
    return &node;
  }

  std::string Device(const Graph::Node& node) const {
    return context_.requested_device ? context_.requested_device(node.def) : node.def.device;
  }

 private:
  const Graph& g_;
  const PassContext& context_;
  const std::vector<bool>& used_;
};

// 1 + erf(x / sqrt(2)) (or erf(x * (1 / sqrt(2))) + 1) read by |reader|:
// the nodes (Add, Erf, Div or Mul) and x.
std::optional<std::pair<std::vector<int>, Endpoint>> OnePlusErf(const Graph& g, const Matcher& m, const Endpoint& e,
                                                                const Graph::Node& reader) {
  const Graph::Node* add = m.Inner(e, "Add", reader);
  if (add == nullptr) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    if (!Near(ScalarOf(g, add->inputs[static_cast<std::size_t>(1 - k)]), 1.0)) continue;
    const Graph::Node* erf = m.Inner(add->inputs[static_cast<std::size_t>(k)], "Erf", *add);
    if (erf == nullptr) continue;
    const Graph::Node* scale = m.Inner(erf->inputs[0], "Div", *erf);
    double want = std::sqrt(2.0);
    if (scale == nullptr) {
      scale = m.Inner(erf->inputs[0], "Mul", *erf);
      want = std::sqrt(0.5);
    }
    if (scale == nullptr) continue;
    for (int j = 0; j < (scale->op_name() == "Mul" ? 2 : 1); ++j) {
      if (!Near(ScalarOf(g, scale->inputs[static_cast<std::size_t>(1 - j)]), want)) continue;
      return std::make_pair(std::vector<int>{add->id, erf->id, scale->id}, scale->inputs[static_cast<std::size_t>(j)]);
    }
  }
  return std::nullopt;
}

// Unary elementwise float ops a Reshape may move after.
bool IsUnaryElementwise(const std::string& op) {
  static const char* const kOps[] = {"Relu", "Relu6", "Sigmoid", "Tanh", "Gelu", "Erf",   "Elu",    "Selu", "Softplus",
                                     "Neg",  "Abs",   "Exp",     "Log",  "Sqrt", "Rsqrt", "Square", "Sin",  "Cos"};
  for (const char* o : kOps) {
    if (op == o) return true;
  }
  return false;
}

bool IsBinaryElementwise(const std::string& op) {
  return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "RealDiv" || op == "Maximum" ||
         op == "Minimum";
}

}  // namespace

Expected<int64_t> FuseGelus(GraphEditor& edit, const PassContext& context, const OptimizeOptions&, PassReport& report) {
  const Graph& g = edit.graph();
  std::vector<bool> used(static_cast<std::size_t>(g.num_nodes()), false);
  Matcher m(g, context, used);
  int64_t changed = 0;
  for (int id : g.topological_order()) {
    const Graph::Node& out = g.node(id);
    // (x * (1 + erf(x / sqrt 2))) * 0.5, or (x * 0.5) * (1 + erf(...)), the
    // factors of each Mul in either order.
    if (out.op_name() != "Mul" || used[static_cast<std::size_t>(id)] || !IsRewritable(out) ||
        !IsFloating(out.output_types[0])) {
      continue;
    }
    std::optional<std::vector<int>> inner;
    std::optional<Endpoint> x;
    for (int k = 0; k < 2 && !inner; ++k) {
      const Endpoint a = out.inputs[static_cast<std::size_t>(k)], b = out.inputs[static_cast<std::size_t>(1 - k)];
      const Graph::Node* mul = m.Inner(a, "Mul", out);
      if (mul == nullptr) continue;
      for (int j = 0; j < 2 && !inner; ++j) {
        const Endpoint p = mul->inputs[static_cast<std::size_t>(j)], q = mul->inputs[static_cast<std::size_t>(1 - j)];
        if (Near(ScalarOf(g, b), 0.5)) {
          // out = mul * 0.5, mul = p * (1 + erf(p / sqrt 2))
          auto erf = OnePlusErf(g, m, q, *mul);
          if (erf && erf->second == p) {
            inner = erf->first;
            inner->push_back(mul->id);
            x = p;
          }
        } else if (Near(ScalarOf(g, q), 0.5)) {
          // out = mul * (1 + erf(p / sqrt 2)), mul = p * 0.5
          auto erf = OnePlusErf(g, m, b, out);
          if (erf && erf->second == p) {
            inner = erf->first;
            inner->push_back(mul->id);
            x = p;
          }
        }
      }
    }
    if (!inner) continue;
    NodeDef gelu;
    gelu.name = out.name();
    gelu.op = "Gelu";
    gelu.device = out.def.device;
    gelu.inputs = {TensorName(g, *x)};
    for (int c : out.control_inputs) gelu.inputs.push_back("^" + g.node(c).name());
    gelu.attrs["approximate"] = AttrValue(false);
    for (int n : *inner) {
      used[static_cast<std::size_t>(n)] = true;
      edit.Remove(n);
    }
    used[static_cast<std::size_t>(id)] = true;
    edit.Replace(id, std::move(gelu));
    NoteExample(report, out.name());
    ++changed;
  }
  return changed;
}

Expected<int64_t> SinkReshapes(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                               PassReport& report) {
  const Graph& g = edit.graph();
  std::vector<bool> used(static_cast<std::size_t>(g.num_nodes()), false);
  Matcher m(g, context, used);
  int64_t changed = 0;
  for (int id : g.topological_order()) {
    const Graph::Node& reshape = g.node(id);
    if (reshape.op_name() != "Reshape" || used[static_cast<std::size_t>(id)] || !IsRewritable(reshape) ||
        context.keep.contains(reshape.name())) {
      continue;
    }
    const Endpoint x = reshape.inputs[0];
    const Shape& in = g.node(x.node).output_shapes[static_cast<std::size_t>(x.index)];
    const Shape& out = reshape.output_shapes[0];
    if (!in.IsFullyDefined() || !out.IsFullyDefined() || in.rank() < 1 || out.rank() < 1 ||
        in.num_elements() != out.num_elements() || IsControlFlowOp(g.node(x.node).op_name())) {
      continue;
    }
    // The run of elementwise ops after it, each the only reader of the one
    // before: (node, which of its inputs reads the run).
    std::vector<std::pair<const Graph::Node*, int>> run;
    const Graph::Node* prev = &reshape;
    for (;;) {
      const auto& readers = g.consumers()[static_cast<std::size_t>(prev->id)];
      if (readers.size() != 1 || readers[0].second < 0) break;
      const Graph::Node& next = g.node(readers[0].first);
      const int k = readers[0].second;
      if (m.Inner(next.inputs[static_cast<std::size_t>(k)], prev->op_name().c_str(), next) == nullptr) break;
      const std::string& op = next.op_name();
      const bool unary = IsUnaryElementwise(op), binary = IsBinaryElementwise(op);
      if ((!unary && !binary) || used[static_cast<std::size_t>(next.id)] || !IsRewritable(next) ||
          !next.control_inputs.empty() || next.output_types.size() != 1 || !IsFloating(next.output_types[0]) ||
          next.output_shapes[0] != out) {
        break;
      }
      if (binary) {
        // The other operand: a constant scalar, or a vector along the last
        // axis that both shapes share, broadcasts the same either way.
        const Tensor* c = ConstValue(g.node(next.inputs[static_cast<std::size_t>(1 - k)].node));
        if (c == nullptr) break;
        const Shape& cs = c->shape();
        const bool scalar = cs.num_elements() == 1 && cs.rank() <= 1;
        const bool last = cs.rank() == 1 && cs.dim(0) == in.dim(in.rank() - 1) && cs.dim(0) == out.dim(out.rank() - 1);
        if (!scalar && !last) break;
      }
      run.emplace_back(&next, k);
      if (context.keep.contains(next.name())) break;  // its value is asked for: the Reshape comes back here
      prev = &next;
    }
    if (run.empty()) continue;
    // The run again, on x, under new names; then the Reshape under the
    // last one's name.
    std::string input = TensorName(g, x);
    for (const auto& [node, k] : run) {
      NodeDef moved = node->def;
      moved.name = edit.UniqueName(node->name() + "/before_reshape");
      std::size_t data = 0;
      for (std::string& in_name : moved.inputs) {
        if (in_name.starts_with("^")) continue;
        if (static_cast<int>(data++) == k) in_name = input;
      }
      input = moved.name;
      edit.Add(std::move(moved));
      used[static_cast<std::size_t>(node->id)] = true;
    }
    const Graph::Node& last = *run.back().first;
    NodeDef after = reshape.def;
    after.name = last.name();
    after.device = last.def.device;
    after.inputs = {input, reshape.def.inputs[1]};
    for (std::size_t i = 0; i + 1 < run.size(); ++i) edit.Remove(run[i].first->id);
    edit.Remove(reshape.id);
    edit.Replace(last.id, std::move(after));
    used[static_cast<std::size_t>(id)] = true;
    NoteExample(report, reshape.name());
    ++changed;
  }
  return changed;
}

}  // namespace weft::passes::internal
