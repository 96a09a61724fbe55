// The optimizers of ONNX's ai.onnx.preview.training domain, Adagrad,
// Momentum (standard and Nesterov) and Adam, composed of Weft ops: each is
// a pure function of the learning rate R, the step count T and, per
// tensor, X, its gradient G and its state, returning the new X and state
// (the conventions are in core/onnx/converters.h). BatchNormalization's
// and Dropout's training modes, Bernoulli and the random generators are
// here too.
#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

struct Optimizer {
  Output r, t_positive;  // R (in X's dtype), T > 0
  int tensors = 0;       // how many X
};

// R and T, and the number of X for |groups| inputs per X (X, G, states).
Expected<Optimizer> ReadOptimizer(NodeContext& c, int groups, int outputs_per_x) {
  const int rest = c.num_inputs() - 2;
  if (rest <= 0 || rest % groups != 0) {
    return c.Error(c.num_inputs(), " inputs; expected R, T and ", groups, " inputs per optimized tensor");
  }
  Optimizer o;
  o.tensors = rest / groups;
  if (c.node().output_size() != outputs_per_x * o.tensors) {
    return c.Error(c.node().output_size(), " outputs for ", o.tensors, " tensors; expected ",
                   outputs_per_x * o.tensors);
  }
  WEFT_ASSIGN_OR_RETURN(Output r, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output t, c.In(1));
  const DType dt = c.InDType(2);
  if (!IsFloating(dt)) return c.Error("X must be floating-point, got ", DTypeName(dt));
  o.r =
      r.dtype() == dt ? AsScalar(c, r, "R") : Op(c, "Cast", {AsScalar(c, r, "R")}, {{"DstT", AttrValue(dt)}}, "R_cast");
  WEFT_ASSIGN_OR_RETURN(Output t64, ScalarI64(c, t, "T"));
  o.t_positive = Op(c, "Greater", {t64, ConstOf(c, Tensor::Scalar<int64_t>(0), "zero_steps")}, {}, "T_positive");
  return o;
}

// G + norm_coefficient * X.
Expected<Output> Regularized(NodeContext& c, const Output& x, const Output& g, std::string_view name) {
  const double norm = c.Float("norm_coefficient", 0.0);
  if (norm == 0) return g;
  WEFT_ASSIGN_OR_RETURN(Output k, ScalarLike(c, x.dtype(), norm, StrCat(name, "_norm")));
  return Op(c, "Add", {Op(c, "Mul", {k, x}, {}, StrCat(name, "_decay")), g}, {}, StrCat(name, "_regularized"));
}

Expected<Output> Scalar(NodeContext& c, const Output& like, double v, std::string_view name) {
  return ScalarLike(c, like.dtype(), v, name);
}

Status Adagrad(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Optimizer o, ReadOptimizer(c, 3, 2));
  const int n = o.tensors;
  WEFT_ASSIGN_OR_RETURN(Output decay, Scalar(c, o.r, c.Float("decay_factor", 0.0), "decay_factor"));
  WEFT_ASSIGN_OR_RETURN(Output one, Scalar(c, o.r, 1.0, "one"));
  WEFT_ASSIGN_OR_RETURN(Output t, c.In(1));
  Output tf = Op(c, "Cast", {AsScalar(c, t, "T")}, {{"DstT", AttrValue(o.r.dtype())}}, "T_float");
  Output rate =
      Op(c, "Div", {o.r, Op(c, "Add", {one, Op(c, "Mul", {tf, decay}, {}, "decayed")}, {}, "denominator")}, {}, "rate");
  for (int i = 0; i < n; ++i) {
    const std::string k = StrCat("x", i);
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(2 + i));
    WEFT_ASSIGN_OR_RETURN(Output g, c.In(2 + n + i));
    WEFT_ASSIGN_OR_RETURN(Output h, c.In(2 + 2 * n + i));
    WEFT_ASSIGN_OR_RETURN(Output gr, Regularized(c, x, g, k));
    Output h_new = Op(c, "Add", {h, Op(c, "Square", {gr}, {}, k + "_g2")}, {}, k + "_h_new");
    WEFT_ASSIGN_OR_RETURN(Output eps, Scalar(c, x, c.Float("epsilon", 1e-6), k + "_epsilon"));
    Output scale = Op(c, "Add", {Op(c, "Sqrt", {h_new}, {}, k + "_h_sqrt"), eps}, {}, k + "_h_adaptive");
    Output step = Op(c, "Div", {Op(c, "Mul", {rate, gr}, {}, k + "_scaled"), scale}, {}, k + "_step");
    c.SetOut(i, Op(c, "Sub", {x, step}, {}, k + "_new"));
    c.SetOut(n + i, h_new);
  }
  return Status();
}

