// ONNX indexing operators composed of Weft ops: ScatterND (reduction none
// and add), GatherND (batch_dims 0 and 1), ReverseSequence, MaxUnpool, and Det
// of 2x2 and 3x3 matrices (the conventions are in core/onnx/converters.h).
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
  if (reduction != "none") {
    return c.Unsupported("ScatterND with reduction ", Quote(reduction), " (none and add are supported)");
  }
  Output hits = Op(c, "ScatterNd", {indices, Op(c, "OnesLike", {updates}, {}, "ones")}, shape, "hits");
  WEFT_ASSIGN_OR_RETURN(Output zero, ScalarLike(c, data.dtype(), 0, "zero"));
  c.SetOut(0, Op(c, "Select", {Op(c, "Greater", {hits, zero}, {}, "written"), scattered, data}));
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

}  // namespace

void AddIndexingConverters(ConverterTable& t) {
  t["ScatterND"] = ScatterND;
  t["GatherND"] = GatherND;
  t["ReverseSequence"] = ReverseSequence;
  t["Det"] = Det;
  t["MaxUnpool"] = MaxUnpool;
}

}  // namespace weft::onnx_io::convert
