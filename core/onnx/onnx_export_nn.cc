// ONNX export, neural-network ops: MatMul (Gemm for floats), BatchMatMul,
// BiasAdd, convolutions and pools (ONNX's are NCHW: an NHWC node is
// wrapped in Transposes), batch and layer normalisation, Softmax and
// LSTMCell (the conventions are in core/onnx/exporter.h; docs/onnx.md has
// the table).
#include <algorithm>
#include <cstring>
#include <utility>

#include "core/onnx/exporter.h"

namespace weft::onnx_io::exports {
namespace {

Status MatMul(ExportContext& c) {
  const bool ta = c.Bool("transpose_a"), tb = c.Bool("transpose_b");
  if (c.dtype() == DType::kF32 || c.dtype() == DType::kF64) {
    onnx::NodeProto* p = c.Simple("Gemm", 2);
    if (ta) AttrInt(p, "transA", 1);
    if (tb) AttrInt(p, "transB", 1);
  } else {
    const std::string a = ta ? c.Transpose(c.In(0), {1, 0}, c.name() + "/a_t") : c.In(0);
    const std::string b = tb ? c.Transpose(c.In(1), {1, 0}, c.name() + "/b_t") : c.In(1);
    c.Emit("MatMul", {a, b}, {c.out()}, c.name());
  }
  return Status();
}

Status BatchMatMul(ExportContext& c) {
  auto adj = [&](int i, const char* attr) {
    const int r = c.InShape(i).rank();
    if (!c.Bool(attr) || r < 2) return c.In(i);
    std::vector<int64_t> perm(static_cast<std::size_t>(r));
    for (int k = 0; k < r; ++k) perm[static_cast<std::size_t>(k)] = k;
    std::swap(perm[static_cast<std::size_t>(r - 1)], perm[static_cast<std::size_t>(r - 2)]);
    return c.Transpose(c.In(i), perm, c.name() + "/adj");
  };
  c.Emit("MatMul", {adj(0, "adj_x"), adj(1, "adj_y")}, {c.out()}, c.name());
  return Status();
}

Status BiasAdd(ExportContext& c) {
  if (c.Str("data_format", "NHWC") == "NCHW" && c.InShape(0).rank() > 2) {
    const int r = c.InShape(0).rank();
    std::vector<int64_t> shape(static_cast<std::size_t>(r - 1), 1);
    shape[0] = -1;
    const std::string b = c.Emit1("Reshape", {c.In(1), c.I64s(c.name() + "/bias_shape", shape)}, c.name() + "/bias");
    c.Emit("Add", {c.In(0), b}, {c.out()}, c.name());
  } else {
    c.Simple("Add", 2);
  }
  return Status();
}

// The ONNX weights of a Conv2D or DepthwiseConv2D of filter |fs| (HWIO
// [kh, kw, I, O], or HWCM [kh, kw, C, M]): OIHW, or [C*M, 1, kh, kw]. A
// constant filter is stored rearranged, any other is transposed.
// Weft's HWIO (or HWCM) |filter| rearranged as ONNX's OIHW (or [C*M, 1,
// kh, kw]).
Expected<Tensor> ToOihw(const Tensor& filter, bool depthwise) {
  const Shape& fs = filter.shape();
  const int64_t kh = fs.dim(0), kw = fs.dim(1), ci = fs.dim(2), co = fs.dim(3);
  const Shape oihw = depthwise ? Shape{ci * co, 1, kh, kw} : Shape{co, ci, kh, kw};
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(filter.dtype(), oihw));
  const std::size_t es = DTypeSize(filter.dtype());
  const char* src = static_cast<const char*>(filter.raw_data());
  char* dst = static_cast<char*>(t.raw_data());
  for (int64_t y0 = 0; y0 < kh; ++y0) {
    for (int64_t x0 = 0; x0 < kw; ++x0) {
      for (int64_t i = 0; i < ci; ++i) {
        for (int64_t o = 0; o < co; ++o) {
          const int64_t s = ((y0 * kw + x0) * ci + i) * co + o;
          const int64_t d = depthwise ? (((i * co + o) * kh + y0) * kw + x0) : (((o * ci + i) * kh + y0) * kw + x0);
          std::memcpy(dst + static_cast<std::size_t>(d) * es, src + static_cast<std::size_t>(s) * es, es);
        }
      }
    }
  }
  return t;
}

// Quantized weights, as `weft quantize` writes them: a DequantizeLinear of
// a constant int8 HWIO (HWCM) filter with its scales along the output
// channels. Exported as a DequantizeLinear of the OIHW int8 constant along
// axis 0, which ONNX Runtime fuses with the Conv into an int8 convolution
// (a Transpose between them would keep it in f32); empty when the filter
// is not that.
Expected<std::string> QuantizedConvWeights(ExportContext& c, bool depthwise) {
  const Graph& g = c.exporter().graph();
  const Graph::Node& dq = g.node(c.node().inputs[1].node);
  if (dq.op_name() != "DequantizeLinear") return std::string();
  const Tensor* q = c.exporter().ConstInput(dq, 0);
  const Tensor* scale = c.exporter().ConstInput(dq, 1);
  const Tensor* zp = c.exporter().ConstInput(dq, 2);
  if (q == nullptr || scale == nullptr || zp == nullptr || q->shape().rank() != 4 || scale->dtype() != DType::kF32) {
    return std::string();
  }
  const int rank = 4;
  int64_t axis = dq.def.attrs.at("axis").get<int64_t>();
  if (axis < 0) axis += rank;
  const int64_t n = scale->num_elements();
  const int64_t m = q->shape().dim(3);  // a depthwise filter's multiplier
  // Per tensor, or per output channel: O of HWIO, C of HWCM (each scale then
  // covers the M outputs of its channel).
  if (n != 1 && axis != (depthwise ? 2 : 3)) return std::string();
  WEFT_ASSIGN_OR_RETURN(Tensor oihw, ToOihw(*q, depthwise));
  WEFT_ASSIGN_OR_RETURN(std::string weights, c.Initializer(dq.name() + "/oihw", oihw));
  Tensor s = *scale, z = *zp;
  if (n != 1 && depthwise && m > 1) {
    WEFT_ASSIGN_OR_RETURN(s, Tensor::Allocate(DType::kF32, Shape{n * m}));
    WEFT_ASSIGN_OR_RETURN(z, Tensor::Allocate(zp->dtype(), Shape{n * m}));
    for (int64_t i = 0; i < n * m; ++i) {
      s.data<float>()[i] = scale->data<float>()[i / m];
      std::memcpy(static_cast<char*>(z.raw_data()) + i * static_cast<int64_t>(DTypeSize(zp->dtype())),
                  static_cast<const char*>(zp->raw_data()) + (i / m) * static_cast<int64_t>(DTypeSize(zp->dtype())),
                  DTypeSize(zp->dtype()));
    }
  }
  WEFT_ASSIGN_OR_RETURN(std::string s_name, c.Initializer(dq.name() + "/oihw_scales", s));
  WEFT_ASSIGN_OR_RETURN(std::string z_name, c.Initializer(dq.name() + "/oihw_zero_points", z));
  const bool per_axis = n != 1;
  return c.Emit1("DequantizeLinear", {weights, s_name, z_name}, dq.name() + "/oihw_dequantize",
                 [per_axis](onnx::NodeProto* p) {
                   if (per_axis) AttrInt(p, "axis", 0);
                 });
}

Expected<std::string> ConvWeights(ExportContext& c, const Shape& fs, bool depthwise) {
  const int64_t kh = fs.dim(0), kw = fs.dim(1), ci = fs.dim(2), co = fs.dim(3);
  WEFT_ASSIGN_OR_RETURN(std::string quantized, QuantizedConvWeights(c, depthwise));
  if (!quantized.empty()) return quantized;
  const Tensor* filter = c.ConstInput(1);
  if (filter != nullptr) {
    WEFT_ASSIGN_OR_RETURN(Tensor t, ToOihw(*filter, depthwise));
    return c.Initializer(c.exporter().graph().node(c.node().inputs[1].node).name(), t);
  }
  if (!depthwise) return c.Transpose(c.In(1), {3, 2, 0, 1}, c.name() + "/oihw");
  // [kh, kw, C, M] -> [C, M, kh, kw] -> [C*M, 1, kh, kw]
  const std::string t = c.Transpose(c.In(1), {2, 3, 0, 1}, c.name() + "/cmhw");
  return c.Emit1("Reshape", {t, c.I64s(c.name() + "/oihw_shape", {ci * co, 1, kh, kw})}, c.name() + "/oihw");
}

// The activation of a fused op (its 'activation', 'alpha', 'beta') of |x|
// into |out|.
Status Activation(ExportContext& c, const std::string& x, const std::string& out) {
  const std::string act = c.Str("activation", "None");
  const std::string& base = c.name();
  const DType dt = c.dtype();
  if (act == "None") {
    c.Emit("Identity", {x}, {out}, base + "/identity");
  } else if (act == "Relu" || act == "Sigmoid" || act == "Tanh" || act == "Elu") {
    c.Emit(act, {x}, {out}, base + "/" + act);
  } else if (act == "Relu6" || act == "Clip") {
    const double lo = act == "Relu6" ? 0 : c.Float("alpha"), hi = act == "Relu6" ? 6 : c.Float("beta");
    c.Emit("Clip", {x, c.ScalarConst(base + "/min", dt, lo), c.ScalarConst(base + "/max", dt, hi)}, {out},
           base + "/clip");
  } else if (act == "LeakyRelu") {
    const auto alpha = static_cast<float>(c.Float("alpha"));
    c.Emit("LeakyRelu", {x}, {out}, base + "/leaky_relu",
           [alpha](onnx::NodeProto* p) { AttrFloat(p, "alpha", alpha); });
  } else if (act == "Swish") {
    c.Emit("Mul", {x, c.Emit1("Sigmoid", {x}, base + "/sigmoid")}, {out}, base + "/swish");
  } else if (act == "Gelu" || act == "GeluTanh") {
    EmitGelu(c, x, act == "GeluTanh", out);
  } else {
    return InvalidArgumentError("unknown fused activation ", Quote(act));
  }
  return Status();
}

// The epilogue of _FusedConv2D and _FusedMatMul after the product (and its
// bias): the residual (the node's last input) and the activation, into the
// node's output.
Status Epilogue(ExportContext& c, const std::string& product) {
  std::string y = product;
  if (c.Bool("residual")) y = c.Emit1("Add", {y, c.In(c.num_inputs() - 1)}, c.name() + "/residual");
  return Activation(c, y, c.out());
}

// _FusedMatMul: Gemm with the bias, then the epilogue.
Status FusedMatMul(ExportContext& c) {
  std::vector<std::string> in = {c.In(0), c.In(1)};
  if (c.Bool("bias")) in.push_back(c.In(2));
  const bool ta = c.Bool("transpose_a"), tb = c.Bool("transpose_b");
  const std::string product = c.Emit1("Gemm", in, c.name() + "/gemm", [ta, tb](onnx::NodeProto* p) {
    if (ta) AttrInt(p, "transA", 1);
    if (tb) AttrInt(p, "transB", 1);
  });
  return Epilogue(c, product);
}

// QuantizeLinear, DequantizeLinear: ONNX's, the axis where the scale is a
// vector.
Status QuantizeOrDequantize(ExportContext& c) {
  const bool per_axis = c.InShape(1).rank() == 1 && c.InShape(1).dim(0) != 1;
  const int64_t axis = c.Int("axis", -1);
  onnx::NodeProto* p = c.Simple(c.op(), 3);
  if (per_axis) AttrInt(p, "axis", axis);
  return Status();
}

// Conv2D, DepthwiseConv2D, MaxPool, AvgPool, and the optimizer's
// _FusedConv2D (its bias as Conv's B, explicit pads as 'pads', the rest
// after it): ONNX's are NCHW.
Status Window(ExportContext& c) {
  const std::string& op = c.op();
  const bool nchw = c.Str("data_format", "NHWC") == "NCHW";
  const Shape& xs = c.InShape(0);
  if (xs.rank() != 4) return UnimplementedError(op, " of an input of rank ", xs.rank());
  const int h = nchw ? 2 : 1, w = nchw ? 3 : 2;
  auto spatial = [&](const char* attr) {
    const std::vector<int64_t> v = c.Ints(attr);
    return v.size() == 4 ? std::vector<int64_t>{v[static_cast<std::size_t>(h)], v[static_cast<std::size_t>(w)]}
                         : std::vector<int64_t>{1, 1};
  };
  std::string x = c.In(0);
  if (!nchw) x = c.Transpose(x, {0, 3, 1, 2}, c.name() + "/nchw_in");
  const bool fused = op == "_FusedConv2D";
  const bool conv = op == "Conv2D" || op == "DepthwiseConv2D" || fused;
  // A fused op's output is its epilogue's: the convolution goes to a name
  // of its own.
  const std::string result = fused ? c.Fresh(c.name() + "/conv") : c.out();
  std::string y = nchw ? result : c.Fresh(c.name() + "/nchw_out");
  onnx::NodeProto* node = nullptr;
  if (conv) {
    const Shape& fs = c.InShape(1);
    if (fs.rank() != 4 || !fs.IsFullyDefined()) {
      return UnimplementedError(op, " with a filter of shape ", fs.ToString());
    }
    const bool depthwise = op == "DepthwiseConv2D" || (fused && c.Bool("depthwise"));
    WEFT_ASSIGN_OR_RETURN(std::string weights, ConvWeights(c, fs, depthwise));
    std::vector<std::string> in = {x, weights};
    if (fused && c.Bool("bias")) in.push_back(c.In(2));
    node = c.Emit("Conv", in, {y}, c.name());
    AttrInts(node, "kernel_shape", {fs.dim(0), fs.dim(1)});
    AttrInts(node, "dilations", spatial("dilations"));
    if (depthwise) AttrInt(node, "group", fs.dim(2));
  } else {
    node = c.Emit(op == "MaxPool" ? "MaxPool" : "AveragePool", {x}, {y}, c.name());
    AttrInts(node, "kernel_shape", spatial("ksize"));
  }
  AttrInts(node, "strides", spatial("strides"));
  if (c.Str("padding") == "EXPLICIT") {
    const std::vector<int64_t> p = c.Ints("explicit_paddings");  // top, bottom, left, right
    if (p.size() != 4) return InvalidArgumentError("explicit_paddings has ", p.size(), " entries, not 4");
    AttrInts(node, "pads", {p[0], p[2], p[1], p[3]});
  } else {
    AttrStr(node, "auto_pad", c.Str("padding") == "SAME" ? "SAME_UPPER" : "VALID");
  }
  if (!nchw) {
    c.Emit("Transpose", {y}, {result}, c.name() + "/nhwc_out", [](onnx::NodeProto* p) {
      AttrInts(p, "perm", {0, 2, 3, 1});
    });
  }
  return fused ? Epilogue(c, result) : Status();
}

// Conv2DBackpropInput's input_sizes (-1 where unknown): a constant, or a
// Concat of a computed batch and constant other sizes (the importer's form
// for an open batch).
Expected<std::vector<int64_t>> BackpropSizes(ExportContext& c) {
  auto ints = [](const Tensor& t) {
    std::vector<int64_t> v;
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      v.push_back(t.dtype() == DType::kI32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i]);
    }
    return v;
  };
  if (const Tensor* sizes = c.ConstInput(0); sizes != nullptr && sizes->num_elements() == 4) return ints(*sizes);
  const Graph& g = c.exporter().graph();
  const Graph::Node& src = g.node(c.node().inputs[0].node);
  if (src.op_name() == "Concat" && src.inputs.size() == 2) {
    const Graph::Node& tail = g.node(src.inputs[1].node);
    if (tail.op_name() == "Const") {
      std::vector<int64_t> v = ints(FindAttr(tail, "value")->get<Tensor>());
      if (v.size() == 3) {
        v.insert(v.begin(), -1);
        return v;
      }
    }
  }
  return UnimplementedError(
      "Conv2DBackpropInput whose input sizes are computed (not a constant, nor a batch and "
      "constant sizes)");
}

