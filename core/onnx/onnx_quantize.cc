// ONNX's quantization operators composed of Weft ops: QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
// QLinearMatMul, QLinearConv. Integer products accumulate exactly (i32
// MatMul; convolutions in f64, exact below 2^53), and requantization
// rounds half to even and saturates as ONNX defines (the conventions are
// in core/onnx/converters.h). Int8 kernels of their own are the edge
// work's (docs/onnx.md).
#include <optional>

#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// A scale or zero point |v| of input |i| laid along |axis| of a rank-|rank|
// tensor: a 1-D value of more than one element becomes [1, .., n, .., 1].
Expected<Output> AlongAxis(NodeContext& c, const Output& v, int i, int rank, std::string_view what) {
  const Shape s = c.InShape(i);
  if (s.rank() <= 0 || (s.rank() == 1 && s.dim(0) == 1)) return v;
  if (s.rank() != 1) return c.Error(what, " must be a scalar or 1-D, got ", s.ToString());
  if (rank < 0) return c.Unsupported("per-axis ", what, " on an input of unknown rank");
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 1), rank, "attr 'axis'"));
  std::vector<int64_t> dims(static_cast<std::size_t>(rank), 1);
  dims[static_cast<std::size_t>(axis)] = -1;
  return Op(c, "Reshape", {v, ConstOf(c, Int64s(dims), StrCat(what, "_shape"))}, {}, StrCat(what, "_along_axis"));
}

Output CastTo(NodeContext& c, const Output& x, DType to, std::string_view name) {
  return x.dtype() == to ? x : Op(c, "Cast", {x}, {{"DstT", AttrValue(to)}}, name);
}

// round(x) + zero_point, saturated to |to| (u8 or i8) and cast; |x| and
// |zero_point| (already f32) broadcast.
Expected<Output> Saturate(NodeContext& c, const Output& x, const Output& zero_point, DType to, std::string_view name) {
  if (to != DType::kU8 && to != DType::kI8) {
    return c.Unsupported("quantizing to ", DTypeName(to), " (ONNX's uint8 and int8 are supported)");
  }
  const auto [lo, hi] = DTypeRange(to);
  WEFT_ASSIGN_OR_RETURN(Output qlo, ScalarLike(c, x.dtype(), lo, StrCat(name, "_min")));
  WEFT_ASSIGN_OR_RETURN(Output qhi, ScalarLike(c, x.dtype(), hi, StrCat(name, "_max")));
  Output shifted =
      Op(c, "Add", {Op(c, "Round", {x}, {}, StrCat(name, "_rounded")), zero_point}, {}, StrCat(name, "_shifted"));
  return CastTo(c, Op(c, "ClipByValue", {shifted, qlo, qhi}, {}, StrCat(name, "_saturated")), to, name);
}

// The zero point of input |i| as f32 laid along the axis, or 0; its dtype
// (u8 when absent) in |dtype|.
Expected<Output> ZeroPoint(NodeContext& c, int i, int rank, DType* dtype, std::string_view what) {
  if (!c.has_input(i)) {
    if (dtype != nullptr) *dtype = DType::kU8;
    return ConstOf(c, Tensor::Scalar<float>(0.0f), what);
  }
  WEFT_ASSIGN_OR_RETURN(Output zp, c.In(i));
  if (dtype != nullptr) *dtype = zp.dtype();
  return AlongAxis(c, CastTo(c, zp, DType::kF32, StrCat(what, "_f32")), i, rank, what);
}

Status QuantizeLinear(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const int rank = c.InShape(0).rank();
  WEFT_ASSIGN_OR_RETURN(Output scale, c.In(1));
  WEFT_ASSIGN_OR_RETURN(scale, AlongAxis(c, CastTo(c, scale, DType::kF32, "scale_f32"), 1, rank, "scale"));
  DType to = DType::kU8;
  WEFT_ASSIGN_OR_RETURN(Output zp, ZeroPoint(c, 2, rank, &to, "zero_point"));
  Output scaled = Op(c, "Div", {CastTo(c, x, DType::kF32, "x_f32"), scale}, {}, "scaled");
  WEFT_ASSIGN_OR_RETURN(Output y, Saturate(c, scaled, zp, to, "y"));
  c.SetOut(0, Op(c, "Identity", {y}));
  return Status();
}

Status DequantizeLinear(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const int rank = c.InShape(0).rank();
  WEFT_ASSIGN_OR_RETURN(Output scale, c.In(1));
  WEFT_ASSIGN_OR_RETURN(scale, AlongAxis(c, scale, 1, rank, "scale"));
  WEFT_ASSIGN_OR_RETURN(Output zp, ZeroPoint(c, 2, rank, nullptr, "zero_point"));
  Output centered = Op(c, "Sub", {CastTo(c, x, DType::kF32, "x_f32"), zp}, {}, "centered");
  c.SetOut(0, Op(c, "Mul", {centered, CastTo(c, scale, DType::kF32, "scale_f32")}));
  return Status();
}

