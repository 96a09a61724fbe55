// The graph one Run call executes: feeds become _Arg nodes, fetches
// _Retval nodes, and everything the fetches and targets do not need is
// pruned away. Shared by the local Session and the distributed one.
#ifndef WEFT_CORE_RUNTIME_RUN_REWRITE_H_
#define WEFT_CORE_RUNTIME_RUN_REWRITE_H_

#include <memory>
#include <string>
#include <vector>

#include "core/base/status.h"
#include "core/graph/graph.h"

namespace weft::runtime {

struct RunGraph {
  std::shared_ptr<const Graph> graph;
  // The _Retval nodes (in fetch order) and the targets.
  std::vector<std::string> roots;
  // Of each feed, in the order given.
  std::vector<DType> feed_types;
  std::vector<Shape> feed_shapes;
};

// |feeds|, |fetches| and |targets| name tensors and nodes of |graph|; the
// i-th feed becomes an _Arg with index i, the i-th fetch a _Retval with
// index i. Errors name the feed, fetch or target that is wrong.
Expected<RunGraph> RewriteForRun(const Graph& graph, const std::vector<std::string>& feeds,
                                 const std::vector<std::string>& fetches, const std::vector<std::string>& targets);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_RUN_REWRITE_H_
