// Post-training quantization: the plan, the calibration ranges and the
// rewrite into QDQ form (docs/quantization.md).
#include "core/passes/quantize.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes {
namespace {

using internal::ConstValue;
using internal::MakeConst;
using internal::TensorName;

constexpr int kBins = 2048;

// How a product reads its weights: input 1, per output channel along
// |axis|, each of |channels| scales covering |repeat| outputs (a depthwise
// filter's multiplier).
struct Weights {
  int axis = 0;
};

// Whether |node| is a product weft quantize makes int8, and why not.
std::string NotQuantizable(const Graph& g, const Graph::Node& node, Weights* weights) {
  const std::string& op = node.op_name();
  const bool conv = op == "Conv2D" || op == "DepthwiseConv2D" || op == "_FusedConv2D";
  const bool matmul = op == "MatMul" || op == "_FusedMatMul";
  if (!conv && !matmul) return "-";
  if (node.output_types[0] != DType::kF32) return "it is not f32";
  const AttrMap& attrs = node.def.attrs;
  if (matmul && attrs.at("transpose_a").get<bool>()) return "a is transposed";
  auto act = attrs.find("activation");
  if (act != attrs.end()) {
    const std::string& a = act->second.get<std::string>();
    if (a != "None" && a != "Relu" && a != "Relu6" && a != "Clip") return StrCat("its activation ", a, " stays f32");
  }
  const Tensor* w = ConstValue(g.node(node.inputs[1].node));
  if (w == nullptr || node.inputs[1].index != 0 || w->dtype() != DType::kF32 || !w->host_visible()) {
    return "its weights are not a constant (run weft optimize or freeze the model first)";
  }
  const bool depthwise = op == "DepthwiseConv2D" || (op == "_FusedConv2D" && attrs.at("depthwise").get<bool>());
  if (conv) {
    weights->axis = depthwise ? 2 : 3;
  } else {
    weights->axis = attrs.at("transpose_b").get<bool>() ? 0 : 1;
  }
  return "";
}

// The tensors of |node| the plan calibrates as inputs: its input 0 and,
// for a fused op with a residual, the residual.
std::vector<Endpoint> QuantizedInputs(const Graph::Node& node) {
  std::vector<Endpoint> in = {node.inputs[0]};
  auto residual = node.def.attrs.find("residual");
  if (residual != node.def.attrs.end() && residual->second.get<bool>()) {
    in.push_back(node.inputs[node.def.attrs.at("bias").get<bool>() ? 3 : 2]);
  }
  return in;
}

// The quantized type, scale and zero point of a tensor of range [lo, hi]:
// u8 from zero for a tensor never negative (after a Relu), else i8 with a
// zero point, the range widened to hold 0 exactly.
struct Activation {
  DType type;
  float scale;
  int64_t zero_point;
};

Activation ChooseActivation(double lo, double hi) {
  lo = std::min(lo, 0.0);
  hi = std::max(hi, 0.0);
  if (lo >= 0) {
    const double scale = hi > 0 ? hi / 255.0 : 1.0;
    return {DType::kU8, static_cast<float>(scale), 0};
  }
  const double scale = hi > lo ? (hi - lo) / 255.0 : 1.0;
  const auto zp = static_cast<int64_t>(std::clamp(std::nearbyint(-128.0 - lo / scale), -128.0, 127.0));
  return {DType::kI8, static_cast<float>(scale), zp};
}

std::string SafeName(const std::string& tensor) {
  std::string s = tensor;
  std::replace(s.begin(), s.end(), ':', '_');
  return s;
}

// |w| quantized per channel along |axis| to [-qmax, qmax], symmetric: the
// int8 values and one scale per channel.
std::pair<Tensor, Tensor> QuantizeWeights(const Tensor& w, int axis, int bits) {
  const Shape& shape = w.shape();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= shape.dim(i);
  for (int i = axis + 1; i < shape.rank(); ++i) inner *= shape.dim(i);
  const int64_t n = shape.dim(axis);
  const float* in = w.data<float>();
  std::vector<double> widest(static_cast<std::size_t>(n), 0.0);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t i = 0; i < inner; ++i) {
        const double v = std::fabs(static_cast<double>(in[(o * n + c) * inner + i]));
        if (std::isfinite(v)) widest[static_cast<std::size_t>(c)] = std::max(widest[static_cast<std::size_t>(c)], v);
      }
    }
  }
  const double qmax = static_cast<double>((1 << (bits - 1)) - 1);
  std::vector<float> scales;
  for (double m : widest) scales.push_back(m > 0 ? static_cast<float>(m / qmax) : 1.0f);
  Tensor q = *Tensor::Allocate(DType::kI8, shape);
  int8_t* out = q.data<int8_t>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < n; ++c) {
      const double s = scales[static_cast<std::size_t>(c)];
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * n + c) * inner + i;
        const double v = std::nearbyint(static_cast<double>(in[k]) / s);
        out[k] = static_cast<int8_t>(std::isnan(v) ? 0.0 : std::clamp(v, -qmax, qmax));
      }
    }
  }
  return {std::move(q), Tensor::FromVector(scales, Shape{n})};
}

}  // namespace

