// Builders of dynamic control flow (docs/architecture.md, "Control flow"): conditionals and loops as
// Switch/Merge/Enter/Exit/NextIteration/LoopCond structures that the
// executor runs without unrolling.
//
//   GraphBuilder b;
//   Output n = b.Placeholder(DType::kI32, Shape{}, "n");
//   // sum of 1..n
//   auto sum = WhileLoop(
//       b, [&](const std::vector<Output>& v) -> Expected<Output> { return b.Op("Less", {v[0], n}); },
//       [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
//         Output i = b.Op("Add", {v[0], b.Scalar<int32_t>(1)});
//         return std::vector<Output>{i, b.Op("Add", {v[1], i})};
//       },
//       {b.Scalar<int32_t>(0), b.Scalar<int32_t>(0)});
//
// The branch and body functions build ordinary nodes with |b|. They may use
// any tensor visible where the builder is called: the GraphBuilder routes
// it in (a Switch per branch for a cond, an Enter with is_constant for a
// loop, through every level of nesting), once per tensor. Tensors made
// inside a branch or loop are visible outside only through the returned
// results; using one elsewhere is an error naming the tensor and the cond
// or loop. Errors are also recorded in the builder (GraphBuilder::status).
#ifndef WEFT_CORE_GRAPH_CONTROL_FLOW_H_
#define WEFT_CORE_GRAPH_CONTROL_FLOW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph/builder.h"

namespace weft {

using BranchFn = std::function<Expected<std::vector<Output>>()>;

// Builds `pred ? true_fn() : false_fn()` under the name scope |name|
// (made unique: "cond", "cond_1"). |pred| must be a scalar bool. Structure:
//   <name>/Switch = Switch(pred, pred); <name>/switch_t, <name>/switch_f =
//   Identity of its true and false outputs (the branch pivots: nodes
//   without data inputs made in a branch get a control input on them);
//   each outside tensor a branch uses goes through a Switch(x, pred) of
//   that branch; result k = <name>/Merge[_k] of (false result k, true
//   result k), whose shape is the most specific shape both fit.
// Both functions run once, true_fn first. They must return the same number
// of outputs with equal dtypes: INVALID_ARGUMENT naming the index and both
// dtypes otherwise. Returns the Merge outputs.
Expected<std::vector<Output>> Cond(GraphBuilder& b, const Output& pred, const BranchFn& true_fn,
                                   const BranchFn& false_fn, std::string_view name = "cond");

struct WhileOptions {
  // Iterations that may run at once (>= 1).
  int parallel_iterations = 10;
  // When set (>= 0), the loop stops after this many iterations even if the
  // condition still holds (an i64 counter loop variable, not returned).
  std::optional<int64_t> maximum_iterations;
  // Empty, or one per loop variable: the shape every iteration's value must
  // fit (unknown dimensions may change between iterations). Without one, a
  // loop variable keeps the shape it enters with.
  std::vector<Shape> shape_invariants;
  // The loop's name scope, made unique ("while", "while_1"); the full
  // scope name is the frame name of its Enter nodes.
  std::string name = "while";
};

using LoopCondFn = std::function<Expected<Output>(const std::vector<Output>&)>;
using LoopBodyFn = std::function<Expected<std::vector<Output>>(const std::vector<Output>&)>;

// Builds `while (cond_fn(vars)) vars = body_fn(vars);` and returns the final
// values of |loop_vars| (at least one). Structure, per loop variable k:
//   <scope>/Enter[_k] (frame_name <scope>, parallel_iterations, the shape
//   invariant) -> <scope>/Merge[_k] (Enter, NextIteration) -> cond_fn ->
//   <scope>/LoopCond -> <scope>/Switch[_k] (Merge, LoopCond):
//   output_true -> <scope>/Identity[_k] -> body_fn -> <scope>/NextIteration[_k]
//   (the Merge's back edge); output_false -> <scope>/Exit[_k], the result.
// cond_fn receives the Merge outputs and returns a scalar bool; body_fn
// receives the Identity outputs and returns one value per loop variable
// with its dtype and a shape at least as specific as its invariant.
// Nodes without data inputs get a control input on the first Merge (in
// cond_fn) or the first Identity (in body_fn). Errors (INVALID_ARGUMENT)
// name the loop, the loop variable and the shapes or dtypes involved.
Expected<std::vector<Output>> WhileLoop(GraphBuilder& b, const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                                        const std::vector<Output>& loop_vars, const WhileOptions& options = {});

}  // namespace weft

#endif  // WEFT_CORE_GRAPH_CONTROL_FLOW_H_
