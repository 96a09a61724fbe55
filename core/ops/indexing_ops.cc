// Ops that address elements by an index per element along an axis
// (GatherElements, ScatterElements) or find them (TopK, NonZero): ONNX's
// ops of these names, which the ONNX importer maps onto.
//
// Each shape function checks what it can see; the CPU kernels
// (plugins/devices/cpu/kernels/indexing.cc) repeat every check with the
// same message, for shapes and values only known at run time.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// Checks indices (input 1) against data (input 0) as GatherElements and
// ScatterElements need them: equal ranks, and indices no larger than data
// in every dimension but 'axis'.
Status CheckElementIndices(InferenceContext& c) {
  const Shape& data = c.input_shape(0);
  const Shape& indices = c.input_shape(1);
  if (data.unknown_rank()) return Status();
  const int rank = data.rank();
  if (rank == 0) return c.Error("data must have rank >= 1");
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), rank));
  if (indices.unknown_rank()) return Status();
  if (indices.rank() != data.rank()) {
    return c.Error("indices has rank ", indices.rank(), " (", indices.ToString(), ") but data has rank ", data.rank(),
                   " (", data.ToString(), "); they must be equal");
  }
  for (int d = 0; d < rank; ++d) {
    if (d != axis && data.dim(d) >= 0 && indices.dim(d) > data.dim(d)) {
      return c.Error("indices has shape ", indices.ToString(), " and data ", data.ToString(), ": dimension ", d,
                     " of indices (", indices.dim(d), ") is larger than data's (", data.dim(d), "); only along axis ",
                     axis, " may it be larger");
    }
  }
  return Status();
}

// Output 0 has the shape of input |like|, or unknown dims of input |other|'s
// rank when only that is known.
void ShapeLike(InferenceContext& c, int like, int other) {
  const Shape& s = c.input_shape(like);
  const Shape& o = c.input_shape(other);
  c.set_output(0, !s.unknown_rank() || o.unknown_rank() ? s : Shape::UnknownDims(o.rank()));
}

Status GatherElementsShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(CheckElementIndices(c));
  ShapeLike(c, 1, 0);
  return Status();
}

Status ScatterElementsShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(CheckElementIndices(c));
  const Shape& indices = c.input_shape(1);
  const Shape& updates = c.input_shape(2);
  if (!indices.IsCompatibleWith(updates)) {
    return c.Error("updates has shape ", updates.ToString(), " but indices ", indices.ToString(),
                   "; they must have one shape");
  }
  ShapeLike(c, 0, 1);
  return Status();
}

Status TopKShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const Shape& k_shape = c.input_shape(1);
  if (k_shape.rank() > 0) return c.Error("k must be a scalar, got shape ", k_shape.ToString());
  if (in.unknown_rank()) {
    for (int i = 0; i < 2; ++i) c.set_output(i, Shape::UnknownRank());
    return Status();
  }
  if (in.rank() == 0) return c.Error("input must have rank >= 1");
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), in.rank()));
  const std::optional<int64_t> k = ConstIntScalar(c, 1);
  const int64_t dim = in.dim(axis);
  if (k && dim >= 0 && (*k < 0 || *k > dim)) {
    return c.Error("k = ", *k, " is out of range for axis ", axis, " of input ", in.ToString(), " (valid: 0 to ", dim,
                   ")");
  }
  std::vector<int64_t> dims = in.dims();
  dims[static_cast<std::size_t>(axis)] = k && *k >= 0 ? *k : Shape::kUnknownDim;
  for (int i = 0; i < 2; ++i) c.set_output(i, Shape(dims));
  return Status();
}

// [rank, count]: the count is known only for an input without elements.
Status NonZeroShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (in.unknown_rank()) {
    c.set_output(0, Shape{Shape::kUnknownDim, Shape::kUnknownDim});
    return Status();
  }
  c.set_output(0, Shape{in.rank(), in.num_elements() == 0 ? 0 : Shape::kUnknownDim});
  return Status();
}

}  // namespace

Status RegisterIndexingOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("GatherElements")
          .Input("data: T")
          .Input("indices: Tindices")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("Tindices: {i32, i64}")
          .Attr("axis: int = 0")
          .Shape(GatherElementsShape)
          .Doc("The elements of data picked one per element of indices along 'axis' (ONNX's GatherElements, "
               "NumPy's take_along_axis): for axis 0, output[i][j][k] = data[indices[i][j][k]][j][k], and likewise "
               "along another axis. indices has data's rank, and in every dimension but 'axis' at most data's "
               "size; the output has indices' shape. A negative index counts from the end; an index outside "
               "[-n, n) for an axis of size n is an error naming it and its position.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ScatterElements")
          .Input("data: T")
          .Input("indices: Tindices")
          .Input("updates: T")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("Tindices: {i32, i64}")
          .Attr("axis: int = 0")
          .Attr("reduction: {'none', 'add', 'mul'} = 'none'")
          .Shape(ScatterElementsShape)
          .Doc("A copy of data with the elements of updates written one per element of indices along 'axis' "
               "(ONNX's ScatterElements of opset 16, NumPy's put_along_axis): for axis 0, "
               "output[indices[i][j][k]][j][k] = updates[i][j][k], and likewise along another axis. indices and "
               "updates have one shape, of data's rank, and in every dimension but 'axis' at most data's size. "
               "reduction 'add' adds the updates to data's elements and 'mul' multiplies them into them "
               "(integers wrap; for bool, add is or and mul is and, as in NumPy); where indices name one "
               "position more than once, 'none' keeps the update that comes last in row-major order, and 'add' "
               "and 'mul' apply every one, in that order. A negative index counts from the end; an index out of "
               "range is an error naming it and its position. Gradients exist for 'none' and 'add'; 'mul' has "
               "none (the gradient of an update repeated at one position would divide by the others).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("TopK")
          .Input("input: T")
          .Input("k: Tk")
          .Output("values: T")
          .Output("indices: i64")
          .Attr("T: {numeric}")
          .Attr("Tk: {i32, i64} = 'i64'")
          .Attr("axis: int = -1")
          .Attr("largest: bool = true")
          .Attr("sorted: bool = true")
          .Shape(TopKShape)
          .Doc("The k largest elements of input along 'axis' (the k smallest with largest = false) and their "
               "indices along it (ONNX's TopK): both have input's shape with that dimension replaced by the "
               "scalar k, 0 <= k <= its size. They come largest (smallest) first; equal elements in the order of "
               "their indices, the lower first. NaN counts as larger than every number, as NumPy's sort places "
               "it (first with largest, last without), and -0 equals +0. sorted = false gives the same order "
               "(ONNX leaves it unspecified then). The gradient goes to the input elements picked.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("NonZero")
          .Input("x: T")
          .Output("y: i64")
          .Attr("T: {numeric, bool}")
          .Shape(NonZeroShape)
          .Doc("The indices of the nonzero elements of x (ONNX's NonZero, numpy.array(numpy.nonzero(x))): shape "
               "[rank(x), count], column j holding the index of the j-th nonzero element in row-major order. NaN "
               "is nonzero, -0 is zero. A scalar gives [0, 1] when nonzero and [0, 0] when zero (its one element "
               "has an empty index), as ONNX's shape inference says; NumPy's deprecated nonzero of a 0-d array "
               "and ONNX Runtime give [1, 1] or [1, 0]. The count depends on the values: the shape function "
               "knows only the rank. Not differentiable.")));
  return Status();
}

}  // namespace weft::ops
