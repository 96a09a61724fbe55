// ONNX operators whose shape-like inputs (axes, pads, repeats, split sizes,
// slice bounds) are computed at run time: the Weft ops that take them as
// tensors (DynamicSlice, DynamicPad, DynamicTile, DynamicSum,
// DynamicExpandDims, DynamicSqueeze, DynamicSplit; core/ops/dynamic_shape_ops.cc),
// and Resize with fed scales or sizes (Weft's Resize, core/ops/resize_ops.cc).
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

// An initializer is not fed, even a float one that becomes a variable.
bool Fed(NodeContext& c, int i) { return c.has_input(i) && !c.Initial(i).valid(); }

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

// |weft_op| of input 0 and the index input 1 (named |what|): Tile's
// repeats, Unsqueeze's and Squeeze's axes.
Status DynamicIndexOp(NodeContext& c, std::string_view weft_op, std::string_view what) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output index, Index(c, 1, what));
  c.SetOut(0, Op(c, weft_op, {x, index}));
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

// Resize whose scales or sizes are fed (or with tf_crop_and_resize): Weft's
// Resize op, which takes them at run time; Upsample (opsets 7 to 9) as its
// asymmetric form (nearest rounding down). An absent roi, scales or sizes
// is an empty tensor.
Status RuntimeResize(NodeContext& c, bool upsample) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  auto input = [&](int i, DType dtype, const char* what) -> Expected<Output> {
    if (i < 0 || !c.has_input(i)) {
      WEFT_ASSIGN_OR_RETURN(Tensor empty, Tensor::Zeros(dtype, Shape{0}));
      return ConstOf(c, empty, StrCat(what, "_absent"));
    }
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(i));
    return v.dtype() == dtype ? v : Op(c, "Cast", {v}, {{"DstT", AttrValue(dtype)}}, StrCat(what, "_cast"));
  };
  const std::string coords =
      upsample ? std::string("asymmetric") : c.Str("coordinate_transformation_mode", "half_pixel");
  WEFT_ASSIGN_OR_RETURN(Output roi, input(upsample ? -1 : 1, DType::kF32, "roi"));
  WEFT_ASSIGN_OR_RETURN(Output scales, input(upsample ? 1 : 2, DType::kF32, "scales"));
  WEFT_ASSIGN_OR_RETURN(Output sizes, input(upsample ? -1 : 3, DType::kI64, "sizes"));
  std::string mode = c.Str("mode", "nearest");
  if (mode == "bilinear") mode = "linear";  // Upsample-7's name
  c.SetOut(
      0, Op(c, "Resize", {x, roi, scales, sizes},
            {{"mode", AttrValue(mode)},
             {"coordinate_transformation_mode", AttrValue(coords)},
             {"nearest_mode", AttrValue(upsample ? std::string("floor") : c.Str("nearest_mode", "round_prefer_floor"))},
             {"cubic_coeff_a", AttrValue(c.Float("cubic_coeff_a", -0.75))},
             {"exclude_outside", AttrValue(c.Int("exclude_outside", 0) != 0)},
             {"extrapolation_value", AttrValue(c.Float("extrapolation_value", 0.0))}}));
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
