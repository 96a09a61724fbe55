// Elementwise math, reductions and matrix products.
//
// Integer arithmetic wraps around on overflow (two's complement), as in
// NumPy; integer division by zero is an error; INT_MIN / -1 wraps to
// INT_MIN. Floating-point follows IEEE 754: NaN propagates, division by
// zero gives +-inf.
#include <algorithm>

#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

struct Unary {
  const char* name;
  const char* types;
  const char* doc;
};

// Unary ops whose output has the input's dtype and shape.
constexpr Unary kUnary[] = {
    {"Neg", "{float, i8, i16, i32, i64}", "Numerical negation, -x, elementwise. Integers wrap (-INT_MIN == INT_MIN)."},
    {"Abs", "{float, i8, i16, i32, i64}", "Absolute value |x|, elementwise. Integers wrap (|INT_MIN| == INT_MIN)."},
    {"Sign", "{float, i8, i16, i32, i64}", "-1, 0 or 1 by the sign of x, elementwise; NaN stays NaN, -0.0 gives 0."},
    {"Exp", "{float}", "e raised to x, elementwise."},
    {"Expm1", "{float}", "exp(x) - 1, elementwise, accurate for x near 0."},
    {"Log", "{float}", "Natural logarithm, elementwise: -inf at 0, NaN below 0."},
    {"Log1p", "{float}", "log(1 + x), elementwise, accurate for x near 0."},
    {"Sqrt", "{float}", "Square root, elementwise; NaN for x < 0."},
    {"Rsqrt", "{float}", "1 / sqrt(x), elementwise; inf at 0."},
    {"Square", "{float, i8, i16, i32, i64}", "x * x, elementwise. Integers wrap on overflow."},
    {"Reciprocal", "{float}", "1 / x, elementwise; +-inf at +-0."},
    {"Sin", "{float}", "Sine of x in radians, elementwise."},
    {"Cos", "{float}", "Cosine of x in radians, elementwise."},
    {"Tan", "{float}", "Tangent of x in radians, elementwise; NaN at +-inf."},
    {"Asin", "{float}", "The inverse sine in radians, in [-pi/2, pi/2], elementwise; NaN outside [-1, 1]."},
    {"Acos", "{float}", "The inverse cosine in radians, in [0, pi], elementwise; NaN outside [-1, 1]."},
    {"Atan", "{float}", "The inverse tangent in radians, in [-pi/2, pi/2], elementwise; +-pi/2 at +-inf."},
    {"Sinh", "{float}", "Hyperbolic sine, elementwise; +-inf where it overflows."},
    {"Cosh", "{float}", "Hyperbolic cosine, elementwise; inf where it overflows."},
    {"Tanh", "{float}", "Hyperbolic tangent, elementwise."},
    {"Asinh", "{float}", "The inverse hyperbolic sine, elementwise."},
    {"Acosh", "{float}", "The inverse hyperbolic cosine, elementwise (at least 0); NaN for x < 1."},
    {"Atanh", "{float}", "The inverse hyperbolic tangent, elementwise: +-inf at +-1, NaN outside [-1, 1]."},
    {"Sigmoid", "{float}", "The logistic function 1 / (1 + exp(-x)), elementwise, without overflow for large |x|."},
    {"Relu", "{float, i8, i16, i32, i64}", "Rectified linear unit max(x, 0), elementwise; NaN stays NaN."},
    {"Relu6", "{float, i8, i16, i32, i64}", "min(max(x, 0), 6), elementwise; NaN stays NaN."},
    {"Elu", "{float}", "Exponential linear unit: x for x > 0, exp(x) - 1 otherwise."},
    {"Selu", "{float}",
     "Scaled ELU: scale * (x for x > 0, alpha * (exp(x) - 1) otherwise), with alpha = 1.6732632423543772 and scale = "
     "1.0507009873554805 (Klambauer et al. 2017)."},
    {"Softplus", "{float}", "log(exp(x) + 1), elementwise, computed without overflow: x + log1p(exp(-x)) for x > 0."},
    {"Erf", "{float}", "The Gauss error function, elementwise."},
    {"Floor", "{float}", "The largest integer not greater than x, elementwise."},
    {"Ceil", "{float}", "The smallest integer not less than x, elementwise."},
    {"Round", "{float}", "x rounded to the nearest integer, halfway cases to even (as NumPy's round), elementwise."},
};

