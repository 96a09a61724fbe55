// Sources, identity, and ops that move elements without arithmetic.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/ops/ops.h"
#include "core/ops/shape_fns.h"

namespace weft::ops {
namespace {

Status ConstShape(InferenceContext& c) {
  const Tensor& value = c.TensorAttr("value");
  if (value.dtype() != c.Type("dtype")) {
    return c.Error("attr 'value' is ", DTypeName(value.dtype()), " but attr 'dtype' is ", DTypeName(c.Type("dtype")));
  }
  c.set_output(0, value.shape());
  return Status();
}

Status PlaceholderShape(InferenceContext& c) {
  c.set_output(0, c.ShapeAttr("shape"));
  return Status();
}

Status ReshapeShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (c.input_shape(1).rank() >= 0 && c.input_shape(1).rank() != 1) {
    return c.Error("shape must be 1-D, got ", c.input_shape(1).ToString());
  }
  const auto target = ConstIntVector(c, 1);
  if (!target) {
    const Shape& s = c.input_shape(1);
    c.set_output(
        0, s.rank() == 1 && s.dim(0) >= 0 ? Shape::UnknownDims(static_cast<int>(s.dim(0))) : Shape::UnknownRank());
    return Status();
  }
  auto dims = ResolveReshape(*target, in.num_elements(), in.ToString());
  if (!dims.ok()) return dims.status();
  c.set_output(0, Shape(*dims));
  return Status();
}

Status TransposeShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  std::vector<int64_t> perm = c.Ints("perm");
  if (in.unknown_rank()) {
    c.set_output(0, perm.empty() ? Shape::UnknownRank() : Shape::UnknownDims(static_cast<int>(perm.size())));
    return Status();
  }
  if (perm.empty()) {
    for (int i = in.rank() - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != in.rank()) {
    return c.Error("perm ", ListString(perm), " has ", perm.size(), " entries for a tensor of rank ", in.rank());
  }
  std::vector<bool> seen(perm.size(), false);
  std::vector<int64_t> dims;
  for (int64_t p : perm) {
    WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(p, in.rank(), "perm entry"));
    if (seen[static_cast<std::size_t>(axis)]) return c.Error("perm ", ListString(perm), " repeats ", p);
    seen[static_cast<std::size_t>(axis)] = true;
    dims.push_back(in.dim(axis));
  }
  c.set_output(0, Shape(dims));
  return Status();
}

Status ExpandDimsShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), in.rank() + 1));
  std::vector<int64_t> dims = in.dims();
  dims.insert(dims.begin() + axis, 1);
  c.set_output(0, Shape(dims));
  return Status();
}

Status SqueezeShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  std::vector<int> axes;
  for (int64_t a : c.Ints("axis")) {
    WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, in.rank()));
    if (in.dim(axis) >= 0 && in.dim(axis) != 1) {
      return c.Error("cannot squeeze axis ", a, " of ", in.ToString(), ": its size is ", in.dim(axis), ", not 1");
    }
    axes.push_back(axis);
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    const bool squeeze = axes.empty() ? in.dim(i) == 1 : std::find(axes.begin(), axes.end(), i) != axes.end();
    if (axes.empty() && in.dim(i) < 0) {
      c.set_output(0, Shape::UnknownRank());  // may or may not be 1
      return Status();
    }
    if (!squeeze) dims.push_back(in.dim(i));
  }
  c.set_output(0, Shape(dims));
  return Status();
}

Status ConcatShape(InferenceContext& c) {
  int rank = -1;
  int rank_from = -1;
  for (int i = 0; i < c.num_inputs() && rank < 0; ++i) {
    if (!c.input_shape(i).unknown_rank()) {
      rank = c.input_shape(i).rank();
      rank_from = i;
    }
  }
  if (rank < 0) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  if (rank == 0) return c.Error("cannot concatenate scalars; expand them to rank 1 first");
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), rank));
  std::vector<int64_t> dims(static_cast<std::size_t>(rank), -1);
  int64_t along = 0;
  for (int i = 0; i < c.num_inputs(); ++i) {
    const Shape& s = c.input_shape(i);
    if (s.unknown_rank()) {
      along = -1;
      continue;
    }
    if (s.rank() != rank) {
      return c.Error("input ", i, " has shape ", s.ToString(), ", of rank ", s.rank(), ", but input ", rank_from,
                     " has rank ", rank);
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      int64_t& out = dims[static_cast<std::size_t>(d)];
      if (out >= 0 && s.dim(d) >= 0 && out != s.dim(d)) {
        return c.Error("input ", i, " has shape ", s.ToString(), ", which differs from the others in dimension ", d,
                       " (", s.dim(d), " vs ", out, "); only axis ", axis, " may differ");
      }
      if (out < 0) out = s.dim(d);
    }
    if (along >= 0) along = s.dim(axis) < 0 ? -1 : along + s.dim(axis);
  }
  dims[static_cast<std::size_t>(axis)] = along;
  c.set_output(0, Shape(dims));
  return Status();
}

