// Gradients of the neural-network ops.
#include "core/grad/gradients.h"

namespace weft::grad {
namespace {

using Dx = std::vector<Output>;

// The attrs a convolution's backward ops share with it.
AttrMap ConvAttrs(GradContext& c) {
  AttrMap attrs;
  for (const char* name : {"strides", "padding", "data_format", "dilations"}) attrs[name] = c.attr(name);
  return attrs;
}

AttrMap PoolAttrs(GradContext& c) {
  AttrMap attrs;
  for (const char* name : {"ksize", "strides", "padding", "data_format"}) attrs[name] = c.attr(name);
  return attrs;
}

// |t| ([batch]) as [batch, 1], to scale the rows of a [batch, classes]
// tensor.
Output Column(GradContext& c, const Output& t) { return c.Op("ExpandDims", {t}, {{"axis", AttrValue(int64_t{-1})}}); }

}  // namespace

void RegisterNnGradients(GradRegistry& r) {
  for (const char* op : {"Conv2D", "DepthwiseConv2D"}) {
    const std::string prefix = op;
    r.Register(op, [prefix](GradContext& c, Dx& dx) {
      const Output input = c.input(0), filter = c.input(1), g = c.grad(0);
      dx[0] = c.Op(prefix + "BackpropInput", {c.ShapeOf(input), filter, g}, ConvAttrs(c));
      dx[1] = c.Op(prefix + "BackpropFilter", {input, c.ShapeOf(filter), g}, ConvAttrs(c));
      return Status();
    });
  }
  r.Register("MaxPool", [](GradContext& c, Dx& dx) {
    dx[0] = c.Op("MaxPoolGrad", {c.input(0), c.output(0), c.grad(0)}, PoolAttrs(c));
    return Status();
  });
  r.Register("AvgPool", [](GradContext& c, Dx& dx) {
    dx[0] = c.Op("AvgPoolGrad", {c.ShapeOf(c.input(0)), c.grad(0)}, PoolAttrs(c));
    return Status();
  });
  r.Register("BiasAdd", [](GradContext& c, Dx& dx) {
    dx[0] = c.grad(0);
    dx[1] = c.Op("BiasAddGrad", {c.grad(0)}, {{"data_format", c.attr("data_format")}});
    return Status();
  });
  r.Register("FusedBatchNorm", [](GradContext& c, Dx& dx) {
    // Only y's gradient flows back: the batch statistics outputs feed
    // moving averages, which are not differentiated.
    if (!c.grad(0).valid()) return Status();
    std::vector<Output> g = c.Node("FusedBatchNormGrad", {c.grad(0), c.input(0), c.input(1), c.input(3), c.input(4)},
                                   {{"epsilon", c.attr("epsilon")},
                                    {"is_training", c.attr("is_training")},
                                    {"data_format", c.attr("data_format")}});
    if (g.size() != 3) return c.b().status();
    dx[0] = g[0];
    dx[1] = g[1];
    dx[2] = g[2];
    if (c.Bool("is_training")) return Status();  // mean and variance inputs are unused
    // In inference, y = scale * (x - mean) * rsqrt(var + eps) + offset, so
    //   d mean = -sum(dy) * scale * inv,
    //   d var  = -0.5 * sum(dy * (x - mean)) * scale * inv^3.
    const bool nchw = c.String("data_format") == "NCHW";
    const AttrMap sum_attrs = {
        {"axis", AttrValue(nchw ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0, 1, 2})}};
    auto per_pixel = [&](const Output& v) {  // [C] to broadcast against x
      if (!nchw) return v;
      const AttrMap last = {{"axis", AttrValue(int64_t{-1})}};
      return c.Op("ExpandDims", {c.Op("ExpandDims", {v}, last)}, last);
    };
    const Output x = c.input(0), scale = c.input(1), mean = c.input(3), var = c.input(4), dy = c.grad(0);
    const Output inv = c.Op("Rsqrt", {c.Op("Add", {var, c.Scalar(c.Float("epsilon"), var)})});
    const Output scaled = c.Op("Mul", {scale, inv});
    dx[3] = c.Op("Neg", {c.Op("Mul", {c.Op("Sum", {dy}, sum_attrs), scaled})});
    const Output centred = c.Op("Sub", {x, per_pixel(mean)});
    const Output dot = c.Op("Sum", {c.Op("Mul", {dy, centred})}, sum_attrs);
    dx[4] = c.Op("Mul", {c.Op("Mul", {dot, scaled}), c.Op("Mul", {c.Op("Square", {inv}), c.Scalar(-0.5, var)})});
    return Status();
  });
  r.Register("LayerNorm", [](GradContext& c, Dx& dx) {
    std::vector<Output> g = c.Node("LayerNormGrad", {c.grad(0), c.input(0), c.input(1)},
                                   {{"epsilon", c.attr("epsilon")}, {"begin_norm_axis", c.attr("begin_norm_axis")}});
    if (g.size() != 3) return c.b().status();
    dx[0] = g[0];
    dx[1] = g[1];
    dx[2] = g[2];
    return Status();
  });
  r.Register("LSTMCell", [](GradContext& c, Dx& dx) {
    // gates (output 2) is saved for the backward pass; it is not meant to
    // be differentiated, and LSTMCellGrad takes no gradient for it.
    if (c.grad(2).valid()) {
      return UnimplementedError("differentiating the gates output of LSTMCell (only c and h are differentiable)");
    }
    const Output dc = c.grad_or_zeros(0), dh = c.grad_or_zeros(1);
    std::vector<Output> g =
        c.Node("LSTMCellGrad", {c.input(0), c.input(1), c.input(2), c.input(3), c.output(0), c.output(2), dc, dh});
    if (g.size() != 5) return c.b().status();
    for (std::size_t i = 0; i < 5; ++i) dx[i] = g[i];
    return Status();
  });
  r.Register("Softmax", [](GradContext& c, Dx& dx) {
    // dx = (g - sum(g * y, axis)) * y
    const Output y = c.output(0), g = c.grad(0);
    const AttrMap sum_attrs = {{"axis", AttrValue(std::vector<int64_t>{c.Int("axis")})},
                               {"keep_dims", AttrValue(true)}};
    Output dot = c.Op("Sum", {c.Op("Mul", {g, y})}, sum_attrs);
    dx[0] = c.Op("Mul", {c.Op("Sub", {g, dot}), y});
    return Status();
  });
  r.Register("LogSoftmax", [](GradContext& c, Dx& dx) {
    // dx = g - softmax(x) * sum(g, axis), with softmax(x) = exp(y)
    const Output y = c.output(0), g = c.grad(0);
    const AttrMap sum_attrs = {{"axis", AttrValue(std::vector<int64_t>{c.Int("axis")})},
                               {"keep_dims", AttrValue(true)}};
    Output total = c.Op("Sum", {g}, sum_attrs);
    dx[0] = c.Op("Sub", {g, c.Op("Mul", {c.Op("Exp", {y}), total})});
    return Status();
  });
  r.Register("SoftmaxCrossEntropyWithLogits", [](GradContext& c, Dx& dx) {
    // The op's second output is d loss / d features already. A gradient
    // arriving at that output (a second derivative) is not supported.
    if (c.grad(1).valid()) {
      return UnimplementedError("differentiating the backprop output of SoftmaxCrossEntropyWithLogits");
    }
    const Output g = Column(c, c.grad(0));
    dx[0] = c.Op("Mul", {g, c.output(1)});
    // d loss / d labels = -log softmax(features)
    dx[1] = c.Op("Mul", {g, c.Op("Neg", {c.Op("LogSoftmax", {c.input(0)})})});
    return Status();
  });
  r.Register("SparseSoftmaxCrossEntropyWithLogits", [](GradContext& c, Dx& dx) {
    if (c.grad(1).valid()) {
      return UnimplementedError("differentiating the backprop output of SparseSoftmaxCrossEntropyWithLogits");
    }
    dx[0] = c.Op("Mul", {Column(c, c.grad(0)), c.output(1)});
    return Status();
  });
}

}  // namespace weft::grad
