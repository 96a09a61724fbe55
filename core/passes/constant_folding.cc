// Constant folding: nodes whose inputs are all constants are evaluated
// once, on the host, with the same kernels a run would use, and replaced by
// Const nodes holding their values (docs/optimizer.md).
//
// The constant part of the graph is found in one sweep; only its outputs
// read by the rest of the graph become Const nodes, each named after the
// node it replaces and keeping the control inputs of the constant part
// above it (so a constant of a loop body or a branch stays there). A node
// that fails to evaluate is left as it was: the run then fails as it would
// have without the optimizer, naming it.
#include <map>
#include <set>

#include "core/base/strings.h"
#include "core/passes/passes_internal.h"

namespace weft::passes::internal {
namespace {

std::string Bytes(uint64_t n) {
  if (n >= (uint64_t{1} << 20)) return StrCat(n >> 20, " MiB");
  if (n >= 1024) return StrCat(n >> 10, " KiB");
  return StrCat(n, " bytes");
}

// Why |node| (all of whose inputs are constant) may not be folded, or ""
// when it may; "-" for reasons not worth telling.
std::string Unfoldable(const Graph::Node& node, const OptimizeOptions& options, const PassContext& context) {
  if (!IsRewritable(node) || node.op_name() == "Placeholder" || node.num_outputs() == 0) return "-";
  // Dequantized weights stay int8 (quantize_fusion reads them).
  if (node.op_name() == "DequantizeLinear") return "-";
  // A node asked to run on another kind of device (by the graph or a pin)
  // stays there.
  const std::string device = context.requested_device ? context.requested_device(node.def) : node.def.device;
  if (!device.empty() && device.find("CPU") == std::string::npos) return "-";
  for (std::size_t k = 0; k < node.output_types.size(); ++k) {
    if (node.output_types[k] == DType::kString) return "-";
    const Shape& shape = node.output_shapes[k];
    if (!shape.IsFullyDefined()) return "-";
    const uint64_t bytes = static_cast<uint64_t>(shape.num_elements()) * DTypeSize(node.output_types[k]);
    if (bytes > options.max_constant_bytes) {
      return StrCat(node.Describe(), " was not folded: its output ", k, " (", DTypeName(node.output_types[k]),
                    shape.ToString(), ") would be a constant of ", Bytes(bytes), ", over the limit of ",
                    Bytes(options.max_constant_bytes));
    }
  }
  return "";
}

}  // namespace

Expected<int64_t> FoldConstants(GraphEditor& edit, const PassContext& context, const OptimizeOptions& options,
                                PassReport& report) {
  if (!context.evaluate) return 0;
  const Graph& g = edit.graph();
  const std::size_t n = static_cast<std::size_t>(g.num_nodes());
  // constant[i]: node i's value is known before the run (a Const, or a
  // node to fold); fold[i]: node i is to be evaluated.
  std::vector<bool> constant(n, false), fold(n, false);
  for (int id : g.topological_order()) {
    const Graph::Node& node = g.node(id);
    const std::size_t i = static_cast<std::size_t>(id);
    if (node.op_name() == "Const") {
      constant[i] = ConstValue(node) != nullptr;
      continue;
    }
    if (node.inputs.empty()) continue;
    bool all = true;
    for (const Endpoint& e : node.inputs) all = all && constant[static_cast<std::size_t>(e.node)];
    if (!all) continue;
    const std::string why = Unfoldable(node, options, context);
    if (why == "-") continue;
    if (!why.empty()) {
      NoteLeft(report, why);
      continue;
    }
    constant[i] = fold[i] = true;
  }

  // The outputs the rest of the graph reads: those are evaluated.
  auto frontier = [&](const std::vector<bool>& folding) {
    std::vector<std::pair<int, int>> outputs;  // (node, output)
    for (std::size_t i = 0; i < n; ++i) {
      if (!folding[i]) continue;
      const int id = static_cast<int>(i);
      std::set<int> read;
      bool read_outside = context.keep.contains(g.node(id).name());
      for (const auto& [consumer, slot] : g.consumers()[i]) {
        if (folding[static_cast<std::size_t>(consumer)]) continue;
        read_outside = true;
        if (slot >= 0) read.insert(g.node(consumer).inputs[static_cast<std::size_t>(slot)].index);
      }
      if (!read_outside) continue;
      if (read.empty()) read.insert(0);  // read for its control edge only
      for (int k : read) outputs.emplace_back(id, k);
    }
    return outputs;
  };

  // The graph that computes |outputs|: the constant part above them,
  // without device requests or control edges.
  auto evaluate = [&](const std::vector<std::pair<int, int>>& outputs) -> Expected<std::vector<Tensor>> {
    std::vector<bool> need(n, false);
    std::vector<int> stack;
    for (const auto& [id, k] : outputs) stack.push_back(id);
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (need[static_cast<std::size_t>(id)]) continue;
      need[static_cast<std::size_t>(id)] = true;
      for (const Endpoint& e : g.node(id).inputs) stack.push_back(e.node);
    }
    GraphDef def;
    def.library = g.library();
    for (std::size_t i = 0; i < n; ++i) {
      if (!need[i]) continue;
      NodeDef node = g.node(static_cast<int>(i)).def;
      node.device.clear();
      std::erase_if(node.inputs, [](const std::string& input) { return input.starts_with("^"); });
      def.nodes.push_back(std::move(node));
    }
    std::vector<std::string> fetches;
    for (const auto& [id, k] : outputs) fetches.push_back(InputRefString(g.node(id).name(), k));
    return context.evaluate(std::move(def), fetches);
  };

