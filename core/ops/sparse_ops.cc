// Ops that route rows by index, for sparse reads and updates of large
// variables (TensorFlow's ops of the same names): Unique, DynamicPartition
// and DynamicStitch. A variable partitioned across parameter servers is
// read by splitting the ids by part (DynamicPartition), gathering each part
// where it lives and stitching the rows back in order (DynamicStitch);
// Unique sums a sparse gradient's repeated rows before it is sent (see
// docs/distributed.md, "Partitioned variables").
#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// Unique: y and idx are 1-D; idx has x's length, y at most that.
Status UniqueShape(InferenceContext& c) {
  const Shape& x = c.input_shape(0);
  if (!x.unknown_rank() && x.rank() != 1) return c.Error("x must be 1-D, got shape ", x.ToString());
  c.set_output(0, Shape{Shape::kUnknownDim});
  c.set_output(1, x.unknown_rank() ? Shape{Shape::kUnknownDim} : x);
  return Status();
}

// DynamicPartition: partitions' shape is a prefix of data's; each output
// is [?] + data.shape[rank(partitions):].
Status DynamicPartitionShape(InferenceContext& c) {
  const int64_t n = c.Int("num_partitions");
  const Shape& data = c.input_shape(0);
  const Shape& partitions = c.input_shape(1);
  if (n < 1) return c.Error("num_partitions must be >= 1, got ", n);
  if (data.unknown_rank() || partitions.unknown_rank()) {
    for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, Shape::UnknownRank());
    return Status();
  }
  const Shape prefix(
      std::vector<int64_t>(data.dims().begin(), data.dims().begin() + std::min(partitions.rank(), data.rank())));
  if (partitions.rank() > data.rank() || !prefix.IsCompatibleWith(partitions)) {
    return c.Error("partitions' shape ", partitions.ToString(), " is not a prefix of data's shape ", data.ToString());
  }
  std::vector<int64_t> dims{Shape::kUnknownDim};
  dims.insert(dims.end(), data.dims().begin() + partitions.rank(), data.dims().end());
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, Shape(dims));
  return Status();
}

// DynamicStitch: [max(indices) + 1] + data[i].shape[rank(indices[i]):],
// the trailing part equal for every i.
Status DynamicStitchShape(InferenceContext& c) {
  const int n = c.num_inputs() / 2;
  Shape inner = Shape::UnknownRank();
  for (int i = 0; i < n; ++i) {
    const Shape& indices = c.input_shape(i);
    const Shape& data = c.input_shape(n + i);
    if (indices.unknown_rank() || data.unknown_rank()) continue;
    const Shape prefix(
        std::vector<int64_t>(data.dims().begin(), data.dims().begin() + std::min(indices.rank(), data.rank())));
    if (indices.rank() > data.rank() || !prefix.IsCompatibleWith(indices)) {
      return c.Error("indices[", i, "]'s shape ", indices.ToString(), " is not a prefix of data[", i, "]'s shape ",
                     data.ToString());
    }
    const Shape rest(std::vector<int64_t>(data.dims().begin() + indices.rank(), data.dims().end()));
    auto merged = inner.Merge(rest);
    if (!merged.ok()) {
      return c.Error("data[", i, "] has rows of shape ", rest.ToString(), ", but the data before it has rows of shape ",
                     inner.ToString());
    }
    inner = *merged;
  }
  if (inner.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  std::vector<int64_t> dims{Shape::kUnknownDim};
  dims.insert(dims.end(), inner.dims().begin(), inner.dims().end());
  c.set_output(0, Shape(dims));
  return Status();
}

}  // namespace

Status RegisterSparseOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Unique")
          .Input("x: T")
          .Output("y: T")
          .Output("idx: out_idx")
          .Attr("T: {numeric}")
          .Attr("out_idx: {i32, i64} = 'i32'")
          .Shape(UniqueShape)
          .Doc("The distinct values of the 1-D x in the order of their first occurrence (y), and for each "
               "element of x the position of its value in y (idx), so that x = y[idx]. Floats compare by value "
               "(+0 and -0 are one value; each NaN is its own). numpy.unique(x, return_index=True, "
               "return_inverse=True), reordered by first occurrence.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("DynamicPartition")
          .Input("data: T")
          .Input("partitions: i32")
          .Output("outputs: num_partitions * T")
          .Attr("T: {all}")
          .Attr("num_partitions: int >= 1")
          .Shape(DynamicPartitionShape)
          .Doc("Sorts the slices of data into num_partitions outputs by partitions: outputs[p] holds, in "
               "order, the slices data[i...] with partitions[i...] == p. partitions' shape must be a prefix of "
               "data's; each output is [count] + data.shape[rank(partitions):]. A partition number outside "
               "[0, num_partitions) is an error naming it and its position.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("DynamicStitch")
          .Input("indices: N * i32")
          .Input("data: N * T")
          .Output("merged: T")
          .Attr("N: int >= 1")
          .Attr("T: {all}")
          .Shape(DynamicStitchShape)
          .Doc("Interleaves the slices of the data tensors into one: merged[indices[m][i...], ...] = "
               "data[m][i..., ...], with merged.shape[0] = max(indices) + 1 (0 when every index list is empty). "
               "Each indices[m]'s shape must be a prefix of data[m]'s, and the rows must have one shape. When an "
               "index repeats, the last (by m, then by position) wins; an index that no list names, or a "
               "negative one, is an error naming it.")));
  return Status();
}

}  // namespace weft::ops
