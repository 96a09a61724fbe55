// The ONNX op converters: each maps one ONNX node (of opsets 7 to 17) onto
// Weft ops, with the op's attribute defaults and its opset's form (attrs
// that became inputs in opset 10, 11 or 13). docs/onnx.md has the table.
//
// Conventions: the node's main Weft node is named after the ONNX node
// (c.Name()), helpers under it (c.Name("MatMul")). Inputs that are attrs
// in Weft (axes, pads, shapes, perm) must be known at import time
// (KnownInts); an unknown one is an UNIMPLEMENTED error naming the input.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/base/strings.h"
#include "core/graph/control_flow.h"
#include "core/onnx/importer.h"

namespace weft::onnx_io {
namespace {

using Conv = std::map<std::string, Converter, std::less<>>;

Output Op(NodeContext& c, std::string_view op, const std::vector<Output>& in, AttrMap attrs = {},
          std::string_view suffix = {}) {
  return c.b().Op(op, in, std::move(attrs), c.Name(suffix));
}

Output ConstOf(NodeContext& c, const Tensor& t, std::string_view suffix) { return c.b().Const(t, c.Name(suffix)); }

Expected<Output> ScalarLike(NodeContext& c, DType dtype, double value, std::string_view suffix) {
  WEFT_ASSIGN_OR_RETURN(Tensor t, ScalarOf(dtype, value));
  return ConstOf(c, t, suffix);
}

// Normalises axis |a| for |rank|; an error naming |what| when out of range.
Expected<int64_t> Axis(NodeContext& c, int64_t a, int rank, std::string_view what) {
  if (rank < 0) return a;
  if (a < -rank || a >= rank) return c.Error(what, " ", a, " is out of range for rank ", rank);
  return a < 0 ? a + rank : a;
}

// --- Layouts ----------------------------------------------------------------------------------
//
// Images run channels-last (ImportOptions::channels_last): Conv, pools and
// BatchNormalization make NHWC outputs; elementwise ops keep an input's
// NHWC form; any other op reads the NCHW form, made by one Transpose.

// Input |i| of an elementwise op: its NHWC form when it has one.
Expected<std::pair<Output, bool>> ElementwiseIn(NodeContext& c, int i) {
  if (c.IsNhwc(i)) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.InNhwc(i));
    return std::make_pair(x, true);
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(i));
  return std::make_pair(x, false);
}

void SetOutAs(NodeContext& c, int i, const Output& y, bool nhwc) {
  if (nhwc) {
    c.SetOutNhwc(i, y);
  } else {
    c.SetOut(i, y);
  }
}

// The inputs of an op with NumPy broadcasting, all NHWC when one is (a
// lower-rank operand is padded to 4-D and permuted as the NCHW one would
// be), else all as ONNX has them. Returns the inputs and whether NHWC.
Expected<std::pair<std::vector<Output>, bool>> BroadcastIns(NodeContext& c, const std::vector<int>& indices) {
  bool any = false, possible = true;
  for (int i : indices) {
    any = any || c.IsNhwc(i);
    const Shape s = c.InShape(i);
    possible = possible && !s.unknown_rank() && s.rank() <= 4;
  }
  std::vector<Output> ins;
  if (!any || !possible) {
    for (int i : indices) {
      WEFT_ASSIGN_OR_RETURN(Output x, c.In(i));
      ins.push_back(x);
    }
    return std::make_pair(ins, false);
  }
  for (int i : indices) {
    const Shape s = c.InShape(i);
    if (c.IsNhwc(i) || s.rank() == 4) {
      WEFT_ASSIGN_OR_RETURN(Output x, c.InNhwc(i));
      ins.push_back(x);
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(i));
    bool ones_only = true;  // a scalar or size-1 dims broadcast the same either way
    for (int d = 0; d < s.rank(); ++d) ones_only = ones_only && s.dim(d) == 1;
    if (s.rank() == 0 || ones_only) {
      ins.push_back(x);
      continue;
    }
    std::vector<int64_t> dims(static_cast<std::size_t>(4 - s.rank()), 1);
    for (int d = 0; d < s.rank(); ++d) {
      if (s.dim(d) < 0) return c.Unsupported("broadcasting an operand of unknown shape ", s.ToString());
      dims.push_back(s.dim(d));
    }
    Output four = c.b().Op("Reshape", {x, c.b().Const(Int64s(dims), c.Name(StrCat("in", i, "_4d_shape")))}, {},
                           c.Name(StrCat("in", i, "_4d")));
    ins.push_back(c.b().Op("Transpose", {four}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 3, 1})}},
                           c.Name(StrCat("in", i, "_nhwc"))));
  }
  return std::make_pair(ins, true);
}

Status Unary(NodeContext& c, std::string_view weft_op) {
  WEFT_ASSIGN_OR_RETURN(auto x, ElementwiseIn(c, 0));
  SetOutAs(c, 0, Op(c, weft_op, {x.first}), x.second);
  return Status();
}

Status Binary(NodeContext& c, std::string_view weft_op) {
  WEFT_ASSIGN_OR_RETURN(auto in, BroadcastIns(c, {0, 1}));
  SetOutAs(c, 0, Op(c, weft_op, in.first), in.second);
  return Status();
}

// Sum, Max, Min, Mean of any number of inputs, broadcasting.
Status Variadic(NodeContext& c, std::string_view weft_op, bool mean) {
  if (c.num_inputs() < 1) return c.Error("needs at least one input");
  std::vector<int> indices(static_cast<std::size_t>(c.num_inputs()));
  std::iota(indices.begin(), indices.end(), 0);
  WEFT_ASSIGN_OR_RETURN(auto in, BroadcastIns(c, indices));
  Output acc = in.first[0];
  for (std::size_t i = 1; i < in.first.size(); ++i) {
    acc = Op(c, weft_op, {acc, in.first[i]}, {}, StrCat(weft_op, "_", i));
  }
  if (mean && c.num_inputs() > 1) {
    WEFT_ASSIGN_OR_RETURN(Output n, ScalarLike(c, acc.dtype(), c.num_inputs(), "count"));
    acc = Op(c, "Div", {acc, n});
  } else {
    acc = Op(c, "Identity", {acc});
  }
  SetOutAs(c, 0, acc, in.second);
  return Status();
}

// --- Elementwise with attributes -------------------------------------------------------------