  std::vector<std::pair<int, int>> outputs = frontier(fold);
  if (outputs.empty()) return 0;
  Expected<std::vector<Tensor>> values = evaluate(outputs);
  if (!values.ok()) {
    // Some node fails (a bad constant shape, an op without a host kernel):
    // find it by evaluating one node at a time, and fold what is left.
    for (int id : g.topological_order()) {
      const std::size_t i = static_cast<std::size_t>(id);
      if (!fold[i]) continue;
      const Graph::Node& node = g.node(id);
      bool inputs_fold = true;
      for (const Endpoint& e : node.inputs) {
        const std::size_t j = static_cast<std::size_t>(e.node);
        inputs_fold = inputs_fold && (fold[j] || g.node(e.node).op_name() == "Const");
      }
      std::vector<std::pair<int, int>> mine;
      for (int k = 0; k < node.num_outputs(); ++k) mine.emplace_back(id, k);
      if (!inputs_fold || !evaluate(mine).ok()) {
        fold[i] = false;
        if (inputs_fold) NoteLeft(report, StrCat(node.Describe(), " was not folded: it fails (the run will say why)"));
      }
    }
    outputs = frontier(fold);
    if (outputs.empty()) return 0;
    values = evaluate(outputs);
    if (!values.ok()) return 0;  // cannot happen after the sweep above; folding is optional
  }

  // Each folded output read outside becomes a Const. The control inputs of
  // the constant part above a node go with it.
  std::vector<std::set<int>> controls(n);
  for (int id : g.topological_order()) {
    const std::size_t i = static_cast<std::size_t>(id);
    if (!constant[i]) continue;
    const Graph::Node& node = g.node(id);
    for (int c : node.control_inputs) {
      if (!fold[static_cast<std::size_t>(c)]) {
        controls[i].insert(c);
      } else {
        controls[i].insert(controls[static_cast<std::size_t>(c)].begin(), controls[static_cast<std::size_t>(c)].end());
      }
    }
    for (const Endpoint& e : node.inputs) {
      controls[i].insert(controls[static_cast<std::size_t>(e.node)].begin(),
                         controls[static_cast<std::size_t>(e.node)].end());
    }
  }
  std::map<int, std::vector<std::pair<int, Tensor>>> by_node;
  for (std::size_t v = 0; v < outputs.size(); ++v) {
    by_node[outputs[v].first].emplace_back(outputs[v].second, (*values)[v]);
  }
  int64_t changed = 0;
  for (int id : g.topological_order()) {
    const std::size_t i = static_cast<std::size_t>(id);
    if (!fold[i]) continue;
    const Graph::Node& node = g.node(id);
    auto it = by_node.find(id);
    if (it == by_node.end()) {
      edit.Remove(id);  // read only by other folded nodes
      continue;
    }
    std::vector<std::string> control_inputs;
    for (int c : controls[i]) control_inputs.push_back(InputRefString(g.node(c).name(), -1));
    if (node.num_outputs() == 1) {
      NodeDef def = MakeConst(node.name(), it->second.front().second);
      def.device = node.def.device;
      def.inputs = control_inputs;
      edit.Replace(id, std::move(def));
    } else {
      std::vector<int> added;
      for (const auto& [k, value] : it->second) {
        NodeDef def = MakeConst(edit.UniqueName(StrCat(node.name(), "/folded_", k)), value);
        def.device = node.def.device;
        def.inputs = control_inputs;
        const int c = edit.Add(std::move(def));
        edit.Forward(id, k, Endpoint{c, 0});
        added.push_back(c);
      }
      edit.ForwardControl(id, added);
      edit.Remove(id);
    }
    NoteExample(report, node.name());
    ++changed;
  }
  // Nodes folded into others also count.
  for (std::size_t i = 0; i < n; ++i) {
    if (fold[i] && !by_node.contains(static_cast<int>(i))) ++changed;
  }
  return changed;
}

}  // namespace weft::passes::internal
