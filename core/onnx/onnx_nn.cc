// ONNX converters, neural-network ops: MatMul and Gemm, Conv, pools, normalisations, Softmax, Flatten, Resize (the
// conventions are in core/onnx/converters.h; docs/onnx.md has the table).
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

// --- Matrix products ---------------------------------------------------------------------

Status MatMul(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output a, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output bm, c.In(1));
  const int ra = a.shape().rank(), rb = bm.shape().rank();
  if (ra < 0 || rb < 0) return c.Unsupported("MatMul of inputs of unknown rank");
  if (ra == 0 || rb == 0) return c.Error("MatMul of a scalar (ranks ", ra, " and ", rb, ")");
  if (ra == 2 && rb == 2) {
    c.SetOut(0, Op(c, "MatMul", {a, bm}));
    return Status();
  }
  // NumPy's matmul: a 1-D operand gains an axis that is dropped after.
  if (ra == 1) a = Op(c, "ExpandDims", {a}, {{"axis", AttrValue(int64_t{0})}}, "a_matrix");
  if (rb == 1) bm = Op(c, "ExpandDims", {bm}, {{"axis", AttrValue(int64_t{-1})}}, "b_matrix");
  // [.., m, k] x [k, n] with a 2-D right side: one MatMul over the rows.
  Output y;
  if (rb == 2 && ra > 2 && a.shape().dim(ra - 1) >= 0) {
    const Shape& sa = a.shape();
    bool static_rows = true;
    for (int i = 0; i < ra - 1; ++i) static_rows = static_rows && sa.dim(i) >= 0;
    Output flat = Op(c, "Reshape", {a, ConstOf(c, Int64s({-1, sa.dim(ra - 1)}), "rows_shape")}, {}, "rows");
    Output prod = Op(c, "MatMul", {flat, bm}, {}, "MatMul");
    Output shape;
    if (static_rows && bm.shape().dim(1) >= 0) {
      std::vector<int64_t> dims(sa.dims().begin(), sa.dims().end() - 1);
      dims.push_back(bm.shape().dim(1));
      shape = ConstOf(c, Int64s(dims), "out_shape");
    } else {
      Output lead = Op(c, "StridedSlice", {Op(c, "Shape", {a}, {{"out_type", AttrValue(DType::kI64)}}, "a_shape")},
                       {{"begin", AttrValue(std::vector<int64_t>{0})},
                        {"end", AttrValue(std::vector<int64_t>{-1})},
                        {"strides", AttrValue(std::vector<int64_t>{1})}},
                       "lead");
      Output n = Op(c, "StridedSlice", {Op(c, "Shape", {bm}, {{"out_type", AttrValue(DType::kI64)}}, "b_shape")},
                    {{"begin", AttrValue(std::vector<int64_t>{1})},
                     {"end", AttrValue(std::vector<int64_t>{2})},
                     {"strides", AttrValue(std::vector<int64_t>{1})}},
                    "n");
      shape = Op(c, "Concat", {lead, n}, {{"axis", AttrValue(int64_t{0})}}, "out_shape");
    }
    y = Op(c, "Reshape", {prod, shape}, {}, rb == 1 ? "product" : "");
  } else {
    y = Op(c, "BatchMatMul", {a, bm}, {}, (ra == 1 || rb == 1) ? "product" : "");
  }
  if (ra == 1 || rb == 1) {
    const int r = y.shape().rank();
    std::vector<int64_t> drop;
    if (ra == 1) drop.push_back(r - 2);
    if (rb == 1) drop.push_back(r - 1);
    y = Op(c, "Squeeze", {y}, {{"axis", AttrValue(drop)}});
  }
  c.SetOut(0, y);
  return Status();
}

Status Gemm(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output a, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output bm, c.In(1));
  const double alpha = c.Float("alpha", 1.0), beta = c.Float("beta", 1.0);
  const bool ta = c.Int("transA", 0) != 0, tb = c.Int("transB", 0) != 0;
  Output y = Op(c, "MatMul", {a, bm}, {{"transpose_a", AttrValue(ta)}, {"transpose_b", AttrValue(tb)}},
                c.has_input(2) || alpha != 1.0 ? "MatMul" : "");
  if (alpha != 1.0) {
    WEFT_ASSIGN_OR_RETURN(Output s, ScalarLike(c, y.dtype(), alpha, "alpha"));
    y = Op(c, "Mul", {y, s}, {}, c.has_input(2) ? "scaled" : "");
  }
  if (c.has_input(2) && beta != 0.0) {
    WEFT_ASSIGN_OR_RETURN(Output bias, c.In(2));
    if (beta != 1.0) {
      WEFT_ASSIGN_OR_RETURN(Output s, ScalarLike(c, bias.dtype(), beta, "beta"));
      bias = Op(c, "Mul", {bias, s}, {}, "bias");
    }
    const Shape& bs = bias.shape();
    // A [N] or [1, N] bias is BiasAdd's; a single element broadcast over
    // N > 1 columns is an Add.
    const int64_t n = y.shape().rank() == 2 ? y.shape().dim(1) : -1;
    const int64_t len = bs.rank() >= 1 ? bs.dim(bs.rank() - 1) : -1;
    const bool vector = (bs.rank() == 1 || (bs.rank() == 2 && bs.dim(0) == 1)) && len >= 0 && len == n;
    if (vector && bs.rank() == 2) bias = Op(c, "Squeeze", {bias}, {{"axis", AttrValue(std::vector<int64_t>{0})}});
    y = vector && IsFloating(y.dtype()) ? Op(c, "BiasAdd", {y, bias}) : Op(c, "Add", {y, bias});
  }
  c.SetOut(0, y);
  return Status();
}

