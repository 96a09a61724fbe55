// ONNX converters, shapes and indexing: Reshape, Transpose, (Un)Squeeze, Concat, Shape, Gather, Slice, Split,
// constants, Expand, Tile, Pad, reductions, TopK, GatherElements, ScatterElements, NonZero (the conventions are in
// core/onnx/converters.h; docs/onnx.md has the table).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/base/strings.h"
#include "core/graph/control_flow.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// --- Shapes and indexing -----------------------------------------------------------------

// |shape| (1-D i64, |n| values) with each 0 replaced by the input's
// dimension at that position (ONNX's "copy" without allowzero), at run time.
Output ResolvedShape(NodeContext& c, const Output& x, const Output& shape, int n) {
  Output in_shape = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "in_shape");
  // Padded with n zeros, so that a target longer than the input's rank has
  // a head to select from (a 0 past the input's rank stays 0).
  in_shape =
      Op(c, "Concat", {in_shape, ConstOf(c, Int64s(std::vector<int64_t>(static_cast<std::size_t>(n), 0)), "pad")},
         {{"axis", AttrValue(int64_t{0})}}, "in_shape_padded");
  Output head = Op(c, "StridedSlice", {in_shape},
                   {{"begin", AttrValue(std::vector<int64_t>{0})},
                    {"end", AttrValue(std::vector<int64_t>{n})},
                    {"strides", AttrValue(std::vector<int64_t>{1})}},
                   "in_head");
  Output zero = ConstOf(c, Tensor::Scalar<int64_t>(0), "zero");
  return Op(c, "Select", {Op(c, "Equal", {shape, zero}, {}, "copies"), head, shape}, {}, "resolved_shape");
}

Status Reshape(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const bool allowzero = c.Int("allowzero", 0) != 0;
  std::vector<int64_t> dims;
  if (c.opset() < 5) {
    dims = c.Ints("shape");
  } else {
    const Tensor k = c.Known(1);
    if (!k.valid()) {
      // A computed shape: its zeros copy the input's dimensions at run
      // time (unless allowzero).
      WEFT_ASSIGN_OR_RETURN(Output shape, c.In(1));
      if (!allowzero) {
        const int n = shape.shape().rank() == 1 ? static_cast<int>(shape.shape().dim(0)) : -1;
        if (n < 0) return c.Unsupported("Reshape to a computed shape of unknown length");
        Output s64 = shape.dtype() == DType::kI64
                         ? shape
                         : Op(c, "Cast", {shape}, {{"DstT", AttrValue(DType::kI64)}}, "shape64");
        shape = ResolvedShape(c, x, s64, n);
      }
      c.SetOut(0, Op(c, "Reshape", {x, shape}));
      return Status();
    }
    dims = ToInts(k);
  }
  const std::vector<int64_t> given = dims;
  const Shape xs = c.InShape(0);
  if (!allowzero && xs.rank() >= 0) {
    for (std::size_t i = static_cast<std::size_t>(xs.rank()); i < dims.size(); ++i) {
      if (dims[i] == 0) {
        return c.Error("shape[", i, "] is 0, which copies the input's dimension ", i, ", but the input ", xs.ToString(),
                       " has rank ", xs.rank(), " (set allowzero for an empty dimension)");
      }
    }
  }
  bool runtime = false;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowzero) {
      if (static_cast<int>(i) < xs.rank() && xs.dim(static_cast<int>(i)) >= 0) {
        dims[i] = xs.dim(static_cast<int>(i));
      } else if (static_cast<int>(i) < xs.rank() && xs.dim(static_cast<int>(i)) < 0 &&
                 std::count(dims.begin(), dims.end(), -1) == 0) {
        dims[i] = -1;  // the one unknown dimension is inferred
      } else {
        runtime = true;
      }
    }
  }
  if (runtime && !allowzero && xs.rank() >= 0) {
    // [0, 0, -1] of [8, ?, 2, 24]: the one unknown dimension is copied, so
    // it cancels out and the -1 is known (48); the copy becomes the -1.
    int unknown = 0, copied_unknown = -1;
    int64_t in_known = 1, out_known = 1;
    bool overflow = false;
    for (int i = 0; i < xs.rank(); ++i) {
      const bool copied = static_cast<std::size_t>(i) < given.size() && given[static_cast<std::size_t>(i)] == 0;
      if (xs.dim(i) < 0) {
        ++unknown;
        if (copied) copied_unknown = i;
      } else if (!copied) {
        overflow = overflow || __builtin_mul_overflow(in_known, xs.dim(i), &in_known);
      }
    }
    int64_t infer = -1;
    for (std::size_t i = 0; i < given.size(); ++i) {
      if (given[i] == -1) infer = static_cast<int64_t>(i);
      if (given[i] > 0) overflow = overflow || __builtin_mul_overflow(out_known, given[i], &out_known);
    }
    if (!overflow && unknown == 1 && copied_unknown >= 0 && infer >= 0 && out_known > 0 && in_known % out_known == 0) {
      dims = given;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i] == 0) dims[i] = static_cast<int>(i) == copied_unknown ? -1 : xs.dim(static_cast<int>(i));
      }
      dims[static_cast<std::size_t>(infer)] = in_known / out_known;
      runtime = false;
    }
  }
  // Zeros copying dimensions of unknown size beside a -1: resolved at run time.
  Output shape = runtime ? ResolvedShape(c, x, ConstOf(c, Int64s(given), "shape"), static_cast<int>(given.size()))
                         : ConstOf(c, Int64s(dims), "shape");
  c.SetOut(0, Op(c, "Reshape", {x, shape}));
  return Status();
}

