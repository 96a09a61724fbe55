// The level-2 quantized fusion (docs/quantization.md): a convolution or a
// matrix product between dequantize and quantize nodes, as `weft quantize`
// and ONNX's QDQ models write it, becomes one _QConv2D or _QMatMul that
// computes in int8 with 32-bit sums:
//
//   DequantizeLinear(x_q) --+
//                           +--> Conv2D / _FusedConv2D --> QuantizeLinear --> y_q
//   DequantizeLinear(w_q) --+       (bias, residual, activation)
//
// becomes _QConv2D(x_q, w_q, bias, residual_q) --> y_q. The weights must be
// a constant int8 tensor with zero points 0 (symmetric), per tensor or per
// output channel; the input, output and residual quantized per tensor with
// constant scales and zero points. Without a QuantizeLinear after it (or
// when the product is fetched) the fused op returns f32. The activation
// must be one the quantized ops apply (Relu, Relu6, Clip). What does not
// match stays as it is and runs in f32, with the same values.
#include <cmath>
#include <optional>

#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes::internal {
namespace {

// The scale(s) and zero point(s) of a QuantizeLinear or DequantizeLinear
// whose inputs 1 and 2 are constants.
struct QuantParams {
  DType type = DType::kInvalid;  // the quantized dtype
  std::vector<double> scales;
  std::vector<int64_t> zero_points;
  int64_t axis = -1;
};

std::optional<QuantParams> ReadQuantParams(const Graph& g, const Graph::Node& node) {
  if (node.inputs.size() != 3) return std::nullopt;
  const Tensor* scale = ConstValue(g.node(node.inputs[1].node));
  const Tensor* zero_point = ConstValue(g.node(node.inputs[2].node));
  if (scale == nullptr || zero_point == nullptr || scale->dtype() != DType::kF32 || !scale->host_visible() ||
      !zero_point->host_visible() || scale->num_elements() != zero_point->num_elements() || scale->num_elements() < 1) {
    return std::nullopt;
  }
  QuantParams p;
  p.type = node.def.attrs.at("T").get<DType>();
  p.axis = node.def.attrs.at("axis").get<int64_t>();
  for (int64_t i = 0; i < scale->num_elements(); ++i) {
    const double s = scale->data<float>()[i];
    if (!(s > 0) || !std::isfinite(s)) return std::nullopt;
    p.scales.push_back(s);
    switch (zero_point->dtype()) {
      case DType::kI8: p.zero_points.push_back(zero_point->data<int8_t>()[i]); break;
      case DType::kU8: p.zero_points.push_back(zero_point->data<uint8_t>()[i]); break;
      default: return std::nullopt;
    }
  }
  return p;
}

bool IsInt8(DType t) { return t == DType::kI8 || t == DType::kU8; }

// The per-tensor quantization of a DequantizeLinear producing |e|.
const Graph::Node* PerTensorDequantize(const Graph& g, const Endpoint& e, QuantParams& params) {
  const Graph::Node& dq = g.node(e.node);
  if (dq.op_name() != "DequantizeLinear" || !IsRewritable(dq)) return nullptr;
  auto p = ReadQuantParams(g, dq);
  if (!p || !IsInt8(p->type) || p->scales.size() != 1) return nullptr;
  params = *p;
  return &dq;
}

// The weights of a DequantizeLinear producing |e|: a constant int8 tensor,
// zero points 0, with one scale or one per output channel along
// |channel_axis| of a rank-|rank| tensor. Returns the per-channel scales
// (|channels| of them, or one).
std::optional<std::vector<double>> WeightScales(const Graph& g, const Endpoint& e, int channel_axis, int64_t channels,
                                                int64_t repeat, const Graph::Node** dq_out) {
  const Graph::Node& dq = g.node(e.node);
  if (dq.op_name() != "DequantizeLinear" || !IsRewritable(dq)) return std::nullopt;
  const Tensor* w = ConstValue(g.node(dq.inputs[0].node));
  if (w == nullptr || w->dtype() != DType::kI8) return std::nullopt;
  auto p = ReadQuantParams(g, dq);
  if (!p) return std::nullopt;
  for (int64_t zp : p->zero_points) {
    if (zp != 0) return std::nullopt;
  }
  *dq_out = &dq;
  if (p->scales.size() == 1) return p->scales;
  const int rank = w->shape().rank();
  const int64_t axis = p->axis < 0 ? p->axis + rank : p->axis;
  if (axis != channel_axis || static_cast<int64_t>(p->scales.size()) * repeat != channels) return std::nullopt;
  std::vector<double> scales;
  for (double s : p->scales) scales.insert(scales.end(), static_cast<std::size_t>(repeat), s);
  return scales;
}

// The quantize-fusion of one product: its anchor (the f32 op), what it
// reads and what it becomes.
class QuantizeFuser {
 public:
  QuantizeFuser(GraphEditor& edit, const PassContext& context)
      : edit_(edit), g_(edit.graph()), context_(context), claimed_(static_cast<std::size_t>(g_.num_nodes()), false) {}