Status LeakyRelu(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(auto xl, ElementwiseIn(c, 0));
  const Output x = xl.first;
  WEFT_ASSIGN_OR_RETURN(Output alpha, ScalarLike(c, x.dtype(), c.Float("alpha", 0.01), "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  Output positive = Op(c, "Greater", {x, zero}, {}, "positive");
  SetOutAs(c, 0, Op(c, "Select", {positive, x, Op(c, "Mul", {x, alpha}, {}, "scaled")}), xl.second);
  return Status();
}

Status PRelu(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(auto in, BroadcastIns(c, {0, 1}));
  const Output x = in.first[0], slope = in.first[1];
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  Output positive = Op(c, "Greater", {x, zero}, {}, "positive");
  SetOutAs(c, 0, Op(c, "Select", {positive, x, Op(c, "Mul", {x, slope}, {}, "scaled")}), in.second);
  return Status();
}

Status Elu(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const double alpha = c.Float("alpha", 1.0);
  if (alpha == 1.0) {
    c.SetOut(0, Op(c, "Elu", {x}));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output a, ScalarLike(c, x.dtype(), alpha, "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  Output negative = Op(c, "Mul", {a, Op(c, "Expm1", {x}, {}, "expm1")}, {}, "negative");
  c.SetOut(0, Op(c, "Select", {Op(c, "Greater", {x, zero}, {}, "positive"), x, negative}));
  return Status();
}

Status Selu(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  // ONNX's defaults are the float32 roundings of Weft's constants.
  const double alpha = c.Float("alpha", 1.67326319217681884765625), gamma = c.Float("gamma", 1.05070102214813232421875);
  if (std::abs(alpha - 1.6732632423543772) < 1e-6 && std::abs(gamma - 1.0507009873554805) < 1e-6) {
    c.SetOut(0, Op(c, "Selu", {x}));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output a, ScalarLike(c, x.dtype(), alpha * gamma, "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output g, ScalarLike(c, x.dtype(), gamma, "gamma"));
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  Output negative = Op(c, "Mul", {a, Op(c, "Expm1", {x}, {}, "expm1")}, {}, "negative");
  Output positive = Op(c, "Mul", {g, x}, {}, "scaled");
  c.SetOut(0, Op(c, "Select", {Op(c, "Greater", {x, zero}, {}, "positive"), positive, negative}));
  return Status();
}

// clip(alpha * x + beta, 0, 1), times x for HardSwish.
Status HardSigmoid(NodeContext& c, bool swish) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const double alpha = swish ? 1.0 / 6 : c.Float("alpha", 0.2), beta = swish ? 0.5 : c.Float("beta", 0.5);
  WEFT_ASSIGN_OR_RETURN(Output a, ScalarLike(c, x.dtype(), alpha, "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output bb, ScalarLike(c, x.dtype(), beta, "beta"));
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  WEFT_ASSIGN_OR_RETURN(Output one, ScalarLike(c, x.dtype(), 1, "one"));
  Output y = Op(c, "ClipByValue", {Op(c, "Add", {Op(c, "Mul", {x, a}, {}, "scaled"), bb}, {}, "shifted"), zero, one},
                {}, swish ? "hard_sigmoid" : "");
  c.SetOut(0, swish ? Op(c, "Mul", {x, y}) : y);
  return Status();
}

Status Softsign(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output one, ScalarLike(c, x.dtype(), 1, "one"));
  c.SetOut(0, Op(c, "RealDiv", {x, Op(c, "Add", {one, Op(c, "Abs", {x}, {}, "abs")}, {}, "denominator")}));
  return Status();
}

Status Clip(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(auto xl, ElementwiseIn(c, 0));
  const Output x = xl.first;
  const DType dt = x.dtype();
  const double lowest = IsFloating(dt)      ? -std::numeric_limits<double>::infinity()
                        : dt == DType::kI64 ? static_cast<double>(std::numeric_limits<int64_t>::min())
                        : dt == DType::kI32 ? static_cast<double>(std::numeric_limits<int32_t>::min())
                                            : 0.0;
  const double highest = IsFloating(dt)      ? std::numeric_limits<double>::infinity()
                         : dt == DType::kI64 ? static_cast<double>(std::numeric_limits<int64_t>::max())
                         : dt == DType::kI32 ? static_cast<double>(std::numeric_limits<int32_t>::max())
                                             : 255.0;
  Output lo, hi;
  if (c.opset() < 11) {
    WEFT_ASSIGN_OR_RETURN(lo, ScalarLike(c, dt, c.Float("min", lowest), "min"));
    WEFT_ASSIGN_OR_RETURN(hi, ScalarLike(c, dt, c.Float("max", highest), "max"));
  } else {
    if (c.has_input(1)) {
      WEFT_ASSIGN_OR_RETURN(lo, c.In(1));
    } else {
      WEFT_ASSIGN_OR_RETURN(lo, ScalarLike(c, dt, lowest, "min"));
    }
    if (c.has_input(2)) {
      WEFT_ASSIGN_OR_RETURN(hi, c.In(2));
    } else {
      WEFT_ASSIGN_OR_RETURN(hi, ScalarLike(c, dt, highest, "max"));
    }
  }
  // ReLU6, MobileNet's activation, has a kernel of its own.
  const Tensor klo = c.opset() < 11 ? Tensor() : c.Known(1), khi = c.opset() < 11 ? Tensor() : c.Known(2);
  const bool relu6 = c.opset() < 11
                         ? (c.Float("min", lowest) == 0 && c.Float("max", highest) == 6)
                         : (klo.valid() && khi.valid() && klo.num_elements() == 1 && khi.num_elements() == 1 &&
                            IsFloating(dt) && *c.KnownScalar(1, "min") == 0 && *c.KnownScalar(2, "max") == 6);
  if (relu6 && (dt == DType::kF32 || dt == DType::kF64)) {
    SetOutAs(c, 0, Op(c, "Relu6", {x}), xl.second);
    return Status();
  }
  SetOutAs(c, 0, Op(c, "ClipByValue", {x, lo, hi}), xl.second);
  return Status();
}

Status Cast(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  auto to = DTypeFromOnnx(static_cast<int32_t>(c.Int("to", 0)));
  if (!to.ok()) return to.status().WithContext("attr 'to'");
  const Tensor known = c.Known(0);
  if (known.valid() && IsInteger(known.dtype()) && (*to == DType::kI64 || *to == DType::kI32) && known.rank() <= 1) {
    std::vector<int64_t> v = ToInts(known);
    if (*to == DType::kI64) {
      c.SetKnown(0, Int64s(v, known.shape()));
    } else {
      std::vector<int32_t> v32(v.begin(), v.end());
      c.SetKnown(0, Tensor::FromVector<int32_t>(v32, known.shape()));
    }
    return Status();
  }
  c.SetOut(0, *to == x.dtype() ? Op(c, "Identity", {x}) : Op(c, "Cast", {x}, {{"DstT", AttrValue(*to)}}));
  return Status();
}

Status IsInf(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const bool neg = c.Int("detect_negative", 1) != 0, pos = c.Int("detect_positive", 1) != 0;
  Output inf = Op(c, "IsInf", {x}, {}, neg && pos ? "" : "any");
  if (neg && pos) {
    c.SetOut(0, inf);
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  Output sign = Op(c, pos ? "Greater" : "Less", {x, zero}, {}, "sign");
  c.SetOut(0, (neg || pos) ? Op(c, "LogicalAnd", {inf, sign}) : Op(c, "LogicalAnd", {inf, Op(c, "LogicalNot", {inf})}));
  return Status();
}

Status Mod(NodeContext& c) {
  if (c.Int("fmod", 0) != 0) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
    WEFT_ASSIGN_OR_RETURN(Output y, c.In(1));
    // fmod: x - y * trunc(x / y), the sign of x.
    if (!IsFloating(x.dtype())) {
      Output q = Op(c, "Div", {x, y}, {}, "quotient");  // integer Div truncates
      c.SetOut(0, Op(c, "Sub", {x, Op(c, "Mul", {y, q}, {}, "product")}));
      return Status();
    }
    // Floats, exactly: FloorMod's remainder (the sign of y) moved by y
    // where its sign is not x's; r - y is then fmod's exact value, which
    // a float holds, so the subtraction rounds to it. x - y * trunc(x / y)
    // is not exact (1e8 mod 3 in f32). An infinite y leaves x.
    WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
    Output r = Op(c, "FloorMod", {x, y}, {}, "floor_mod");
    Output differ =
        Op(c, "NotEqual", {Op(c, "Less", {r, zero}, {}, "r_negative"), Op(c, "Less", {x, zero}, {}, "x_negative")}, {},
           "signs_differ");
    Output shift = Op(c, "LogicalAnd", {Op(c, "NotEqual", {r, zero}, {}, "nonzero"), differ}, {}, "shift");
    Output shifted = Op(c, "Select", {shift, Op(c, "Sub", {r, y}, {}, "moved"), r}, {}, "fmod");
    c.SetOut(0, Op(c, "Select", {Op(c, "IsInf", {y}, {}, "y_infinite"), x, shifted}));
    return Status();
  }
  return Binary(c, "FloorMod");
}

Status Pow(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output y, c.In(1));
  if (y.dtype() != x.dtype()) y = Op(c, "Cast", {y}, {{"DstT", AttrValue(x.dtype())}}, "exponent");
  // x^2 and x^0.5, common in exported normalisations, have cheaper ops.
  const Tensor k = c.Known(1);
  if (k.valid() && k.num_elements() == 1 && IsFloating(x.dtype())) {
    const double e = *c.KnownScalar(1, "exponent");
    if (e == 2.0) {
      c.SetOut(0, Op(c, "Square", {x}));
      return Status();
    }
    if (e == 0.5) {
      c.SetOut(0, Op(c, "Sqrt", {x}));
      return Status();
    }
  }
  c.SetOut(0, Op(c, "Pow", {x, y}));
  return Status();
}

// --- Matrix products ---------------------------------------------------------------------

Status MatMul(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output a, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output bm, c.In(1));
  const int ra = a.shape().rank(), rb = bm.shape().rank();
  if (ra < 0 || rb < 0) return c.Unsupported("MatMul of inputs of unknown rank");
  if (ra == 0 || rb == 0) return c.Error("MatMul of a scalar (ranks ", ra, " and ", rb, ")");
  if (ra == 2 && rb == 2) {
    c.SetOut(0, Op(c, "MatMul", {a, bm}));
    return Status();
  }
  // NumPy's matmul: a 1-D operand gains an axis that is dropped after.
  if (ra == 1) a = Op(c, "ExpandDims", {a}, {{"axis", AttrValue(int64_t{0})}}, "a_matrix");
  if (rb == 1) bm = Op(c, "ExpandDims", {bm}, {{"axis", AttrValue(int64_t{-1})}}, "b_matrix");
  // [.., m, k] x [k, n] with a 2-D right side: one MatMul over the rows.
  Output y;
  if (rb == 2 && ra > 2 && a.shape().dim(ra - 1) >= 0) {
    const Shape& sa = a.shape();
    bool static_rows = true;
    for (int i = 0; i < ra - 1; ++i) static_rows = static_rows && sa.dim(i) >= 0;
    Output flat = Op(c, "Reshape", {a, ConstOf(c, Int64s({-1, sa.dim(ra - 1)}), "rows_shape")}, {}, "rows");
    Output prod = Op(c, "MatMul", {flat, bm}, {}, "MatMul");
    Output shape;
    if (static_rows && bm.shape().dim(1) >= 0) {
      std::vector<int64_t> dims(sa.dims().begin(), sa.dims().end() - 1);
      dims.push_back(bm.shape().dim(1));
      shape = ConstOf(c, Int64s(dims), "out_shape");
    } else {
      Output lead = Op(c, "StridedSlice", {Op(c, "Shape", {a}, {{"out_type", AttrValue(DType::kI64)}}, "a_shape")},
                       {{"begin", AttrValue(std::vector<int64_t>{0})},
                        {"end", AttrValue(std::vector<int64_t>{-1})},
                        {"strides", AttrValue(std::vector<int64_t>{1})}},
                       "lead");
      Output n = Op(c, "StridedSlice", {Op(c, "Shape", {bm}, {{"out_type", AttrValue(DType::kI64)}}, "b_shape")},
                    {{"begin", AttrValue(std::vector<int64_t>{1})},
                     {"end", AttrValue(std::vector<int64_t>{2})},
                     {"strides", AttrValue(std::vector<int64_t>{1})}},
                    "n");
      shape = Op(c, "Concat", {lead, n}, {{"axis", AttrValue(int64_t{0})}}, "out_shape");
    }
    y = Op(c, "Reshape", {prod, shape}, {}, rb == 1 ? "product" : "");
  } else {
    y = Op(c, "BatchMatMul", {a, bm}, {}, (ra == 1 || rb == 1) ? "product" : "");
  }
  if (ra == 1 || rb == 1) {
    const int r = y.shape().rank();
    std::vector<int64_t> drop;
    if (ra == 1) drop.push_back(r - 2);
    if (rb == 1) drop.push_back(r - 1);
    y = Op(c, "Squeeze", {y}, {{"axis", AttrValue(drop)}});
  }
  c.SetOut(0, y);
  return Status();
}

Status Gemm(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output a, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output bm, c.In(1));
  const double alpha = c.Float("alpha", 1.0), beta = c.Float("beta", 1.0);
  const bool ta = c.Int("transA", 0) != 0, tb = c.Int("transB", 0) != 0;
  Output y = Op(c, "MatMul", {a, bm}, {{"transpose_a", AttrValue(ta)}, {"transpose_b", AttrValue(tb)}},
                c.has_input(2) || alpha != 1.0 ? "MatMul" : "");
  if (alpha != 1.0) {
    WEFT_ASSIGN_OR_RETURN(Output s, ScalarLike(c, y.dtype(), alpha, "alpha"));
    y = Op(c, "Mul", {y, s}, {}, c.has_input(2) ? "scaled" : "");
  }
  if (c.has_input(2) && beta != 0.0) {
    WEFT_ASSIGN_OR_RETURN(Output bias, c.In(2));
    if (beta != 1.0) {
      WEFT_ASSIGN_OR_RETURN(Output s, ScalarLike(c, bias.dtype(), beta, "beta"));
      bias = Op(c, "Mul", {bias, s}, {}, "bias");
    }
    const Shape& bs = bias.shape();
    const bool vector = bs.rank() == 1 || (bs.rank() == 2 && bs.dim(0) == 1);
    if (vector && bs.rank() == 2) bias = Op(c, "Squeeze", {bias}, {{"axis", AttrValue(std::vector<int64_t>{0})}});
    y = vector && IsFloating(y.dtype()) ? Op(c, "BiasAdd", {y, bias}) : Op(c, "Add", {y, bias});
  }
  c.SetOut(0, y);
  return Status();
}

// --- Convolution and pooling ---------------------------------------------------------------

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // spatial; pads begin..., end...
};

// The padding of a window op on NCHW input |in|: "SAME", "VALID", or an
// explicit Pad (paddings for Weft's Pad, NCHW order) with VALID.
struct Padding {
  std::string mode;                    // SAME or VALID
  std::vector<int64_t> explicit_pads;  // non-empty: pad first, then VALID
};

Expected<Padding> ResolvePadding(NodeContext& c, const Window& w, const Shape& in) {
  const std::size_t n = w.kernel.size();
  const std::string auto_pad = c.Str("auto_pad", "NOTSET");
  std::vector<int64_t> pads = w.pads;
  if (auto_pad == "VALID") return Padding{"VALID", {}};
  if (auto_pad == "SAME_UPPER" && !(c.node().op_type() == "AveragePool" && c.Int("count_include_pad", 0) != 0)) {
    return Padding{"SAME", {}};
  }
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    pads.assign(2 * n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const int64_t size = in.rank() == static_cast<int>(n) + 2 ? in.dim(static_cast<int>(i) + 2) : -1;
      if (size < 0) return c.Unsupported("auto_pad ", auto_pad, " with an input of unknown spatial size");
      const int64_t out = (size + w.strides[i] - 1) / w.strides[i];
      const int64_t total =
          std::max<int64_t>(0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - size);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + n] = total - pads[i];
    }
  } else if (auto_pad != "NOTSET") {
    return c.Error("attr 'auto_pad' is ", Quote(auto_pad), "; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  if (pads.empty()) pads.assign(2 * n, 0);
  if (pads.size() != 2 * n) return c.Error("attr 'pads' has ", pads.size(), " entries for ", n, " spatial axes");
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return Padding{"VALID", {}};
  for (int64_t p : pads) {
    if (p < 0) return c.Unsupported("negative pads ", ListString(pads));
  }
  // Weft's SAME (TensorFlow's): the same pads, when the sizes are known.
  bool same = in.rank() == static_cast<int>(n) + 2;
  for (std::size_t i = 0; same && i < n; ++i) {
    const int64_t size = in.dim(static_cast<int>(i) + 2);
    if (size < 0) {
      same = false;
      break;
    }
    const int64_t out = (size + w.strides[i] - 1) / w.strides[i];
    const int64_t total =
        std::max<int64_t>(0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - size);
    same = pads[i] == total / 2 && pads[i + n] == total - total / 2;
  }
  if (same && !(c.node().op_type() == "AveragePool" && c.Int("count_include_pad", 0) != 0)) {
    return Padding{"SAME", {}};
  }
  Padding p{"VALID", std::vector<int64_t>(2 * (n + 2), 0)};
  for (std::size_t i = 0; i < n; ++i) {
    p.explicit_pads[2 * (i + 2)] = pads[i];
    p.explicit_pads[2 * (i + 2) + 1] = pads[i + n];
  }
  return p;
}

Expected<Window> ReadWindow(NodeContext& c, int spatial, std::vector<int64_t> kernel) {
  Window w;
  w.kernel = c.Ints("kernel_shape", kernel);
  if (static_cast<int>(w.kernel.size()) != spatial) {
    return c.Error("attr 'kernel_shape' has ", w.kernel.size(), " entries for ", spatial, " spatial axes");
  }
  w.strides = c.Ints("strides", std::vector<int64_t>(static_cast<std::size_t>(spatial), 1));
  w.dilations = c.Ints("dilations", std::vector<int64_t>(static_cast<std::size_t>(spatial), 1));
  w.pads = c.Ints("pads");
  if (static_cast<int>(w.strides.size()) != spatial || static_cast<int>(w.dilations.size()) != spatial) {
    return c.Error("attrs 'strides' and 'dilations' need ", spatial, " entries each");
  }
  for (int64_t v : w.kernel) {
    if (v < 1) return c.Error("attr 'kernel_shape' ", ListString(w.kernel), " must be positive");
  }
  for (int64_t v : w.strides) {
    if (v < 1) return c.Error("attr 'strides' ", ListString(w.strides), " must be positive");
  }
  for (int64_t v : w.dilations) {
    if (v < 1) return c.Error("attr 'dilations' ", ListString(w.dilations), " must be positive");
  }
  return w;
}

// Pads |x| as |p| says (its pads in NCHW order), with |value|; |x| is NHWC
// when |nhwc|.
Output ApplyPadding(NodeContext& c, Output x, const Padding& p, double value, bool nhwc) {
  if (p.explicit_pads.empty()) return x;
  std::vector<int64_t> pads = p.explicit_pads;
  if (nhwc) {
    const std::vector<int64_t>& q = p.explicit_pads;
    pads = {q[0], q[1], q[4], q[5], q[6], q[7], q[2], q[3]};
  }
  return Op(c, "Pad", {x}, {{"paddings", AttrValue(pads)}, {"constant_value", AttrValue(value)}}, "pad");
}

// A 4-entry window attr (strides, ksize, dilations) from its (h, w) entries.
std::vector<int64_t> Window4(const std::vector<int64_t>& hw, bool nhwc) {
  return nhwc ? std::vector<int64_t>{1, hw[0], hw[1], 1} : std::vector<int64_t>{1, 1, hw[0], hw[1]};
}

Status ConvOp(NodeContext& c) {
  const Shape xs = c.InShape(0);
  const Tensor w_initial = c.Initial(1);
  const Shape ws = w_initial.valid() ? w_initial.shape() : c.InShape(1);
  if (ws.rank() < 0) return c.Unsupported("Conv weights of unknown rank");
  const int spatial = ws.rank() - 2;
  if (spatial == 3) return c.Unsupported("3-D convolution (Weft has Conv2D)");
  if (spatial != 1 && spatial != 2) return c.Error("Conv weights of rank ", ws.rank());
  if (xs.rank() >= 0 && xs.rank() != spatial + 2) {
    return c.Error("the input has shape ", xs.ToString(), " and the weights ", ws.ToString(), "; a ", spatial,
                   "-D Conv takes an input of rank ", spatial + 2, " [N, C, ...]");
  }
  std::vector<int64_t> kdims(ws.dims().begin() + 2, ws.dims().end());
  WEFT_ASSIGN_OR_RETURN(Window w, ReadWindow(c, spatial, kdims));
  const int64_t group = c.Int("group", 1);
  // Images go channels-last; 1-D convolutions run as 2-D ones over
  // [N, C, 1, L], as ONNX lays them out.
  const bool nhwc = spatial == 2 && c.options().channels_last;
  Output x;
  if (nhwc) {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
  }
  Shape x4 = xs;  // NCHW
  if (spatial == 1) {
    if (c.LayoutOf(1) != Layout::kAsIs) return c.Unsupported("1-D Conv sharing weights with a 2-D one");
    x = Op(c, "ExpandDims", {x}, {{"axis", AttrValue(int64_t{2})}}, "as_2d");
    x4 = x.shape();
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    if (!w.pads.empty()) w.pads = {0, w.pads[0], 0, w.pads[1]};
  }
  WEFT_ASSIGN_OR_RETURN(Padding pad, ResolvePadding(c, w, x4));
  x = ApplyPadding(c, x, pad, 0.0, nhwc);
  const char* format = nhwc ? "NHWC" : "NCHW";
  const int64_t channel_axis = nhwc ? 3 : 1;
  AttrMap attrs = {{"strides", AttrValue(Window4(w.strides, nhwc))},
                   {"dilations", AttrValue(Window4(w.dilations, nhwc))},
                   {"padding", AttrValue(pad.mode)},
                   {"data_format", AttrValue(format)}};
  const bool has_bias = c.has_input(2);
  Output y;
  const Layout layout = c.LayoutOf(1);
  if (group == 1) {
    Output filter;
    if (layout == Layout::kConvHwio) {
      WEFT_ASSIGN_OR_RETURN(filter, c.InWithLayout(1, layout));
    } else {
      WEFT_ASSIGN_OR_RETURN(Output raw, c.In(1));
      if (spatial == 1) raw = Op(c, "ExpandDims", {raw}, {{"axis", AttrValue(int64_t{2})}}, "weights_2d");
      filter = Op(c, "Transpose", {raw}, {{"perm", AttrValue(std::vector<int64_t>{2, 3, 1, 0})}}, "weights_hwio");
    }
    y = Op(c, "Conv2D", {x, filter}, attrs, has_bias || spatial == 1 ? "Conv2D" : "");
  } else if (layout == Layout::kDepthwiseHwcm) {
    WEFT_ASSIGN_OR_RETURN(Output filter, c.InWithLayout(1, layout));
    y = Op(c, "DepthwiseConv2D", {x, filter}, attrs, has_bias || spatial == 1 ? "DepthwiseConv2D" : "");
  } else {
    // Grouped: split channels into |group| convolutions, then join them.
    if (group < 1) return c.Error("attr 'group' is ", group);
    const int64_t channels = x.shape().rank() == 4 ? x.shape().dim(static_cast<int>(channel_axis)) : -1;
    if (channels < 0 || channels % group != 0 || ws.dim(0) % group != 0) {
      return c.Error("group ", group, " must divide the input channels (", channels, ") and the output channels (",
                     ws.dim(0), ")");
    }
    WEFT_ASSIGN_OR_RETURN(Output raw, c.In(1));
    if (spatial == 1) raw = Op(c, "ExpandDims", {raw}, {{"axis", AttrValue(int64_t{2})}}, "weights_2d");
    Output hwio = Op(c, "Transpose", {raw}, {{"perm", AttrValue(std::vector<int64_t>{2, 3, 1, 0})}}, "weights_hwio");
    std::vector<Output> xs_split =
        c.b().AddNode("Split", {x}, {{"num_split", AttrValue(group)}, {"axis", AttrValue(channel_axis)}}, c.Name("x"));
    std::vector<Output> ws_split =
        c.b().AddNode("Split", {hwio}, {{"num_split", AttrValue(group)}, {"axis", AttrValue(int64_t{3})}}, c.Name("w"));
    if (static_cast<int64_t>(xs_split.size()) != group || static_cast<int64_t>(ws_split.size()) != group) {
      return c.b().status();
    }
    std::vector<Output> parts;
    for (int64_t g = 0; g < group; ++g) {
      parts.push_back(Op(c, "Conv2D", {xs_split[static_cast<std::size_t>(g)], ws_split[static_cast<std::size_t>(g)]},
                         attrs, StrCat("group_", g)));
    }
    y = Op(c, "Concat", parts, {{"axis", AttrValue(channel_axis)}}, has_bias || spatial == 1 ? "Concat" : "");
  }
  if (has_bias) {
    WEFT_ASSIGN_OR_RETURN(Output bias, c.In(2));
    y = Op(c, "BiasAdd", {y, bias}, {{"data_format", AttrValue(format)}}, spatial == 1 ? "BiasAdd" : "");
  }
  if (spatial == 1) {
    c.SetOut(0, Op(c, "Squeeze", {y}, {{"axis", AttrValue(std::vector<int64_t>{2})}}));
  } else {
    SetOutAs(c, 0, y, nhwc);
  }
  return Status();
}

Status Pool(NodeContext& c, bool max) {
  if (c.has_output(1)) return c.Unsupported("MaxPool's Indices output");
  Shape xs = c.InShape(0);
  if (xs.rank() >= 0 && xs.rank() != 4 && xs.rank() != 3) {
    return c.Unsupported("pooling of a rank-", xs.rank(), " input (Weft pools 1-D and 2-D windows)");
  }
  const bool one_d = xs.rank() == 3;
  const bool nhwc = !one_d && c.options().channels_last;
  Output x;
  if (nhwc) {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
  }
  std::vector<int64_t> kernel = c.Ints("kernel_shape");
  WEFT_ASSIGN_OR_RETURN(Window w, ReadWindow(c, static_cast<int>(kernel.size()), kernel));
  if (one_d) {
    x = Op(c, "ExpandDims", {x}, {{"axis", AttrValue(int64_t{2})}}, "as_2d");
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    if (!w.pads.empty()) w.pads = {0, w.pads[0], 0, w.pads[1]};
    xs = x.shape();
  }
  if (w.kernel.size() != 2) return c.Unsupported(w.kernel.size(), "-D pooling");
  for (int64_t d : w.dilations) {
    if (d != 1) return c.Unsupported("pooling with dilations ", ListString(w.dilations));
  }
  if (c.Int("storage_order", 0) != 0) return c.Unsupported("MaxPool storage_order 1");
  // ceil_mode: extra padding at the end so that floor gives the ceiling.
  if (c.Int("ceil_mode", 0) != 0) {
    if (w.pads.empty()) w.pads.assign(4, 0);
    for (std::size_t i = 0; i < 2; ++i) {
      const int64_t size = xs.rank() == 4 ? xs.dim(static_cast<int>(i) + 2) : -1;
      if (size < 0) return c.Unsupported("ceil_mode with an input of unknown spatial size");
      const int64_t k = w.kernel[i], st = w.strides[i];
      const int64_t padded = size + w.pads[i] + w.pads[i + 2];
      const int64_t floor_out = (padded - k) / st + 1;
      int64_t ceil_out = (padded - k + st - 1) / st + 1;
      // The last window must start inside the input or its begin padding.
      if ((ceil_out - 1) * st >= size + w.pads[i]) --ceil_out;
      w.pads[i + 2] += (ceil_out - floor_out) * st;
    }
    if (!max && c.Int("count_include_pad", 0) != 0) {
      return c.Unsupported("AveragePool with ceil_mode and count_include_pad");
    }
  }
  WEFT_ASSIGN_OR_RETURN(Padding pad, ResolvePadding(c, w, xs));
  if (!pad.explicit_pads.empty() && !max && c.Int("count_include_pad", 0) == 0) {
    return c.Unsupported("AveragePool with pads ", ListString(w.pads),
                         " that exclude the padding from the count (count_include_pad = 0) and differ from SAME");
  }
  x = ApplyPadding(c, x, pad, max ? -std::numeric_limits<double>::infinity() : 0.0, nhwc);
  AttrMap attrs = {{"ksize", AttrValue(Window4(w.kernel, nhwc))},
                   {"strides", AttrValue(Window4(w.strides, nhwc))},
                   {"padding", AttrValue(pad.mode)},
                   {"data_format", AttrValue(nhwc ? "NHWC" : "NCHW")}};
  Output y = Op(c, max ? "MaxPool" : "AvgPool", {x}, attrs, one_d ? "pool" : "");
  if (one_d) {
    c.SetOut(0, Op(c, "Squeeze", {y}, {{"axis", AttrValue(std::vector<int64_t>{2})}}));
  } else {
    SetOutAs(c, 0, y, nhwc);
  }
  return Status();
}

Status GlobalPool(NodeContext& c, std::string_view reduce) {
  const int r = c.InShape(0).rank();
  if (r < 3) return c.Unsupported("global pooling of an input of rank ", r);
  if (r == 4 && c.IsNhwc(0)) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.InNhwc(0));
    c.SetOutNhwc(0,
                 Op(c, reduce, {x}, {{"axis", AttrValue(std::vector<int64_t>{1, 2})}, {"keep_dims", AttrValue(true)}}));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  c.SetOut(0, Op(c, reduce, {x}, {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}}));
  return Status();
}

