#include "core/passes/graph_edit.h"

#include <algorithm>
#include <functional>
#include <set>

#include "core/base/strings.h"

namespace weft::passes {
namespace {

int64_t Key(int id, int index) { return (static_cast<int64_t>(id) << 16) | static_cast<int64_t>(index); }

}  // namespace

bool IsControlFlowOp(const std::string& op) {
  return op == "Switch" || op == "Merge" || op == "Enter" || op == "Exit" || op == "NextIteration" ||
         op == "LoopCond" || op == "RefEnter";
}

bool IsRewritable(const Graph::Node& node) {
  if (node.op->stateful || node.op_name().starts_with("_") || IsControlFlowOp(node.op_name())) return false;
  for (DType t : node.input_types) {
    if (t == DType::kResource) return false;
  }
  for (DType t : node.output_types) {
    if (t == DType::kResource) return false;
  }
  return true;
}

GraphEditor::GraphEditor(const Graph& graph) : graph_(graph) {
  removed_.assign(static_cast<std::size_t>(graph.num_nodes()), false);
}

const NodeDef& GraphEditor::def(int id) const {
  if (id >= graph_.num_nodes()) return added_[static_cast<std::size_t>(id - graph_.num_nodes())];
  auto it = replaced_.find(id);
  return it != replaced_.end() ? it->second : graph_.node(id).def;
}

int GraphEditor::IdOf(std::string_view name) const {
  if (const Graph::Node* node = graph_.Find(name)) return node->id;
  if (added_names_.empty()) return -1;
  auto it = added_names_.find(std::string(name));
  return it == added_names_.end() ? -1 : it->second;
}

void GraphEditor::Forward(int id, int index, Endpoint to) { forward_[Key(id, index)] = to; }

void GraphEditor::ForwardControl(int id, std::vector<int> nodes) { control_forward_[id] = std::move(nodes); }

void GraphEditor::Remove(int id) { removed_[static_cast<std::size_t>(id)] = true; }

void GraphEditor::Replace(int id, NodeDef def) {
  if (id >= graph_.num_nodes()) {
    added_[static_cast<std::size_t>(id - graph_.num_nodes())] = std::move(def);
    return;
  }
  replaced_[id] = std::move(def);
}

int GraphEditor::Add(NodeDef def) {
  const int id = graph_.num_nodes() + static_cast<int>(added_.size());
  added_names_.emplace(def.name, id);
  added_.push_back(std::move(def));
  removed_.push_back(false);
  return id;
}

std::string GraphEditor::UniqueName(const std::string& base) {
  if (IdOf(base) < 0) return base;
  for (int i = 1;; ++i) {
    std::string name = StrCat(base, "_", i);
    if (IdOf(name) < 0) return name;
  }
}

Endpoint GraphEditor::Resolve(int id, int index) const {
  Endpoint at{id, index};
  // A chain is at most as long as the graph; stop there on a cycle (a
  // pass's bug, which validation then reports).
  std::size_t hops = 0;
  for (; hops <= removed_.size(); ++hops) {
    auto it = forward_.find(Key(at.node, at.index));
    if (it == forward_.end()) break;
    at = it->second;
  }
  // Every hop of a chain now points at its end, so a chain is walked once
  // however many readers resolve through it (a chain of n double negations
  // forwards n values, each to the one before: linear, not quadratic).
  if (hops > 1 && hops <= removed_.size()) {
    Endpoint step{id, index};
    for (std::size_t i = 0; i < hops; ++i) {
      auto it = forward_.find(Key(step.node, step.index));
      const Endpoint next = it->second;
      it->second = at;
      step = next;
    }
  }
  return at;
}

const std::string& GraphEditor::name(int id) const { return def(id).name; }

GraphDef GraphEditor::Finish(const std::unordered_set<std::string>& keep) const {
  const std::size_t n = removed_.size();
  const std::size_t originals = static_cast<std::size_t>(graph_.num_nodes());
  // A node's data and control inputs as ids: an unchanged original node's
  // from the graph, an edited one's parsed from its def (-1: names nothing,
  // left for validation to report).
  struct Input {
    int node;
    int index;  // -1: control
  };
  auto inputs_of = [&](std::size_t i, std::vector<Input>& out) {
    out.clear();
    if (i < originals && !replaced_.contains(static_cast<int>(i))) {
      const Graph::Node& node = graph_.node(static_cast<int>(i));
      for (const Endpoint& e : node.inputs) out.push_back({e.node, e.index});
      for (int c : node.control_inputs) out.push_back({c, -1});
      return;
    }
    for (const std::string& input : def(static_cast<int>(i)).inputs) {
      auto ref = ParseInputRef(input);
      out.push_back({ref.ok() ? IdOf(ref->node) : -1, ref.ok() && !ref->control() ? ref->index : -1});
    }
  };
  // The nodes a removed node's control readers wait for instead: what it
  // was told, or else what it waited for itself (its inputs' producers and
  // its control inputs), followed through other removed nodes.
  std::vector<std::vector<int>> expanded(n);
  std::vector<uint8_t> state(n, 0);  // 0 new, 1 in progress, 2 done
  std::function<const std::vector<int>&(int)> expand = [&](int id) -> const std::vector<int>& {
    const std::size_t i = static_cast<std::size_t>(id);
    if (state[i] != 0) return expanded[i];
    state[i] = 1;
    std::vector<int> direct;
    auto told = control_forward_.find(id);
    if (told != control_forward_.end()) {
      direct = told->second;
    } else {
      std::vector<Input> ins;
      inputs_of(i, ins);
      for (const Input& in : ins) {
        if (in.node < 0) continue;
        direct.push_back(in.index < 0 ? in.node : Resolve(in.node, in.index).node);
      }
    }
    std::set<int> out;
    for (int d : direct) {
      if (!removed_[static_cast<std::size_t>(d)]) {
        out.insert(d);
      } else if (state[static_cast<std::size_t>(d)] != 1) {
        for (int e : expand(d)) out.insert(e);
      }
    }
    expanded[i].assign(out.begin(), out.end());
    state[i] = 2;
    return expanded[i];
  };

  // Every node's producers through the forwards, for dead-code counting:
  // data sources first (in input order), then control sources.
  std::vector<std::vector<int>> sources(n);
  std::vector<uint32_t> data_count(n, 0);
  std::vector<uint8_t> changed(n, 0);  // inputs differ from the def's
  std::vector<Input> ins;
  for (std::size_t i = 0; i < n; ++i) {
    if (removed_[i]) continue;
    inputs_of(i, ins);
    std::set<int> control_ids;
    bool unresolved = false;
    for (const Input& in : ins) {
      if (in.node < 0) {
        unresolved = true;
        continue;
      }
      if (in.index >= 0) {
        const Endpoint e = Resolve(in.node, in.index);
        if (e.node != in.node || e.index != in.index) changed[i] = 1;
        sources[i].push_back(e.node);
        continue;
      }
      if (!removed_[static_cast<std::size_t>(in.node)]) {
        control_ids.insert(in.node);
      } else {
        changed[i] = 1;
        for (int e : expand(in.node)) control_ids.insert(e);
      }
    }
    if (unresolved) changed[i] = 1;
    if (control_ids.erase(static_cast<int>(i)) > 0) changed[i] = 1;
    data_count[i] = static_cast<uint32_t>(sources[i].size());
    sources[i].insert(sources[i].end(), control_ids.begin(), control_ids.end());
  }

  // Dead code: what nothing reads, unless it has effects or is kept.
  std::vector<int> readers(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (removed_[i]) continue;
    for (int s : sources[i]) ++readers[static_cast<std::size_t>(s)];
  }
  auto removable = [&](std::size_t i) {
    const NodeDef& d = def(static_cast<int>(i));
    if (keep.contains(d.name) || d.op.starts_with("_")) return false;
    const OpDef* op = i < originals && !replaced_.contains(static_cast<int>(i)) ? graph_.node(static_cast<int>(i)).op
                                                                                : OpRegistry::Global().Find(d.op);
    return op != nullptr && !op->stateful;
  };
  std::vector<bool> gone(removed_.begin(), removed_.end());
  std::vector<std::size_t> work;
  for (std::size_t i = 0; i < n; ++i) {
    if (!gone[i] && readers[i] == 0 && removable(i)) work.push_back(i);
  }
  while (!work.empty()) {
    const std::size_t i = work.back();
    work.pop_back();
    if (gone[i]) continue;
    gone[i] = true;
    for (int s : sources[i]) {
      const std::size_t j = static_cast<std::size_t>(s);
      if (--readers[j] == 0 && !gone[j] && removable(j)) work.push_back(j);
    }
  }

  // The survivors, their inputs rewritten where they changed.
  GraphDef out;
  out.producer = graph_.producer();
  out.library = graph_.library();
  std::size_t survivors = 0;
  for (std::size_t i = 0; i < n; ++i) survivors += gone[i] ? 0 : 1;
  out.nodes.reserve(survivors);
  for (std::size_t i = 0; i < n; ++i) {
    if (gone[i]) continue;
    out.nodes.push_back(def(static_cast<int>(i)));
    if (!changed[i]) continue;
    NodeDef& d = out.nodes.back();
    std::vector<std::string> inputs;
    // Inputs that name no node stay as written, for validation to report.
    inputs_of(i, ins);
    for (std::size_t k = 0; k < ins.size(); ++k) {
      if (ins[k].node < 0) {
        inputs.push_back(d.inputs[k]);
      } else if (ins[k].index >= 0) {
        const Endpoint e = Resolve(ins[k].node, ins[k].index);
        inputs.push_back(InputRefString(name(e.node), e.index));
      }
    }
    for (std::size_t k = data_count[i]; k < sources[i].size(); ++k) {
      inputs.push_back(InputRefString(name(sources[i][k]), -1));
    }
    d.inputs = std::move(inputs);
  }
  return out;
}

}  // namespace weft::passes
