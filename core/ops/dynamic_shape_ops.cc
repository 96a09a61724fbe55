// Ops whose shape-like parameters are run-time tensors, with the semantics
// of ONNX (opset 13) Slice, Pad, Tile, ReduceSum, Unsqueeze, Squeeze and
// Split: DynamicSlice, DynamicPad, DynamicTile, DynamicSum,
// DynamicExpandDims, DynamicSqueeze and DynamicSplit. Their twins that take
// the parameters as attrs are in array_ops.cc and math_ops.cc.
//
// When every shape-like input is a constant, the shape functions compute
// the exact output shape and refuse what the kernels refuse, in the same
// words (plugins/devices/cpu/kernels/dynamic_shape.cc repeats every check);
// otherwise they give what is known without the values: the rank, and the
// dimensions that do not depend on them.
#include <algorithm>
#include <optional>

#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// --- Helpers -----------------------------------------------------------------------

// The length of input |i| (named |what|), which must be 1-D: -1 when its
// shape is not known.
Expected<int64_t> VectorLength(InferenceContext& c, int i, const char* what) {
  const Shape& s = c.input_shape(i);
  if (s.unknown_rank()) return int64_t{-1};
  if (s.rank() != 1) return c.Error(what, " must be a 1-D tensor, got shape ", s.ToString());
  return s.dim(0);
}

// The entries of |axes| in [-rank, rank), made non-negative, in their order;
// a repeated axis is an error.
Expected<std::vector<int>> UniqueAxes(InferenceContext& c, const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  for (int64_t a : axes) {
    WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, rank, "axes entry"));
    if (std::find(out.begin(), out.end(), axis) != out.end()) {
      return c.Error("axes entry ", a, " repeats axis ", axis);
    }
    out.push_back(axis);
  }
  return out;
}

void SetAllOutputs(InferenceContext& c, const Shape& shape) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, shape);
}

// --- DynamicSlice ------------------------------------------------------------------

// "2, 2, 1 and 2" ("?" where unknown).
std::string LengthsString(const std::vector<int64_t>& n) {
  auto one = [](int64_t v) { return v < 0 ? std::string("?") : StrCat(v); };
  return StrCat(one(n[0]), ", ", one(n[1]), ", ", one(n[2]), " and ", one(n[3]));
}

// The elements ONNX's Slice takes from a dimension of size |d| (>= 0):
// negative bounds count from the end, then start is clamped to [0, d] and
// end to [0, d] (step > 0), or start to [0, d-1] and end to [-1, d-1]
// (step < 0). In unsigned arithmetic, as |step| may be INT64_MIN.
int64_t SliceLength(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += d;
  if (end < 0) end += d;
  const int64_t start_max = step > 0 ? d : d - 1;
  const int64_t end_min = step > 0 ? 0 : -1, end_max = step > 0 ? d : d - 1;
  start = std::min(std::max<int64_t>(start, 0), start_max);
  end = std::min(std::max(end, end_min), end_max);
  if (step > 0 ? end <= start : start <= end) return 0;
  const uint64_t distance = step > 0 ? static_cast<uint64_t>(end - start) : static_cast<uint64_t>(start - end);
  const uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  return static_cast<int64_t>(1 + (distance - 1) / magnitude);
}

Status DynamicSliceShape(InferenceContext& c) {
  static constexpr const char* kNames[] = {"starts", "ends", "axes", "steps"};
  std::vector<int64_t> lengths;
  for (int i = 1; i <= 4; ++i) {
    WEFT_ASSIGN_OR_RETURN(int64_t n, VectorLength(c, i, kNames[i - 1]));
    lengths.push_back(n);
  }
  int64_t known = -1;
  for (int64_t n : lengths) {
    if (n >= 0 && known >= 0 && n != known) {
      return c.Error("starts, ends, axes and steps have ", LengthsString(lengths), " entries; they must match");
    }
    if (n >= 0) known = n;
  }
  const auto steps = ConstIntVector(c, 4);
  for (std::size_t k = 0; steps && k < steps->size(); ++k) {
    if ((*steps)[k] == 0) return c.Error("a step is 0 (steps entry ", k, ")");
  }
  const Shape& in = c.input_shape(0);
  const auto axes = ConstIntVector(c, 3);
  if (in.unknown_rank() || !axes) {
    c.set_output(0, in.unknown_rank() ? Shape::UnknownRank() : Shape::UnknownDims(in.rank()));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<int> normalized, UniqueAxes(c, *axes, in.rank()));
  const auto starts = ConstIntVector(c, 1), ends = ConstIntVector(c, 2);
  std::vector<int64_t> dims = in.dims();
  for (std::size_t k = 0; k < normalized.size(); ++k) {
    int64_t& d = dims[static_cast<std::size_t>(normalized[k])];
    d = starts && ends && steps && d >= 0 ? SliceLength(d, (*starts)[k], (*ends)[k], (*steps)[k]) : -1;
  }
  c.set_output(0, Shape(dims));
  return Status();
}