// y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point =
// saturate(round(-min / y_scale)), y = saturate(round(x / y_scale) + zp).
Status DynamicQuantizeLinear(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  if (x.dtype() != DType::kF32) return c.Error("input must be float32, got ", DTypeName(x.dtype()));
  Output zero = ConstOf(c, Tensor::Scalar<float>(0.0f), "zero");
  Output lo = Op(c, "Minimum", {Op(c, "Min", {x}, {}, "min"), zero}, {}, "range_min");
  Output hi = Op(c, "Maximum", {Op(c, "Max", {x}, {}, "max"), zero}, {}, "range_max");
  Output scale = Op(c, "Div", {Op(c, "Sub", {hi, lo}, {}, "range"), ConstOf(c, Tensor::Scalar<float>(255.0f), "qmax")},
                    {}, "y_scale");
  Output zp_f = Op(c, "Div", {Op(c, "Neg", {lo}, {}, "minus_min"), scale}, {}, "zero_point_exact");
  WEFT_ASSIGN_OR_RETURN(Output zp, Saturate(c, zp_f, zero, DType::kU8, "y_zero_point"));
  WEFT_ASSIGN_OR_RETURN(Output y, Saturate(c, Op(c, "Div", {x, scale}, {}, "scaled"),
                                           CastTo(c, zp, DType::kF32, "zero_point_f32"), DType::kU8, "y"));
  c.SetOut(0, Op(c, "Identity", {y}));
  if (c.has_output(1)) c.SetOut(1, Op(c, "Identity", {scale}, {}, "scale_out"));
  if (c.has_output(2)) c.SetOut(2, Op(c, "Identity", {zp}, {}, "zero_point_out"));
  return Status();
}

// |x| minus its zero point (input |zp_input|, scalar or along |axis| of
// |rank|; for MatMulInteger's a, per row), as |to|.
Expected<Output> Centered(NodeContext& c, int x_input, int zp_input, DType to, std::string_view what,
                          std::optional<int> zp_axis = std::nullopt) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(x_input));
  Output v = CastTo(c, x, to, StrCat(what, "_wide"));
  if (!c.has_input(zp_input)) return v;
  WEFT_ASSIGN_OR_RETURN(Output zp, c.In(zp_input));
  zp = CastTo(c, zp, to, StrCat(what, "_zero_point_wide"));
  const Shape zs = c.InShape(zp_input);
  if (zp_axis.has_value() && zs.rank() == 1 && zs.dim(0) != 1) {
    std::vector<int64_t> dims = {-1, 1};  // per row of a: [M, 1]
    zp = Op(c, "Reshape", {zp, ConstOf(c, Int64s(dims), StrCat(what, "_zp_shape"))}, {}, StrCat(what, "_zp_rows"));
  }
  return Op(c, "Sub", {v, zp}, {}, StrCat(what, "_centered"));
}

// The i32 product of two centered integer matrices (MatMul or BatchMatMul).
Output IntegerMatMul(NodeContext& c, const Output& a, const Output& b, std::string_view name) {
  const bool batched = a.shape().rank() > 2 || b.shape().rank() > 2;
  return Op(c, batched ? "BatchMatMul" : "MatMul", {a, b}, {}, name);
}

Status MatMulInteger(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output a, Centered(c, 0, 2, DType::kI32, "a", 0));
  WEFT_ASSIGN_OR_RETURN(Output b, Centered(c, 1, 3, DType::kI32, "b"));
  c.SetOut(0, IntegerMatMul(c, a, b, ""));
  return Status();
}

Status QLinearMatMul(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output a, Centered(c, 0, 2, DType::kI32, "a"));
  WEFT_ASSIGN_OR_RETURN(Output b, Centered(c, 3, 5, DType::kI32, "b"));
  Output acc = CastTo(c, IntegerMatMul(c, a, b, "acc"), DType::kF32, "acc_f32");
  WEFT_ASSIGN_OR_RETURN(Output as, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output bs, c.In(4));
  WEFT_ASSIGN_OR_RETURN(Output ys, c.In(6));
  Output multiplier = Op(c, "Div", {Op(c, "Mul", {as, bs}, {}, "ab_scale"), ys}, {}, "multiplier");
  DType to = DType::kU8;
  WEFT_ASSIGN_OR_RETURN(Output zp, ZeroPoint(c, 7, -1, &to, "y_zero_point"));
  WEFT_ASSIGN_OR_RETURN(Output y, Saturate(c, Op(c, "Mul", {acc, multiplier}, {}, "scaled"), zp, to, "y"));
  c.SetOut(0, Op(c, "Identity", {y}));
  return Status();
}