Status BatchNorm(NodeContext& c) {
  if (c.Int("training_mode", 0) != 0) {
    return c.Unsupported("BatchNormalization in training mode (export the model in eval mode)");
  }
  for (int i = 1; i < 5; ++i) {
    if (c.has_output(i)) return c.Unsupported("BatchNormalization's running statistics outputs");
  }
  const int r = c.InShape(0).rank();
  if (r != 2 && r != 3 && r != 4) return c.Unsupported("BatchNormalization of a rank-", r, " input");
  const bool nhwc = r == 4 && c.options().channels_last;
  Output x;
  if (nhwc) {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
  }
  std::vector<Output> in = {x};
  for (int i = 1; i < 5; ++i) {
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(i));
    in.push_back(v);
  }
  if (r == 3) in[0] = Op(c, "ExpandDims", {x}, {{"axis", AttrValue(int64_t{3})}}, "as_4d");
  std::vector<Output> y = c.b().AddNode("FusedBatchNorm", in,
                                        {{"epsilon", AttrValue(c.Float("epsilon", 1e-5))},
                                         {"is_training", AttrValue(false)},
                                         {"data_format", AttrValue(nhwc ? "NHWC" : "NCHW")}},
                                        c.Name(r == 3 ? "FusedBatchNorm" : ""));
  if (y.empty()) return c.b().status();
  if (r == 3) {
    c.SetOut(0, Op(c, "Squeeze", {y[0]}, {{"axis", AttrValue(std::vector<int64_t>{3})}}));
  } else {
    SetOutAs(c, 0, y[0], nhwc);
  }
  return Status();
}

Status InstanceNorm(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output scale, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output bias, c.In(2));
  const int r = c.InShape(0).rank();
  if (r < 3) return c.Error("InstanceNormalization of an input of rank ", r);
  std::vector<int64_t> axes, param_shape = {-1};
  for (int i = 2; i < r; ++i) {
    axes.push_back(i);
    param_shape.push_back(1);
  }
  AttrMap keep = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}};
  Output mean = Op(c, "Mean", {x}, keep, "mean");
  Output centred = Op(c, "Sub", {x, mean}, {}, "centred");
  Output var = Op(c, "Mean", {Op(c, "Square", {centred}, {}, "square")}, keep, "variance");
  WEFT_ASSIGN_OR_RETURN(Output eps, ScalarLike(c, x.dtype(), c.Float("epsilon", 1e-5), "epsilon"));
  Output norm =
      Op(c, "Mul", {centred, Op(c, "Rsqrt", {Op(c, "Add", {var, eps}, {}, "var_eps")}, {}, "rsqrt")}, {}, "normalised");
  Output shape = ConstOf(c, Int64s(param_shape), "param_shape");
  Output s = Op(c, "Reshape", {scale, shape}, {}, "scale");
  Output bb = Op(c, "Reshape", {bias, shape}, {}, "bias");
  c.SetOut(0, Op(c, "Add", {Op(c, "Mul", {norm, s}, {}, "scaled"), bb}));
  return Status();
}

// Local response normalisation across channels: y = x / (bias + alpha /
// size * sum of x^2 over the size channels around c)^beta, the sum from the
// channels padded with zeros and one slice per offset.
Status Lrn(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  const int64_t size = c.Int("size", 0);
  if (size < 1) return c.Error("attr 'size' must be positive, got ", size);
  if (xs.rank() < 3 || xs.dim(1) < 0) {
    return c.Unsupported("LRN of an input of shape ", xs.ToString(), " (Weft needs [N, C, ...] with C known)");
  }
  const int r = xs.rank();
  const int64_t channels = xs.dim(1);
  std::vector<int64_t> paddings(2 * static_cast<std::size_t>(r), 0);
  paddings[2] = (size - 1) / 2;
  paddings[3] = size - 1 - (size - 1) / 2;
  Output padded = Op(c, "Pad", {Op(c, "Square", {x}, {}, "square")}, {{"paddings", AttrValue(paddings)}}, "padded");
  std::vector<Output> windows;
  for (int64_t k = 0; k < size; ++k) {
    std::vector<int64_t> begin(static_cast<std::size_t>(r), 0), extent(static_cast<std::size_t>(r), -1);
    begin[1] = k;
    extent[1] = channels;
    windows.push_back(
        Op(c, "Slice", {padded}, {{"begin", AttrValue(begin)}, {"size", AttrValue(extent)}}, StrCat("shift_", k)));
  }
  Output sum = windows.size() == 1 ? windows[0] : Op(c, "AddN", windows, {}, "square_sum");
  WEFT_ASSIGN_OR_RETURN(Output scale,
                        ScalarLike(c, x.dtype(), c.Float("alpha", 1e-4) / static_cast<double>(size), "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output bias, ScalarLike(c, x.dtype(), c.Float("bias", 1.0), "bias"));
  WEFT_ASSIGN_OR_RETURN(Output beta, ScalarLike(c, x.dtype(), c.Float("beta", 0.75), "beta"));
  Output base = Op(c, "Add", {bias, Op(c, "Mul", {sum, scale}, {}, "scaled")}, {}, "base");
  c.SetOut(0, Op(c, "RealDiv", {x, Op(c, "Pow", {base, beta}, {}, "denominator")}));
  return Status();
}

Status LayerNormalization(NodeContext& c) {
  if (c.has_output(1) || c.has_output(2)) return c.Unsupported("LayerNormalization's Mean and InvStdDev outputs");
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output scale, c.In(1));
  const int r = c.InShape(0).rank();
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", -1), r, "attr 'axis'"));
  Output bias;
  if (c.has_input(2)) {
    WEFT_ASSIGN_OR_RETURN(bias, c.In(2));
  } else {
    bias = Op(c, "ZerosLike", {scale}, {}, "zero_bias");
  }
  c.SetOut(0, Op(c, "LayerNorm", {x, scale, bias},
                 {{"epsilon", AttrValue(c.Float("epsilon", 1e-5))}, {"begin_norm_axis", AttrValue(axis)}}));
  return Status();
}

// Softmax and LogSoftmax: opset 13 takes one axis; before it, the input is
// seen as 2-D [prod(d[:axis]), prod(d[axis:])].
Status SoftmaxOp(NodeContext& c, std::string_view weft_op) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const int r = c.InShape(0).rank();
  const int64_t def = c.opset() >= 13 ? -1 : 1;
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", def), r, "attr 'axis'"));
  if (c.opset() >= 13 || axis == r - 1) {
    c.SetOut(0, Op(c, weft_op, {x}, {{"axis", AttrValue(c.opset() >= 13 ? axis : int64_t{-1})}}));
    return Status();
  }
  Output shape = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "shape");
  // [prod(lead), prod(rest)], the lead inferred.
  Shape xs = c.InShape(0);
  int64_t rest = 1;
  for (int i = static_cast<int>(axis); i < r; ++i) rest = xs.dim(i) < 0 || rest < 0 ? -1 : rest * xs.dim(i);
  if (rest < 0) return c.Unsupported("opset-", c.opset(), " ", c.node().op_type(), " over axes of unknown size");
  Output flat2 = Op(c, "Reshape", {x, ConstOf(c, Int64s({-1, rest}), "flat_shape")}, {}, "as_2d");
  Output y = Op(c, weft_op, {flat2}, {{"axis", AttrValue(int64_t{-1})}}, weft_op);
  c.SetOut(0, Op(c, "Reshape", {y, shape}));
  return Status();
}

Status Flatten(NodeContext& c) {
  const Shape xs = c.InShape(0);
  // [N, C, 1, 1] has its elements in the same order channels-last.
  const bool pooled = c.IsNhwc(0) && xs.rank() == 4 && xs.dim(2) == 1 && xs.dim(3) == 1 && c.Int("axis", 1) == 1;
  Output x;
  if (pooled) {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
  }
  const int r = xs.rank();
  if (r < 0) return c.Unsupported("Flatten of an input of unknown rank");
  int64_t axis = c.Int("axis", 1);
  if (axis < -r || axis > r) return c.Error("attr 'axis' ", axis, " is out of range for rank ", r);
  if (axis < 0) axis += r;
  int64_t lead = 1, rest = 1;
  for (int i = 0; i < r; ++i) {
    int64_t& p = i < axis ? lead : rest;
    p = (xs.dim(i) < 0 || p < 0) ? -1 : p * xs.dim(i);
  }
  if (lead < 0 && rest < 0) return c.Unsupported("Flatten with unknown sizes on both sides of axis ", axis);
  c.SetOut(0, Op(c, "Reshape", {x, ConstOf(c, Int64s({lead, rest}), "shape")}));
  return Status();
}

// --- Shapes and indexing -----------------------------------------------------------------

// |shape| (1-D i64, |n| values) with each 0 replaced by the input's
// dimension at that position (ONNX's "copy" without allowzero), at run time.
Output ResolvedShape(NodeContext& c, const Output& x, const Output& shape, int n) {
  Output in_shape = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "in_shape");
  // Padded with n zeros, so that a target longer than the input's rank has
  // a head to select from (a 0 past the input's rank stays 0).
  in_shape =
      Op(c, "Concat", {in_shape, ConstOf(c, Int64s(std::vector<int64_t>(static_cast<std::size_t>(n), 0)), "pad")},
         {{"axis", AttrValue(int64_t{0})}}, "in_shape_padded");
  Output head = Op(c, "StridedSlice", {in_shape},
                   {{"begin", AttrValue(std::vector<int64_t>{0})},
                    {"end", AttrValue(std::vector<int64_t>{n})},
                    {"strides", AttrValue(std::vector<int64_t>{1})}},
                   "in_head");
  Output zero = ConstOf(c, Tensor::Scalar<int64_t>(0), "zero");
  return Op(c, "Select", {Op(c, "Equal", {shape, zero}, {}, "copies"), head, shape}, {}, "resolved_shape");
}

