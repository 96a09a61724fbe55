// int8 quantization (docs/quantization.md): QuantizeLinear and
// DequantizeLinear, which graphs and ONNX's QDQ models write, and the
// quantized convolution and product the graph optimizer makes of a
// dequantize-op-quantize pattern (_QConv2D, _QMatMul).
//
// A quantized value q stands for the real value (q - zero_point) * scale.
// QuantizeLinear rounds half to even and saturates, as ONNX defines.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// Checks a scale and zero point (inputs 1 and 2) against the quantized or
// real tensor (input 0): scalars, or 1-D vectors along 'axis'.
Status QuantParamsShape(InferenceContext& c) {
  const Shape& x = c.input_shape(0);
  const Shape& scale = c.input_shape(1);
  const Shape& zero_point = c.input_shape(2);
  if (!scale.unknown_rank() && scale.rank() > 1)
    return c.Error("the scale must be a scalar or 1-D, got ", scale.ToString());
  if (!scale.unknown_rank() && !zero_point.unknown_rank() && !scale.IsCompatibleWith(zero_point)) {
    return c.Error("the zero point has shape ", zero_point.ToString(), " but the scale ", scale.ToString(),
                   "; they must agree");
  }
  if (!scale.unknown_rank() && scale.rank() == 1 && !x.unknown_rank() && scale.dim(0) != 1) {
    const int64_t axis = c.Int("axis");
    if (axis < -x.rank() || axis >= x.rank()) {
      return c.Error("axis ", axis, " is out of range for an input of rank ", x.rank());
    }
    const int64_t along = x.dim(static_cast<int>(axis < 0 ? axis + x.rank() : axis));
    if (along >= 0 && scale.dim(0) >= 0 && along != scale.dim(0)) {
      return c.Error("the scale has ", scale.dim(0), " elements but axis ", axis, " of the input ", x.ToString(),
                     " has ", along);
    }
  }
  c.set_output(0, x);
  return Status();
}

// The optional bias and residual of a quantized op (the last inputs: Nb
// biases, then Nr residuals) against its output |out|, channels on axis
// |channel|; and the per-channel weight scales, |channels| of them (or
// one).
Status CheckQuantizedArgs(InferenceContext& c, const Shape& out, int channel, const char* scales_attr,
                          int64_t channels) {
  const int64_t nb = c.Int("Nb"), nr = c.Int("Nr");
  if (nb > 1 || nr > 1) return c.Error("Nb and Nr are 0 or 1, got ", nb, " and ", nr);
  const int64_t out_channels = out.unknown_rank() ? -1 : out.dim(channel);
  if (nb == 1) {
    const Shape& b = c.input_shape(2);
    if (!b.unknown_rank() && b.rank() != 1) return c.Error("the bias must be 1-D, got ", b.ToString());
    if (!b.unknown_rank() && out_channels >= 0 && b.dim(0) >= 0 && b.dim(0) != out_channels) {
      return c.Error("the bias has ", b.dim(0), " elements but the output has ", out_channels, " channels");
    }
  }
  if (nr == 1) {
    const Shape& r = c.input_shape(static_cast<int>(2 + nb));
    if (!r.IsCompatibleWith(out))
      return c.Error("the residual has shape ", r.ToString(), ", the output ", out.ToString());
  }
  const std::size_t scales = c.Get(scales_attr).get<std::vector<double>>().size();
  if (scales != 1 && channels >= 0 && static_cast<int64_t>(scales) != channels) {
    return c.Error(scales_attr, " has ", scales, " entries; it needs 1 or one per output channel (", channels, ")");
  }
  for (const char* attr : {"input_scale", "output_scale", "residual_scale"}) {
    if (!(c.Float(attr) > 0)) return c.Error(attr, " must be positive, got ", c.Float(attr));
  }
  for (double s : c.Get(scales_attr).get<std::vector<double>>()) {
    if (!(s > 0)) return c.Error(scales_attr, " must all be positive, got ", s);
  }
  return Status();
}

Status QConvShape(InferenceContext& c) {
  const bool depthwise = c.Bool("depthwise");
  WEFT_ASSIGN_OR_RETURN(Shape out, PaddedConvOutput(c, depthwise));
  const Shape& filter = c.input_shape(1);
  const Layout l = LayoutOf(c.String("data_format"));
  int64_t channels = -1;
  if (!filter.unknown_rank() && filter.dim(2) >= 0 && filter.dim(3) >= 0) {
    channels = depthwise ? filter.dim(2) * filter.dim(3) : filter.dim(3);
  }
  WEFT_RETURN_IF_ERROR(CheckQuantizedArgs(c, out, l.c, "filter_scales", channels));
  c.set_output(0, std::move(out));
  return Status();
}

