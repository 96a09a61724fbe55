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
  defs_.reserve(static_cast<std::size_t>(graph.num_nodes()));
  for (const Graph::Node& node : graph.nodes()) {
    defs_.push_back(node.def);
    names_.emplace(node.name(), node.id);
  }
  removed_.assign(defs_.size(), false);
  replaced_.assign(defs_.size(), false);
}

void GraphEditor::Forward(int id, int index, Endpoint to) { forward_[Key(id, index)] = to; }

void GraphEditor::ForwardControl(int id, std::vector<int> nodes) { control_forward_[id] = std::move(nodes); }

void GraphEditor::Remove(int id) { removed_[static_cast<std::size_t>(id)] = true; }

void GraphEditor::Replace(int id, NodeDef def) {
  defs_[static_cast<std::size_t>(id)] = std::move(def);
  replaced_[static_cast<std::size_t>(id)] = true;
}

int GraphEditor::Add(NodeDef def) {
  const int id = static_cast<int>(defs_.size());
  names_.emplace(def.name, id);
  defs_.push_back(std::move(def));
  removed_.push_back(false);
  replaced_.push_back(true);
  return id;
}

std::string GraphEditor::UniqueName(const std::string& base) {
  if (!names_.contains(base)) return base;
  for (int i = 1;; ++i) {
    std::string name = StrCat(base, "_", i);
    if (!names_.contains(name)) return name;
  }
}

Endpoint GraphEditor::Resolve(int id, int index) const {
  Endpoint at{id, index};
  // A chain is at most as long as the graph; stop there on a cycle (a
  // pass's bug, which validation then reports).
  for (std::size_t hops = 0; hops <= defs_.size(); ++hops) {
    auto it = forward_.find(Key(at.node, at.index));
    if (it == forward_.end()) break;
    at = it->second;
  }
  return at;
}

const std::string& GraphEditor::name(int id) const { return defs_[static_cast<std::size_t>(id)].name; }

GraphDef GraphEditor::Finish(const std::unordered_set<std::string>& keep) const {
  const std::size_t n = defs_.size();
  auto id_of = [&](const std::string& name) {
    auto it = names_.find(name);
    return it == names_.end() ? -1 : it->second;
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
      for (const std::string& input : defs_[i].inputs) {
        auto ref = ParseInputRef(input);
        if (!ref.ok()) continue;
        const int src = id_of(ref->node);
        if (src < 0) continue;
        direct.push_back(ref->control() ? src : Resolve(src, ref->index).node);
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

  // Inputs through the forwards.
  std::vector<NodeDef> defs(defs_);
  std::vector<std::vector<int>> sources(n);  // data and control producers, for dead-code counting
  for (std::size_t i = 0; i < n; ++i) {
    if (removed_[i]) continue;
    NodeDef& def = defs[i];
    std::vector<std::string> data, control;
    std::set<int> control_ids;
    for (const std::string& input : def.inputs) {
      auto ref = ParseInputRef(input);
      const int src = ref.ok() ? id_of(ref->node) : -1;
      if (src < 0) {
        // Left for validation to report.
        (ref.ok() && ref->control() ? control : data).push_back(input);
        continue;
      }
      if (!ref->control()) {
        const Endpoint e = Resolve(src, ref->index);
        data.push_back(InputRefString(name(e.node), e.index));
        sources[i].push_back(e.node);
        continue;
      }
      if (!removed_[static_cast<std::size_t>(src)]) {
        control_ids.insert(src);
      } else {
        for (int e : expand(src)) control_ids.insert(e);
      }
    }
    control_ids.erase(static_cast<int>(i));
    for (int c : control_ids) {
      control.push_back(InputRefString(name(c), -1));
      sources[i].push_back(c);
    }
    def.inputs = std::move(data);
    def.inputs.insert(def.inputs.end(), control.begin(), control.end());
  }

  // Dead code: what nothing reads, unless it has effects or is kept.
  std::vector<int> readers(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (removed_[i]) continue;
    for (int s : sources[i]) ++readers[static_cast<std::size_t>(s)];
  }
  auto removable = [&](std::size_t i) {
    const NodeDef& def = defs[i];
    if (keep.contains(def.name) || def.op.starts_with("_")) return false;
    const OpDef* op = i < static_cast<std::size_t>(graph_.num_nodes()) && !replaced_[i]
                          ? graph_.node(static_cast<int>(i)).op
                          : OpRegistry::Global().Find(def.op);
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

  GraphDef out;
  out.producer = graph_.producer();
  out.library = graph_.library();
  for (std::size_t i = 0; i < n; ++i) {
    if (!gone[i]) out.nodes.push_back(std::move(defs[i]));
  }
  return out;
}

}  // namespace weft::passes
