// Ops the symbolic gradients emit: the derivatives of the activations
// (ReluGrad, SigmoidGrad, ...), the adjoints of broadcasting, gathering,
// stacking and slicing (SumToShape, UnsortedSegmentSum, StridedSliceGrad,
// ...) and the scans (Cumsum, Cumprod) that the gradient of Prod needs.
//
// Each shape function checks what it can see; the CPU kernels repeat every
// check with the same message, for shapes and values only known at run
// time.
#include <algorithm>

#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

// --- Helpers -------------------------------------------------------------------------

// Input |i|'s name in the op's signature, for messages.
const std::string& InputName(const InferenceContext& c, int i) {
  const auto& inputs = c.op().inputs;
  return inputs[std::min(static_cast<std::size_t>(i), inputs.size() - 1)].name;
}

Status NeedScalar(const InferenceContext& c, int i) {
  const Shape& s = c.input_shape(i);
  if (s.rank() > 0) return c.Error(InputName(c, i), " must be a scalar, got shape ", s.ToString());
  return Status();
}

Status NeedVector(const InferenceContext& c, int i) {
  const Shape& s = c.input_shape(i);
  if (!s.unknown_rank() && s.rank() != 1) return c.Error(InputName(c, i), " must be 1-D, got shape ", s.ToString());
  return Status();
}

// The dims a 1-D shape input gives the output: its value when constant
// (rejecting negative entries), else unknown dims of its length.
Expected<Shape> ShapeFromInput(const InferenceContext& c, int i) {
  WEFT_RETURN_IF_ERROR(NeedVector(c, i));
  if (auto dims = ConstIntVector(c, i)) {
    for (int64_t d : *dims) {
      if (d < 0) return c.Error(InputName(c, i), " ", ListString(*dims), " has a negative dimension");
    }
    return Shape(*dims);
  }
  const Shape& s = c.input_shape(i);
  return s.rank() == 1 && s.dim(0) >= 0 ? Shape::UnknownDims(static_cast<int>(s.dim(0))) : Shape::UnknownRank();
}

// --- Shape functions -----------------------------------------------------------------

// Two inputs of one shape (no broadcasting), and an output of that shape.
Status SameShapeBinary(InferenceContext& c) {
  auto merged = c.input_shape(0).Merge(c.input_shape(1));
  if (!merged.ok()) {
    return c.Error(InputName(c, 0), " has shape ", c.input_shape(0).ToString(), " but ", InputName(c, 1), " has shape ",
                   c.input_shape(1).ToString(), "; they must have one shape");
  }
  c.set_output(0, *merged);
  return Status();
}

Status BroadcastToShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(Shape target, ShapeFromInput(c, 1));
  const Shape& in = c.input_shape(0);
  if (!in.unknown_rank() && !target.unknown_rank()) {
    if (in.rank() > target.rank()) {
      return c.Error("input of shape ", in.ToString(), " cannot be broadcast to ", target.ToString(),
                     ", which has fewer dimensions");
    }
    const int lead = target.rank() - in.rank();
    for (int i = 0; i < in.rank(); ++i) {
      const int64_t d = in.dim(i), t = target.dim(lead + i);
      if (d >= 0 && t >= 0 && d != 1 && d != t) {
        return c.Error("input of shape ", in.ToString(), " cannot be broadcast to ", target.ToString(),
                       ": its dimension ", i, " is ", d, ", not 1 or ", t);
      }
    }
  }
  c.set_output(0, target);
  return Status();
}

Status SumToShapeShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(Shape target, ShapeFromInput(c, 1));
  const Shape& in = c.input_shape(0);
  if (!in.unknown_rank() && !target.unknown_rank()) {
    if (target.rank() > in.rank()) {
      return c.Error("input of shape ", in.ToString(), " is not a broadcast of ", target.ToString(),
                     ", which has more dimensions");
    }
    const int lead = in.rank() - target.rank();
    for (int i = 0; i < target.rank(); ++i) {
      const int64_t t = target.dim(i), d = in.dim(lead + i);
      if (d >= 0 && t >= 0 && t != 1 && d != t) {
        return c.Error("input of shape ", in.ToString(), " is not a broadcast of ", target.ToString(), ": dimension ",
                       lead + i, " is ", d, ", not ", t);
      }
    }
  }
  c.set_output(0, target);
  return Status();
}

