// Walks over a Graph's edges that more than one caller needs.
#ifndef WEFT_CORE_GRAPH_GRAPH_WALK_H_
#define WEFT_CORE_GRAPH_GRAPH_WALK_H_

#include <vector>

#include "core/graph/graph.h"

namespace weft {

// The nodes that |roots| (node ids) depend on through data and control
// inputs, the roots included: one flag per node id.
std::vector<bool> AncestorsOf(const Graph& graph, const std::vector<int>& roots);

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_GRAPH_WALK_H_
