// The backward ops of the neural-network family, which the symbolic
// gradients (core/grad/nn_grad.cc) emit: convolution and depthwise
// convolution backprop to the input and the filter, MaxPoolGrad,
// AvgPoolGrad, BiasAddGrad, FusedBatchNormGrad, LayerNormGrad and
// LSTMCellGrad.
//
// Their shape functions check every input against the forward op they
// differentiate: the gradient arriving must have the shape the forward op
// gives for the input shape named (a *_sizes input, when it is a Const) or
// passed, so a mismatch is reported while the graph is built.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// The window geometry below is the forward ops' (nn_ops.cc), so that a
// backward op accepts exactly the shapes its forward op produces.

std::size_t At(int i) { return static_cast<std::size_t>(i); }

// Checks that input |i| is rank 4 (or of unknown rank); |what| names it.
Status CheckRank4(InferenceContext& c, int i, const char* what) {
  const Shape& s = c.input_shape(i);
  if (!s.unknown_rank() && s.rank() != 4) return c.Error(what, " must have rank 4, got ", s.ToString());
  return Status();
}

// The shape a 1-D *_sizes input |i| names: its values when it is a Const,
// otherwise four unknown dims. The input must hold 4 entries, none
// negative.
Expected<Shape> SizesInput(InferenceContext& c, int i, const char* what) {
  const Shape& s = c.input_shape(i);
  if (!s.unknown_rank() && (s.rank() != 1 || (s.dim(0) >= 0 && s.dim(0) != 4))) {
    return c.Error(what, " must be a 1-D tensor of 4 elements, got shape ", s.ToString());
  }
  const std::optional<std::vector<int64_t>> values = ConstIntVector(c, i);
  if (!values) return Shape::UnknownDims(4);
  for (int64_t d : *values) {
    if (d < 0) return c.Error(what, " ", ListString(*values), " has a negative entry");
  }
  return Shape(*values);
}

// The rank-4 shape |s| (or four unknown dims when its rank is unknown).
Shape Rank4(const Shape& s) { return s.unknown_rank() ? Shape::UnknownDims(4) : s; }

// An error unless the known dims of |got| equal those of |want|.
Status CheckCompatible(InferenceContext& c, const char* what, const Shape& got, const Shape& want,
                       const std::string& because) {
  if (got.IsCompatibleWith(want)) return Status();
  return c.Error(what, " has shape ", got.ToString(), ", but ", because, " gives ", want.ToString());
}

// --- Convolution ------------------------------------------------------------------

// Conv2DBackpropInput / DepthwiseConv2DBackpropInput (|to_filter| false:
// inputs input_sizes, filter, out_backprop) and the *BackpropFilter ops
// (true: input, filter_sizes, out_backprop).
Status ConvBackpropShape(InferenceContext& c, bool depthwise, bool to_filter) {
  const Layout l = LayoutOf(c.String("data_format"));
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "strides", c.Ints("strides"), l));
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "dilations", c.Ints("dilations"), l));
  Shape in, filter;
  if (to_filter) {
    WEFT_RETURN_IF_ERROR(CheckRank4(c, 0, "input"));
    in = Rank4(c.input_shape(0));
    WEFT_ASSIGN_OR_RETURN(filter, SizesInput(c, 1, "filter_sizes"));
  } else {
    WEFT_ASSIGN_OR_RETURN(in, SizesInput(c, 0, "input_sizes"));
    WEFT_RETURN_IF_ERROR(CheckRank4(c, 1, "filter"));
    filter = Rank4(c.input_shape(1));
  }
  WEFT_RETURN_IF_ERROR(CheckRank4(c, 2, "out_backprop"));
  const Shape dy = Rank4(c.input_shape(2));
  WEFT_ASSIGN_OR_RETURN(Shape forward, ConvOutput(c, in, filter, depthwise));
  WEFT_RETURN_IF_ERROR(CheckCompatible(c, "out_backprop", dy, forward,
                                       StrCat(depthwise ? "DepthwiseConv2D" : "Conv2D", " of an input ", in.ToString(),
                                              " with a filter ", filter.ToString())));
  // What the sizes input does not say, the other inputs may.
  if (to_filter) {
    if (filter.dim(2) < 0) filter.set_dim(2, in.dim(l.c));
    if (!depthwise && filter.dim(3) < 0) filter.set_dim(3, dy.dim(l.c));
    c.set_output(0, filter);
  } else {
    if (in.dim(l.n) < 0) in.set_dim(l.n, dy.dim(l.n));
    if (in.dim(l.c) < 0) in.set_dim(l.c, filter.dim(2));
    c.set_output(0, in);
  }
  return Status();
}