Status UnsortedSegmentSumShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(NeedScalar(c, 2));
  const auto num = ConstIntScalar(c, 2);
  if (num && *num < 0) return c.Error("num_segments must be >= 0, got ", *num);
  const Shape& data = c.input_shape(0);
  const Shape& ids = c.input_shape(1);
  if (data.unknown_rank() || ids.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  const Shape prefix(
      std::vector<int64_t>(data.dims().begin(), data.dims().begin() + std::min(ids.rank(), data.rank())));
  if (ids.rank() > data.rank() || !prefix.IsCompatibleWith(ids)) {
    return c.Error("segment_ids' shape ", ids.ToString(), " is not a prefix of data's shape ", data.ToString());
  }
  std::vector<int64_t> dims{num ? *num : -1};
  dims.insert(dims.end(), data.dims().begin() + ids.rank(), data.dims().end());
  c.set_output(0, Shape(dims));
  return Status();
}

Status PackShape(InferenceContext& c) {
  Shape merged = Shape::UnknownRank();
  for (int i = 0; i < c.num_inputs(); ++i) {
    auto next = merged.Merge(c.input_shape(i));
    if (!next.ok()) {
      return c.Error("input ", i, " has shape ", c.input_shape(i).ToString(), ", but the inputs before it have shape ",
                     merged.ToString(), "; Pack needs one shape");
    }
    merged = *next;
  }
  if (merged.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), merged.rank() + 1));
  std::vector<int64_t> dims = merged.dims();
  dims.insert(dims.begin() + axis, c.Int("N"));
  c.set_output(0, Shape(dims));
  return Status();
}

Status InvertPermutationShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(NeedVector(c, 0));
  c.set_output(0, c.input_shape(0).unknown_rank() ? Shape::UnknownDims(1) : c.input_shape(0));
  return Status();
}

Status ConcatOffsetShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(NeedScalar(c, 0));
  const int n = c.num_inputs() - 1;
  int64_t rank = -1;
  for (int i = 0; i < n; ++i) {
    const Shape& s = c.input_shape(1 + i);
    if (!s.unknown_rank() && s.rank() != 1) {
      return c.Error("shape ", i, " must be 1-D, got a tensor of shape ", s.ToString());
    }
    const int64_t len = s.unknown_rank() ? -1 : s.dim(0);
    if (len >= 0 && rank >= 0 && len != rank) {
      return c.Error("shape ", i, " has ", len, " entries but shape 0 has ", rank, "; the inputs must have one rank");
    }
    if (len >= 0) rank = len;
  }
  // With every value known, check the shapes concatenate.
  const auto dim = ConstIntScalar(c, 0);
  std::vector<std::vector<int64_t>> shapes;
  for (int i = 0; i < n; ++i) {
    if (auto v = ConstIntVector(c, 1 + i)) shapes.push_back(*v);
  }
  if (dim && static_cast<int>(shapes.size()) == n && n > 0) {
    const int r = static_cast<int>(shapes[0].size());
    WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(*dim, r, "concat_dim"));
    for (int i = 1; i < n; ++i) {
      for (int d = 0; d < r; ++d) {
        if (d != axis && shapes[static_cast<std::size_t>(i)][static_cast<std::size_t>(d)] !=
                             shapes[0][static_cast<std::size_t>(d)]) {
          return c.Error("shape ", i, " is ", ListString(shapes[static_cast<std::size_t>(i)]),
                         ", which differs from shape 0 ", ListString(shapes[0]), " in dimension ", d,
                         "; only dimension ", axis, " may differ");
        }
      }
    }
  }
  for (int i = 0; i < n; ++i) c.set_output(i, Shape{rank});
  return Status();
}