Status Transpose(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "Transpose", {x}, {{"perm", AttrValue(c.Ints("perm"))}}));
  return Status();
}

// Unsqueeze/Squeeze axes: an attr before opset 13, an input since.
Expected<std::optional<std::vector<int64_t>>> AxesArg(NodeContext& c, int input, int since) {
  if (c.opset() < since) {
    if (!c.HasAttr("axes")) return std::optional<std::vector<int64_t>>();
    return std::optional<std::vector<int64_t>>(c.Ints("axes"));
  }
  if (!c.has_input(input)) return std::optional<std::vector<int64_t>>();
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.KnownInts(input, "axes"));
  return std::optional<std::vector<int64_t>>(axes);
}

Status Unsqueeze(NodeContext& c) {
  if (c.opset() >= 13 && Fed(c, 1)) return DynamicIndexOp(c, "DynamicExpandDims", "axes");
  WEFT_ASSIGN_OR_RETURN(auto axes_opt, AxesArg(c, 1, 13));
  if (!axes_opt.has_value()) return c.Error("needs axes");
  std::vector<int64_t> axes = *axes_opt;
  const int r = c.InShape(0).rank();
  if (r < 0) return c.Unsupported("Unsqueeze of an input of unknown rank");
  const int out_rank = r + static_cast<int>(axes.size());
  for (int64_t& a : axes) {
    WEFT_ASSIGN_OR_RETURN(a, Axis(c, a, out_rank, "axis"));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) return c.Error("repeated axes ", ListString(axes));
  const Tensor known = c.Known(0);
  if (known.valid() && known.rank() <= 1 && IsInteger(known.dtype())) {
    std::vector<int64_t> dims = known.shape().dims();
    for (int64_t a : axes) dims.insert(dims.begin() + a, 1);
    c.SetKnown(0, Int64s(ToInts(known), Shape(dims)));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  for (std::size_t i = 0; i < axes.size(); ++i) {
    x = Op(c, "ExpandDims", {x}, {{"axis", AttrValue(axes[i])}}, i + 1 == axes.size() ? "" : StrCat("axis_", axes[i]));
  }
  c.SetOut(0, x);
  return Status();
}

Status Squeeze(NodeContext& c) {
  if (c.opset() >= 13 && Fed(c, 1)) return DynamicIndexOp(c, "DynamicSqueeze", "axes");
  WEFT_ASSIGN_OR_RETURN(auto axes_opt, AxesArg(c, 1, 13));
  std::vector<int64_t> axes = axes_opt.value_or(std::vector<int64_t>{});
  const int r = c.InShape(0).rank();
  for (int64_t& a : axes) {
    WEFT_ASSIGN_OR_RETURN(a, Axis(c, a, r, "axis"));
  }
  const Tensor known = c.Known(0);
  if (known.valid() && known.rank() <= 1 && IsInteger(known.dtype()) && known.num_elements() == 1) {
    c.SetKnown(0, Tensor::Scalar<int64_t>(ToInts(known)[0]));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "Squeeze", {x}, {{"axis", AttrValue(axes)}}));
  return Status();
}