Status SplitShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const int64_t n = c.Int("num_split");
  if (in.unknown_rank()) {
    for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, Shape::UnknownRank());
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), in.rank()));
  std::vector<int64_t> dims = in.dims();
  if (dims[static_cast<std::size_t>(axis)] >= 0) {
    if (dims[static_cast<std::size_t>(axis)] % n != 0) {
      return c.Error("cannot split dimension ", axis, " of ", in.ToString(), " into ", n, " equal parts");
    }
    dims[static_cast<std::size_t>(axis)] /= n;
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, Shape(dims));
  return Status();
}

Status SliceShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const auto& begin = c.Ints("begin");
  const auto& size = c.Ints("size");
  if (begin.size() != size.size()) {
    return c.Error("begin has ", begin.size(), " entries and size ", size.size());
  }
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownDims(static_cast<int>(begin.size())));
    return Status();
  }
  if (static_cast<int>(begin.size()) != in.rank()) {
    return c.Error("begin and size have ", begin.size(), " entries for a tensor of rank ", in.rank());
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    const int64_t b = begin[static_cast<std::size_t>(i)], s = size[static_cast<std::size_t>(i)];
    const int64_t d = in.dim(i);
    if (b < 0 || s < -1) return c.Error("begin ", b, " / size ", s, " in dimension ", i, " are invalid");
    if (d >= 0 && (b > d || s > d - b)) {
      return c.Error("a slice of size ", s, " from ", b, " is outside dimension ", i, " of ", in.ToString());
    }
    dims.push_back(s >= 0 ? s : (d >= 0 ? d - b : -1));
  }
  c.set_output(0, Shape(dims));
  return Status();
}

Status StridedSliceShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const auto& begin = c.Ints("begin");
  const auto& end = c.Ints("end");
  const auto& strides = c.Ints("strides");
  if (begin.size() != end.size() || begin.size() != strides.size()) {
    return c.Error("begin, end and strides have ", begin.size(), ", ", end.size(), " and ", strides.size(),
                   " entries; they must match");
  }
  if (begin.size() > 63)
    return c.Error("a slice spec has at most 63 entries (the masks are 64-bit), got ", begin.size());
  for (int64_t s : strides) {
    if (s == 0) return c.Error("a stride is 0");
  }
  const int64_t begin_mask = c.Int("begin_mask"), end_mask = c.Int("end_mask");
  const int64_t ellipsis_mask = c.Int("ellipsis_mask"), new_axis_mask = c.Int("new_axis_mask");
  const int64_t shrink_mask = c.Int("shrink_axis_mask");
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  if ((ellipsis_mask & (ellipsis_mask - 1)) != 0) return c.Error("more than one ellipsis in ellipsis_mask");
  // Count the dims the spec consumes, to expand the ellipsis.
  int consumed = 0;
  for (std::size_t i = 0; i < begin.size(); ++i) {
    if (!((ellipsis_mask >> i) & 1) && !((new_axis_mask >> i) & 1)) ++consumed;
  }
  std::vector<int64_t> dims;
  int dim = 0;
  for (std::size_t i = 0; i < begin.size(); ++i) {
    if ((ellipsis_mask >> i) & 1) {
      const int covered = in.rank() - consumed;
      for (int k = 0; k < covered; ++k) dims.push_back(in.dim(dim++));
      continue;
    }
    if ((new_axis_mask >> i) & 1) {
      dims.push_back(1);
      continue;
    }
    if (dim >= in.rank()) return c.Error("the slice spec indexes more dimensions than the input's ", in.rank());
    const int64_t d = in.dim(dim);
    if ((shrink_mask >> i) & 1) {
      const int64_t idx = begin[i] < 0 && d >= 0 ? begin[i] + d : begin[i];
      if (d >= 0 && (idx < 0 || idx >= d)) {
        return c.Error("index ", begin[i], " is out of range for dimension ", dim, " of size ", d);
      }
      ++dim;
      continue;
    }
    dims.push_back(
        d < 0 ? -1 : StridedSliceLength(d, begin[i], end[i], strides[i], (begin_mask >> i) & 1, (end_mask >> i) & 1));
    ++dim;
  }
  while (dim < in.rank()) dims.push_back(in.dim(dim++));
  c.set_output(0, Shape(dims));
  return Status();
}