// The shape StridedSlice gives a tensor of fully known |dims| under a spec,
// as StridedSliceShape (array_ops.cc) computes it.
Expected<std::vector<int64_t>> StridedSliceDims(const std::vector<int64_t>& dims, const std::vector<int64_t>& begin,
                                                const std::vector<int64_t>& end, const std::vector<int64_t>& strides,
                                                const InferenceContext& c) {
  const int64_t begin_mask = c.Int("begin_mask"), end_mask = c.Int("end_mask");
  const int64_t ellipsis_mask = c.Int("ellipsis_mask"), new_axis_mask = c.Int("new_axis_mask");
  const int64_t shrink_mask = c.Int("shrink_axis_mask");
  auto bit = [](int64_t mask, std::size_t i) { return ((mask >> i) & 1) != 0; };
  const int rank = static_cast<int>(dims.size());
  int consumed = 0;
  for (std::size_t i = 0; i < begin.size(); ++i) {
    if (!bit(ellipsis_mask, i) && !bit(new_axis_mask, i)) ++consumed;
  }
  std::vector<int64_t> out;
  int dim = 0;
  for (std::size_t i = 0; i < begin.size(); ++i) {
    if (bit(ellipsis_mask, i)) {
      for (int k = rank - consumed; k > 0; --k) out.push_back(dims[static_cast<std::size_t>(dim++)]);
      continue;
    }
    if (bit(new_axis_mask, i)) {
      out.push_back(1);
      continue;
    }
    if (dim >= rank) return c.Error("the slice spec indexes more dimensions than the input's ", rank);
    const int64_t d = dims[static_cast<std::size_t>(dim)];
    if (bit(shrink_mask, i)) {
      const int64_t index = begin[i] < 0 ? begin[i] + d : begin[i];
      if (index < 0 || index >= d) {
        return c.Error("index ", begin[i], " is out of range for dimension ", dim, " of size ", d);
      }
      ++dim;
      continue;
    }
    out.push_back(StridedSliceLength(d, begin[i], end[i], strides[i], bit(begin_mask, i), bit(end_mask, i)));
    ++dim;
  }
  while (dim < rank) out.push_back(dims[static_cast<std::size_t>(dim++)]);
  return out;
}

Status StridedSliceGradShape(InferenceContext& c) {
  WEFT_ASSIGN_OR_RETURN(Shape out, ShapeFromInput(c, 0));
  for (int i = 1; i <= 3; ++i) WEFT_RETURN_IF_ERROR(NeedVector(c, i));
  if ((c.Int("ellipsis_mask") & (c.Int("ellipsis_mask") - 1)) != 0) {
    return c.Error("more than one ellipsis in ellipsis_mask");
  }
  const auto begin = ConstIntVector(c, 1), end = ConstIntVector(c, 2), strides = ConstIntVector(c, 3);
  if (begin && end && strides) {
    if (begin->size() != end->size() || begin->size() != strides->size()) {
      return c.Error("begin, end and strides have ", begin->size(), ", ", end->size(), " and ", strides->size(),
                     " entries; they must match");
    }
    if (begin->size() > 63) {
      return c.Error("a slice spec has at most 63 entries (the masks are 64-bit), got ", begin->size());
    }
    for (int64_t s : *strides) {
      if (s == 0) return c.Error("a stride is 0");
    }
    if (out.IsFullyDefined()) {
      WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> sliced, StridedSliceDims(out.dims(), *begin, *end, *strides, c));
      if (!Shape(sliced).IsCompatibleWith(c.input_shape(4))) {
        return c.Error("dy has shape ", c.input_shape(4).ToString(), ", but slicing ", out.ToString(),
                       " by the spec gives ", ListString(sliced));
      }
    }
  }
  c.set_output(0, out);
  return Status();
}

Status ScanShape(InferenceContext& c) {
  WEFT_RETURN_IF_ERROR(NeedScalar(c, 1));
  const Shape& in = c.input_shape(0);
  if (auto axis = ConstIntScalar(c, 1); axis && !in.unknown_rank()) {
    WEFT_RETURN_IF_ERROR(NormalizeAxis(*axis, in.rank()).status());
  }
  c.set_output(0, in);
  return Status();
}

// --- The activation derivatives --------------------------------------------------------

struct GradOp {
  const char* name;
  const char* types;
  const char* first;  // input names
  const char* second;
  const char* doc;
};

