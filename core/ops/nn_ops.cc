// Neural-network ops: convolution, pooling, normalisation, softmax and the
// cross-entropy losses, and the fused LSTM cell.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

Status ConvShape(InferenceContext& c, bool depthwise) {
  const Shape& in = c.input_shape(0);
  const Shape& filter = c.input_shape(1);
  const Layout l = LayoutOf(c.String("data_format"));
  const auto& strides = c.Ints("strides");
  const auto& dilations = c.Ints("dilations");
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "strides", strides, l));
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "dilations", dilations, l));
  if ((!in.unknown_rank() && in.rank() != 4) || (!filter.unknown_rank() && filter.rank() != 4)) {
    return c.Error("input and filter must have rank 4, got ", in.ToString(), " and ", filter.ToString());
  }
  if (in.unknown_rank() || filter.unknown_rank()) {
    c.set_output(0, Shape::UnknownDims(4));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Shape out, ConvOutput(c, in, filter, depthwise));
  c.set_output(0, std::move(out));
  return Status();
}

Status PoolShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const Layout l = LayoutOf(c.String("data_format"));
  const auto& ksize = c.Ints("ksize");
  const auto& strides = c.Ints("strides");
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "ksize", ksize, l));
  WEFT_RETURN_IF_ERROR(CheckWindowAttr(c, "strides", strides, l));
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownDims(4));
    return Status();
  }
  if (in.rank() != 4) return c.Error("the input must have rank 4, got ", in.ToString());
  const std::string& padding = c.String("padding");
  auto h = WindowOutput(in.dim(l.h), ksize[static_cast<std::size_t>(l.h)], strides[static_cast<std::size_t>(l.h)], 1,
                        padding);
  if (!h.ok()) return c.Error("height: ", h.status().message());
  auto w = WindowOutput(in.dim(l.w), ksize[static_cast<std::size_t>(l.w)], strides[static_cast<std::size_t>(l.w)], 1,
                        padding);
  if (!w.ok()) return c.Error("width: ", w.status().message());
  std::vector<int64_t> dims = in.dims();
  dims[static_cast<std::size_t>(l.h)] = *h;
  dims[static_cast<std::size_t>(l.w)] = *w;
  c.set_output(0, Shape(dims));
  return Status();
}

Status BiasAddShape(InferenceContext& c) {
  const Shape& value = c.input_shape(0);
  const Shape& bias = c.input_shape(1);
  if (!bias.unknown_rank() && bias.rank() != 1) return c.Error("bias must be 1-D, got ", bias.ToString());
  if (!value.unknown_rank()) {
    if (value.rank() < 2) return c.Error("value must have rank >= 2, got ", value.ToString());
    const int channel = c.String("data_format") == "NCHW" ? 1 : value.rank() - 1;
    if (!bias.unknown_rank() && value.dim(channel) >= 0 && bias.dim(0) >= 0 && value.dim(channel) != bias.dim(0)) {
      return c.Error("bias has ", bias.dim(0), " elements but value has ", value.dim(channel), " channels (",
                     value.ToString(), ", ", c.String("data_format"), ")");
    }
  }
  c.set_output(0, value);
  return Status();
}

Status BatchNormShape(InferenceContext& c) {
  const Shape& x = c.input_shape(0);
  if (!x.unknown_rank() && x.rank() != 4 && x.rank() != 2) {
    return c.Error("x must have rank 2 or 4, got ", x.ToString());
  }
  int64_t channels = -1;
  if (!x.unknown_rank()) channels = x.rank() == 2 ? x.dim(1) : x.dim(LayoutOf(c.String("data_format")).c);
  for (int i = 1; i < 5; ++i) {
    const Shape& s = c.input_shape(i);
    if (s.unknown_rank()) continue;
    if (s.rank() != 1) return c.Error("input ", i, " must be 1-D, got ", s.ToString());
    if (channels >= 0 && s.dim(0) >= 0 && s.dim(0) != channels) {
      return c.Error("input ", i, " has ", s.dim(0), " elements, x has ", channels, " channels");
    }
  }
  c.set_output(0, x);
  c.set_output(1, Shape{channels});
  c.set_output(2, Shape{channels});
  return Status();
}

Status LayerNormShape(InferenceContext& c) {
  const Shape& x = c.input_shape(0);
  c.set_output(0, x);
  if (x.unknown_rank()) return Status();
  WEFT_ASSIGN_OR_RETURN(int begin, NormalizeAxis(c.Int("begin_norm_axis"), x.rank(), "begin_norm_axis"));
  const Shape normalized(std::vector<int64_t>(x.dims().begin() + begin, x.dims().end()));
  for (int i = 1; i < 3; ++i) {
    if (!c.input_shape(i).IsCompatibleWith(normalized)) {
      return c.Error(i == 1 ? "gamma" : "beta", " has shape ", c.input_shape(i).ToString(),
                     ", expected the normalized dimensions ", normalized.ToString());
    }
  }
  return Status();
}

