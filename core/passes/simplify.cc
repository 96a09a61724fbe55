// Level-1 rewrites that need no evaluation: Identity and no-op removal,
// arithmetic simplification, and shapes known when the graph is built.
// Every rewrite here gives bitwise the same values (docs/optimizer.md).
#include <algorithm>
#include <cstring>

#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes::internal {
namespace {

// The node producing data input |k| of |node|.
const Graph::Node& Producer(const Graph& g, const Graph::Node& node, int k) {
  return g.node(node.inputs[static_cast<std::size_t>(k)].node);
}

const Shape& InputShape(const Graph& g, const Graph::Node& node, int k) {
  const Endpoint& e = node.inputs[static_cast<std::size_t>(k)];
  return g.node(e.node).output_shapes[static_cast<std::size_t>(e.index)];
}

bool FullyEqual(const Shape& a, const Shape& b) { return a.IsFullyDefined() && b.IsFullyDefined() && a == b; }

// Whether node |node| may be replaced by what reads its data input 0: it
// can be rewritten, waits for nothing else, and its input does not come
// straight from a control-flow op (a Switch's output is dead on one side,
// which a control edge would not carry).
bool CanBypass(const Graph& g, const Graph::Node& node, const PassContext& context) {
  if (!IsRewritable(node) || !node.control_inputs.empty() || node.inputs.empty()) return false;
  if (context.keep.contains(node.name())) return false;
  const Graph::Node& src = Producer(g, node, 0);
  if (IsControlFlowOp(src.op_name())) return false;
  // A node asked to run on another device than its input is a transfer.
  const std::string wanted = context.requested_device ? context.requested_device(node.def) : node.def.device;
  const std::string source = context.requested_device ? context.requested_device(src.def) : src.def.device;
  if (!wanted.empty() && wanted != source) return false;
  return true;
}

void Bypass(GraphEditor& edit, const Graph::Node& node, int input = 0) {
  const Endpoint& in = node.inputs[static_cast<std::size_t>(input)];
  edit.Forward(node.id, 0, in);
  edit.Remove(node.id);
}

// Whether every element of |t| is |value| (bitwise for floats: -0.0 is
// not 0.0). False for dtypes it does not read.
bool AllEqual(const Tensor& t, double value) {
  if (!t.host_visible() || t.num_elements() == 0) return false;
  auto all = [&](auto typed) {
    using T = decltype(typed);
    const T want = static_cast<T>(value);
    const T* p = t.data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if (std::memcmp(&p[i], &want, sizeof(T)) != 0) return false;
    }
    return true;
  };
  switch (t.dtype()) {
    case DType::kF32: return all(float{});
    case DType::kF64: return all(double{});
    case DType::kI8: return all(int8_t{});
    case DType::kI16: return all(int16_t{});
    case DType::kI32: return all(int32_t{});
    case DType::kI64: return all(int64_t{});
    case DType::kU8: return all(uint8_t{});
    default: return false;
  }
}

// Whether x op c (c broadcast) has x's shape: c is a scalar, or no larger
// than x in any axis (x's rank at least c's, and each axis of c, aligned
// from the last, 1 or known equal to x's), or both are fully known and the
// output is x's shape.
bool KeepsShape(const Shape& x, const Shape& c, const Shape& out) {
  if (c.rank() == 0) return true;
  if (!x.unknown_rank() && !c.unknown_rank() && c.rank() <= x.rank()) {
    bool within = true;
    for (int i = 1; i <= c.rank(); ++i) {
      const int64_t cd = c.dim(c.rank() - i), xd = x.dim(x.rank() - i);
      within = within && (cd == 1 || (cd >= 0 && cd == xd));
    }
    if (within) return true;
  }
  return FullyEqual(x, out);
}