// --- DynamicPad --------------------------------------------------------------------

// Dimension |i| of size |d| (>= 0) padded by |b| before and |e| after in
// |mode|, as ONNX's Pad: negative pads remove elements first, then the
// rest is padded.
Expected<int64_t> PaddedDim(InferenceContext& c, int i, int64_t d, int64_t b, int64_t e, const std::string& mode) {
  // Each removal checked against d first, so that negating cannot overflow.
  if (b < -d || e < -d || (b < 0 ? -b : 0) > d - (e < 0 ? -e : 0)) {
    return c.Error("pads ", b, " and ", e, " remove more than the ", d, " elements of dimension ", i);
  }
  const int64_t kept = d + std::min<int64_t>(b, 0) + std::min<int64_t>(e, 0);
  const int64_t before = std::max<int64_t>(b, 0), after = std::max<int64_t>(e, 0);
  if (mode == "reflect" && (before > 0 || after > 0) && (before >= kept || after >= kept)) {
    return c.Error("reflect padding of dimension ", i, " must be smaller than its size ", kept, ", got ", before,
                   " before and ", after, " after");
  }
  if (mode == "edge" && (before > 0 || after > 0) && kept == 0) {
    return c.Error("edge padding of dimension ", i, " has no edge to repeat: the dimension is empty");
  }
  const auto padded = CheckedAdd(before, after);
  const auto size = padded ? CheckedAdd(kept, *padded) : std::nullopt;
  if (!size) return c.Error("padding dimension ", i, " of size ", d, " by ", b, " and ", e, " does not fit in 64 bits");
  return *size;
}

Status DynamicPadShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(int64_t n, VectorLength(c, 1, "pads"));
  const Shape& value = c.input_shape(2);
  if (value.IsFullyDefined() && value.num_elements() != 1) {
    return c.Error("constant_value must be a scalar or have one element, got shape ", value.ToString());
  }
  const Shape& in = c.input_shape(0);
  if (in.unknown_rank()) {
    c.set_output(0, n >= 0 && n % 2 == 0 ? Shape::UnknownDims(static_cast<int>(n / 2)) : Shape::UnknownRank());
    return Status();
  }
  const int rank = in.rank();
  if (n >= 0 && n != 2 * rank) {
    return c.Error("pads has ", n, " entries for a tensor of rank ", rank, "; it needs ", 2 * rank,
                   " (every dimension's begin, then every dimension's end)");
  }
  const auto pads = ConstIntVector(c, 1);
  std::vector<int64_t> dims(static_cast<std::size_t>(rank), -1);
  for (int i = 0; pads && i < rank; ++i) {
    if (in.dim(i) < 0) continue;
    WEFT_ASSIGN_OR_RETURN(dims[static_cast<std::size_t>(i)],
                          PaddedDim(c, i, in.dim(i), (*pads)[static_cast<std::size_t>(i)],
                                    (*pads)[static_cast<std::size_t>(rank + i)], c.String("mode")));
  }
  c.set_output(0, Shape(dims));
  return Status();
}

// --- DynamicTile -------------------------------------------------------------------

Status DynamicTileShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(int64_t n, VectorLength(c, 1, "repeats"));
  const Shape& in = c.input_shape(0);
  if (in.unknown_rank()) {
    c.set_output(0, n >= 0 ? Shape::UnknownDims(static_cast<int>(n)) : Shape::UnknownRank());
    return Status();
  }
  if (n >= 0 && n != in.rank()) return c.Error("repeats has ", n, " entries for a tensor of rank ", in.rank());
  const auto repeats = ConstIntVector(c, 1);
  if (!repeats) {
    c.set_output(0, Shape::UnknownDims(in.rank()));
    return Status();
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    const int64_t m = (*repeats)[static_cast<std::size_t>(i)], d = in.dim(i);
    if (m < 0) return c.Error("repeats must be >= 0, got ", m, " for dimension ", i);
    const auto tiled = CheckedMul(std::max<int64_t>(d, 0), m);
    if (!tiled) return c.Error("dimension ", i, " (", d, ") times ", m, " does not fit in 64 bits");
    dims.push_back(d < 0 ? -1 : *tiled);
  }
  c.set_output(0, Shape(dims));
  return Status();
}

// --- DynamicSum --------------------------------------------------------------------

