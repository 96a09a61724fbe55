// ONNX pooling forms Weft has no window op for: MaxPool and AveragePool of
// 3-D windows ([N, C, D, H, W]) as two 2-D pools, over (H, W) with the
// depth folded into the channels, then over D with the plane flattened
// (exact for max, and for the average, whose count is the product of the
// per-axis counts); and dilated 2-D windows as one strided slice per tap
// (the conventions are in core/onnx/converters.h).
#include <limits>

#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {

Status Pool3d(NodeContext& c, bool max) {
  const Shape xs = c.InShape(0);
  if (!xs.IsFullyDefined()) return c.Unsupported("3-D pooling of an input of unknown shape ", xs.ToString());
  const std::vector<int64_t> kernel = c.Ints("kernel_shape");
  const std::vector<int64_t> strides = c.Ints("strides", {1, 1, 1});
  const std::vector<int64_t> pads = c.Ints("pads", std::vector<int64_t>(6, 0));
  if (kernel.size() != 3 || strides.size() != 3 || pads.size() != 6) {
    return c.Error("kernel_shape, strides and pads must have 3, 3 and 6 entries for a 3-D pool");
  }
  for (int64_t p : pads) {
    if (p != 0) return c.Unsupported("3-D pooling with pads ", ListString(pads));
  }
  if (c.Str("auto_pad", "NOTSET") != "NOTSET" || c.Int("ceil_mode", 0) != 0 ||
      c.Ints("dilations", {1, 1, 1}) != std::vector<int64_t>{1, 1, 1}) {
    return c.Unsupported("3-D pooling with auto_pad, ceil_mode or dilations");
  }
  const int64_t n = xs.dim(0), ch = xs.dim(1), d = xs.dim(2), h = xs.dim(3), w = xs.dim(4);
  for (int i = 0; i < 3; ++i) {
    if (kernel[static_cast<std::size_t>(i)] > xs.dim(i + 2) || kernel[static_cast<std::size_t>(i)] < 1 ||
        strides[static_cast<std::size_t>(i)] < 1) {
      return c.Error("kernel ", ListString(kernel), " and strides ", ListString(strides), " do not fit ",
                     xs.ToString());
    }
  }
  const int64_t ho = (h - kernel[1]) / strides[1] + 1, wo = (w - kernel[2]) / strides[2] + 1;
  const int64_t dout = (d - kernel[0]) / strides[0] + 1;
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  const char* op = max ? "MaxPool" : "AvgPool";
  auto pool = [&](const Output& v, int64_t kh, int64_t kw, int64_t sh, int64_t sw, const std::string& name) {
    return Op(c, op, {v},
              {{"ksize", AttrValue(std::vector<int64_t>{1, 1, kh, kw})},
               {"strides", AttrValue(std::vector<int64_t>{1, 1, sh, sw})},
               {"padding", AttrValue(std::string("VALID"))},
               {"data_format", AttrValue(std::string("NCHW"))}},
              name);
  };
  auto reshape = [&](const Output& v, const std::vector<int64_t>& dims, const std::string& name) {
    return Op(c, "Reshape", {v, ConstOf(c, Int64s(dims), name + "_shape")}, {}, name);
  };
  Output planes =
      pool(reshape(x, {n, ch * d, h, w}, "planes"), kernel[1], kernel[2], strides[1], strides[2], "plane_pool");
  Output depth = pool(reshape(planes, {n, ch, d, ho * wo}, "depth_major"), kernel[0], 1, strides[0], 1, "depth_pool");
  c.SetOut(0, reshape(depth, {n, ch, dout, ho, wo}, ""));
  return Status();
}

// 2-D pooling with dilations ([N, C, H, W], NCHW): the maximum (or the
// mean, without pads) of kernel_h * kernel_w strided slices of the input
// padded with -inf, one per tap.
Status DilatedPool(NodeContext& c, bool max) {
  const Shape xs = c.InShape(0);
  const std::vector<int64_t> kernel = c.Ints("kernel_shape"), dil = c.Ints("dilations");
  const std::vector<int64_t> strides = c.Ints("strides", {1, 1}), pads = c.Ints("pads", {0, 0, 0, 0});
  if (xs.rank() != 4 || !xs.IsFullyDefined() || kernel.size() != 2 || dil.size() != 2 || strides.size() != 2 ||
      pads.size() != 4) {
    return c.Unsupported("dilated pooling of ", xs.ToString(), " with kernel ", ListString(kernel));
  }
  if (c.Str("auto_pad", "NOTSET") != "NOTSET" || c.Int("ceil_mode", 0) != 0 || c.has_output(1)) {
    return c.Unsupported("dilated pooling with auto_pad, ceil_mode or Indices");
  }
  const bool padded = pads != std::vector<int64_t>{0, 0, 0, 0};
  if (!max && padded) return c.Unsupported("a dilated AveragePool with pads");
  WEFT_ASSIGN_OR_RETURN(Output x, c.In(0));
  if (padded) {
    x = Op(c, "Pad", {x},
           {{"paddings", AttrValue(std::vector<int64_t>{0, 0, 0, 0, pads[0], pads[2], pads[1], pads[3]})},
            {"constant_value", AttrValue(-std::numeric_limits<double>::infinity())}},
           "pad");
  }
  const int64_t h = xs.dim(2) + pads[0] + pads[2], w = xs.dim(3) + pads[1] + pads[3];
  const int64_t oh = (h - (kernel[0] - 1) * dil[0] - 1) / strides[0] + 1;
  const int64_t ow = (w - (kernel[1] - 1) * dil[1] - 1) / strides[1] + 1;
  if (oh < 1 || ow < 1) return c.Error("the dilated window does not fit the input ", xs.ToString());
  std::vector<Output> taps;
  for (int64_t i = 0; i < kernel[0]; ++i) {
    for (int64_t j = 0; j < kernel[1]; ++j) {
      const std::vector<int64_t> begin = {0, 0, i * dil[0], j * dil[1]};
      const std::vector<int64_t> end = {0, 0, i * dil[0] + (oh - 1) * strides[0] + 1,
                                        j * dil[1] + (ow - 1) * strides[1] + 1};
      taps.push_back(Op(c, "StridedSlice", {x},
                        {{"begin", AttrValue(begin)},
                         {"end", AttrValue(end)},
                         {"strides", AttrValue(std::vector<int64_t>{1, 1, strides[0], strides[1]})},
                         {"begin_mask", AttrValue(int64_t{3})},
                         {"end_mask", AttrValue(int64_t{3})}},
                        StrCat("tap_", i, "_", j)));
    }
  }
  Output y = taps[0];
  for (std::size_t k = 1; k < taps.size(); ++k) {
    y = max ? Op(c, "Maximum", {y, taps[k]}, {}, StrCat("max_", k)) : Op(c, "Add", {y, taps[k]}, {}, StrCat("sum_", k));
  }
  if (!max) {
    WEFT_ASSIGN_OR_RETURN(Output count, ScalarLike(c, y.dtype(), static_cast<double>(taps.size()), "count"));
    y = Op(c, "Div", {y, count}, {}, "mean");
  }
  c.SetOut(0, Op(c, "Identity", {y}));
  return Status();
}

}  // namespace weft::onnx_io::convert
