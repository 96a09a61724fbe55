// Level-2 fusions (docs/optimizer.md): a convolution or a matrix product,
// with what follows it (a bias, a residual Add, an activation) and, for a
// convolution, a zero Pad before it, becomes one _FusedConv2D or
// _FusedMatMul node, where every device the node could run on has a kernel
// for the fused op (PassContext::has_fused_kernel).
//
// A chain grows only through values nothing else reads: a node whose output
// is read twice, fetched, or asked for by name (keep) ends the chain, so
// the fused node computes exactly what the last node it replaces did, under
// that node's name. Gradients built before the pass read the values they
// need from nodes that therefore stay. Shapes are checked before fusing so
// that the fused node cannot fail where the nodes it replaces would have
// run: the bias must have the output's channel count, a residual the
// output's shape (where a dim is left open in both, a residual of 1 there
// is broadcast; only a product of 1 against a wider residual, which Add
// would have widened, is an error that names the way around it).
#include <optional>

#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes::internal {
namespace {

const Shape& InputShapeOf(const Graph& g, const Graph::Node& node, int k) {
  const Endpoint& e = node.inputs[static_cast<std::size_t>(k)];
  return g.node(e.node).output_shapes[static_cast<std::size_t>(e.index)];
}

bool IsF32(const Graph::Node& node) {
  auto it = node.def.attrs.find("T");
  return it != node.def.attrs.end() && it->second.holds<DType>() && it->second.get<DType>() == DType::kF32;
}

// A scalar f32 Const's value.
std::optional<float> ScalarConst(const Graph& g, const Endpoint& e) {
  const Tensor* value = ConstValue(g.node(e.node));
  if (value == nullptr || value->dtype() != DType::kF32 || value->num_elements() != 1 || !value->host_visible()) {
    return std::nullopt;
  }
  return value->data<float>()[0];
}

// Whether |a| and |b| have the same known rank and the same dims, a dim
// unknown in one being unknown in the other (a batch left open). Such a
// residual can differ from the output only where both are unknown; the
// fused kernel then broadcasts it as Add would, or says why it cannot.
bool SameUpToUnknowns(const Shape& a, const Shape& b) {
  if (a.unknown_rank() || b.unknown_rank() || a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    if (a.dim(i) != b.dim(i)) return false;
  }
  return true;
}

struct Chain {
  std::vector<int> members;   // the nodes replaced, the anchor first
  std::optional<int> pad;     // a Pad before a convolution, folded in
  std::vector<int64_t> pads;  // its spatial pads: top, bottom, left, right
  std::string bias;           // the tensor added as the bias
  std::string residual;       // the tensor added as the residual
  std::string activation = "None";
  float alpha = 0, beta = 0;
  int last = -1;  // the node whose name and readers the fused node takes
};

class Fuser {
 public:
  Fuser(GraphEditor& edit, const PassContext& context)
      : edit_(edit), g_(edit.graph()), context_(context), claimed_(static_cast<std::size_t>(g_.num_nodes()), false) {}

  // Whether |node| may join a chain led by |anchor|: a plain f32 op that
  // waits for nothing else, on the device the anchor is asked for.
  bool Joinable(const Graph::Node& node, const Graph::Node& anchor) const {
    if (claimed_[static_cast<std::size_t>(node.id)] || !IsRewritable(node) || !node.control_inputs.empty()) {
      return false;
    }
    if (node.output_types.size() != 1 || node.output_types[0] != DType::kF32) return false;
    return Device(node) == Device(anchor);
  }

  // The one node reading |node|'s only output, when nothing else reads or
  // needs it, and it may join the chain.
  const Graph::Node* SoleReader(const Graph::Node& node, const Graph::Node& anchor) const {
    if (context_.keep.contains(node.name())) return nullptr;
    const auto& readers = g_.consumers()[static_cast<std::size_t>(node.id)];
    if (readers.size() != 1 || readers[0].second < 0) return nullptr;
    const Graph::Node& reader = g_.node(readers[0].first);
    return Joinable(reader, anchor) ? &reader : nullptr;
  }

