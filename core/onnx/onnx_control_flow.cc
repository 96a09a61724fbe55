// ONNX converters, control flow: If, Loop and Scan as Weft conds and while loops (the conventions are in
// core/onnx/converters.h; docs/onnx.md has the table).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/base/strings.h"
#include "core/graph/control_flow.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// --- Control flow: If, Loop, Scan ---------------------------------------------------------
//
// If becomes a cond (core/graph/control_flow.h), Loop and Scan while
// loops; their subgraphs are converted inside them (Importer::
// ConvertSubgraph), reading outer values through the Switch or Enter
// nodes the builder makes. A Loop's or Scan's scan outputs are stacked
// by a Concat per iteration onto a loop variable that starts empty, so
// the body's declared output must give their shape.

const onnx::GraphProto* GraphAttr(NodeContext& c, std::string_view name) {
  const onnx::AttributeProto* a = c.Attr(name);
  return a != nullptr && a->has_g() ? &a->g() : nullptr;
}

// An ONNX condition (a bool tensor of one element) as a scalar.
Expected<Output> ScalarBool(NodeContext& c, const Output& x, std::string_view what) {
  if (x.dtype() != DType::kBool) return c.Error(what, " must be bool, got ", DTypeName(x.dtype()));
  return AsScalar(c, x, what);
}

Status IfOp(NodeContext& c) {
  const onnx::GraphProto* then_g = GraphAttr(c, "then_branch");
  const onnx::GraphProto* else_g = GraphAttr(c, "else_branch");
  if (then_g == nullptr || else_g == nullptr) return c.Error("needs graph attrs then_branch and else_branch");
  if (then_g->output_size() != else_g->output_size()) {
    return c.Error("then_branch has ", then_g->output_size(), " outputs and else_branch ", else_g->output_size());
  }
  std::vector<Output> outs;
  const Tensor known = c.Known(0);
  if (known.valid() && known.num_elements() == 1 && known.dtype() == DType::kBool) {
    // A condition known at import time: only its branch, inline (its
    // outer values made here first, so that the graph shares them), and
    // what it knows stays known.
    const onnx::GraphProto& branch = known.data<bool>()[0] ? *then_g : *else_g;
    WEFT_RETURN_IF_ERROR(c.MaterialiseCaptures(branch));
    std::vector<Tensor> known_outs;
    WEFT_ASSIGN_OR_RETURN(outs, c.Subgraph(branch, {}, &known_outs));
    for (std::size_t k = 0; k < known_outs.size(); ++k) {
      if (known_outs[k].valid()) c.SetKnown(static_cast<int>(k), known_outs[k]);
    }
  } else {
    WEFT_ASSIGN_OR_RETURN(Output cond, c.In(0));
    WEFT_ASSIGN_OR_RETURN(Output pred, ScalarBool(c, cond, "cond"));
    WEFT_RETURN_IF_ERROR(c.MaterialiseCaptures(*then_g));
    WEFT_RETURN_IF_ERROR(c.MaterialiseCaptures(*else_g));
    WEFT_ASSIGN_OR_RETURN(outs, Cond(
                                    c.b(), pred, [&]() { return c.Subgraph(*then_g, {}); },
                                    [&]() { return c.Subgraph(*else_g, {}); }, c.Name()));
  }
  for (std::size_t k = 0; k < outs.size(); ++k) c.SetOut(static_cast<int>(k), outs[k]);
  return Status();
}

// The shape a loop-carried value keeps through the iterations: its initial
// shape, with the dimensions the body's declared output leaves open (or
// declares otherwise) unknown; with no declared shape, its rank only.
Shape LoopInvariant(const Shape& initial, const onnx::ValueInfoProto& declared) {
  auto type = ValueInfoType(declared);
  if (!type.ok() || initial.unknown_rank()) return Shape::UnknownRank();
  const Shape& d = type->first;
  // No declared shape: the rank is kept, every dimension may change.
  if (d.unknown_rank()) return Shape::UnknownDims(initial.rank());
  if (d.rank() != initial.rank()) return Shape::UnknownRank();
  std::vector<int64_t> dims;
  for (int i = 0; i < initial.rank(); ++i) {
    dims.push_back(initial.dim(i) == d.dim(i) ? initial.dim(i) : Shape::kUnknownDim);
  }
  return Shape(dims);
}

