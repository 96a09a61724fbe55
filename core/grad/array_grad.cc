// Gradients of the array and indexing ops: reshaping, slicing, joining,
// gathering, scattering, TopK.
#include <numeric>

#include "core/grad/gradients.h"

namespace weft::grad {
namespace {

using Dx = std::vector<Output>;

Output I64Vector(GradContext& c, const std::vector<int64_t>& v) { return c.b().Const(Tensor::FromVector<int64_t>(v)); }

Output I64Scalar(GradContext& c, int64_t v) { return c.b().Const(Tensor::Scalar<int64_t>(v)); }

// Dimension |axis| of |x| as an i64 scalar: a constant when known.
Output DimOf(GradContext& c, const Output& x, int64_t axis) {
  if (!x.shape().unknown_rank() && x.shape().dim(static_cast<int>(axis)) >= 0) {
    return I64Scalar(c, x.shape().dim(static_cast<int>(axis)));
  }
  return c.Op("Gather", {c.Op("Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}), I64Scalar(c, axis)});
}

Status NeedRank(const Output& x, const char* what) {
  if (x.shape().unknown_rank()) return InvalidArgumentError("the rank of ", what, " must be known");
  return Status();
}

int64_t Normalise(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

// The StridedSliceGrad that scatters |g| back into a zero tensor shaped
// like |x|.
Output SliceBack(GradContext& c, const Output& x, const Output& g, const std::vector<int64_t>& begin,
                 const std::vector<int64_t>& end, const std::vector<int64_t>& strides, AttrMap masks) {
  return c.Op("StridedSliceGrad", {c.ShapeOf(x), I64Vector(c, begin), I64Vector(c, end), I64Vector(c, strides), g},
              std::move(masks));
}

}  // namespace

void RegisterArrayGradients(GradRegistry& r) {
  // Row routing (core/ops/sparse_ops.cc). Each stitched slice's gradient is
  // the rows of the merged gradient it was written to; a partitioned
  // slice's gradient goes back to the position it came from.
  r.Register("DynamicStitch", [](GradContext& c, Dx& dx) {
    const int n = static_cast<int>(c.Int("N"));
    for (int m = 0; m < n; ++m) dx[static_cast<std::size_t>(n + m)] = c.Op("Gather", {c.grad(0), c.input(m)});
    return Status();
  });
  r.Register("DynamicPartition", [](GradContext& c, Dx& dx) {
    const Output data = c.input(0), partitions = c.input(1);
    const int n = static_cast<int>(c.Int("num_partitions"));
    Output count = c.Op("Size", {partitions}, {{"out_type", AttrValue(DType::kI32)}});
    Output positions =
        c.Op("Reshape",
             {c.Op("Range", {c.b().Const(Tensor::Scalar<int32_t>(0)), count, c.b().Const(Tensor::Scalar<int32_t>(1))}),
              c.ShapeOf(partitions)});
    std::vector<Output> routed =
        c.Node("DynamicPartition", {positions, partitions}, {{"num_partitions", AttrValue(int64_t{n})}});
    std::vector<Output> stitch_inputs = routed;
    for (int p = 0; p < n; ++p) stitch_inputs.push_back(c.grad_or_zeros(p));
    Output merged = c.Op("DynamicStitch", stitch_inputs, {{"N", AttrValue(int64_t{n})}});
    dx[0] = c.Op("Reshape", {merged, c.ShapeOf(data)});
    return Status();
  });
  r.NotDifferentiable("Unique");
  for (const char* op : {"Reshape", "ExpandDims", "Squeeze", "DynamicExpandDims", "DynamicSqueeze"}) {
    r.Register(op, [](GradContext& c, Dx& dx) {
      dx[0] = c.Op("Reshape", {c.grad(0), c.ShapeOf(c.input(0))});
      return Status();
    });
  }
  r.Register("Transpose", [](GradContext& c, Dx& dx) {
    WEFT_RETURN_IF_ERROR(NeedRank(c.input(0), "the input"));
    const int64_t rank = c.input(0).shape().rank();
    std::vector<int64_t> perm = c.Ints("perm");
    if (perm.empty()) {
      for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    }
    std::vector<int64_t> inverse(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) {
      inverse[static_cast<std::size_t>(Normalise(perm[i], rank))] = static_cast<int64_t>(i);
    }
    dx[0] = c.Op("Transpose", {c.grad(0)}, {{"perm", AttrValue(inverse)}});
    return Status();
  });
  r.Register("Reverse", [](GradContext& c, Dx& dx) {
    dx[0] = c.Op("Reverse", {c.grad(0)}, {{"axis", c.attr("axis")}});
    return Status();
  });
  r.Register("Concat", [](GradContext& c, Dx& dx) {
    // Slice each input's part back out; their sizes along the axis must be
    // known.
    const int n = static_cast<int>(c.inputs().size());
    WEFT_RETURN_IF_ERROR(NeedRank(c.input(0), "the inputs"));
    const int64_t rank = c.input(0).shape().rank();
    const int64_t axis = Normalise(c.Int("axis"), rank);
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      const Shape& shape = c.input(i).shape();
      const int64_t size = shape.unknown_rank() ? -1 : shape.dim(static_cast<int>(axis));
      if (size < 0) {
        return InvalidArgumentError("the size of input ", i, " along axis ", axis,
                                    " must be known to split the gradient");
      }
      std::vector<int64_t> begin(static_cast<std::size_t>(rank), 0), sizes(static_cast<std::size_t>(rank), -1);
      begin[static_cast<std::size_t>(axis)] = offset;
      sizes[static_cast<std::size_t>(axis)] = size;
      dx[static_cast<std::size_t>(i)] =
          c.Op("Slice", {c.grad(0)}, {{"begin", AttrValue(begin)}, {"size", AttrValue(sizes)}});
      offset += size;
    }
    return Status();
  });
  r.Register("Split", [](GradContext& c, Dx& dx) {
    std::vector<Output> parts;
    for (int i = 0; i < static_cast<int>(c.outputs().size()); ++i) parts.push_back(c.grad_or_zeros(i));
    dx[0] = c.Op("Concat", parts, {{"axis", AttrValue(c.Int("axis"))}});
    return Status();
  });
  r.Register("Slice", [](GradContext& c, Dx& dx) {
    const Output x = c.input(0);
    WEFT_RETURN_IF_ERROR(NeedRank(x, "the input"));
    const std::vector<int64_t>& begin = c.Ints("begin");
    const std::vector<int64_t>& size = c.Ints("size");
    if (x.shape().IsFullyDefined()) {  // pad with zeros back to the input's shape
      std::vector<int64_t> paddings;
      for (std::size_t i = 0; i < begin.size(); ++i) {
        const int64_t extent = size[i] < 0 ? x.shape().dims()[i] - begin[i] : size[i];
        paddings.push_back(begin[i]);
        paddings.push_back(x.shape().dims()[i] - begin[i] - extent);
      }
      dx[0] = c.Op("Pad", {c.grad(0)}, {{"paddings", AttrValue(paddings)}});
      return Status();
    }
    std::vector<int64_t> end, strides(begin.size(), 1);
    int64_t end_mask = 0;
    for (std::size_t i = 0; i < begin.size(); ++i) {
      end.push_back(size[i] < 0 ? 0 : begin[i] + size[i]);
      if (size[i] < 0) end_mask |= int64_t{1} << i;
    }
    dx[0] = SliceBack(c, x, c.grad(0), begin, end, strides, {{"end_mask", AttrValue(end_mask)}});
    return Status();
  });
  r.Register("StridedSlice", [](GradContext& c, Dx& dx) {
    AttrMap masks;
    for (const char* m : {"begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"}) {
      masks[m] = c.attr(m);
    }
    dx[0] = SliceBack(c, c.input(0), c.grad(0), c.Ints("begin"), c.Ints("end"), c.Ints("strides"), std::move(masks));
    return Status();
  });
  r.Register("Pad", [](GradContext& c, Dx& dx) {
    if (c.String("mode") != "CONSTANT") {
      return UnimplementedError("the gradient of Pad is implemented for mode CONSTANT only, not ", c.String("mode"));
    }
    const std::vector<int64_t>& paddings = c.Ints("paddings");
    const std::size_t rank = paddings.size() / 2;
    std::vector<int64_t> begin(rank), end(rank), strides(rank, 1);
    int64_t end_mask = 0;
    for (std::size_t i = 0; i < rank; ++i) {
      begin[i] = paddings[2 * i];
      end[i] = -paddings[2 * i + 1];  // counted from the end
      if (paddings[2 * i + 1] == 0) end_mask |= int64_t{1} << i;
    }
    dx[0] = c.Op("StridedSlice", {c.grad(0)},
                 {{"begin", AttrValue(begin)},
                  {"end", AttrValue(end)},
                  {"strides", AttrValue(strides)},
                  {"end_mask", AttrValue(end_mask)}});
    return Status();
  });
  r.Register("Tile", [](GradContext& c, Dx& dx) {
    // The gradient seen as [m0, d0, m1, d1, ...], summed over the m axes.
    const Output x = c.input(0);
    const std::vector<int64_t>& multiples = c.Ints("multiples");
    const int64_t rank = static_cast<int64_t>(multiples.size());
    if (rank == 0) {
      dx[0] = c.grad(0);
      return Status();
    }
    Output split_shape;
    if (x.shape().IsFullyDefined()) {
      std::vector<int64_t> dims;
      for (int64_t i = 0; i < rank; ++i) {
        dims.push_back(multiples[static_cast<std::size_t>(i)]);
        dims.push_back(x.shape().dim(static_cast<int>(i)));
      }
      split_shape = I64Vector(c, dims);
    } else {
      Output pairs = c.Op("Pack", {I64Vector(c, multiples), c.ShapeOf(x)}, {{"axis", AttrValue(int64_t{1})}});
      split_shape = c.Op("Reshape", {pairs, I64Vector(c, {-1})});
    }
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < rank; ++i) axes.push_back(2 * i);
    Output split = c.Op("Reshape", {c.grad(0), split_shape});
    dx[0] = c.Op("Sum", {split}, {{"axis", AttrValue(axes)}});
    return Status();
  });
  r.Register("Gather", [](GradContext& c, Dx& dx) {
    // Rows of the gradient are added into the rows they came from.
    const Output params = c.input(0), indices = c.input(1), g = c.grad(0);
    WEFT_RETURN_IF_ERROR(NeedRank(params, "params"));
    WEFT_RETURN_IF_ERROR(NeedRank(indices, "indices"));
    const int64_t rank = params.shape().rank(), index_rank = indices.shape().rank();
    const int64_t axis = Normalise(c.Int("axis"), rank);
    if (axis == 0) {
      dx[0] = c.Op("UnsortedSegmentSum", {g, indices, DimOf(c, params, 0)});
      return Status();
    }
    // g is params[:axis] + indices + params[axis+1:]: bring the indices'
    // dimensions first, add up, and move the result's first axis back.
    std::vector<int64_t> to_front;
    for (int64_t i = 0; i < index_rank; ++i) to_front.push_back(axis + i);
    for (int64_t i = 0; i < axis; ++i) to_front.push_back(i);
    for (int64_t i = axis + index_rank; i < rank - 1 + index_rank; ++i) to_front.push_back(i);
    Output summed = c.Op("UnsortedSegmentSum",
                         {c.Op("Transpose", {g}, {{"perm", AttrValue(to_front)}}), indices, DimOf(c, params, axis)});
    std::vector<int64_t> back;
    for (int64_t i = 1; i <= axis; ++i) back.push_back(i);
    back.push_back(0);
    for (int64_t i = axis + 1; i < rank; ++i) back.push_back(i);
    dx[0] = c.Op("Transpose", {summed}, {{"perm", AttrValue(back)}});
    return Status();
  });
  r.Register("GatherNd", [](GradContext& c, Dx& dx) {
    const Output params = c.input(0);
    if (!params.shape().IsFullyDefined()) {
      return InvalidArgumentError("the gradient of GatherNd needs the shape of params, ", params.shape().ToString(),
                                  ", to be known");
    }
    dx[0] = c.Op("ScatterNd", {c.input(1), c.grad(0)}, {{"shape", AttrValue(params.shape().dims())}});
    return Status();
  });
  r.Register("ScatterNd", [](GradContext& c, Dx& dx) {
    dx[1] = c.Op("GatherNd", {c.grad(0), c.input(0)});
    return Status();
  });
  // Element indexing (core/ops/indexing_ops.cc).
  r.Register("GatherElements", [](GradContext& c, Dx& dx) {
    // Each output element's gradient is added to the element it came from.
    const Output data = c.input(0);
    dx[0] = c.Op("ScatterElements", {c.Op("ZerosLike", {data}), c.input(1), c.grad(0)},
                 {{"axis", AttrValue(c.Int("axis"))}, {"reduction", AttrValue("add")}});
    return Status();
  });
  r.Register("ScatterElements", [](GradContext& c, Dx& dx) {
    const std::string& reduction = c.String("reduction");
    if (reduction == "mul") {
      return UnimplementedError(
          "the gradient of ScatterElements is implemented for reduction 'none' and 'add', not 'mul'");
    }
    const Output data = c.input(0), indices = c.input(1), updates = c.input(2), g = c.grad(0);
    const AttrMap axis = {{"axis", AttrValue(c.Int("axis"))}};
    Output gathered = c.Op("GatherElements", {g, indices}, axis);
    if (reduction == "add") {
      dx[0] = g;
      dx[2] = gathered;
      return Status();
    }
    // 'none': the positions written lose their gradient to the update kept
    // there, the last one naming each position. Numbering the updates and
    // scattering the numbers finds the kept ones.
    dx[0] = c.Op("ScatterElements", {g, indices, c.Op("ZerosLike", {updates})}, axis);
    Output count = c.Op("Size", {updates}, {{"out_type", AttrValue(DType::kI64)}});
    Output ids = c.Op("Reshape", {c.Op("Range", {I64Scalar(c, 0), count, I64Scalar(c, 1)}), c.ShapeOf(updates)});
    Output kept = c.Op("ScatterElements", {c.Op("Fill", {c.ShapeOf(data), I64Scalar(c, -1)}), indices, ids}, axis);
    Output is_kept = c.Op("Equal", {c.Op("GatherElements", {kept, indices}, axis), ids});
    dx[2] = c.Op("Select", {is_kept, gathered, c.Op("ZerosLike", {gathered})});
    return Status();
  });
  r.Register("TopK", [](GradContext& c, Dx& dx) {
    // The values' gradient goes back to the elements picked (distinct
    // within each line along the axis).
    const Output x = c.input(0);
    dx[0] = c.Op("ScatterElements", {c.Op("ZerosLike", {x}), c.output(1), c.grad_or_zeros(0)},
                 {{"axis", AttrValue(c.Int("axis"))}, {"reduction", AttrValue("add")}});
    return Status();
  });
  r.NotDifferentiable("NonZero");
  r.Register("Fill", [](GradContext& c, Dx& dx) {
    dx[1] = c.Op("Sum", {c.grad(0)});
    return Status();
  });
  for (const char* op : {"Shape", "Size", "Rank", "Range", "OneHot", "ZerosLike", "OnesLike", "RandomUniform",
                         "RandomNormal", "TruncatedNormal", "RandomShuffle"}) {
    r.NotDifferentiable(op);
  }
  // The ONNX importer's forms with run-time shape inputs (imported models
  // with shape inputs fed at run time are run, not yet trained).
  for (const char* op : {"DynamicSlice", "DynamicPad", "DynamicTile", "DynamicSum", "DynamicSplit", "Resize"}) {
    r.NotDifferentiable(op);
  }
  // ONNX's ops that select (their outputs are indices, or elements picked
  // by comparisons).
  for (const char* op : {"NonMaxSuppression", "OnnxUnique"}) {
    r.NotDifferentiable(op);
  }
}

}  // namespace weft::grad
