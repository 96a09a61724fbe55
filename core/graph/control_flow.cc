#include "core/graph/control_flow.h"

#include <memory>
#include <utility>

namespace weft {
namespace {

// Names in messages are single-quoted, like nodes elsewhere: "node 'x'".
std::string Quoted(std::string_view name) { return StrCat("'", name, "'"); }

// One branch of a cond: outside tensors enter through a Switch on the
// cond's predicate, and the branch's pivot (an Identity of the predicate's
// own Switch) anchors nodes without inputs.
class CondContext : public ControlFlowContext {
 public:
  CondContext(std::string name, Output pred, bool branch)
      : ControlFlowContext(std::move(name)), pred_(pred), branch_(branch) {}

  std::string Describe() const override {
    return StrCat("cond ", Quoted(name()), branch_ ? " (true branch)" : " (false branch)");
  }
  Output pivot() const override { return pivot_; }
  void set_pivot(Output pivot) { pivot_ = pivot; }

  Expected<Output> CaptureFromOuter(GraphBuilder& b, const Output& value) override {
    std::vector<Output> outs = b.AddNode("Switch", {value, pred_});
    WEFT_RETURN_IF_ERROR(b.status());
    return outs[branch_ ? 1 : 0];
  }

 private:
  Output pred_;  // visible in the enclosing context
  bool branch_;
  Output pivot_;
};

// A loop frame: outside tensors enter every iteration through an Enter
// with is_constant; the pivot is the first loop variable's Merge while the
// condition is built and its Identity while the body is.
class LoopContext : public ControlFlowContext {
 public:
  LoopContext(std::string name, int parallel_iterations)
      : ControlFlowContext(std::move(name)), parallel_iterations_(parallel_iterations) {}

  std::string Describe() const override { return StrCat("while loop ", Quoted(name())); }
  Output pivot() const override { return pivot_; }
  void set_pivot(Output pivot) { pivot_ = pivot; }

  Expected<Output> CaptureFromOuter(GraphBuilder& b, const Output& value) override {
    Output entered = b.Op("Enter", {value},
                          {{"frame_name", AttrValue(name())},
                           {"is_constant", AttrValue(true)},
                           {"parallel_iterations", AttrValue(int64_t{parallel_iterations_})}},
                          "Enter");
    WEFT_RETURN_IF_ERROR(b.status());
    return entered;
  }