Status PadShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const auto& paddings = c.Ints("paddings");
  if (paddings.size() % 2 != 0) return c.Error("paddings has an odd number of entries (", paddings.size(), ")");
  const int rank = static_cast<int>(paddings.size() / 2);
  if (!in.unknown_rank() && in.rank() != rank) {
    return c.Error("paddings has ", rank, " (before, after) pairs for a tensor of rank ", in.rank());
  }
  const std::string& mode = c.String("mode");
  std::vector<int64_t> dims;
  for (int i = 0; i < rank; ++i) {
    const int64_t before = paddings[static_cast<std::size_t>(2 * i)],
                  after = paddings[static_cast<std::size_t>(2 * i + 1)];
    if (before < 0 || after < 0)
      return c.Error("paddings must be >= 0, got ", before, ", ", after, " for dimension ", i);
    const int64_t d = in.unknown_rank() ? -1 : in.dim(i);
    if (d >= 0 && mode != "CONSTANT" && (before > 0 || after > 0)) {
      const int64_t limit = mode == "REFLECT" ? d - 1 : d;
      if (before > limit || after > limit) {
        return c.Error(mode, " padding of dimension ", i, " (size ", d, ") must be at most ", limit, ", got ", before,
                       ", ", after);
      }
    }
    const auto padded = CheckedAdd(before, after);
    const auto size = padded ? CheckedAdd(std::max<int64_t>(d, 0), *padded) : std::nullopt;
    if (!size) return c.Error("padding dimension ", i, " by ", before, " and ", after, " does not fit in 64 bits");
    dims.push_back(d < 0 ? -1 : *size);
  }
  c.set_output(0, Shape(dims));
  return Status();
}

Status TileShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const auto& multiples = c.Ints("multiples");
  if (!in.unknown_rank() && static_cast<int>(multiples.size()) != in.rank()) {
    return c.Error("multiples has ", multiples.size(), " entries for a tensor of rank ", in.rank());
  }
  std::vector<int64_t> dims;
  for (std::size_t i = 0; i < multiples.size(); ++i) {
    if (multiples[i] < 0) return c.Error("multiples must be >= 0, got ", multiples[i]);
    const int64_t d = in.unknown_rank() ? -1 : in.dim(static_cast<int>(i));
    const auto tiled = CheckedMul(std::max<int64_t>(d, 0), multiples[i]);
    if (!tiled) return c.Error("dimension ", i, " (", d, ") times ", multiples[i], " does not fit in 64 bits");
    dims.push_back(d < 0 ? -1 : *tiled);
  }
  c.set_output(0, Shape(dims));
  return Status();
}

Status ReverseShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  if (!in.unknown_rank()) {
    std::vector<int> seen;
    for (int64_t a : c.Ints("axis")) {
      WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, in.rank()));
      if (std::find(seen.begin(), seen.end(), axis) != seen.end()) return c.Error("axis ", a, " is repeated");
      seen.push_back(axis);
    }
  }
  c.set_output(0, in);
  return Status();
}

Status GatherShape(InferenceContext& c) {
  const Shape& params = c.input_shape(0);
  const Shape& indices = c.input_shape(1);
  if (params.unknown_rank() || indices.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  if (params.rank() == 0) return c.Error("params must have rank >= 1");
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), params.rank()));
  std::vector<int64_t> dims(params.dims().begin(), params.dims().begin() + axis);
  dims.insert(dims.end(), indices.dims().begin(), indices.dims().end());
  dims.insert(dims.end(), params.dims().begin() + axis + 1, params.dims().end());
  c.set_output(0, Shape(dims));
  return Status();
}