// Conv2DBackpropInput (a transposed convolution, as the ONNX importer
// makes ConvTranspose): ConvTranspose of out_backprop, with the pads of
// the forward op's SAME or VALID and the output_padding that gives
// input_sizes (a constant).
Status ConvBackpropInput(ExportContext& c) {
  const bool nchw = c.Str("data_format", "NHWC") == "NCHW";
  const int h = nchw ? 2 : 1, w = nchw ? 3 : 2;
  const Shape& fs = c.InShape(1);
  const Shape& dy = c.InShape(2);
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> in_sizes, BackpropSizes(c));
  if (fs.rank() != 4 || !fs.IsFullyDefined() || dy.rank() != 4 || dy.dim(h) < 0 || dy.dim(w) < 0 ||
      in_sizes[static_cast<std::size_t>(h)] < 0 || in_sizes[static_cast<std::size_t>(w)] < 0) {
    return UnimplementedError("Conv2DBackpropInput with input sizes of unknown height or width, or a filter ",
                              fs.ToString(), " and gradient ", dy.ToString(), " of unknown size");
  }
  const std::vector<int64_t> strides = c.Ints("strides"), dilations = c.Ints("dilations");
  const bool same = c.Str("padding") == "SAME";
  std::vector<int64_t> begin, end, output_padding;
  for (int a : {h, w}) {
    const auto i = static_cast<std::size_t>(a);
    const int64_t k = fs.dim(a == h ? 0 : 1), s = strides[i], d = dilations[i];
    const int64_t full = s * (dy.dim(a) - 1) + (k - 1) * d + 1;
    const int64_t total = same ? std::max<int64_t>(0, full - in_sizes[i]) : 0;
    begin.push_back(total / 2);
    end.push_back(total - total / 2);
    output_padding.push_back(in_sizes[i] - (full - total));
  }
  WEFT_ASSIGN_OR_RETURN(std::string weights, ConvWeights(c, fs, false));
  std::string x = c.In(2);
  if (!nchw) x = c.Transpose(x, {0, 3, 1, 2}, c.name() + "/nchw_in");
  const std::string y = nchw ? c.out() : c.Fresh(c.name() + "/nchw_out");
  onnx::NodeProto* node = c.Emit("ConvTranspose", {x, weights}, {y}, c.name());
  AttrInts(node, "kernel_shape", {fs.dim(0), fs.dim(1)});
  AttrInts(node, "strides", {strides[static_cast<std::size_t>(h)], strides[static_cast<std::size_t>(w)]});
  AttrInts(node, "dilations", {dilations[static_cast<std::size_t>(h)], dilations[static_cast<std::size_t>(w)]});
  AttrInts(node, "pads", {begin[0], begin[1], end[0], end[1]});
  AttrInts(node, "output_padding", output_padding);
  if (!nchw) {
    c.Emit("Transpose", {y}, {c.out()}, c.name() + "/nhwc_out", [](onnx::NodeProto* p) {
      AttrInts(p, "perm", {0, 2, 3, 1});
    });
  }
  return Status();
}