Status Reshape(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const bool allowzero = c.Int("allowzero", 0) != 0;
  std::vector<int64_t> dims;
  if (c.opset() < 5) {
    dims = c.Ints("shape");
  } else {
    const Tensor k = c.Known(1);
    if (!k.valid()) {
      // A computed shape: its zeros copy the input's dimensions at run
      // time (unless allowzero).
      WEFT_ASSIGN_OR_RETURN(Output shape, c.In(1));
      if (!allowzero) {
        const int n = shape.shape().rank() == 1 ? static_cast<int>(shape.shape().dim(0)) : -1;
        if (n < 0) return c.Unsupported("Reshape to a computed shape of unknown length");
        Output s64 = shape.dtype() == DType::kI64
                         ? shape
                         : Op(c, "Cast", {shape}, {{"DstT", AttrValue(DType::kI64)}}, "shape64");
        shape = ResolvedShape(c, x, s64, n);
      }
      c.SetOut(0, Op(c, "Reshape", {x, shape}));
      return Status();
    }
    dims = ToInts(k);
  }
  const std::vector<int64_t> given = dims;
  const Shape xs = c.InShape(0);
  if (!allowzero && xs.rank() >= 0) {
    for (std::size_t i = static_cast<std::size_t>(xs.rank()); i < dims.size(); ++i) {
      if (dims[i] == 0) {
        return c.Error("shape[", i, "] is 0, which copies the input's dimension ", i, ", but the input ", xs.ToString(),
                       " has rank ", xs.rank(), " (set allowzero for an empty dimension)");
      }
    }
  }
  bool runtime = false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowzero) {
      if (static_cast<int>(i) < xs.rank() && xs.dim(static_cast<int>(i)) >= 0) {
        dims[i] = xs.dim(static_cast<int>(i));
      } else if (static_cast<int>(i) < xs.rank() && xs.dim(static_cast<int>(i)) < 0 &&
                 std::count(dims.begin(), dims.end(), -1) == 0) {
        dims[i] = -1;  // the one unknown dimension is inferred
      } else {
        runtime = true;
      }
    }
  }
  if (runtime && !allowzero && xs.rank() >= 0) {
    // [0, 0, -1] of [8, ?, 2, 24]: the one unknown dimension is copied, so
    // it cancels out and the -1 is known (48); the copy becomes the -1.
    int unknown = 0, copied_unknown = -1;
    int64_t in_known = 1, out_known = 1;
    bool overflow = false;
    for (int i = 0; i < xs.rank(); ++i) {
      const bool copied = static_cast<std::size_t>(i) < given.size() && given[static_cast<std::size_t>(i)] == 0;
      if (xs.dim(i) < 0) {
        ++unknown;
        if (copied) copied_unknown = i;
      } else if (!copied) {
        overflow = overflow || __builtin_mul_overflow(in_known, xs.dim(i), &in_known);
      }
    }
    int64_t infer = -1;
    for (std::size_t i = 0; i < given.size(); ++i) {
      if (given[i] == -1) infer = static_cast<int64_t>(i);
      if (given[i] > 0) overflow = overflow || __builtin_mul_overflow(out_known, given[i], &out_known);
    }
    if (!overflow && unknown == 1 && copied_unknown >= 0 && infer >= 0 && out_known > 0 && in_known % out_known == 0) {
      dims = given;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == 0) dims[i] = static_cast<int>(i) == copied_unknown ? -1 : xs.dim(static_cast<int>(i));
      }
      dims[static_cast<std::size_t>(infer)] = in_known / out_known;
      runtime = false;
    }
  }
  // Zeros copying dimensions of unknown size beside a -1: resolved at run time.
  Output shape = runtime ? ResolvedShape(c, x, ConstOf(c, Int64s(given), "shape"), static_cast<int>(given.size()))
                         : ConstOf(c, Int64s(dims), "shape");
  c.SetOut(0, Op(c, "Reshape", {x, shape}));
  return Status();
}

Status Transpose(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "Transpose", {x}, {{"perm", AttrValue(c.Ints("perm"))}}));
  return Status();
}

// Unsqueeze/Squeeze axes: an attr before opset 13, an input since.
Expected<std::optional<std::vector<int64_t>>> AxesArg(NodeContext& c, int input, int since) {
  if (c.opset() < since) {
    if (!c.HasAttr("axes")) return std::optional<std::vector<int64_t>>();
    return std::optional<std::vector<int64_t>>(c.Ints("axes"));
  }
  if (!c.has_input(input)) return std::optional<std::vector<int64_t>>();
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.KnownInts(input, "axes"));
  return std::optional<std::vector<int64_t>>(axes);
}

Status Unsqueeze(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(auto axes_opt, AxesArg(c, 1, 13));
  if (!axes_opt.has_value()) return c.Error("needs axes");
  std::vector<int64_t> axes = *axes_opt;
  const int r = c.InShape(0).rank();
  if (r < 0) return c.Unsupported("Unsqueeze of an input of unknown rank");
  const int out_rank = r + static_cast<int>(axes.size());
  for (int64_t& a : axes) {
    WEFT_ASSIGN_OR_RETURN(a, Axis(c, a, out_rank, "axis"));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return c.Error("repeated axes ", ListString(axes));
  const Tensor known = c.Known(0);
  if (known.valid() && known.rank() <= 1 && IsInteger(known.dtype())) {
    std::vector<int64_t> dims = known.shape().dims();
    for (int64_t a : axes) dims.insert(dims.begin() + a, 1);
    c.SetKnown(0, Int64s(ToInts(known), Shape(dims)));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  for (std::size_t i = 0; i < axes.size(); ++i) {
    x = Op(c, "ExpandDims", {x}, {{"axis", AttrValue(axes[i])}}, i + 1 == axes.size() ? "" : StrCat("axis_", axes[i]));
  }
  c.SetOut(0, x);
  return Status();
}

Status Squeeze(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(auto axes_opt, AxesArg(c, 1, 13));
  std::vector<int64_t> axes = axes_opt.value_or(std::vector<int64_t>{});
  const int r = c.InShape(0).rank();
  for (int64_t& a : axes) {
    WEFT_ASSIGN_OR_RETURN(a, Axis(c, a, r, "axis"));
  }
  const Tensor known = c.Known(0);
  if (known.valid() && known.rank() <= 1 && IsInteger(known.dtype()) && known.num_elements() == 1) {
    c.SetKnown(0, Tensor::Scalar<int64_t>(ToInts(known)[0]));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "Squeeze", {x}, {{"axis", AttrValue(axes)}}));
  return Status();
}

Status Concat(NodeContext& c) {
  const int64_t axis_attr = c.Int("axis", 0);
  // Shape arithmetic: concatenating known integer vectors.
  bool all_known = true;
  for (int i = 0; i < c.num_inputs(); ++i) {
    const Tensor k = c.Known(i);
    all_known = all_known && k.valid() && k.rank() == 1 && IsInteger(k.dtype());
  }
  if (all_known && c.num_inputs() > 0) {
    std::vector<int64_t> joined;
    for (int i = 0; i < c.num_inputs(); ++i) {
      const std::vector<int64_t> v = ToInts(c.Known(i));
      joined.insert(joined.end(), v.begin(), v.end());
    }
    c.SetKnown(0, Int64s(joined));
    return Status();
  }
  std::vector<Output> parts;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    WEFT_ASSIGN_OR_RETURN(Output p, c.In(i));
    parts.push_back(p);
  }
  const int r = parts.empty() ? -1 : parts[0].shape().rank();
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, axis_attr, r, "attr 'axis'"));
  c.SetOut(0, Op(c, "Concat", parts, {{"axis", AttrValue(axis)}}));
  return Status();
}

Status ShapeOp(NodeContext& c) {
  const Shape xs = c.InShape(0);
  int64_t start = c.Int("start", 0), end = c.Int("end", std::numeric_limits<int64_t>::max());
  if (xs.rank() >= 0) {
    const int64_t r = xs.rank();
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
    std::vector<int64_t> dims;
    bool known = true;
    for (int64_t i = start; i < end; ++i) {
      dims.push_back(xs.dim(static_cast<int>(i)));
      known = known && xs.dim(static_cast<int>(i)) >= 0;
    }
    if (known) {
      c.SetKnown(0, Int64s(dims));
      return Status();
    }
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  Output s = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}},
                c.HasAttr("start") || c.HasAttr("end") ? "Shape" : "");
  if (c.HasAttr("start") || c.HasAttr("end")) {
    if (xs.rank() < 0) return c.Unsupported("Shape with start/end of an input of unknown rank");
    s = Op(c, "StridedSlice", {s},
           {{"begin", AttrValue(std::vector<int64_t>{start})},
            {"end", AttrValue(std::vector<int64_t>{end})},
            {"strides", AttrValue(std::vector<int64_t>{1})}});
  }
  c.SetOut(0, s);
  return Status();
}

Status Size(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "Size", {x}, {{"out_type", AttrValue(DType::kI64)}}));
  return Status();
}

Status Gather(NodeContext& c) {
  const Shape xs = c.InShape(0);
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 0), xs.rank(), "attr 'axis'"));
  const Tensor data = c.Known(0);
  Tensor idx = c.Known(1);
  // Negative indices count from the end: fixed here when they are known.
  if (idx.valid()) {
    std::vector<int64_t> v = ToInts(idx);
    const int64_t dim = xs.rank() > axis ? xs.dim(static_cast<int>(axis)) : -1;
    bool changed = false;
    for (int64_t& i : v) {
      if (i < 0) {
        if (dim < 0) return c.Unsupported("a negative Gather index on an axis of unknown size");
        i += dim;
        changed = true;
      }
    }
    if (data.valid() && data.rank() == 1 && IsInteger(data.dtype()) && axis == 0) {
      const std::vector<int64_t> d = ToInts(data);
      std::vector<int64_t> out;
      for (int64_t i : v) {
        if (i < 0 || i >= static_cast<int64_t>(d.size())) return c.Error("index ", i, " is out of range");
        out.push_back(d[static_cast<std::size_t>(i)]);
      }
      c.SetKnown(0, Int64s(out, idx.shape()));
      return Status();
    }
    if (changed) idx = Int64s(v, idx.shape());
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  Output indices;
  if (idx.valid()) {
    indices =
        ConstOf(c, idx.dtype() == DType::kI64 || idx.dtype() == DType::kI32 ? idx : Int64s(ToInts(idx), idx.shape()),
                "indices");
  } else {
    WEFT_ASSIGN_OR_RETURN(indices, c.In(1));
  }
  c.SetOut(0, Op(c, "Gather", {x, indices}, {{"axis", AttrValue(axis)}}));
  return Status();
}

Status Slice(NodeContext& c) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = c.Ints("starts");
    ends = c.Ints("ends");
    axes = c.Ints("axes");
  } else {
    WEFT_ASSIGN_OR_RETURN(starts, c.KnownInts(1, "starts"));
    WEFT_ASSIGN_OR_RETURN(ends, c.KnownInts(2, "ends"));
    if (c.has_input(3)) {
      WEFT_ASSIGN_OR_RETURN(axes, c.KnownInts(3, "axes"));
    }
    if (c.has_input(4)) {
      WEFT_ASSIGN_OR_RETURN(steps, c.KnownInts(4, "steps"));
    }
  }
  if (starts.size() != ends.size()) return c.Error("starts and ends differ in length");
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.Error("starts, ends, axes and steps differ in length");
  }
  const Shape xs = c.InShape(0);
  const int r = xs.rank();
  if (r < 0) return c.Unsupported("Slice of an input of unknown rank");
  std::vector<int64_t> begin(static_cast<std::size_t>(r), 0), end(static_cast<std::size_t>(r), 0),
      stride(static_cast<std::size_t>(r), 1);
  int64_t begin_mask = (int64_t{1} << r) - 1, end_mask = begin_mask;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(int64_t a, Axis(c, axes[i], r, "axis"));
    if (steps[i] == 0) return c.Error("a step of 0");
    const std::size_t ai = static_cast<std::size_t>(a);
    stride[ai] = steps[i];
    begin[ai] = starts[i];
    end[ai] = ends[i];
    begin_mask &= ~(int64_t{1} << a);
    end_mask &= ~(int64_t{1} << a);
    // "To the end" (INT64_MAX, or INT64_MIN going backwards) is a mask bit.
    const int64_t big = int64_t{1} << 31;
    if ((steps[i] > 0 && ends[i] >= big) || (steps[i] < 0 && ends[i] <= -big)) {
      end_mask |= int64_t{1} << a;
      end[ai] = 0;
    }
    if ((steps[i] > 0 && starts[i] <= -big) || (steps[i] < 0 && starts[i] >= big)) {
      begin_mask |= int64_t{1} << a;
      begin[ai] = 0;
    }
  }
  const Tensor known = c.Known(0);
  if (known.valid() && known.rank() == 1 && IsInteger(known.dtype())) {
    const std::vector<int64_t> v = ToInts(known);
    const int64_t n = static_cast<int64_t>(v.size());
    int64_t b0 = (begin_mask & 1) ? (stride[0] > 0 ? 0 : n - 1) : begin[0];
    int64_t e0 = (end_mask & 1) ? (stride[0] > 0 ? n : -1) : end[0];
    if (!(begin_mask & 1))
      b0 = b0 < 0 ? std::max<int64_t>(b0 + n, stride[0] > 0 ? 0 : -1) : std::min(b0, stride[0] > 0 ? n : n - 1);
    if (!(end_mask & 1))
      e0 = e0 < 0 ? std::max<int64_t>(e0 + n, stride[0] > 0 ? 0 : -1) : std::min(e0, stride[0] > 0 ? n : n - 1);
    std::vector<int64_t> out;
    for (int64_t i = b0; stride[0] > 0 ? i < e0 : i > e0; i += stride[0]) out.push_back(v[static_cast<std::size_t>(i)]);
    c.SetKnown(0, Int64s(out));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "StridedSlice", {x},
                 {{"begin", AttrValue(begin)},
                  {"end", AttrValue(end)},
                  {"strides", AttrValue(stride)},
                  {"begin_mask", AttrValue(begin_mask)},
                  {"end_mask", AttrValue(end_mask)}}));
  return Status();
}

Status SplitOp(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 0), xs.rank(), "attr 'axis'"));
  std::vector<int64_t> sizes;
  if (c.opset() < 13) {
    sizes = c.Ints("split");
  } else if (c.has_input(1)) {
    WEFT_ASSIGN_OR_RETURN(sizes, c.KnownInts(1, "split"));
  }
  const int n = c.node().output_size();
  const int64_t dim = xs.rank() > axis ? xs.dim(static_cast<int>(axis)) : -1;
  if (sizes.empty() && (dim < 0 || dim % n == 0)) {
    std::vector<Output> parts =
        c.b().AddNode("Split", {x}, {{"num_split", AttrValue(int64_t{n})}, {"axis", AttrValue(axis)}}, c.Name());
    for (int i = 0; i < static_cast<int>(parts.size()); ++i) c.SetOut(i, parts[static_cast<std::size_t>(i)]);
    return Status();
  }
  if (sizes.empty()) {
    // Opset 18's uneven split: ceil(dim / n) each, the last smaller.
    const int64_t each = (dim + n - 1) / n;
    for (int i = 0; i < n; ++i) sizes.push_back(std::min(each, dim - each * i));
  }
  if (static_cast<int>(sizes.size()) != n) return c.Error(sizes.size(), " split sizes for ", n, " outputs");
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> begin(static_cast<std::size_t>(xs.rank()), 0), size(static_cast<std::size_t>(xs.rank()), -1);
    begin[static_cast<std::size_t>(axis)] = offset;
    size[static_cast<std::size_t>(axis)] = sizes[static_cast<std::size_t>(i)];
    offset += sizes[static_cast<std::size_t>(i)];
    c.SetOut(i, Op(c, "Slice", {x}, {{"begin", AttrValue(begin)}, {"size", AttrValue(size)}}, StrCat("part_", i)));
  }
  return Status();
}