Status Concat(NodeContext& c) {
  const int64_t axis_attr = c.Int("axis", 0);
  // Shape arithmetic: concatenating known integer vectors.
  bool all_known = true;
  for (int i = 0; i < c.num_inputs(); ++i) {
    const Tensor k = c.Known(i);
    all_known = all_known && k.valid() && k.rank() == 1 && IsInteger(k.dtype());
  }
  if (all_known && c.num_inputs() > 0) {
    std::vector<int64_t> joined;
    for (int i = 0; i < c.num_inputs(); ++i) {
      const std::vector<int64_t> v = ToInts(c.Known(i));
      joined.insert(joined.end(), v.begin(), v.end());
    }
    c.SetKnown(0, Int64s(joined));
    return Status();
  }
  std::vector<Output> parts;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    WEFT_ASSIGN_OR_RETURN(Output p, c.In(i));
    parts.push_back(p);
  }
  const int r = parts.empty() ? -1 : parts[0].shape().rank();
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, axis_attr, r, "attr 'axis'"));
  c.SetOut(0, Op(c, "Concat", parts, {{"axis", AttrValue(axis)}}));
  return Status();
}

Status ShapeOp(NodeContext& c) {
  const Shape xs = c.InShape(0);
  int64_t start = c.Int("start", 0), end = c.Int("end", std::numeric_limits<int64_t>::max());
  if (xs.rank() >= 0) {
    const int64_t r = xs.rank();
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
    std::vector<int64_t> dims;
    bool known = true;
    for (int64_t i = start; i < end; ++i) {
      dims.push_back(xs.dim(static_cast<int>(i)));
      known = known && xs.dim(static_cast<int>(i)) >= 0;
    }
    if (known) {
      c.SetKnown(0, Int64s(dims));
      return Status();
    }
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  Output s = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}},
                c.HasAttr("start") || c.HasAttr("end") ? "Shape" : "");
  if (c.HasAttr("start") || c.HasAttr("end")) {
    if (xs.rank() < 0) return c.Unsupported("Shape with start/end of an input of unknown rank");
    s = Op(c, "StridedSlice", {s},
           {{"begin", AttrValue(std::vector<int64_t>{start})},
            {"end", AttrValue(std::vector<int64_t>{end})},
            {"strides", AttrValue(std::vector<int64_t>{1})}});
  }
  c.SetOut(0, s);
  return Status();
}

Status Size(NodeContext& c) {
  const Shape xs = c.InShape(0);
  if (xs.IsFullyDefined()) {  // shape arithmetic folds on
    c.SetKnown(0, Tensor::Scalar<int64_t>(xs.num_elements()));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "Size", {x}, {{"out_type", AttrValue(DType::kI64)}}));
  return Status();
}

Status Gather(NodeContext& c) {
  const Shape xs = c.InShape(0);
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 0), xs.rank(), "attr 'axis'"));
  const Tensor data = c.Known(0);
  Tensor idx = c.Known(1);
  // Negative indices count from the end: fixed here when they are known.
  if (idx.valid()) {
    std::vector<int64_t> v = ToInts(idx);
    const int64_t dim = xs.rank() > axis ? xs.dim(static_cast<int>(axis)) : -1;
    bool changed = false;
    for (int64_t& i : v) {
      if (i < 0) {
        if (dim < 0) return c.Unsupported("a negative Gather index on an axis of unknown size");
        i += dim;
        changed = true;
      }
    }
    if (data.valid() && data.rank() == 1 && IsInteger(data.dtype()) && axis == 0) {
      const std::vector<int64_t> d = ToInts(data);
      std::vector<int64_t> out;
      for (int64_t i : v) {
        if (i < 0 || i >= static_cast<int64_t>(d.size())) return c.Error("index ", i, " is out of range");
        out.push_back(d[static_cast<std::size_t>(i)]);
      }
      c.SetKnown(0, Int64s(out, idx.shape()));
      return Status();
    }
    if (changed) idx = Int64s(v, idx.shape());
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  Output indices;
  if (idx.valid()) {
    indices =
        ConstOf(c, idx.dtype() == DType::kI64 || idx.dtype() == DType::kI32 ? idx : Int64s(ToInts(idx), idx.shape()),
                "indices");
  } else {
    WEFT_ASSIGN_OR_RETURN(indices, c.In(1));
    // Fed indices may be negative, counting from the end (an axis of known size).
    const int64_t dim = xs.rank() > axis ? xs.dim(static_cast<int>(axis)) : -1;
    if (dim > 0 && IsSignedInteger(indices.dtype())) {
      WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, indices.dtype(), 0, "zero"));
      WEFT_ASSIGN_OR_RETURN(Output size, ScalarLike(c, indices.dtype(), static_cast<double>(dim), "axis_size"));
      indices =
          Op(c, "Select",
             {Op(c, "Less", {indices, zero}, {}, "negative"), Op(c, "Add", {indices, size}, {}, "from_end"), indices},
             {}, "index");
    }
  }
  c.SetOut(0, Op(c, "Gather", {x, indices}, {{"axis", AttrValue(axis)}}));
  return Status();
}