Status QMatMulShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(const Shape out, MatrixProductOutput(c, false, c.Bool("transpose_b")));
  const int64_t n = out.dim(1);
  WEFT_RETURN_IF_ERROR(CheckQuantizedArgs(c, out, 1, "b_scales", n));
  c.set_output(0, out);
  return Status();
}

// What _QConv2D and _QMatMul share: the input's and output's quantization,
// the optional residual's, and the activation.
OpDefBuilder& QuantizedCommon(OpDefBuilder& b) {
  return b.Attr("Tin: {i8, u8}")
      .Attr("Tout: {i8, u8, f32}")
      .Attr("Tres: {i8, u8, f32} = 'f32'")
      .Attr("Nb: int >= 0 = 0")
      .Attr("Nr: int >= 0 = 0")
      .Attr("input_scale: float = 1")
      .Attr("input_zero_point: int = 0")
      .Attr("output_scale: float = 1")
      .Attr("output_zero_point: int = 0")
      .Attr("residual_scale: float = 1")
      .Attr("residual_zero_point: int = 0")
      .Attr("activation: {'None', 'Relu', 'Relu6', 'Clip'} = 'None'")
      .Attr("alpha: float = 0")
      .Attr("beta: float = 0");
}

constexpr const char* kQuantizedSemantics =
    "The real input is (input - input_zero_point) * input_scale, the real weights (w - 0) * their scale per output "
    "channel (symmetric int8); the product is accumulated exactly in 32-bit integers, scaled to real values, the f32 "
    "bias added (when Nb is 1), then the real residual (residual - residual_zero_point) * residual_scale (when Nr "
    "is 1; an f32 residual as it is), then the activation (Relu; Relu6; Clip to [alpha, beta]); the result is "
    "quantized to Tout by "
    "output_scale and output_zero_point as QuantizeLinear does (Tout f32: the real value). ";

}  // namespace

Status RegisterQuantizeOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("QuantizeLinear")
          .Input("x: f32")
          .Input("scale: f32")
          .Input("zero_point: T")
          .Output("y: T")
          .Attr("T: {i8, u8}")
          .Attr("axis: int = -1")
          .Shape(QuantParamsShape)
          .Doc("y = saturate(round(x / scale) + zero_point): rounding half to even, saturating to T's range, NaN to "
               "zero_point. scale and zero_point are scalars (per tensor) or 1-D along 'axis' (per channel), as "
               "ONNX's QuantizeLinear.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("DequantizeLinear")
                                      .Input("x: T")
                                      .Input("scale: f32")
                                      .Input("zero_point: T")
                                      .Output("y: f32")
                                      .Attr("T: {i8, u8, i32}")
                                      .Attr("axis: int = -1")
                                      .Shape(QuantParamsShape)
                                      .Doc("y = (x - zero_point) * scale, per tensor or per channel along 'axis', "
                                           "as ONNX's DequantizeLinear. The graph optimizer folds it into the "
                                           "quantized op that reads it (docs/quantization.md); constant folding "
                                           "leaves it alone, so that weights stay int8.")));
  OpDefBuilder conv("_QConv2D");
  conv.Input("input: Tin")
      .Input("filter: i8")
      .Input("bias: Nb * f32")
      .Input("residual: Nr * Tres")
      .Output("output: Tout")
      .Attr("strides: list(int) = [1, 1, 1, 1]")
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'} = 'VALID'")
      .Attr("explicit_paddings: list(int) = []")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("dilations: list(int) = [1, 1, 1, 1]")
      .Attr("depthwise: bool = false")
      .Attr("filter_scales: list(float) = [1]");
  QuantizedCommon(conv)
      .Shape(QConvShape)
      .Doc(std::string("A quantized Conv2D (DepthwiseConv2D when 'depthwise'; the filter HWIO, or HWCM with one "
                       "scale per C*M output), with padding as _FusedConv2D. ") +
           kQuantizedSemantics + "Made by the graph optimizer (docs/quantization.md).");
  WEFT_RETURN_IF_ERROR(r.Register(conv));
  OpDefBuilder matmul("_QMatMul");
  matmul.Input("a: Tin")
      .Input("b: i8")
      .Input("bias: Nb * f32")
      .Input("residual: Nr * Tres")
      .Output("product: Tout")
      .Attr("transpose_b: bool = false")
      .Attr("b_scales: list(float) = [1]");
  QuantizedCommon(matmul)
      .Shape(QMatMulShape)
      .Doc(std::string("A quantized MatMul of a [m, k] and b [k, n] ([n, k] with transpose_b), one scale of b per "
                       "column of the product. ") +
           kQuantizedSemantics + "Made by the graph optimizer (docs/quantization.md).");
  WEFT_RETURN_IF_ERROR(r.Register(matmul));
  return Status();
}

}  // namespace weft::ops
