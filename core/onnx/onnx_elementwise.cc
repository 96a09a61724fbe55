// ONNX converters, elementwise ops: unary and binary maps, arithmetic (folded when both sides are known integers, as in
// shape computations), Clip, Cast, and the activations with attributes (the conventions are in core/onnx/converters.h;
// docs/onnx.md has the table).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/base/strings.h"
#include "core/graph/control_flow.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

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
  // Without a bound, the dtype's own range (not a float bound cast to it).
  const auto [lowest, highest] = DTypeRange(dt);
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

// BitShift of unsigned integers (Weft has u8 of ONNX's four): x * 2^y
// (LEFT, wrapping) or floor(x / 2^y) (RIGHT), computed in i64.
Status BitShift(NodeContext& c) {
  const std::string direction = c.Str("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") return c.Error("attr 'direction' is ", Quote(direction));
  WEFT_ASSIGN_OR_RETURN(auto in, BroadcastIns(c, {0, 1}));
  const DType dt = in.first[0].dtype();
  if (dt != DType::kU8) return c.Unsupported("BitShift of ", DTypeName(dt), " (Weft's unsigned type is u8)");
  Output x = Op(c, "Cast", {in.first[0]}, {{"DstT", AttrValue(DType::kI64)}}, "x_i64");
  Output y = Op(c, "Cast", {in.first[1]}, {{"DstT", AttrValue(DType::kF64)}}, "y_f64");
  Output power = Op(c, "Cast", {Op(c, "Pow", {ConstOf(c, Tensor::Scalar<double>(2.0), "two"), y}, {}, "power_f64")},
                    {{"DstT", AttrValue(DType::kI64)}}, "power");
  Output shifted = Op(c, direction == "LEFT" ? "Mul" : "FloorDiv", {x, power}, {}, "shifted");
  SetOutAs(c, 0, Op(c, "Cast", {shifted}, {{"DstT", AttrValue(dt)}}), in.second);
  return Status();
}

// Neg of a known integer vector (an axis negated in shape arithmetic),
// folded; anything else is the Weft op.
Status NegOp(NodeContext& c) {
  const Tensor a = c.Known(0);
  if (a.valid() && IsInteger(a.dtype()) && a.rank() <= 1) {
    std::vector<int64_t> v = ToInts(a);
    for (int64_t& x : v) x = -x;
    c.SetKnown(0, Int64s(v, a.shape()));
    return Status();
  }
  return Unary(c, "Neg");
}

}  // namespace

void AddElementwiseConverters(ConverterTable& t) {
  t["Sum"] = [](NodeContext& c) { return Variadic(c, "Add", false); };
  t["Max"] = [](NodeContext& c) { return Variadic(c, "Maximum", false); };
  t["Min"] = [](NodeContext& c) { return Variadic(c, "Minimum", false); };
  t["Mean"] = [](NodeContext& c) { return Variadic(c, "Add", true); };
  const std::pair<const char*, const char*> unary[] = {
      {"Relu", "Relu"},   {"Sigmoid", "Sigmoid"}, {"Tanh", "Tanh"},   {"Exp", "Exp"},
      {"Log", "Log"},     {"Abs", "Abs"},         {"Sqrt", "Sqrt"},   {"Reciprocal", "Reciprocal"},
      {"Floor", "Floor"}, {"Ceil", "Ceil"},       {"Sin", "Sin"},     {"Cos", "Cos"},
      {"Erf", "Erf"},     {"Round", "Round"},     {"Sign", "Sign"},   {"Softplus", "Softplus"},
      {"IsNaN", "IsNan"}, {"Not", "LogicalNot"},  {"Tan", "Tan"},     {"Asin", "Asin"},
      {"Acos", "Acos"},   {"Atan", "Atan"},       {"Sinh", "Sinh"},   {"Cosh", "Cosh"},
      {"Asinh", "Asinh"}, {"Acosh", "Acosh"},     {"Atanh", "Atanh"},
  };
  for (const auto& [onnx_op, weft_op] : unary) {
    const std::string w = weft_op;
    t[onnx_op] = [w](NodeContext& c) { return Unary(c, w); };
  }
  t["Neg"] = NegOp;
  t["BitShift"] = BitShift;
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
}

}  // namespace weft::onnx_io::convert