// --- Convolution and pooling ---------------------------------------------------------------

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // spatial; pads begin..., end...
};

// The padding of a window op on NCHW input |in|: "SAME", "VALID", or an
// explicit Pad (paddings for Weft's Pad, NCHW order) with VALID.
struct Padding {
  std::string mode;                    // SAME or VALID
  std::vector<int64_t> explicit_pads;  // non-empty: pad first, then VALID
};

Expected<Padding> ResolvePadding(NodeContext& c, const Window& w, const Shape& in) {
  const std::size_t n = w.kernel.size();
  const std::string auto_pad = c.Str("auto_pad", "NOTSET");
  std::vector<int64_t> pads = w.pads;
  if (auto_pad == "VALID") return Padding{"VALID", {}};
  if (auto_pad == "SAME_UPPER" && !(c.node().op_type() == "AveragePool" && c.Int("count_include_pad", 0) != 0)) {
    return Padding{"SAME", {}};
  }
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    pads.assign(2 * n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const int64_t size = in.rank() == static_cast<int>(n) + 2 ? in.dim(static_cast<int>(i) + 2) : -1;
      if (size < 0) return c.Unsupported("auto_pad ", auto_pad, " with an input of unknown spatial size");
      const int64_t out = (size + w.strides[i] - 1) / w.strides[i];
      const int64_t total =
          std::max<int64_t>(0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - size);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + n] = total - pads[i];
    }
  } else if (auto_pad != "NOTSET") {
    return c.Error("attr 'auto_pad' is ", Quote(auto_pad), "; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  if (pads.empty()) pads.assign(2 * n, 0);
  if (pads.size() != 2 * n) return c.Error("attr 'pads' has ", pads.size(), " entries for ", n, " spatial axes");
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return Padding{"VALID", {}};
  for (int64_t p : pads) {
    if (p < 0) return c.Unsupported("negative pads ", ListString(pads));
  }
  // Weft's SAME (TensorFlow's): the same pads, when the sizes are known.
  bool same = in.rank() == static_cast<int>(n) + 2;
  for (std::size_t i = 0; same && i < n; ++i) {
    const int64_t size = in.dim(static_cast<int>(i) + 2);
    if (size < 0) {
      same = false;
      break;
    }
    const int64_t out = (size + w.strides[i] - 1) / w.strides[i];
    const int64_t total =
        std::max<int64_t>(0, (out - 1) * w.strides[i] + (w.kernel[i] - 1) * w.dilations[i] + 1 - size);
    same = pads[i] == total / 2 && pads[i + n] == total - total / 2;
  }
  if (same && !(c.node().op_type() == "AveragePool" && c.Int("count_include_pad", 0) != 0)) {
    return Padding{"SAME", {}};
  }
  Padding p{"VALID", std::vector<int64_t>(2 * (n + 2), 0)};
  for (std::size_t i = 0; i < n; ++i) {
    p.explicit_pads[2 * (i + 2)] = pads[i];
    p.explicit_pads[2 * (i + 2) + 1] = pads[i + n];
  }
  return p;
}

Expected<Window> ReadWindow(NodeContext& c, int spatial, std::vector<int64_t> kernel) {
  Window w;
  w.kernel = c.Ints("kernel_shape", kernel);
  if (static_cast<int>(w.kernel.size()) != spatial) {
    return c.Error("attr 'kernel_shape' has ", w.kernel.size(), " entries for ", spatial, " spatial axes");
  }
  w.strides = c.Ints("strides", std::vector<int64_t>(static_cast<std::size_t>(spatial), 1));
  w.dilations = c.Ints("dilations", std::vector<int64_t>(static_cast<std::size_t>(spatial), 1));
  w.pads = c.Ints("pads");
  if (static_cast<int>(w.strides.size()) != spatial || static_cast<int>(w.dilations.size()) != spatial) {
    return c.Error("attrs 'strides' and 'dilations' need ", spatial, " entries each");
  }
  for (int64_t v : w.kernel) {
    if (v < 1) return c.Error("attr 'kernel_shape' ", ListString(w.kernel), " must be positive");
  }
  for (int64_t v : w.strides) {
    if (v < 1) return c.Error("attr 'strides' ", ListString(w.strides), " must be positive");
  }
  for (int64_t v : w.dilations) {
    if (v < 1) return c.Error("attr 'dilations' ", ListString(w.dilations), " must be positive");
  }
  return w;
}

// Pads |x| as |p| says (its pads in NCHW order), with |value|; |x| is NHWC
// when |nhwc|.
Output ApplyPadding(NodeContext& c, Output x, const Padding& p, double value, bool nhwc,
                    std::string_view name = "pad") {
  if (p.explicit_pads.empty()) return x;
  std::vector<int64_t> pads = p.explicit_pads;
  if (nhwc) {
    const std::vector<int64_t>& q = p.explicit_pads;
    pads = {q[0], q[1], q[4], q[5], q[6], q[7], q[2], q[3]};
  }
  return Op(c, "Pad", {x}, {{"paddings", AttrValue(pads)}, {"constant_value", AttrValue(value)}}, name);
}

// A 4-entry window attr (strides, ksize, dilations) from its (h, w) entries.
std::vector<int64_t> Window4(const std::vector<int64_t>& hw, bool nhwc) {
  return nhwc ? std::vector<int64_t>{1, hw[0], hw[1], 1} : std::vector<int64_t>{1, 1, hw[0], hw[1]};
}

Status ConvOp(NodeContext& c) {
  const Shape xs = c.InShape(0);
  const Tensor w_initial = c.Initial(1);
  const Shape ws = w_initial.valid() ? w_initial.shape() : c.InShape(1);
  if (ws.rank() < 0) return c.Unsupported("Conv weights of unknown rank");
  const int spatial = ws.rank() - 2;
  if (spatial == 3) return c.Unsupported("3-D convolution (Weft has Conv2D)");
  if (spatial != 1 && spatial != 2) return c.Error("Conv weights of rank ", ws.rank());
  if (xs.rank() >= 0 && xs.rank() != spatial + 2) {
    return c.Error("the input has shape ", xs.ToString(), " and the weights ", ws.ToString(), "; a ", spatial,
                   "-D Conv takes an input of rank ", spatial + 2, " [N, C, ...]");
  }
  std::vector<int64_t> kdims(ws.dims().begin() + 2, ws.dims().end());
  WEFT_ASSIGN_OR_RETURN(Window w, ReadWindow(c, spatial, kdims));
  const int64_t group = c.Int("group", 1);
  // Images go channels-last; 1-D convolutions run as 2-D ones over
  // [N, C, 1, L], as ONNX lays them out.
  const bool nhwc = spatial == 2 && c.options().channels_last;
  Output x;
  if (nhwc) {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
  }
  Shape x4 = xs;  // NCHW
  if (spatial == 1) {
    if (c.LayoutOf(1) != Layout::kAsIs) return c.Unsupported("1-D Conv sharing weights with a 2-D one");
    x = Op(c, "ExpandDims", {x}, {{"axis", AttrValue(int64_t{2})}}, "as_2d");
    x4 = x.shape();
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    if (!w.pads.empty()) w.pads = {0, w.pads[0], 0, w.pads[1]};
  }
  WEFT_ASSIGN_OR_RETURN(Padding pad, ResolvePadding(c, w, x4));
  x = ApplyPadding(c, x, pad, 0.0, nhwc);
  const char* format = nhwc ? "NHWC" : "NCHW";
  const int64_t channel_axis = nhwc ? 3 : 1;
  AttrMap attrs = {{"strides", AttrValue(Window4(w.strides, nhwc))},
                   {"dilations", AttrValue(Window4(w.dilations, nhwc))},
                   {"padding", AttrValue(pad.mode)},
                   {"data_format", AttrValue(format)}};
  const bool has_bias = c.has_input(2);
  Output y;
  const Layout layout = c.LayoutOf(1);
  if (group == 1) {
    Output filter;
    if (layout == Layout::kConvHwio) {
      WEFT_ASSIGN_OR_RETURN(filter, c.InWithLayout(1, layout));
    } else {
      WEFT_ASSIGN_OR_RETURN(Output raw, c.In(1));
      if (spatial == 1) raw = Op(c, "ExpandDims", {raw}, {{"axis", AttrValue(int64_t{2})}}, "weights_2d");
      filter = Op(c, "Transpose", {raw}, {{"perm", AttrValue(std::vector<int64_t>{2, 3, 1, 0})}}, "weights_hwio");
    }
    y = Op(c, "Conv2D", {x, filter}, attrs, has_bias || spatial == 1 ? "Conv2D" : "");
  } else if (layout == Layout::kDepthwiseHwcm) {
    WEFT_ASSIGN_OR_RETURN(Output filter, c.InWithLayout(1, layout));
    y = Op(c, "DepthwiseConv2D", {x, filter}, attrs, has_bias || spatial == 1 ? "DepthwiseConv2D" : "");
  } else {
    // Grouped: split channels into |group| convolutions, then join them.
    if (group < 1) return c.Error("attr 'group' is ", group);
    const int64_t channels = x.shape().rank() == 4 ? x.shape().dim(static_cast<int>(channel_axis)) : -1;
    if (channels < 0 || channels % group != 0 || ws.dim(0) % group != 0) {
      return c.Error("group ", group, " must divide the input channels (", channels, ") and the output channels (",
                     ws.dim(0), ")");
    }
    WEFT_ASSIGN_OR_RETURN(Output raw, c.In(1));
    if (spatial == 1) raw = Op(c, "ExpandDims", {raw}, {{"axis", AttrValue(int64_t{2})}}, "weights_2d");
    Output hwio = Op(c, "Transpose", {raw}, {{"perm", AttrValue(std::vector<int64_t>{2, 3, 1, 0})}}, "weights_hwio");
    std::vector<Output> xs_split =
        c.b().AddNode("Split", {x}, {{"num_split", AttrValue(group)}, {"axis", AttrValue(channel_axis)}}, c.Name("x"));
    std::vector<Output> ws_split =
        c.b().AddNode("Split", {hwio}, {{"num_split", AttrValue(group)}, {"axis", AttrValue(int64_t{3})}}, c.Name("w"));
    if (static_cast<int64_t>(xs_split.size()) != group || static_cast<int64_t>(ws_split.size()) != group) {
      return c.b().status();
    }
    std::vector<Output> parts;
    for (int64_t g = 0; g < group; ++g) {
      parts.push_back(Op(c, "Conv2D", {xs_split[static_cast<std::size_t>(g)], ws_split[static_cast<std::size_t>(g)]},
                         attrs, StrCat("group_", g)));
    }
    y = Op(c, "Concat", parts, {{"axis", AttrValue(channel_axis)}}, has_bias || spatial == 1 ? "Concat" : "");
  }
  if (has_bias) {
    WEFT_ASSIGN_OR_RETURN(Output bias, c.In(2));
    y = Op(c, "BiasAdd", {y, bias}, {{"data_format", AttrValue(format)}}, spatial == 1 ? "BiasAdd" : "");
  }
  if (spatial == 1) {
    c.SetOut(0, Op(c, "Squeeze", {y}, {{"axis", AttrValue(std::vector<int64_t>{2})}}));
  } else {
    SetOutAs(c, 0, y, nhwc);
  }
  return Status();
}

Status Pool(NodeContext& c, bool max) {
  if (c.has_output(1)) return c.Unsupported("MaxPool's Indices output");
  Shape xs = c.InShape(0);
  if (xs.rank() == 5) return Pool3d(c, max);
  if (xs.rank() >= 0 && xs.rank() != 4 && xs.rank() != 3) {
    return c.Unsupported("pooling of a rank-", xs.rank(), " input (Weft pools 1-D and 2-D windows)");
  }
  const bool one_d = xs.rank() == 3;
  const bool nhwc = !one_d && c.options().channels_last;
  Output x;
  if (nhwc) {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
  }
  std::vector<int64_t> kernel = c.Ints("kernel_shape");
  WEFT_ASSIGN_OR_RETURN(Window w, ReadWindow(c, static_cast<int>(kernel.size()), kernel));
  if (one_d) {
    x = Op(c, "ExpandDims", {x}, {{"axis", AttrValue(int64_t{2})}}, "as_2d");
    w.kernel.insert(w.kernel.begin(), 1);
    w.strides.insert(w.strides.begin(), 1);
    w.dilations.insert(w.dilations.begin(), 1);
    if (!w.pads.empty()) w.pads = {0, w.pads[0], 0, w.pads[1]};
    xs = x.shape();
  }
  if (w.kernel.size() != 2) return c.Unsupported(w.kernel.size(), "-D pooling");
  for (int64_t d : w.dilations) {
    if (d != 1) return one_d ? c.Unsupported("1-D pooling with dilations") : DilatedPool(c, max);
  }
  if (c.Int("storage_order", 0) != 0) return c.Unsupported("MaxPool storage_order 1");
  // ceil_mode: extra padding at the end so that floor gives the ceiling.
  if (c.Int("ceil_mode", 0) != 0) {
    if (w.pads.empty()) w.pads.assign(4, 0);
    for (std::size_t i = 0; i < 2; ++i) {
      const int64_t size = xs.rank() == 4 ? xs.dim(static_cast<int>(i) + 2) : -1;
      if (size < 0) return c.Unsupported("ceil_mode with an input of unknown spatial size");
      const int64_t k = w.kernel[i], st = w.strides[i];
      const int64_t padded = size + w.pads[i] + w.pads[i + 2];
      const int64_t floor_out = (padded - k) / st + 1;
      int64_t ceil_out = (padded - k + st - 1) / st + 1;
      // The last window must start inside the input or its begin padding.
      if ((ceil_out - 1) * st >= size + w.pads[i]) --ceil_out;
      w.pads[i + 2] += (ceil_out - floor_out) * st;
    }
    if (!max && c.Int("count_include_pad", 0) != 0) {
      return c.Unsupported("AveragePool with ceil_mode and count_include_pad");
    }
  }
  WEFT_ASSIGN_OR_RETURN(Padding pad, ResolvePadding(c, w, xs));
  // Integers pool as f32 (exact for 8- and 16-bit values).
  const DType dtype = x.dtype();
  if (dtype != DType::kF32 && dtype != DType::kF64)
    x = Op(c, "Cast", {x}, {{"DstT", AttrValue(DType::kF32)}}, "as_f32");
  // Average over the window's inputs only, with explicit pads: the padded
  // window's sum over the count of real elements, the average of ones.
  const bool exclude = !pad.explicit_pads.empty() && !max && c.Int("count_include_pad", 0) == 0;
  Output ones = exclude ? ApplyPadding(c, Op(c, "OnesLike", {x}, {}, "ones"), pad, 0.0, nhwc, "ones_pad") : Output();
  x = ApplyPadding(c, x, pad, max ? -std::numeric_limits<double>::infinity() : 0.0, nhwc);
  AttrMap attrs = {{"ksize", AttrValue(Window4(w.kernel, nhwc))},
                   {"strides", AttrValue(Window4(w.strides, nhwc))},
                   {"padding", AttrValue(pad.mode)},
                   {"data_format", AttrValue(nhwc ? "NHWC" : "NCHW")}};
  const bool cast_back = dtype != x.dtype();
  Output y = Op(c, max ? "MaxPool" : "AvgPool", {x}, attrs, one_d || exclude || cast_back ? "pool" : "");
  if (exclude) {
    y = Op(c, "Div", {y, Op(c, "AvgPool", {ones}, attrs, "share")}, {}, one_d || cast_back ? "average" : "");
  }
  if (cast_back) y = Op(c, "Cast", {y}, {{"DstT", AttrValue(dtype)}}, one_d ? "cast_back" : "");
  if (one_d) {
    c.SetOut(0, Op(c, "Squeeze", {y}, {{"axis", AttrValue(std::vector<int64_t>{2})}}));
  } else {
    SetOutAs(c, 0, y, nhwc);
  }
  return Status();
}

Status GlobalPool(NodeContext& c, std::string_view reduce) {
  const int r = c.InShape(0).rank();
  if (r < 3) return c.Unsupported("global pooling of an input of rank ", r);
  if (r == 4 && c.IsNhwc(0)) {
    WEFT_ASSIGN_OR_RETURN(Output x, c.InNhwc(0));
    c.SetOutNhwc(0,
                 Op(c, reduce, {x}, {{"axis", AttrValue(std::vector<int64_t>{1, 2})}, {"keep_dims", AttrValue(true)}}));
    return Status();
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  std::vector<int64_t> axes;
  for (int i = 2; i < r; ++i) axes.push_back(i);
  c.SetOut(0, Op(c, reduce, {x}, {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}}));
  return Status();
}

Status BatchNorm(NodeContext& c) {
  if (c.Int("training_mode", 0) != 0) return BatchNormTraining(c);
  for (int i = 1; i < 5; ++i) {
    if (c.has_output(i)) return c.Unsupported("BatchNormalization's running statistics outputs");
  }
  const int r = c.InShape(0).rank();
  if (r != 2 && r != 3 && r != 4) return c.Unsupported("BatchNormalization of a rank-", r, " input");
  const bool nhwc = r == 4 && c.options().channels_last;
  Output x;
  if (nhwc) {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
  }
  std::vector<Output> in = {x};
  for (int i = 1; i < 5; ++i) {
    WEFT_ASSIGN_OR_RETURN(Output v, c.In(i));
    in.push_back(v);
  }
  if (r == 3) in[0] = Op(c, "ExpandDims", {x}, {{"axis", AttrValue(int64_t{3})}}, "as_4d");
  std::vector<Output> y = c.b().AddNode("FusedBatchNorm", in,
                                        {{"epsilon", AttrValue(c.Float("epsilon", 1e-5))},
                                         {"is_training", AttrValue(false)},
                                         {"data_format", AttrValue(nhwc ? "NHWC" : "NCHW")}},
                                        c.Name(r == 3 ? "FusedBatchNorm" : ""));
  if (y.empty()) return c.b().status();
  if (r == 3) {
    c.SetOut(0, Op(c, "Squeeze", {y[0]}, {{"axis", AttrValue(std::vector<int64_t>{3})}}));
  } else {
    SetOutAs(c, 0, y[0], nhwc);
  }
  return Status();
}

Status InstanceNorm(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output scale, c.In(1));
  WEFT_ASSIGN_OR_RETURN(Output bias, c.In(2));
  const int r = c.InShape(0).rank();
  if (r < 3) return c.Error("InstanceNormalization of an input of rank ", r);
  std::vector<int64_t> axes, param_shape = {-1};
  for (int i = 2; i < r; ++i) {
    axes.push_back(i);
    param_shape.push_back(1);
  }
  AttrMap keep = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}};
  Output mean = Op(c, "Mean", {x}, keep, "mean");
  Output centred = Op(c, "Sub", {x, mean}, {}, "centred");
  Output var = Op(c, "Mean", {Op(c, "Square", {centred}, {}, "square")}, keep, "variance");
  WEFT_ASSIGN_OR_RETURN(Output eps, ScalarLike(c, x.dtype(), c.Float("epsilon", 1e-5), "epsilon"));
  Output norm =
      Op(c, "Mul", {centred, Op(c, "Rsqrt", {Op(c, "Add", {var, eps}, {}, "var_eps")}, {}, "rsqrt")}, {}, "normalised");
  Output shape = ConstOf(c, Int64s(param_shape), "param_shape");
  Output s = Op(c, "Reshape", {scale, shape}, {}, "scale");
  Output bb = Op(c, "Reshape", {bias, shape}, {}, "bias");
  c.SetOut(0, Op(c, "Add", {Op(c, "Mul", {norm, s}, {}, "scaled"), bb}));
  return Status();
}