Status Momentum(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Optimizer o, ReadOptimizer(c, 3, 2));
  const int n = o.tensors;
  const std::string mode = c.Str("mode", "standard");
  if (mode != "standard" && mode != "nesterov") return c.Error("attr 'mode' is ", Quote(mode));
  WEFT_ASSIGN_OR_RETURN(Output alpha, Scalar(c, o.r, c.Float("alpha", 0.0), "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output beta, Scalar(c, o.r, c.Float("beta", 0.0), "beta"));
  WEFT_ASSIGN_OR_RETURN(Output one, Scalar(c, o.r, 1.0, "one"));
  // The gradient's coefficient is 1 at the first step.
  Output beta_t = Op(c, "Select", {o.t_positive, beta, one}, {}, "beta_adjusted");
  for (int i = 0; i < n; ++i) {
    const std::string k = StrCat("x", i);
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(2 + i));
    WEFT_ASSIGN_OR_RETURN(Output g, c.In(2 + n + i));
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(2 + 2 * n + i));
    WEFT_ASSIGN_OR_RETURN(Output gr, Regularized(c, x, g, k));
    Output v_new =
        Op(c, "Add", {Op(c, "Mul", {alpha, v}, {}, k + "_v_kept"), Op(c, "Mul", {beta_t, gr}, {}, k + "_v_in")}, {},
           k + "_v_new");
    Output dir = mode == "standard"
                     ? v_new
                     : Op(c, "Add", {gr, Op(c, "Mul", {alpha, v_new}, {}, k + "_lookahead")}, {}, k + "_direction");
    c.SetOut(i, Op(c, "Sub", {x, Op(c, "Mul", {o.r, dir}, {}, k + "_step")}, {}, k + "_new"));
    c.SetOut(n + i, v_new);
  }
  return Status();
}

Status Adam(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Optimizer o, ReadOptimizer(c, 4, 3));
  const int n = o.tensors;
  const double a = c.Float("alpha", 0.9), b = c.Float("beta", 0.999);
  WEFT_ASSIGN_OR_RETURN(Output alpha, Scalar(c, o.r, a, "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output beta, Scalar(c, o.r, b, "beta"));
  WEFT_ASSIGN_OR_RETURN(Output one, Scalar(c, o.r, 1.0, "one"));
  WEFT_ASSIGN_OR_RETURN(Output t, c.In(1));
  Output tf = Op(c, "Cast", {AsScalar(c, t, "T")}, {{"DstT", AttrValue(o.r.dtype())}}, "T_float");
  // With bias correction after the first step: R sqrt(1 - beta^T) / (1 - alpha^T).
  Output corrected =
      Op(c, "Div",
         {Op(c, "Mul",
             {o.r, Op(c, "Sqrt", {Op(c, "Sub", {one, Op(c, "Pow", {beta, tf}, {}, "beta_t")}, {}, "one_minus_beta_t")},
                      {}, "sqrt_one_minus_beta_t")},
             {}, "rate_beta"),
          Op(c, "Sub", {one, Op(c, "Pow", {alpha, tf}, {}, "alpha_t")}, {}, "one_minus_alpha_t")},
         {}, "rate_corrected");
  Output rate = Op(c, "Select", {o.t_positive, corrected, o.r}, {}, "rate");
  for (int i = 0; i < n; ++i) {
    const std::string k = StrCat("x", i);
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(2 + i));
    WEFT_ASSIGN_OR_RETURN(Output g, c.In(2 + n + i));
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(2 + 2 * n + i));
    WEFT_ASSIGN_OR_RETURN(Output h, c.In(2 + 3 * n + i));
    WEFT_ASSIGN_OR_RETURN(Output gr, Regularized(c, x, g, k));
    WEFT_ASSIGN_OR_RETURN(Output one_minus_a, Scalar(c, x, 1 - a, k + "_one_minus_alpha"));
    WEFT_ASSIGN_OR_RETURN(Output one_minus_b, Scalar(c, x, 1 - b, k + "_one_minus_beta"));
    Output v_new =
        Op(c, "Add", {Op(c, "Mul", {alpha, v}, {}, k + "_v_kept"), Op(c, "Mul", {one_minus_a, gr}, {}, k + "_v_in")},
           {}, k + "_v_new");
    Output h_new = Op(c, "Add",
                      {Op(c, "Mul", {beta, h}, {}, k + "_h_kept"),
                       Op(c, "Mul", {one_minus_b, Op(c, "Square", {gr}, {}, k + "_g2")}, {}, k + "_h_in")},
                      {}, k + "_h_new");
    WEFT_ASSIGN_OR_RETURN(Output eps, Scalar(c, x, c.Float("epsilon", 1e-6), k + "_epsilon"));
    Output denom = Op(c, "Add", {Op(c, "Sqrt", {h_new}, {}, k + "_h_sqrt"), eps}, {}, k + "_denominator");
    Output step = Op(c, "Mul", {rate, Op(c, "Div", {v_new, denom}, {}, k + "_direction")}, {}, k + "_step");
    Output x_new = Op(c, "Sub", {x, step}, {}, k + "_updated");
    WEFT_ASSIGN_OR_RETURN(Output post, Scalar(c, x, 1 - c.Float("norm_coefficient_post", 0.0), k + "_post"));
    c.SetOut(i, Op(c, "Mul", {post, x_new}, {}, k + "_new"));
    c.SetOut(n + i, v_new);
    c.SetOut(2 * n + i, h_new);
  }
  return Status();
}

}  // namespace