// --- Pooling ----------------------------------------------------------------------

// The forward pooling's output shape for an input |in| (rank 4).
Expected<Shape> PoolOutput(InferenceContext& c, const Shape& in) {
  const Layout l = LayoutOf(c.String("data_format"));
  const auto& ksize = c.Ints("ksize");
  const auto& strides = c.Ints("strides");
  const std::string& padding = c.String("padding");
  auto h = WindowOutput(in.dim(l.h), ksize[At(l.h)], strides[At(l.h)], 1, padding);
  if (!h.ok()) return c.Error("height: ", h.status().message());
  auto w = WindowOutput(in.dim(l.w), ksize[At(l.w)], strides[At(l.w)], 1, padding);
  if (!w.ok()) return c.Error("width: ", w.status().message());
  Shape out = in;
  out.set_dim(l.h, *h);
  out.set_dim(l.w, *w);
  return out;
}

Status CheckPoolAttrs(InferenceContext& c) {
  const Layout l = LayoutOf(c.String("data_format"));
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "ksize", c.Ints("ksize"), l));
  return CheckWindowAttr(c, "strides", c.Ints("strides"), l);
}

Status MaxPoolGradShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(CheckPoolAttrs(c));
  WEFT_RETURN_IF_ERROR(CheckRank4(c, 0, "orig_input"));
  WEFT_RETURN_IF_ERROR(CheckRank4(c, 1, "orig_output"));
  WEFT_RETURN_IF_ERROR(CheckRank4(c, 2, "grad"));
  const Shape in = Rank4(c.input_shape(0));
  WEFT_ASSIGN_OR_RETURN(Shape forward, PoolOutput(c, in));
  const std::string because = StrCat("MaxPool of orig_input ", in.ToString());
  WEFT_RETURN_IF_ERROR(CheckCompatible(c, "orig_output", Rank4(c.input_shape(1)), forward, because));
  WEFT_RETURN_IF_ERROR(CheckCompatible(c, "grad", Rank4(c.input_shape(2)), forward, because));
  c.set_output(0, in);
  return Status();
}

Status AvgPoolGradShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(CheckPoolAttrs(c));
  WEFT_ASSIGN_OR_RETURN(Shape in, SizesInput(c, 0, "orig_input_shape"));
  WEFT_RETURN_IF_ERROR(CheckRank4(c, 1, "grad"));
  const Shape grad = Rank4(c.input_shape(1));
  WEFT_ASSIGN_OR_RETURN(Shape forward, PoolOutput(c, in));
  WEFT_RETURN_IF_ERROR(CheckCompatible(c, "grad", grad, forward, StrCat("AvgPool of an input ", in.ToString())));
  const Layout l = LayoutOf(c.String("data_format"));
  if (in.dim(l.n) < 0) in.set_dim(l.n, grad.dim(l.n));
  if (in.dim(l.c) < 0) in.set_dim(l.c, grad.dim(l.c));
  c.set_output(0, in);
  return Status();
}

// --- BiasAddGrad, FusedBatchNormGrad, LayerNormGrad --------------------------------

Status BiasAddGradShape(InferenceContext& c) {
  const Shape& dy = c.input_shape(0);
  if (dy.unknown_rank()) {
    c.set_output(0, Shape::UnknownDims(1));
    return Status();
  }
  if (dy.rank() < 2) return c.Error("out_backprop must have rank >= 2, got ", dy.ToString());
  c.set_output(0, Shape{dy.dim(c.String("data_format") == "NCHW" ? 1 : dy.rank() - 1)});
  return Status();
}