// Local response normalisation across channels: y = x / (bias + alpha /
// size * sum of x^2 over the size channels around c)^beta, the sum from the
// channels padded with zeros and one slice per offset.
Status Lrn(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = c.InShape(0);
  const int64_t size = c.Int("size", 0);
  if (size < 1) return c.Error("attr 'size' must be positive, got ", size);
  if (xs.rank() < 3 || xs.dim(1) < 0) {
    return c.Unsupported("LRN of an input of shape ", xs.ToString(), " (Weft needs [N, C, ...] with C known)");
  }
  const int r = xs.rank();
  const int64_t channels = xs.dim(1);
  std::vector<int64_t> paddings(2 * static_cast<std::size_t>(r), 0);
  paddings[2] = (size - 1) / 2;
  paddings[3] = size - 1 - (size - 1) / 2;
  Output padded = Op(c, "Pad", {Op(c, "Square", {x}, {}, "square")}, {{"paddings", AttrValue(paddings)}}, "padded");
  std::vector<Output> windows;
  for (int64_t k = 0; k < size; ++k) {
    std::vector<int64_t> begin(static_cast<std::size_t>(r), 0), extent(static_cast<std::size_t>(r), -1);
    begin[1] = k;
    extent[1] = channels;
    windows.push_back(
        Op(c, "Slice", {padded}, {{"begin", AttrValue(begin)}, {"size", AttrValue(extent)}}, StrCat("shift_", k)));
  }
  Output sum = windows.size() == 1 ? windows[0] : Op(c, "AddN", windows, {}, "square_sum");
  WEFT_ASSIGN_OR_RETURN(Output scale,
                        ScalarLike(c, x.dtype(), c.Float("alpha", 1e-4) / static_cast<double>(size), "alpha"));
  WEFT_ASSIGN_OR_RETURN(Output bias, ScalarLike(c, x.dtype(), c.Float("bias", 1.0), "bias"));
  WEFT_ASSIGN_OR_RETURN(Output beta, ScalarLike(c, x.dtype(), c.Float("beta", 0.75), "beta"));
  Output base = Op(c, "Add", {bias, Op(c, "Mul", {sum, scale}, {}, "scaled")}, {}, "base");
  c.SetOut(0, Op(c, "RealDiv", {x, Op(c, "Pow", {base, beta}, {}, "denominator")}));
  return Status();
}

