// Editing a validated graph: the passes' common tool.
//
// A pass reads the Graph it was given (dtypes, shapes, consumers) and
// records edits on a GraphEditor: forward the readers of an output to
// another tensor, replace or add nodes, remove nodes. Finish() applies them
// in one sweep and drops what nothing reads any more, so passes never
// rewrite input strings themselves.
//
//   GraphEditor edit(graph);
//   edit.Forward(identity.id, 0, identity.inputs[0]);   // readers read its input
//   edit.Remove(identity.id);
//   WEFT_ASSIGN_OR_RETURN(Graph next, Graph::FromGraphDef(edit.Finish(keep)));
#ifndef WEFT_CORE_PASSES_GRAPH_EDIT_H_
#define WEFT_CORE_PASSES_GRAPH_EDIT_H_

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/graph/graph.h"

namespace weft::passes {

class GraphEditor {
 public:
  explicit GraphEditor(const Graph& graph);

  const Graph& graph() const { return graph_; }

  // Readers of output |index| of node |id| read |to| instead (an output of
  // an original node or of one added here). |to| may itself be forwarded
  // later; chains are followed.
  void Forward(int id, int index, Endpoint to);
  // Control readers of node |id| (which is removed) run after |nodes|
  // instead.
  void ForwardControl(int id, std::vector<int> nodes);
  // Drops node |id|. Its readers must have been forwarded.
  void Remove(int id);
  bool removed(int id) const { return removed_[static_cast<std::size_t>(id)]; }
  // Replaces the definition of node |id| (same name: readers of it keep
  // reading it). Its inputs name nodes as written in the graph.
  void Replace(int id, NodeDef def);
  // Adds a node; returns its id (after the original ones).
  int Add(NodeDef def);
  // A name not used by any node: |base|, or |base|_1, ...
  std::string UniqueName(const std::string& base);

  // Where a reader of output |index| of |id| ends up reading.
  Endpoint Resolve(int id, int index) const;
  // The name of node |id| (original or added).
  const std::string& name(int id) const;

  // The edited graph: every input rewritten through the forwards, removed
  // nodes gone, and then every node nothing reads that is not stateful and
  // not in |keep| (and not internal, '_'-prefixed) dropped too.
  GraphDef Finish(const std::unordered_set<std::string>& keep) const;

 private:
  // The definition of node |id| as it stands (replaced, added or original).
  const NodeDef& def(int id) const;
  // The id of the node named |name| (original or added), or -1.
  int IdOf(std::string_view name) const;

  const Graph& graph_;
  // Only what changed is stored: the original nodes are read from graph_
  // (a pass over a million-node graph edits a handful).
  std::vector<NodeDef> added_;  // ids num_nodes() + i
  std::unordered_map<int, NodeDef> replaced_;
  std::unordered_map<std::string, int> added_names_;
  std::vector<bool> removed_;
  // (id << 16 | index) -> target; Resolve shortens chains in place.
  mutable std::unordered_map<int64_t, Endpoint> forward_;
  std::unordered_map<int, std::vector<int>> control_forward_;
};

// Ops that steer control flow (Switch, Merge, Enter, Exit, NextIteration,
// LoopCond): passes leave them, and what reads them directly, alone.
bool IsControlFlowOp(const std::string& op);
// Whether a pass may remove, merge or fold |node| at all: not stateful,
// not internal ('_' ops), not control flow, no resource inputs or outputs.
bool IsRewritable(const Graph::Node& node);

}  // namespace weft::passes

#endif  // WEFT_CORE_PASSES_GRAPH_EDIT_H_
