// Export of the ops with run-time shape inputs (DynamicSlice, DynamicPad,
// DynamicTile, DynamicSum, DynamicExpandDims, DynamicSqueeze,
// DynamicSplit, and Resize): each is the ONNX operator it was made from, its index
// inputs as int64 (the conventions are in core/onnx/exporter.h).
#include <utility>

#include "core/onnx/exporter.h"

namespace weft::onnx_io::exports {
namespace {

// Input |i| as int64 (ONNX's shape-like inputs are int64 only).
std::string I64In(ExportContext& c, int i) {
  const std::string in = c.In(i);
  if (c.InType(i) == DType::kI64) return in;
  return c.Emit1("Cast", {in}, c.name() + "/in" + std::to_string(i) + "_i64",
                 [](onnx::NodeProto* p) { AttrInt(p, "to", onnx::TensorProto::INT64); });
}

// ONNX op |onnx_op| of input 0 then inputs 1.. as int64, and input
// |value_input| (>= 0) as it is.
onnx::NodeProto* WithIndices(ExportContext& c, const std::string& onnx_op, int indices, int value_input = -1) {
  std::vector<std::string> ins = {c.In(0)};
  for (int i = 1; i <= indices; ++i) ins.push_back(I64In(c, i));
  if (value_input >= 0) ins.push_back(c.In(value_input));
  return c.Emit(onnx_op, ins, {c.out()}, c.name());
}

Status DynamicSlice(ExportContext& c) {
  WithIndices(c, "Slice", 4);
  return Status();
}

Status DynamicPad(ExportContext& c) {
  AttrStr(WithIndices(c, "Pad", 1, 2), "mode", c.Str("mode", "constant"));
  return Status();
}

Status DynamicSum(ExportContext& c) {
  onnx::NodeProto* p = WithIndices(c, "ReduceSum", 1);
  AttrInt(p, "keepdims", c.Bool("keep_dims", true) ? 1 : 0);
  AttrInt(p, "noop_with_empty_axes", c.Bool("noop_with_empty_axes", false) ? 1 : 0);
  return Status();
}

Status DynamicSplit(ExportContext& c) {
  std::vector<std::string> outs;
  for (int k = 0; k < c.num_outputs(); ++k) outs.push_back(c.OutName(k));
  AttrInt(c.Emit("Split", {c.In(0), I64In(c, 1)}, outs, c.name()), "axis", c.Int("axis"));
  return Status();
}

// Resize: ONNX's, with the same inputs (empty roi, scales or sizes stand
// for absent ones there too) and attributes.
Status Resize(ExportContext& c) {
  // A constant empty input is written as absent ("", and sizes left off):
  // ONNX 1.12's shape inference takes an empty sizes for a given one.
  auto empty = [&](int i) {
    const Tensor* t = c.ConstInput(i);
    return t != nullptr && t->num_elements() == 0;
  };
  std::vector<std::string> ins = {c.In(0), empty(1) ? std::string() : c.In(1), empty(2) ? std::string() : c.In(2)};
  if (!empty(3)) ins.push_back(I64In(c, 3));
  onnx::NodeProto* p = c.Emit("Resize", ins, {c.out()}, c.name());
  for (const char* attr : {"mode", "coordinate_transformation_mode", "nearest_mode"}) AttrStr(p, attr, c.Str(attr));
  AttrFloat(p, "cubic_coeff_a", c.Float("cubic_coeff_a", -0.75));
  AttrInt(p, "exclude_outside", c.Bool("exclude_outside", false) ? 1 : 0);
  AttrFloat(p, "extrapolation_value", c.Float("extrapolation_value", 0.0));
  return Status();
}

}  // namespace

void AddDynamicExports(ExportTable& t) {
  t["Resize"] = Resize;
  t["DynamicSlice"] = DynamicSlice;
  t["DynamicPad"] = DynamicPad;
  t["DynamicSum"] = DynamicSum;
  // Input 0 and one index input: Tile's repeats, Unsqueeze's and Squeeze's axes.
  for (const auto& [weft_op, onnx_op] : {std::pair<const char*, const char*>{"DynamicTile", "Tile"},
                                         {"DynamicExpandDims", "Unsqueeze"},
                                         {"DynamicSqueeze", "Squeeze"}}) {
    const std::string op = onnx_op;
    t[weft_op] = [op](ExportContext& c) {
      WithIndices(c, op, 1);
      return Status();
    };
  }
  t["DynamicSplit"] = DynamicSplit;
}

}  // namespace weft::onnx_io::exports