// LayerNormalization's optional outputs: the Mean and the InvStdDev
// 1 / sqrt(var + epsilon) over axes [axis, rank), kept as axes of 1, in
// stash_type (f32 by default).
Status LayerNormalizationStats(NodeContext& c, const Output& x, int64_t axis, int r) {
  if (r < 0) return c.Unsupported("LayerNormalization's Mean and InvStdDev of an input of unknown rank");
  auto stash = DTypeFromOnnx(static_cast<int32_t>(c.Int("stash_type", 1)));
  if (!stash.ok() || !IsFloating(*stash)) return c.Error("attr 'stash_type' must name a floating-point type");
  Output xs = x.dtype() == *stash ? x : Op(c, "Cast", {x}, {{"DstT", AttrValue(*stash)}}, "stashed");
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < r; ++a) axes.push_back(a);
  const AttrMap reduce = {{"axis", AttrValue(axes)}, {"keep_dims", AttrValue(true)}};
  Output mean = Op(c, "Mean", {xs}, reduce, "mean");
  Output var =
      Op(c, "Mean", {Op(c, "Square", {Op(c, "Sub", {xs, mean}, {}, "centered")}, {}, "squared")}, reduce, "variance");
  WEFT_ASSIGN_OR_RETURN(Output eps, ScalarLike(c, *stash, c.Float("epsilon", 1e-5), "epsilon"));
  if (c.has_output(1)) c.SetOut(1, mean);
  if (c.has_output(2)) c.SetOut(2, Op(c, "Rsqrt", {Op(c, "Add", {var, eps}, {}, "variance_eps")}, {}, "inv_std_dev"));
  return Status();
}