Status Slice(NodeContext& c) {
  if (c.opset() >= 10 && (Fed(c, 1) || Fed(c, 2) || Fed(c, 3) || Fed(c, 4))) return DynamicSliceOp(c);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    starts = c.Ints("starts");
    ends = c.Ints("ends");
    axes = c.Ints("axes");
  } else {
    WEFT_ASSIGN_OR_RETURN(starts, c.KnownInts(1, "starts"));
    WEFT_ASSIGN_OR_RETURN(ends, c.KnownInts(2, "ends"));
    if (c.has_input(3)) {
      WEFT_ASSIGN_OR_RETURN(axes, c.KnownInts(3, "axes"));
    }
    if (c.has_input(4)) {
      WEFT_ASSIGN_OR_RETURN(steps, c.KnownInts(4, "steps"));
    }
  }
  if (starts.size() != ends.size()) return c.Error("starts and ends differ in length");
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.Error("starts, ends, axes and steps differ in length");
  }
  const Shape xs = c.InShape(0);
  const int r = xs.rank();
  if (r < 0) return c.Unsupported("Slice of an input of unknown rank");
  std::vector<int64_t> begin(static_cast<std::size_t>(r), 0), end(static_cast<std::size_t>(r), 0),
      stride(static_cast<std::size_t>(r), 1);
  int64_t begin_mask = (int64_t{1} << r) - 1, end_mask = begin_mask;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    WEFT_ASSIGN_OR_RETURN(int64_t a, Axis(c, axes[i], r, "axis"));
    if (steps[i] == 0) return c.Error("a step of 0");
    const std::size_t ai = static_cast<std::size_t>(a);
    stride[ai] = steps[i];
    begin[ai] = starts[i];
    end[ai] = ends[i];
    begin_mask &= ~(int64_t{1} << a);
    end_mask &= ~(int64_t{1} << a);
    // "To the end" (INT64_MAX, or INT64_MIN going backwards) is a mask bit.
    const int64_t big = int64_t{1} << 31;
    if ((steps[i] > 0 && ends[i] >= big) || (steps[i] < 0 && ends[i] <= -big)) {
      end_mask |= int64_t{1} << a;
      end[ai] = 0;
    }
    if ((steps[i] > 0 && starts[i] <= -big) || (steps[i] < 0 && starts[i] >= big)) {
      begin_mask |= int64_t{1} << a;
      begin[ai] = 0;
    }
  }
  const Tensor known = c.Known(0);
  if (known.valid() && known.rank() == 1 && IsInteger(known.dtype())) {
    const std::vector<int64_t> v = ToInts(known);
    const int64_t n = static_cast<int64_t>(v.size());
    int64_t b0 = (begin_mask & 1) ? (stride[0] > 0 ? 0 : n - 1) : begin[0];
    int64_t e0 = (end_mask & 1) ? (stride[0] > 0 ? n : -1) : end[0];
    if (!(begin_mask & 1))
      b0 = b0 < 0 ? std::max<int64_t>(b0 + n, stride[0] > 0 ? 0 : -1) : std::min(b0, stride[0] > 0 ? n : n - 1);
    if (!(end_mask & 1))
      e0 = e0 < 0 ? std::max<int64_t>(e0 + n, stride[0] > 0 ? 0 : -1) : std::min(e0, stride[0] > 0 ? n : n - 1);
    std::vector<int64_t> out;
    for (int64_t i = b0; stride[0] > 0 ? i < e0 : i > e0; i += stride[0]) out.push_back(v[static_cast<std::size_t>(i)]);
    c.SetKnown(0, Int64s(out));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "StridedSlice", {x},
                 {{"begin", AttrValue(begin)},
                  {"end", AttrValue(end)},
                  {"strides", AttrValue(stride)},
                  {"begin_mask", AttrValue(begin_mask)},
                  {"end_mask", AttrValue(end_mask)}}));
  return Status();
}