constexpr GradOp kGradOps[] = {
    {"ReluGrad", "{float, i8, i16, i32, i64}", "gradients", "features",
     "The gradient of Relu: gradients where features > 0, else 0 (also for NaN features), elementwise. "
     "gradients and features must have one shape; the result has it too."},
    {"Relu6Grad", "{float, i8, i16, i32, i64}", "gradients", "features",
     "The gradient of Relu6: gradients where 0 < features < 6, else 0, elementwise (the kinks at 0 and 6 "
     "get 0, as in TensorFlow). gradients and features must have one shape."},
    {"EluGrad", "{float}", "gradients", "outputs",
     "The gradient of Elu from its outputs y: gradients where y > 0, else gradients * (y + 1) (that is, "
     "exp(x)), elementwise. gradients and outputs must have one shape."},
    {"SeluGrad", "{float}", "gradients", "outputs",
     "The gradient of Selu from its outputs y: gradients * scale where y > 0, else gradients * (y + scale * "
     "alpha), with Selu's alpha = 1.6732632423543772 and scale = 1.0507009873554805, elementwise. gradients "
     "and outputs must have one shape."},
    {"SoftplusGrad", "{float}", "gradients", "features",
     "The gradient of Softplus: gradients * sigmoid(features), elementwise, without overflow for large "
     "|features|. gradients and features must have one shape."},
    {"SigmoidGrad", "{float}", "y", "dy",
     "The gradient of Sigmoid from its output y: dy * y * (1 - y), elementwise. y and dy must have one "
     "shape."},
    {"TanhGrad", "{float}", "y", "dy",
     "The gradient of Tanh from its output y: dy * (1 - y * y), elementwise. y and dy must have one shape."},
    {"SqrtGrad", "{float}", "y", "dy",
     "The gradient of Sqrt from its output y: dy * 0.5 / y, elementwise (inf where y is 0 and dy is not). "
     "y and dy must have one shape."},
    {"RsqrtGrad", "{float}", "y", "dy",
     "The gradient of Rsqrt from its output y: dy * -0.5 * y^3, elementwise. y and dy must have one shape."},
    {"ReciprocalGrad", "{float}", "y", "dy",
     "The gradient of Reciprocal from its output y: dy * -(y * y), elementwise. y and dy must have one "
     "shape."},
};

}  // namespace