Status LayerNormalization(NodeContext& c) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  WEFT_ASSIGN_OR_RETURN(Output scale, c.In(1));
  const int r = c.InShape(0).rank();
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", -1), r, "attr 'axis'"));
  Output bias;
  if (c.has_input(2)) {
    WEFT_ASSIGN_OR_RETURN(bias, c.In(2));
  } else {
    bias = Op(c, "ZerosLike", {scale}, {}, "zero_bias");
  }
  c.SetOut(0, Op(c, "LayerNorm", {x, scale, bias},
                 {{"epsilon", AttrValue(c.Float("epsilon", 1e-5))}, {"begin_norm_axis", AttrValue(axis)}}));
  if (c.has_output(1) || c.has_output(2)) WEFT_RETURN_IF_ERROR(LayerNormalizationStats(c, x, axis, r));
  return Status();
}

// Softmax and LogSoftmax: opset 13 takes one axis; before it, the input is
// seen as 2-D [prod(d[:axis]), prod(d[axis:])].
Status SoftmaxOp(NodeContext& c, std::string_view weft_op) {
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const int r = c.InShape(0).rank();
  const int64_t def = c.opset() >= 13 ? -1 : 1;
  WEFT_ASSIGN_OR_RETURN(int64_t axis, Axis(c, c.Int("axis", def), r, "attr 'axis'"));
  if (c.opset() >= 13 || axis == r - 1) {
    c.SetOut(0, Op(c, weft_op, {x}, {{"axis", AttrValue(c.opset() >= 13 ? axis : int64_t{-1})}}));
    return Status();
  }
  Output shape = Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "shape");
  // [prod(lead), prod(rest)], the lead inferred.
  Shape xs = c.InShape(0);
  int64_t rest = 1;
  for (int i = static_cast<int>(axis); i < r; ++i) rest = xs.dim(i) < 0 || rest < 0 ? -1 : rest * xs.dim(i);
  if (rest < 0) return c.Unsupported("opset-", c.opset(), " ", c.node().op_type(), " over axes of unknown size");
  Output flat2 = Op(c, "Reshape", {x, ConstOf(c, Int64s({-1, rest}), "flat_shape")}, {}, "as_2d");
  Output y = Op(c, weft_op, {flat2}, {{"axis", AttrValue(int64_t{-1})}}, weft_op);
  c.SetOut(0, Op(c, "Reshape", {y, shape}));
  return Status();
}

