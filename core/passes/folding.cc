// Level-2 folding into weights (docs/optimizer.md): in a frozen graph, an
// inference-mode FusedBatchNorm or a per-channel constant Mul after a
// convolution (or a MatMul) is folded into the product's constant weights,
// leaving the convolution and a BiasAdd that the fusion passes then take.
//
// The pass writes the new weights as arithmetic on the constants
// (scale * rsqrt(variance + epsilon), filter * s, offset - mean * s) and
// leaves the numbers to constant folding, which runs after it in the same
// round; it only rewrites where every operand is a Const, so a graph whose
// normalization reads variables (a training graph) is left alone.
#include <optional>

#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes::internal {
namespace {

const Tensor* ConstInput(const Graph& g, const Graph::Node& node, int k) {
  return ConstValue(g.node(node.inputs[static_cast<std::size_t>(k)].node));
}

// Whether |node|'s only reader is data input of |reader|, nothing else
// reads or needs it, and both may be rewritten on the same device.
bool OnlyFeeds(const Graph& g, const Graph::Node& node, const Graph::Node& reader, const PassContext& context) {
  if (context.keep.contains(node.name()) || !IsRewritable(node) || !IsRewritable(reader)) return false;
  const auto& readers = g.consumers()[static_cast<std::size_t>(node.id)];
  if (readers.size() != 1 || readers[0].first != reader.id || readers[0].second < 0) return false;
  auto device = [&](const Graph::Node& n) {
    return context.requested_device ? context.requested_device(n.def) : n.def.device;
  };
  return device(node) == device(reader);
}

class Folder {
 public:
  Folder(GraphEditor& edit, const Graph::Node& at) : edit_(edit), at_(at) {}

  // A node named after |at_| (where the folded arithmetic comes from).
  std::string Add(const std::string& suffix, const std::string& op, std::vector<std::string> inputs,
                  AttrMap attrs = {}) {
    NodeDef def;
    def.name = edit_.UniqueName(StrCat(at_.name(), "/folded/", suffix));
    def.op = op;
    def.device = at_.def.device;
    def.inputs = std::move(inputs);
    def.attrs = std::move(attrs);
    edit_.Add(def);
    return def.name;
  }
  std::string Const(const std::string& suffix, const Tensor& value) {
    NodeDef def = MakeConst(edit_.UniqueName(StrCat(at_.name(), "/folded/", suffix)), value);
    def.device = at_.def.device;
    edit_.Add(def);
    return def.name;
  }

 private:
  GraphEditor& edit_;
  const Graph::Node& at_;
};

// The product |node| reads its weights from (input 1) with out channels
// on the weights' last axis: a Conv2D's HWIO filter, a DepthwiseConv2D's
// HWCM one (channel c*M + m is [c, m]), a MatMul's [k, n] b.
bool IsFoldableProduct(const Graph& g, const Graph::Node& node) {
  const std::string& op = node.op_name();
  if (op != "Conv2D" && op != "DepthwiseConv2D" && op != "MatMul") return false;
  if (op == "MatMul" && node.def.attrs.at("transpose_b").get<bool>()) return false;
  const Tensor* weights = ConstInput(g, node, 1);
  return weights != nullptr && weights->shape().IsFullyDefined();
}

int64_t OutChannels(const Graph::Node& product, const Shape& weights) {
  if (product.op_name() == "DepthwiseConv2D") return weights.dim(2) * weights.dim(3);
  return weights.dim(weights.rank() - 1);
}

// |s| ([channels]) shaped to multiply the weights along their out
// channels: as it is, or [C, M] for a depthwise filter.
std::string ScaleForWeights(Folder& f, const Graph::Node& product, const Shape& weights, const std::string& s) {
  if (product.op_name() != "DepthwiseConv2D") return s;
  const std::string shape = f.Const("depthwise_shape", Tensor::FromVector<int64_t>({weights.dim(2), weights.dim(3)}));
  return f.Add("depthwise_scale", "Reshape", {s, shape});
}

// The product with its weights input replaced by |weights|.
NodeDef WithWeights(const Graph::Node& product, const std::string& weights) {
  NodeDef def = product.def;
  for (std::size_t i = 0, data = 0; i < def.inputs.size(); ++i) {
    if (def.inputs[i].starts_with("^")) continue;
    if (data++ == 1) def.inputs[i] = weights;
  }
  return def;
}

std::vector<std::string> ControlInputs(const NodeDef& def) {
  std::vector<std::string> out;
  for (const std::string& in : def.inputs) {
    if (in.starts_with("^")) out.push_back(in);
  }
  return out;
}

}  // namespace

