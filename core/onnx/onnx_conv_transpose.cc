// ONNX ConvTranspose (1-D and 2-D, groups, strides, dilations, pads,
// output_padding, output_shape, auto_pad) as Conv2DBackpropInput, the
// gradient of a convolution with respect to its input, which is what a
// transposed convolution computes: the full output
// s * (in - 1) + (k - 1) * d + 1 per spatial axis, then cropped by the
// pads and extended by output_padding (the conventions are in
// core/onnx/converters.h). Runs channels-last.
#include <algorithm>

#include "core/base/strings.h"
#include "core/onnx/converters.h"

namespace weft::onnx_io::convert {
namespace {

struct TransposeWindow {
  std::vector<int64_t> in, kernel, strides, dilations, output_padding;
  std::vector<int64_t> begin, end;  // pads per spatial axis
  std::vector<int64_t> full, out;   // the full output, and the cropped one
};

std::vector<int64_t> IntsOr(NodeContext& c, std::string_view name, std::size_t n, int64_t value) {
  return c.Ints(name, std::vector<int64_t>(n, value));
}

// The window attributes and the output size of every spatial axis.
Expected<TransposeWindow> ReadTransposeWindow(NodeContext& c, const std::vector<int64_t>& in,
                                              const std::vector<int64_t>& kernel_dims) {
  const std::size_t n = in.size();
  TransposeWindow w;
  w.in = in;
  w.kernel = c.Ints("kernel_shape", kernel_dims);
  w.strides = IntsOr(c, "strides", n, 1);
  w.dilations = IntsOr(c, "dilations", n, 1);
  w.output_padding = IntsOr(c, "output_padding", n, 0);
  std::vector<int64_t> pads = c.Ints("pads", std::vector<int64_t>(2 * n, 0));
  if (w.kernel.size() != n || w.strides.size() != n || w.dilations.size() != n || w.output_padding.size() != n ||
      pads.size() != 2 * n) {
    return c.Error("attrs kernel_shape, strides, dilations, output_padding need ", n, " entries and pads ", 2 * n);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (w.kernel[i] != kernel_dims[i]) {
      return c.Error("attr 'kernel_shape' ", ListString(w.kernel), " differs from the weights' ",
                     ListString(kernel_dims));
    }
    if (w.output_padding[i] < 0 || w.output_padding[i] >= std::max(w.strides[i], w.dilations[i])) {
      return c.Error("attr 'output_padding' ", ListString(w.output_padding),
                     " must be non-negative and less than the stride or the dilation");
    }
    w.full.push_back(w.strides[i] * (in[i] - 1) + (w.kernel[i] - 1) * w.dilations[i] + 1);
  }
  const std::string auto_pad = c.Str("auto_pad", "NOTSET");
  std::vector<int64_t> target = c.Ints("output_shape");
  if (target.size() > n) target.erase(target.begin(), target.end() - static_cast<std::ptrdiff_t>(n));
  if (target.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")) {
    for (std::size_t i = 0; i < n; ++i) target.push_back(in[i] * w.strides[i]);
  } else if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return c.Error("attr 'auto_pad' is ", Quote(auto_pad), "; expected NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  }
  if (!target.empty() && target.size() != n) {
    return c.Error("attr 'output_shape' ", ListString(c.Ints("output_shape")), " does not give ", n, " spatial sizes");
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!target.empty()) {
      // The pads that give output_shape, split as ONNX says.
      // An output_shape larger than the full output adds zeros at the
      // end, as output_padding does (ONNX's test_convtranspose_output_shape).
      const int64_t total = w.full[i] + w.output_padding[i] - target[i];
      const int64_t half = total / 2;
      w.begin.push_back(total < 0 ? 0 : auto_pad == "SAME_UPPER" ? half : total - half);
      w.end.push_back(total < 0 ? total : auto_pad == "SAME_UPPER" ? total - half : half);
    } else if (auto_pad == "VALID") {
      w.begin.push_back(0);
      w.end.push_back(0);
    } else {
      w.begin.push_back(pads[i]);
      w.end.push_back(pads[i + n]);
    }
    w.out.push_back(w.full[i] + w.output_padding[i] - w.begin[i] - w.end[i]);
    if (w.out.back() < 0) return c.Error("the output size of spatial axis ", i, " is ", w.out.back());
  }
  return w;
}

// |y| (NHWC) cut to the output window: zeros past the full output where
// output_padding (or negative pads) ask, then the pads removed.
Output CropToOutput(NodeContext& c, Output y, const TransposeWindow& w) {
  std::vector<int64_t> paddings(8, 0), begin(4, 0), size(4, -1);
  bool pad = false, crop = false;
  for (std::size_t i = 0; i < 2; ++i) {
    const int64_t before = std::max<int64_t>(0, -w.begin[i]);
    const int64_t after = std::max<int64_t>(0, w.begin[i] + w.out[i] - w.full[i]);
    paddings[2 * (i + 1)] = before;
    paddings[2 * (i + 1) + 1] = after;
    pad = pad || before > 0 || after > 0;
    begin[i + 1] = std::max<int64_t>(0, w.begin[i]);
    size[i + 1] = w.out[i];
    crop = crop || begin[i + 1] != 0 || w.out[i] != w.full[i] + before + after;
  }
  if (pad) y = Op(c, "Pad", {y}, {{"paddings", AttrValue(paddings)}}, "output_padding");
  if (crop) y = Op(c, "Slice", {y}, {{"begin", AttrValue(begin)}, {"size", AttrValue(size)}}, "cropped");
  return y;
}

Status ConvTranspose(NodeContext& c) {
  const Shape xs = c.InShape(0), ws = c.InShape(1);
  if (ws.rank() < 0 || !ws.IsFullyDefined()) return c.Unsupported("ConvTranspose weights of unknown shape");
  const int spatial = ws.rank() - 2;
  if (spatial != 1 && spatial != 2) return c.Unsupported(spatial, "-D ConvTranspose (Weft has 1-D and 2-D)");
  if (xs.rank() != spatial + 2) {
    return c.Error("the input has shape ", xs.ToString(), "; a ", spatial, "-D ConvTranspose takes rank ", spatial + 2);
  }
  const int64_t group = c.Int("group", 1);
  const int64_t cin = ws.dim(0), cout = ws.dim(1) * group;
  if (group < 1 || cin % group != 0 || (xs.dim(1) >= 0 && xs.dim(1) != cin)) {
    return c.Error("the input's ", xs.dim(1), " channels, the weights' ", cin, " and group ", group, " do not fit");
  }
  std::vector<int64_t> in, kdims;
  for (int i = 0; i < spatial; ++i) {
    if (xs.dim(i + 2) < 0) return c.Unsupported("ConvTranspose of an input of unknown spatial size ", xs.ToString());
    in.push_back(xs.dim(i + 2));
    kdims.push_back(ws.dim(i + 2));
  }
  WEFT_ASSIGN_OR_RETURN(TransposeWindow w, ReadTransposeWindow(c, in, kdims));
  // 1-D runs as 2-D over [N, C, 1, L].
  Output x, weights;
  WEFT_ASSIGN_OR_RETURN(weights, c.In(1));
  if (spatial == 1) {
    WEFT_ASSIGN_OR_RETURN(x, c.In(0));
    x = Op(c, "Transpose", {Op(c, "ExpandDims", {x}, {{"axis", AttrValue(int64_t{2})}}, "as_2d")},
           {{"perm", AttrValue(std::vector<int64_t>{0, 2, 3, 1})}}, "nhwc");
    weights = Op(c, "ExpandDims", {weights}, {{"axis", AttrValue(int64_t{2})}}, "weights_2d");
    for (auto* v : {&w.in, &w.kernel, &w.strides, &w.dilations, &w.full, &w.out}) v->insert(v->begin(), 1);
    for (auto* v : {&w.output_padding, &w.begin, &w.end}) v->insert(v->begin(), 0);
  } else {
    WEFT_ASSIGN_OR_RETURN(x, c.InNhwc(0));
  }
  // Conv2DBackpropInput's filter is the forward convolution's, HWIO with
  // I = the transposed convolution's output channels.
  Output hwio = Op(c, "Transpose", {weights}, {{"perm", AttrValue(std::vector<int64_t>{2, 3, 1, 0})}}, "weights_hwio");
  // [N, full_h, full_w, cout / group], N read at run time when unknown.
  const std::vector<int32_t> rest = {static_cast<int32_t>(w.full[0]), static_cast<int32_t>(w.full[1]),
                                     static_cast<int32_t>(cout / group)};
  Output sizes;
  if (xs.dim(0) >= 0) {
    std::vector<int32_t> all = rest;
    all.insert(all.begin(), static_cast<int32_t>(xs.dim(0)));
    sizes = ConstOf(c, Tensor::FromVector<int32_t>(all), "full_sizes");
  } else {
    Output batch =
        Op(c, "Slice", {Op(c, "Shape", {x}, {{"out_type", AttrValue(DType::kI32)}}, "in_shape")},
           {{"begin", AttrValue(std::vector<int64_t>{0})}, {"size", AttrValue(std::vector<int64_t>{1})}}, "batch");
    sizes = Op(c, "Concat", {batch, ConstOf(c, Tensor::FromVector<int32_t>(rest), "full_hwc")},
               {{"axis", AttrValue(int64_t{0})}}, "full_sizes");
  }
  const AttrMap attrs = {{"strides", AttrValue(std::vector<int64_t>{1, w.strides[0], w.strides[1], 1})},
                         {"dilations", AttrValue(std::vector<int64_t>{1, w.dilations[0], w.dilations[1], 1})},
                         {"padding", AttrValue(std::string("VALID"))},
                         {"data_format", AttrValue(std::string("NHWC"))}};
  Output y;
  if (group == 1) {
    y = Op(c, "Conv2DBackpropInput", {sizes, hwio, x}, attrs, "full");
  } else {
    std::vector<Output> xg =
        c.b().AddNode("Split", {x}, {{"num_split", AttrValue(group)}, {"axis", AttrValue(int64_t{3})}}, c.Name("x"));
    std::vector<Output> wg =
        c.b().AddNode("Split", {hwio}, {{"num_split", AttrValue(group)}, {"axis", AttrValue(int64_t{3})}}, c.Name("w"));
    if (static_cast<int64_t>(xg.size()) != group || static_cast<int64_t>(wg.size()) != group) return c.b().status();
    std::vector<Output> parts;
    for (int64_t g = 0; g < group; ++g) {
      const auto k = static_cast<std::size_t>(g);
      parts.push_back(Op(c, "Conv2DBackpropInput", {sizes, wg[k], xg[k]}, attrs, StrCat("full_", g)));
    }
    y = Op(c, "Concat", parts, {{"axis", AttrValue(int64_t{3})}}, "full");
  }
  if (xs.dim(0) < 0) {
    // The sizes were computed (an open batch), so Weft's shape inference
    // cannot see the spatial sizes; a Reshape states them.
    y = Op(c, "Reshape", {y, ConstOf(c, Int64s({-1, w.full[0], w.full[1], cout}), "full_shape")}, {}, "full_static");
  }
  y = CropToOutput(c, y, w);
  if (c.has_input(2)) {
    WEFT_ASSIGN_OR_RETURN(Output bias, c.In(2));
    y = Op(c, "BiasAdd", {y, bias}, {{"data_format", AttrValue(std::string("NHWC"))}}, "BiasAdd");
  }
  if (spatial == 1) {
    Output nchw = Op(c, "Transpose", {y}, {{"perm", AttrValue(std::vector<int64_t>{0, 3, 1, 2})}}, "nchw");
    c.SetOut(0, Op(c, "Squeeze", {nchw}, {{"axis", AttrValue(std::vector<int64_t>{2})}}));
  } else {
    c.SetOutNhwc(0, Op(c, "Identity", {y}));
  }
  return Status();
}

}  // namespace

void AddConvTransposeConverters(ConverterTable& t) { t["ConvTranspose"] = ConvTranspose; }

}  // namespace weft::onnx_io::convert