Status GatherNdShape(InferenceContext& c) {
  const Shape& params = c.input_shape(0);
  const Shape& indices = c.input_shape(1);
  if (!indices.unknown_rank() && indices.rank() < 1) return c.Error("indices must have rank >= 1");
  if (params.unknown_rank() || indices.unknown_rank() || indices.dim(indices.rank() - 1) < 0) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  const int64_t depth = indices.dim(indices.rank() - 1);
  if (depth > params.rank()) {
    return c.Error("indices' last dimension (", depth, ") is larger than params' rank (", params.rank(), ")");
  }
  std::vector<int64_t> dims(indices.dims().begin(), indices.dims().end() - 1);
  dims.insert(dims.end(), params.dims().begin() + depth, params.dims().end());
  c.set_output(0, Shape(dims));
  return Status();
}

Status ScatterNdShape(InferenceContext& c) {
  const auto& shape = c.Ints("shape");
  for (int64_t d : shape) {
    if (d < 0) return c.Error("shape ", ListString(shape), " has a negative dimension");
  }
  const Shape& indices = c.input_shape(0);
  const Shape& updates = c.input_shape(1);
  if (!indices.unknown_rank() && !updates.unknown_rank() && indices.rank() >= 1) {
    const int64_t depth = indices.dim(indices.rank() - 1);
    if (depth > static_cast<int64_t>(shape.size())) {
      return c.Error("indices' last dimension (", depth, ") is larger than the output rank (", shape.size(), ")");
    }
    if (depth >= 0) {
      std::vector<int64_t> expect(indices.dims().begin(), indices.dims().end() - 1);
      expect.insert(expect.end(), shape.begin() + depth, shape.end());
      if (!Shape(expect).IsCompatibleWith(updates)) {
        return c.Error("updates has shape ", updates.ToString(), ", expected ", Shape(expect).ToString());
      }
    }
  }
  c.set_output(0, Shape(shape));
  return Status();
}

Status OneHotShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  const int64_t depth = c.Int("depth");
  if (depth < 0) return c.Error("depth must be >= 0, got ", depth);
  if (in.unknown_rank()) {
    c.set_output(0, Shape::UnknownRank());
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(int axis, NormalizeAxis(c.Int("axis"), in.rank() + 1));
  std::vector<int64_t> dims = in.dims();
  dims.insert(dims.begin() + axis, depth);
  c.set_output(0, Shape(dims));
  return Status();
}

Status FillShape(InferenceContext& c) {
  if (c.input_shape(1).rank() > 0) return c.Error("value must be a scalar, got ", c.input_shape(1).ToString());
  if (c.input_shape(0).rank() >= 0 && c.input_shape(0).rank() != 1) {
    return c.Error("dims must be 1-D, got ", c.input_shape(0).ToString());
  }
  if (auto dims = ConstIntVector(c, 0)) {
    for (int64_t d : *dims) {
      if (d < 0) return c.Error("dims ", ListString(*dims), " has a negative dimension");
    }
    c.set_output(0, Shape(*dims));
  } else {
    const Shape& s = c.input_shape(0);
    c.set_output(
        0, s.rank() == 1 && s.dim(0) >= 0 ? Shape::UnknownDims(static_cast<int>(s.dim(0))) : Shape::UnknownRank());
  }
  return Status();
}

Status ShapeOfShape(InferenceContext& c) {
  const Shape& in = c.input_shape(0);
  c.set_output(0, Shape{in.unknown_rank() ? -1 : static_cast<int64_t>(in.rank())});
  return Status();
}