Status SplitOp(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 0), xs.rank(), "attr 'axis'"));
  std::vector<int64_t> sizes;
  if (c.opset() < 13) {
    sizes = c.Ints("split");
  } else if (Fed(c, 1)) {
    return DynamicSplitOp(c, axis);
  } else if (c.has_input(1)) {
    WEFT_ASSIGN_OR_RETURN(sizes, c.KnownInts(1, "split"));
  }
  const int n = c.node().output_size();
  const int64_t dim = xs.rank() > axis ? xs.dim(static_cast<int>(axis)) : -1;
  if (sizes.empty() && (dim < 0 || dim % n == 0)) {
    std::vector<Output> parts =
        c.b().AddNode("Split", {x}, {{"num_split", AttrValue(int64_t{n})}, {"axis", AttrValue(axis)}}, c.Name());
    for (int i = 0; i < static_cast<int>(parts.size()); ++i) c.SetOut(i, parts[static_cast<std::size_t>(i)]);
    return Status();
  }
  if (sizes.empty()) {
    // Opset 18's uneven split: ceil(dim / n) each, the last smaller.
    const int64_t each = (dim + n - 1) / n;
    for (int i = 0; i < n; ++i) sizes.push_back(std::min(each, dim - each * i));
  }
  if (static_cast<int>(sizes.size()) != n) return c.Error(sizes.size(), " split sizes for ", n, " outputs");
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> begin(static_cast<std::size_t>(xs.rank()), 0), size(static_cast<std::size_t>(xs.rank()), -1);
    begin[static_cast<std::size_t>(axis)] = offset;
    size[static_cast<std::size_t>(axis)] = sizes[static_cast<std::size_t>(i)];
    offset += sizes[static_cast<std::size_t>(i)];
    c.SetOut(i, Op(c, "Slice", {x}, {{"begin", AttrValue(begin)}, {"size", AttrValue(size)}}, StrCat("part_", i)));
  }
  return Status();
}

Status ConstantOp(NodeContext& c) {
  const onnx::AttributeProto* a = nullptr;
  for (const char* name : {"value", "value_float", "value_floats", "value_int", "value_ints", "value_string",
                           "value_strings", "sparse_value"}) {
    if ((a = c.Attr(name)) != nullptr) break;
  }
  if (a == nullptr) return c.Error("Constant without a value attr");
  Tensor t;
  if (a->name() == "value") {
    auto v = TensorFromProto(a->t(), "");
    if (!v.ok()) return v.status();
    t = *v;
  } else if (a->name() == "value_float") {
    t = Tensor::Scalar<float>(a->f());
  } else if (a->name() == "value_floats") {
    t = Tensor::FromVector<float>(std::vector<float>(a->floats().begin(), a->floats().end()));
  } else if (a->name() == "value_int") {
    t = Tensor::Scalar<int64_t>(a->i());
  } else if (a->name() == "value_ints") {
    t = Int64s(std::vector<int64_t>(a->ints().begin(), a->ints().end()));
  } else if (a->name() == "value_string") {
    t = Tensor::Strings({a->s()}, Shape{});
  } else if (a->name() == "value_strings") {
    t = Tensor::Strings(std::vector<std::string>(a->strings().begin(), a->strings().end()),
                        Shape{static_cast<int64_t>(a->strings_size())});
  } else {
    return c.Unsupported("a sparse Constant");
  }
  c.SetKnown(0, t);
  return Status();
}

Status ConstantOfShape(NodeContext& c) {
  Tensor value = Tensor::Scalar<float>(0.0f);
  if (const auto* a = c.Attr("value")) {
    auto v = TensorFromProto(a->t(), "");
    if (!v.ok()) return v.status().WithContext("attr 'value'");
    if (v->num_elements() != 1) return c.Error("attr 'value' must have one element, got ", v->TypeString());
    WEFT_ASSIGN_OR_RETURN(value, v->Reshaped(Shape{}));
  }
  Output dims;
  const Tensor k = c.Known(0);
  if (k.valid() && value.dtype() == DType::kI64) {
    // A small integer fill (a shape's tail of ones) is known, so that the
    // shape arithmetic it feeds folds on.
    const std::vector<int64_t> shape = ToInts(k);
    int64_t count = 1;
    for (int64_t d : shape) count = d < 0 || count > 4096 ? -1 : count * d;
    if (count >= 0 && count <= 4096) {
      c.SetKnown(0,
                 Int64s(std::vector<int64_t>(static_cast<std::size_t>(count), value.scalar<int64_t>()), Shape(shape)));
      return Status();
    }
  }
  if (k.valid()) {
    dims = ConstOf(c, Int64s(ToInts(k)), "dims");
  } else {
    WEFT_ASSIGN_OR_RETURN(dims, c.In(0));
  }
  c.SetOut(0, Op(c, "Fill", {dims, ConstOf(c, value, "value")}));
  return Status();
}