Status RegisterGradSupportOps(OpRegistry& r) {
  for (const GradOp& op : kGradOps) {
    const std::string out = op.first == std::string("y") ? "z: T" : "backprops: T";
    WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder(op.name)
                                        .Input(StrCat(op.first, ": T"))
                                        .Input(StrCat(op.second, ": T"))
                                        .Output(out)
                                        .Attr(StrCat("T: ", op.types))
                                        .Shape(SameShapeBinary)
                                        .Doc(op.doc)));
  }
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("GeluGrad")
                     .Input("gradients: T")
                     .Input("features: T")
                     .Output("backprops: T")
                     .Attr("T: {float}")
                     .Attr("approximate: bool = false")
                     .Shape(SameShapeBinary)
                     .Doc("The gradient of Gelu: gradients * (Phi(x) + x * phi(x)) with the normal distribution's Phi "
                          "and density phi, or, when 'approximate' is true, the exact derivative of the tanh "
                          "approximation 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3): 0.5 (1 + tanh(u)) + "
                          "0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2). x is 'features'; gradients and "
                          "features must have one shape.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("BroadcastTo")
                     .Input("input: T")
                     .Input("shape: Tidx")
                     .Output("output: T")
                     .Attr("T: {all}")
                     .Attr("Tidx: {i32, i64} = 'i32'")
                     .Shape(BroadcastToShape)
                     .Doc("The input repeated to the 1-D 'shape' by NumPy's broadcasting rules (numpy.broadcast_to): "
                          "its dimensions are aligned at the end, and each must be 1 or equal to the one it meets; "
                          "leading dimensions are added. Anything else is an error naming both shapes.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("SumToShape")
          .Input("input: T")
          .Input("shape: Tidx")
          .Output("output: T")
          .Attr("T: {numeric}")
          .Attr("Tidx: {i32, i64} = 'i32'")
          .Shape(SumToShapeShape)
          .Doc("The adjoint of BroadcastTo: sums the input over its leading dimensions beyond the length of "
               "'shape' and over the dimensions where 'shape' has 1 and the input does not, giving a tensor of "
               "exactly 'shape' (numpy.sum with keepdims, then dropping the leading axes). An input that is "
               "not a broadcast of 'shape' is an error naming both shapes. Integers wrap on overflow.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("UnsortedSegmentSum")
          .Input("data: T")
          .Input("segment_ids: Tindices")
          .Input("num_segments: Tnumsegments")
          .Output("output: T")
          .Attr("T: {numeric}")
          .Attr("Tindices: {i32, i64}")
          .Attr("Tnumsegments: {i32, i64} = 'i32'")
          .Shape(UnsortedSegmentSumShape)
          .Doc("Sums the slices of data by segment: output[s, ...] is the sum of data[i..., ...] over the "
               "positions i... with segment_ids[i...] == s, and 0 for a segment nobody names. The output shape "
               "is [num_segments] + data.shape[rank(segment_ids):]; segment_ids' shape must be a prefix of "
               "data's. Negative ids are dropped (as TensorFlow); an id >= num_segments is an error naming it "
               "and its position. Integers wrap on overflow.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Pack")
          .Input("values: N * T")
          .Output("output: T")
          .Attr("N: int >= 1")
          .Attr("T: {all}")
          .Attr("axis: int = 0")
          .Shape(PackShape)
          .Doc("Stacks N tensors of one shape along a new axis 'axis' (numpy.stack): the output has rank + 1 "
               "dimensions, with N at 'axis'; a negative axis counts from the end of the result (-1 appends "
               "the new axis).")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("InvertPermutation")
                     .Input("x: T")
                     .Output("y: T")
                     .Attr("T: {i32, i64}")
                     .Shape(InvertPermutationShape)
                     .Doc("The inverse of the permutation x of 0 .. n-1: y[x[i]] = i (numpy.argsort of a permutation). "
                          "x must be 1-D; an entry out of range or repeated is an error naming it.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("ConcatOffset")
          .Input("concat_dim: i32")
          .Input("shape: N * Tshape")
          .Output("offset: N * Tshape")
          .Attr("N: int >= 1")
          .Attr("Tshape: {i32, i64} = 'i32'")
          .Shape(ConcatOffsetShape)
          .Doc("Where each of N tensors starts inside their concatenation along concat_dim (as TensorFlow): "
               "offset[i] has the length of shape[i], is 0 everywhere except at concat_dim, and holds there the "
               "sum of shape[j][concat_dim] over j < i. The shapes must have one length and agree except at "
               "concat_dim, which may be negative (counted from the end).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("StridedSliceGrad")
          .Input("shape: Index")
          .Input("begin: Index")
          .Input("end: Index")
          .Input("strides: Index")
          .Input("dy: T")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("Index: {i32, i64}")
          .Attr("begin_mask: int = 0")
          .Attr("end_mask: int = 0")
          .Attr("ellipsis_mask: int = 0")
          .Attr("new_axis_mask: int = 0")
          .Attr("shrink_axis_mask: int = 0")
          .Shape(StridedSliceGradShape)
          .Doc("The gradient of StridedSlice: a tensor of 'shape', zero except at the positions that "
               "StridedSlice with this begin, end, strides and masks (read exactly as StridedSlice reads them) "
               "selects from such a tensor, which receive dy. dy must have the shape that slice has.")));
  for (const char* name : {"Cumsum", "Cumprod"}) {
    const bool sum = std::string(name) == "Cumsum";
    WEFT_RETURN_IF_ERROR(
        r.Register(OpDefBuilder(name)
                       .Input("x: T")
                       .Input("axis: Tidx")
                       .Output("out: T")
                       .Attr("T: {numeric}")
                       .Attr("Tidx: {i32, i64} = 'i32'")
                       .Attr("exclusive: bool = false")
                       .Attr("reverse: bool = false")
                       .Shape(ScanShape)
                       .Doc(StrCat("The running ", sum ? "sum" : "product",
                                   " of x along the scalar 'axis' (negative counts "
                                   "from the end), as TensorFlow: out[i] = x[0] ",
                                   sum ? "+" : "*", " ... ", sum ? "+" : "*",
                                   " x[i]. With 'exclusive' x[i] itself is left out (out[0] is ", sum ? "0" : "1",
                                   "); with 'reverse' the scan runs from the end. Integers wrap on overflow."))));
  }
  return Status();
}

}  // namespace weft::ops