  // Grows |chain| from its last node by a bias, a residual and an
  // activation, each optional, in that order. |channels| is the product's
  // channel count (its last axis, or axis 1 for NCHW data).
  void GrowEpilogue(const Graph::Node& anchor, int64_t channels, bool nchw, Chain& chain) const {
    const Graph::Node* cur = &anchor;
    auto take = [&](const Graph::Node* next) {
      chain.members.push_back(next->id);
      cur = next;
    };
    auto other_input = [&](const Graph::Node& add) -> std::optional<int> {
      if (add.inputs.size() != 2) return std::nullopt;
      const bool first = add.inputs[0].node == cur->id, second = add.inputs[1].node == cur->id;
      if (first == second) return std::nullopt;  // x + x, or not reading cur
      return first ? 1 : 0;
    };
    const Shape& out = anchor.output_shapes[0];
    if (const Graph::Node* next = SoleReader(*cur, anchor)) {
      const std::string& op = next->op_name();
      if (op == "BiasAdd" && next->inputs[0].node == cur->id &&
          (next->def.attrs.at("data_format").get<std::string>() == "NCHW") == nchw) {
        const Shape& b = InputShapeOf(g_, *next, 1);
        if (b.rank() == 1 && b.dim(0) == channels && channels >= 0) {
          chain.bias = TensorName(g_, next->inputs[1]);
          take(next);
        }
      } else if (op == "Add" && !nchw) {
        // x + b with b of shape [channels]: broadcasting adds b along the
        // last axis, as BiasAdd does.
        if (auto k = other_input(*next)) {
          const Shape& b = InputShapeOf(g_, *next, *k);
          if (b.rank() == 1 && b.dim(0) == channels && channels >= 0 && !out.unknown_rank() && out.rank() >= 1 &&
              out.dim(out.rank() - 1) == channels) {
            chain.bias = TensorName(g_, next->inputs[static_cast<std::size_t>(*k)]);
            take(next);
          }
        }
      }
    }
    if (const Graph::Node* next = SoleReader(*cur, anchor); next != nullptr && next->op_name() == "Add") {
      if (auto k = other_input(*next)) {
        const Shape& r = InputShapeOf(g_, *next, *k);
        if (SameUpToUnknowns(r, out) && SameUpToUnknowns(next->output_shapes[0], out)) {
          chain.residual = TensorName(g_, next->inputs[static_cast<std::size_t>(*k)]);
          take(next);
        }
      }
    }
    if (const Graph::Node* next = SoleReader(*cur, anchor)) {
      const std::string& op = next->op_name();
      std::string activation;
      if (op == "Relu" || op == "Relu6" || op == "Elu" || op == "Sigmoid" || op == "Tanh") activation = op;
      if (op == "Gelu") activation = next->def.attrs.at("approximate").get<bool>() ? "GeluTanh" : "Gelu";
      if (op == "ClipByValue" && next->inputs[0].node == cur->id) {
        const auto low = ScalarConst(g_, next->inputs[1]), high = ScalarConst(g_, next->inputs[2]);
        if (low && high && *low <= *high && next->output_shapes[0] == cur->output_shapes[0]) {
          activation = "Clip";
          chain.alpha = *low;
          chain.beta = *high;
        }
      }
      if (!activation.empty()) {
        chain.activation = activation;
        take(next);
      }
    } else if (auto swish = SwishAfter(*cur, anchor)) {
      chain.activation = "Swish";
      chain.members.push_back(swish->first);
      take(&g_.node(swish->second));
    }
    chain.last = cur->id;
  }

  // x * Sigmoid(x) after |x|: (the Sigmoid's id, the Mul's id), when those
  // two are all that read x and the Sigmoid is read by the Mul only.
  std::optional<std::pair<int, int>> SwishAfter(const Graph::Node& x, const Graph::Node& anchor) const {
    if (context_.keep.contains(x.name())) return std::nullopt;
    const auto& readers = g_.consumers()[static_cast<std::size_t>(x.id)];
    if (readers.size() != 2 || readers[0].second < 0 || readers[1].second < 0) return std::nullopt;
    for (int s = 0; s < 2; ++s) {
      const Graph::Node& sigmoid = g_.node(readers[static_cast<std::size_t>(s)].first);
      const Graph::Node& mul = g_.node(readers[static_cast<std::size_t>(1 - s)].first);
      if (sigmoid.op_name() != "Sigmoid" || mul.op_name() != "Mul" || !Joinable(sigmoid, anchor) ||
          !Joinable(mul, anchor)) {
        continue;
      }
      if (SoleReader(sigmoid, anchor) != &mul) continue;
      const bool reads = (mul.inputs[0].node == x.id && mul.inputs[1].node == sigmoid.id) ||
                         (mul.inputs[1].node == x.id && mul.inputs[0].node == sigmoid.id);
      if (reads && mul.output_shapes[0] == x.output_shapes[0]) return std::make_pair(sigmoid.id, mul.id);
    }
    return std::nullopt;
  }