Status ConstantOp(NodeContext& c) {
  const onnx::AttributeProto* a = nullptr;
  for (const char* name : {"value", "value_float", "value_floats", "value_int", "value_ints", "value_string",
                           "value_strings", "sparse_value"}) {
    if ((a = c.Attr(name)) != nullptr) break;
  }
  if (a == nullptr) return c.Error("Constant without a value attr");
  Tensor t;
  if (a->name() == "value") {
    auto v = TensorFromProto(a->t(), "");
    if (!v.ok()) return v.status();
    t = *v;
  } else if (a->name() == "value_float") {
    t = Tensor::Scalar<float>(a->f());
  } else if (a->name() == "value_floats") {
    t = Tensor::FromVector<float>(std::vector<float>(a->floats().begin(), a->floats().end()));
  } else if (a->name() == "value_int") {
    t = Tensor::Scalar<int64_t>(a->i());
  } else if (a->name() == "value_ints") {
    t = Int64s(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
  } else if (a->name() == "value_string") {
    t = Tensor::Strings({a->s()}, Shape{});
  } else if (a->name() == "value_strings") {
    t = Tensor::Strings(std::vector<std::string>(a->strings().begin(), a->strings().end()),
                        Shape{static_cast<int64_t>(a->strings_size())});
  } else {
    return c.Unsupported("a sparse Constant");
  }
  c.SetKnown(0, t);
  return Status();
}

Status ConstantOfShape(NodeContext& c) {
  Tensor value = Tensor::Scalar<float>(0.0f);
  if (const auto* a = c.Attr("value")) {
    auto v = TensorFromProto(a->t(), "");
    if (!v.ok()) return v.status().WithContext("attr 'value'");
    if (v->num_elements() != 1) return c.Error("attr 'value' must have one element, got ", v->TypeString());
    WEFT_ASSIGN_OR_RETURN(value, v->Reshaped(Shape{}));
  }
  Output dims;
  const Tensor k = c.Known(0);
  if (k.valid()) {
    dims = ConstOf(c, Int64s(ToInts(k)), "dims");
  } else {
    WEFT_ASSIGN_OR_RETURN(dims, c.In(0));
  }
  c.SetOut(0, Op(c, "Fill", {dims, ConstOf(c, value, "value")}));
  return Status();
}

Status Expand(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Tensor k = c.Known(1);
  const Shape xs = c.InShape(0);
  if (k.valid() && xs.IsFullyDefined()) {
    // Bidirectional broadcasting of the two shapes.
    std::vector<int64_t> a = xs.dims(), s = ToInts(k);
    const std::size_t n = std::max(a.size(), s.size());
    a.insert(a.begin(), n - a.size(), 1);
    s.insert(s.begin(), n - s.size(), 1);
    std::vector<int64_t> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (a[i] != s[i] && a[i] != 1 && s[i] != 1) {
        return c.Error("cannot broadcast ", xs.ToString(), " to ", ListString(ToInts(k)));
      }
      out[i] = a[i] == 1 ? s[i] : a[i];
    }
    c.SetOut(0, Op(c, "BroadcastTo", {x, ConstOf(c, Int64s(out), "shape")}));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output shape, c.In(1));
  if (x.dtype() == DType::kBool) {
    Output f = Op(c, "Fill", {shape, ConstOf(c, Tensor::Scalar<bool>(false), "false")}, {}, "false_like");
    c.SetOut(0, Op(c, "LogicalOr", {x, f}));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  c.SetOut(0, Op(c, "Add", {x, Op(c, "Fill", {shape, zero}, {}, "zeros")}));
  return Status();
}

Status Tile(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, c.KnownInts(1, "repeats"));
  c.SetOut(0, Op(c, "Tile", {x}, {{"multiples", AttrValue(repeats)}}));
  return Status();
}

Status PadOp(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  std::vector<int64_t> pads;
  double value = 0;
  if (c.opset() < 11) {
    pads = c.Ints("pads");
    value = c.Float("value", 0.0);
  } else {
    WEFT_ASSIGN_OR_RETURN(pads, c.KnownInts(1, "pads"));
    if (c.has_input(2)) {
      WEFT_ASSIGN_OR_RETURN(value, c.KnownScalar(2, "constant_value"));
    }
  }
  const int r = c.InShape(0).rank();
  if (r < 0 || static_cast<int>(pads.size()) != 2 * r) {
    return c.Error("pads has ", pads.size(), " entries for an input of rank ", r);
  }
  std::vector<int64_t> paddings(pads.size());
  bool at_most_one = true;
  for (int i = 0; i < r; ++i) {
    paddings[2 * static_cast<std::size_t>(i)] = pads[static_cast<std::size_t>(i)];
    paddings[2 * static_cast<std::size_t>(i) + 1] = pads[static_cast<std::size_t>(i + r)];
  }
  for (int64_t p : pads) {
    if (p < 0) return c.Unsupported("negative pads ", ListString(pads), " (cropping)");
    at_most_one = at_most_one && p <= 1;
  }
  std::string mode = c.Str("mode", "constant");
  std::string weft_mode;
  if (mode == "constant") {
    weft_mode = "CONSTANT";
  } else if (mode == "reflect") {
    weft_mode = "REFLECT";
  } else if (mode == "edge" && at_most_one) {
    weft_mode = "SYMMETRIC";  // mirroring with the edge repeats the edge, for one element
  } else if (mode == "edge") {
    return c.Unsupported("Pad mode 'edge' with pads above 1");
  } else {
    return c.Error("attr 'mode' is ", Quote(mode), "; expected constant, reflect or edge");
  }
  c.SetOut(
      0, Op(c, "Pad", {x},
            {{"paddings", AttrValue(paddings)}, {"mode", AttrValue(weft_mode)}, {"constant_value", AttrValue(value)}}));
  return Status();
}

// An ONNX op that is one Weft op on the same |inputs| inputs (Where,
// Range).
Status Direct(NodeContext& c, std::string_view weft_op, int inputs) {
  std::vector<Output> in;
  for (int i = 0; i < inputs; ++i) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(i));
    in.push_back(x);
  }
  c.SetOut(0, Op(c, weft_op, in));
  return Status();
}

Status CumSum(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output axis, c.In(1));
  c.SetOut(
      0, Op(c, "Cumsum", {x, axis},
            {{"exclusive", AttrValue(c.Int("exclusive", 0) != 0)}, {"reverse", AttrValue(c.Int("reverse", 0) != 0)}}));
  return Status();
}

// ReduceX: axes an attr before opset 13 for ReduceSum (18 for the others).
Status Reduce(NodeContext& c, std::string_view kind) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const bool keep = c.Int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  bool axes_given = false;
  if (c.node().op_type() == "ReduceSum" && c.opset() >= 13) {
    if (c.has_input(1)) {
      WEFT_ASSIGN_OR_RETURN(axes, c.KnownInts(1, "axes"));
      axes_given = true;
    }
    if (!axes_given && c.Int("noop_with_empty_axes", 0) != 0) {
      c.SetOut(0, Op(c, "Identity", {x}));
      return Status();
    }
  } else {
    axes = c.Ints("axes");
  }
  const int r = c.InShape(0).rank();
  for (int64_t& a : axes) {
    WEFT_ASSIGN_OR_RETURN(a, Axis(c, a, r, "axis"));
  }
  AttrMap attrs = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(keep)}};
  Output y;
  if (kind == "L1") {
    y = Op(c, "Sum", {Op(c, "Abs", {x}, {}, "abs")}, attrs);
  } else if (kind == "L2") {
    y = Op(c, "Sqrt", {Op(c, "Sum", {Op(c, "Square", {x}, {}, "square")}, attrs, "sum")});
  } else if (kind == "SumSquare") {
    y = Op(c, "Sum", {Op(c, "Square", {x}, {}, "square")}, attrs);
  } else if (kind == "LogSum") {
    y = Op(c, "Log", {Op(c, "Sum", {x}, attrs, "sum")});
  } else if (kind == "LogSumExp") {
    AttrMap keep_attrs = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}};
    Output m = Op(c, "StopGradient", {Op(c, "Max", {x}, keep_attrs, "max")}, {}, "shift");
    Output s = Op(c, "Sum", {Op(c, "Exp", {Op(c, "Sub", {x, m}, {}, "shifted")}, {}, "exp")}, attrs, "sum");
    Output mm = keep ? m
                     : Op(c, "Squeeze", {m}, {{"axis", AttrValue(axes.empty() ? std::vector<int64_t>{} : axes)}},
                          "shift_squeezed");
    if (!keep && axes.empty()) mm = Op(c, "Max", {x}, attrs, "max_all");
    y = Op(c, "Add", {Op(c, "Log", {s}, {}, "log"), mm});
  } else {
    y = Op(c, kind, {x}, attrs);
  }
  c.SetOut(0, y);
  return Status();
}

Status ArgOp(NodeContext& c, std::string_view weft_op) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const int r = c.InShape(0).rank();
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 0), r, "attr 'axis'"));
  const bool keep = c.Int("keepdims", 1) != 0;
  if (c.Int("select_last_index", 0) != 0) {
    // The last extreme: the first one along the reversed axis, mirrored.
    const int64_t dim = c.InShape(0).dim(static_cast<int>(axis));
    if (dim < 0) return c.Unsupported("select_last_index on an axis of unknown size");
    Output rev = Op(c, "Reverse", {x}, {{"axis", AttrValue(std::vector<int64_t>{axis})}}, "reversed");
    Output idx = Op(c, weft_op, {rev}, {{"axis", AttrValue(axis)}, {"output_type", AttrValue(DType::kI64)}}, "first");
    Output last = ConstOf(c, Tensor::Scalar<int64_t>(dim - 1), "last");
    Output y = Op(c, "Sub", {last, idx}, {}, keep ? "index" : "");
    c.SetOut(0, keep ? Op(c, "ExpandDims", {y}, {{"axis", AttrValue(axis)}}) : y);
    return Status();
  }
  Output y =
      Op(c, weft_op, {x}, {{"axis", AttrValue(axis)}, {"output_type", AttrValue(DType::kI64)}}, keep ? weft_op : "");
  c.SetOut(0, keep ? Op(c, "ExpandDims", {y}, {{"axis", AttrValue(axis)}}) : y);
  return Status();
}

Status Identity(NodeContext& c) {
  if (!c.has_input(0)) return c.Error("input 0 is missing");
  c.Alias(0, 0);  // no node: the same tensor
  return Status();
}

Status Dropout(NodeContext& c) {
  if (c.has_output(1)) return c.Unsupported("Dropout's mask output");
  if (c.opset() >= 12 && c.has_input(2)) {
    const Tensor t = c.Known(2);
    if (!t.valid() || ToInts(t)[0] != 0) return c.Unsupported("Dropout in training mode");
  }
  return Identity(c);
}

// Integer shape arithmetic on known vectors (Shape -> Gather -> Mul ->
// Concat chains), folded; anything else is the Weft op.
Status Arith(NodeContext& c, std::string_view weft_op) {
  const Tensor a = c.Known(0), bk = c.Known(1);
  if (a.valid() && bk.valid() && IsInteger(a.dtype()) && IsInteger(bk.dtype()) && a.rank() <= 1 && bk.rank() <= 1 &&
      (a.num_elements() == bk.num_elements() || a.num_elements() == 1 || bk.num_elements() == 1)) {
    const std::vector<int64_t> x = ToInts(a), y = ToInts(bk);
    const std::size_t n = std::max(x.size(), y.size());
    std::vector<int64_t> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      const int64_t p = x[x.size() == 1 ? 0 : i], q = y[y.size() == 1 ? 0 : i];
      if (weft_op == "Add") out[i] = p + q;
      if (weft_op == "Sub") out[i] = p - q;
      if (weft_op == "Mul") out[i] = p * q;
      if (weft_op == "Div") {
        if (q == 0) return c.Error("integer division by zero in a shape computation");
        out[i] = p / q;
      }
    }
    const Shape shape = a.num_elements() >= bk.num_elements() ? a.shape() : bk.shape();
    c.SetKnown(0, Int64s(out, a.rank() == 1 || bk.rank() == 1 ? Shape{static_cast<int64_t>(n)} : shape));
    return Status();
  }
  return Binary(c, weft_op);
}

// --- LSTM --------------------------------------------------------------------------------

// ONNX's LSTM, forward or reverse, one direction at a time, unrolled over
// a sequence of static length with Weft's LSTMCell (gates reordered from
// ONNX's i, o, f, c to Weft's i, f, g, o; W and R joined).
// The sequence input X of LSTM, GRU or RNN, time-major ([T, B, I]; layout 1
// is batch-major), with T static (the recurrence is unrolled) and I = |input|.
Expected<Output> SequenceInput(NodeContext& c, std::string_view what, int64_t input) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  if (c.Int("layout", 0) == 1) {
    x = Op(c, "Transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "time_major");
  }
  const Shape xs = x.shape();
  if (xs.rank() != 3) return c.Error("X has rank ", xs.rank(), "; expected 3");
  if (xs.dim(0) < 0) return c.Unsupported(what, " over a sequence of unknown length (Weft unrolls it)");
  if (xs.dim(2) >= 0 && xs.dim(2) != input) {
    return c.Error("X has ", xs.dim(2), " features per step; W takes ", input);
  }
  return x;
}

// Step |i| of a [T, ...] tensor: t[i], named |name|.
Output StepSlice(NodeContext& c, const Output& t, int64_t i, const std::string& name) {
  return Op(c, "Squeeze",
            {Op(c, "StridedSlice", {t},
                {{"begin", AttrValue(std::vector<int64_t>{i, 0, 0})},
                 {"end", AttrValue(std::vector<int64_t>{i + 1, 0, 0})},
                 {"strides", AttrValue(std::vector<int64_t>{1, 1, 1})},
                 {"end_mask", AttrValue(int64_t{6})}},
                name + "_slice")},
            {{"axis", AttrValue(std::vector<int64_t>{0})}}, name);
}

// Checks W [dirs, gates*hidden, input], R [dirs, gates*hidden, hidden] and
// B [dirs, 2*gates*hidden] of LSTM (gates 4), GRU (3) or RNN (1): shapes,
// one floating dtype.
Status CheckRecurrentWeights(NodeContext& c, std::string_view what, const Tensor& w, const Tensor& r,
                             const Tensor& bias, int64_t dirs, int64_t gates, int64_t hidden) {
  if (!w.valid() || !r.valid() || (c.has_input(3) && !bias.valid())) {
    return c.Unsupported(what, " weights that are not initializers");
  }
  if (w.dtype() != DType::kF32 && w.dtype() != DType::kF64) return c.Unsupported(what, " of ", DTypeName(w.dtype()));
  const int64_t gh = gates * hidden;
  if (hidden < 1 || w.rank() != 3 || w.dim(0) != dirs || w.dim(1) != gh || r.rank() != 3 || r.dim(0) != dirs ||
      r.dim(1) != gh || r.dim(2) != hidden ||
      (bias.valid() && (bias.rank() != 2 || bias.dim(0) != dirs || bias.dim(1) != 2 * gh))) {
    return c.Error("W ", w.shape().ToString(), ", R ", r.shape().ToString(), " and B ",
                   bias.valid() ? bias.shape().ToString() : std::string("(none)"), " do not fit hidden_size ", hidden,
                   " and ", dirs, " direction(s)");
  }
  if (r.dtype() != w.dtype() || (bias.valid() && bias.dtype() != w.dtype())) {
    return c.Error("W is ", DTypeName(w.dtype()), ", R ", DTypeName(r.dtype()), " and B ",
                   bias.valid() ? DTypeName(bias.dtype()) : "(none)", "; they must be one type");
  }
  return Status();
}