Status Flatten(NodeContext& c) {
  const Shape xs = c.InShape(0);
  // [N, C, 1, 1] has its elements in the same order channels-last.
  const bool pooled = c.IsNhwc(0) && xs.rank() == 4 && xs.dim(2) == 1 && xs.dim(3) == 1 && c.Int("axis", 1) == 1;
  Output x;
  if (pooled) {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
  }
  const int r = xs.rank();
  if (r < 0) return c.Unsupported("Flatten of an input of unknown rank");
  int64_t axis = c.Int("axis", 1);
  if (axis < -r || axis > r) return c.Error("attr 'axis' ", axis, " is out of range for rank ", r);
  if (axis < 0) axis += r;
  int64_t lead = 1, rest = 1;
  for (int i = 0; i < r; ++i) {
    int64_t& p = i < axis ? lead : rest;
    p = (xs.dim(i) < 0 || p < 0) ? -1 : p * xs.dim(i);
  }
  if (lead < 0 && rest < 0) return c.Unsupported("Flatten with unknown sizes on both sides of axis ", axis);
  c.SetOut(0, Op(c, "Reshape", {x, ConstOf(c, Int64s({lead, rest}), "shape")}));
  return Status();
}

// --- Resize -------------------------------------------------------------------------------
//
// Every mode of Resize (nearest, linear, cubic; opsets 11 to 17) is a
// linear map along each resized axis: output = A x, with A [out, in] the
// interpolation weights, which depend only on the sizes and the
// attributes. The importer computes A from ONNX's definition (neighbours
// clamped to the edge as the reference pads them; exclude_outside
// renormalised) and applies it as one MatMul or BatchMatMul per resized
// axis: exact, differentiable, and the sizes along resized axes (and
// after them) must be known at import.