Status SoftmaxShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (!in.unknown_rank()) {
    if (in.rank() < 1) return c.Error("logits must have rank >= 1");
    WEFT_RETURN_IF_ERROR(NormalizeAxis(c.Int("axis"), in.rank()).status());
  }
  c.set_output(0, in);
  return Status();
}

Status XentShape(InferenceContext& c, bool sparse) {
  const Shape& features = c.input_shape(0);
  const Shape& labels = c.input_shape(1);
  if (!features.unknown_rank() && features.rank() != 2) {
    return c.Error("features must be [batch, classes], got ", features.ToString());
  }
  if (sparse) {
    if (!labels.unknown_rank() && labels.rank() != 1) return c.Error("labels must be [batch], got ", labels.ToString());
  } else if (!features.IsCompatibleWith(labels)) {
    return c.Error("labels ", labels.ToString(), " must have the shape of features ", features.ToString());
  }
  const int64_t batch = features.unknown_rank() ? -1 : features.dim(0);
  if (sparse && !labels.unknown_rank() && batch >= 0 && labels.dim(0) >= 0 && labels.dim(0) != batch) {
    return c.Error("labels has ", labels.dim(0), " rows, features ", batch);
  }
  c.set_output(0, Shape{batch});
  c.set_output(1, features.unknown_rank() ? Shape::UnknownDims(2) : features);
  return Status();
}

// LSTMCell: x [B, I], c_prev and h_prev [B, H], w [I + H, 4H], b [4H].
Status LstmCellShape(InferenceContext& c) {
  using D = LstmDim;
  WEFT_ASSIGN_OR_RETURN(LstmDims d, CheckLstmShapes(c, {{0, "x", {D::kBatch, D::kInput}},
                                                        {1, "c_prev", {D::kBatch, D::kHidden}},
                                                        {2, "h_prev", {D::kBatch, D::kHidden}},
                                                        {3, "w", {D::kConcat, D::kGates}},
                                                        {4, "b", {D::kGates}}}));
  c.set_output(0, Shape{d.batch, d.hidden});
  c.set_output(1, Shape{d.batch, d.hidden});
  c.set_output(2, Shape{d.batch, d.hidden < 0 ? -1 : 4 * d.hidden});
  return Status();
}

}  // namespace