// BatchNormalization with training_mode (opset 14+): normalized by the
// batch's own mean and (population) variance over every axis but 1, and
// the running statistics moved toward them by 1 - momentum.
Status BatchNormTraining(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const int r = c.InShape(0).rank();
  if (r < 2) return c.Unsupported("BatchNormalization in training mode of an input of rank ", r);
  if (!IsFloating(x.dtype())) return c.Error("input must be floating-point, got ", DTypeName(x.dtype()));
  std::vector<int64_t> axes = {0}, laid(static_cast<std::size_t>(r), 1);
  for (int64_t a = 2; a < r; ++a) axes.push_back(a);
  laid[1] = -1;
  const AttrMap reduce = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}};
  Output mean = Op(c, "Mean", {x}, reduce, "batch_mean");
  Output centered = Op(c, "Sub", {x, mean}, {}, "centered");
  Output var = Op(c, "Mean", {Op(c, "Square", {centered}, {}, "squared")}, reduce, "batch_variance");
  WEFT_ASSIGN_OR_RETURN(Output eps, ScalarLike(c, x.dtype(), c.Float("epsilon", 1e-5), "epsilon"));
  Output shape = ConstOf(c, Int64s(laid), "channel_shape");
  WEFT_ASSIGN_OR_RETURN(Output scale, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output bias, c.In(2));
  Output norm = Op(c, "Mul", {centered, Op(c, "Rsqrt", {Op(c, "Add", {var, eps}, {}, "variance_eps")}, {}, "inv_std")},
                   {}, "normalized");
  Output y = Op(c, "Add",
                {Op(c, "Mul", {norm, Op(c, "Reshape", {scale, shape}, {}, "scale_laid")}, {}, "scaled"),
                 Op(c, "Reshape", {bias, shape}, {}, "bias_laid")});
  c.SetOut(0, y);
  const double m = c.Float("momentum", 0.9);
  auto running = [&](int input, const Output& batch, const std::string& name) -> Expected<Output> {
    WEFT_ASSIGN_OR_RETURN(Output old, c.In(input));
    WEFT_ASSIGN_OR_RETURN(Output keep, ScalarLike(c, x.dtype(), m, name + "_momentum"));
    WEFT_ASSIGN_OR_RETURN(Output take, ScalarLike(c, x.dtype(), 1 - m, name + "_rate"));
    Output flat = Op(c, "Reshape", {batch, ConstOf(c, Int64s({-1}), name + "_flat_shape")}, {}, name + "_flat");
    return Op(c, "Add", {Op(c, "Mul", {old, keep}, {}, name + "_kept"), Op(c, "Mul", {flat, take}, {}, name + "_in")},
              {}, name);
  };
  if (c.has_output(1)) {
    WEFT_ASSIGN_OR_RETURN(Output rm, running(3, mean, "running_mean"));
    c.SetOut(1, rm);
  }
  if (c.has_output(2)) {
    WEFT_ASSIGN_OR_RETURN(Output rv, running(4, var, "running_var"));
    c.SetOut(2, rv);
  }
  return Status();
}