// Initial state input |index| of LSTM, GRU or RNN as [dirs, batch, hidden]
// (layout 1 gives it [batch, dirs, hidden]).
Expected<Output> InitialState(NodeContext& c, int index) {
  WEFT_ASSIGN_OR_RETURN(Output s, c.In(index));
  if (c.Int("layout", 0) != 1) return s;
  return Op(c, "Transpose", {s}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, StrCat("initial_", index));
}

Status Lstm(NodeContext& c) {
  if (c.has_input(4)) {
    return c.Unsupported("LSTM with sequence_lens (Weft unrolls sequences of one static length)");
  }
  if (c.has_input(7)) return c.Unsupported("LSTM with peepholes (input P)");
  if (c.HasAttr("clip")) return c.Unsupported("LSTM with 'clip'");
  if (c.Int("input_forget", 0) != 0) return c.Unsupported("LSTM with input_forget");
  if (c.HasAttr("activations")) {
    const auto* a = c.Attr("activations");
    for (int i = 0; i < a->strings_size(); ++i) {
      const std::string& s = a->strings(i);
      if (s != (i % 3 == 0 ? "Sigmoid" : "Tanh")) return c.Unsupported("LSTM activation ", Quote(s));
    }
  }
  const std::string direction = c.Str("direction", "forward");
  const int layout = static_cast<int>(c.Int("layout", 0));
  const int64_t hidden = c.Int("hidden_size", -1);
  const Tensor w = c.Initial(1), r = c.Initial(2), bias = c.Initial(3);
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return c.Error("attr 'direction' is ", Quote(direction));
  }
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  WEFT_RETURN_IF_ERROR(CheckRecurrentWeights(c, "LSTM", w, r, bias, dirs, 4, hidden));
  const int64_t input = w.dim(2);
  WEFT_ASSIGN_OR_RETURN(Output x, SequenceInput(c, "LSTM", input));
  const int64_t steps = x.shape().dim(0);
  const std::size_t es = DTypeSize(w.dtype());
  const int64_t gate_order[4] = {0, 2, 3, 1};  // Weft block k takes ONNX block gate_order[k]
  std::vector<Output> y_dirs, h_dirs, c_dirs;
  for (int64_t d = 0; d < dirs; ++d) {
    // w_weft [input + hidden, 4 hidden] = [W_d^T; R_d^T], columns reordered.
    WEFT_ASSIGN_OR_RETURN(Tensor kernel, Tensor::Allocate(w.dtype(), Shape{input + hidden, 4 * hidden}));
    WEFT_ASSIGN_OR_RETURN(Tensor b, Tensor::Zeros(w.dtype(), Shape{4 * hidden}));
    const char* wsrc = static_cast<const char*>(w.raw_data()) + static_cast<std::size_t>(d * 4 * hidden * input) * es;
    const char* rsrc = static_cast<const char*>(r.raw_data()) + static_cast<std::size_t>(d * 4 * hidden * hidden) * es;
    char* kdst = static_cast<char*>(kernel.raw_data());
    for (int64_t k = 0; k < 4; ++k) {
      for (int64_t j = 0; j < hidden; ++j) {
        const int64_t src_row = gate_order[k] * hidden + j, col = k * hidden + j;
        for (int64_t i = 0; i < input; ++i) {
          std::memcpy(kdst + static_cast<std::size_t>(i * 4 * hidden + col) * es,
                      wsrc + static_cast<std::size_t>(src_row * input + i) * es, es);
        }
        for (int64_t i = 0; i < hidden; ++i) {
          std::memcpy(kdst + static_cast<std::size_t>((input + i) * 4 * hidden + col) * es,
                      rsrc + static_cast<std::size_t>(src_row * hidden + i) * es, es);
        }
        if (bias.valid()) {
          const std::size_t base = static_cast<std::size_t>(d * 8 * hidden);
          if (w.dtype() == DType::kF32) {
            b.data<float>()[col] = bias.data<float>()[base + static_cast<std::size_t>(src_row)] +
                                   bias.data<float>()[base + static_cast<std::size_t>(4 * hidden + src_row)];
          } else {
            b.data<double>()[col] = bias.data<double>()[base + static_cast<std::size_t>(src_row)] +
                                    bias.data<double>()[base + static_cast<std::size_t>(4 * hidden + src_row)];
          }
        }
      }
    }
    const std::string dname = dirs == 2 ? StrCat("dir_", d) : std::string("cell");
    WEFT_ASSIGN_OR_RETURN(Output kw, c.Param(kernel, c.Name(dname + "/kernel")));
    WEFT_ASSIGN_OR_RETURN(Output kb, c.Param(b, c.Name(dname + "/bias")));
    // Initial states [dirs, batch, hidden] -> this direction's [batch, hidden].
    auto initial = [&](int index, const char* what) -> Expected<Output> {
      if (c.has_input(index)) {
        WEFT_ASSIGN_OR_RETURN(Output s, InitialState(c, index));
        return StepSlice(c, s, d, StrCat(dname, "/", what));
      }
      Output x0 = StepSlice(c, x, 0, StrCat(dname, "/", what, "_x0s"));
      // zeros [batch, hidden]: x0 [batch, input] @ zeros [input, hidden].
      WEFT_ASSIGN_OR_RETURN(Tensor z, Tensor::Zeros(w.dtype(), Shape{input, hidden}));
      return Op(c, "MatMul", {x0, ConstOf(c, z, StrCat(dname, "/", what, "_zeros"))}, {}, StrCat(dname, "/", what));
    };
    WEFT_ASSIGN_OR_RETURN(Output h, initial(5, "h0"));
    WEFT_ASSIGN_OR_RETURN(Output cs, initial(6, "c0"));
    const bool reverse = direction == "reverse" || d == 1;
    std::vector<Output> hs(static_cast<std::size_t>(steps));
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = reverse ? steps - 1 - s : s;
      Output xt = StepSlice(c, x, t, StrCat(dname, "/x_", t));
      std::vector<Output> out = c.b().AddNode("LSTMCell", {xt, cs, h, kw, kb}, {{"forget_bias", AttrValue(0.0)}},
                                              c.Name(StrCat(dname, "/step_", t)));
      if (out.size() != 3) return c.b().status();
      cs = out[0];
      h = out[1];
      hs[static_cast<std::size_t>(t)] = h;
    }
    if (c.has_output(0)) {
      y_dirs.push_back(Op(c, "Pack", hs, {{"axis", AttrValue(int64_t{0})}}, StrCat(dname, "/Y")));
    }
    h_dirs.push_back(h);
    c_dirs.push_back(cs);
  }
  // Y [T, dirs, batch, hidden] (layout 0) or [batch, T, dirs, hidden] (layout 1).
  if (c.has_output(0)) {
    Output y = Op(c, "Pack", y_dirs, {{"axis", AttrValue(int64_t{1})}}, layout == 1 ? "Y_time_major" : "Y");
    if (layout == 1) y = Op(c, "Transpose", {y}, {{"perm", AttrValue(std::vector<int64_t>{2, 0, 1, 3})}}, "Y");
    c.SetOut(0, y);
  }
  const std::vector<int64_t> state_perm = {1, 0, 2};
  if (c.has_output(1)) {
    Output yh = Op(c, "Pack", h_dirs, {{"axis", AttrValue(int64_t{0})}}, "Y_h");
    c.SetOut(1, layout == 1 ? Op(c, "Transpose", {yh}, {{"perm", AttrValue(state_perm)}}, "Y_h_batch_major") : yh);
  }
  if (c.has_output(2)) {
    Output yc = Op(c, "Pack", c_dirs, {{"axis", AttrValue(int64_t{0})}}, "Y_c");
    c.SetOut(2, layout == 1 ? Op(c, "Transpose", {yc}, {{"perm", AttrValue(state_perm)}}, "Y_c_batch_major") : yc);
  }
  return Status();
}

// --- GRU and RNN ----------------------------------------------------------------------------
//
// Unrolled like LSTM, from Weft's own ops: the input projection of every
// step is one MatMul (X [T*B, I] x W^T), then per step one MatMul of the
// state by R^T, Split into the gates, and the elementwise update. The
// weights are parameters (trainable unless frozen), stored transposed.

// Recurrence |what| of ONNX GRU or RNN: |gates| blocks in W, R and B.
Status Recurrent(NodeContext& c, std::string_view what, int64_t gates) {
  if (c.has_input(4)) {
    return c.Unsupported(what, " with sequence_lens (Weft unrolls sequences of one static length)");
  }
  if (c.HasAttr("clip")) return c.Unsupported(what, " with 'clip'");
  if (c.HasAttr("activations")) {
    const auto* a = c.Attr("activations");
    for (int i = 0; i < a->strings_size(); ++i) {
      const std::string& s = a->strings(i);
      const bool gate = gates == 3 && i % 2 == 0;
      if (s != (gate ? "Sigmoid" : "Tanh")) return c.Unsupported(what, " activation ", Quote(s));
    }
  }
  const std::string direction = c.Str("direction", "forward");
  const int layout = static_cast<int>(c.Int("layout", 0));
  const int64_t hidden = c.Int("hidden_size", -1);
  const bool before_reset = c.Int("linear_before_reset", 0) != 0;
  const Tensor w = c.Initial(1), r = c.Initial(2), bias = c.Initial(3);
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    return c.Error("attr 'direction' is ", Quote(direction));
  }
  const int64_t dirs = direction == "bidirectional" ? 2 : 1;
  const int64_t gh = gates * hidden;
  WEFT_RETURN_IF_ERROR(CheckRecurrentWeights(c, what, w, r, bias, dirs, gates, hidden));
  const int64_t input = w.dim(2);
  WEFT_ASSIGN_OR_RETURN(Output x, SequenceInput(c, what, input));
  const int64_t steps = x.shape().dim(0);
  GraphBuilder& b = c.b();
  // Slice [d] of a [dirs, rows, cols] tensor, transposed: [cols, rows].
  auto transposed = [&](const Tensor& t, int64_t d) -> Expected<Tensor> {
    const int64_t rows = t.dim(1), cols = t.dim(2);
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(t.dtype(), Shape{cols, rows}));
    const std::size_t es = DTypeSize(t.dtype());
    const char* src = static_cast<const char*>(t.raw_data()) + static_cast<std::size_t>(d * rows * cols) * es;
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j) {
        std::memcpy(dst + static_cast<std::size_t>(j * rows + i) * es,
                    src + static_cast<std::size_t>(i * cols + j) * es, es);
      }
    }
    return out;
  };
  auto bias_part = [&](int64_t d, int64_t half) -> Expected<Tensor> {
    WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Zeros(w.dtype(), Shape{gh}));
    if (bias.valid()) {
      const std::size_t es = DTypeSize(w.dtype());
      std::memcpy(out.raw_data(),
                  static_cast<const char*>(bias.raw_data()) + static_cast<std::size_t>(d * 2 * gh + half * gh) * es,
                  static_cast<std::size_t>(gh) * es);
    }
    return out;
  };
  std::vector<Output> y_dirs, h_dirs;
  for (int64_t d = 0; d < dirs; ++d) {
    const std::string dname = dirs == 2 ? StrCat("dir_", d) : std::string("cell");
    WEFT_ASSIGN_OR_RETURN(Tensor wt, transposed(w, d));
    WEFT_ASSIGN_OR_RETURN(Tensor rt, transposed(r, d));
    WEFT_ASSIGN_OR_RETURN(Tensor wb, bias_part(d, 0));
    WEFT_ASSIGN_OR_RETURN(Tensor rb, bias_part(d, 1));
    WEFT_ASSIGN_OR_RETURN(Output kw, c.Param(wt, c.Name(dname + "/W")));
    WEFT_ASSIGN_OR_RETURN(Output kr, c.Param(rt, c.Name(dname + "/R")));
    WEFT_ASSIGN_OR_RETURN(Output kwb, c.Param(wb, c.Name(dname + "/Wb")));
    WEFT_ASSIGN_OR_RETURN(Output krb, c.Param(rb, c.Name(dname + "/Rb")));
    // Every step's input projection at once: [T, B, G*H].
    Output rows =
        Op(c, "Reshape", {x, ConstOf(c, Int64s({-1, input}), dname + "/x_rows_shape")}, {}, dname + "/x_rows");
    Output proj = Op(c, "BiasAdd", {Op(c, "MatMul", {rows, kw}, {}, dname + "/xw"), kwb}, {}, dname + "/xw_bias");
    proj = Op(c, "Reshape", {proj, ConstOf(c, Int64s({steps, -1, gh}), dname + "/xw_shape")}, {}, dname + "/xw_steps");
    // The initial state [B, H]: input 5's slice d, or zeros (x0 [B, I] x zeros [I, H]).
    Output h;
    if (c.has_input(5)) {
      WEFT_ASSIGN_OR_RETURN(Output h0, InitialState(c, 5));
      h = StepSlice(c, h0, d, dname + "/h0");
    } else {
      WEFT_ASSIGN_OR_RETURN(Tensor z, Tensor::Zeros(w.dtype(), Shape{input, hidden}));
      h = Op(c, "MatMul", {StepSlice(c, x, 0, dname + "/x0"), ConstOf(c, z, dname + "/h0_zeros")}, {}, dname + "/h0");
    }
    // GRU without linear_before_reset multiplies the reset state by Rh,
    // the last H columns of R^T, on its own.
    Output rh, rbh;
    if (gates == 3 && !before_reset) {
      rh = Op(c, "Slice", {kr},
              {{"begin", AttrValue(std::vector<int64_t>{0, 2 * hidden})},
               {"size", AttrValue(std::vector<int64_t>{-1, hidden})}},
              dname + "/Rh");
      rbh = Op(
          c, "Slice", {krb},
          {{"begin", AttrValue(std::vector<int64_t>{2 * hidden})}, {"size", AttrValue(std::vector<int64_t>{hidden})}},
          dname + "/Rbh");
    }
    const bool reverse = direction == "reverse" || d == 1;
    std::vector<Output> hs(static_cast<std::size_t>(steps));
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = reverse ? steps - 1 - s : s;
      const std::string sn = StrCat(dname, "/step_", t);
      Output xw = StepSlice(c, proj, t, sn + "/xw");
      Output hr = Op(c, "BiasAdd", {Op(c, "MatMul", {h, kr}, {}, sn + "/hr"), krb}, {}, sn + "/hr_bias");
      if (gates == 1) {
        h = Op(c, "Tanh", {Op(c, "Add", {xw, hr}, {}, sn + "/sum")}, {}, sn + "/h");
      } else {
        std::vector<Output> xg =
            b.AddNode("Split", {xw}, {{"num_split", AttrValue(int64_t{3})}, {"axis", AttrValue(int64_t{1})}},
                      c.Name(sn + "/xw_gates"));
        std::vector<Output> hg =
            b.AddNode("Split", {hr}, {{"num_split", AttrValue(int64_t{3})}, {"axis", AttrValue(int64_t{1})}},
                      c.Name(sn + "/hr_gates"));
        if (xg.size() != 3 || hg.size() != 3) return b.status();
        Output z = Op(c, "Sigmoid", {Op(c, "Add", {xg[0], hg[0]}, {}, sn + "/z_sum")}, {}, sn + "/z");
        Output rg = Op(c, "Sigmoid", {Op(c, "Add", {xg[1], hg[1]}, {}, sn + "/r_sum")}, {}, sn + "/r");
        Output cand;
        if (before_reset) {
          // tanh(Xt Wh + rt * (Ht-1 Rh + Rbh) + Wbh)
          cand = Op(c, "Add", {xg[2], Op(c, "Mul", {rg, hg[2]}, {}, sn + "/reset")}, {}, sn + "/h_sum");
        } else {
          // tanh(Xt Wh + (rt * Ht-1) Rh + Rbh + Wbh).
          Output reset = Op(c, "MatMul", {Op(c, "Mul", {rg, h}, {}, sn + "/reset_h"), rh}, {}, sn + "/reset");
          cand = Op(c, "Add", {xg[2], Op(c, "BiasAdd", {reset, rbh}, {}, sn + "/reset_bias")}, {}, sn + "/h_sum");
        }
        cand = Op(c, "Tanh", {cand}, {}, sn + "/candidate");
        // Ht = (1 - z) * cand + z * Ht-1 = cand + z * (Ht-1 - cand)
        h = Op(c, "Add", {cand, Op(c, "Mul", {z, Op(c, "Sub", {h, cand}, {}, sn + "/diff")}, {}, sn + "/keep")}, {},
               sn + "/h");
      }
      hs[static_cast<std::size_t>(t)] = h;
    }
    if (c.has_output(0)) y_dirs.push_back(Op(c, "Pack", hs, {{"axis", AttrValue(int64_t{0})}}, dname + "/Y"));
    h_dirs.push_back(h);
  }
  if (c.has_output(0)) {
    Output y = Op(c, "Pack", y_dirs, {{"axis", AttrValue(int64_t{1})}}, layout == 1 ? "Y_time_major" : "Y");
    if (layout == 1) y = Op(c, "Transpose", {y}, {{"perm", AttrValue(std::vector<int64_t>{2, 0, 1, 3})}}, "Y");
    c.SetOut(0, y);
  }
  if (c.has_output(1)) {
    Output yh = Op(c, "Pack", h_dirs, {{"axis", AttrValue(int64_t{0})}}, "Y_h");
    c.SetOut(1, layout == 1
                    ? Op(c, "Transpose", {yh}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "Y_h_batch_major")
                    : yh);
  }
  return Status();
}

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
// |x| (one element) as a scalar, its nodes named after |what|.
Output AsScalar(NodeContext& c, const Output& x, std::string_view what) {
  if (x.shape().rank() == 0) return x;
  return c.b().Op("Reshape", {x, c.b().Const(Int64s({}, Shape{0}), c.Name(StrCat(what, "_shape")))}, {},
                  c.Name(StrCat(what, "_scalar")));
}

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

