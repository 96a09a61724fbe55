// Loops and conds written op by op (Enter, Merge, Switch, NextIteration,
// Exit), for the executor's tests; they do not depend on the while_loop
// builder.
#ifndef WEFT_TESTS_SUPPORT_LOOP_TEST_GRAPHS_H_
#define WEFT_TESTS_SUPPORT_LOOP_TEST_GRAPHS_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/graph/builder.h"
#include "core/runtime/session.h"
#include "tests/support/runtime_env.h"

namespace weft::testing {

// |in| makes a scalar constant inside the loop's frame.
using InFrame = std::function<Output(int64_t value)>;
using LoopCondFn = std::function<Output(const std::vector<Output>& vars, const std::vector<Output>& invariants)>;
using LoopBodyFn = std::function<std::vector<Output>(const std::vector<Output>& vars,
                                                     const std::vector<Output>& invariants, const InFrame& in)>;

// A while loop in frame |name| (also its name scope): |init| are the loop
// variables, |invariants| the values every iteration reads. Returns the
// final values of the loop variables. Constants inside the body must come
// from |in| (a node without inputs would run in the root frame).
std::vector<Output> RawLoop(GraphBuilder& b, const std::string& name, int parallel, const std::vector<Output>& init,
                            const std::vector<Output>& invariants, const LoopCondFn& cond, const LoopBodyFn& body);

// i = 0, s = 0; while (i < n) { s += i; i += 1 }; returns (i, s). The body's
// new i is the node "<name>/i_next".
std::pair<Output, Output> SumLoop(GraphBuilder& b, const Output& n, int parallel, const std::string& name);

// A session over SumLoop(b, n, |parallel|, "loop") whose i and s are the
// nodes "count" and "sum", n fed as "n" (i64 scalar); null (and a failure)
// when it does not build.
std::unique_ptr<runtime::Session> SumLoopSession(RuntimeEnv& env, int parallel);

// sum_{i<a} sum_{j<c} i*j with an inner loop per outer iteration.
Output NestedProductSum(GraphBuilder& b, const Output& a, const Output& c, int parallel);

// acc = 0; for i < n: acc += table[i] (node "gloop/gather"), one iteration
// at a time; returns acc.
Output GatherLoop(GraphBuilder& b, const Output& n, const Output& table);

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_LOOP_TEST_GRAPHS_H_