Status RangeShape(InferenceContext& c) {
  for (int i = 0; i < 3; ++i) {
    if (c.input_shape(i).rank() > 0) return c.Error("start, limit and delta must be scalars");
  }
  const Tensor* start = c.input_value(0);
  const Tensor* limit = c.input_value(1);
  const Tensor* delta = c.input_value(2);
  if (start == nullptr || limit == nullptr || delta == nullptr) {
    c.set_output(0, Shape{-1});
    return Status();
  }
  auto value = [](const Tensor* t) -> double {
    switch (t->dtype()) {
      case DType::kF32: return t->scalar<float>();
      case DType::kF64: return t->scalar<double>();
      case DType::kI32: return t->scalar<int32_t>();
      default: return static_cast<double>(t->scalar<int64_t>());
    }
  };
  const double s = value(start), l = value(limit), d = value(delta);
  if (d == 0) return c.Error("delta must not be 0");
  if ((d > 0 && s > l) || (d < 0 && s < l)) {
    return c.Error("start ", s, " cannot reach limit ", l, " with delta ", d);
  }
  const bool integral = start->dtype() == DType::kI32 || start->dtype() == DType::kI64;
  int64_t n;
  if (integral) {
    // Exactly, in unsigned 64-bit arithmetic (the distance between two
    // int64 values always fits): doubles lose integers above 2^53.
    auto as_int = [](const Tensor* t) -> int64_t {
      return t->dtype() == DType::kI32 ? t->scalar<int32_t>() : t->scalar<int64_t>();
    };
    const int64_t is = as_int(start), il = as_int(limit), id = as_int(delta);
    const uint64_t span = id > 0 ? static_cast<uint64_t>(il) - static_cast<uint64_t>(is)
                                 : static_cast<uint64_t>(is) - static_cast<uint64_t>(il);
    const uint64_t step = id > 0 ? static_cast<uint64_t>(id) : 0 - static_cast<uint64_t>(id);
    const uint64_t count = span / step + (span % step != 0 ? 1 : 0);
    if (count > static_cast<uint64_t>(INT64_MAX))
      return c.Error("Range from ", is, " to ", il, " has more than 2^63 elements");
    n = static_cast<int64_t>(count);
  } else {
    if (!std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) {
      return c.Error("start, limit and delta must be finite, got ", s, ", ", l, ", ", d);
    }
    const double count = std::ceil(std::abs((l - s) / d));
    if (!(count < 9223372036854775808.0)) {
      return c.Error("Range from ", s, " to ", l, " by ", d, " has 2^63 elements or more");
    }
    n = static_cast<int64_t>(count);
  }
  c.set_output(0, Shape{n});
  return Status();
}

}  // namespace