Status Expand(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Tensor k = c.Known(1);
  const Shape xs = c.InShape(0);
  if (k.valid() && xs.IsFullyDefined()) {
    // Bidirectional broadcasting of the two shapes.
    std::vector<int64_t> a = xs.dims(), s = ToInts(k);
    const std::size_t n = std::max(a.size(), s.size());
    a.insert(a.begin(), n - a.size(), 1);
    s.insert(s.begin(), n - s.size(), 1);
    std::vector<int64_t> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (a[i] != s[i] && a[i] != 1 && s[i] != 1) {
        return c.Error("cannot broadcast ", xs.ToString(), " to ", ListString(ToInts(k)));
      }
      out[i] = a[i] == 1 ? s[i] : a[i];
    }
    c.SetOut(0, Op(c, "BroadcastTo", {x, ConstOf(c, Int64s(out), "shape")}));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output shape, c.In(1));
  if (x.dtype() == DType::kBool) {
    Output f = Op(c, "Fill", {shape, ConstOf(c, Tensor::Scalar<bool>(false), "false")}, {}, "false_like");
    c.SetOut(0, Op(c, "LogicalOr", {x, f}));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
  c.SetOut(0, Op(c, "Add", {x, Op(c, "Fill", {shape, zero}, {}, "zeros")}));
  return Status();
}

Status Tile(NodeContext& c) {
  if (Fed(c, 1)) return DynamicIndexOp(c, "DynamicTile", "repeats");
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, c.KnownInts(1, "repeats"));
  c.SetOut(0, Op(c, "Tile", {x}, {{"multiples", AttrValue(repeats)}}));
  return Status();
}

Status PadOp(NodeContext& c) {
  if (c.opset() >= 11 && (Fed(c, 1) || Fed(c, 2))) return DynamicPadOp(c);
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  std::vector<int64_t> pads;
  double value = 0;
  if (c.opset() < 11) {
    pads = c.Ints("pads");
    value = c.Float("value", 0.0);
  } else {
    WEFT_ASSIGN_OR_RETURN(pads, c.KnownInts(1, "pads"));
    if (c.has_input(2)) {
      WEFT_ASSIGN_OR_RETURN(value, c.KnownScalar(2, "constant_value"));
    }
  }
  const int r = c.InShape(0).rank();
  if (r < 0 || static_cast<int>(pads.size()) != 2 * r) {
    return c.Error("pads has ", pads.size(), " entries for an input of rank ", r);
  }
  std::vector<int64_t> paddings(pads.size());
  bool at_most_one = true;
  for (int i = 0; i < r; ++i) {
    paddings[2 * static_cast<std::size_t>(i)] = pads[static_cast<std::size_t>(i)];
    paddings[2 * static_cast<std::size_t>(i) + 1] = pads[static_cast<std::size_t>(i + r)];
  }
  bool negative = false;
  for (int64_t p : pads) {
    negative = negative || p < 0;
    at_most_one = at_most_one && p <= 1;
  }
  // Cropping, and edge padding beyond one element: DynamicPad, which
  // takes them (its pads a constant here).
  if (c.opset() >= 11 && (negative || (c.Str("mode", "constant") == "edge" && !at_most_one))) return DynamicPadOp(c);
  if (negative) return c.Unsupported("negative pads ", ListString(pads), " (cropping) before opset 11");
  std::string mode = c.Str("mode", "constant");
  std::string weft_mode;
  if (mode == "constant") {
    weft_mode = "CONSTANT";
  } else if (mode == "reflect") {
    weft_mode = "REFLECT";
  } else if (mode == "edge" && at_most_one) {
    weft_mode = "SYMMETRIC";  // mirroring with the edge repeats the edge, for one element
  } else if (mode == "edge") {
    return c.Unsupported("Pad mode 'edge' with pads above 1");
  } else {
    return c.Error("attr 'mode' is ", Quote(mode), "; expected constant, reflect or edge");
  }
  c.SetOut(
      0, Op(c, "Pad", {x},
            {{"paddings", AttrValue(paddings)}, {"mode", AttrValue(weft_mode)}, {"constant_value", AttrValue(value)}}));
  return Status();
}

// An ONNX op that is one Weft op on the same |inputs| inputs (Where,
// Range).
Status Direct(NodeContext& c, std::string_view weft_op, int inputs) {
  std::vector<Output> in;
  for (int i = 0; i < inputs; ++i) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(i));
    in.push_back(x);
  }
  c.SetOut(0, Op(c, weft_op, in));
  return Status();
}

Status CumSum(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output axis, c.In(1));
  c.SetOut(
      0, Op(c, "Cumsum", {x, axis},
            {{"exclusive", AttrValue(c.Int("exclusive", 0) != 0)}, {"reverse", AttrValue(c.Int("reverse", 0) != 0)}}));
  return Status();
}