Expected<int64_t> FoldIntoWeights(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                                  PassReport& report) {
  const Graph& g = edit.graph();
  int64_t changed = 0;
  std::vector<bool> used(static_cast<std::size_t>(g.num_nodes()), false);
  for (int id : g.topological_order()) {
    const Graph::Node& node = g.node(id);
    const bool batch_norm = node.op_name() == "FusedBatchNorm";
    if ((!batch_norm && node.op_name() != "Mul") || node.inputs.empty() || used[static_cast<std::size_t>(id)]) {
      continue;
    }
    if (batch_norm && node.def.attrs.at("is_training").get<bool>()) continue;
    // A Mul goes away: it must wait for nothing and not be asked for.
    if (!batch_norm && (!node.control_inputs.empty() || context.keep.contains(node.name()))) continue;
    // Which input is the product's output (a Mul's other one is the scale).
    int from = 0;
    if (!batch_norm && IsFoldableProduct(g, g.node(node.inputs[1].node))) from = 1;
    const Graph::Node& product = g.node(node.inputs[static_cast<std::size_t>(from)].node);
    if (used[static_cast<std::size_t>(product.id)] || node.inputs[static_cast<std::size_t>(from)].index != 0 ||
        !IsFoldableProduct(g, product) || !OnlyFeeds(g, product, node, context)) {
      continue;
    }
    const Shape weights = ConstInput(g, product, 1)->shape();
    const int64_t channels = OutChannels(product, weights);
    const bool nchw = product.op_name() != "MatMul" && product.def.attrs.at("data_format").get<std::string>() == "NCHW";
    Folder f(edit, node);
    std::string scale;  // [channels]: what the weights are multiplied by
    std::string bias;   // [channels]: what is added after, if anything
    if (batch_norm) {
      // Only output 0 may be read; the batch statistics must stay unread.
      bool stats_read = false;
      for (const auto& [reader, k] : g.consumers()[static_cast<std::size_t>(id)]) {
        if (k >= 0 && g.node(reader).inputs[static_cast<std::size_t>(k)].index != 0) stats_read = true;
      }
      if (stats_read || node.def.attrs.at("data_format").get<std::string>() != (nchw ? "NCHW" : "NHWC")) continue;
      bool frozen = true;
      for (int k = 1; k < 5; ++k) {
        const Tensor* v = ConstInput(g, node, k);
        frozen = frozen && v != nullptr && v->shape() == Shape{channels};
      }
      if (!frozen) continue;
      const DType dtype = node.output_types[0];
      Tensor eps = *Tensor::Allocate(dtype, Shape{});
      const double epsilon = node.def.attrs.at("epsilon").get<double>();
      if (dtype == DType::kF32) {
        eps.data<float>()[0] = static_cast<float>(epsilon);
      } else if (dtype == DType::kF64) {
        eps.data<double>()[0] = epsilon;
      } else {
        continue;
      }
      // s = scale * rsqrt(variance + epsilon); bias = offset - mean * s.
      const std::string root = f.Add(
          "rsqrt", "Rsqrt", {f.Add("variance_eps", "Add", {TensorName(g, node.inputs[4]), f.Const("epsilon", eps)})});
      scale = f.Add("scale", "Mul", {TensorName(g, node.inputs[1]), root});
      bias =
          f.Add("bias", "Sub",
                {TensorName(g, node.inputs[2]), f.Add("mean_scaled", "Mul", {TensorName(g, node.inputs[3]), scale})});
    } else {
      // x * c with c a constant per channel: [C], or ones but the channel
      // axis (an NCHW [1, C, 1, 1] is not a per-channel vector of the
      // HWIO filter's last axis: it needs the reshape below too).
      const Tensor* c = ConstInput(g, node, 1 - from);
      if (c == nullptr || c->dtype() != node.output_types[0] || node.output_shapes[0] != product.output_shapes[0]) {
        continue;
      }
      const Shape& cs = c->shape();
      int64_t elements = 1;
      for (int i = 0; i < cs.rank(); ++i) elements *= cs.dim(i);
      const int channel_axis = nchw ? 1 : product.output_shapes[0].rank() - 1;
      const int aligned = cs.rank() - (product.output_shapes[0].rank() - channel_axis);  // c's axis under channels
      if (elements != channels || channels <= 1 || aligned < 0 || cs.dim(aligned) != channels) continue;
      scale = TensorName(g, node.inputs[static_cast<std::size_t>(1 - from)]);
      if (cs.rank() != 1) {
        scale = f.Add("scale", "Reshape", {scale, f.Const("scale_shape", Tensor::FromVector<int64_t>({channels}))});
      }
    }
    const std::string weights_name =
        f.Add("weights", "Mul", {TensorName(g, product.inputs[1]), ScaleForWeights(f, product, weights, scale)});
    // A batch norm: the product keeps its name with the new weights and the
    // batch norm's name goes to the BiasAdd of the new bias. A Mul: the
    // product with the new weights takes the Mul's name.
    if (!bias.empty()) {
      edit.Replace(product.id, WithWeights(product, weights_name));
      NodeDef add;
      add.name = node.name();
      add.op = "BiasAdd";
      add.device = node.def.device;
      add.inputs = {product.name(), bias};
      for (std::string& c : ControlInputs(node.def)) add.inputs.push_back(std::move(c));
      add.attrs["data_format"] = AttrValue(std::string(nchw ? "NCHW" : "NHWC"));
      edit.Replace(node.id, std::move(add));
    } else {
      NodeDef scaled = WithWeights(product, weights_name);
      scaled.name = node.name();
      edit.Remove(product.id);
      edit.Replace(node.id, std::move(scaled));
    }
    used[static_cast<std::size_t>(id)] = used[static_cast<std::size_t>(product.id)] = true;
    NoteExample(report, node.name());
    ++changed;
  }
  return changed;
}

}  // namespace weft::passes::internal
