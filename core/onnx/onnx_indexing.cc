// ONNX indexing operators composed of Weft ops: ScatterND (reduction none,
// add and mul), GatherND (batch_dims 0 and 1), ReverseSequence, MaxUnpool,
// GridSample (nearest and bilinear), Det of 2x2 and 3x3 matrices, and
// NonMaxSuppression and Unique as the Weft ops of their semantics (the conventions are in core/onnx/converters.h).
#include <map>
#include <utility>

#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

// data with updates written (none) or added (add) at indices: Weft's
// ScatterNd adds updates into zeros of data's (static) shape.
Status ScatterND(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output data, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output indices, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output updates, c.In(2));
  const Shape ds = c.InShape(0);
  if (!ds.IsFullyDefined()) return c.Unsupported("ScatterND into data of unknown shape ", ds.ToString());
  const std::string reduction = c.Str("reduction", "none");
  const AttrMap shape = {{"shape", AttrValue(ds.dims())}};
  Output scattered = Op(c, "ScatterNd", {indices, updates}, shape, "scattered");
  if (reduction == "add") {
    c.SetOut(0, Op(c, "Add", {data, scattered}));
    return Status();
  }
  if (reduction != "none" && reduction != "mul") {
    return c.Unsupported("ScatterND with reduction ", Quote(reduction), " (none, add and mul are supported)");
  }
  Output hits = Op(c, "ScatterNd", {indices, Op(c, "OnesLike", {updates}, {}, "ones")}, shape, "hits");
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, data.dtype(), 0, "zero"));
  Output written = Op(c, "Greater", {hits, zero}, {}, "written");
  if (reduction == "mul") {
    // The product of every update at an index (repeated indices multiply):
    // exp of the summed log magnitudes, negated for an odd count of
    // negative factors.
    if (!IsFloating(data.dtype())) return c.Unsupported("ScatterND mul of ", DTypeName(data.dtype()));
    Output magnitude = Op(c, "Exp",
                          {Op(c, "ScatterNd", {indices, Op(c, "Log", {Op(c, "Abs", {updates}, {}, "abs")}, {}, "log")},
                              shape, "log_sum")},
                          {}, "magnitude");
    Output negative = Op(c, "Cast", {Op(c, "Less", {updates, zero}, {}, "negative")},
                         {{"DstT", AttrValue(data.dtype())}}, "negative_count_in");
    WEFT_ASSIGN_OR_RETURN(Output two, ScalarLike(c, data.dtype(), 2, "two"));
    WEFT_ASSIGN_OR_RETURN(Output one, ScalarLike(c, data.dtype(), 1, "one"));
    Output odd =
        Op(c, "Equal",
           {Op(c, "FloorMod", {Op(c, "ScatterNd", {indices, negative}, shape, "negatives"), two}, {}, "parity"), one},
           {}, "odd");
    Output product = Op(c, "Select", {odd, Op(c, "Neg", {magnitude}, {}, "negated"), magnitude}, {}, "product");
    scattered = Op(c, "Mul", {data, product}, {}, "multiplied");
  }
  c.SetOut(0, Op(c, "Select", {written, scattered, data}));
  return Status();
}