Expected<Output> ScalarI64(NodeContext& c, const Output& x, std::string_view what) {
  Output y = x;
  if (x.dtype() != DType::kI64) {
    if (!IsInteger(x.dtype())) return c.Error(what, " must be an integer, got ", DTypeName(x.dtype()));
    y = c.b().Op("Cast", {x}, {{"DstT", AttrValue(DType::kI64)}}, c.Name(StrCat(what, "_i64")));
  }
  return AsScalar(c, y, what);
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

// --- Einsum -------------------------------------------------------------------------------
//
// Composed, as XLA and ONNX Runtime do: each operand first sums the
// letters no other operand and not the output has; operands are then
// contracted left to right, each pair as one MatMul or BatchMatMul of
// [batch..., free_a, summed] x [batch..., summed, free_b] with Transposes
// and Reshapes around it; the result is transposed into the output's
// order. Ellipses are expanded to letters of their own (right-aligned,
// equal sizes: no broadcasting of 1 against n). Not supported: a letter
// twice in one operand (a diagonal).

struct EinsumTerm {
  Output x;
  std::string letters;  // one per axis
};

// The 1-D i64 shape [d(groups[0]), d(groups[1]), ...] of |x|, where each
// group's size is the product of the axes it lists: a Const when every
// size is static, else computed from Shape(x).
Output GroupedShape(NodeContext& c, const Output& x, const std::vector<std::vector<int>>& groups,
                    std::string_view suffix) {
  GraphBuilder& b = c.b();
  const Shape& s = x.shape();
  std::vector<int64_t> dims;
  bool known = true;
  for (const auto& g : groups) {
    int64_t d = 1;
    for (int a : g) {
      const int64_t dim = a < s.rank() ? s.dim(a) : -1;  // rank -1 when unknown
      if (dim < 0) known = false;
      d *= std::max<int64_t>(dim, 0);
    }
    dims.push_back(d);
  }
  if (known) return ConstOf(c, Int64s(dims), suffix);
  Output shape = b.Op("Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, c.Name(StrCat(suffix, "_of")));
  std::vector<Output> parts;
  for (const auto& g : groups) {
    std::vector<int64_t> idx(g.begin(), g.end());
    Output picked = b.Op("Gather", {shape, ConstOf(c, Int64s(idx), StrCat(suffix, "_axes"))}, {}, c.Name(suffix));
    parts.push_back(b.Op("Prod", {picked},
                         {{"axis", AttrValue(std::vector<int64_t>{0})}, {"keep_dims", AttrValue(true)}},
                         c.Name(suffix)));
  }
  return b.Op("Concat", parts, {{"axis", AttrValue(int64_t{0})}}, c.Name(suffix));
}

// |t| with the axes of the letters outside |keep| summed away.
EinsumTerm SumAway(NodeContext& c, const EinsumTerm& t, const std::string& keep) {
  std::vector<int64_t> axes;
  std::string rest;
  for (std::size_t i = 0; i < t.letters.size(); ++i) {
    if (keep.find(t.letters[i]) == std::string::npos) {
      axes.push_back(static_cast<int64_t>(i));
    } else {
      rest.push_back(t.letters[i]);
    }
  }
  if (axes.empty()) return t;
  return {c.b().Op("Sum", {t.x}, {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(false)}}, c.Name("sum")), rest};
}

// |t| transposed into the letter order |order| (a permutation of its letters).
Output Permuted(NodeContext& c, const EinsumTerm& t, const std::string& order) {
  if (order == t.letters) return t.x;
  std::vector<int64_t> perm;
  for (char l : order) perm.push_back(static_cast<int64_t>(t.letters.find(l)));
  return c.b().Op("Transpose", {t.x}, {{"perm", AttrValue(perm)}}, c.Name("transpose"));
}

Expected<EinsumTerm> Contract(NodeContext& c, EinsumTerm a, EinsumTerm bt, const std::string& keep) {
  GraphBuilder& b = c.b();
  a = SumAway(c, a, keep + bt.letters);
  bt = SumAway(c, bt, keep + a.letters);
  std::string batch, summed, free_a, free_b;
  for (char l : a.letters) {
    const bool in_b = bt.letters.find(l) != std::string::npos;
    const bool kept = keep.find(l) != std::string::npos;
    (in_b ? (kept ? batch : summed) : free_a).push_back(l);
  }
  for (char l : bt.letters) {
    if (a.letters.find(l) == std::string::npos) free_b.push_back(l);
  }
  const int nb = static_cast<int>(batch.size());
  auto range = [](int from, int count) {
    std::vector<int> v(static_cast<std::size_t>(count));
    std::iota(v.begin(), v.end(), from);
    return v;
  };
  Output xa = Permuted(c, a, batch + free_a + summed);
  Output xb = Permuted(c, bt, batch + summed + free_b);
  WEFT_RETURN_IF_ERROR(b.status());
  std::vector<std::vector<int>> ga, gb;
  for (int i = 0; i < nb; ++i) {
    ga.push_back({i});
    gb.push_back({i});
  }
  ga.push_back(range(nb, static_cast<int>(free_a.size())));
  ga.push_back(range(nb + static_cast<int>(free_a.size()), static_cast<int>(summed.size())));
  gb.push_back(range(nb, static_cast<int>(summed.size())));
  gb.push_back(range(nb + static_cast<int>(summed.size()), static_cast<int>(free_b.size())));
  Output ma = b.Op("Reshape", {xa, GroupedShape(c, xa, ga, "a_shape")}, {}, c.Name("a"));
  Output mb = b.Op("Reshape", {xb, GroupedShape(c, xb, gb, "b_shape")}, {}, c.Name("b"));
  Output prod = b.Op(nb == 0 ? "MatMul" : "BatchMatMul", {ma, mb}, {}, c.Name("product"));
  // [batch..., free_a..., free_b...] from the operands' shapes.
  std::vector<std::vector<int>> gr;
  for (int i = 0; i < nb + static_cast<int>(free_a.size()); ++i) gr.push_back({i});
  Output shape_a = GroupedShape(c, xa, gr, "out_shape_a");
  std::vector<std::vector<int>> gr_b;
  for (int i = nb + static_cast<int>(summed.size()); i < static_cast<int>(bt.letters.size()); ++i) gr_b.push_back({i});
  Output out_shape = shape_a;
  if (!gr_b.empty()) {
    out_shape = b.Op("Concat", {shape_a, GroupedShape(c, xb, gr_b, "out_shape_b")}, {{"axis", AttrValue(int64_t{0})}},
                     c.Name("out_shape"));
  }
  return EinsumTerm{b.Op("Reshape", {prod, out_shape}, {}, c.Name("contracted")), batch + free_a + free_b};
}

Status Einsum(NodeContext& c) {
  std::string eq;
  for (char ch : c.Str("equation", "")) {
    if (ch != ' ') eq.push_back(ch);
  }
  const std::size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (std::size_t start = 0;;) {
    const std::size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != c.num_inputs()) {
    return c.Error("equation ", Quote(eq), " has ", terms.size(), " operands; the node has ", c.num_inputs(),
                   " inputs");
  }
  std::string used;
  for (char ch : eq) {
    if (std::isalpha(static_cast<unsigned char>(ch)) != 0) used.push_back(ch);
  }
  // Letters for the axes ellipses stand for.
  std::string pool;
  for (char ch : std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")) {
    if (used.find(ch) == std::string::npos) pool.push_back(ch);
  }
  std::vector<EinsumTerm> ops;
  int ellipsis = 0;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(static_cast<int>(k)));
    const int rank = x.shape().rank();
    if (rank < 0) return c.Unsupported("Einsum of an operand of unknown rank (input ", k, ")");
    std::string t = terms[k];
    const std::size_t dots = t.find("...");
    const int explicit_letters = static_cast<int>(t.size()) - (dots == std::string::npos ? 0 : 3);
    if (dots != std::string::npos) ellipsis = std::max(ellipsis, rank - explicit_letters);
    ops.push_back({x, t});
  }
  if (ellipsis > static_cast<int>(pool.size())) return c.Unsupported("an ellipsis of ", ellipsis, " axes");
  const std::string ell = pool.substr(0, static_cast<std::size_t>(ellipsis));
  for (std::size_t k = 0; k < ops.size(); ++k) {
    std::string& t = ops[k].letters;
    const int rank = ops[k].x.shape().rank();
    const std::size_t dots = t.find("...");
    if (dots != std::string::npos) {
      const int n = rank - (static_cast<int>(t.size()) - 3);
      if (n < 0) return c.Error("operand ", k, " (", Quote(terms[k]), ") has rank ", rank);
      t = t.substr(0, dots) + ell.substr(ell.size() - static_cast<std::size_t>(n)) + t.substr(dots + 3);
    }
    if (static_cast<int>(t.size()) != rank) {
      return c.Error("operand ", k, " (", Quote(terms[k]), ") names ", t.size(), " axes; the input has rank ", rank);
    }
    for (char l : t) {
      if (std::isalpha(static_cast<unsigned char>(l)) == 0)
        return c.Error("equation ", Quote(eq), ": bad letter ", Quote(std::string(1, l)));
      if (std::count(t.begin(), t.end(), l) > 1) {
        return c.Unsupported("equation ", Quote(eq), ": letter ", std::string(1, l),
                             " twice in one operand (a diagonal)");
      }
    }
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
    const std::size_t dots = out.find("...");
    if (dots != std::string::npos) out = out.substr(0, dots) + ell + out.substr(dots + 3);
  } else {
    // Implicit output: the ellipsis axes, then the letters used once, in
    // alphabetical order.
    std::string once;
    for (char l : used) {
      if (std::count(used.begin(), used.end(), l) == 1) once.push_back(l);
    }
    std::sort(once.begin(), once.end());
    out = ell + once;
  }
  for (char l : out) {
    bool found = false;
    for (const auto& t : ops) found = found || t.letters.find(l) != std::string::npos;
    if (!found || std::count(out.begin(), out.end(), l) > 1) {
      return c.Error("equation ", Quote(eq), ": output letter ", std::string(1, l),
                     found ? " appears twice" : " is in no operand");
    }
  }
  // Sum away what only one operand has, then contract left to right.
  auto needed_after = [&](std::size_t k) {
    std::string keep = out;
    for (std::size_t j = k + 1; j < ops.size(); ++j) keep += ops[j].letters;
    return keep;
  };
  EinsumTerm cur = SumAway(c, ops[0], needed_after(0));
  for (std::size_t k = 1; k < ops.size(); ++k) {
    WEFT_RETURN_IF_ERROR(c.b().status());
    WEFT_ASSIGN_OR_RETURN(cur, Contract(c, cur, ops[k], needed_after(k)));
  }
  cur = SumAway(c, cur, out);
  c.SetOut(0, Op(c, "Identity", {Permuted(c, cur, out)}));
  return Status();
}

// --- Resize -------------------------------------------------------------------------------
//
// Every mode of Resize (nearest, linear, cubic; opsets 11 to 17) is a
// linear map along each resized axis: output = A x, with A [out, in] the
// interpolation weights, which depend only on the sizes and the
// attributes. The importer computes A from ONNX's definition (neighbours
// clamped to the edge as the reference pads them; exclude_outside
// renormalised) and applies it as one MatMul or BatchMatMul per resized
// axis: exact, differentiable, and the sizes along resized axes (and
// after them) must be known at import.

// The source coordinate of output index |x| (ONNX's coordinate_transformation_mode).
Expected<double> SourceCoordinate(std::string_view mode, double x, double scale, int64_t in, int64_t out) {
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / static_cast<double>(out - 1);
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  return UnimplementedError("coordinate_transformation_mode ", Quote(std::string(mode)),
                            " (Weft imports half_pixel, pytorch_half_pixel, align_corners, asymmetric and "
                            "tf_half_pixel_for_nn)");
}

// The interpolation matrix [out, in] of one axis, row-major.
Expected<std::vector<double>> ResizeMatrix(NodeContext& c, int64_t in, int64_t out, double scale) {
  const std::string mode = c.Str("mode", "nearest");
  const std::string coord = c.Str("coordinate_transformation_mode", "half_pixel");
  const std::string nearest = c.Str("nearest_mode", "round_prefer_floor");
  const double a = c.Float("cubic_coeff_a", -0.75);
  const bool exclude = c.Int("exclude_outside", 0) != 0;
  std::vector<double> m(static_cast<std::size_t>(in * out), 0.0);
  for (int64_t y = 0; y < out; ++y) {
    WEFT_ASSIGN_OR_RETURN(double x, SourceCoordinate(coord, static_cast<double>(y), scale, in, out));
    const double fl = std::floor(x);
    const double r = x - fl;
    const auto base = static_cast<int64_t>(fl);
    std::vector<std::pair<int64_t, double>> taps;  // (source index, weight)
    if (mode == "nearest") {
      bool up = false;
      if (nearest == "round_prefer_floor") {
        up = r > 0.5;
      } else if (nearest == "round_prefer_ceil") {
        up = r >= 0.5;
      } else if (nearest == "floor") {
        up = false;
      } else if (nearest == "ceil") {
        up = r > 0;
      } else {
        return c.Error("nearest_mode ", Quote(nearest),
                       " is not one of round_prefer_floor, round_prefer_ceil, "
                       "floor, ceil");
      }
      taps.push_back({base + (up ? 1 : 0), 1.0});
    } else if (mode == "linear") {
      taps = {{base, 1 - r}, {base + 1, r}};
    } else if (mode == "cubic") {
      auto w = [a](double t) {  // Keys' cubic kernel at distance |t|
        t = std::abs(t);
        if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
        if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
        return 0.0;
      };
      taps = {{base - 1, w(r + 1)}, {base, w(r)}, {base + 1, w(1 - r)}, {base + 2, w(2 - r)}};
    } else {
      return c.Error("mode ", Quote(mode), " is not one of nearest, linear, cubic");
    }
    double total = 0;
    for (auto& [i, weight] : taps) {
      if (exclude && (i < 0 || i >= in)) weight = 0;
      total += weight;
    }
    for (const auto& [i, weight] : taps) {
      const int64_t src = std::clamp<int64_t>(i, 0, in - 1);
      m[static_cast<std::size_t>(y * in + src)] += exclude && total != 0 ? weight / total : weight;
    }
  }
  return m;
}