struct Binary {
  const char* name;
  const char* types;
  const char* doc;
};

// Binary ops with NumPy broadcasting whose output has the inputs' dtype.
constexpr Binary kBinary[] = {
    {"Add", "{numeric}", "x + y, elementwise, with NumPy broadcasting. Integers wrap on overflow."},
    {"Sub", "{numeric}", "x - y, elementwise, with NumPy broadcasting. Integers wrap on overflow."},
    {"Mul", "{numeric}", "x * y, elementwise, with NumPy broadcasting. Integers wrap on overflow."},
    {"Div", "{numeric}",
     "x / y, elementwise, with NumPy broadcasting. Differs from NumPy on purpose for integers: division truncates "
     "toward zero (as C and TensorFlow; NumPy's // floors, see FloorDiv), and dividing by zero is an error (NumPy "
     "gives 0 with a warning)."},
    {"RealDiv", "{float}", "x / y for floating-point tensors, elementwise, with NumPy broadcasting."},
    {"FloorDiv", "{numeric}",
     "floor(x / y), elementwise, with NumPy broadcasting (Python's //, numpy.floor_divide). Floats divided by +-0 give "
     "+-inf, and 0 / 0 NaN, as in NumPy. Differs from NumPy on purpose for integers: division by zero is an error "
     "(NumPy gives 0)."},
    {"FloorMod", "{numeric}",
     "The remainder of floor division, with the sign of y (Python's %, numpy.mod), elementwise, with NumPy "
     "broadcasting: a zero remainder too takes y's sign (4.0 % -2.0 is -0.0), and a float remainder by 0 is NaN. "
     "Differs from NumPy on purpose for integers: division by zero is an error (NumPy gives 0)."},
    {"Pow", "{float, i32, i64}",
     "x raised to y, elementwise, with NumPy broadcasting. A negative integer exponent of an integer base is an error, "
     "as in NumPy."},
    {"Maximum", "{numeric}",
     "The larger of x and y, elementwise, with NumPy broadcasting; NaN if either is NaN (as NumPy's maximum)."},
    {"Minimum", "{numeric}",
     "The smaller of x and y, elementwise, with NumPy broadcasting; NaN if either is NaN (as NumPy's minimum)."},
    {"SquaredDifference", "{float, i32, i64}", "(x - y)^2, elementwise, with NumPy broadcasting."},
};

constexpr Binary kCompare[] = {
    {"Equal", "{numeric, bool}", "x == y, elementwise, with NumPy broadcasting; a bool tensor. NaN equals nothing."},
    {"NotEqual", "{numeric, bool}",
     "x != y, elementwise, with NumPy broadcasting; a bool tensor. NaN differs from everything."},
    {"Less", "{numeric}", "x < y, elementwise, with NumPy broadcasting; a bool tensor."},
    {"LessEqual", "{numeric}", "x <= y, elementwise, with NumPy broadcasting; a bool tensor."},
    {"Greater", "{numeric}", "x > y, elementwise, with NumPy broadcasting; a bool tensor."},
    {"GreaterEqual", "{numeric}", "x >= y, elementwise, with NumPy broadcasting; a bool tensor."},
};