Status FusedBatchNorm(ExportContext& c) {
  if (c.Bool("is_training", true)) {
    return UnimplementedError("FusedBatchNorm in training mode (is_training = true) has no inference form");
  }
  const bool nchw = c.Str("data_format", "NHWC") == "NCHW" || c.InShape(0).rank() == 2;
  std::string x = nchw ? c.In(0) : c.Transpose(c.In(0), {0, 3, 1, 2}, c.name() + "/nchw_in");
  const std::string y = nchw ? c.out() : c.Fresh(c.name() + "/nchw_out");
  onnx::NodeProto* p = c.Emit("BatchNormalization", {x, c.In(1), c.In(2), c.In(3), c.In(4)}, {y}, c.name());
  AttrFloat(p, "epsilon", c.Float("epsilon", 1e-3));
  // In inference, batch_mean and batch_variance are the inputs passed through.
  for (int k = 1; k <= 2; ++k) {
    if (const std::string* name = c.FindOutName(k)) {
      c.Emit("Identity", {c.In(2 + k)}, {*name}, c.name() + (k == 1 ? "/mean" : "/variance"));
    }
  }
  if (!nchw) {
    c.Emit("Transpose", {y}, {c.out()}, c.name() + "/nhwc_out", [](onnx::NodeProto* q) {
      AttrInts(q, "perm", {0, 2, 3, 1});
    });
  }
  return Status();
}