  // The fused node for |chain|: the anchor's inputs and attrs, then the
  // bias and residual, named after the chain's last node.
  NodeDef MakeFused(const Graph::Node& anchor, const std::string& op, const Chain& chain,
                    const std::vector<std::string>& operands) const {
    const Graph::Node& last = g_.node(chain.last);
    NodeDef def;
    def.name = last.name();
    def.op = op;
    def.device = anchor.def.device;
    def.inputs = operands;
    if (!chain.bias.empty()) def.inputs.push_back(chain.bias);
    if (!chain.residual.empty()) def.inputs.push_back(chain.residual);
    for (int c : anchor.control_inputs) def.inputs.push_back("^" + g_.node(c).name());
    def.attrs["T"] = AttrValue(DType::kF32);
    def.attrs["N"] =
        AttrValue(static_cast<int64_t>(!chain.bias.empty()) + static_cast<int64_t>(!chain.residual.empty()));
    def.attrs["bias"] = AttrValue(!chain.bias.empty());
    def.attrs["residual"] = AttrValue(!chain.residual.empty());
    def.attrs["activation"] = AttrValue(chain.activation);
    def.attrs["alpha"] = AttrValue(static_cast<double>(chain.alpha));
    def.attrs["beta"] = AttrValue(static_cast<double>(chain.beta));
    std::vector<std::string> names;
    if (chain.pad) names.push_back(g_.node(*chain.pad).name());
    for (int id : chain.members) names.push_back(g_.node(id).name());
    def.attrs["_fused_nodes"] = AttrValue(names);
    return def;
  }

  // Replaces the chain's nodes by |fused| when every device the anchor
  // could run on has its kernel.
  bool Commit(const Graph::Node& anchor, const Chain& chain, NodeDef fused, PassReport& report) {
    if (!context_.has_fused_kernel(anchor.def, fused)) return false;
    for (int id : chain.members) claimed_[static_cast<std::size_t>(id)] = true;
    if (chain.pad) claimed_[static_cast<std::size_t>(*chain.pad)] = true;
    for (int id : chain.members) {
      if (id != chain.last) edit_.Remove(id);
    }
    if (chain.pad) edit_.Remove(*chain.pad);
    edit_.Replace(chain.last, std::move(fused));
    NoteExample(report, g_.node(chain.last).name());
    return true;
  }

  const Graph& graph() const { return g_; }
  const PassContext& context() const { return context_; }
  bool claimed(int id) const { return claimed_[static_cast<std::size_t>(id)]; }

 private:
  std::string Device(const Graph::Node& node) const {
    return context_.requested_device ? context_.requested_device(node.def) : node.def.device;
  }

  GraphEditor& edit_;
  const Graph& g_;
  const PassContext& context_;
  std::vector<bool> claimed_;
};

// A zero Pad of only the spatial axes before |conv| (VALID), which reads
// nothing else: its pads (top, bottom, left, right).
std::optional<std::vector<int64_t>> FoldablePad(const Fuser& f, const Graph::Node& conv, const Graph::Node& pad,
                                                bool nchw) {
  const Graph& g = f.graph();
  if (pad.op_name() != "Pad" || conv.def.attrs.at("padding").get<std::string>() != "VALID") return std::nullopt;
  if (!f.Joinable(pad, conv) || f.SoleReader(pad, conv) != &conv || conv.inputs[0].node != pad.id) return std::nullopt;
  if (pad.def.attrs.at("mode").get<std::string>() != "CONSTANT" ||
      pad.def.attrs.at("constant_value").get<double>() != 0) {
    return std::nullopt;
  }
  if (IsControlFlowOp(g.node(pad.inputs[0].node).op_name())) return std::nullopt;
  const auto& p = pad.def.attrs.at("paddings").get<std::vector<int64_t>>();
  if (p.size() != 8) return std::nullopt;
  for (int64_t v : p) {
    if (v < 0 || v > (int64_t{1} << 30)) return std::nullopt;
  }
  const std::size_t c = nchw ? 1 : 3, h = nchw ? 2 : 1, w = nchw ? 3 : 2;
  if (p[0] != 0 || p[1] != 0 || p[2 * c] != 0 || p[2 * c + 1] != 0) return std::nullopt;
  return std::vector<int64_t>{p[2 * h], p[2 * h + 1], p[2 * w], p[2 * w + 1]};
}

}  // namespace