// ReduceX: axes an attr before opset 13 for ReduceSum (18 for the others).
Status Reduce(NodeContext& c, std::string_view kind) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const bool keep = c.Int("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  bool axes_given = false;
  if (c.node().op_type() == "ReduceSum" && c.opset() >= 13) {
    if (Fed(c, 1)) return DynamicReduceSum(c);
    if (c.has_input(1)) {
      WEFT_ASSIGN_OR_RETURN(axes, c.KnownInts(1, "axes"));
      axes_given = true;
    }
    if (!axes_given && c.Int("noop_with_empty_axes", 0) != 0) {
      c.SetOut(0, Op(c, "Identity", {x}));
      return Status();
    }
  } else {
    axes = c.Ints("axes");
  }
  const int r = c.InShape(0).rank();
  for (int64_t& a : axes) {
    WEFT_ASSIGN_OR_RETURN(a, Axis(c, a, r, "axis"));
  }
  AttrMap attrs = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(keep)}};
  Output y;
  if (kind == "L1") {
    y = Op(c, "Sum", {Op(c, "Abs", {x}, {}, "abs")}, attrs);
  } else if (kind == "L2") {
    y = Op(c, "Sqrt", {Op(c, "Sum", {Op(c, "Square", {x}, {}, "square")}, attrs, "sum")});
  } else if (kind == "SumSquare") {
    y = Op(c, "Sum", {Op(c, "Square", {x}, {}, "square")}, attrs);
  } else if (kind == "LogSum") {
    y = Op(c, "Log", {Op(c, "Sum", {x}, attrs, "sum")});
  } else if (kind == "LogSumExp") {
    AttrMap keep_attrs = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}};
    Output m = Op(c, "StopGradient", {Op(c, "Max", {x}, keep_attrs, "max")}, {}, "shift");
    Output s = Op(c, "Sum", {Op(c, "Exp", {Op(c, "Sub", {x, m}, {}, "shifted")}, {}, "exp")}, attrs, "sum");
    Output mm = keep ? m
                     : Op(c, "Squeeze", {m}, {{"axis", AttrValue(axes.empty() ? std::vector<int64_t>{} : axes)}},
                          "shift_squeezed");
    if (!keep && axes.empty()) mm = Op(c, "Max", {x}, attrs, "max_all");
    y = Op(c, "Add", {Op(c, "Log", {s}, {}, "log"), mm});
  } else {
    y = Op(c, kind, {x}, attrs);
  }
  c.SetOut(0, y);
  return Status();
}

Status ArgOp(NodeContext& c, std::string_view weft_op) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const int r = c.InShape(0).rank();
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 0), r, "attr 'axis'"));
  const bool keep = c.Int("keepdims", 1) != 0;
  if (c.Int("select_last_index", 0) != 0) {
    // The last extreme: the first one along the reversed axis, mirrored.
    const int64_t dim = c.InShape(0).dim(static_cast<int>(axis));
    if (dim < 0) return c.Unsupported("select_last_index on an axis of unknown size");
    Output rev = Op(c, "Reverse", {x}, {{"axis", AttrValue(std::vector<int64_t>{axis})}}, "reversed");
    Output idx = Op(c, weft_op, {rev}, {{"axis", AttrValue(axis)}, {"output_type", AttrValue(DType::kI64)}}, "first");
    Output last = ConstOf(c, Tensor::Scalar<int64_t>(dim - 1), "last");
    Output y = Op(c, "Sub", {last, idx}, {}, keep ? "index" : "");
    c.SetOut(0, keep ? Op(c, "ExpandDims", {y}, {{"axis", AttrValue(axis)}}) : y);
    return Status();
  }
  Output y =
      Op(c, weft_op, {x}, {{"axis", AttrValue(axis)}, {"output_type", AttrValue(DType::kI64)}}, keep ? weft_op : "");
  c.SetOut(0, keep ? Op(c, "ExpandDims", {y}, {{"axis", AttrValue(axis)}}) : y);
  return Status();
}

Status Identity(NodeContext& c) {
  if (!c.has_input(0)) return c.Error("input 0 is missing");
  c.Alias(0, 0);  // no node: the same tensor
  return Status();
}

// Dropout in inference: the input, and a mask of trues. In training mode
// (training_mode true or fed): y = x * mask / (1 - ratio) with mask =
// RandomUniform >= ratio (the attr seed, or Weft's default seeding).
Status Dropout(NodeContext& c) {
  const bool training_input = c.opset() >= 12 && c.has_input(2);
  const Tensor t = training_input ? c.Known(2) : Tensor();
  if (training_input && (!t.valid() || ToInts(t)[0] != 0)) return DropoutTraining(c);
  if (c.has_output(1)) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
    Output shape = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "shape");
    c.SetOut(1, Op(c, "Fill", {shape, ConstOf(c, Tensor::Scalar<bool>(true), "true")}, {}, "mask"));
  }
  return Identity(c);
}

