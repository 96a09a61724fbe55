// ONNX operators whose shape-like inputs (axes, pads, repeats, split sizes,
// slice bounds) are computed at run time: the Weft ops that take them as
// tensors (DynamicSlice, DynamicPad, DynamicTile, DynamicSum,
// DynamicExpandDims, DynamicSqueeze, DynamicSplit; core/ops/dynamic_shape_ops.cc).
// Where the inputs are known at import, the converters in onnx_shape.cc use
// the attribute forms instead (the conventions are in
// core/onnx/converters.h).
#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// Input |i| as an i64 tensor, for the Dynamic* ops' index inputs.
Expected<Output> Index(NodeContext& c, int i, std::string_view what) {
  WEFT_ASSIGN_OR_RETURN(Output v, c.In(i));
  if (v.dtype() == DType::kI64) return v;
  if (!IsInteger(v.dtype())) return c.Error(what, " must be integers, got ", DTypeName(v.dtype()));
  return Op(c, "Cast", {v}, {{"DstT", AttrValue(DType::kI64)}}, StrCat(what, "_i64"));
}

}  // namespace

bool Fed(NodeContext& c, int i) { return c.has_input(i) && !c.Known(i).valid(); }

Status DynamicSliceOp(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output starts, Index(c, 1, "starts"));
  WEFT_ASSIGN_OR_RETURN(Output ends, Index(c, 2, "ends"));
  // Default axes 0, 1, ... and steps of 1, as many as the starts.
  Output one = ConstOf(c, Tensor::Scalar<int64_t>(1), "one");
  Output axes, steps;
  if (c.has_input(3)) {
    WEFT_ASSIGN_OR_RETURN(axes, Index(c, 3, "axes"));
  } else {
    Output count = Op(c, "Size", {starts}, {{"out_type", AttrValue(DType::kI64)}}, "count");
    axes = Op(c, "Range", {ConstOf(c, Tensor::Scalar<int64_t>(0), "zero"), count, one}, {}, "axes");
  }
  if (c.has_input(4)) {
    WEFT_ASSIGN_OR_RETURN(steps, Index(c, 4, "steps"));
  } else {
    steps = Op(c, "OnesLike", {starts}, {}, "steps");
  }
  c.SetOut(0, Op(c, "DynamicSlice", {x, starts, ends, axes, steps}));
  return Status();
}

Status DynamicPadOp(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output pads, Index(c, 1, "pads"));
  Output value;
  if (c.has_input(2)) {
    WEFT_ASSIGN_OR_RETURN(value, c.In(2));
  } else {
    WEFT_ASSIGN_OR_RETURN(value, ScalarLike(c, x.dtype(), 0, "constant_value"));
  }
  const std::string mode = c.Str("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") {
    return c.Error("attr 'mode' is ", Quote(mode), "; expected constant, reflect or edge");
  }
  c.SetOut(0, Op(c, "DynamicPad", {x, pads, value}, {{"mode", AttrValue(mode)}}));
  return Status();
}

Status DynamicTileOp(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output repeats, Index(c, 1, "repeats"));
  c.SetOut(0, Op(c, "DynamicTile", {x, repeats}));
  return Status();
}

Status DynamicReduceSum(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output axes, Index(c, 1, "axes"));
  c.SetOut(0, Op(c, "DynamicSum", {x, axes},
                 {{"keep_dims", AttrValue(c.Int("keepdims", 1) != 0)},
                  {"noop_with_empty_axes", AttrValue(c.Int("noop_with_empty_axes", 0) != 0)}}));
  return Status();
}

Status DynamicUnsqueeze(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output axes, Index(c, 1, "axes"));
  c.SetOut(0, Op(c, "DynamicExpandDims", {x, axes}));
  return Status();
}

Status DynamicSqueezeOp(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output axes, Index(c, 1, "axes"));
  c.SetOut(0, Op(c, "DynamicSqueeze", {x, axes}));
  return Status();
}

Status DynamicSplitOp(NodeContext& c, int64_t axis) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output split, Index(c, 1, "split"));
  const int n = c.node().output_size();
  std::vector<Output> parts = c.b().AddNode(
      "DynamicSplit", {x, split}, {{"num_split", AttrValue(int64_t{n})}, {"axis", AttrValue(axis)}}, c.Name());
  if (static_cast<int>(parts.size()) != n) return c.b().status();
  for (int i = 0; i < n; ++i) c.SetOut(i, parts[static_cast<std::size_t>(i)]);
  return Status();
}

}  // namespace weft::onnx_io::convert
