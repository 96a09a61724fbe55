// ONNX activations and elementwise functions composed of Weft ops or mapped
// onto Weft's: ThresholdedRelu, Shrink, Celu, Hardmax, MeanVarianceNormalization,
// CastLike (the conventions are in core/onnx/converters.h).
#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

Status CheckFloating(NodeContext& c, const Output& x) {
  if (!IsFloating(x.dtype())) return c.Error("input 0 must be floating-point, got ", DTypeName(x.dtype()));
  return Status();
}

// y = x where x > alpha, else 0.
Status ThresholdedRelu(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(auto xl, ElementwiseIn(c, 0));
  const Output x = xl.first;
  WEFT_RETURN_IF_ERROR(CheckFloating(c, x));
  WEFT_ASSIGN_OR_RETURN(Output alpha, ScalarLike(c, x.dtype(), c.Float("alpha", 1.0), "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  SetOutAs(c, 0, Op(c, "Select", {Op(c, "Greater", {x, alpha}, {}, "above"), x, zero}), xl.second);
  return Status();
}

// y = x + bias below -lambd, x - bias above lambd, 0 between.
Status Shrink(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(auto xl, ElementwiseIn(c, 0));
  const Output x = xl.first;
  const double lambd = c.Float("lambd", 0.5), bias = c.Float("bias", 0.0);
  const DType dt = x.dtype();
  WEFT_ASSIGN_OR_RETURN(Output lo, ScalarLike(c, dt, -lambd, "minus_lambd"));
  WEFT_ASSIGN_OR_RETURN(Output hi, ScalarLike(c, dt, lambd, "lambd"));
  WEFT_ASSIGN_OR_RETURN(Output b, ScalarLike(c, dt, bias, "bias"));
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, dt, 0, "zero"));
  Output upper =
      Op(c, "Select", {Op(c, "Greater", {x, hi}, {}, "above"), Op(c, "Sub", {x, b}, {}, "x_minus_bias"), zero}, {},
         "upper");
  SetOutAs(c, 0, Op(c, "Select", {Op(c, "Less", {x, lo}, {}, "below"), Op(c, "Add", {x, b}, {}, "x_plus_bias"), upper}),
           xl.second);
  return Status();
}

// y = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
Status Celu(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(auto xl, ElementwiseIn(c, 0));
  const Output x = xl.first;
  WEFT_RETURN_IF_ERROR(CheckFloating(c, x));
  const double alpha = c.Float("alpha", 1.0);
  if (alpha == 0) return c.Error("attr 'alpha' must not be 0");
  WEFT_ASSIGN_OR_RETURN(Output a, ScalarLike(c, x.dtype(), alpha, "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  Output em1 = Op(c, "Expm1", {Op(c, "Div", {x, a}, {}, "scaled")}, {}, "expm1");
  Output neg = Op(c, "Minimum", {zero, Op(c, "Mul", {a, em1}, {}, "elu")}, {}, "negative_part");
  SetOutAs(c, 0, Op(c, "Add", {Op(c, "Maximum", {zero, x}, {}, "positive_part"), neg}), xl.second);
  return Status();
}

// 1 at the first largest element along the axis, 0 elsewhere: OneHot of
// ArgMax. Before opset 13 the input is seen as 2-D
// [prod(d[:axis]), prod(d[axis:])].
Status Hardmax(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  const int r = xs.rank();
  if (r < 0) return c.Unsupported("Hardmax of an input of unknown rank");
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", c.opset() >= 13 ? -1 : 1), r, "attr 'axis'"));
  Output in = x;
  const bool as_2d = c.opset() < 13 && axis != r - 1;
  if (as_2d) {
    int64_t rest = 1;
    for (int i = static_cast<int>(axis); i < r; ++i) rest = xs.dim(i) < 0 || rest < 0 ? -1 : rest * xs.dim(i);
    if (rest < 0) return c.Unsupported("opset-", c.opset(), " Hardmax over axes of unknown size");
    in = Op(c, "Reshape", {x, ConstOf(c, Int64s({-1, rest}), "flat_shape")}, {}, "as_2d");
    axis = 1;
  }
  const int64_t depth = in.shape().rank() > axis ? in.shape().dim(static_cast<int>(axis)) : -1;
  if (depth < 0) return c.Unsupported("Hardmax over an axis of unknown size");
  Output index = Op(c, "ArgMax", {in}, {{"axis", AttrValue(axis)}, {"output_type", AttrValue(DType::kI64)}}, "argmax");
  Output y =
      Op(c, "OneHot", {index}, {{"depth", AttrValue(depth)}, {"axis", AttrValue(axis)}, {"T", AttrValue(x.dtype())}},
         as_2d ? "one_hot" : "");
  if (as_2d) y = Op(c, "Reshape", {y, Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "shape")});
  c.SetOut(0, y);
  return Status();
}

// (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) over 'axes' (default
// [0, 2, 3]), as ONNX's function body computes it.
Status MeanVarianceNormalization(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_RETURN_IF_ERROR(CheckFloating(c, x));
  const std::vector<int64_t> axes = c.Ints("axes", {0, 2, 3});
  const AttrMap reduce = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}};
  Output mean = Op(c, "Mean", {x}, reduce, "mean");
  Output mean_sq = Op(c, "Mean", {Op(c, "Square", {x}, {}, "x_squared")}, reduce, "mean_of_squares");
  Output var = Op(c, "Sub", {mean_sq, Op(c, "Square", {mean}, {}, "mean_squared")}, {}, "variance");
  WEFT_ASSIGN_OR_RETURN(Output eps, ScalarLike(c, x.dtype(), 1e-9, "epsilon"));
  Output std = Op(c, "Add", {Op(c, "Sqrt", {var}, {}, "std"), eps}, {}, "std_eps");
  c.SetOut(0, Op(c, "Div", {Op(c, "Sub", {x, mean}, {}, "centered"), std}));
  return Status();
}

// Cast to the dtype of input 1.
Status CastLike(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const DType to = c.InDType(1);
  if (to == DType::kInvalid) return c.Error("the dtype of input 1 is not known");
  if (x.dtype() == DType::kString || to == DType::kString) {
    return c.Unsupported("CastLike from ", DTypeName(x.dtype()), " to ", DTypeName(to),
                         " (Weft's Cast converts numbers and bool)");
  }
  c.SetOut(0, to == x.dtype() ? Op(c, "Identity", {x}) : Op(c, "Cast", {x}, {{"DstT", AttrValue(to)}}));
  return Status();
}

}  // namespace

void AddActivationConverters(ConverterTable& t) {
  t["ThresholdedRelu"] = ThresholdedRelu;
  t["Shrink"] = Shrink;
  t["Celu"] = Celu;
  t["Hardmax"] = Hardmax;
  t["MeanVarianceNormalization"] = MeanVarianceNormalization;
  t["CastLike"] = CastLike;
}

}  // namespace weft::onnx_io::convert