// The source coordinate of output index |x| (ONNX's coordinate_transformation_mode).
Expected<double> SourceCoordinate(std::string_view mode, double x, double scale, int64_t in, int64_t out) {
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / static_cast<double>(out - 1);
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  return UnimplementedError("coordinate_transformation_mode ", Quote(std::string(mode)),
                            " (Weft imports half_pixel, pytorch_half_pixel, align_corners, asymmetric and "
                            "tf_half_pixel_for_nn)");
}

// The interpolation matrix [out, in] of one axis, row-major.
Expected<std::vector<double>> ResizeMatrix(NodeContext& c, int64_t in, int64_t out, double scale) {
  const std::string mode = c.Str("mode", "nearest");
  const std::string coord = c.Str("coordinate_transformation_mode", "half_pixel");
  const std::string nearest = c.Str("nearest_mode", "round_prefer_floor");
  const double a = c.Float("cubic_coeff_a", -0.75);
  const bool exclude = c.Int("exclude_outside", 0) != 0;
  std::vector<double> m(static_cast<std::size_t>(in * out), 0.0);
  for (int64_t y = 0; y < out; ++y) {
    WEFT_ASSIGN_OR_RETURN(double x, SourceCoordinate(coord, static_cast<double>(y), scale, in, out));
    const double fl = std::floor(x);
    const double r = x - fl;
    const auto base = static_cast<int64_t>(fl);
    std::vector<std::pair<int64_t, double>> taps;  // (source index, weight)
    if (mode == "nearest") {
      bool up = false;
      if (nearest == "round_prefer_floor") {
        up = r > 0.5;
      } else if (nearest == "round_prefer_ceil") {
        up = r >= 0.5;
      } else if (nearest == "floor") {
        up = false;
      } else if (nearest == "ceil") {
        up = r > 0;
      } else {
        return c.Error("nearest_mode ", Quote(nearest),
                       " is not one of round_prefer_floor, round_prefer_ceil, "
                       "floor, ceil");
      }
      taps.push_back({base + (up ? 1 : 0), 1.0});
    } else if (mode == "linear") {
      taps = {{base, 1 - r}, {base + 1, r}};
    } else if (mode == "cubic") {
      auto w = [a](double t) {  // Keys' cubic kernel at distance |t|
        t = std::abs(t);
        if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
        if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
        return 0.0;
      };
      taps = {{base - 1, w(r + 1)}, {base, w(r)}, {base + 1, w(1 - r)}, {base + 2, w(2 - r)}};
    } else {
      return c.Error("mode ", Quote(mode), " is not one of nearest, linear, cubic");
    }
    double total = 0;
    for (auto& [i, weight] : taps) {
      if (exclude && (i < 0 || i >= in)) weight = 0;
      total += weight;
    }
    for (const auto& [i, weight] : taps) {
      const int64_t src = std::clamp<int64_t>(i, 0, in - 1);
      m[static_cast<std::size_t>(y * in + src)] += exclude && total != 0 ? weight / total : weight;
    }
  }
  return m;
}

constexpr int64_t kMaxResizeMatrix = int64_t{1} << 24;

Tensor Weights(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (dtype == DType::kF64) return Tensor::FromVector<double>(values, shape);
  return Tensor::FromVector<float>(std::vector<float>(values.begin(), values.end()), shape);
}

