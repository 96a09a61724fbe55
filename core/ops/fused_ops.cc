// The graph optimizer's fused ops (docs/optimizer.md): one op where a graph
// had a convolution or a matrix product followed by a bias, a residual Add
// and an activation. Graphs do not write them; the level-2 fusion passes
// make them where the device that runs the node has a kernel for them, and
// a device plugin offers one by registering a kernel under the op's name
// (docs/plugins.md). They have no gradient: training graphs are fused after
// their gradients are built, and only where no gradient reads an inner
// value.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// The activations a fused op applies last; alpha and beta are LeakyRelu's
// slope and Clip's bounds.
constexpr const char* kActivations =
    "activation: {'None', 'Relu', 'Relu6', 'Clip', 'LeakyRelu', 'Elu', 'Sigmoid', 'Tanh', 'Swish', 'Gelu', "
    "'GeluTanh'} = 'None'";

// Checks the fused args (bias, then residual) against the output |out| with
// its channels on axis |channel|.
Status CheckFusedArgs(InferenceContext& c, const Shape& out, int channel) {
  const bool bias = c.Bool("bias"), residual = c.Bool("residual");
  const int n = static_cast<int>(c.Int("N"));
  if (n != static_cast<int>(bias) + static_cast<int>(residual)) {
    return c.Error("N is ", n, " but bias and residual ask for ", static_cast<int>(bias) + static_cast<int>(residual),
                   " args");
  }
  int next = c.num_inputs() - n;
  if (bias) {
    const Shape& b = c.input_shape(next++);
    if (!b.unknown_rank() && b.rank() != 1) return c.Error("the bias must be 1-D, got ", b.ToString());
    const int64_t channels = out.unknown_rank() ? -1 : out.dim(channel);
    if (!b.unknown_rank() && channels >= 0 && b.dim(0) >= 0 && b.dim(0) != channels) {
      return c.Error("the bias has ", b.dim(0), " elements but the output has ", channels, " channels");
    }
  }
  if (residual && !c.input_shape(next).IsCompatibleWith(out)) {
    return c.Error("the residual has shape ", c.input_shape(next).ToString(), ", the output ", out.ToString());
  }
  return Status();
}

Status FusedConvShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(Shape out, PaddedConvOutput(c, c.Bool("depthwise")));
  const Layout l = LayoutOf(c.String("data_format"));
  WEFT_RETURN_IF_ERROR(CheckFusedArgs(c, out, l.c));
  c.set_output(0, std::move(out));
  return Status();
}

Status FusedMatMulShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(const Shape out, MatrixProductOutput(c, c.Bool("transpose_a"), c.Bool("transpose_b")));
  WEFT_RETURN_IF_ERROR(CheckFusedArgs(c, out, 1));
  c.set_output(0, out);
  return Status();
}

}  // namespace

Status RegisterFusedOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("_FusedConv2D")
          .Input("input: T")
          .Input("filter: T")
          .Input("args: N * T")
          .Output("output: T")
          .Attr("T: {f32}")
          .Attr("N: int >= 0")
          .Attr("strides: list(int) = [1, 1, 1, 1]")
          .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'} = 'VALID'")
          .Attr("explicit_paddings: list(int) = []")
          .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
          .Attr("dilations: list(int) = [1, 1, 1, 1]")
          .Attr("depthwise: bool = false")
          .Attr("bias: bool = false")
          .Attr("residual: bool = false")
          .Attr(kActivations)
          .Attr("alpha: float = 0")
          .Attr("beta: float = 0")
          .Attr("constant_filter: bool = false")
          .Attr("winograd: bool = false")
          .Shape(FusedConvShape)
          .Doc("Conv2D (DepthwiseConv2D when 'depthwise'), then, in this order: BiasAdd of args[0] when 'bias'; "
               "Add of the next arg (the output's shape) when 'residual'; the activation (LeakyRelu's slope is "
               "alpha, Clip's bounds alpha and beta; Swish is x * Sigmoid(x)). padding EXPLICIT pads the input with "
               "zeros by explicit_paddings (top, bottom, left, right) and then convolves VALID. 'constant_filter' "
               "promises that the filter's buffer never changes its values, so a kernel may keep its own copy in "
               "another layout. 'winograd' allows a kernel to compute a 3x3 convolution of stride 1 by Winograd's "
               "minimal filtering (fewer multiplications; results differ from the direct sum by about 1e-6 of the "
               "output's largest magnitude). "
               "Made by the graph optimizer (docs/optimizer.md).")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("_FusedMatMul")
                                      .Input("a: T")
                                      .Input("b: T")
                                      .Input("args: N * T")
                                      .Output("product: T")
                                      .Attr("T: {f32}")
                                      .Attr("N: int >= 0")
                                      .Attr("transpose_a: bool = false")
                                      .Attr("transpose_b: bool = false")
                                      .Attr("bias: bool = false")
                                      .Attr("residual: bool = false")
                                      .Attr(kActivations)
                                      .Attr("alpha: float = 0")
                                      .Attr("beta: float = 0")
                                      .Attr("constant_b: bool = false")
                                      .Shape(FusedMatMulShape)
                                      .Doc("MatMul, then BiasAdd of args[0] when 'bias', Add of the next arg (the "
                                           "product's shape) when 'residual', and the activation, as _FusedConv2D. "
                                           "'constant_b' promises that b's buffer never changes its values, as "
                                           "_FusedConv2D's 'constant_filter'. Made by the graph optimizer "
                                           "(docs/optimizer.md).")));
  return Status();
}

}  // namespace weft::ops