Status RegisterNnOps(OpRegistry& r) {
  for (bool depthwise : {false, true}) {
    WEFT_RETURN_IF_ERROR(r.Register(
        OpDefBuilder(depthwise ? "DepthwiseConv2D" : "Conv2D")
            .Input("input: T")
            .Input("filter: T")
            .Output("output: T")
            .Attr("T: {f32, f64}")
            .Attr("strides: list(int) = [1, 1, 1, 1]")
            .Attr("padding: {'SAME', 'VALID'} = 'VALID'")
            .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
            .Attr("dilations: list(int) = [1, 1, 1, 1]")
            .Shape([depthwise](InferenceContext& c) { return ConvShape(c, depthwise); })
            .Doc(depthwise ? "Depthwise 2-D convolution: each input channel c is convolved with its own "
                             "filter[:, :, c, :] of depth M, giving C*M output channels (channel c*M+m). Strides, "
                             "padding, data_format and dilations as Conv2D."
                           : "2-D convolution (cross-correlation) of a 4-D input (NHWC or NCHW) with a filter "
                             "[height, width, in_channels, out_channels]. strides and dilations have 4 entries in "
                             "data_format order, 1 for batch and channels. SAME pads so the output has ceil(in / "
                             "stride) positions, with any odd padding after; VALID does not pad.")));
  }
  for (const char* name : {"MaxPool", "AvgPool"}) {
    const bool max = std::string(name) == "MaxPool";
    WEFT_RETURN_IF_ERROR(
        r.Register(OpDefBuilder(name)
                       .Input("input: T")
                       .Output("output: T")
                       .Attr("T: {f32, f64}")
                       .Attr("ksize: list(int)")
                       .Attr("strides: list(int)")
                       .Attr("padding: {'SAME', 'VALID'}")
                       .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
                       .Shape(PoolShape)
                       .Doc(max ? "Maximum over each window of a 4-D input; ksize and strides have 4 entries in "
                                  "data_format order. Padding never wins the maximum; a window containing NaN "
                                  "gives NaN (as NumPy's max)."
                                : "Average over each window of a 4-D input; ksize and strides have 4 entries in "
                                  "data_format order. With SAME padding the average is over the window's elements "
                                  "inside the input only, as in TensorFlow.")));
  }
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("BiasAdd")
                     .Input("value: T")
                     .Input("bias: T")
                     .Output("output: T")
                     .Attr("T: {numeric}")
                     .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
                     .Shape(BiasAddShape)
                     .Doc("Adds a 1-D bias along the channel dimension: the last one (NHWC, and any rank >= 2) or "
                          "dimension 1 (NCHW).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("FusedBatchNorm")
          .Input("x: T")
          .Input("scale: T")
          .Input("offset: T")
          .Input("mean: T")
          .Input("variance: T")
          .Output("y: T")
          .Output("batch_mean: T")
          .Output("batch_variance: T")
          .Attr("T: {f32, f64}")
          .Attr("epsilon: float = 0.001")
          .Attr("is_training: bool = true")
          .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
          .Shape(BatchNormShape)
          .Doc("Batch normalisation per channel: y = (x - m) / sqrt(v + epsilon) * scale + offset. In training "
               "m and v are the batch's mean and (biased) variance over every axis but the channel's, and the "
               "outputs batch_mean and batch_variance give the mean and the unbiased variance for moving "
               "averages (NaN for a channel of one element, as NumPy's ddof=1); in inference m and v are the "
               "'mean' and 'variance' inputs, passed through. x is [N, C] or 4-D in data_format; the four "
               "per-channel inputs always have C elements.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("LayerNorm")
                     .Input("x: T")
                     .Input("gamma: T")
                     .Input("beta: T")
                     .Output("y: T")
                     .Attr("T: {f32, f64}")
                     .Attr("epsilon: float = 1e-5")
                     .Attr("begin_norm_axis: int = -1")
                     .Shape(LayerNormShape)
                     .Doc("Layer normalisation: each slice over the axes from begin_norm_axis on is normalised to zero "
                          "mean and unit (biased) variance, then scaled by gamma and shifted by beta, which have the "
                          "shape of those axes.")));
  for (const char* name : {"Softmax", "LogSoftmax"}) {
    WEFT_RETURN_IF_ERROR(r.Register(
        OpDefBuilder(name)
            .Input("logits: T")
            .Output("output: T")
            .Attr("T: {f32, f64}")
            .Attr("axis: int = -1")
            .Shape(SoftmaxShape)
            .Doc(std::string(name) == "Softmax"
                     ? "exp(x) / sum(exp(x)) along 'axis', computed stably (the maximum is subtracted first)."
                     : "x - log(sum(exp(x))) along 'axis', computed stably.")));
  }
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("SoftmaxCrossEntropyWithLogits")
          .Input("features: T")
          .Input("labels: T")
          .Output("loss: T")
          .Output("backprop: T")
          .Attr("T: {f32, f64}")
          .Shape([](InferenceContext& c) { return XentShape(c, false); })
          .Doc("Per-row cross entropy between softmax(features) and a probability distribution 'labels', both "
               "[batch, classes]: loss[i] = -sum_j labels[i,j] log softmax(features)[i,j], computed stably; "
               "backprop = softmax(features) - labels, the gradient of the loss.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("SparseSoftmaxCrossEntropyWithLogits")
          .Input("features: T")
          .Input("labels: Tlabels")
          .Output("loss: T")
          .Output("backprop: T")
          .Attr("T: {f32, f64}")
          .Attr("Tlabels: {i32, i64} = 'i64'")
          .Shape([](InferenceContext& c) { return XentShape(c, true); })
          .Doc("Per-row cross entropy of softmax(features) ([batch, classes]) against class indices 'labels' "
               "([batch]): loss[i] = -log softmax(features)[i, labels[i]]; backprop is its gradient. A label "
               "outside [0, classes) is an error naming its row.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("LSTMCell")
                     .Input("x: T")
                     .Input("c_prev: T")
                     .Input("h_prev: T")
                     .Input("w: T")
                     .Input("b: T")
                     .Output("c: T")
                     .Output("h: T")
                     .Output("gates: T")
                     .Attr("T: {f32, f64}")
                     .Attr("forget_bias: float = 1.0")
                     .Shape(LstmCellShape)
                     .Doc("One step of an LSTM cell. With z = concat(x, h_prev, axis 1) @ w + b ([batch, 4 * hidden]) "
                          "split into four blocks of 'hidden' columns in the order i, f, g, o: i = sigmoid(z_i), "
                          "f = sigmoid(z_f + forget_bias), g = tanh(z_g), o = sigmoid(z_o); c = f * c_prev + i * g and "
                          "h = o * tanh(c). gates = concat(i, f, g, o), the activated gates, which LSTMCellGrad reads "
                          "instead of recomputing them. x is [batch, input], c_prev and h_prev [batch, hidden], w "
                          "[input + hidden, 4 * hidden], b [4 * hidden]. Only c and h are differentiable: a gradient "
                          "arriving at gates is an error.")));
  return Status();
}

}  // namespace weft::ops