Status BatchNormGradShape(InferenceContext& c) {
  const Shape& dy = c.input_shape(0);
  const Shape& x = c.input_shape(1);
  for (int i = 0; i < 2; ++i) {
    const Shape& s = c.input_shape(i);
    if (!s.unknown_rank() && s.rank() != 4 && s.rank() != 2) {
      return c.Error(i == 0 ? "y_backprop" : "x", " must have rank 2 or 4, got ", s.ToString());
    }
  }
  auto merged = x.Merge(dy);
  if (!merged.ok()) {
    return c.Error("y_backprop has shape ", dy.ToString(), ", but x has shape ", x.ToString(), "; they must be equal");
  }
  int64_t channels = -1;
  if (!merged->unknown_rank()) {
    channels = merged->rank() == 2 ? merged->dim(1) : merged->dim(LayoutOf(c.String("data_format")).c);
  }
  static const char* const kNames[] = {"scale", "mean", "variance"};
  for (int i = 2; i < 5; ++i) {
    const Shape& s = c.input_shape(i);
    if (s.unknown_rank()) continue;
    if (s.rank() != 1) return c.Error(kNames[i - 2], " must be 1-D, got ", s.ToString());
    if (channels >= 0 && s.dim(0) >= 0 && s.dim(0) != channels) {
      return c.Error(kNames[i - 2], " has ", s.dim(0), " elements, x has ", channels, " channels");
    }
    if (channels < 0) channels = s.dim(0);
  }
  c.set_output(0, *merged);
  c.set_output(1, Shape{channels});
  c.set_output(2, Shape{channels});
  return Status();
}

Status LayerNormGradShape(InferenceContext& c) {
  const Shape& dy = c.input_shape(0);
  const Shape& x = c.input_shape(1);
  auto merged = x.Merge(dy);
  if (!merged.ok()) {
    return c.Error("dy has shape ", dy.ToString(), ", but x has shape ", x.ToString(), "; they must be equal");
  }
  c.set_output(0, *merged);
  if (merged->unknown_rank()) {
    c.set_output(1, c.input_shape(2));
    c.set_output(2, c.input_shape(2));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(int begin, NormalizeAxis(c.Int("begin_norm_axis"), merged->rank(), "begin_norm_axis"));
  const Shape normalized(std::vector<int64_t>(merged->dims().begin() + begin, merged->dims().end()));
  auto gamma = c.input_shape(2).Merge(normalized);
  if (!gamma.ok()) {
    return c.Error("gamma has shape ", c.input_shape(2).ToString(), ", expected the normalized dimensions ",
                   normalized.ToString());
  }
  c.set_output(1, *gamma);
  c.set_output(2, *gamma);
  return Status();
}

// LSTMCellGrad: the forward op's inputs x, c_prev, h_prev, w, its outputs c
// and gates, and the gradients dc, dh arriving at c and h.
Status LstmCellGradShape(InferenceContext& c) {
  using D = LstmDim;
  WEFT_ASSIGN_OR_RETURN(LstmDims d, CheckLstmShapes(c, {{0, "x", {D::kBatch, D::kInput}},
                                                        {1, "c_prev", {D::kBatch, D::kHidden}},
                                                        {2, "h_prev", {D::kBatch, D::kHidden}},
                                                        {3, "w", {D::kConcat, D::kGates}},
                                                        {4, "c", {D::kBatch, D::kHidden}},
                                                        {5, "gates", {D::kBatch, D::kGates}},
                                                        {6, "dc", {D::kBatch, D::kHidden}},
                                                        {7, "dh", {D::kBatch, D::kHidden}}}));
  const int64_t gates = d.hidden < 0 ? -1 : 4 * d.hidden;
  c.set_output(0, Shape{d.batch, d.input});
  c.set_output(1, Shape{d.batch, d.hidden});
  c.set_output(2, Shape{d.batch, d.hidden});
  c.set_output(3, Shape{d.input < 0 || d.hidden < 0 ? -1 : d.input + d.hidden, gates});
  c.set_output(4, Shape{gates});
  return Status();
}

constexpr const char* kConvAttrs[] = {
    "strides: list(int) = [1, 1, 1, 1]",
    "padding: {'SAME', 'VALID'} = 'VALID'",
    "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
    "dilations: list(int) = [1, 1, 1, 1]",
};

}  // namespace