constexpr Unary kReduce[] = {
    {"Sum", "{numeric}",
     "Sum over the axes in 'axis' (every axis when it is empty); 0 for an empty set. Integers wrap on overflow."},
    {"Mean", "{numeric}",
     "Arithmetic mean over the axes in 'axis' (every axis when it is empty). The mean of an empty set is NaN for "
     "floats and an error for integers; integer means are the exact mean truncated toward zero (the sum does not "
     "wrap)."},
    {"Max", "{numeric}",
     "Maximum over the axes in 'axis' (every axis when it is empty); NaN if any element is NaN. Reducing an empty set "
     "is an error (it has no identity)."},
    {"Min", "{numeric}",
     "Minimum over the axes in 'axis' (every axis when it is empty); NaN if any element is NaN. Reducing an empty set "
     "is an error (it has no identity)."},
    {"Prod", "{numeric}",
     "Product over the axes in 'axis' (every axis when it is empty); 1 for an empty set. Integers wrap on overflow."},
};

Status ReduceShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const bool keep = c.Bool("keep_dims");
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<int> axes, ReductionAxes(c.Ints("axis"), in.rank()));
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    const bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) {
      dims.push_back(in.dim(i));
    } else if (keep) {
      dims.push_back(1);
    }
  }
  c.set_output(0, Shape(dims));
  return Status();
}

Status ArgReduceShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  if (in.rank() == 0) return c.Error("ArgMax/ArgMin need a tensor of rank >= 1");
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), in.rank()));
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    if (i != axis) dims.push_back(in.dim(i));
  }
  c.set_output(0, Shape(dims));
  return Status();
}

Status MatMulShape(InferenceContext& c) {
  const Shape& a = c.input_shape(0);
  const Shape& b = c.input_shape(1);
  if ((!a.unknown_rank() && a.rank() != 2) || (!b.unknown_rank() && b.rank() != 2)) {
    return c.Error("MatMul takes rank-2 tensors, got ", a.ToString(), " and ", b.ToString(),
                   " (use BatchMatMul for batches)");
  }
  const bool ta = c.Bool("transpose_a"), tb = c.Bool("transpose_b");
  const int64_t m = a.unknown_rank() ? -1 : a.dim(ta ? 1 : 0);
  const int64_t ka = a.unknown_rank() ? -1 : a.dim(ta ? 0 : 1);
  const int64_t kb = b.unknown_rank() ? -1 : b.dim(tb ? 1 : 0);
  const int64_t n = b.unknown_rank() ? -1 : b.dim(tb ? 0 : 1);
  if (ka >= 0 && kb >= 0 && ka != kb) {
    return c.Error("inner dimensions differ: ", a.ToString(), (ta ? "^T" : ""), " x ", b.ToString(), (tb ? "^T" : ""),
                   " (", ka, " vs ", kb, ")");
  }
  c.set_output(0, Shape{m, n});
  return Status();
}

Status BatchMatMulShape(InferenceContext& c) {
  const Shape& x = c.input_shape(0);
  const Shape& y = c.input_shape(1);
  if (x.unknown_rank() || y.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  if (x.rank() < 2 || y.rank() < 2) {
    return c.Error("BatchMatMul takes tensors of rank >= 2, got ", x.ToString(), " and ", y.ToString());
  }
  const bool ax = c.Bool("adj_x"), ay = c.Bool("adj_y");
  const int64_t m = x.dim(x.rank() - (ax ? 1 : 2));
  const int64_t kx = x.dim(x.rank() - (ax ? 2 : 1));
  const int64_t ky = y.dim(y.rank() - (ay ? 1 : 2));
  const int64_t n = y.dim(y.rank() - (ay ? 2 : 1));
  if (kx >= 0 && ky >= 0 && kx != ky) {
    return c.Error("inner dimensions differ: ", x.ToString(), " x ", y.ToString(), " (", kx, " vs ", ky, ")");
  }
  std::vector<int64_t> bx(x.dims().begin(), x.dims().end() - 2);
  std::vector<int64_t> by(y.dims().begin(), y.dims().end() - 2);
  auto batch = Broadcast(Shape(bx), Shape(by));
  if (!batch.ok()) return c.Error("batch dimensions: ", batch.status().message());
  std::vector<int64_t> dims = batch->dims();
  dims.push_back(m);
  dims.push_back(n);
  c.set_output(0, Shape(dims));
  return Status();
}

Status AddNShape(InferenceContext& c) {
  Shape out = c.input_shape(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    auto merged = out.Merge(c.input_shape(i));
    if (!merged.ok()) return c.Error("AddN inputs must have one shape: ", merged.status().message());
    out = *merged;
  }
  c.set_output(0, out);
  return Status();
}

}  // namespace

