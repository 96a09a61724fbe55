// The graph optimizer: a pipeline of small passes that rewrite the graph a
// Session runs, after pruning and before placement, without changing what
// it computes (docs/optimizer.md).
//
// Each pass has a name, a level and a paragraph of documentation, and
// reports what it changed. Level 0 runs nothing; level 1 runs the passes
// every device benefits from (constant folding, common subexpressions,
// Identity and no-op removal, arithmetic simplification, shapes known when
// the graph is built). Higher levels add device-specific fusions.
//
//   OptimizeOptions options;  // level 1, nothing disabled
//   PassContext context;      // what a pass may use: keep, evaluate
//   WEFT_ASSIGN_OR_RETURN(OptimizeResult result, Optimize(graph, options, context));
//   for (const PassReport& r : result.reports) ...
#ifndef WEFT_CORE_PASSES_PASS_H_
#define WEFT_CORE_PASSES_PASS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/base/status.h"
#include "core/graph/graph.h"

namespace weft::passes {

// Levels go from 0 (nothing) to 3 (Winograd convolutions in a blocked
// layout). The default is the highest level whose tests pass.
inline constexpr int kMaxLevel = 3;
inline constexpr int kDefaultLevel = 3;

struct OptimizeOptions {
  int level = kDefaultLevel;
  // Names of passes not to run (checked: an unknown name is an error).
  std::vector<std::string> disable;
  // The largest constant folding may create, in bytes.
  uint64_t max_constant_bytes = uint64_t{10} << 20;
};

// What a pass may rely on beyond the graph.
struct PassContext {
  // Nodes that must survive by name (the run's _Retval nodes and targets).
  std::unordered_set<std::string> keep;
  // Runs |graph| (Const nodes and the nodes folding wants evaluated, with
  // no device requests) on the host and returns |fetches| ("node:k"), in
  // order. Unset: constant folding does nothing.
  std::function<Expected<std::vector<Tensor>>(GraphDef graph, const std::vector<std::string>& fetches)> evaluate;
  // The device a node will be asked to run on: its own request, or what
  // the config's [placement.pins] say for its name. Nodes asked for
  // different devices never merge (a merged node would move the other's
  // readers, and with them the variables they use). Unset: the node's
  // own request.
  std::function<std::string(const NodeDef& node)> requested_device;
  // Whether every device |node| would be placed on (its request or pin
  // allows it, it has a kernel for |node|, and its type comes first in the
  // placement priority among those) also has a kernel for |fused|, the node
  // a fusion would put in its place; false when no device could run |node|. Deciding this before placement keeps
  // placement free: a device without the fused kernel keeps the unfused nodes. Unset: the fusion passes (level 2) do
  // nothing.
  std::function<bool(const NodeDef& node, const NodeDef& fused)> has_fused_kernel;
};

// What one pass did over a whole Optimize call.
struct PassReport {
  std::string pass;
  int level = 0;
  // Rewrites made (nodes removed, replaced or merged).
  int64_t changed = 0;
  // The first nodes it rewrote, in the user's names.
  std::vector<std::string> examples;
  // What it left alone that a user may ask about ("a constant too large to
  // fold"), one sentence each; at most a few.
  std::vector<std::string> notes;
  double milliseconds = 0;
};

struct OptimizeResult {
  std::shared_ptr<const Graph> graph;
  std::vector<PassReport> reports;  // one per pass the level runs, in order
  int nodes_before = 0;
  int nodes_after = 0;
};

// A pass's description, for `weft optimize --explain` and the docs.
struct PassInfo {
  std::string name;
  int level = 0;
  std::string doc;
};

// Every pass, in the order the pipeline runs them.
std::vector<PassInfo> ListPasses();

// INVALID_ARGUMENT naming an unknown pass in |disable| (with a "did you
// mean"), or a level outside 0..kMaxLevel.
Status ValidateOptions(const OptimizeOptions& options);

// Runs the passes of |options.level| over |graph| until none changes
// anything (at most a few rounds). A pass that produces an invalid graph is
// an INTERNAL error naming the pass and the problem, with --optimize 0 as
// the way around it.
Expected<OptimizeResult> Optimize(std::shared_ptr<const Graph> graph, const OptimizeOptions& options,
                                  const PassContext& context);

}  // namespace weft::passes

#endif  // WEFT_CORE_PASSES_PASS_H_
