// OnnxUnique: ONNX's Unique (opset 11), for the ONNX importer. Weft's own
// Unique (sparse_ops.cc) has TensorFlow's semantics (1-D, order of first
// occurrence, two outputs) and is a different op.
//
// How many distinct items x has is only known by running the op, so the
// shape function gives that dimension as unknown (0 when x has no items);
// the CPU kernel (plugins/devices/cpu/kernels/unique.cc) repeats its checks
// with the same messages.
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// For x without an axis: y, indices and counts are [?] (0 when x is
// empty), inverse_indices [x's element count]. With an axis: y is x with
// that dimension unknown (0 when it is 0), inverse_indices [that
// dimension].
Status OnnxUniqueShape(InferenceContext& c) {
  const Shape& x = c.input_shape(0);
  int64_t items = -1;  // slices along the axis, or elements
  if (!c.Bool("has_axis")) {
    if (!x.unknown_rank() && x.IsFullyDefined()) items = x.num_elements();
    for (int i = 0; !x.unknown_rank() && i < x.rank(); ++i) {
      if (x.dim(i) == 0) items = 0;
    }
    const Shape unique{items == 0 ? 0 : Shape::kUnknownDim};
    c.set_output(0, unique);
    c.set_output(1, unique);
    c.set_output(2, Shape{items});
    c.set_output(3, unique);
    return Status();
  }
  if (x.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    for (int i = 1; i < 4; ++i) c.set_output(i, Shape{Shape::kUnknownDim});
    return Status();
  }
  if (x.rank() == 0) return c.Error("x must have rank >= 1 to take slices along an axis, got a scalar");
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), x.rank()));
  items = x.dim(axis);
  std::vector<int64_t> dims = x.dims();
  dims[static_cast<std::size_t>(axis)] = items == 0 ? 0 : Shape::kUnknownDim;
  const Shape unique{dims[static_cast<std::size_t>(axis)]};
  c.set_output(0, Shape(dims));
  c.set_output(1, unique);
  c.set_output(2, Shape{items});
  c.set_output(3, unique);
  return Status();
}

}  // namespace

Status RegisterUniqueOps(OpRegistry& r) {
  return r.Register(
      OpDefBuilder("OnnxUnique")
          .Input("x: T")
          .Output("y: T")
          .Output("indices: i64")
          .Output("inverse_indices: i64")
          .Output("counts: i64")
          .Attr("T: {numeric}")
          .Attr("sorted: bool = true")
          .Attr("axis: int = 0")
          .Attr("has_axis: bool = false")
          .Shape(OnnxUniqueShape)
          .Doc("ONNX's Unique (opset 11). Without has_axis, the items are the elements of x flattened; with it, "
               "the slices of x along 'axis' (negative counts from the rank). y holds the distinct items: in "
               "ascending order when sorted (slices in lexicographic order of their elements, row-major), else in "
               "the order of their first occurrence; it is 1-D without an axis, else x with that dimension the "
               "number of distinct slices. indices gives the position in x (flattened, or along the axis) of each "
               "item's first occurrence, inverse_indices for each item of x the position of its item in y, and "
               "counts how often each occurs. Floats compare by value: +0 and -0 are one value (y keeps the first "
               "one's sign), and every NaN equals every other NaN and is above every number (as numpy.unique "
               "without an axis). Slices of no elements are all equal. Weft's Unique is TensorFlow's. Not "
               "differentiable."));
}

}  // namespace weft::ops
