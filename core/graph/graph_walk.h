// Walks over a Graph's edges that more than one caller needs.
#ifndef WEFT_CORE_GRAPH_GRAPH_WALK_H_
#define WEFT_CORE_GRAPH_GRAPH_WALK_H_

#include <string>
#include <vector>

#include "core/graph/graph.h"

namespace weft {

// The nodes that |roots| (node ids) depend on through data and control
// inputs, the roots included: one flag per node id.
std::vector<bool> AncestorsOf(const Graph& graph, const std::vector<int>& roots);

// What a model computes when nobody says: the nodes whose first output no
// node reads, leaving out Placeholders, Consts, stateful nodes and
// resources; by name, in graph order.
std::vector<std::string> UnreadOutputs(const Graph& graph);

// The Placeholders that |ends| depend on, by name, in graph order.
std::vector<std::string> PlaceholdersFeeding(const Graph& graph, const std::vector<Endpoint>& ends);

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_GRAPH_WALK_H_