Status RegisterNnGradOps(OpRegistry& r) {
  for (bool depthwise : {false, true}) {
    const std::string forward = depthwise ? "DepthwiseConv2D" : "Conv2D";
    OpDefBuilder input(forward + "BackpropInput");
    input.Input("input_sizes: Tshape")
        .Input("filter: T")
        .Input("out_backprop: T")
        .Output("output: T")
        .Attr("T: {f32, f64}")
        .Attr("Tshape: {i32, i64} = 'i32'");
    OpDefBuilder filter(forward + "BackpropFilter");
    filter.Input("input: T")
        .Input("filter_sizes: Tshape")
        .Input("out_backprop: T")
        .Output("output: T")
        .Attr("T: {f32, f64}")
        .Attr("Tshape: {i32, i64} = 'i32'");
    for (const char* attr : kConvAttrs) {
      input.Attr(attr);
      filter.Attr(attr);
    }
    input.Shape([depthwise](InferenceContext& c) { return ConvBackpropShape(c, depthwise, false); })
        .Doc("The gradient of " + forward +
             " with respect to its input: given the input's shape input_sizes (4 entries, in data_format "
             "order), the filter and out_backprop, the gradient of the forward output, it returns the sum of "
             "out_backprop's elements times the filter taps that read each input element (a transposed "
             "convolution). The attrs are the forward op's, and out_backprop must have the shape the forward "
             "op gives.");
    filter.Shape([depthwise](InferenceContext& c) { return ConvBackpropShape(c, depthwise, true); })
        .Doc("The gradient of " + forward +
             " with respect to its filter: given the forward input, the filter's shape filter_sizes (4 entries, "
             "HWIO" +
             std::string(depthwise ? " as [height, width, channels, multiplier]" : "") +
             ") and out_backprop, the gradient of the forward output, it returns for every filter tap the sum "
             "over the batch and output positions of the input element the tap reads times out_backprop. The "
             "attrs are the forward op's, and out_backprop must have the shape the forward op gives.");
    WEFT_RETURN_IF_ERROR(r.Register(input));
    WEFT_RETURN_IF_ERROR(r.Register(filter));
  }
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("MaxPoolGrad")
          .Input("orig_input: T")
          .Input("orig_output: T")
          .Input("grad: T")
          .Output("output: T")
          .Attr("T: {f32, f64}")
          .Attr("ksize: list(int)")
          .Attr("strides: list(int)")
          .Attr("padding: {'SAME', 'VALID'}")
          .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
          .Shape(MaxPoolGradShape)
          .Doc("The gradient of MaxPool with respect to its input: each window's element of grad is added to "
               "the one input position the window's maximum came from, the first in row-major order within "
               "the window (padding excluded) whose orig_input value equals the maximum; so ties go to the "
               "top-most, then left-most, position, and overlapping windows add up. orig_input is the forward "
               "input, and orig_output and grad must have the forward output's shape; the maximum is taken "
               "from orig_input again. Which position a window containing NaN sends its gradient to is not "
               "specified.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("AvgPoolGrad")
          .Input("orig_input_shape: Tshape")
          .Input("grad: T")
          .Output("output: T")
          .Attr("T: {f32, f64}")
          .Attr("Tshape: {i32, i64} = 'i32'")
          .Attr("ksize: list(int)")
          .Attr("strides: list(int)")
          .Attr("padding: {'SAME', 'VALID'}")
          .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
          .Shape(AvgPoolGradShape)
          .Doc("The gradient of AvgPool with respect to its input, whose shape orig_input_shape gives (4 "
               "entries): each window's element of grad is divided by the number of input elements the window "
               "averaged (with SAME padding, only those inside the input, as the forward op) and added to each "
               "of them. grad must have the forward output's shape.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("BiasAddGrad")
          .Input("out_backprop: T")
          .Output("output: T")
          .Attr("T: {numeric}")
          .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
          .Shape(BiasAddGradShape)
          .Doc("The gradient of BiasAdd with respect to its bias: out_backprop summed over every dimension but "
               "the channel dimension, which is the last one (NHWC, and any rank >= 2) or dimension 1 (NCHW). "
               "Integer sums wrap around; 16-bit floats are summed in float.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("FusedBatchNormGrad")
          .Input("y_backprop: T")
          .Input("x: T")
          .Input("scale: T")
          .Input("mean: T")
          .Input("variance: T")
          .Output("x_backprop: T")
          .Output("scale_backprop: T")
          .Output("offset_backprop: T")
          .Attr("T: {f32, f64}")
          .Attr("epsilon: float = 0.001")
          .Attr("is_training: bool = true")
          .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
          .Shape(BatchNormGradShape)
          .Doc("The gradients of FusedBatchNorm's y with respect to x, scale and offset, given y_backprop, the "
               "gradient of y. With is_training the mean and biased variance are the batch's, recomputed from "
               "x (the mean and variance inputs are not read), and x_backprop includes their dependence on x; "
               "otherwise mean and variance are the inputs the forward op normalised with, constants. With "
               "xhat = (x - mean) / sqrt(variance + epsilon): offset_backprop = sum(y_backprop), "
               "scale_backprop = sum(y_backprop * xhat), over every axis but the channel's. x and y_backprop "
               "are [N, C] or 4-D in data_format; scale, mean and variance have C elements.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("LayerNormGrad")
          .Input("dy: T")
          .Input("x: T")
          .Input("gamma: T")
          .Output("dx: T")
          .Output("dgamma: T")
          .Output("dbeta: T")
          .Attr("T: {f32, f64}")
          .Attr("epsilon: float = 1e-5")
          .Attr("begin_norm_axis: int = -1")
          .Shape(LayerNormGradShape)
          .Doc("The gradients of LayerNorm's y with respect to x, gamma and beta, given dy, the gradient of y, "
               "and the forward inputs x and gamma. Each slice over the axes from begin_norm_axis on is "
               "normalised again (xhat, with its mean and biased variance); dx includes the dependence of the "
               "mean and variance on x, dgamma = sum(dy * xhat) and dbeta = sum(dy) over the leading axes.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("LSTMCellGrad")
          .Input("x: T")
          .Input("c_prev: T")
          .Input("h_prev: T")
          .Input("w: T")
          .Input("c: T")
          .Input("gates: T")
          .Input("dc: T")
          .Input("dh: T")
          .Output("dx: T")
          .Output("dc_prev: T")
          .Output("dh_prev: T")
          .Output("dw: T")
          .Output("db: T")
          .Attr("T: {f32, f64}")
          .Shape(LstmCellGradShape)
          .Doc("The gradients of LSTMCell's c and h with respect to its inputs x, c_prev, h_prev, w and b, "
               "given the forward inputs, the forward outputs c and gates (the activated i, f, g, o), and dc "
               "and dh, the gradients arriving at c and h. With dc_total = dc + dh * o * (1 - tanh(c)^2): "
               "dz_i = dc_total * g * i * (1 - i), dz_f = dc_total * c_prev * f * (1 - f), dz_g = dc_total * "
               "i * (1 - g^2), dz_o = dh * tanh(c) * o * (1 - o); dz = concat(dz_i, dz_f, dz_g, dz_o); "
               "dc_prev = dc_total * f; concat(dx, dh_prev) = dz @ w^T; dw = concat(x, h_prev)^T @ dz; db = "
               "the sum of dz over the batch.")));
  return Status();
}

}  // namespace weft::ops