Status Resize(NodeContext& c) {
  if (c.opset() < 11) {
    return c.Unsupported("Resize of opset 10 (its coordinates differ); convert the model to opset 11 or later");
  }
  // Fed scales or sizes, and cropping, go to Weft's Resize op.
  if (c.Str("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize" || Fed(c, 2) || Fed(c, 3)) {
    return RuntimeResize(c, false);
  }
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const Shape xs = x.shape();
  const int rank = xs.rank();
  if (rank < 1) return c.Unsupported("Resize of an input of unknown rank or a scalar");
  if (x.dtype() != DType::kF32 && x.dtype() != DType::kF64) {
    return c.Unsupported("Resize of ", DTypeName(x.dtype()), " (f32 and f64)");
  }
  std::vector<double> scales;
  bool scales_f32 = false;
  std::vector<int64_t> sizes;
  if (c.has_input(3)) {
    WEFT_ASSIGN_OR_RETURN(sizes, c.KnownInts(3, "sizes"));
  }
  if (sizes.empty() && c.has_input(2)) {  // an empty sizes is absent
    // Its value even when it is a float initializer (which would otherwise
    // become a variable): scales are not trained.
    const Tensor t = c.Initial(2);
    if (!t.valid()) return c.Unsupported("scales (input 2) must be known when the model is imported");
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kF64) return c.Error("scales must be floats");
    scales_f32 = t.dtype() == DType::kF32;
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      scales.push_back(t.dtype() == DType::kF64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]));
    }
  }
  if (sizes.empty() && scales.empty()) return c.Error("needs scales or sizes");
  const std::size_t n = sizes.empty() ? scales.size() : sizes.size();
  if (static_cast<int>(n) != rank)
    return c.Error(sizes.empty() ? "scales" : "sizes", " has ", n, " values for rank ", rank);
  GraphBuilder& b = c.b();
  Output y = x;
  std::vector<int64_t> dims(xs.dims().begin(), xs.dims().end());
  for (int axis = 0; axis < rank; ++axis) {
    const auto ua = static_cast<std::size_t>(axis);
    const int64_t in = dims[ua];
    if (!sizes.empty() && sizes[ua] < 0) return c.Error("sizes[", axis, "] is ", sizes[ua]);
    if (sizes.empty() && !(scales[ua] > 0))
      return c.Error("scales[", axis, "] is ", scales[ua], "; scales are positive");
    if (sizes.empty() && scales[ua] == 1.0) continue;
    if (in < 0) return c.Unsupported("Resize along axis ", axis, ", whose size is not known at import");
    // floor(in * scale) in the scales' own precision, as ONNX's shape
    // inference and runtimes compute it (5 * 1.4f is 7 in f32, 6.99... in f64).
    const double out_size = !sizes.empty() ? static_cast<double>(sizes[ua])
                            : scales_f32   ? std::floor(static_cast<float>(in) * static_cast<float>(scales[ua]))
                                           : std::floor(static_cast<double>(in) * scales[ua]);
    // The interpolation matrix has in * out elements: axes up to 4096 each way.
    if (!(out_size * static_cast<double>(in) <= static_cast<double>(kMaxResizeMatrix))) {
      return c.Unsupported("Resize of axis ", axis, " from ", in, " to ", out_size, ": Weft's Resize builds an ",
                           "interpolation matrix of in x out weights, at most ", kMaxResizeMatrix, " of them");
    }
    const auto out = static_cast<int64_t>(out_size);
    const double scale = sizes.empty() ? scales[ua] : static_cast<double>(out) / static_cast<double>(in);
    if (out == in && scale == 1.0) continue;
    if (in == 0 || out == 0) return c.Unsupported("Resize to or from an empty axis ", axis);
    WEFT_ASSIGN_OR_RETURN(std::vector<double> m, ResizeMatrix(c, in, out, scale));
    int64_t post = 1;
    for (int i = axis + 1; i < rank; ++i) {
      if (dims[static_cast<std::size_t>(i)] < 0)
        return c.Unsupported("Resize of an input whose axis ", i, " is not known");
      post *= dims[static_cast<std::size_t>(i)];
    }
    int unknown_before = 0;
    for (int i = 0; i < axis; ++i) unknown_before += dims[static_cast<std::size_t>(i)] < 0 ? 1 : 0;
    if (unknown_before > 1) return c.Unsupported("Resize of an input with more than one unknown axis");
    const std::string tag = StrCat("axis_", axis);
    if (axis == rank - 1) {
      // Last axis: [rows, in] x A^T [in, out].
      std::vector<double> mt(m.size());
      for (int64_t i = 0; i < in; ++i) {
        for (int64_t o = 0; o < out; ++o)
          mt[static_cast<std::size_t>(i * out + o)] = m[static_cast<std::size_t>(o * in + i)];
      }
      const Tensor w = Weights(mt, Shape{in, out}, x.dtype());
      Output rows = b.Op("Reshape", {y, ConstOf(c, Int64s({-1, in}), tag + "_rows_shape")}, {}, c.Name(tag + "_rows"));
      y = b.Op("MatMul", {rows, ConstOf(c, w, tag + "_weights")}, {}, c.Name(tag));
    } else {
      const Tensor w = Weights(m, Shape{out, in}, x.dtype());
      Output blocks =
          b.Op("Reshape", {y, ConstOf(c, Int64s({-1, in, post}), tag + "_blocks_shape")}, {}, c.Name(tag + "_blocks"));
      y = b.Op("BatchMatMul", {ConstOf(c, w, tag + "_weights"), blocks}, {}, c.Name(tag));
    }
    dims[ua] = out;
    y = b.Op("Reshape", {y, ConstOf(c, Int64s(dims), tag + "_shape")}, {}, c.Name(tag + "_resized"));
  }
  c.SetOut(0, Op(c, "Identity", {y}));
  return Status();
}

}  // namespace

void AddNnConverters(ConverterTable& t) {
  t["MatMul"] = MatMul;
  t["Gemm"] = Gemm;
  t["Conv"] = ConvOp;
  t["MaxPool"] = [](NodeContext& c) { return Pool(c, true); };
  t["AveragePool"] = [](NodeContext& c) { return Pool(c, false); };
  t["GlobalAveragePool"] = [](NodeContext& c) { return GlobalPool(c, "Mean"); };
  t["GlobalMaxPool"] = [](NodeContext& c) { return GlobalPool(c, "Max"); };
  t["BatchNormalization"] = BatchNorm;
  t["InstanceNormalization"] = InstanceNorm;
  t["LayerNormalization"] = LayerNormalization;
  t["LRN"] = Lrn;
  t["Softmax"] = [](NodeContext& c) { return SoftmaxOp(c, "Softmax"); };
  t["LogSoftmax"] = [](NodeContext& c) { return SoftmaxOp(c, "LogSoftmax"); };
  t["Flatten"] = Flatten;
  t["Resize"] = Resize;
  t["Upsample"] = [](NodeContext& c) { return RuntimeResize(c, true); };
}

}  // namespace weft::onnx_io::convert