// A convolution of NCHW |x| with OIHW |w| (both f64), group 1, explicit
// pads, run channels-last: the exact integer accumulation of ConvInteger
// and QLinearConv.
Expected<Output> ConvF64(NodeContext& c, const Output& x, const Output& w) {
  if (c.Int("group", 1) != 1) return c.Unsupported("grouped ", c.node().op_type());
  if (c.Str("auto_pad", "NOTSET") != "NOTSET") return c.Unsupported(c.node().op_type(), " with auto_pad");
  if (x.shape().rank() != 4) return c.Unsupported(c.node().op_type(), " of an input of rank ", x.shape().rank());
  const std::vector<int64_t> strides = c.Ints("strides", {1, 1}), dilations = c.Ints("dilations", {1, 1});
  const std::vector<int64_t> pads = c.Ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dilations.size() != 2 || pads.size() != 4) {
    return c.Error("attrs strides and dilations need 2 entries and pads 4");
  }
  Output nhwc = Op(c, "Transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 3, 1})}}, "x_nhwc");
  const std::vector<int64_t> paddings = {0, 0, pads[0], pads[2], pads[1], pads[3], 0, 0};
  nhwc = Op(c, "Pad", {nhwc}, {{"paddings", AttrValue(paddings)}}, "x_padded");
  Output hwio = Op(c, "Transpose", {w}, {{"perm", AttrValue(std::vector<int64_t>{2, 3, 1, 0})}}, "w_hwio");
  Output y = Op(c, "Conv2D", {nhwc, hwio},
                {{"strides", AttrValue(std::vector<int64_t>{1, strides[0], strides[1], 1})},
                 {"dilations", AttrValue(std::vector<int64_t>{1, dilations[0], dilations[1], 1})},
                 {"padding", AttrValue(std::string("VALID"))},
                 {"data_format", AttrValue(std::string("NHWC"))}},
                "conv");
  return Op(c, "Transpose", {y}, {{"perm", AttrValue(std::vector<int64_t>{0, 3, 1, 2})}}, "conv_nchw");
}

Status ConvInteger(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, Centered(c, 0, 2, DType::kF64, "x"));
  WEFT_ASSIGN_OR_RETURN(Output w, Centered(c, 1, 3, DType::kF64, "w"));
  WEFT_ASSIGN_OR_RETURN(Output y, ConvF64(c, x, w));
  c.SetOut(0, CastTo(c, y, DType::kI32, ""));
  return Status();
}

Status QLinearConv(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, Centered(c, 0, 2, DType::kF64, "x"));
  WEFT_ASSIGN_OR_RETURN(Output w, Centered(c, 3, 5, DType::kF64, "w"));
  WEFT_ASSIGN_OR_RETURN(Output acc, ConvF64(c, x, w));
  if (c.has_input(8)) {
    WEFT_ASSIGN_OR_RETURN(Output bias, c.In(8));
    acc = Op(c, "BiasAdd", {acc, CastTo(c, bias, DType::kF64, "bias_f64")},
             {{"data_format", AttrValue(std::string("NCHW"))}}, "biased");
  }
  WEFT_ASSIGN_OR_RETURN(Output xs, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output ws, c.In(4));
  WEFT_ASSIGN_OR_RETURN(Output ys, c.In(6));
  WEFT_ASSIGN_OR_RETURN(ws, AlongAxis(c, ws, 4, 4, "w_scale"));
  Output multiplier = Op(c, "Div", {Op(c, "Mul", {xs, ws}, {}, "xw_scale"), ys}, {}, "multiplier");
  DType to = DType::kU8;
  WEFT_ASSIGN_OR_RETURN(Output zp, ZeroPoint(c, 7, -1, &to, "y_zero_point"));
  Output scaled = Op(c, "Mul", {CastTo(c, acc, DType::kF32, "acc_f32"), multiplier}, {}, "scaled");
  WEFT_ASSIGN_OR_RETURN(Output y, Saturate(c, scaled, zp, to, "y"));
  c.SetOut(0, Op(c, "Identity", {y}));
  return Status();
}

}  // namespace

void AddQuantizeConverters(ConverterTable& t) {
  t["QuantizeLinear"] = QuantizeLinear;
  t["DequantizeLinear"] = DequantizeLinear;
  t["DynamicQuantizeLinear"] = DynamicQuantizeLinear;
  t["MatMulInteger"] = MatMulInteger;
  t["ConvInteger"] = ConvInteger;
  t["QLinearMatMul"] = QLinearMatMul;
  t["QLinearConv"] = QLinearConv;
}

}  // namespace weft::onnx_io::convert