  // Tries |anchor|; true when it was fused.
  bool Try(const Graph::Node& anchor, PassReport& report) {
    const std::string& op = anchor.op_name();
    const bool fused = op == "_FusedConv2D" || op == "_FusedMatMul";
    const bool conv = op == "Conv2D" || op == "DepthwiseConv2D" || op == "_FusedConv2D";
    const bool matmul = op == "MatMul" || op == "_FusedMatMul";
    // The fused ops are internal ('_'), which IsRewritable refuses: they
    // are the optimizer's own.
    const bool rewritable = fused ? !anchor.op->stateful : IsRewritable(anchor);
    if ((!conv && !matmul) || claimed(anchor.id) || !rewritable || anchor.output_types[0] != DType::kF32) {
      return false;
    }
    const AttrMap& attrs = anchor.def.attrs;
    if (matmul && attrs.at("transpose_a").get<bool>()) return false;
    std::string activation = fused ? attrs.at("activation").get<std::string>() : "None";
    if (activation != "None" && activation != "Relu" && activation != "Relu6" && activation != "Clip") {
      NoteLeft(report, StrCat(anchor.Describe(), " stays f32: quantized ops do not apply ", activation));
      return false;
    }
    QuantParams in;
    const Graph::Node* in_dq = PerTensorDequantize(g_, anchor.inputs[0], in);
    if (in_dq == nullptr) return false;
    // The weights, per output channel: a convolution's HWIO filter along
    // O, a depthwise HWCM filter along C (each scale for M outputs), b
    // along n ([k, n]) or its transpose along axis 0.
    const Shape& w_shape =
        g_.node(anchor.inputs[1].node).output_shapes[static_cast<std::size_t>(anchor.inputs[1].index)];
    if (!w_shape.IsFullyDefined() || w_shape.rank() != (conv ? 4 : 2)) return false;
    const bool depthwise = op == "DepthwiseConv2D" || (op == "_FusedConv2D" && attrs.at("depthwise").get<bool>());
    const bool tb = matmul && attrs.at("transpose_b").get<bool>();
    int axis = 0;
    int64_t channels = 0, repeat = 1;
    if (conv) {
      axis = depthwise ? 2 : 3;
      channels = depthwise ? w_shape.dim(2) * w_shape.dim(3) : w_shape.dim(3);
      repeat = depthwise ? w_shape.dim(3) : 1;
    } else {
      axis = tb ? 0 : 1;
      channels = w_shape.dim(tb ? 0 : 1);
    }
    const Graph::Node* w_dq = nullptr;
    auto scales = WeightScales(g_, anchor.inputs[1], axis, channels, repeat, &w_dq);
    if (!scales) return false;

    // The bias and residual of a fused op (args, after input and filter).
    std::string bias, residual;
    QuantParams res;
    if (fused) {
      std::size_t next = 2;
      if (attrs.at("bias").get<bool>()) bias = TensorName(g_, anchor.inputs[next++]);
      if (attrs.at("residual").get<bool>()) {
        const Graph::Node* r_dq = PerTensorDequantize(g_, anchor.inputs[next], res);
        if (r_dq == nullptr) {
          NoteLeft(report, StrCat(anchor.Describe(), " stays f32: its residual is not dequantized int8"));
          return false;
        }
        residual = TensorName(g_, r_dq->inputs[0]);
      }
    }

    // The output: quantized by the one QuantizeLinear reading it, or f32.
    const Graph::Node* out_q = nullptr;
    QuantParams out;
    const auto& readers = g_.consumers()[static_cast<std::size_t>(anchor.id)];
    if (!context_.keep.contains(anchor.name()) && readers.size() == 1 && readers[0].second == 0) {
      const Graph::Node& q = g_.node(readers[0].first);
      if (q.op_name() == "QuantizeLinear" && IsRewritable(q) && q.control_inputs.empty() && !claimed(q.id)) {
        auto p = ReadQuantParams(g_, q);
        if (p && p->scales.size() == 1) {
          out_q = &q;
          out = *p;
        }
      }
    }

    NodeDef def;
    def.name = out_q != nullptr ? out_q->name() : anchor.name();
    def.op = conv ? "_QConv2D" : "_QMatMul";
    def.device = anchor.def.device;
    def.inputs = {TensorName(g_, in_dq->inputs[0]), TensorName(g_, w_dq->inputs[0])};
    if (!bias.empty()) def.inputs.push_back(bias);
    if (!residual.empty()) def.inputs.push_back(residual);
    for (int c : anchor.control_inputs) def.inputs.push_back("^" + g_.node(c).name());
    if (conv) {
      for (const char* attr : {"strides", "dilations", "data_format", "padding"}) def.attrs[attr] = attrs.at(attr);
      auto pads = attrs.find("explicit_paddings");
      def.attrs["explicit_paddings"] = pads != attrs.end() ? pads->second : AttrValue(std::vector<int64_t>{});
      def.attrs["depthwise"] = AttrValue(depthwise);
      def.attrs["filter_scales"] = AttrValue(*scales);
    } else {
      def.attrs["transpose_b"] = AttrValue(tb);
      def.attrs["b_scales"] = AttrValue(*scales);
    }
    def.attrs["Tin"] = AttrValue(in.type);
    def.attrs["Tout"] = AttrValue(out_q != nullptr ? out.type : DType::kF32);
    def.attrs["Tres"] = AttrValue(residual.empty() ? DType::kF32 : res.type);
    def.attrs["Nb"] = AttrValue(static_cast<int64_t>(!bias.empty()));
    def.attrs["Nr"] = AttrValue(static_cast<int64_t>(!residual.empty()));
    def.attrs["input_scale"] = AttrValue(in.scales[0]);
    def.attrs["input_zero_point"] = AttrValue(in.zero_points[0]);
    def.attrs["output_scale"] = AttrValue(out_q != nullptr ? out.scales[0] : 1.0);
    def.attrs["output_zero_point"] = AttrValue(out_q != nullptr ? out.zero_points[0] : int64_t{0});
    def.attrs["residual_scale"] = AttrValue(residual.empty() ? 1.0 : res.scales[0]);
    def.attrs["residual_zero_point"] = AttrValue(residual.empty() ? int64_t{0} : res.zero_points[0]);
    def.attrs["activation"] = AttrValue(activation);
    def.attrs["alpha"] = fused ? attrs.at("alpha") : AttrValue(0.0);
    def.attrs["beta"] = fused ? attrs.at("beta") : AttrValue(0.0);
    std::vector<std::string> names;
    auto fused_nodes = attrs.find("_fused_nodes");
    if (fused_nodes != attrs.end()) {
      names = fused_nodes->second.get<std::vector<std::string>>();
    } else {
      names.push_back(anchor.name());
    }
    if (out_q != nullptr) names.push_back(out_q->name());
    def.attrs["_fused_nodes"] = AttrValue(names);
    if (!context_.has_fused_kernel(anchor.def, def)) return false;

    claimed_[static_cast<std::size_t>(anchor.id)] = true;
    if (out_q != nullptr) {
      claimed_[static_cast<std::size_t>(out_q->id)] = true;
      edit_.Remove(anchor.id);
      edit_.Replace(out_q->id, std::move(def));
    } else {
      edit_.Replace(anchor.id, std::move(def));
    }
    NoteExample(report, anchor.name());
    return true;
  }

 private:
  bool claimed(int id) const { return claimed_[static_cast<std::size_t>(id)]; }

  GraphEditor& edit_;
  const Graph& g_;
  const PassContext& context_;
  std::vector<bool> claimed_;
};

}  // namespace

Expected<int64_t> FuseQuantized(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                                PassReport& report) {
  if (!context.has_fused_kernel) return 0;
  QuantizeFuser fuser(edit, context);
  int64_t changed = 0;
  for (int id : edit.graph().topological_order()) {
    if (fuser.Try(edit.graph().node(id), report)) ++changed;
  }
  return changed;
}

}  // namespace weft::passes::internal