Status RegisterArrayOps(OpRegistry& r) {
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Const")
                                      .Output("output: dtype")
                                      .Attr("value: tensor")
                                      .Attr("dtype: type")
                                      .Shape(ConstShape)
                                      .Doc("A constant tensor: the value of attr 'value', whose dtype is 'dtype'.")));
  // Internal: the runtime rewrites feeds into _Arg and fetches into _Retval
  // nodes. Names starting with '_' are not listed by `weft ops` and may not
  // appear in graph files.
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("_Arg")
                                      .Output("output: T")
                                      .Attr("T: {all, resource}")
                                      .Attr("index: int >= 0")
                                      .Attr("shape: shape")
                                      .Shape(PlaceholderShape)
                                      .Doc("Internal: the value fed for feed number 'index'.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("_Retval")
                                      .Input("input: T")
                                      .Attr("T: {all, resource}")
                                      .Attr("index: int >= 0")
                                      .Shape(NoOutputShape)
                                      .Doc("Internal: delivers fetch number 'index' to the caller.")));
  // Internal: the partitioner cuts every edge between devices into a _Send
  // on the producer's device and a _Recv on the consumer's, which meet in
  // the step's rendezvous under (send device, incarnation, receive device,
  // tensor name, frame, iteration).
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("_Send")
                                      .Input("tensor: T")
                                      .Attr("T: {all, resource}")
                                      .Attr("tensor_name: string")
                                      .Attr("send_device: string")
                                      .Attr("send_device_incarnation: int")
                                      .Attr("recv_device: string")
                                      .Shape(NoOutputShape)
                                      .Doc("Internal: hands its input to the _Recv of the same tensor_name on "
                                           "recv_device.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("_Recv")
                                      .Output("tensor: tensor_type")
                                      .Attr("tensor_type: {all, resource}")
                                      .Attr("shape: shape")
                                      .Attr("tensor_name: string")
                                      .Attr("send_device: string")
                                      .Attr("send_device_incarnation: int")
                                      .Attr("recv_device: string")
                                      .Attr("may_be_dead: bool = false")
                                      .Shape(PlaceholderShape)
                                      .Doc("Internal: the tensor its _Send sent, copied into this device's "
                                           "memory. may_be_dead: the graph has control flow, so the value may be "
                                           "dead (then so is the output).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Placeholder")
          .Output("output: dtype")
          .Attr("dtype: type")
          .Attr("shape: shape")
          .Shape(PlaceholderShape)
          .Doc("A value fed at run time (weft run --feed, Session::Run feeds). Running it without a feed is an "
               "error naming it; a feed whose dtype differs, or whose shape does not fit 'shape' (where -1 "
               "dimensions fit anything), is refused.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Identity")
                                      .Input("input: T")
                                      .Output("output: T")
                                      .Attr("T: {all, resource}")
                                      .Shape(UnchangedShape)
                                      .Doc("Its input, unchanged and not copied.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("NoOp")
                                      .Shape(NoOutputShape)
                                      .Doc("Does nothing; a point to hang control dependencies on (a training step's "
                                           "target).")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("StopGradient")
                     .Input("input: T")
                     .Output("output: T")
                     .Attr("T: {all}")
                     .Shape(UnchangedShape)
                     .Doc("Its input, unchanged; the gradient builder treats it as a constant, so no gradient flows "
                          "through it.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Reshape")
          .Input("tensor: T")
          .Input("shape: Tshape")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("Tshape: {i32, i64}")
          .Shape(ReshapeShape)
          .Doc("The same elements in the same order with a new shape, given as a 1-D tensor; one dimension may "
               "be -1 and is then inferred. No data is copied.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("Transpose")
                     .Input("x: T")
                     .Output("y: T")
                     .Attr("T: {all}")
                     .Attr("perm: list(int) = []")
                     .Shape(TransposeShape)
                     .Doc("Permutes the axes: output axis i is input axis perm[i]. An empty perm reverses the axes (as "
                          "NumPy's transpose).")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("ExpandDims")
                                      .Input("input: T")
                                      .Output("output: T")
                                      .Attr("T: {all}")
                                      .Attr("axis: int")
                                      .Shape(ExpandDimsShape)
                                      .Doc("Inserts an axis of size 1 at 'axis' (negative counts from the end of the "
                                           "result).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Squeeze")
          .Input("input: T")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("axis: list(int) = []")
          .Shape(SqueezeShape)
          .Doc("Removes axes of size 1: those in 'axis', or all of them when it is empty. Naming an axis whose "
               "size is not 1 is an error.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Concat")
                                      .Input("values: N * T")
                                      .Output("output: T")
                                      .Attr("N: int >= 1")
                                      .Attr("T: {all}")
                                      .Attr("axis: int")
                                      .Shape(ConcatShape)
                                      .Doc("Joins N tensors along 'axis'; every other dimension must match.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Split")
                                      .Input("value: T")
                                      .Output("output: num_split * T")
                                      .Attr("T: {all}")
                                      .Attr("num_split: int >= 1")
                                      .Attr("axis: int")
                                      .Shape(SplitShape)
                                      .Doc("Splits a tensor into num_split equal parts along 'axis'.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Slice")
          .Input("input: T")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("begin: list(int)")
          .Attr("size: list(int)")
          .Shape(SliceShape)
          .Doc("The block starting at 'begin' with extent 'size' in each dimension; a size of -1 takes the rest "
               "of that dimension.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("StridedSlice")
          .Input("input: T")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("begin: list(int)")
          .Attr("end: list(int)")
          .Attr("strides: list(int)")
          .Attr("begin_mask: int = 0")
          .Attr("end_mask: int = 0")
          .Attr("ellipsis_mask: int = 0")
          .Attr("new_axis_mask: int = 0")
          .Attr("shrink_axis_mask: int = 0")
          .Shape(StridedSliceShape)
          .Doc("NumPy basic indexing, x[b0:e0:s0, ...], as in TensorFlow: negative indices count from the end and "
               "are clamped; bit i of begin_mask/end_mask ignores begin[i]/end[i]; ellipsis_mask marks '...', "
               "new_axis_mask inserts an axis (None), shrink_axis_mask takes a single index and drops the axis.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Pad")
          .Input("input: T")
          .Output("output: T")
          .Attr("T: {numeric, bool}")
          .Attr("paddings: list(int)")
          .Attr("mode: {'CONSTANT', 'REFLECT', 'SYMMETRIC'} = 'CONSTANT'")
          .Attr("constant_value: float = 0")
          .Shape(PadShape)
          .Doc("Pads each dimension i with paddings[2i] elements before and paddings[2i+1] after: with "
               "constant_value, or mirrored without (REFLECT) or with (SYMMETRIC) the edge, as NumPy's pad.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Tile")
                                      .Input("input: T")
                                      .Output("output: T")
                                      .Attr("T: {all}")
                                      .Attr("multiples: list(int)")
                                      .Shape(TileShape)
                                      .Doc("Repeats the tensor multiples[i] times along each axis i (NumPy's tile "
                                           "with equal ranks).")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Reverse")
                                      .Input("tensor: T")
                                      .Output("output: T")
                                      .Attr("T: {all}")
                                      .Attr("axis: list(int)")
                                      .Shape(ReverseShape)
                                      .Doc("Reverses the order of elements along each axis in 'axis' (NumPy's "
                                           "flip).")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Gather")
          .Input("params: T")
          .Input("indices: Tindices")
          .Output("output: T")
          .Attr("T: {all}")
          .Attr("Tindices: {i32, i64}")
          .Attr("axis: int = 0")
          .Shape(GatherShape)
          .Doc("Slices of params along 'axis' at 'indices' (NumPy's take): the output shape is params.shape[:axis] "
               "+ indices.shape + params.shape[axis+1:]. An index outside [0, params.shape[axis]) is an error.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("GatherNd")
                     .Input("params: T")
                     .Input("indices: Tindices")
                     .Output("output: T")
                     .Attr("T: {all}")
                     .Attr("Tindices: {i32, i64}")
                     .Shape(GatherNdShape)
                     .Doc("Gathers slices of params addressed by the last axis of 'indices': output[i...] = "
                          "params[indices[i..., 0], ..., indices[i..., k-1]]. An index out of range is an error.")));
  WEFT_RETURN_IF_ERROR(
      r.Register(OpDefBuilder("ScatterNd")
                     .Input("indices: Tindices")
                     .Input("updates: T")
                     .Output("output: T")
                     .Attr("T: {numeric}")
                     .Attr("Tindices: {i32, i64}")
                     .Attr("shape: list(int)")
                     .Shape(ScatterNdShape)
                     .Doc("A zero tensor of 'shape' with the slices of 'updates' added at 'indices' (the inverse of "
                          "GatherNd); repeated indices add up. An index out of range is an error.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("OneHot")
          .Input("indices: TI")
          .Output("output: T")
          .Attr("T: {numeric} = 'f32'")
          .Attr("TI: {u8, i32, i64}")
          .Attr("depth: int")
          .Attr("on_value: float = 1")
          .Attr("off_value: float = 0")
          .Attr("axis: int = -1")
          .Shape(OneHotShape)
          .Doc("One-hot encoding: a new axis of size 'depth' at 'axis' holding on_value at each index and "
               "off_value elsewhere. Indices outside [0, depth) give a row of off_value, as in TensorFlow.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Fill")
                                      .Input("dims: index_type")
                                      .Input("value: T")
                                      .Output("output: T")
                                      .Attr("T: {all}")
                                      .Attr("index_type: {i32, i64}")
                                      .Shape(FillShape)
                                      .Doc("A tensor of shape 'dims' with every element equal to the scalar "
                                           "'value'.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("ZerosLike")
                                      .Input("x: T")
                                      .Output("y: T")
                                      .Attr("T: {numeric, bool}")
                                      .Shape(UnchangedShape)
                                      .Doc("Zeros of x's dtype and shape.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("OnesLike")
                                      .Input("x: T")
                                      .Output("y: T")
                                      .Attr("T: {numeric, bool}")
                                      .Shape(UnchangedShape)
                                      .Doc("Ones of x's dtype and shape.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Shape")
                                      .Input("input: T")
                                      .Output("output: out_type")
                                      .Attr("T: {all}")
                                      .Attr("out_type: {i32, i64} = 'i32'")
                                      .Shape(ShapeOfShape)
                                      .Doc("The shape of the input as a 1-D tensor.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Size")
                                      .Input("input: T")
                                      .Output("output: out_type")
                                      .Attr("T: {all}")
                                      .Attr("out_type: {i32, i64} = 'i32'")
                                      .Shape(ScalarShape)
                                      .Doc("The number of elements of the input, a scalar.")));
  WEFT_RETURN_IF_ERROR(r.Register(OpDefBuilder("Rank")
                                      .Input("input: T")
                                      .Output("output: i32")
                                      .Attr("T: {all}")
                                      .Shape(ScalarShape)
                                      .Doc("The rank of the input, an i32 scalar.")));
  WEFT_RETURN_IF_ERROR(r.Register(
      OpDefBuilder("Range")
          .Input("start: Tidx")
          .Input("limit: Tidx")
          .Input("delta: Tidx")
          .Output("output: Tidx")
          .Attr("Tidx: {f32, f64, i32, i64}")
          .Shape(RangeShape)
          .Doc("The sequence start, start + delta, ... up to but not including limit (NumPy's arange). delta "
               "must not be 0 and must point from start toward limit.")));
  return Status();
}

}  // namespace weft::ops