Status RegisterMathOps(OpRegistry& r) {
  for (const Unary& u : kUnary) {
    WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder(u.name)
                                        .Input("x: T")
                                        .Output("y: T")
                                        .Attr(StrCat("T: ", u.types))
                                        .Shape(UnchangedShape)
                                        .Doc(u.doc)));
  }
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Gelu")
          .Input("x: T")
          .Output("y: T")
          .Attr("T: {float}")
          .Attr("approximate: bool = false")
          .Shape(UnchangedShape)
          .Doc("Gaussian error linear unit x * Phi(x), elementwise: exact (with erf) by default, or the "
               "tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) when 'approximate' is true. "
               "Departure from PyTorch and NumPy: Gelu(-inf) is 0, the limit, in both forms, where "
               "torch.nn.functional.gelu and the formulas evaluated in NumPy give NaN (-inf * 0); Gelu(inf) is inf "
               "and Gelu(NaN) is NaN.")));
  for (const char* name : {"IsNan", "IsInf"}) {
    WEFT_RETURN_IF_ERROR(
        r.Register(OpDefBuilder(name)
                       .Input("x: T")
                       .Output("y: bool")
                       .Attr("T: {float}")
                       .Shape(UnchangedShape)
                       .Doc(std::string(name) == "IsNan" ? "Whether x is NaN, elementwise."
                                                         : "Whether x is +inf or -inf, elementwise.")));
  }
  for (const Binary& b : kBinary) {
    WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder(b.name)
                                        .Input("x: T")
                                        .Input("y: T")
                                        .Output("z: T")
                                        .Attr(StrCat("T: ", b.types))
                                        .Shape(BroadcastShape)
                                        .Doc(b.doc)));
  }
  for (const Binary& b : kCompare) {
    WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder(b.name)
                                        .Input("x: T")
                                        .Input("y: T")
                                        .Output("z: bool")
                                        .Attr(StrCat("T: ", b.types))
                                        .Shape(BroadcastShape)
                                        .Doc(b.doc)));
  }
  for (const char* name : {"LogicalAnd", "LogicalOr"}) {
    WEFT_RETURN_IF_ERROR(
        r.Register(OpDefBuilder(name)
                       .Input("x: bool")
                       .Input("y: bool")
                       .Output("z: bool")
                       .Shape(BroadcastShape)
                       .Doc(std::string(name) == "LogicalAnd" ? "x AND y, elementwise, with NumPy broadcasting."
                                                              : "x OR y, elementwise, with NumPy broadcasting.")));
  }
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("LogicalNot").Input("x: bool").Output("y: bool").Shape(UnchangedShape).Doc("NOT x, elementwise.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("Select")
                     .Input("condition: bool")
                     .Input("t: T")
                     .Input("e: T")
                     .Output("output: T")
                     .Attr("T: {all}")
                     .Shape(BroadcastShape)
                     .Doc("Elements of t where condition is true and of e elsewhere, with NumPy broadcasting of all "
                          "three (NumPy's where).")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("AddN")
                     .Input("inputs: N * T")
                     .Output("sum: T")
                     .Attr("N: int >= 1")
                     .Attr("T: {numeric}")
                     .Shape(AddNShape)
                     .Doc("The elementwise sum of N tensors of one shape (no broadcasting); the gradient builder "
                          "uses it to sum fan-in.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Cast")
          .Input("x: SrcT")
          .Output("y: DstT")
          .Attr("SrcT: {numeric, bool}")
          .Attr("DstT: {numeric, bool}")
          .Shape(UnchangedShape)
          .Doc("Converts x to DstT elementwise. Floats to integers truncate toward zero, saturating at the "
               "integer's range, with NaN giving 0; integers to narrower integers wrap; anything to bool "
               "is x != 0; to f16 and bf16 a value rounds once, to nearest even, from its exact value (as "
               "NumPy's astype). "
               "Differs from NumPy on purpose: float to integer saturates and NaN gives 0 (NumPy's result is "
               "undefined there).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ClipByValue")
          .Input("t: T")
          .Input("clip_value_min: T")
          .Input("clip_value_max: T")
          .Output("output: T")
          .Attr("T: {numeric}")
          .Shape(BroadcastShape)
          .Doc("min(max(t, clip_value_min), clip_value_max), elementwise, with NumPy broadcasting of the "
               "bounds; a NaN in t or in a bound gives NaN, as torch.clamp does. Departure from NumPy: numpy.clip "
               "(1.24) ignores a NaN bound and returns t clipped by the other one.")));
  for (const Unary& u : kReduce) {
    WEFT_RETURN_IF_ERROR(
        r.Register(OpDefBuilder(u.name)
                       .Input("input: T")
                       .Output("output: T")
                       .Attr(StrCat("T: ", u.types))
                       .Attr("axis: list(int) = []")
                       .Attr("keep_dims: bool = false")
                       .Shape(ReduceShape)
                       .Doc(std::string(u.doc) + " Negative axes count from the end; a repeated axis is an error. With "
                                                 "keep_dims the reduced axes stay, with size 1.")));
  }
  for (const char* name : {"All", "Any"}) {
    WEFT_RETURN_IF_ERROR(r.Register(
        OpDefBuilder(name)
            .Input("input: bool")
            .Output("output: bool")
            .Attr("axis: list(int) = []")
            .Attr("keep_dims: bool = false")
            .Shape(ReduceShape)
            .Doc(std::string(name) == "All"
                     ? "Logical AND over the axes in 'axis' (every axis when it is empty); true for an empty set."
                     : "Logical OR over the axes in 'axis' (every axis when it is empty); false for an empty set.")));
  }
  for (const char* name : {"ArgMax", "ArgMin"}) {
    WEFT_RETURN_IF_ERROR(
        r.Register(OpDefBuilder(name)
                       .Input("input: T")
                       .Output("output: output_type")
                       .Attr("T: {numeric}")
                       .Attr("axis: int = 0")
                       .Attr("output_type: {i32, i64} = 'i64'")
                       .Shape(ArgReduceShape)
                       .Doc(StrCat("The index of the ", std::string(name) == "ArgMax" ? "largest" : "smallest",
                                   " element along 'axis'; the first on ties, and the first NaN if there is one (as "
                                   "NumPy). An empty axis is an error."))));
  }
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("MatMul")
                     .Input("a: T")
                     .Input("b: T")
                     .Output("product: T")
                     .Attr("T: {f16, bf16, f32, f64, i32, i64}")
                     .Attr("transpose_a: bool = false")
                     .Attr("transpose_b: bool = false")
                     .Shape(MatMulShape)
                     .Doc("The matrix product of two rank-2 tensors, each optionally transposed first: [m,k] x [k,n] "
                          "-> [m,n]. f16 and bf16 accumulate in f32.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("BatchMatMul")
                     .Input("x: T")
                     .Input("y: T")
                     .Output("output: T")
                     .Attr("T: {f16, bf16, f32, f64, i32, i64}")
                     .Attr("adj_x: bool = false")
                     .Attr("adj_y: bool = false")
                     .Shape(BatchMatMulShape)
                     .Doc("Matrix products over the last two axes, [..., m, k] x [..., k, n] -> [..., m, n], with the "
                          "leading (batch) axes broadcast as in NumPy's matmul; adj_x and adj_y transpose the last two "
                          "axes of x and y first.")));
  return Status();
}

}  // namespace weft::ops
