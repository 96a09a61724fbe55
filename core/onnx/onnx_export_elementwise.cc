// ONNX export, elementwise ops: the ops ONNX has under the same or another
// name, arithmetic ONNX lacks made from primitive ops (Rsqrt, Square,
// FloorMod on floats, ...), Clip, Gelu and Cast (the conventions are in
// core/onnx/exporter.h; docs/onnx.md has the table).
#include <cmath>
#include <utility>

#include "core/onnx/exporter.h"
#include "core/onnx/importer.h"

namespace weft::onnx_io::exports {
namespace {

Status NotEqual(ExportContext& c) {
  c.Emit("Not", {c.Emit1("Equal", {c.In(0), c.In(1)}, c.name() + "/equal")}, {c.out()}, c.name());
  return Status();
}

Status Rsqrt(ExportContext& c) {
  c.Emit("Reciprocal", {c.Emit1("Sqrt", {c.In(0)}, c.name() + "/sqrt")}, {c.out()}, c.name());
  return Status();
}

Status Square(ExportContext& c) {
  c.Emit("Mul", {c.In(0), c.In(0)}, {c.out()}, c.name());
  return Status();
}

Status SquaredDifference(ExportContext& c) {
  const std::string d = c.Emit1("Sub", {c.In(0), c.In(1)}, c.name() + "/diff");
  c.Emit("Mul", {d, d}, {c.out()}, c.name());
  return Status();
}

Status Expm1(ExportContext& c) {
  const std::string one = c.ScalarConst(c.name() + "/one", c.dtype(), 1);
  c.Emit("Sub", {c.Emit1("Exp", {c.In(0)}, c.name() + "/exp"), one}, {c.out()}, c.name());
  return Status();
}

Status Log1p(ExportContext& c) {
  const std::string one = c.ScalarConst(c.name() + "/one", c.dtype(), 1);
  c.Emit("Log", {c.Emit1("Add", {c.In(0), one}, c.name() + "/plus_one")}, {c.out()}, c.name());
  return Status();
}

Status Relu6(ExportContext& c) {
  c.Emit("Clip",
         {c.In(0), c.ScalarConst(c.name() + "/min", c.dtype(), 0), c.ScalarConst(c.name() + "/max", c.dtype(), 6)},
         {c.out()}, c.name());
  return Status();
}

Status ClipByValue(ExportContext& c) {
  if (c.InShape(1).rank() == 0 && c.InShape(2).rank() == 0) {
    c.Simple("Clip", 3);
  } else {
    c.Emit("Min", {c.Emit1("Max", {c.In(0), c.In(1)}, c.name() + "/lower"), c.In(2)}, {c.out()}, c.name());
  }
  return Status();
}

// x * Phi(x) (EmitGelu, the tanh form when approximate).
Status Gelu(ExportContext& c) {
  EmitGelu(c, c.In(0), c.Bool("approximate"), c.out());
  return Status();
}

Status AddN(ExportContext& c) {
  c.Simple("Sum", c.num_inputs());
  return Status();
}

Status Cast(ExportContext& c) {
  AttrInt(c.Simple("Cast", 1), "to", DTypeToOnnx(c.dtype()));
  return Status();
}

Status FloorMod(ExportContext& c) {
  if (IsInteger(c.dtype())) {
    c.Simple("Mod", 2);  // fmod = 0: the result has the divisor's sign, as FloorMod
    return Status();
  }
  // Floats: ONNX's Mod takes them only with fmod = 1 (C's fmod, exact);
  // a remainder of the other sign than y then moves by y, as FloorMod.
  const std::string& base = c.name();
  const std::string x = c.In(0), y = c.In(1);
  const std::string r = c.Emit1("Mod", {x, y}, base + "/fmod", [](onnx::NodeProto* m) { AttrInt(m, "fmod", 1); });
  const std::string zero = c.ScalarConst(base + "/zero", c.dtype(), 0);
  const std::string nonzero = c.Emit1("Not", {c.Emit1("Equal", {r, zero}, base + "/is_zero")}, base + "/nonzero");
  const std::string signs_differ = c.Emit1(
      "Xor", {c.Emit1("Less", {r, zero}, base + "/r_negative"), c.Emit1("Less", {y, zero}, base + "/y_negative")},
      base + "/signs_differ");
  const std::string shift = c.Emit1("And", {nonzero, signs_differ}, base + "/shift");
  c.Emit("Where", {shift, c.Emit1("Add", {r, y}, base + "/shifted"), r}, {c.out()}, base);
  return Status();
}

}  // namespace

void EmitGelu(ExportContext& c, const std::string& x, bool approximate, const std::string& out) {
  const std::string& base = c.name();
  const DType dt = c.dtype();
  std::string inner;
  if (approximate) {
    const std::string x3 = c.Emit1("Mul", {x, c.Emit1("Mul", {x, x}, base + "/x2")}, base + "/x3");
    const std::string poly = c.Emit1(
        "Add", {x, c.Emit1("Mul", {x3, c.ScalarConst(base + "/c", dt, 0.044715)}, base + "/cx3")}, base + "/poly");
    inner = c.Emit1("Tanh",
                    {c.Emit1("Mul", {poly, c.ScalarConst(base + "/k", dt, std::sqrt(2.0 / M_PI))}, base + "/scaled")},
                    base + "/tanh");
  } else {
    inner = c.Emit1("Erf", {c.Emit1("Mul", {x, c.ScalarConst(base + "/rsqrt2", dt, M_SQRT1_2)}, base + "/scaled")},
                    base + "/erf");
  }
  const std::string one_plus = c.Emit1("Add", {inner, c.ScalarConst(base + "/one", dt, 1)}, base + "/one_plus");
  c.Emit("Mul", {c.Emit1("Mul", {x, c.ScalarConst(base + "/half", dt, 0.5)}, base + "/half_x"), one_plus}, {out},
         base + "/gelu");
}

void AddElementwiseExports(ExportTable& t) {
  // Weft op -> the ONNX op of the same inputs.
  static const std::pair<const char*, const char*> kUnary[] = {
      {"Relu", "Relu"},      {"Sigmoid", "Sigmoid"},   {"Tanh", "Tanh"},
      {"Exp", "Exp"},        {"Log", "Log"},           {"Abs", "Abs"},
      {"Neg", "Neg"},        {"Sqrt", "Sqrt"},         {"Reciprocal", "Reciprocal"},
      {"Floor", "Floor"},    {"Ceil", "Ceil"},         {"Sin", "Sin"},
      {"Cos", "Cos"},        {"Tan", "Tan"},           {"Asin", "Asin"},
      {"Acos", "Acos"},      {"Atan", "Atan"},         {"Sinh", "Sinh"},
      {"Cosh", "Cosh"},      {"Asinh", "Asinh"},       {"Acosh", "Acosh"},
      {"Atanh", "Atanh"},    {"Erf", "Erf"},           {"Round", "Round"},
      {"Sign", "Sign"},      {"Softplus", "Softplus"}, {"Elu", "Elu"},
      {"Selu", "Selu"},      {"IsNan", "IsNaN"},       {"IsInf", "IsInf"},
      {"LogicalNot", "Not"}, {"Identity", "Identity"}, {"StopGradient", "Identity"},
  };
  static const std::pair<const char*, const char*> kBinary[] = {
      {"Add", "Add"},
      {"Sub", "Sub"},
      {"Mul", "Mul"},
      {"RealDiv", "Div"},
      {"Div", "Div"},  // integers truncate in both
      {"Maximum", "Max"},
      {"Minimum", "Min"},
      {"Pow", "Pow"},
      {"Equal", "Equal"},
      {"Less", "Less"},
      {"Greater", "Greater"},
      {"LessEqual", "LessOrEqual"},
      {"GreaterEqual", "GreaterOrEqual"},
      {"LogicalAnd", "And"},
      {"LogicalOr", "Or"},
  };
  for (const auto& [weft_op, onnx_op] : kUnary) t[weft_op] = Same(onnx_op, 1);
  for (const auto& [weft_op, onnx_op] : kBinary) t[weft_op] = Same(onnx_op, 2);
  t["Select"] = Same("Where", 3);
  t["NotEqual"] = NotEqual;
  t["Rsqrt"] = Rsqrt;
  t["Square"] = Square;
  t["SquaredDifference"] = SquaredDifference;
  t["Expm1"] = Expm1;
  t["Log1p"] = Log1p;
  t["Relu6"] = Relu6;
  t["ClipByValue"] = ClipByValue;
  t["Gelu"] = Gelu;
  t["AddN"] = AddN;
  t["Cast"] = Cast;
  t["FloorMod"] = FloorMod;
}

}  // namespace weft::onnx_io::exports