// Dropout whose training_mode is true or fed: y = x * mask / (1 - ratio)
// in training (x with a mask of trues otherwise), mask = U[0, 1) >= ratio.
Status DropoutTraining(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  if (!IsFloating(x.dtype())) return c.Error("input must be floating-point, got ", DTypeName(x.dtype()));
  Output ratio;
  if (c.has_input(1)) {
    WEFT_ASSIGN_OR_RETURN(Output r, c.In(1));
    ratio = AsScalar(c, r.dtype() == x.dtype() ? r : Op(c, "Cast", {r}, {{"DstT", AttrValue(x.dtype())}}, "ratio_cast"),
                     "ratio");
  } else {
    WEFT_ASSIGN_OR_RETURN(ratio, ScalarLike(c, x.dtype(), 0.5, "ratio"));
  }
  WEFT_ASSIGN_OR_RETURN(Output training, c.In(2));
  training = AsScalar(c, training, "training");
  Output shape = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "shape");
  Output u = Op(c, "RandomUniform", {shape}, {{"dtype", AttrValue(x.dtype())}, {"seed", AttrValue(c.Int("seed", 0))}},
                "uniform");
  Output kept = Op(c, "LogicalOr",
                   {Op(c, "LogicalNot", {training}, {}, "inference"), Op(c, "GreaterEqual", {u, ratio}, {}, "drawn")},
                   {}, "mask");
  WEFT_ASSIGN_OR_RETURN(Output one, ScalarLike(c, x.dtype(), 1.0, "one"));
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0.0, "zero"));
  Output scale =
      Op(c, "Select", {training, Op(c, "Div", {one, Op(c, "Sub", {one, ratio}, {}, "keep")}, {}, "inverse"), one}, {},
         "scale");
  c.SetOut(0, Op(c, "Select", {kept, Op(c, "Mul", {x, scale}, {}, "scaled"), zero}));
  if (c.has_output(1)) c.SetOut(1, kept);
  return Status();
}

// Bernoulli: 1 where a uniform draw in [0, 1) is below the input's
// probability, else 0, in attr 'dtype' (default the input's); the attr
// seed seeds the draw.
Status Bernoulli(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output p, c.In(0));
  if (!IsFloating(p.dtype())) return c.Error("input must be floating-point probabilities, got ", DTypeName(p.dtype()));
  DType to = p.dtype();
  if (c.HasAttr("dtype")) {
    auto d = DTypeFromOnnx(static_cast<int32_t>(c.Int("dtype", 0)));
    if (!d.ok()) return d.status().WithContext("attr 'dtype'");
    to = *d;
  }
  Output shape = Op(c, "Shape", {p}, {{"out_type", AttrValue(DType::kI64)}}, "shape");
  Output u =
      Op(c, "RandomUniform", {shape},
         {{"dtype", AttrValue(p.dtype())}, {"seed", AttrValue(static_cast<int64_t>(c.Float("seed", 0.0)))}}, "uniform");
  c.SetOut(0, Op(c, "Cast", {Op(c, "Less", {u, p}, {}, "drawn")}, {{"DstT", AttrValue(to)}}));
  return Status();
}

// RandomUniform, RandomNormal and their *Like forms: Weft's RandomUniform
// or RandomNormal of the attr 'shape' (or the input's shape), scaled to
// [low, high) or by scale and mean, in attr 'dtype' (f32 by default, the
// input's for *Like).
Status RandomOp(NodeContext& c, bool normal, bool like) {
  Output shape;
  DType to = DType::kF32;
  if (like) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
    shape = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "shape");
    to = x.dtype();
  } else {
    shape = ConstOf(c, Int64s(c.Ints("shape")), "shape");
  }
  if (c.HasAttr("dtype")) {
    auto d = DTypeFromOnnx(static_cast<int32_t>(c.Int("dtype", 1)));
    if (!d.ok()) return d.status().WithContext("attr 'dtype'");
    to = *d;
  }
  if (!IsFloating(to)) return c.Error("attr 'dtype' must be floating-point, got ", DTypeName(to));
  Output r = Op(c, normal ? "RandomNormal" : "RandomUniform", {shape},
                {{"dtype", AttrValue(to)}, {"seed", AttrValue(static_cast<int64_t>(c.Float("seed", 0.0)))}}, "draw");
  const double scale = normal ? c.Float("scale", 1.0) : c.Float("high", 1.0) - c.Float("low", 0.0);
  const double shift = normal ? c.Float("mean", 0.0) : c.Float("low", 0.0);
  WEFT_ASSIGN_OR_RETURN(Output k, ScalarLike(c, to, scale, "scale"));
  WEFT_ASSIGN_OR_RETURN(Output b, ScalarLike(c, to, shift, "shift"));
  c.SetOut(0, Op(c, "Add", {Op(c, "Mul", {r, k}, {}, "scaled"), b}));
  return Status();
}

void AddTrainingConverters(ConverterTable& t) {
  t["Bernoulli"] = Bernoulli;
  t["RandomUniform"] = [](NodeContext& c) { return RandomOp(c, false, false); };
  t["RandomNormal"] = [](NodeContext& c) { return RandomOp(c, true, false); };
  t["RandomUniformLike"] = [](NodeContext& c) { return RandomOp(c, false, true); };
  t["RandomNormalLike"] = [](NodeContext& c) { return RandomOp(c, true, true); };
  t[StrCat(kTrainingDomain, "::Adagrad")] = Adagrad;
  t[StrCat(kTrainingDomain, "::Momentum")] = Momentum;
  t[StrCat(kTrainingDomain, "::Adam")] = Adam;
}

}  // namespace weft::onnx_io::convert