// GatherND; with batch_dims 1, each index tuple gets its batch's index in
// front ([B, ..., k] -> [B, ..., 1 + k]) and GatherNd reads the whole data.
Status GatherND(NodeContext& c) {
  const int64_t batch_dims = c.Int("batch_dims", 0);
  WEFT_ASSIGN_OR_RETURN(Output data, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output indices, c.In(1));
  if (batch_dims == 1) {
    const Shape is = c.InShape(1);
    if (!is.IsFullyDefined() || is.rank() < 2) {
      return c.Unsupported("GatherND with batch_dims 1 and indices of shape ", is.ToString());
    }
    std::vector<int64_t> batch(static_cast<std::size_t>(is.num_elements() / is.dim(is.rank() - 1)));
    const int64_t per_batch = static_cast<int64_t>(batch.size()) / is.dim(0);
    for (std::size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<int64_t>(i) / per_batch;
    std::vector<int64_t> dims = is.dims();
    dims.back() = 1;
    Output b = ConstOf(c, Int64s(batch, Shape(dims)), "batch_index");
    if (indices.dtype() != DType::kI64) {
      indices = Op(c, "Cast", {indices}, {{"DstT", AttrValue(DType::kI64)}}, "indices_i64");
    }
    indices = Op(c, "Concat", {b, indices}, {{"axis", AttrValue(int64_t{-1})}}, "with_batch");
  } else if (batch_dims != 0) {
    return c.Unsupported("GatherND with batch_dims ", batch_dims, " (0 and 1 are supported)");
  }
  c.SetOut(0, Op(c, "GatherNd", {data, indices}));
  return Status();
}

// MaxUnpool: zeros of the unpooled shape ((in - 1) * stride + kernel -
// pads) with X's values at the flat indices I; a larger output_shape (known
// or fed) pads that with zeros at the end of each axis, as ONNX's data has it.
Status MaxUnpool(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output index, c.In(1));
  const Shape xs = c.InShape(0);
  const std::vector<int64_t> kernel = c.Ints("kernel_shape");
  const std::size_t n = kernel.size();
  const std::vector<int64_t> strides = c.Ints("strides", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> pads = c.Ints("pads", std::vector<int64_t>(2 * n, 0));
  if (!xs.IsFullyDefined() || xs.rank() != static_cast<int>(n) + 2 || strides.size() != n || pads.size() != 2 * n) {
    return c.Error("kernel_shape ", ListString(kernel), ", strides and pads do not fit X ", xs.ToString());
  }
  std::vector<int64_t> dims = {xs.dim(0), xs.dim(1)};
  for (std::size_t i = 0; i < n; ++i) {
    dims.push_back((xs.dim(static_cast<int>(i) + 2) - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n]);
  }
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  WEFT_ASSIGN_OR_RETURN(Tensor zeros, Tensor::Zeros(x.dtype(), Shape{total}));
  Output flat = ConstOf(c, Int64s({-1}), "flat_shape");
  Output placed = Op(c, "ScatterElements",
                     {ConstOf(c, zeros, "zeros"), Op(c, "Reshape", {index, flat}, {}, "index_flat"),
                      Op(c, "Reshape", {x, flat}, {}, "x_flat")},
                     {{"axis", AttrValue(int64_t{0})}}, "placed");
  Output y = Op(c, "Reshape", {placed, ConstOf(c, Int64s(dims), "shape")}, {}, c.has_input(2) ? "unpooled" : "");
  if (c.has_input(2)) {
    WEFT_ASSIGN_OR_RETURN(Output out_shape, c.In(2));
    if (out_shape.dtype() != DType::kI64) {
      out_shape = Op(c, "Cast", {out_shape}, {{"DstT", AttrValue(DType::kI64)}}, "output_shape_i64");
    }
    // pads: zeros before, output_shape - unpooled after.
    Output after = Op(c, "Sub", {out_shape, ConstOf(c, Int64s(dims), "unpooled_shape")}, {}, "after");
    Output before = ConstOf(c, Int64s(std::vector<int64_t>(dims.size(), 0)), "before");
    Output pad = Op(c, "Concat", {before, after}, {{"axis", AttrValue(int64_t{0})}}, "pads");
    WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, x.dtype(), 0, "zero"));
    y = Op(c, "DynamicPad", {y, pad, zero});
  }
  c.SetOut(0, y);
  return Status();
}