// The permutation a Transpose applies, or nothing when it cannot be told.
std::optional<std::vector<int64_t>> PermOf(const Graph& g, const Graph::Node& node) {
  auto it = node.def.attrs.find("perm");
  std::vector<int64_t> perm;
  if (it != node.def.attrs.end() && it->second.holds<std::vector<int64_t>>())
    perm = it->second.get<std::vector<int64_t>>();
  // Only a valid permutation of a known rank: a bad one must fail at run
  // time as it would have.
  const Shape& in = InputShape(g, node, 0);
  if (in.unknown_rank()) return std::nullopt;
  if (perm.empty()) {
    for (int i = in.rank() - 1; i >= 0; --i) perm.push_back(i);
  }
  if (perm.size() != static_cast<std::size_t>(in.rank())) return std::nullopt;
  std::vector<bool> seen(perm.size(), false);
  for (int64_t axis : perm) {
    if (axis < 0 || axis >= in.rank() || seen[static_cast<std::size_t>(axis)]) return std::nullopt;
    seen[static_cast<std::size_t>(axis)] = true;
  }
  return perm;
}

bool IsIdentityPerm(const std::vector<int64_t>& perm) {
  for (std::size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Whether Transpose |node| (a known permutation, not the identity, of a
// fully known shape) moves only axes of size 1: the other axes keep their
// order, so each element keeps its offset.
bool MovesOnlyUnitAxes(const Graph& g, const Graph::Node& node) {
  auto perm = PermOf(g, node);
  const Shape& in = InputShape(g, node, 0);
  if (!perm || IsIdentityPerm(*perm) || !in.IsFullyDefined()) return false;
  int64_t last = -1;
  for (int64_t axis : *perm) {
    if (in.dims()[static_cast<std::size_t>(axis)] == 1) continue;
    if (axis < last) return false;
    last = axis;
  }
  return true;
}

}  // namespace

void NoteExample(PassReport& report, const std::string& node) {
  if (report.examples.size() < 5) report.examples.push_back(node);
}

void NoteLeft(PassReport& report, std::string sentence) {
  if (report.notes.size() >= 5) return;
  if (std::find(report.notes.begin(), report.notes.end(), sentence) != report.notes.end()) return;
  report.notes.push_back(std::move(sentence));
}

std::string TensorName(const Graph& g, const Endpoint& e) {
  const std::string& name = g.node(e.node).name();
  return e.index == 0 ? name : StrCat(name, ":", e.index);
}

const Tensor* ConstValue(const Graph::Node& node) {
  if (node.op_name() != "Const") return nullptr;
  auto it = node.def.attrs.find("value");
  if (it == node.def.attrs.end() || !it->second.holds<Tensor>()) return nullptr;
  return &it->second.get<Tensor>();
}

NodeDef MakeConst(const std::string& name, const Tensor& value) {
  NodeDef def;
  def.name = name;
  def.op = "Const";
  def.attrs.emplace("value", AttrValue(value));
  def.attrs.emplace("dtype", AttrValue(value.dtype()));
  return def;
}

Expected<int64_t> RemoveIdentities(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                                   PassReport& report) {
  const Graph& g = edit.graph();
  int64_t changed = 0;
  for (const Graph::Node& node : g.nodes()) {
    const std::string& op = node.op_name();
    bool noop = false;
    if (op == "Identity" || op == "StopGradient") {
      noop = true;
    } else if (op == "Cast") {
      noop = node.input_types[0] == node.output_types[0];
    } else if (op == "Reshape" || op == "ExpandDims" || op == "Squeeze") {
      noop = FullyEqual(InputShape(g, node, 0), node.output_shapes[0]);
    } else if (op == "Transpose") {
      auto perm = PermOf(g, node);
      noop = perm.has_value() && IsIdentityPerm(*perm);
    }
    if (!noop || !CanBypass(g, node, context)) continue;
    Bypass(edit, node);
    NoteExample(report, node.name());
    ++changed;
  }
  return changed;
}

Expected<int64_t> SimplifyArithmetic(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                                     PassReport& report) {
  const Graph& g = edit.graph();
  int64_t changed = 0;
  std::vector<bool> touched(static_cast<std::size_t>(g.num_nodes()), false);
  auto done = [&](const Graph::Node& node) {
    touched[static_cast<std::size_t>(node.id)] = true;
    NoteExample(report, node.name());
    ++changed;
  };
  for (int id : g.topological_order()) {
    const Graph::Node& node = g.node(id);
    const std::string& op = node.op_name();
    if (node.inputs.empty() || !CanBypass(g, node, context)) continue;

    // x * 1, 1 * x, x / 1, x + (-0.0), -0.0 + x, x - 0.0 (and integer
    // zeros): bitwise x. x + 0.0 is not (-0.0 + 0.0 is 0.0), so it stays.
    if (node.inputs.size() == 2 && (op == "Mul" || op == "Add" || op == "Sub" || op == "Div" || op == "RealDiv")) {
      const bool floating = IsFloating(node.output_types[0]);
      for (int c = 0; c < 2; ++c) {
        const int x = 1 - c;
        const Graph::Node& src = Producer(g, node, c);
        const Tensor* value = ConstValue(src);
        if (value == nullptr) continue;
        bool neutral = false;
        if (op == "Mul") neutral = AllEqual(*value, 1.0);
        if ((op == "Div" || op == "RealDiv") && c == 1) neutral = AllEqual(*value, 1.0);
        if (op == "Add") neutral = AllEqual(*value, floating ? -0.0 : 0.0);
        if (op == "Sub" && c == 1) neutral = AllEqual(*value, 0.0);
        if (!neutral) continue;
        const Shape& xs = InputShape(g, node, x);
        if (!KeepsShape(xs, value->shape(), node.output_shapes[0])) continue;
        if (IsControlFlowOp(Producer(g, node, x).op_name())) continue;
        Bypass(edit, node, x);
        done(node);
        break;
      }
      continue;
    }
    // -(-x) = x.
    if (op == "Neg") {
      const Graph::Node& inner = Producer(g, node, 0);
      if (inner.op_name() != "Neg" || touched[static_cast<std::size_t>(inner.id)] || !CanBypass(g, inner, context)) {
        continue;
      }
      if (IsControlFlowOp(Producer(g, inner, 0).op_name())) continue;
      Bypass(edit, node, 0);
      edit.Forward(node.id, 0, inner.inputs[0]);
      done(node);
      continue;
    }
    // Reshape(Reshape(x, s1), s2) = Reshape(x, s2), when the inner one is
    // known to succeed (x and its output fully known, as many elements):
    // a bad s1 must still fail.
    if (op == "Reshape") {
      const Graph::Node& inner = Producer(g, node, 0);
      if (inner.op_name() != "Reshape" || touched[static_cast<std::size_t>(inner.id)] ||
          !CanBypass(g, inner, context)) {
        continue;
      }
      const Shape& xs = InputShape(g, inner, 0);
      const Shape& mid = inner.output_shapes[0];
      if (!xs.IsFullyDefined() || !mid.IsFullyDefined() || xs.num_elements() != mid.num_elements()) continue;
      NodeDef def = node.def;
      def.inputs[0] = inner.def.inputs[0];
      edit.Replace(node.id, std::move(def));
      done(node);
      continue;
    }
    if (op == "Transpose" && MovesOnlyUnitAxes(g, node)) {
      // Every element stays where it is: a Reshape, which copies nothing
      // (an exported transformer's [1, S, H] <-> [S, 1, H]).
      const Shape& out = node.output_shapes[0];
      const std::string shape_name = edit.UniqueName(StrCat(node.name(), "/shape"));
      NodeDef shape = MakeConst(shape_name, Tensor::FromVector<int64_t>(out.dims()));
      shape.device = node.def.device;
      // After the Transpose's input, so that in a loop body or a branch
      // it runs where the Reshape does (CanBypass: no control flow there).
      shape.inputs.push_back(InputRefString(Producer(g, node, 0).name(), -1));
      edit.Add(std::move(shape));
      NodeDef def;
      def.name = node.name();
      def.op = "Reshape";
      def.device = node.def.device;
      def.inputs = node.def.inputs;
      def.inputs.insert(def.inputs.begin() + 1, shape_name);
      def.attrs = {{"T", node.def.attrs.at("T")}, {"Tshape", AttrValue(DType::kI64)}};
      edit.Replace(node.id, std::move(def));
      done(node);
      continue;
    }
    // Transpose(Transpose(x, p), q) = Transpose(x, p[q]), or x.
    if (op == "Transpose") {
      const Graph::Node& inner = Producer(g, node, 0);
      if (inner.op_name() != "Transpose" || touched[static_cast<std::size_t>(inner.id)] ||
          !CanBypass(g, inner, context)) {
        continue;
      }
      auto p = PermOf(g, inner);
      auto q = PermOf(g, node);
      if (!p || !q || p->size() != q->size()) continue;
      std::vector<int64_t> composed;
      bool valid = true;
      for (int64_t i : *q) {
        if (i < 0 || i >= static_cast<int64_t>(p->size())) valid = false;
        if (valid) composed.push_back((*p)[static_cast<std::size_t>(i)]);
      }
      if (!valid) continue;
      if (IsIdentityPerm(composed)) {
        if (IsControlFlowOp(Producer(g, inner, 0).op_name())) continue;
        Bypass(edit, node, 0);
        edit.Forward(node.id, 0, inner.inputs[0]);
      } else {
        NodeDef def = node.def;
        def.inputs[0] = inner.def.inputs[0];
        def.attrs["perm"] = AttrValue(composed);
        edit.Replace(node.id, std::move(def));
      }
      done(node);
      continue;
    }
  }
  return changed;
}

Expected<int64_t> FoldShapes(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                             PassReport& report) {
  const Graph& g = edit.graph();
  int64_t changed = 0;
  for (const Graph::Node& node : g.nodes()) {
    const std::string& op = node.op_name();
    if (op != "Shape" && op != "Size" && op != "Rank") continue;
    if (!node.control_inputs.empty() || context.keep.contains(node.name())) continue;
    const Graph::Node& src = Producer(g, node, 0);
    if (src.op_name() == "Switch") continue;
    const Shape& shape = InputShape(g, node, 0);
    const DType out = node.output_types[0];
    Tensor value;
    if (op == "Rank") {
      if (shape.unknown_rank()) continue;
      value = Tensor::Scalar<int32_t>(shape.rank());
    } else if (!shape.IsFullyDefined()) {
      continue;
    } else if (op == "Size") {
      const int64_t n = shape.num_elements();
      if (out == DType::kI32 && n > INT32_MAX) continue;
      value = out == DType::kI32 ? Tensor::Scalar<int32_t>(static_cast<int32_t>(n)) : Tensor::Scalar<int64_t>(n);
    } else {
      if (out == DType::kI32) {
        std::vector<int32_t> dims;
        bool fits = true;
        for (int64_t d : shape.dims()) {
          fits = fits && d <= INT32_MAX;
          dims.push_back(static_cast<int32_t>(d));
        }
        if (!fits) continue;
        value = Tensor::FromVector(dims);
      } else {
        value = Tensor::FromVector(shape.dims());
      }
    }
    // The constant keeps the node's name, and runs after the tensor it
    // describes, so that it stays in that tensor's loop or branch.
    NodeDef def = MakeConst(node.name(), value);
    def.device = node.def.device;
    def.inputs.push_back(InputRefString(src.name(), -1));
    edit.Replace(node.id, std::move(def));
    NoteExample(report, node.name());
    ++changed;
  }
  return changed;
}

}  // namespace weft::passes::internal