// --- TopK, GatherElements, ScatterElements, NonZero --------------------------------------

Status TopK(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  Output k;
  if (c.opset() < 10) {
    if (!c.HasAttr("k")) return c.Error("needs attr 'k'");
    k = ConstOf(c, Tensor::Scalar<int64_t>(c.Int("k", 0)), "k");
  } else if (const Tensor known = c.Known(1); known.valid()) {
    WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> kv, c.KnownInts(1, "K"));
    if (kv.size() != 1) return c.Error("K must have one value, got ", kv.size());
    k = ConstOf(c, Tensor::Scalar<int64_t>(kv[0]), "k");
  } else {
    WEFT_ASSIGN_OR_RETURN(Output kin, c.In(1));
    WEFT_ASSIGN_OR_RETURN(k, ScalarI64(c, kin, "K"));
  }
  std::vector<Output> outs = c.b().AddNode("TopK", {x, k},
                                           {{"axis", AttrValue(c.Int("axis", -1))},
                                            {"largest", AttrValue(c.Int("largest", 1) != 0)},
                                            {"sorted", AttrValue(c.Int("sorted", 1) != 0)}},
                                           c.Name());
  if (outs.size() != 2) return c.b().status();
  c.SetOut(0, outs[0]);
  c.SetOut(1, outs[1]);
  return Status();
}

Status GatherElements(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output data, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output indices, c.In(1));
  c.SetOut(0, Op(c, "GatherElements", {data, indices}, {{"axis", AttrValue(c.Int("axis", 0))}}));
  return Status();
}

// ScatterElements, and Scatter (opsets 9 and 10), its older name.
Status ScatterElements(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output data, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output indices, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output updates, c.In(2));
  const std::string reduction = c.Str("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul") {
    return c.Unsupported("reduction ", Quote(reduction), " (Weft has none, add and mul)");
  }
  c.SetOut(0, Op(c, "ScatterElements", {data, indices, updates},
                 {{"axis", AttrValue(c.Int("axis", 0))}, {"reduction", AttrValue(reduction)}}));
  return Status();
}

Status NonZero(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  c.SetOut(0, Op(c, "NonZero", {x}));
  return Status();
}

}  // namespace

void AddShapeConverters(ConverterTable& t) {
  t["Reshape"] = Reshape;
  t["Transpose"] = Transpose;
  t["Unsqueeze"] = Unsqueeze;
  t["Squeeze"] = Squeeze;
  t["Concat"] = Concat;
  t["Shape"] = ShapeOp;
  t["Size"] = Size;
  t["Gather"] = Gather;
  t["Slice"] = Slice;
  t["Split"] = SplitOp;
  t["Constant"] = ConstantOp;
  t["ConstantOfShape"] = ConstantOfShape;
  t["Expand"] = Expand;
  t["Tile"] = Tile;
  t["Pad"] = PadOp;
  t["Where"] = [](NodeContext& c) { return Direct(c, "Select", 3); };
  t["Range"] = [](NodeContext& c) { return Direct(c, "Range", 3); };
  t["CumSum"] = CumSum;
  t["ReduceMean"] = [](NodeContext& c) { return Reduce(c, "Mean"); };
  t["ReduceSum"] = [](NodeContext& c) { return Reduce(c, "Sum"); };
  t["ReduceMax"] = [](NodeContext& c) { return Reduce(c, "Max"); };
  t["ReduceMin"] = [](NodeContext& c) { return Reduce(c, "Min"); };
  t["ReduceProd"] = [](NodeContext& c) { return Reduce(c, "Prod"); };
  t["ReduceL1"] = [](NodeContext& c) { return Reduce(c, "L1"); };
  t["ReduceL2"] = [](NodeContext& c) { return Reduce(c, "L2"); };
  t["ReduceSumSquare"] = [](NodeContext& c) { return Reduce(c, "SumSquare"); };
  t["ReduceLogSum"] = [](NodeContext& c) { return Reduce(c, "LogSum"); };
  t["ReduceLogSumExp"] = [](NodeContext& c) { return Reduce(c, "LogSumExp"); };
  t["ArgMax"] = [](NodeContext& c) { return ArgOp(c, "ArgMax"); };
  t["ArgMin"] = [](NodeContext& c) { return ArgOp(c, "ArgMin"); };
  t["Identity"] = Identity;
  t["Dropout"] = Dropout;
  t["TopK"] = TopK;
  t["GatherElements"] = GatherElements;
  t["ScatterElements"] = ScatterElements;
  t["Scatter"] = ScatterElements;
  t["NonZero"] = NonZero;
}

}  // namespace weft::onnx_io::convert