// The empty start of a scan output's stack, [0, ...] of the per-iteration
// shape the body declares.
Expected<std::pair<Output, Shape>> EmptyStack(NodeContext& c, const onnx::ValueInfoProto& declared) {
  auto type = ValueInfoType(declared);
  if (!type.ok()) return type.status().WithContext(StrCat("scan output ", Quote(declared.name())));
  const Shape& s = type->first;
  if (!s.IsFullyDefined()) {
    return c.Unsupported("scan output ", Quote(declared.name()), " has the declared shape ", s.ToString(),
                         "; Weft stacks scan outputs from an empty tensor and needs every dimension of the body's "
                         "output declared");
  }
  std::vector<int64_t> dims = {0};
  dims.insert(dims.end(), s.dims().begin(), s.dims().end());
  WEFT_ASSIGN_OR_RETURN(Tensor empty, Tensor::Allocate(type->second, Shape(dims)));
  dims[0] = Shape::kUnknownDim;
  return std::make_pair(c.b().Const(empty, c.Name(StrCat(SanitiseName(declared.name()), "_stack"))), Shape(dims));
}

Output Stack(NodeContext& c, const Output& stack, const Output& value) {
  GraphBuilder& b = c.b();
  Output row = b.Op("ExpandDims", {value}, {{"axis", AttrValue(int64_t{0})}}, c.Name("row"));
  return b.Op("Concat", {stack, row}, {{"axis", AttrValue(int64_t{0})}}, c.Name("stack"));
}

Status LoopOp(NodeContext& c) {
  const onnx::GraphProto* body = GraphAttr(c, "body");
  if (body == nullptr) return c.Error("needs the graph attr body");
  const int n_vars = std::max(0, c.num_inputs() - 2);
  const int n_scan = body->output_size() - 1 - n_vars;
  if (body->input_size() != 2 + n_vars || n_scan < 0) {
    return c.Error("the body has ", body->input_size(), " inputs and ", body->output_size(), " outputs; with ", n_vars,
                   " loop-carried values it needs ", 2 + n_vars, " inputs and at least ", 1 + n_vars, " outputs");
  }
  GraphBuilder& b = c.b();
  std::optional<Output> trips;
  if (c.has_input(0)) {
    WEFT_ASSIGN_OR_RETURN(Output m, c.In(0));
    WEFT_ASSIGN_OR_RETURN(trips, ScalarI64(c, m, "M"));
  }
  Output go = b.Const(Tensor::Scalar<bool>(true), c.Name("always"));
  if (c.has_input(1)) {
    WEFT_ASSIGN_OR_RETURN(Output cond, c.In(1));
    WEFT_ASSIGN_OR_RETURN(go, ScalarBool(c, cond, "cond"));
  }
  WhileOptions options;
  options.name = c.Name();
  std::vector<Output> vars = {b.Const(Tensor::Scalar<int64_t>(0), c.Name("iteration")), go};
  options.shape_invariants = {Shape{}, Shape{}};
  for (int j = 0; j < n_vars; ++j) {
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(2 + j));
    vars.push_back(v);
    options.shape_invariants.push_back(LoopInvariant(v.shape(), body->output(1 + j)));
  }
  for (int k = 0; k < n_scan; ++k) {
    WEFT_ASSIGN_OR_RETURN(auto stack, EmptyStack(c, body->output(1 + n_vars + k)));
    vars.push_back(stack.first);
    options.shape_invariants.push_back(stack.second);
  }
  WEFT_RETURN_IF_ERROR(c.MaterialiseCaptures(*body));
  auto cond_fn = [&](const std::vector<Output>& v) -> Expected<Output> {
    if (!trips.has_value()) return v[1];
    return b.Op("LogicalAnd", {b.Op("Less", {v[0], *trips}, {}, c.Name("more")), v[1]}, {}, c.Name("go"));
  };
  auto body_fn = [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
    const std::vector<Output> ins(v.begin(), v.begin() + 2 + n_vars);
    WEFT_ASSIGN_OR_RETURN(std::vector<Output> outs, c.Subgraph(*body, ins));
    std::vector<Output> next = {
        b.Op("Add", {v[0], b.Const(Tensor::Scalar<int64_t>(1), c.Name("one"))}, {}, c.Name("next_iteration"))};
    WEFT_ASSIGN_OR_RETURN(Output cond_out, ScalarBool(c, outs[0], "cond_out"));
    next.push_back(cond_out);
    for (int j = 0; j < n_vars; ++j) next.push_back(outs[static_cast<std::size_t>(1 + j)]);
    for (int k = 0; k < n_scan; ++k) {
      next.push_back(
          Stack(c, v[static_cast<std::size_t>(2 + n_vars + k)], outs[static_cast<std::size_t>(1 + n_vars + k)]));
    }
    return next;
  };
  WEFT_ASSIGN_OR_RETURN(std::vector<Output> results, WhileLoop(b, cond_fn, body_fn, vars, options));
  for (int j = 0; j < n_vars + n_scan; ++j) c.SetOut(j, results[static_cast<std::size_t>(2 + j)]);
  return Status();
}