QuantizePlan PlanQuantization(const Graph& graph, const QuantizeOptions& options) {
  QuantizePlan plan;
  std::unordered_set<int> products;
  for (int id : graph.topological_order()) {
    const Graph::Node& node = graph.node(id);
    Weights w;
    const std::string why = NotQuantizable(graph, node, &w);
    if (why == "-") continue;
    if (options.exclude.contains(node.name())) {
      plan.skipped.push_back(StrCat(node.Describe(), " stays f32: --exclude"));
      continue;
    }
    if (!why.empty()) {
      plan.skipped.push_back(StrCat(node.Describe(), " stays f32: ", why));
      continue;
    }
    products.insert(id);
    plan.products.push_back(node.name());
  }
  std::set<std::string> seen;
  auto add = [&](const Endpoint& e) {
    const std::string name = TensorName(graph, e);
    if (seen.insert(name).second) plan.tensors.push_back(name);
  };
  for (int id : graph.topological_order()) {
    if (!products.contains(id)) continue;
    for (const Endpoint& e : QuantizedInputs(graph.node(id))) add(e);
    // The output, where another product reads it as an input or residual.
    for (const auto& [reader, k] : graph.consumers()[static_cast<std::size_t>(id)]) {
      if (k < 0 || !products.contains(reader)) continue;
      for (const Endpoint& e : QuantizedInputs(graph.node(reader))) {
        if (e.node == id) add(e);
      }
    }
  }
  return plan;
}

Status RangeObserver::Observe(const std::string& tensor, const Tensor& value, int pass) {
  if (value.dtype() != DType::kF32 || !value.host_visible()) {
    return InvalidArgumentError("calibration: ", Quote(tensor), " is ", DTypeName(value.dtype()),
                                "; only f32 tensors are quantized");
  }
  Stats& s = stats_[tensor];
  const float* v = value.data<float>();
  const int64_t n = value.num_elements();
  if (pass == 0) {
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(v[i])) continue;
      if (!s.any) {
        s.min = s.max = v[i];
        s.any = true;
      }
      s.min = std::min(s.min, static_cast<double>(v[i]));
      s.max = std::max(s.max, static_cast<double>(v[i]));
    }
    return Status();
  }
  if (!s.any) return Status();
  if (s.histogram.empty()) s.histogram.assign(kBins, 0);
  const double width = (s.max - s.min) / kBins;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) continue;
    const double at = width > 0 ? (v[i] - s.min) / width : 0;
    s.histogram[static_cast<std::size_t>(std::clamp<double>(at, 0, kBins - 1))]++;
    ++s.count;
  }
  return Status();
}

Expected<std::pair<double, double>> RangeObserver::Range(const std::string& tensor) const {
  auto it = stats_.find(tensor);
  if (it == stats_.end() || !it->second.any) {
    return InvalidArgumentError("calibration saw no finite value of ", Quote(tensor),
                                ": give calibration data that reaches it");
  }
  const Stats& s = it->second;
  if (method_ == Method::kMinMax || s.count == 0) return std::make_pair(s.min, s.max);
  // The bins holding the (100 - p)th and pth percentiles, at their outer
  // edges.
  const double width = (s.max - s.min) / kBins;
  const auto tail = static_cast<int64_t>(std::floor(static_cast<double>(s.count) * (100.0 - percentile_) / 100.0));
  int64_t below = 0;
  int lo_bin = 0;
  while (lo_bin < kBins - 1 && below + s.histogram[static_cast<std::size_t>(lo_bin)] <= tail) {
    below += s.histogram[static_cast<std::size_t>(lo_bin++)];
  }
  int64_t above = 0;
  int hi_bin = kBins - 1;
  while (hi_bin > lo_bin && above + s.histogram[static_cast<std::size_t>(hi_bin)] <= tail) {
    above += s.histogram[static_cast<std::size_t>(hi_bin--)];
  }
  return std::make_pair(s.min + lo_bin * width, s.min + (hi_bin + 1) * width);
}