// The output of reducing |in| (known rank) over |axes| (normalised).
Shape Reduced(const Shape& in, const std::vector<int>& axes, bool keep) {
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) {
      dims.push_back(in.dim(i));
    } else if (keep) {
      dims.push_back(1);
    }
  }
  return Shape(dims);
}

Status DynamicSumShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(int64_t n, VectorLength(c, 1, "axes"));
  const Shape& in = c.input_shape(0);
  const bool keep = c.Bool("keep_dims");
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  std::vector<int> all(static_cast<std::size_t>(in.rank()));
  for (int i = 0; i < in.rank(); ++i) all[static_cast<std::size_t>(i)] = i;
  if (n == 0) {  // every axis, or none
    c.set_output(0, c.Bool("noop_with_empty_axes") ? in : Reduced(in, all, keep));
    return Status();
  }
  const auto axes = ConstIntVector(c, 1);
  if (axes) {
    WEFT_ASSIGN_OR_RETURN(std::vector<int> normalized, UniqueAxes(c, *axes, in.rank()));
    c.set_output(0, Reduced(in, normalized, keep));
  } else if (keep) {
    c.set_output(0, Shape::UnknownDims(in.rank()));
  } else {
    c.set_output(0,
                 n >= 0 && n <= in.rank() ? Shape::UnknownDims(in.rank() - static_cast<int>(n)) : Shape::UnknownRank());
  }
  return Status();
}

// --- DynamicExpandDims, DynamicSqueeze ---------------------------------------------

Status DynamicExpandDimsShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(int64_t n, VectorLength(c, 1, "axes"));
  const Shape& in = c.input_shape(0);
  if (in.unknown_rank() || n < 0) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  const int64_t out_rank = in.rank() + n;
  if (out_rank > kMaxRank) return c.Error("the result would have rank ", out_rank, ", above the maximum of ", kMaxRank);
  const auto axes = ConstIntVector(c, 1);
  if (!axes) {
    c.set_output(0, Shape::UnknownDims(static_cast<int>(out_rank)));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<int> normalized, UniqueAxes(c, *axes, static_cast<int>(out_rank)));
  std::vector<int64_t> dims;
  int next = 0;
  for (int i = 0; i < out_rank; ++i) {
    const bool inserted = std::find(normalized.begin(), normalized.end(), i) != normalized.end();
    dims.push_back(inserted ? 1 : in.dim(next++));
  }
  c.set_output(0, Shape(dims));
  return Status();
}

Status DynamicSqueezeShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(int64_t n, VectorLength(c, 1, "axes"));
  const Shape& in = c.input_shape(0);
  const auto axes = ConstIntVector(c, 1);
  if (in.unknown_rank() || !axes) {
    const bool known = !in.unknown_rank() && n >= 0 && n <= in.rank();
    c.set_output(0, known ? Shape::UnknownDims(in.rank() - static_cast<int>(n)) : Shape::UnknownRank());
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<int> normalized, UniqueAxes(c, *axes, in.rank()));
  for (std::size_t k = 0; k < normalized.size(); ++k) {
    const int64_t d = in.dim(normalized[k]);
    if (d >= 0 && d != 1) {
      return c.Error("cannot squeeze axis ", (*axes)[k], " of ", in.ToString(), ": its size is ", d, ", not 1");
    }
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    if (std::find(normalized.begin(), normalized.end(), i) == normalized.end()) dims.push_back(in.dim(i));
  }
  c.set_output(0, Shape(dims));
  return Status();
}

// --- DynamicSplit ------------------------------------------------------------------

// Checks |split| (entries >= 0 summing to |d|, the size of dimension |axis|
// of |in|, when known).
Status CheckSplit(InferenceContext& c, const std::vector<int64_t>& split, const Shape& in, int axis) {
  int64_t sum = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    if (split[i] < 0) return c.Error("split entries must be >= 0, got ", split[i], " at position ", i);
    const auto more = CheckedAdd(sum, split[i]);
    if (!more) return c.Error("split's entries ", ListString(split), " sum past 2^63");
    sum = *more;
  }
  const int64_t d = in.dim(axis);
  if (d >= 0 && sum != d) {
    return c.Error("split's entries ", ListString(split), " sum to ", sum, ", but dimension ", axis, " of ",
                   in.ToString(), " has size ", d);
  }
  return Status();
}