// Along time_axis, the first sequence_lens[b] elements of each batch entry
// b reversed: GatherElements at t < len[b] ? len[b] - 1 - t : t.
Status ReverseSequence(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output lens, c.In(1));
  const Shape xs = c.InShape(0);
  const int r = xs.rank();
  if (r < 2) return c.Error("input must have rank 2 or more, got ", xs.ToString());
  WEFT_ASSIGN_OR_RETURN(int64_t time, Axis(c, c.Int("time_axis", 0), r, "attr 'time_axis'"));
  WEFT_ASSIGN_OR_RETURN(int64_t batch, Axis(c, c.Int("batch_axis", 1), r, "attr 'batch_axis'"));
  if (time == batch || (time > 1 || batch > 1)) return c.Error("time_axis and batch_axis must be 0 and 1");
  const int64_t steps = xs.dim(static_cast<int>(time)), batches = xs.dim(static_cast<int>(batch));
  if (steps < 0 || batches < 0) return c.Unsupported("ReverseSequence with time or batch axes of unknown size");
  if (lens.dtype() != DType::kI64) lens = Op(c, "Cast", {lens}, {{"DstT", AttrValue(DType::kI64)}}, "lens_i64");
  Output one = ConstOf(c, Tensor::Scalar<int64_t>(1), "one");
  Output t =
      Op(c, "Range",
         {ConstOf(c, Tensor::Scalar<int64_t>(0), "zero"), ConstOf(c, Tensor::Scalar<int64_t>(steps), "steps"), one}, {},
         "t");
  // [T, 1] against [1, B] (or [1, T] against [B, 1] when batch comes first).
  const std::vector<int64_t> tshape = time == 0 ? std::vector<int64_t>{steps, 1} : std::vector<int64_t>{1, steps};
  const std::vector<int64_t> bshape = time == 0 ? std::vector<int64_t>{1, batches} : std::vector<int64_t>{batches, 1};
  t = Op(c, "Reshape", {t, ConstOf(c, Int64s(tshape), "t_shape")}, {}, "t_laid");
  lens = Op(c, "Reshape", {lens, ConstOf(c, Int64s(bshape), "lens_shape")}, {}, "lens_laid");
  Output mirrored = Op(c, "Sub", {Op(c, "Sub", {lens, one}, {}, "last"), t}, {}, "mirrored");
  Output index = Op(c, "Select", {Op(c, "Less", {t, lens}, {}, "inside"), mirrored, t}, {}, "time_index");
  std::vector<int64_t> laid(static_cast<std::size_t>(r), 1);
  laid[0] = xs.dim(0);
  laid[1] = xs.dim(1);
  index = Op(c, "Reshape", {index, ConstOf(c, Int64s(laid), "index_shape")}, {}, "index_laid");
  index =
      Op(c, "BroadcastTo", {index, Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "shape")}, {}, "index");
  c.SetOut(0, Op(c, "GatherElements", {x, index}, {{"axis", AttrValue(time)}}));
  return Status();
}

// The determinant of the last two axes, [..., n, n] with n 2 or 3, by its
// expansion.
Status Det(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  const int r = xs.rank();
  if (r < 2 || xs.dim(r - 1) != xs.dim(r - 2)) return c.Error("input must be [..., n, n], got ", xs.ToString());
  const int64_t n = xs.dim(r - 1);
  if (n != 2 && n != 3) return c.Unsupported("Det of ", n, "x", n, " matrices (2x2 and 3x3 are supported)");
  std::map<std::pair<int64_t, int64_t>, Output> elements;  // each made once
  auto at = [&](int64_t i, int64_t j) {
    auto it = elements.find({i, j});
    if (it != elements.end()) return it->second;
    Output row = Op(c, "Gather", {x, ConstOf(c, Tensor::Scalar<int64_t>(i), StrCat("i", i, j))},
                    {{"axis", AttrValue(int64_t{r - 2})}}, StrCat("row", i, j));
    Output e = Op(c, "Gather", {row, ConstOf(c, Tensor::Scalar<int64_t>(j), StrCat("j", i, j))},
                  {{"axis", AttrValue(int64_t{r - 2})}}, StrCat("e", i, j));
    elements.emplace(std::make_pair(i, j), e);
    return e;
  };
  auto mul = [&](const Output& a, const Output& b, const std::string& name) { return Op(c, "Mul", {a, b}, {}, name); };
  if (n == 2) {
    c.SetOut(0, Op(c, "Sub", {mul(at(0, 0), at(1, 1), "ad"), mul(at(0, 1), at(1, 0), "bc")}));
    return Status();
  }
  // a(ei - fh) - b(di - fg) + c(dh - eg)
  auto minor = [&](int64_t j0, int64_t j1, const std::string& name) {
    return Op(c, "Sub", {mul(at(1, j0), at(2, j1), name + "_p"), mul(at(1, j1), at(2, j0), name + "_q")}, {}, name);
  };
  Output t0 = mul(at(0, 0), minor(1, 2, "m0"), "t0");
  Output t1 = mul(at(0, 1), minor(0, 2, "m1"), "t1");
  Output t2 = mul(at(0, 2), minor(0, 1, "m2"), "t2");
  c.SetOut(0, Op(c, "Add", {Op(c, "Sub", {t0, t1}, {}, "t01"), t2}));
  return Status();
}