constexpr int64_t kMaxResizeMatrix = int64_t{1} << 24;

Tensor Weights(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (dtype == DType::kF64) return Tensor::FromVector<double>(values, shape);
  return Tensor::FromVector<float>(std::vector<float>(values.begin(), values.end()), shape);
}

Status Resize(NodeContext& c) {
  if (c.opset() < 11) {
    return c.Unsupported("Resize of opset 10 (its coordinates differ); convert the model to opset 11 or later");
  }
  if (c.Str("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") {
    return c.Unsupported("Resize with coordinate_transformation_mode tf_crop_and_resize");
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = x.shape();
  const int rank = xs.rank();
  if (rank < 1) return c.Unsupported("Resize of an input of unknown rank or a scalar");
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kF64) {
    return c.Unsupported("Resize of ", DTypeName(x.dtype()), " (f32 and f64)");
  }
  std::vector<double> scales;
  bool scales_f32 = false;
  std::vector<int64_t> sizes;
  if (c.has_input(3)) {
    WEFT_ASSIGN_OR_RETURN(sizes, c.KnownInts(3, "sizes"));
  }
  if (sizes.empty() && c.has_input(2)) {  // an empty sizes is absent
    // Its value even when it is a float initializer (which would otherwise
    // become a variable): scales are not trained.
    const Tensor t = c.Initial(2);
    if (!t.valid()) return c.Unsupported("scales (input 2) must be known when the model is imported");
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kF64) return c.Error("scales must be floats");
    scales_f32 = t.dtype() == DType::kF32;
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      scales.push_back(t.dtype() == DType::kF64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]));
    }
  }
  if (sizes.empty() && scales.empty()) return c.Error("needs scales or sizes");
  const std::size_t n = sizes.empty() ? scales.size() : sizes.size();
  if (static_cast<int>(n) != rank)
    return c.Error(sizes.empty() ? "scales" : "sizes", " has ", n, " values for rank ", rank);
  GraphBuilder& b = c.b();
  Output y = x;
  std::vector<int64_t> dims(xs.dims().begin(), xs.dims().end());
  for (int axis = 0; axis < rank; ++axis) {
    const auto ua = static_cast<std::size_t>(axis);
    const int64_t in = dims[ua];
    if (!sizes.empty() && sizes[ua] < 0) return c.Error("sizes[", axis, "] is ", sizes[ua]);
    if (sizes.empty() && !(scales[ua] > 0))
      return c.Error("scales[", axis, "] is ", scales[ua], "; scales are positive");
    if (sizes.empty() && scales[ua] == 1.0) continue;
    if (in < 0) return c.Unsupported("Resize along axis ", axis, ", whose size is not known at import");
    // floor(in * scale) in the scales' own precision, as ONNX's shape
    // inference and runtimes compute it (5 * 1.4f is 7 in f32, 6.99... in f64).
    const double out_size = !sizes.empty() ? static_cast<double>(sizes[ua])
                            : scales_f32   ? std::floor(static_cast<float>(in) * static_cast<float>(scales[ua]))
                                           : std::floor(static_cast<double>(in) * scales[ua]);
    // The interpolation matrix has in * out elements: axes up to 4096 each way.
    if (!(out_size * static_cast<double>(in) <= static_cast<double>(kMaxResizeMatrix))) {
      return c.Unsupported("Resize of axis ", axis, " from ", in, " to ", out_size, ": Weft's Resize builds an ",
                           "interpolation matrix of in x out weights, at most ", kMaxResizeMatrix, " of them");
    }
    const auto out = static_cast<int64_t>(out_size);
    const double scale = sizes.empty() ? scales[ua] : static_cast<double>(out) / static_cast<double>(in);
    if (out == in && scale == 1.0) continue;
    if (in == 0 || out == 0) return c.Unsupported("Resize to or from an empty axis ", axis);
    WEFT_ASSIGN_OR_RETURN(std::vector<double> m, ResizeMatrix(c, in, out, scale));
    int64_t post = 1;
    for (int i = axis + 1; i < rank; ++i) {
      if (dims[static_cast<std::size_t>(i)] < 0)
        return c.Unsupported("Resize of an input whose axis ", i, " is not known");
      post *= dims[static_cast<std::size_t>(i)];
    }
    int unknown_before = 0;
    for (int i = 0; i < axis; ++i) unknown_before += dims[static_cast<std::size_t>(i)] < 0 ? 1 : 0;
    if (unknown_before > 1) return c.Unsupported("Resize of an input with more than one unknown axis");
    const std::string tag = StrCat("axis_", axis);
    if (axis == rank - 1) {
      // Last axis: [rows, in] x A^T [in, out].
      std::vector<double> mt(m.size());
      for (int64_t i = 0; i < in; ++i) {
        for (int64_t o = 0; o < out; ++o)
          mt[static_cast<std::size_t>(i * out + o)] = m[static_cast<std::size_t>(o * in + i)];
      }
      const Tensor w = Weights(mt, Shape{in, out}, x.dtype());
      Output rows = b.Op("Reshape", {y, ConstOf(c, Int64s({-1, in}), tag + "_rows_shape")}, {}, c.Name(tag + "_rows"));
      y = b.Op("MatMul", {rows, ConstOf(c, w, tag + "_weights")}, {}, c.Name(tag));
    } else {
      const Tensor w = Weights(m, Shape{out, in}, x.dtype());
      Output blocks =
          b.Op("Reshape", {y, ConstOf(c, Int64s({-1, in, post}), tag + "_blocks_shape")}, {}, c.Name(tag + "_blocks"));
      y = b.Op("BatchMatMul", {ConstOf(c, w, tag + "_weights"), blocks}, {}, c.Name(tag));
    }
    dims[ua] = out;
    y = b.Op("Reshape", {y, ConstOf(c, Int64s(dims), tag + "_shape")}, {}, c.Name(tag + "_resized"));
  }
  c.SetOut(0, Op(c, "Identity", {y}));
  return Status();
}

// --- TopK, GatherElements, ScatterElements, NonZero --------------------------------------

Status TopK(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  Output k;
  if (c.opset() < 10) {
    if (!c.HasAttr("k")) return c.Error("needs attr 'k'");
    k = ConstOf(c, Tensor::Scalar<int64_t>(c.Int("k", 0)), "k");
  } else if (const Tensor known = c.Known(1); known.valid()) {
    WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> kv, c.KnownInts(1, "K"));
    if (kv.size() != 1) return c.Error("K must have one value, got ", kv.size());
    k = ConstOf(c, Tensor::Scalar<int64_t>(kv[0]), "k");
  } else {
    WEFT_ASSIGN_OR_RETURN(Output kin, c.In(1));
    WEFT_ASSIGN_OR_RETURN(k, ScalarI64(c, kin, "K"));
  }
  std::vector<Output> outs = c.b().AddNode("TopK", {x, k},
                                           {{"axis", AttrValue(c.Int("axis", -1))},
                                            {"largest", AttrValue(c.Int("largest", 1) != 0)},
                                            {"sorted", AttrValue(c.Int("sorted", 1) != 0)}},
                                           c.Name());
  if (outs.size() != 2) return c.b().status();
  c.SetOut(0, outs[0]);
  c.SetOut(1, outs[1]);
  return Status();
}

Status GatherElements(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output data, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output indices, c.In(1));
  c.SetOut(0, Op(c, "GatherElements", {data, indices}, {{"axis", AttrValue(c.Int("axis", 0))}}));
  return Status();
}

// ScatterElements, and Scatter (opsets 9 and 10), its older name.
Status ScatterElements(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output data, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output indices, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output updates, c.In(2));
  const std::string reduction = c.Str("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul") {
    return c.Unsupported("reduction ", Quote(reduction), " (Weft has none, add and mul)");
  }
  c.SetOut(0, Op(c, "ScatterElements", {data, indices, updates},
                 {{"axis", AttrValue(c.Int("axis", 0))}, {"reduction", AttrValue(reduction)}}));
  return Status();
}

Status NonZero(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "NonZero", {x}));
  return Status();
}

Conv BuildConverters() {
  Conv t;
  const std::pair<const char*, const char*> unary[] = {
      {"Relu", "Relu"},      {"Sigmoid", "Sigmoid"},   {"Tanh", "Tanh"},
      {"Exp", "Exp"},        {"Log", "Log"},           {"Abs", "Abs"},
      {"Neg", "Neg"},        {"Sqrt", "Sqrt"},         {"Reciprocal", "Reciprocal"},
      {"Floor", "Floor"},    {"Ceil", "Ceil"},         {"Sin", "Sin"},
      {"Cos", "Cos"},        {"Erf", "Erf"},           {"Round", "Round"},
      {"Sign", "Sign"},      {"Softplus", "Softplus"}, {"IsNaN", "IsNan"},
      {"Not", "LogicalNot"},
  };
  for (const auto& [onnx_op, weft_op] : unary) {
    const std::string w = weft_op;
    t[onnx_op] = [w](NodeContext& c) { return Unary(c, w); };
  }
  const std::pair<const char*, const char*> binary[] = {
      {"Pow", ""},
      {"Equal", "Equal"},
      {"Less", "Less"},
      {"Greater", "Greater"},
      {"LessOrEqual", "LessEqual"},
      {"GreaterOrEqual", "GreaterEqual"},
      {"And", "LogicalAnd"},
      {"Or", "LogicalOr"},
      {"Xor", "NotEqual"},
  };
  for (const auto& [onnx_op, weft_op] : binary) {
    const std::string w = weft_op;
    if (!w.empty()) t[onnx_op] = [w](NodeContext& c) { return Binary(c, w); };
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    const std::string w = op;
    t[op] = [w](NodeContext& c) { return Arith(c, w); };
  }
  t["Pow"] = Pow;
  t["Mod"] = Mod;
  t["Sum"] = [](NodeContext& c) { return Variadic(c, "Add", false); };
  t["Max"] = [](NodeContext& c) { return Variadic(c, "Maximum", false); };
  t["Min"] = [](NodeContext& c) { return Variadic(c, "Minimum", false); };
  t["Mean"] = [](NodeContext& c) { return Variadic(c, "Add", true); };
  t["LeakyRelu"] = LeakyRelu;
  t["PRelu"] = PRelu;
  t["Elu"] = Elu;
  t["Selu"] = Selu;
  t["HardSigmoid"] = [](NodeContext& c) { return HardSigmoid(c, false); };
  t["HardSwish"] = [](NodeContext& c) { return HardSigmoid(c, true); };
  t["Softsign"] = Softsign;
  t["Clip"] = Clip;
  t["Cast"] = Cast;
  t["IsInf"] = IsInf;
  t["MatMul"] = MatMul;
  t["Gemm"] = Gemm;
  t["Conv"] = ConvOp;
  t["MaxPool"] = [](NodeContext& c) { return Pool(c, true); };
  t["AveragePool"] = [](NodeContext& c) { return Pool(c, false); };
  t["GlobalAveragePool"] = [](NodeContext& c) { return GlobalPool(c, "Mean"); };
  t["GlobalMaxPool"] = [](NodeContext& c) { return GlobalPool(c, "Max"); };
  t["BatchNormalization"] = BatchNorm;
  t["InstanceNormalization"] = InstanceNorm;
  t["LayerNormalization"] = LayerNormalization;
  t["LRN"] = Lrn;
  t["Softmax"] = [](NodeContext& c) { return SoftmaxOp(c, "Softmax"); };
  t["LogSoftmax"] = [](NodeContext& c) { return SoftmaxOp(c, "LogSoftmax"); };
  t["Flatten"] = Flatten;
  t["Reshape"] = Reshape;
  t["Transpose"] = Transpose;
  t["Unsqueeze"] = Unsqueeze;
  t["Squeeze"] = Squeeze;
  t["Concat"] = Concat;
  t["Shape"] = ShapeOp;
  t["Size"] = Size;
  t["Gather"] = Gather;
  t["Slice"] = Slice;
  t["Split"] = SplitOp;
  t["Constant"] = ConstantOp;
  t["ConstantOfShape"] = ConstantOfShape;
  t["Expand"] = Expand;
  t["Tile"] = Tile;
  t["Pad"] = PadOp;
  t["Where"] = [](NodeContext& c) { return Direct(c, "Select", 3); };
  t["Range"] = [](NodeContext& c) { return Direct(c, "Range", 3); };
  t["CumSum"] = CumSum;
  t["ReduceMean"] = [](NodeContext& c) { return Reduce(c, "Mean"); };
  t["ReduceSum"] = [](NodeContext& c) { return Reduce(c, "Sum"); };
  t["ReduceMax"] = [](NodeContext& c) { return Reduce(c, "Max"); };
  t["ReduceMin"] = [](NodeContext& c) { return Reduce(c, "Min"); };
  t["ReduceProd"] = [](NodeContext& c) { return Reduce(c, "Prod"); };
  t["ReduceL1"] = [](NodeContext& c) { return Reduce(c, "L1"); };
  t["ReduceL2"] = [](NodeContext& c) { return Reduce(c, "L2"); };
  t["ReduceSumSquare"] = [](NodeContext& c) { return Reduce(c, "SumSquare"); };
  t["ReduceLogSum"] = [](NodeContext& c) { return Reduce(c, "LogSum"); };
  t["ReduceLogSumExp"] = [](NodeContext& c) { return Reduce(c, "LogSumExp"); };
  t["ArgMax"] = [](NodeContext& c) { return ArgOp(c, "ArgMax"); };
  t["ArgMin"] = [](NodeContext& c) { return ArgOp(c, "ArgMin"); };
  t["Identity"] = Identity;
  t["Dropout"] = Dropout;
  t["LSTM"] = Lstm;
  t["GRU"] = [](NodeContext& c) { return Recurrent(c, "GRU", 3); };
  t["RNN"] = [](NodeContext& c) { return Recurrent(c, "RNN", 1); };
  t["If"] = IfOp;
  t["Loop"] = LoopOp;
  t["Scan"] = ScanOp;
  t["Einsum"] = Einsum;
  t["Resize"] = Resize;
  t["TopK"] = TopK;
  t["GatherElements"] = GatherElements;
  t["ScatterElements"] = ScatterElements;
  t["Scatter"] = ScatterElements;
  t["NonZero"] = NonZero;
  return t;
}

}  // namespace

const std::map<std::string, Converter, std::less<>>& Converters() {
  static const Conv* table = new Conv(BuildConverters());
  return *table;
}

}  // namespace weft::onnx_io