Status ScanOp(NodeContext& c) {
  if (c.opset() < 9) return c.Unsupported("Scan of opset 8 (with a batch axis and sequence_lens); opset 9 and later");
  const onnx::GraphProto* body = GraphAttr(c, "body");
  if (body == nullptr) return c.Error("needs the graph attr body");
  const int64_t m = c.Int("num_scan_inputs", 0);
  const int64_t n = c.num_inputs() - m;
  const int64_t k_out = body->output_size() - n;
  if (m < 1 || n < 0 || body->input_size() != n + m || k_out < 0) {
    return c.Error("num_scan_inputs ", m, " with ", c.num_inputs(), " inputs and a body of ", body->input_size(),
                   " inputs and ", body->output_size(), " outputs do not fit (the body takes the ", n,
                   " states and one slice of each scan input, and returns the states and the scan outputs)");
  }
  const std::vector<int64_t> in_axes = c.Ints("scan_input_axes", std::vector<int64_t>(m, 0));
  const std::vector<int64_t> in_dirs = c.Ints("scan_input_directions", std::vector<int64_t>(m, 0));
  const std::vector<int64_t> out_axes = c.Ints("scan_output_axes", std::vector<int64_t>(k_out, 0));
  const std::vector<int64_t> out_dirs = c.Ints("scan_output_directions", std::vector<int64_t>(k_out, 0));
  if (static_cast<int64_t>(in_axes.size()) != m || static_cast<int64_t>(in_dirs.size()) != m ||
      static_cast<int64_t>(out_axes.size()) != k_out || static_cast<int64_t>(out_dirs.size()) != k_out) {
    return c.Error("scan_input_axes and scan_input_directions need ", m,
                   " values and scan_output_axes and scan_output_directions ", k_out);
  }
  GraphBuilder& b = c.b();
  std::vector<Output> scans;
  std::vector<int64_t> axes;
  Output length;
  for (int64_t j = 0; j < m; ++j) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(static_cast<int>(n + j)));
    const int rank = x.shape().rank();
    if (rank < 1) return c.Unsupported("scan input ", j, " of unknown rank or a scalar");
    WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, in_axes[static_cast<std::size_t>(j)], rank, "scan_input_axes"));
    if (in_dirs[static_cast<std::size_t>(j)] != 0) {
      x = b.Op("Reverse", {x}, {{"axis", AttrValue(std::vector<int64_t>{axis})}}, c.Name(StrCat("reversed_", j)));
    }
    if (j == 0) {
      const int64_t dim = x.shape().dim(static_cast<int>(axis));
      length = dim >= 0 ? b.Const(Tensor::Scalar<int64_t>(dim), c.Name("length"))
                        : b.Op("Gather",
                               {b.Op("Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, c.Name("input_shape")),
                                b.Const(Tensor::Scalar<int64_t>(axis), c.Name("axis"))},
                               {}, c.Name("length"));
    }
    scans.push_back(x);
    axes.push_back(axis);
  }
  WhileOptions options;
  options.name = c.Name();
  std::vector<Output> vars = {b.Const(Tensor::Scalar<int64_t>(0), c.Name("iteration"))};
  options.shape_invariants = {Shape{}};
  for (int64_t j = 0; j < n; ++j) {
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(static_cast<int>(j)));
    vars.push_back(v);
    options.shape_invariants.push_back(LoopInvariant(v.shape(), body->output(static_cast<int>(j))));
  }
  for (int64_t k = 0; k < k_out; ++k) {
    WEFT_ASSIGN_OR_RETURN(auto stack, EmptyStack(c, body->output(static_cast<int>(n + k))));
    vars.push_back(stack.first);
    options.shape_invariants.push_back(stack.second);
  }
  WEFT_RETURN_IF_ERROR(c.MaterialiseCaptures(*body));
  auto cond_fn = [&](const std::vector<Output>& v) -> Expected<Output> {
    return b.Op("Less", {v[0], length}, {}, c.Name("more"));
  };
  auto body_fn = [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
    std::vector<Output> ins(v.begin() + 1, v.begin() + 1 + n);
    for (int64_t j = 0; j < m; ++j) {
      const auto uj = static_cast<std::size_t>(j);
      ins.push_back(b.Op("Gather", {scans[uj], v[0]}, {{"axis", AttrValue(axes[uj])}}, c.Name(StrCat("slice_", j))));
    }
    WEFT_ASSIGN_OR_RETURN(std::vector<Output> outs, c.Subgraph(*body, ins));
    std::vector<Output> next = {
        b.Op("Add", {v[0], b.Const(Tensor::Scalar<int64_t>(1), c.Name("one"))}, {}, c.Name("next_iteration"))};
    for (int64_t j = 0; j < n; ++j) next.push_back(outs[static_cast<std::size_t>(j)]);
    for (int64_t k = 0; k < k_out; ++k) {
      next.push_back(Stack(c, v[static_cast<std::size_t>(1 + n + k)], outs[static_cast<std::size_t>(n + k)]));
    }
    return next;
  };
  WEFT_ASSIGN_OR_RETURN(std::vector<Output> results, WhileLoop(b, cond_fn, body_fn, vars, options));
  for (int64_t j = 0; j < n; ++j) c.SetOut(static_cast<int>(j), results[static_cast<std::size_t>(1 + j)]);
  for (int64_t k = 0; k < k_out; ++k) {
    const auto uk = static_cast<std::size_t>(k);
    Output y = results[static_cast<std::size_t>(1 + n + k)];
    const int rank = y.shape().rank();
    if (out_dirs[uk] != 0) {
      y = b.Op("Reverse", {y}, {{"axis", AttrValue(std::vector<int64_t>{0})}},
               c.Name(StrCat("output_", k, "_reversed")));
    }
    WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, out_axes[uk], rank, "scan_output_axes"));
    if (axis != 0) {
      std::vector<int64_t> perm;
      for (int64_t i = 0; i < rank; ++i) perm.push_back(i < axis ? i + 1 : (i == axis ? 0 : i));
      y = b.Op("Transpose", {y}, {{"perm", AttrValue(perm)}}, c.Name(StrCat("output_", k)));
    }
    c.SetOut(static_cast<int>(n + k), y);
  }
  return Status();
}

}  // namespace

void AddControlFlowConverters(ConverterTable& t) {
  t["If"] = IfOp;
  t["Loop"] = LoopOp;
  t["Scan"] = ScanOp;
}

}  // namespace weft::onnx_io::convert