// GridSample's source coordinate along an axis of |size| from normalized
// |g| in [-1, 1], with border or reflection padding applied (as PyTorch's
// grid_sample, which ONNX's follows).
Expected<Output> GridCoordinate(NodeContext& c, const Output& g, int64_t size, bool align, const std::string& padding,
                                const std::string& name) {
  auto k = [&](double v, const std::string& n) { return ScalarLike(c, g.dtype(), v, name + "_" + n); };
  WEFT_ASSIGN_OR_RETURN(Output one, k(1, "one"));
  WEFT_ASSIGN_OR_RETURN(Output half, k(0.5, "half"));
  const double s = static_cast<double>(size);
  // align_corners: (g + 1) / 2 * (size - 1); else ((g + 1) * size - 1) / 2.
  WEFT_ASSIGN_OR_RETURN(Output scale, k(align ? (s - 1) / 2 : s / 2, "scale"));
  Output x = Op(c, "Mul", {Op(c, "Add", {g, one}, {}, name + "_shifted"), scale}, {}, name + "_scaled");
  if (!align) x = Op(c, "Sub", {x, half}, {}, name + "_unnormalized");
  WEFT_ASSIGN_OR_RETURN(Output lo, k(0, "lo"));
  WEFT_ASSIGN_OR_RETURN(Output hi, k(s - 1, "hi"));
  if (padding == "reflection") {
    // Reflected over [0, size - 1] (align) or [-0.5, size - 0.5], then clipped.
    WEFT_ASSIGN_OR_RETURN(Output low, k(align ? 0 : -0.5, "reflect_low"));
    WEFT_ASSIGN_OR_RETURN(Output span, k(align ? s - 1 : s, "reflect_span"));
    WEFT_ASSIGN_OR_RETURN(Output span2, k(align ? 2 * (s - 1) : 2 * s, "reflect_period"));
    if (!(align && size == 1)) {
      Output d = Op(c, "Abs", {Op(c, "Sub", {x, low}, {}, name + "_from_low")}, {}, name + "_distance");
      Output t = Op(c, "FloorMod", {d, span2}, {}, name + "_phase");
      Output mirrored = Op(c, "Sub", {span2, t}, {}, name + "_mirrored");
      x = Op(c, "Add",
             {Op(c, "Select", {Op(c, "LessEqual", {t, span}, {}, name + "_first_half"), t, mirrored}, {},
                 name + "_folded"),
              low},
             {}, name + "_reflected");
    }
  }
  if (padding == "reflection" || padding == "border") x = Op(c, "ClipByValue", {x, lo, hi}, {}, name + "_clipped");
  return x;
}