Status DynamicSplitShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(int64_t n, VectorLength(c, 1, "split"));
  const int64_t num_split = c.Int("num_split");
  if (n >= 0 && n != num_split) return c.Error("split has ", n, " entries for num_split ", num_split);
  const Shape& in = c.input_shape(0);
  if (in.unknown_rank()) {
    SetAllOutputs(c, Shape::UnknownRank());
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), in.rank()));
  std::vector<int64_t> dims = in.dims();
  const auto split = ConstIntVector(c, 1);
  if (!split) {
    dims[static_cast<std::size_t>(axis)] = -1;
    SetAllOutputs(c, Shape(dims));
    return Status();
  }
  WEFT_RETURN_IF_ERROR(CheckSplit(c, *split, in, axis));
  for (int i = 0; i < c.num_outputs(); ++i) {
    dims[static_cast<std::size_t>(axis)] = (*split)[static_cast<std::size_t>(i)];
    c.set_output(i, Shape(dims));
  }
  return Status();
}

}  // namespace

Status RegisterDynamicShapeOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("DynamicSlice")
          .Input("input: T")
          .Input("starts: Tidx")
          .Input("ends: Tidx")
          .Input("axes: Tidx")
          .Input("steps: Tidx")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("Tidx: {i32, i64}")
          .Shape(DynamicSliceShape)
          .Doc("ONNX's Slice (opset 13): along each axes[i] (negative counts from the rank; no repeats), the elements "
               "starts[i], starts[i] + steps[i], ... before ends[i]; negative bounds count from the end, then are "
               "clamped to the dimension ([0, d] for a positive step, start to [0, d-1] and end to [-1, d-1] for a "
               "negative one). A step of 0 is an error; axes not listed are kept whole.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("DynamicPad")
          .Input("input: T")
          .Input("pads: Tidx")
          .Input("constant_value: T")
          .Output("output: T")
          .Attr("T: {numeric, bool}")
          .Attr("Tidx: {i32, i64}")
          .Attr("mode: {'constant', 'reflect', 'edge'} = 'constant'")
          .Shape(DynamicPadShape)
          .Doc("ONNX's Pad (opset 13): pads is [x1_begin, x2_begin, ..., x1_end, x2_end, ...]; negative pads remove "
               "elements first, then the rest is padded with constant_value (a one-element tensor), mirrored "
               "without repeating the edge (reflect, each pad smaller than the dimension) or repeating the edge "
               "(edge), as NumPy's pad.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("DynamicTile")
                                      .Input("input: T")
                                      .Input("repeats: Tidx")
                                      .Output("output: T")
                                      .Attr("T: {all}")
                                      .Attr("Tidx: {i32, i64}")
                                      .Shape(DynamicTileShape)
                                      .Doc("ONNX's Tile: repeats the tensor repeats[i] >= 0 times along each axis i "
                                           "(repeats has one entry per axis; NumPy's tile with equal ranks).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("DynamicSum")
          .Input("input: T")
          .Input("axes: Tidx")
          .Output("output: T")
          .Attr("T: {numeric}")
          .Attr("Tidx: {i32, i64}")
          .Attr("keep_dims: bool = true")
          .Attr("noop_with_empty_axes: bool = false")
          .Shape(DynamicSumShape)
          .Doc("ONNX's ReduceSum (opset 13): the sum over the axes in the 1-D 'axes' (negative counts from the rank; "
               "no repeats); empty axes reduce every axis, or with noop_with_empty_axes none (the output is the "
               "input). With keep_dims the reduced axes stay, with size 1. Integers wrap; floats add in at least "
               "f32.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("DynamicExpandDims")
          .Input("input: T")
          .Input("axes: Tidx")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("Tidx: {i32, i64}")
          .Shape(DynamicExpandDimsShape)
          .Doc("ONNX's Unsqueeze (opset 13): the result has rank + len(axes) dimensions; those at the positions in "
               "'axes' (in the result, negative counting from its rank; no repeats) have size 1, and the input's "
               "dimensions fill the others in order.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("DynamicSqueeze")
          .Input("input: T")
          .Input("axes: Tidx")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("Tidx: {i32, i64}")
          .Shape(DynamicSqueezeShape)
          .Doc("ONNX's Squeeze (opset 13) with axes given: removes the dimensions in 'axes' (negative counts from the "
               "rank; no repeats), each of which must have size 1. Empty axes remove nothing.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("DynamicSplit")
          .Input("value: T")
          .Input("split: Tidx")
          .Output("output: num_split * T")
          .Attr("T: {all}")
          .Attr("Tidx: {i32, i64}")
          .Attr("num_split: int >= 1")
          .Attr("axis: int")
          .Shape(DynamicSplitShape)
          .Doc("ONNX's Split (opset 13) with split given: output i is the next split[i] elements along 'axis' "
               "(negative counts from the rank); split has num_split entries >= 0 summing to that dimension.")));
  return Status();
}

}  // namespace weft::ops