Expected<GraphDef> QuantizeGraph(const Graph& graph, const QuantizePlan& plan, const RangeObserver& ranges,
                                 const QuantizeOptions& options, QuantizeReport* report) {
  if (options.weight_bits != 7 && options.weight_bits != 8) {
    return InvalidArgumentError("weight bits must be 7 or 8, got ", options.weight_bits);
  }
  GraphDef def = graph.ToGraphDef();
  std::unordered_set<std::string> names;
  for (const NodeDef& n : def.nodes) names.insert(n.name);
  auto unique = [&](const std::string& base) {
    std::string name = base;
    for (int i = 1; names.contains(name); ++i) name = StrCat(base, "_", i);
    names.insert(name);
    return name;
  };
  QuantizeReport local;
  QuantizeReport& r = report != nullptr ? *report : local;
  std::vector<NodeDef> added;

  // Activations: x -> QuantizeLinear -> DequantizeLinear, read by every
  // reader of x.
  std::unordered_map<std::string, std::string> dequantized;  // tensor -> its DequantizeLinear
  for (const std::string& tensor : plan.tensors) {
    WEFT_ASSIGN_OR_RETURN(auto range, ranges.Range(tensor));
    const Activation a = ChooseActivation(range.first, range.second);
    const std::string base = SafeName(tensor);
    const std::string scale = unique(base + "/scale"), zp = unique(base + "/zero_point");
    const std::string q = unique(base + "/quantize"), dq = unique(base + "/dequantize");
    added.push_back(MakeConst(scale, Tensor::Scalar<float>(a.scale)));
    added.push_back(MakeConst(zp, a.type == DType::kU8 ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(a.zero_point))
                                                       : Tensor::Scalar<int8_t>(static_cast<int8_t>(a.zero_point))));
    NodeDef qn{q, "QuantizeLinear", {tensor, scale, zp}, "", {}};
    qn.attrs["T"] = AttrValue(a.type);
    qn.attrs["axis"] = AttrValue(int64_t{-1});
    NodeDef dqn{dq, "DequantizeLinear", {q, scale, zp}, "", {}};
    dqn.attrs["T"] = AttrValue(a.type);
    dqn.attrs["axis"] = AttrValue(int64_t{-1});
    added.push_back(std::move(qn));
    added.push_back(std::move(dqn));
    dequantized[tensor] = dq;
    r.lines.push_back(StrCat(tensor, ": [", range.first, ", ", range.second, "] -> ", DTypeName(a.type), " scale ",
                             a.scale, " zero point ", a.zero_point));
    ++r.tensors;
  }
  // Every original input naming a quantized tensor reads its dequantized
  // copy instead.
  for (std::size_t i = 0; i < def.nodes.size(); ++i) {
    const Graph::Node& node = graph.node(static_cast<int>(i));
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      auto it = dequantized.find(TensorName(graph, node.inputs[k]));
      if (it != dequantized.end()) def.nodes[i].inputs[k] = it->second;
    }
  }

  // Weights: the f32 Const becomes a DequantizeLinear of int8 values under
  // its name, so that its readers read it as before.
  std::unordered_set<int> done;
  std::unordered_map<std::string, int> index;
  for (std::size_t i = 0; i < def.nodes.size(); ++i) index[def.nodes[i].name] = static_cast<int>(i);
  for (const std::string& name : plan.products) {
    const Graph::Node& node = graph.node(index.at(name));
    Weights w;
    if (!NotQuantizable(graph, node, &w).empty()) continue;
    const int c = node.inputs[1].node;
    if (!done.insert(c).second) continue;
    const Tensor& value = *ConstValue(graph.node(c));
    auto [q, scales] = QuantizeWeights(value, w.axis, options.weight_bits);
    const std::string cname = graph.node(c).name();
    const std::string qname = unique(cname + "/quantized"), sname = unique(cname + "/scales"),
                      zname = unique(cname + "/zero_points");
    r.weights_f32_bytes += static_cast<int64_t>(value.num_elements()) * 4;
    r.weights_int8_bytes += static_cast<int64_t>(q.num_elements()) + 5 * scales.num_elements();
    Tensor zeros = *Tensor::Allocate(DType::kI8, scales.shape());
    std::fill_n(zeros.data<int8_t>(), zeros.num_elements(), int8_t{0});
    added.push_back(MakeConst(zname, zeros));
    added.push_back(MakeConst(qname, q));
    added.push_back(MakeConst(sname, scales));
    NodeDef& dq = def.nodes[static_cast<std::size_t>(c)];
    const std::string device = dq.device;
    dq = NodeDef{cname, "DequantizeLinear", {qname, sname, zname}, device, {}};
    dq.attrs["T"] = AttrValue(DType::kI8);
    dq.attrs["axis"] = AttrValue(static_cast<int64_t>(w.axis));
    ++r.products;
  }
  for (NodeDef& n : added) def.nodes.push_back(std::move(n));
  return def;
}

}  // namespace weft::passes