// GridSample (opset 16) of [N, C, H, W] at grid [N, Ho, Wo, 2] (x, y in
// [-1, 1]): nearest (ties to even) or bilinear, zeros, border or reflection
// padding, align_corners; GatherNd of channels-last X at (n, y, x).
Status GridSample(NodeContext& c) {
  const std::string mode = c.Str("mode", "bilinear"), padding = c.Str("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest") return c.Unsupported("GridSample mode ", Quote(mode));
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    return c.Error("attr 'padding_mode' is ", Quote(padding));
  }
  const bool align = c.Int("align_corners", 0) != 0;
  const Shape xs = c.InShape(0), gs = c.InShape(1);
  if (xs.rank() != 4 || !xs.IsFullyDefined() || gs.rank() != 4 || !gs.IsFullyDefined() || gs.dim(3) != 2) {
    return c.Unsupported("GridSample of X ", xs.ToString(), " at grid ", gs.ToString(), " (static 2-D)");
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output grid, c.In(1));
  const int64_t n = gs.dim(0), ho = gs.dim(1), wo = gs.dim(2), h = xs.dim(2), w = xs.dim(3);
  const AttrMap last = {{"axis", AttrValue(int64_t{3})}};
  Output gx = Op(c, "Gather", {grid, ConstOf(c, Tensor::Scalar<int64_t>(0), "x_index")}, last, "gx");
  Output gy = Op(c, "Gather", {grid, ConstOf(c, Tensor::Scalar<int64_t>(1), "y_index")}, last, "gy");
  WEFT_ASSIGN_OR_RETURN(Output px, GridCoordinate(c, gx, w, align, padding, "px"));
  WEFT_ASSIGN_OR_RETURN(Output py, GridCoordinate(c, gy, h, align, padding, "py"));
  Output nhwc = Op(c, "Transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 3, 1})}}, "x_nhwc");
  std::vector<int64_t> batch(static_cast<std::size_t>(n * ho * wo));
  for (std::size_t i = 0; i < batch.size(); ++i) batch[i] = static_cast<int64_t>(i) / (ho * wo);
  Output batch_index = ConstOf(c, Int64s(batch, Shape{n, ho, wo, 1}), "batch_index");
  // X at integer (iy, ix) (floats), zero where outside: [N, Ho, Wo, C].
  auto sample = [&](const Output& iy, const Output& ix, const std::string& name) -> Expected<Output> {
    WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, iy.dtype(), 0, name + "_zero"));
    WEFT_ASSIGN_OR_RETURN(Output hmax, ScalarLike(c, iy.dtype(), static_cast<double>(h - 1), name + "_hmax"));
    WEFT_ASSIGN_OR_RETURN(Output wmax, ScalarLike(c, iy.dtype(), static_cast<double>(w - 1), name + "_wmax"));
    Output inside =
        Op(c, "LogicalAnd",
           {Op(c, "LogicalAnd",
               {Op(c, "GreaterEqual", {iy, zero}, {}, name + "_y0"), Op(c, "LessEqual", {iy, hmax}, {}, name + "_y1")},
               {}, name + "_y_in"),
            Op(c, "LogicalAnd",
               {Op(c, "GreaterEqual", {ix, zero}, {}, name + "_x0"), Op(c, "LessEqual", {ix, wmax}, {}, name + "_x1")},
               {}, name + "_x_in")},
           {}, name + "_inside");
    auto index = [&](const Output& v, const Output& vmax, const std::string& k) {
      Output clipped = Op(c, "ClipByValue", {v, zero, vmax}, {}, name + "_" + k + "_clipped");
      return Op(c, "ExpandDims",
                {Op(c, "Cast", {clipped}, {{"DstT", AttrValue(DType::kI64)}}, name + "_" + k + "_i64")},
                {{"axis", AttrValue(int64_t{-1})}}, name + "_" + k);
    };
    Output at = Op(c, "Concat", {batch_index, index(iy, hmax, "iy"), index(ix, wmax, "ix")},
                   {{"axis", AttrValue(int64_t{-1})}}, name + "_at");
    Output v = Op(c, "GatherNd", {nhwc, at}, {}, name + "_values");
    WEFT_ASSIGN_OR_RETURN(Output vzero, ScalarLike(c, v.dtype(), 0, name + "_vzero"));
    return Op(c, "Select",
              {Op(c, "ExpandDims", {inside}, {{"axis", AttrValue(int64_t{-1})}}, name + "_mask"), v, vzero}, {}, name);
  };
  Output y;
  if (mode == "nearest") {
    WEFT_ASSIGN_OR_RETURN(y, sample(Op(c, "Round", {py}, {}, "ny"), Op(c, "Round", {px}, {}, "nx"), "nearest"));
  } else {
    Output x0 = Op(c, "Floor", {px}, {}, "x0"), y0 = Op(c, "Floor", {py}, {}, "y0");
    WEFT_ASSIGN_OR_RETURN(Output one, ScalarLike(c, px.dtype(), 1, "one"));
    Output x1 = Op(c, "Add", {x0, one}, {}, "x1"), y1 = Op(c, "Add", {y0, one}, {}, "y1");
    Output wx1 = Op(c, "Sub", {px, x0}, {}, "wx1"), wy1 = Op(c, "Sub", {py, y0}, {}, "wy1");
    Output wx0 = Op(c, "Sub", {one, wx1}, {}, "wx0"), wy0 = Op(c, "Sub", {one, wy1}, {}, "wy0");
    auto weight = [&](const Output& a, const Output& b, const std::string& name) {
      return Op(c, "ExpandDims", {Op(c, "Mul", {a, b}, {}, name + "_w")}, {{"axis", AttrValue(int64_t{-1})}}, name);
    };
    WEFT_ASSIGN_OR_RETURN(Output v00, sample(y0, x0, "v00"));
    WEFT_ASSIGN_OR_RETURN(Output v01, sample(y0, x1, "v01"));
    WEFT_ASSIGN_OR_RETURN(Output v10, sample(y1, x0, "v10"));
    WEFT_ASSIGN_OR_RETURN(Output v11, sample(y1, x1, "v11"));
    y = Op(c, "AddN",
           {Op(c, "Mul", {v00, weight(wy0, wx0, "w00")}, {}, "t00"),
            Op(c, "Mul", {v01, weight(wy0, wx1, "w01")}, {}, "t01"),
            Op(c, "Mul", {v10, weight(wy1, wx0, "w10")}, {}, "t10"),
            Op(c, "Mul", {v11, weight(wy1, wx1, "w11")}, {}, "t11")},
           {}, "bilinear");
  }
  c.SetOut(0, Op(c, "Transpose", {y}, {{"perm", AttrValue(std::vector<int64_t>{0, 3, 1, 2})}}));
  return Status();
}