Expected<int64_t> FuseConvolutions(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                                   PassReport& report) {
  if (!context.has_fused_kernel) return 0;
  Fuser f(edit, context);
  const Graph& g = f.graph();
  int64_t changed = 0;
  for (int id : g.topological_order()) {
    const Graph::Node& conv = g.node(id);
    const bool depthwise = conv.op_name() == "DepthwiseConv2D";
    if ((conv.op_name() != "Conv2D" && !depthwise) || !IsF32(conv) || f.claimed(id) || !IsRewritable(conv)) continue;
    const Shape& filter = InputShapeOf(g, conv, 1);
    if (filter.rank() != 4 || !filter.IsFullyDefined()) continue;
    const bool nchw = conv.def.attrs.at("data_format").get<std::string>() == "NCHW";
    const int64_t channels = depthwise ? filter.dim(2) * filter.dim(3) : filter.dim(3);
    Chain chain;
    chain.members.push_back(id);
    Endpoint input = conv.inputs[0];
    const Graph::Node& producer = g.node(input.node);
    if (auto pads = FoldablePad(f, conv, producer, nchw)) {
      chain.pad = producer.id;
      chain.pads = *pads;
      input = producer.inputs[0];
    }
    f.GrowEpilogue(conv, channels, nchw, chain);
    const bool constant_filter = ConstValue(g.node(conv.inputs[1].node)) != nullptr;
    // Alone, a convolution gains only when its filter is constant (its
    // reordered copy is then kept without comparing bytes each step).
    if (chain.members.size() == 1 && !chain.pad && !constant_filter) continue;
    NodeDef fused = f.MakeFused(conv, "_FusedConv2D", chain, {TensorName(g, input), TensorName(g, conv.inputs[1])});
    for (const char* attr : {"strides", "dilations", "data_format"}) fused.attrs[attr] = conv.def.attrs.at(attr);
    fused.attrs["padding"] = chain.pad ? AttrValue(std::string("EXPLICIT")) : conv.def.attrs.at("padding");
    fused.attrs["explicit_paddings"] = AttrValue(chain.pads);
    fused.attrs["depthwise"] = AttrValue(depthwise);
    fused.attrs["constant_filter"] = AttrValue(constant_filter);
    if (f.Commit(conv, chain, std::move(fused), report)) ++changed;
  }
  return changed;
}

Expected<int64_t> FuseMatMuls(GraphEditor& edit, const PassContext& context, const OptimizeOptions&,
                              PassReport& report) {
  if (!context.has_fused_kernel) return 0;
  Fuser f(edit, context);
  const Graph& g = f.graph();
  int64_t changed = 0;
  for (int id : g.topological_order()) {
    const Graph::Node& matmul = g.node(id);
    if (matmul.op_name() != "MatMul" || !IsF32(matmul) || f.claimed(id) || !IsRewritable(matmul)) continue;
    const Shape& out = matmul.output_shapes[0];
    if (out.rank() != 2) continue;
    Chain chain;
    chain.members.push_back(id);
    f.GrowEpilogue(matmul, out.dim(1), /*nchw=*/false, chain);
    // Alone, a product gains only when b is constant (the kernel keeps b in
    // the layout its primitive prefers).
    const bool constant_b = ConstValue(g.node(matmul.inputs[1].node)) != nullptr;
    if (chain.members.size() == 1 && !constant_b) continue;
    NodeDef fused =
        f.MakeFused(matmul, "_FusedMatMul", chain, {TensorName(g, matmul.inputs[0]), TensorName(g, matmul.inputs[1])});
    for (const char* attr : {"transpose_a", "transpose_b"}) fused.attrs[attr] = matmul.def.attrs.at(attr);
    fused.attrs["constant_b"] = AttrValue(constant_b);
    if (f.Commit(matmul, chain, std::move(fused), report)) ++changed;
  }
  return changed;
}

Expected<int64_t> AllowWinograd(GraphEditor& edit, const PassContext&, const OptimizeOptions&, PassReport& report) {
  const Graph& g = edit.graph();
  int64_t changed = 0;
  for (int id : g.topological_order()) {
    const Graph::Node& conv = g.node(id);
    if (conv.op_name() != "_FusedConv2D" || conv.def.attrs.at("winograd").get<bool>()) continue;
    // A constant filter only: its transform is made once (a training
    // step's filter changes every step).
    if (conv.def.attrs.at("depthwise").get<bool>() || !conv.def.attrs.at("constant_filter").get<bool>()) continue;
    if (conv.def.attrs.at("data_format").get<std::string>() != "NHWC") continue;
    const Endpoint filter_at = conv.inputs[1];
    const Shape& filter = g.node(filter_at.node).output_shapes[static_cast<std::size_t>(filter_at.index)];
    if (filter.rank() != 4 || filter.dim(0) != 3 || filter.dim(1) != 3) continue;
    bool ones = true;
    for (const char* attr : {"strides", "dilations"}) {
      for (int64_t v : conv.def.attrs.at(attr).get<std::vector<int64_t>>()) ones = ones && v == 1;
    }
    if (!ones) continue;
    NodeDef def = conv.def;
    def.attrs["winograd"] = AttrValue(true);
    edit.Replace(id, std::move(def));
    NoteExample(report, conv.name());
    ++changed;
  }
  return changed;
}

}  // namespace weft::passes::internal