 private:
  int parallel_iterations_;
  Output pivot_;
};

std::string TypeString(const Output& o) { return StrCat(DTypeName(o.dtype()), o.shape().ToString()); }

// True when |got| is at least as specific as |want|: same rank, and equal
// wherever |want| knows the dimension.
bool FitsShape(const Shape& got, const Shape& want) {
  if (want.unknown_rank()) return true;
  if (got.unknown_rank() || got.rank() != want.rank()) return false;
  for (int d = 0; d < want.rank(); ++d) {
    const int64_t w = want.dims()[static_cast<std::size_t>(d)];
    if (w >= 0 && got.dims()[static_cast<std::size_t>(d)] != w) return false;
  }
  return true;
}

// Runs a user function; its error, if any, becomes the builder's.
template <class T>
Expected<T> Call(GraphBuilder& b, const std::function<Expected<T>()>& fn) {
  Expected<T> result = fn();
  if (!result.ok()) return b.Fail(result.status());
  WEFT_RETURN_IF_ERROR(b.status());
  return result;
}

}  // namespace

Expected<std::vector<Output>> Cond(GraphBuilder& b, const Output& pred, const BranchFn& true_fn,
                                   const BranchFn& false_fn, std::string_view name) {
  WEFT_RETURN_IF_ERROR(b.status());
  ControlFlowContext* outer = b.current_context();
  auto scope = b.NameScope(name);
  const std::string cond_name = b.CurrentScope();
  const std::string what = StrCat("cond ", Quoted(cond_name));
  WEFT_ASSIGN_OR_RETURN(Output p, b.Capture(pred, StrCat(what, ": pred")));
  if (p.dtype() != DType::kBool || !p.shape().IsCompatibleWith(Shape{})) {
    return b.Fail(
        InvalidArgumentError(what, ": pred ", Quoted(pred.name()), " must be a scalar bool, is ", TypeString(p)));
  }
  std::vector<Output> sw = b.AddNode("Switch", {p, p});
  WEFT_RETURN_IF_ERROR(b.status());
  auto* true_ctx = static_cast<CondContext*>(b.AddContext(std::make_unique<CondContext>(cond_name, p, true)));
  auto* false_ctx = static_cast<CondContext*>(b.AddContext(std::make_unique<CondContext>(cond_name, p, false)));
  {
    auto raw = b.RawContext(true_ctx);
    true_ctx->set_pivot(b.Op("Identity", {sw[1]}, {}, "switch_t"));
  }
  {
    auto raw = b.RawContext(false_ctx);
    false_ctx->set_pivot(b.Op("Identity", {sw[0]}, {}, "switch_f"));
  }
  WEFT_RETURN_IF_ERROR(b.status());

  auto run_branch = [&](CondContext* ctx, const BranchFn& fn) -> Expected<std::vector<Output>> {
    auto enter = b.EnterContext(ctx);
    WEFT_ASSIGN_OR_RETURN(std::vector<Output> results, Call(b, fn));
    // A branch may return an outside tensor: it still has to go through
    // the branch's Switch so that only the taken branch reaches the Merge.
    for (std::size_t k = 0; k < results.size(); ++k) {
      WEFT_ASSIGN_OR_RETURN(results[k], b.Capture(results[k], StrCat(ctx->Describe(), ": result ", k)));
    }
    return results;
  };
  WEFT_ASSIGN_OR_RETURN(std::vector<Output> true_results, run_branch(true_ctx, true_fn));
  WEFT_ASSIGN_OR_RETURN(std::vector<Output> false_results, run_branch(false_ctx, false_fn));
  if (true_results.size() != false_results.size()) {
    return b.Fail(InvalidArgumentError(what, ": the true branch returns ", true_results.size(),
                                       " outputs and the false branch ", false_results.size(),
                                       "; both branches must return the same number"));
  }
  for (std::size_t k = 0; k < true_results.size(); ++k) {
    if (true_results[k].dtype() != false_results[k].dtype()) {
      return b.Fail(InvalidArgumentError(what, ": output ", k, " is ", DTypeName(true_results[k].dtype()),
                                         " in the true branch and ", DTypeName(false_results[k].dtype()),
                                         " in the false branch; both branches must return the same dtypes"));
    }
  }
  std::vector<Output> merged;
  auto raw = b.RawContext(outer);
  for (std::size_t k = 0; k < true_results.size(); ++k) {
    std::vector<Output> m = b.AddNode("Merge", {false_results[k], true_results[k]}, {}, "Merge");
    WEFT_RETURN_IF_ERROR(b.status());
    merged.push_back(m[0]);
  }
  return merged;
}

Expected<std::vector<Output>> WhileLoop(GraphBuilder& b, const LoopCondFn& cond_fn, const LoopBodyFn& body_fn,
                                        const std::vector<Output>& loop_vars, const WhileOptions& options) {
  WEFT_RETURN_IF_ERROR(b.status());
  const std::string requested = StrCat("while loop ", Quoted(options.name));
  if (loop_vars.empty()) return b.Fail(InvalidArgumentError(requested, ": needs at least one loop variable"));
  if (options.parallel_iterations < 1) {
    return b.Fail(InvalidArgumentError(requested, ": parallel_iterations is ", options.parallel_iterations,
                                       "; it must be at least 1"));
  }
  if (!options.shape_invariants.empty() && options.shape_invariants.size() != loop_vars.size()) {
    return b.Fail(InvalidArgumentError(requested, ": ", options.shape_invariants.size(), " shape invariants for ",
                                       loop_vars.size(), " loop variables; give none or one per loop variable"));
  }
  if (options.maximum_iterations && *options.maximum_iterations < 0) {
    return b.Fail(InvalidArgumentError(requested, ": maximum_iterations is ", *options.maximum_iterations,
                                       "; it must be at least 0"));
  }
  ControlFlowContext* outer = b.current_context();
  auto scope = b.NameScope(options.name);
  const std::string frame = b.CurrentScope();
  const std::string what = StrCat("while loop ", Quoted(frame));
  const std::size_t num_user = loop_vars.size();

  // Loop variables, made visible here (a loop in a cond branch may start
  // from tensors outside the cond), plus the iteration counter.
  std::vector<Output> vars;
  for (std::size_t k = 0; k < num_user; ++k) {
    WEFT_ASSIGN_OR_RETURN(Output v, b.Capture(loop_vars[k], StrCat(what, ": loop variable ", k)));
    vars.push_back(v);
  }
  Output max_iterations;
  if (options.maximum_iterations) {
    vars.push_back(b.Scalar<int64_t>(0, "iteration_counter"));
    max_iterations = b.Scalar<int64_t>(*options.maximum_iterations, "maximum_iterations");
    WEFT_RETURN_IF_ERROR(b.status());
  }
  const std::size_t n = vars.size();

  auto* ctx =
      static_cast<LoopContext*>(b.AddContext(std::make_unique<LoopContext>(frame, options.parallel_iterations)));
  std::vector<Output> merges;
  std::vector<int> merge_nodes;
  {
    auto raw = b.RawContext(ctx, /*keep_control_dependencies=*/true);
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<Shape> invariant;
      if (k < options.shape_invariants.size()) invariant.push_back(options.shape_invariants[k]);
      Output enter = b.Op("Enter", {vars[k]},
                          {{"frame_name", AttrValue(frame)},
                           {"is_constant", AttrValue(false)},
                           {"parallel_iterations", AttrValue(int64_t{options.parallel_iterations})},
                           {"shape_invariant", AttrValue(std::move(invariant))}},
                          "Enter");
      merges.push_back(enter);
    }
  }
  {
    auto raw = b.RawContext(ctx);
    for (std::size_t k = 0; k < n; ++k) {
      const Output enter = merges[k];
      // The second input becomes the NextIteration once the body exists.
      std::vector<Output> merge = b.AddNode("Merge", {enter, enter}, {}, "Merge");
      WEFT_RETURN_IF_ERROR(b.status());
      merges[k] = merge[0];
      merge_nodes.push_back(merge[0].node());
    }
  }