// NonMaxSuppression: Weft's op of the same semantics; absent inputs are
// constants (no boxes per class, an IoU threshold of 0, and an empty score
// threshold for none).
Status NonMaxSuppression(NodeContext& c) {
  std::vector<Output> in;
  for (int i = 0; i < 2; ++i) {
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(i));
    in.push_back(v);
  }
  auto optional = [&](int i, const Tensor& absent, DType dtype, const char* name) -> Expected<Output> {
    if (!c.has_input(i)) return ConstOf(c, absent, name);
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(i));
    return v.dtype() == dtype ? v : Op(c, "Cast", {v}, {{"DstT", AttrValue(dtype)}}, StrCat(name, "_cast"));
  };
  WEFT_ASSIGN_OR_RETURN(Output max_boxes, optional(2, Tensor::Scalar<int64_t>(0), DType::kI64, "max_boxes"));
  WEFT_ASSIGN_OR_RETURN(Output iou, optional(3, Tensor::Scalar<float>(0.0f), DType::kF32, "iou_threshold"));
  WEFT_ASSIGN_OR_RETURN(Tensor none, Tensor::Zeros(DType::kF32, Shape{0}));
  WEFT_ASSIGN_OR_RETURN(Output score, optional(4, none, DType::kF32, "score_threshold"));
  c.SetOut(0, Op(c, "NonMaxSuppression", {in[0], in[1], max_boxes, iou, score},
                 {{"center_point_box", AttrValue(c.Int("center_point_box", 0))}}));
  return Status();
}

// Unique: Weft's OnnxUnique (ONNX's outputs and order; TensorFlow's
// Unique is another op).
Status UniqueOp(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  AttrMap attrs = {{"sorted", AttrValue(c.Int("sorted", 1) != 0)}, {"has_axis", AttrValue(c.HasAttr("axis"))}};
  if (c.HasAttr("axis")) {
    WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", 0), c.InShape(0).rank(), "attr 'axis'"));
    attrs["axis"] = AttrValue(axis);
  }
  std::vector<Output> outs = c.b().AddNode("OnnxUnique", {x}, attrs, c.Name());
  if (outs.size() != 4) return c.b().status();
  for (int i = 0; i < 4; ++i) {
    if (c.has_output(i)) c.SetOut(i, outs[static_cast<std::size_t>(i)]);
  }
  return Status();
}

}  // namespace

void AddIndexingConverters(ConverterTable& t) {
  t["NonMaxSuppression"] = NonMaxSuppression;
  t["Unique"] = UniqueOp;
  t["GridSample"] = GridSample;
  t["ScatterND"] = ScatterND;
  t["GatherND"] = GatherND;
  t["ReverseSequence"] = ReverseSequence;
  t["Det"] = Det;
  t["MaxUnpool"] = MaxUnpool;
}

}  // namespace weft::onnx_io::convert
