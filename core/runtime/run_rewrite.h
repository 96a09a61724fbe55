// The graph one Run call executes: feeds become _Arg nodes, fetches
// _Retval nodes, and everything the fetches and targets do not need is
// pruned away. Shared by the local Session and the distributed one.
#ifndef WEFT_CORE_RUNTIME_RUN_REWRITE_H_
#define WEFT_CORE_RUNTIME_RUN_REWRITE_H_

#include <memory>
#include <string>
#include <utility>
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

// A Run call's signature, independent of argument order: feeds (each
// once), fetches and targets sorted and without repeats. Executors are
// cached under |key|.
struct RunSignature {
  std::vector<std::string> feeds, fetches, targets;
  std::string key;

  // INVALID_ARGUMENT for a feed given twice, or nothing to run.
  static Expected<RunSignature> Make(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                     const std::vector<std::string>& fetches, const std::vector<std::string>& targets);
  // The position of |feed| in |feeds| (it must be one of them).
  std::size_t FeedIndex(const std::string& feed) const;
  std::size_t FetchIndex(const std::string& fetch) const;
  // The feed values in signature order, each checked against the dtype and
  // shape the graph expects (|types| and |shapes| in signature order).
  Expected<std::vector<Tensor>> Args(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                     const std::vector<DType>& types, const std::vector<Shape>& shapes) const;
};

// |feeds|, |fetches| and |targets| name tensors and nodes of |graph|; the
// i-th feed becomes an _Arg with index i, the i-th fetch a _Retval with
// index i. Errors name the feed, fetch or target that is wrong.
Expected<RunGraph> RewriteForRun(const Graph& graph, const std::vector<std::string>& feeds,
                                 const std::vector<std::string>& fetches, const std::vector<std::string>& targets);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_RUN_REWRITE_H_
