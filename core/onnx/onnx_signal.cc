// ONNX's window functions (opset 17), HannWindow, HammingWindow and
// BlackmanWindow, composed of Weft ops over Range(size), the size fed or
// known (the conventions are in core/onnx/converters.h).
#include <numbers>

#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// a0 - a1 cos(2 pi n / N') + a2 cos(4 pi n / N') for n in [0, size), with
// N' = size (periodic) or size - 1 (symmetric), computed in f64 and cast
// to attr 'output_datatype'.
Status Window(NodeContext& c, double a0, double a1, double a2) {
  WEFT_ASSIGN_OR_RETURN(Output size_in, c.In(0));
  if (!IsInteger(size_in.dtype())) return c.Error("size must be an integer, got ", DTypeName(size_in.dtype()));
  auto to = DTypeFromOnnx(static_cast<int32_t>(c.Int("output_datatype", 1)));
  if (!to.ok()) return to.status().WithContext("attr 'output_datatype'");
  Output size = Op(c, "Cast", {AsScalar(c, size_in, "size")}, {{"DstT", AttrValue(DType::kF64)}}, "size_f64");
  Output n = Op(c, "Range",
                {ConstOf(c, Tensor::Scalar<double>(0.0), "zero"), size, ConstOf(c, Tensor::Scalar<double>(1.0), "one")},
                {}, "n");
  Output period = size;
  if (c.Int("periodic", 1) == 0) {
    period = Op(c, "Sub", {size, ConstOf(c, Tensor::Scalar<double>(1.0), "one_less")}, {}, "period");
  }
  Output phase =
      Op(c, "Div",
         {Op(c, "Mul", {n, ConstOf(c, Tensor::Scalar<double>(2 * std::numbers::pi), "two_pi")}, {}, "angle"), period},
         {}, "phase");
  Output w =
      Op(c, "Sub",
         {ConstOf(c, Tensor::Scalar<double>(a0), "a0"),
          Op(c, "Mul", {ConstOf(c, Tensor::Scalar<double>(a1), "a1"), Op(c, "Cos", {phase}, {}, "cos1")}, {}, "term1")},
         {}, "w1");
  if (a2 != 0) {
    Output second = Op(c, "Cos", {Op(c, "Add", {phase, phase}, {}, "phase2")}, {}, "cos2");
    w = Op(c, "Add", {w, Op(c, "Mul", {ConstOf(c, Tensor::Scalar<double>(a2), "a2"), second}, {}, "term2")}, {}, "w2");
  }
  c.SetOut(0, *to == DType::kF64 ? Op(c, "Identity", {w}) : Op(c, "Cast", {w}, {{"DstT", AttrValue(*to)}}));
  return Status();
}

}  // namespace

void AddSignalConverters(ConverterTable& t) {
  t["HannWindow"] = [](NodeContext& c) { return Window(c, 0.5, 0.5, 0.0); };
  t["HammingWindow"] = [](NodeContext& c) { return Window(c, 25.0 / 46.0, 21.0 / 46.0, 0.0); };
  t["BlackmanWindow"] = [](NodeContext& c) { return Window(c, 0.42, 0.5, 0.08); };
}

}  // namespace weft::onnx_io::convert
