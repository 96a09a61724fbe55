// ONNX array operators composed of Weft ops: Trilu, EyeLike, OneHot,
// DepthToSpace, SpaceToDepth, Compress (the conventions are in
// core/onnx/converters.h).
#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// The upper (or lower) triangle of the last two axes: x where
// j - i >= k (<= k), else 0. j - i is a constant of the static [M, N]; k
// may be known or fed.
Status Trilu(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  const int r = xs.rank();
  if (r >= 0 && r < 2) return c.Error("input must have rank 2 or more, got ", r);
  if (r < 0 || xs.dim(r - 2) < 0 || xs.dim(r - 1) < 0) {
    return c.Unsupported("Trilu of a matrix of unknown size (", xs.ToString(), ")");
  }
  const int64_t m = xs.dim(r - 2), n = xs.dim(r - 1);
  std::vector<int64_t> diff(static_cast<std::size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) diff[static_cast<std::size_t>(i * n + j)] = j - i;
  }
  Output k;
  if (!c.has_input(1)) {
    k = ConstOf(c, Tensor::Scalar<int64_t>(0), "k");
  } else if (c.Known(1).valid()) {
    WEFT_ASSIGN_OR_RETURN(double kv, c.KnownScalar(1, "k"));
    k = ConstOf(c, Tensor::Scalar<int64_t>(static_cast<int64_t>(kv)), "k");
  } else {
    WEFT_ASSIGN_OR_RETURN(Output kin, c.In(1));
    WEFT_ASSIGN_OR_RETURN(k, ScalarI64(c, kin, "k"));
  }
  const bool upper = c.Int("upper", 1) != 0;
  Output keep = Op(c, upper ? "GreaterEqual" : "LessEqual",
                   {ConstOf(c, Int64s(diff, Shape{m, n}), "diagonal_offset"), k}, {}, "kept");
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  c.SetOut(0, Op(c, "Select", {keep, x, zero}));
  return Status();
}

// A constant [M, N] with ones on diagonal k, of attr 'dtype' or the
// input's dtype.
Status EyeLike(NodeContext& c) {
  const Shape xs = c.InShape(0);
  if (xs.rank() != 2 || !xs.IsFullyDefined()) {
    return c.Unsupported("EyeLike of an input of shape ", xs.ToString(), " (a static 2-D shape is needed)");
  }
  DType dtype = c.InDType(0);
  if (c.HasAttr("dtype")) {
    auto d = DTypeFromOnnx(static_cast<int32_t>(c.Int("dtype", 0)));
    if (!d.ok()) return d.status().WithContext("attr 'dtype'");
    dtype = *d;
  }
  const int64_t m = xs.dim(0), n = xs.dim(1), k = c.Int("k", 0);
  std::vector<double> eye(static_cast<std::size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    if (i + k >= 0 && i + k < n) eye[static_cast<std::size_t>(i * n + i + k)] = 1.0;
  }
  Output y = ConstOf(c, Tensor::FromVector<double>(eye, Shape{m, n}), dtype == DType::kF64 ? "" : "f64");
  c.SetOut(0, dtype == DType::kF64 ? y : Op(c, "Cast", {y}, {{"DstT", AttrValue(dtype)}}));
  return Status();
}

// OneHot(indices, depth, values = [off, on]): where the indices (negative
// ones counting from depth) equal Range(depth) laid along the new axis, on,
// else off. Depth and values may be fed.
Status OneHot(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output indices, c.In(0));
  const int r = c.InShape(0).rank();
  if (r < 0) return c.Unsupported("OneHot of indices of unknown rank");
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", -1), r + 1, "attr 'axis'"));
  Output depth;
  if (c.Known(1).valid()) {
    WEFT_ASSIGN_OR_RETURN(double d, c.KnownScalar(1, "depth"));
    if (d < 1) return c.Error("depth must be positive, got ", d);
    depth = ConstOf(c, Tensor::Scalar<int64_t>(static_cast<int64_t>(d)), "depth");
  } else {
    WEFT_ASSIGN_OR_RETURN(Output din, c.In(1));
    if (!IsInteger(din.dtype())) din = Op(c, "Cast", {din}, {{"DstT", AttrValue(DType::kI64)}}, "depth_i64");
    WEFT_ASSIGN_OR_RETURN(depth, ScalarI64(c, din, "depth"));
  }
  WEFT_ASSIGN_OR_RETURN(Output values, c.In(2));
  if (indices.dtype() != DType::kI64) indices = Op(c, "Cast", {indices}, {{"DstT", AttrValue(DType::kI64)}}, "indices");
  Output zero = ConstOf(c, Tensor::Scalar<int64_t>(0), "zero");
  indices = Op(c, "Select",
               {Op(c, "Less", {indices, zero}, {}, "negative"), Op(c, "Add", {indices, depth}, {}, "wrapped"), indices},
               {}, "index");
  // Range(depth) as [depth, 1, ...] with an axis of 1 for each index axis
  // after |axis|; the indices get an axis of 1 at |axis|.
  Output classes = Op(c, "Range", {zero, depth, ConstOf(c, Tensor::Scalar<int64_t>(1), "one")}, {}, "classes");
  std::vector<int64_t> laid(static_cast<std::size_t>(r - axis + 1), 1);
  laid[0] = -1;
  classes = Op(c, "Reshape", {classes, ConstOf(c, Int64s(laid), "classes_shape")}, {}, "classes_laid");
  Output hot =
      Op(c, "Equal", {Op(c, "ExpandDims", {indices}, {{"axis", AttrValue(axis)}}, "index_axis"), classes}, {}, "hot");
  Output off = Op(c, "Gather", {values, ConstOf(c, Tensor::Scalar<int64_t>(0), "off_index")}, {}, "off");
  Output on = Op(c, "Gather", {values, ConstOf(c, Tensor::Scalar<int64_t>(1), "on_index")}, {}, "on");
  c.SetOut(0, Op(c, "Select", {hot, on, off}));
  return Status();
}