Status Softmax(ExportContext& c) {
  AttrInt(c.Simple(c.op(), 1), "axis", c.Int("axis", -1));
  return Status();
}

Status LayerNorm(ExportContext& c) {
  onnx::NodeProto* p = c.Simple("LayerNormalization", 3);
  AttrInt(p, "axis", c.Int("begin_norm_axis", -1));
  AttrFloat(p, "epsilon", c.Float("epsilon", 1e-5));
  return Status();
}

// LSTMCell from primitive ONNX ops (opset 17 has no single-step cell).
Status LstmCell(ExportContext& c) {
  const std::string base = c.name();
  const std::string xh =
      c.Emit1("Concat", {c.In(0), c.In(2)}, base + "/xh", [](onnx::NodeProto* p) { AttrInt(p, "axis", 1); });
  const std::string z = c.Emit1("Add", {c.Emit1("MatMul", {xh, c.In(3)}, base + "/matmul"), c.In(4)}, base + "/z");
  const std::vector<std::string> parts = {c.Fresh(base + "/zi"), c.Fresh(base + "/zf"), c.Fresh(base + "/zg"),
                                          c.Fresh(base + "/zo")};
  onnx::NodeProto* split = c.Emit("Split", {z}, parts, base + "/split");
  AttrInt(split, "axis", 1);
  const DType dt = c.node().output_types[0];
  const std::string i = c.Emit1("Sigmoid", {parts[0]}, base + "/i");
  std::string zf = parts[1];
  const double fb = c.Float("forget_bias", 1.0);
  if (fb != 0) zf = c.Emit1("Add", {zf, c.ScalarConst(base + "/forget_bias", dt, fb)}, base + "/zf_biased");
  const std::string f = c.Emit1("Sigmoid", {zf}, base + "/f");
  const std::string gg = c.Emit1("Tanh", {parts[2]}, base + "/g");
  const std::string o = c.Emit1("Sigmoid", {parts[3]}, base + "/o");
  const std::string c_name = c.OutName(0), h_name = c.OutName(1);
  c.Emit("Add", {c.Emit1("Mul", {f, c.In(1)}, base + "/fc"), c.Emit1("Mul", {i, gg}, base + "/ig")}, {c_name},
         base + "/c");
  c.Emit("Mul", {o, c.Emit1("Tanh", {c_name}, base + "/tanh_c")}, {h_name}, base + "/h");
  // gates, output 2, as LSTMCell has it.
  c.Emit("Concat", {i, f, gg, o}, {c.OutName(2)}, base + "/gates", [](onnx::NodeProto* p) { AttrInt(p, "axis", 1); });
  return Status();
}

}  // namespace

void AddNnExports(ExportTable& t) {
  t["MatMul"] = MatMul;
  t["BatchMatMul"] = BatchMatMul;
  t["BiasAdd"] = BiasAdd;
  for (const char* op : {"Conv2D", "DepthwiseConv2D", "MaxPool", "AvgPool", "_FusedConv2D"}) t[op] = Window;
  t["_FusedMatMul"] = FusedMatMul;
  t["QuantizeLinear"] = QuantizeOrDequantize;
  t["DequantizeLinear"] = QuantizeOrDequantize;
  t["Conv2DBackpropInput"] = ConvBackpropInput;
  t["FusedBatchNorm"] = FusedBatchNorm;
  t["Softmax"] = Softmax;
  t["LogSoftmax"] = Softmax;
  t["LayerNorm"] = LayerNorm;
  t["LSTMCell"] = LstmCell;
}

}  // namespace weft::onnx_io::exports