  ctx->set_pivot(merges[0]);
  Output keep_going;
  {
    auto enter = b.EnterContext(ctx);
    const std::vector<Output> user(merges.begin(), merges.begin() + static_cast<std::ptrdiff_t>(num_user));
    WEFT_ASSIGN_OR_RETURN(Output c, Call<Output>(b, [&] { return cond_fn(user); }));
    if (!c.valid() || c.index() < 0) return b.Fail(InvalidArgumentError(what, ": the condition is not a valid output"));
    WEFT_ASSIGN_OR_RETURN(c, b.Capture(c, StrCat(what, ": condition")));
    if (c.dtype() != DType::kBool || !c.shape().IsCompatibleWith(Shape{})) {
      return b.Fail(InvalidArgumentError(what, ": the condition must be a scalar bool; ", Quoted(c.name()), " is ",
                                         TypeString(c)));
    }
    if (options.maximum_iterations) {
      Output below = b.Op("Less", {merges.back(), max_iterations}, {}, "below_maximum_iterations");
      c = b.Op("LogicalAnd", {c, below});
    }
    keep_going = b.Op("LoopCond", {c}, {}, "LoopCond");
    WEFT_RETURN_IF_ERROR(b.status());
  }

  std::vector<Output> exits_from, body_inputs;
  {
    auto raw = b.RawContext(ctx);
    for (std::size_t k = 0; k < n; ++k) {
      std::vector<Output> sw = b.AddNode("Switch", {merges[k], keep_going}, {}, "Switch");
      WEFT_RETURN_IF_ERROR(b.status());
      exits_from.push_back(sw[0]);
      body_inputs.push_back(b.Op("Identity", {sw[1]}, {}, "Identity"));
    }
    WEFT_RETURN_IF_ERROR(b.status());
  }

  ctx->set_pivot(body_inputs[0]);
  {
    auto enter = b.EnterContext(ctx);
    const std::vector<Output> user(body_inputs.begin(), body_inputs.begin() + static_cast<std::ptrdiff_t>(num_user));
    WEFT_ASSIGN_OR_RETURN(std::vector<Output> results, Call<std::vector<Output>>(b, [&] { return body_fn(user); }));
    if (results.size() != num_user) {
      return b.Fail(InvalidArgumentError(what, ": the body returns ", results.size(), " values for ", num_user,
                                         " loop variables"));
    }
    for (std::size_t k = 0; k < num_user; ++k) {
      if (!results[k].valid() || results[k].index() < 0) {
        return b.Fail(InvalidArgumentError(what, ": body result ", k, " is not a valid output"));
      }
      WEFT_ASSIGN_OR_RETURN(results[k], b.Capture(results[k], StrCat(what, ": body result ", k)));
      const Output& r = results[k];
      if (r.dtype() != merges[k].dtype()) {
        return b.Fail(InvalidArgumentError(what, ": loop variable ", k, " is ", DTypeName(merges[k].dtype()),
                                           " but the body returns ", DTypeName(r.dtype()), " (", Quoted(r.name()),
                                           "); a loop variable keeps its dtype"));
      }
      if (!FitsShape(r.shape(), merges[k].shape())) {
        const bool has_invariant = k < options.shape_invariants.size();
        return b.Fail(InvalidArgumentError(
            what, ": loop variable ", k,
            has_invariant ? StrCat(" has shape invariant ", merges[k].shape().ToString())
                          : StrCat(" enters with shape ", merges[k].shape().ToString()),
            " but the body returns ", Quoted(r.name()), " of shape ", r.shape().ToString(),
            has_invariant ? "; relax its entry in shape_invariants (-1 for a dimension that may change)"
                          : "; give WhileOptions::shape_invariants (-1 for a dimension that may change) to let "
                            "it change shape"));
      }
    }
    if (options.maximum_iterations) {
      results.push_back(b.Op("Add", {body_inputs.back(), b.Scalar<int64_t>(1)}, {}, "next_iteration_count"));
    }
    for (std::size_t k = 0; k < n; ++k) {
      Output next = b.Op("NextIteration", {results[k]}, {}, "NextIteration");
      WEFT_RETURN_IF_ERROR(b.status());
      WEFT_RETURN_IF_ERROR(b.Fail(b.SetInput(merge_nodes[k], 1, next)));
    }
  }

  std::vector<Output> exits;
  auto raw = b.RawContext(outer);
  for (std::size_t k = 0; k < num_user; ++k) exits.push_back(b.Op("Exit", {exits_from[k]}, {}, "Exit"));
  WEFT_RETURN_IF_ERROR(b.status());
  return exits;
}

}  // namespace weft