// DepthToSpace and SpaceToDepth of [N, C, H, W] as Reshape, Transpose,
// Reshape (static C, H and W).
Status BlockRearrange(NodeContext& c, bool to_space) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  if (xs.rank() != 4 || xs.dim(1) < 0 || xs.dim(2) < 0 || xs.dim(3) < 0) {
    return c.Unsupported("an input of shape ", xs.ToString(), " (a 4-D [N, C, H, W] with static C, H and W)");
  }
  const int64_t b = c.Int("blocksize", 0);
  if (b < 1) return c.Error("attr 'blocksize' must be positive, got ", b);
  const int64_t n = xs.dim(0) < 0 ? -1 : xs.dim(0), ch = xs.dim(1), h = xs.dim(2), w = xs.dim(3);
  std::vector<int64_t> split, perm, out;
  if (to_space) {
    if (ch % (b * b) != 0) return c.Error("channels ", ch, " are not a multiple of blocksize^2 = ", b * b);
    const int64_t co = ch / (b * b);
    const std::string mode = c.Str("mode", "DCR");
    if (mode == "DCR") {
      split = {n, b, b, co, h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      split = {n, co, b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      return c.Error("attr 'mode' is ", Quote(mode), "; ONNX defines DCR and CRD");
    }
    out = {n, co, h * b, w * b};
  } else {
    if (h % b != 0 || w % b != 0) return c.Error("height ", h, " and width ", w, " must be multiples of blocksize ", b);
    split = {n, ch, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    out = {n, ch * b * b, h / b, w / b};
  }
  Output blocks = Op(c, "Reshape", {x, ConstOf(c, Int64s(split), "blocks_shape")}, {}, "blocks");
  Output moved = Op(c, "Transpose", {blocks}, {{"perm", AttrValue(perm)}}, "moved");
  c.SetOut(0, Op(c, "Reshape", {moved, ConstOf(c, Int64s(out), "shape")}));
  return Status();
}

// The slices along 'axis' (of the flattened input without one) where
// condition is true: Gather at NonZero(condition).
Status Compress(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output cond, c.In(1));
  if (cond.dtype() != DType::kBool) return c.Error("condition must be bool, got ", DTypeName(cond.dtype()));
  int64_t axis = 0;
  if (c.HasAttr("axis")) {
    WEFT_ASSIGN_OR_RETURN(axis, Axis(c, c.Int("axis", 0), c.InShape(0).rank(), "attr 'axis'"));
  } else {
    x = Op(c, "Reshape", {x, ConstOf(c, Int64s({-1}), "flat_shape")}, {}, "flat");
  }
  Output where = Op(c, "NonZero", {cond}, {}, "where");
  Output index = Op(c, "Reshape", {where, ConstOf(c, Int64s({-1}), "index_shape")}, {}, "index");
  c.SetOut(0, Op(c, "Gather", {x, index}, {{"axis", AttrValue(axis)}}));
  return Status();
}

}  // namespace

void AddArrayConverters(ConverterTable& t) {
  t["Trilu"] = Trilu;
  t["EyeLike"] = EyeLike;
  t["OneHot"] = OneHot;
  t["DepthToSpace"] = [](NodeContext& c) { return BlockRearrange(c, true); };
  t["SpaceToDepth"] = [](NodeContext& c) { return BlockRearrange(c, false); };
  t["Compress"] = Compress;
}

}  // namespace weft::onnx_io::convert
