// The graph optimizer's passes (core/passes, docs/optimizer.md): what each
// must rewrite, what it must leave alone, and that the values a graph
// computes do not change. Expected values are written out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "core/base/strings.h"
#include "core/graph/control_flow.h"
#include "core/passes/pass.h"
#include "core/runtime/placement_support.h"
#include "core/runtime/run_rewrite.h"
#include "tests/integration/runtime_env.h"

namespace weft {
namespace {

using passes::OptimizeOptions;
using passes::OptimizeResult;
using passes::PassReport;

class GraphOptimizer : public ::testing::Test {
 protected:
  // The graph a run of |fetches| (and |targets|) executes, optimized at
  // |options|. Fails the test on an error.
  OptimizeResult Optimize(const GraphBuilder& b, const std::vector<std::string>& fetches,
                          const std::vector<std::string>& feeds = {}, OptimizeOptions options = {},
                          const std::vector<std::string>& targets = {}) {
    auto built = b.Build();
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    graph_ = std::make_unique<Graph>(std::move(*built));
    evaluator_ = env_.Session(Graph(*graph_));
    auto run = runtime::RewriteForRun(*graph_, feeds, fetches, targets);
    EXPECT_TRUE(run.ok()) << run.status().ToString();
    passes::PassContext context;
    context.keep.insert(run->roots.begin(), run->roots.end());
    context.evaluate = [this](GraphDef def, const std::vector<std::string>& outputs) {
      return evaluator_->EvaluateOnHost(std::move(def), outputs);
    };
    context.has_fused_kernel = [this](const NodeDef& node, const NodeDef& fused) {
      return has_fused_kernel_ && runtime::FusedKernelEverywhere(*env_.devices(), {}, node, fused);
    };
    auto result = passes::Optimize(run->graph, options, context);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? std::move(*result) : OptimizeResult{};
  }

  // Runs |fetches| of what |b| built at |level|.
  std::vector<Tensor> RunAt(const GraphBuilder& b, int level, const std::vector<std::string>& fetches,
                            const std::vector<std::pair<std::string, Tensor>>& feeds = {}) {
    runtime::SessionOptions options;
    options.optimizer.level = level;
    auto session = env_.Session(b, options);
    std::vector<Tensor> out;
    Status s = session->Run(feeds, fetches, {}, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  static int Count(const Graph& g, std::string_view op) {
    int n = 0;
    for (const Graph::Node& node : g.nodes()) n += node.op_name() == op ? 1 : 0;
    return n;
  }
  static const PassReport* Report(const OptimizeResult& r, std::string_view pass) {
    for (const PassReport& p : r.reports) {
      if (p.pass == pass) return &p;
    }
    return nullptr;
  }
  // The input of the _Retval of fetch |index|.
  static const Graph::Node& Fetched(const Graph& g, int index = 0) {
    for (const Graph::Node& node : g.nodes()) {
      if (node.op_name() == "_Retval" && node.def.attrs.at("index").get<int64_t>() == index) {
        return g.node(node.inputs[0].node);
      }
    }
    ADD_FAILURE() << "no _Retval " << index;
    return g.node(0);
  }

  testing::RuntimeEnv env_;
  bool has_fused_kernel_ = true;  // what the devices say, or false: none has
  std::unique_ptr<Graph> graph_;
  std::unique_ptr<runtime::Session> evaluator_;
};

Tensor F32(std::vector<float> v, Shape shape) { return Tensor::FromVector(v, shape); }

std::vector<float> Values(const Tensor& t) {
  const float* p = t.data<float>();
  return std::vector<float>(p, p + t.num_elements());
}

TEST_F(GraphOptimizer, IdentitiesAndNoOpsAreRemovedAndTheValuesStay) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2, 3}, "x");
  Output id = b.Op("Identity", {x}, {}, "id");
  Output stop = b.Op("StopGradient", {id}, {}, "stop");
  Output cast = b.Op("Cast", {stop}, {{"DstT", AttrValue(DType::kF32)}}, "same_cast");
  Output reshape = b.Op("Reshape", {cast, b.Const(Tensor::FromVector<int64_t>({2, 3}))}, {}, "same_reshape");
  Output y = b.Op("Relu", {reshape}, {}, "y");
  // Not removable: a real Cast, a Reshape that changes the shape.
  b.Op("Cast", {y}, {{"DstT", AttrValue(DType::kI32)}}, "to_int");
  b.Op("Reshape", {y, b.Const(Tensor::FromVector<int64_t>({6}))}, {}, "flat");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeResult r = Optimize(b, {"y", "to_int", "flat"}, {"x"});
  const Graph& g = *r.graph;
  EXPECT_EQ(g.Find("id"), nullptr);
  EXPECT_EQ(g.Find("stop"), nullptr);
  EXPECT_EQ(g.Find("same_cast"), nullptr);
  EXPECT_EQ(g.Find("same_reshape"), nullptr);
  ASSERT_NE(g.Find("y"), nullptr);
  EXPECT_EQ(g.node(g.Find("y")->inputs[0].node).op_name(), "_Arg");
  EXPECT_NE(g.Find("to_int"), nullptr);
  EXPECT_NE(g.Find("flat"), nullptr);
  const PassReport* report = Report(r, "identity_removal");
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->changed, 4);
  EXPECT_EQ(report->examples, (std::vector<std::string>{"id", "stop", "same_cast", "same_reshape"}));

  const Tensor feed = F32({-1, 2, -3, 4, -5, 6}, Shape{2, 3});
  auto out = RunAt(b, 1, {"y", "flat"}, {{"x", feed}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(Values(out[0]), (std::vector<float>{0, 2, 0, 4, 0, 6}));
  EXPECT_EQ(out[1].shape(), (Shape{6}));
}

TEST_F(GraphOptimizer, AnIdentityWithAControlInputATargetOrAfterASwitchStays) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  Output waits;
  {
    auto deps = b.ControlDependencies({b.Op("NoOp", {}, {}, "first")});
    waits = b.Op("Identity", {x}, {}, "waits");
  }
  b.Op("Identity", {x}, {}, "target");
  // The true branch's constant hangs on the branch's pivot (an Identity
  // of the Switch), which must stay.
  auto branches = Cond(
      b, p,
      [&]() -> Expected<std::vector<Output>> {
        return std::vector<Output>{b.Op("Sub", {b.Op("Neg", {x}), b.Scalar<float>(1)})};
      },
      [&]() -> Expected<std::vector<Output>> { return std::vector<Output>{x}; });
  ASSERT_TRUE(branches.ok()) << branches.status().ToString();
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  OptimizeResult r = Optimize(b, {"waits", (*branches)[0].name()}, {"x", "p"}, {}, {"target"});
  EXPECT_NE(r.graph->Find("waits"), nullptr);
  EXPECT_NE(r.graph->Find("target"), nullptr);
  // The cond's pivots read a Switch and carry its branches' control edges.
  EXPECT_NE(r.graph->Find("cond/switch_t"), nullptr);

  auto t = RunAt(b, 1, {(*branches)[0].name()}, {{"x", Tensor::Scalar<float>(2)}, {"p", Tensor::Scalar<bool>(true)}});
  auto f = RunAt(b, 1, {(*branches)[0].name()}, {{"x", Tensor::Scalar<float>(2)}, {"p", Tensor::Scalar<bool>(false)}});
  EXPECT_EQ(t[0].scalar<float>(), -3.0f);
  EXPECT_EQ(f[0].scalar<float>(), 2.0f);
}

TEST_F(GraphOptimizer, ArithmeticThatChangesNoBitIsSimplified) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{-1, 3}, "x");
  Output times_one = b.Op("Mul", {x, b.Scalar<float>(1)}, {}, "times_one");
  Output one_times = b.Op("Mul", {b.Const(F32({1, 1, 1}, Shape{1, 3})), times_one}, {}, "one_times");
  Output over_one = b.Op("RealDiv", {one_times, b.Scalar<float>(1)}, {}, "over_one");
  Output plus_minus_zero = b.Op("Add", {over_one, b.Scalar<float>(-0.0f)}, {}, "plus_minus_zero");
  Output minus_zero = b.Op("Sub", {plus_minus_zero, b.Scalar<float>(0.0f)}, {}, "minus_zero");
  Output neg = b.Op("Neg", {b.Op("Neg", {minus_zero}, {}, "neg1")}, {}, "neg2");
  Output y = b.Op("Relu", {neg}, {}, "y");
  // Kept: x + 0.0 turns -0.0 into 0.0; x * [[1],[1]] broadcasts x to more rows.
  b.Op("Add", {y, b.Scalar<float>(0.0f)}, {}, "plus_zero");
  b.Op("Mul", {x, b.Const(F32({1, 1}, Shape{2, 1}))}, {}, "times_column");
  b.Op("Mul", {x, b.Scalar<float>(2)}, {}, "times_two");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeResult r = Optimize(b, {"y", "plus_zero", "times_column", "times_two"}, {"x"});
  const Graph& g = *r.graph;
  for (const char* gone : {"times_one", "one_times", "over_one", "plus_minus_zero", "minus_zero", "neg1", "neg2"}) {
    EXPECT_EQ(g.Find(gone), nullptr) << gone;
  }
  EXPECT_EQ(g.node(g.Find("y")->inputs[0].node).op_name(), "_Arg");
  for (const char* kept : {"plus_zero", "times_column", "times_two"}) EXPECT_NE(g.Find(kept), nullptr) << kept;
  // Six rewrites: the inner Neg goes because nothing reads it any more.
  EXPECT_EQ(Report(r, "arithmetic")->changed, 6);

  const Tensor feed = F32({-0.0f, 1.5f, -2, 3, NAN, -4}, Shape{2, 3});
  auto zero = RunAt(b, 0, {"y", "plus_zero", "times_column"}, {{"x", feed}});
  auto one = RunAt(b, 1, {"y", "plus_zero", "times_column"}, {{"x", feed}});
  for (std::size_t i = 0; i < zero.size(); ++i) EXPECT_TRUE(zero[i].BitwiseEquals(one[i])) << i;
}

// A chain of 20,001 Negs: each double negation forwards its readers to the
// value two Negs up, so the forwards form one long chain that the editor
// must follow once, not once per reader (docs/optimizer.md). An odd count
// leaves one Neg: -x.
TEST_F(GraphOptimizer, ALongChainOfDoubleNegationsLeavesOneNeg) {
  constexpr int kNegs = 20001;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  for (int i = 0; i < kNegs; ++i) x = b.Op("Neg", {x}, {}, StrCat("n", i));
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  const std::string last = StrCat("n", kNegs - 1);
  OptimizeResult r = Optimize(b, {last}, {"x"});
  ASSERT_NE(r.graph, nullptr);
  EXPECT_EQ(Count(*r.graph, "Neg"), 1);
  EXPECT_EQ(r.graph->num_nodes(), 3);  // _Arg, one Neg, _Retval
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", F32({1.5f, -0.0f}, Shape{2})}};
  for (int level : {0, 1}) {
    std::vector<Tensor> out = RunAt(b, level, {last}, feeds);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(Values(out[0]), (std::vector<float>{-1.5f, 0.0f})) << "level " << level;
    EXPECT_FALSE(std::signbit(out[0].data<float>()[1])) << "level " << level;  // -(-0) is +0
  }
}

TEST_F(GraphOptimizer, StackedReshapesAndTransposesBecomeOneOrNone) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2, 3, 4}, "x");
  Output r1 = b.Op("Reshape", {x, b.Const(Tensor::FromVector<int64_t>({6, 4}))}, {}, "r1");
  b.Op("Reshape", {r1, b.Const(Tensor::FromVector<int64_t>({4, 6}))}, {}, "r2");
  Output t1 = b.Op("Transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "t1");
  Output t2 = b.Op("Transpose", {t1}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "t2");
  Output u1 = b.Op("Transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "u1");
  b.Op("Transpose", {u1}, {{"perm", AttrValue(std::vector<int64_t>{0, 2, 1})}}, "u2");
  b.Op("Relu", {t2}, {}, "cancel");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeResult r = Optimize(b, {"r2", "cancel", "u2"}, {"x"});
  const Graph& g = *r.graph;
  EXPECT_EQ(g.Find("r1"), nullptr);
  EXPECT_EQ(g.node(g.Find("r2")->inputs[0].node).op_name(), "_Arg");
  EXPECT_EQ(g.Find("t1"), nullptr);
  EXPECT_EQ(g.Find("t2"), nullptr);
  EXPECT_EQ(g.Find("u1"), nullptr);
  // u2 = Transpose(x, [1,0,2][[0,2,1]]) = Transpose(x, [1,2,0]).
  ASSERT_NE(g.Find("u2"), nullptr);
  EXPECT_EQ(g.Find("u2")->def.attrs.at("perm").get<std::vector<int64_t>>(), (std::vector<int64_t>{1, 2, 0}));

  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i);
  auto zero = RunAt(b, 0, {"r2", "cancel", "u2"}, {{"x", F32(v, Shape{2, 3, 4})}});
  auto one = RunAt(b, 1, {"r2", "cancel", "u2"}, {{"x", F32(v, Shape{2, 3, 4})}});
  for (std::size_t i = 0; i < zero.size(); ++i) EXPECT_TRUE(zero[i].BitwiseEquals(one[i])) << i;
  // Element [1][2][0] of u2 is x[2][0][1] = 2*4*... : x[i][j][k] = 12i + 4j + k, u2[a][b][c] = x[c][a][b].
  EXPECT_EQ(one[2].shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(one[2].data<float>()[(1 * 4 + 2) * 2 + 1], 12.0f * 1 + 4.0f * 1 + 2.0f);
}

// [1, 3, 2] -> [3, 1, 2] moves only the axis of size 1: every element keeps
// its offset, so the Transpose becomes a Reshape. [2, 3, 1] -> [3, 2, 1]
// swaps two axes of size > 1 and stays a Transpose.
TEST_F(GraphOptimizer, ATransposeOfUnitAxesBecomesAReshape) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{1, 3, 2}, "x");
  b.Op("Transpose", {x}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "unit");
  Output z = b.Placeholder(DType::kF32, Shape{2, 3, 1}, "z");
  b.Op("Transpose", {z}, {{"perm", AttrValue(std::vector<int64_t>{1, 0, 2})}}, "swap");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeResult r = Optimize(b, {"unit", "swap"}, {"x", "z"});
  const Graph& g = *r.graph;
  ASSERT_NE(g.Find("unit"), nullptr);
  EXPECT_EQ(g.Find("unit")->op_name(), "Reshape");
  EXPECT_EQ(g.Find("unit")->output_shapes[0], (Shape{3, 1, 2}));
  EXPECT_EQ(g.Find("swap")->op_name(), "Transpose");
  EXPECT_EQ(Report(r, "arithmetic")->examples, std::vector<std::string>{"unit"});

  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", F32({1, 2, 3, 4, 5, 6}, Shape{1, 3, 2})},
                                                             {"z", F32({1, 2, 3, 4, 5, 6}, Shape{2, 3, 1})}};
  auto zero = RunAt(b, 0, {"unit", "swap"}, feeds);
  auto one = RunAt(b, 1, {"unit", "swap"}, feeds);
  for (std::size_t i = 0; i < zero.size(); ++i) EXPECT_TRUE(zero[i].BitwiseEquals(one[i])) << i;
  EXPECT_EQ(one[0].shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(Values(one[0]), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // swap[i][j] = z[j][i]: [[1, 4], [2, 5], [3, 6]].
  EXPECT_EQ(Values(one[1]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST_F(GraphOptimizer, ShapesKnownWhenTheGraphIsBuiltBecomeConstants) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2, 5}, "x");
  Output batch = b.Placeholder(DType::kF32, Shape{-1, 5}, "batch");
  b.Op("Shape", {x}, {{"out_type", AttrValue(DType::kI64)}}, "shape");
  b.Op("Size", {x}, {}, "size");
  b.Op("Rank", {batch}, {}, "rank");
  b.Op("Shape", {batch}, {}, "batch_shape");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeResult r = Optimize(b, {"shape", "size", "rank", "batch_shape"}, {"x", "batch"});
  const Graph& g = *r.graph;
  EXPECT_EQ(g.Find("shape")->op_name(), "Const");
  EXPECT_EQ(g.Find("size")->op_name(), "Const");
  EXPECT_EQ(g.Find("rank")->op_name(), "Const");
  EXPECT_EQ(g.Find("batch_shape")->op_name(), "Shape");
  const Tensor& shape = g.Find("shape")->def.attrs.at("value").get<Tensor>();
  EXPECT_EQ(shape.dtype(), DType::kI64);
  EXPECT_EQ(shape.data<int64_t>()[0], 2);
  EXPECT_EQ(shape.data<int64_t>()[1], 5);
  EXPECT_EQ(g.Find("size")->def.attrs.at("value").get<Tensor>().scalar<int32_t>(), 10);
  EXPECT_EQ(g.Find("rank")->def.attrs.at("value").get<Tensor>().scalar<int32_t>(), 2);
  // Still after the tensor it describes.
  EXPECT_EQ(g.Find("shape")->control_inputs.size(), 1u);
}

TEST_F(GraphOptimizer, ConstantsAreFoldedUnderTheNamesOfTheNodesTheyReplace) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
  Output a = b.Const(F32({1, 2, 3}, Shape{3}), "a");
  Output two = b.Scalar<float>(2, "two");
  Output doubled = b.Op("Mul", {a, two}, {}, "doubled");  // 2 4 6
  Output sq = b.Op("Square", {doubled}, {}, "sq");        // 4 16 36
  b.Op("Add", {x, sq}, {}, "y");
  Output noise =
      b.Op("RandomUniform", {b.Const(Tensor::FromVector<int32_t>({3}))}, {{"dtype", AttrValue(DType::kF32)}}, "noise");
  b.Op("Add", {noise, a}, {}, "noisy");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeResult r = Optimize(b, {"y", "noisy", "doubled"}, {"x"});
  const Graph& g = *r.graph;
  // doubled is fetched, so it stays as a constant of its own; sq is read
  // by y, so it becomes one.
  ASSERT_NE(g.Find("sq"), nullptr);
  EXPECT_EQ(g.Find("sq")->op_name(), "Const");
  EXPECT_EQ(Values(g.Find("sq")->def.attrs.at("value").get<Tensor>()), (std::vector<float>{4, 16, 36}));
  EXPECT_EQ(g.Find("doubled")->op_name(), "Const");
  EXPECT_EQ(g.Find("two"), nullptr);  // read by folded nodes only
  // Random ops are stateful: never folded, and what reads them is not either.
  EXPECT_EQ(g.Find("noise")->op_name(), "RandomUniform");
  EXPECT_EQ(g.Find("noisy")->op_name(), "Add");
  EXPECT_EQ(Report(r, "constant_folding")->changed, 2);

  auto out = RunAt(b, 1, {"y", "doubled"}, {{"x", F32({1, 1, 1}, Shape{3})}});
  EXPECT_EQ(Values(out[0]), (std::vector<float>{5, 17, 37}));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{2, 4, 6}));
}

TEST_F(GraphOptimizer, AConstantTooLargeIsLeftAndSaid) {
  GraphBuilder b;
  // 2048 x 2048 f32: 16 MiB, over the 10 MiB limit.
  Output big = b.Op("Fill", {b.Const(Tensor::FromVector<int64_t>({2048, 2048})), b.Scalar<float>(0.5f)}, {}, "big");
  b.Op("Sum", {big}, {{"axis", AttrValue(std::vector<int64_t>{0, 1})}}, "total");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  OptimizeResult r = Optimize(b, {"total"});
  EXPECT_EQ(r.graph->Find("big")->op_name(), "Fill");
  EXPECT_EQ(r.graph->Find("total")->op_name(), "Sum");
  const PassReport* report = Report(r, "constant_folding");
  ASSERT_EQ(report->notes.size(), 1u);
  EXPECT_EQ(report->notes[0],
            "node 'big' (Fill) was not folded: its output 0 (f32[2048,2048]) would be a constant of 16 MiB, over the "
            "limit of 10 MiB");
  // A larger limit folds it all.
  OptimizeOptions generous;
  generous.max_constant_bytes = uint64_t{64} << 20;
  OptimizeResult folded = Optimize(b, {"total"}, {}, generous);
  EXPECT_EQ(folded.graph->Find("total")->op_name(), "Const");
  EXPECT_EQ(folded.graph->Find("total")->def.attrs.at("value").get<Tensor>().scalar<float>(), 2048.0f * 2048 * 0.5f);
}

TEST_F(GraphOptimizer, ANodeThatFailsIsNotFoldedAndTheRunFailsNamingIt) {
  // An op that fails only at run time: Gather with an index out of range.
  GraphBuilder d;
  Output table = d.Const(F32({1, 2, 3}, Shape{3}), "table");
  Output gathered = d.Op("Gather", {table, d.Const(Tensor::FromVector<int32_t>({0, 7}))}, {}, "gathered");
  d.Op("Neg", {gathered}, {}, "after");
  d.Op("Neg", {table}, {}, "good");
  ASSERT_TRUE(d.status().ok()) << d.status().ToString();
  OptimizeResult r = Optimize(d, {"after", "good"});
  EXPECT_EQ(r.graph->Find("gathered")->op_name(), "Gather");
  EXPECT_EQ(r.graph->Find("after")->op_name(), "Neg");
  EXPECT_EQ(r.graph->Find("good")->op_name(), "Const");
  const PassReport* report = Report(r, "constant_folding");
  ASSERT_FALSE(report->notes.empty());
  EXPECT_EQ(report->notes[0], "node 'gathered' (Gather) was not folded: it fails (the run will say why)");

  for (int level : {0, 1}) {
    runtime::SessionOptions options;
    options.optimizer.level = level;
    auto session = env_.Session(d, options);
    std::vector<Tensor> out;
    Status s = session->Run({}, {"after"}, {}, &out);
    ASSERT_FALSE(s.ok()) << level;
    EXPECT_NE(s.message().find("'gathered' (Gather)"), std::string::npos) << level << ": " << s.ToString();
  }
}

// A while loop that runs |n| times (a counter from 0) over one more value,
// |next| making its next value from the current one in the body.
Expected<std::vector<Output>> CountedLoop(GraphBuilder& b, Output n, Output init,
                                          const std::function<Output(Output)>& next) {
  return WhileLoop(
      b,
      [&](const std::vector<Output>& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
        Output value = next(v[1]);
        return std::vector<Output>{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), value};
      },
      {b.Scalar<int32_t>(0), init});
}

TEST_F(GraphOptimizer, AConstantInsideALoopIsFoldedAndStaysInTheLoop) {
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI32, Shape{}, "n");
  auto result = CountedLoop(b, n, b.Scalar<int32_t>(0), [&](Output sum) {
    // step = 2 * 3, made of constants inside the body.
    Output step = b.Op("Mul", {b.Scalar<int32_t>(2), b.Scalar<int32_t>(3)}, {}, "step");
    return b.Op("Add", {sum, step});
  });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  const std::string sum = (*result)[1].name();
  OptimizeResult r = Optimize(b, {sum}, {"n"});
  const Graph::Node* step = nullptr;
  for (const Graph::Node& node : r.graph->nodes()) {
    if (node.name().ends_with("/step")) step = &node;
  }
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->op_name(), "Const");
  EXPECT_EQ(step->def.attrs.at("value").get<Tensor>().scalar<int32_t>(), 6);
  ASSERT_FALSE(step->control_inputs.empty());  // the body's pivot: it runs once per iteration
  auto out = RunAt(b, 1, {sum}, {{"n", Tensor::Scalar<int32_t>(5)}});
  EXPECT_EQ(out[0].scalar<int32_t>(), 30);
}

// A Transpose of unit axes inside a loop body becomes a Reshape whose
// shape constant runs in the loop's frame too (after the Transpose's
// input): a constant with no inputs would run in the root frame, and the
// Reshape would read from two frames. Three times v = Transpose(2 (v + 1)^T)
// of a [1, 2] value from [0, 1]: [2, 4], [6, 10], [14, 22].
TEST_F(GraphOptimizer, ATransposeOfUnitAxesInALoopBecomesAReshapeInTheLoop) {
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI32, Shape{}, "n");
  auto result = CountedLoop(b, n, b.Const(F32({0, 1}, Shape{1, 2})), [&](Output v) {
    Output plus = b.Op("Add", {v, b.Scalar<float>(1.0f)}, {}, "plus");
    Output t = b.Op("Transpose", {plus}, {{"perm", AttrValue(std::vector<int64_t>{1, 0})}}, "flip");
    Output twice = b.Op("Mul", {t, b.Scalar<float>(2.0f)}, {}, "twice");
    return b.Op("Transpose", {twice}, {{"perm", AttrValue(std::vector<int64_t>{1, 0})}}, "back");
  });
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  const std::string value = (*result)[1].name();
  OptimizeOptions level1;  // level 2's reshape_sinking would move the Reshapes past the Mul, where they cancel
  level1.level = 1;
  OptimizeResult r = Optimize(b, {value}, {"n"}, level1);
  const Graph::Node* flip = nullptr;
  for (const Graph::Node& node : r.graph->nodes()) {
    if (node.name().ends_with("/flip")) flip = &node;
  }
  ASSERT_NE(flip, nullptr);
  EXPECT_EQ(flip->op_name(), "Reshape");
  EXPECT_FALSE(r.graph->node(flip->inputs[1].node).control_inputs.empty());  // runs in the loop's frame
  for (int level : {0, 1, 3}) {
    auto out = RunAt(b, level, {value}, {{"n", Tensor::Scalar<int32_t>(3)}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape(), (Shape{1, 2})) << "level " << level;
    EXPECT_EQ(Values(out[0]), (std::vector<float>{14, 22})) << "level " << level;
  }
}

TEST_F(GraphOptimizer, EqualNodesMergeButStatefulOnesNever) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
  Output r1 = b.Op("Relu", {x}, {}, "r1");
  Output r2 = b.Op("Relu", {x}, {}, "r2");
  Output s1 = b.Op("Sigmoid", {r1}, {}, "s1");
  Output s2 = b.Op("Sigmoid", {r2}, {}, "s2");
  b.Op("Add", {s1, s2}, {}, "sum");
  Output c1 = b.Const(F32({1, 2, 3}, Shape{3}), "c1");
  Output c2 = b.Const(F32({1, 2, 3}, Shape{3}), "c2");
  Output c3 = b.Const(F32({1, 2, 4}, Shape{3}), "c3");
  b.Op("AddN", {b.Op("Mul", {x, c1}), b.Op("Mul", {x, c2}), b.Op("Mul", {x, c3})}, {}, "consts");
  Output shape = b.Const(Tensor::FromVector<int32_t>({3}));
  Output n1 = b.Op("RandomUniform", {shape}, {{"dtype", AttrValue(DType::kF32)}, {"seed", AttrValue(1)}}, "n1");
  Output n2 = b.Op("RandomUniform", {shape}, {{"dtype", AttrValue(DType::kF32)}, {"seed", AttrValue(1)}}, "n2");
  b.Op("Sub", {n1, n2}, {}, "noise");
  b.Op("Transpose", {b.Op("Reshape", {x, b.Const(Tensor::FromVector<int64_t>({1, 3}))}, {}, "row")},
       {{"perm", AttrValue(std::vector<int64_t>{1, 0})}}, "t1");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeOptions no_folding;
  no_folding.disable = {"constant_folding"};
  OptimizeResult r = Optimize(b, {"sum", "consts", "noise", "t1"}, {"x"}, no_folding);
  const Graph& g = *r.graph;
  EXPECT_NE(g.Find("r1"), nullptr);
  EXPECT_EQ(g.Find("r2"), nullptr);
  EXPECT_EQ(g.Find("s2"), nullptr);
  EXPECT_EQ(g.Find("sum")->inputs[0], g.Find("sum")->inputs[1]);
  EXPECT_NE(g.Find("c1"), nullptr);
  EXPECT_EQ(g.Find("c2"), nullptr);
  EXPECT_NE(g.Find("c3"), nullptr);
  EXPECT_NE(g.Find("n1"), nullptr);
  EXPECT_NE(g.Find("n2"), nullptr);
  const PassReport* cse = Report(r, "cse");
  EXPECT_EQ(cse->changed, 4);  // r2, s2, c2, and Mul of x and c2
  EXPECT_EQ(Report(r, "constant_folding"), nullptr);

  auto zero = RunAt(b, 0, {"sum", "consts"}, {{"x", F32({-1, 0.5f, 2}, Shape{3})}});
  auto one = RunAt(b, 1, {"sum", "consts"}, {{"x", F32({-1, 0.5f, 2}, Shape{3})}});
  EXPECT_TRUE(zero[0].BitwiseEquals(one[0]));
  EXPECT_TRUE(zero[1].BitwiseEquals(one[1]));
  // x * (1 + 1 + 1), x * (2 + 2 + 2), x * (3 + 3 + 4)
  EXPECT_EQ(Values(one[1]), (std::vector<float>{-3, 3, 20}));
}

// Two equal initial values of variables that [placement.pins] put on
// different devices must not merge: the merged one would pull the other
// variable's initialiser (and with it the variable) onto its device for
// the init step only, and the next step would find that variable unset.
TEST_F(GraphOptimizer, NodesPinnedToDifferentDevicesNeverMerge) {
  testing::RuntimeEnv two("[devices.cpu]\ncount = 2\n");
  GraphBuilder b;
  std::vector<Output> inits;
  for (const char* scope : {"a", "b"}) {
    auto s = b.NameScope(scope);
    Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{4})}}, "v");
    Output zeros = b.Op("Fill", {b.Const(Tensor::FromVector<int64_t>({4})), b.Scalar<float>(0)}, {}, "zeros");
    inits.push_back(b.Op("Assign", {v, zeros}, {}, "init"));
    b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, "read");
  }
  {
    auto deps = b.ControlDependencies(inits);
    b.Op("NoOp", {}, {}, "init");
  }
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  runtime::SessionOptions options;
  options.placement.pins = {{"a/*", "/device:CPU:1", "test"}};
  auto built = b.Build();
  ASSERT_TRUE(built.ok());
  auto session = runtime::Session::Create(std::move(*built), two.devices(), options);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, nullptr).ok());
  const std::vector<PassReport> reports = (*session)->last_optimization();
  ASSERT_EQ(reports.size(), 11u);  // level 3: five passes of level 1, five of level 2, one of its own
  EXPECT_EQ(reports[5].pass, "cse");
  EXPECT_EQ(reports[5].changed, 0) << "merged: " << StrJoin(reports[5].examples, ", ");
  std::vector<Tensor> out;
  Status read = (*session)->Run({}, {"a/read", "b/read"}, {}, &out);
  ASSERT_TRUE(read.ok()) << read.ToString();
  EXPECT_EQ(Values(out[1]), (std::vector<float>{0, 0, 0, 0}));
}

// A node the graph or a pin asks to run on another kind of device is not
// folded on the host: it stays where it was asked to run (how a user tests
// a device's kernel).
TEST_F(GraphOptimizer, ANodeAskedForAnotherDeviceIsNotFolded) {
  GraphBuilder b;
  Output a = b.Const(F32({1, 2}, Shape{2}), "a");
  {
    auto scope = b.DeviceScope("/device:OPENCL:0");
    b.Op("Neg", {a}, {}, "scoped");
  }
  b.Op("Neg", {a}, {}, "pinned");
  b.Op("Neg", {a}, {}, "free");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  auto built = b.Build();
  ASSERT_TRUE(built.ok());
  auto run = runtime::RewriteForRun(*built, {}, {"scoped", "pinned", "free"}, {});
  ASSERT_TRUE(run.ok());
  auto evaluator = env_.Session(Graph(*built));
  placement::PlacementOptions placement;
  placement.pins = {{"pinned", "/device:OPENCL:0", "test"}};
  passes::PassContext context;
  context.keep.insert(run->roots.begin(), run->roots.end());
  context.evaluate = [&](GraphDef def, const std::vector<std::string>& outputs) {
    return evaluator->EvaluateOnHost(std::move(def), outputs);
  };
  context.requested_device = [&](const NodeDef& node) { return runtime::RequestedDevice(placement, node); };
  OptimizeOptions options;
  options.disable = {"cse"};  // scoped and pinned ask for the same device
  auto r = passes::Optimize(run->graph, options, context);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE(r->graph->Find("scoped"), nullptr);
  ASSERT_NE(r->graph->Find("pinned"), nullptr);
  EXPECT_EQ(r->graph->Find("scoped")->op_name(), "Neg");
  EXPECT_EQ(r->graph->Find("pinned")->op_name(), "Neg");
  EXPECT_EQ(r->graph->Find("free")->op_name(), "Const");
}

TEST_F(GraphOptimizer, OptionsAreCheckedWithAHint) {
  OptimizeOptions options;
  options.disable = {"constant_foldin"};
  Status s = passes::ValidateOptions(options);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "no graph optimizer pass is called \"constant_foldin\"; did you mean \"constant_folding\"? (the passes: "
            "identity_removal, arithmetic, shape_folding, weight_folding, constant_folding, cse, gelu_fusion, "
            "reshape_sinking, conv_fusion, matmul_fusion, winograd)");
  options.disable = {};
  options.level = 4;
  s = passes::ValidateOptions(options);
  EXPECT_EQ(s.message(), "optimization level 4 does not exist: levels go from 0 (none) to 3");
  // A session refuses them when it starts.
  runtime::SessionOptions session_options;
  session_options.optimizer.disable = {"css"};
  GraphBuilder b;
  b.Scalar<float>(1, "one");
  auto session = runtime::Session::Create(*b.Build(), env_.devices(), session_options);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().message(),
            "[graph_optimizer]: no graph optimizer pass is called \"css\"; did you mean \"cse\"? (the passes: "
            "identity_removal, arithmetic, shape_folding, weight_folding, constant_folding, cse, gelu_fusion, "
            "reshape_sinking, conv_fusion, matmul_fusion, winograd)");
}

TEST_F(GraphOptimizer, TheSessionReportsWhatItDid) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  b.Op("Add", {b.Op("Identity", {x}, {}, "id"), b.Op("Neg", {b.Const(F32({1, 2}, Shape{2}))}, {}, "minus")}, {}, "y");
  ASSERT_TRUE(b.status().ok());
  auto session = env_.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"x", F32({10, 20}, Shape{2})}}, {"y"}, {}, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<float>{9, 18}));
  const std::vector<PassReport> reports = session->last_optimization();
  ASSERT_EQ(reports.size(), 11u);  // level 3: five passes of level 1, five of level 2, one of its own
  EXPECT_EQ(reports[0].pass, "identity_removal");
  EXPECT_EQ(reports[0].changed, 1);
  EXPECT_EQ(reports[4].pass, "constant_folding");
  EXPECT_EQ(reports[4].changed, 1);
  EXPECT_EQ(reports[4].examples, std::vector<std::string>{"minus"});
}

// --- Level 2: fusions ------------------------------------------------------------------

// A 1x1 convolution of [1, 2, 2, 1] data with the filter [1, -1] (two
// output channels), a bias, a residual and a Relu: by hand, position p of
// x gives (x_p + 0.5, -x_p + 0.5) + r_p, then max(., 0).
TEST_F(GraphOptimizer, AConvolutionChainBecomesOneNodeNamedAfterItsLast) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{1, 2, 2, 1}, "x");
  Output r = b.Placeholder(DType::kF32, Shape{1, 2, 2, 2}, "r");
  Output f = b.Const(F32({1, -1}, Shape{1, 1, 1, 2}), "f");
  Output conv = b.Op("Conv2D", {x, f}, {{"padding", AttrValue(std::string("VALID"))}}, "conv");
  Output biased = b.Op("BiasAdd", {conv, b.Const(F32({0.5f, 0.5f}, Shape{2}), "bias")}, {}, "biased");
  Output sum = b.Op("Add", {biased, r}, {}, "sum");
  b.Op("Relu", {sum}, {}, "y");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeOptions options;
  options.level = 2;
  OptimizeResult result = Optimize(b, {"y"}, {"x", "r"}, options);
  const Graph& g = *result.graph;
  EXPECT_EQ(g.Find("conv"), nullptr);
  EXPECT_EQ(g.Find("biased"), nullptr);
  EXPECT_EQ(g.Find("sum"), nullptr);
  const Graph::Node* y = g.Find("y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->op_name(), "_FusedConv2D");
  EXPECT_TRUE(y->def.attrs.at("bias").get<bool>());
  EXPECT_TRUE(y->def.attrs.at("residual").get<bool>());
  EXPECT_TRUE(y->def.attrs.at("constant_filter").get<bool>());
  EXPECT_EQ(y->def.attrs.at("activation").get<std::string>(), "Relu");
  EXPECT_EQ(y->def.attrs.at("_fused_nodes").get<std::vector<std::string>>(),
            (std::vector<std::string>{"conv", "biased", "sum", "y"}));
  const PassReport* report = Report(result, "conv_fusion");
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->changed, 1);
  EXPECT_EQ(report->examples, std::vector<std::string>{"y"});

  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", F32({1, 2, 3, 4}, Shape{1, 2, 2, 1})},
                                                             {"r", F32({0, 1, 0, 2, -4, 0, 0, 4}, Shape{1, 2, 2, 2})}};
  const std::vector<float> want = {1.5f, 0.5f, 2.5f, 0.5f, 0, 0, 4.5f, 0.5f};
  for (int level : {0, 2}) EXPECT_EQ(Values(RunAt(b, level, {"y"}, feeds)[0]), want) << "level " << level;
}

// Level 3 allows Winograd's minimal filtering on 3x3 convolutions of
// stride and dilation 1 only. Ones convolved with ones over 16 channels
// SAME: each output is 16 times the number of taps inside the 4x4 input
// (9 inside, 6 on an edge, 4 in a corner), whichever way it is computed.
TEST_F(GraphOptimizer, WinogradIsAllowedOnThreeByThreeStrideOneConvolutionsOnly) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{1, 4, 4, 16}, "x");
  auto ones = [&](Shape shape, const std::string& name) {
    return b.Const(F32(std::vector<float>(static_cast<std::size_t>(shape.num_elements()), 1.0f), shape), name);
  };
  auto conv = [&](const std::string& name, Output filter, std::vector<int64_t> strides) {
    return b.Op("Conv2D", {x, filter},
                {{"padding", AttrValue(std::string("SAME"))}, {"strides", AttrValue(std::move(strides))}}, name);
  };
  conv("y", ones(Shape{3, 3, 16, 16}, "f3"), {1, 1, 1, 1});
  conv("strided", ones(Shape{3, 3, 16, 16}, "g3"), {1, 2, 2, 1});
  conv("pointwise", ones(Shape{1, 1, 16, 16}, "f1"), {1, 1, 1, 1});
  // A filter that may change (a training step's): fused for its Relu, but
  // its Winograd transform would be made every run.
  Output variable_filter = b.Placeholder(DType::kF32, Shape{3, 3, 16, 16}, "w");
  b.Op("Relu", {conv("variable_filter", variable_filter, {1, 1, 1, 1})}, {}, "variable");
  b.Op("DepthwiseConv2D", {x, ones(Shape{3, 3, 16, 1}, "d3")},
       {{"padding", AttrValue(std::string("SAME"))}, {"strides", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}},
       "depthwise");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  const std::vector<std::string> fetches = {"y", "strided", "pointwise", "depthwise", "variable"};

  OptimizeOptions options;
  options.level = 3;
  OptimizeResult result = Optimize(b, fetches, {"x", "w"}, options);
  const Graph& g = *result.graph;
  for (const std::string& name : fetches) {
    const Graph::Node* node = g.Find(name);
    ASSERT_NE(node, nullptr) << name;
    ASSERT_EQ(node->op_name(), "_FusedConv2D") << name;  // a constant filter, or a Relu
    EXPECT_EQ(node->def.attrs.at("winograd").get<bool>(), name == "y") << name;
  }
  const PassReport* report = Report(result, "winograd");
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->changed, 1);
  EXPECT_EQ(report->examples, std::vector<std::string>{"y"});
  // Not at level 2, nor when disabled.
  options.level = 2;
  EXPECT_FALSE(Optimize(b, {"y"}, {"x", "w"}, options).graph->Find("y")->def.attrs.at("winograd").get<bool>());
  options.level = 3;
  options.disable = {"winograd"};
  EXPECT_FALSE(Optimize(b, {"y"}, {"x", "w"}, options).graph->Find("y")->def.attrs.at("winograd").get<bool>());

  const std::vector<std::pair<std::string, Tensor>> feeds = {
      {"x", F32(std::vector<float>(256, 1.0f), Shape{1, 4, 4, 16})}};
  const int taps[4] = {2, 3, 3, 2};  // taps along one axis inside the input
  for (int level : {0, 3}) {
    const std::vector<float> got = Values(RunAt(b, level, {"y"}, feeds)[0]);
    ASSERT_EQ(got.size(), 256u);
    for (int i = 0; i < 256; ++i) {
      const int h = i / 64, w = (i / 16) % 4;
      EXPECT_NEAR(got[static_cast<std::size_t>(i)], 16.0f * static_cast<float>(taps[h] * taps[w]), 1e-4)
          << "level " << level << ", element " << i;
    }
  }
}

// x = [[1, 2], [3, 4]] padded by one row on top and one column on the
// right, then a 2x2 window of ones: [[0+0+1+2, 0+0+2+0], [1+2+3+4, 2+0+4+0]].
TEST_F(GraphOptimizer, AZeroPadBeforeAValidConvolutionBecomesItsPadding) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{1, 2, 2, 1}, "x");
  Output padded = b.Op("Pad", {x}, {{"paddings", AttrValue(std::vector<int64_t>{0, 0, 1, 0, 0, 1, 0, 0})}}, "pad");
  b.Op("Conv2D", {padded, b.Const(F32({1, 1, 1, 1}, Shape{2, 2, 1, 1}), "f")}, {}, "y");
  // Not folded: a Pad of another value, or of the channels.
  Output edge =
      b.Op("Pad", {x},
           {{"paddings", AttrValue(std::vector<int64_t>{0, 0, 1, 0, 0, 1, 0, 0})}, {"constant_value", AttrValue(1.0)}},
           "pad_ones");
  b.Op("Conv2D", {edge, b.Const(F32({1, 1, 1, 1}, Shape{2, 2, 1, 1}), "g")}, {}, "z");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeOptions options;
  options.level = 2;
  OptimizeResult result = Optimize(b, {"y", "z"}, {"x"}, options);
  const Graph& g = *result.graph;
  EXPECT_EQ(g.Find("pad"), nullptr);
  ASSERT_NE(g.Find("y"), nullptr);
  EXPECT_EQ(g.Find("y")->def.attrs.at("padding").get<std::string>(), "EXPLICIT");
  EXPECT_EQ(g.Find("y")->def.attrs.at("explicit_paddings").get<std::vector<int64_t>>(),
            (std::vector<int64_t>{1, 0, 0, 1}));
  ASSERT_NE(g.Find("pad_ones"), nullptr);
  EXPECT_EQ(g.Find("z")->def.attrs.at("padding").get<std::string>(), "VALID");

  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", F32({1, 2, 3, 4}, Shape{1, 2, 2, 1})}};
  for (int level : {0, 2}) {
    auto out = RunAt(b, level, {"y", "z"}, feeds);
    EXPECT_EQ(Values(out[0]), (std::vector<float>{3, 2, 10, 6})) << "level " << level;
    EXPECT_EQ(Values(out[1]), (std::vector<float>{5, 5, 10, 8})) << "level " << level;
  }
}

// A value something else reads, or that is fetched, ends the chain there:
// the fused node computes exactly that value, under its name.
TEST_F(GraphOptimizer, AValueReadElsewhereOrFetchedEndsTheChain) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{1, 1, 1, 2}, "x");
  Output f = b.Const(F32({1, 0, 0, 1}, Shape{1, 1, 2, 2}), "f");
  Output biased = b.Op("BiasAdd", {b.Op("Conv2D", {x, f}, {}, "conv"), b.Const(F32({-1, 1}, Shape{2}))}, {}, "biased");
  b.Op("Relu", {biased}, {}, "relu");
  b.Op("Sigmoid", {biased}, {}, "also");  // a second reader of biased
  Output biased2 =
      b.Op("BiasAdd", {b.Op("Conv2D", {x, f}, {}, "conv2"), b.Const(F32({2, 2}, Shape{2}))}, {}, "biased2");
  b.Op("Relu", {biased2}, {}, "relu2");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeOptions options;
  options.level = 2;
  options.disable = {"cse"};  // conv and conv2 are the same convolution
  OptimizeResult result = Optimize(b, {"relu", "also", "relu2", "biased2"}, {"x"}, options);
  const Graph& g = *result.graph;
  ASSERT_NE(g.Find("biased"), nullptr);
  EXPECT_EQ(g.Find("biased")->op_name(), "_FusedConv2D");
  EXPECT_EQ(g.Find("relu")->op_name(), "Relu");
  EXPECT_EQ(g.Find("also")->op_name(), "Sigmoid");
  ASSERT_NE(g.Find("biased2"), nullptr);  // fetched
  EXPECT_EQ(g.Find("biased2")->op_name(), "_FusedConv2D");
  EXPECT_EQ(g.Find("relu2")->op_name(), "Relu");

  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", F32({3, -4}, Shape{1, 1, 1, 2})}};
  for (int level : {0, 2}) {
    auto out = RunAt(b, level, {"relu", "relu2", "biased2"}, feeds);
    EXPECT_EQ(Values(out[0]), (std::vector<float>{2, 0})) << "level " << level;
    EXPECT_EQ(Values(out[1]), (std::vector<float>{5, 0})) << "level " << level;
    EXPECT_EQ(Values(out[2]), (std::vector<float>{5, -2})) << "level " << level;
  }
}

// Where no device that could run the node has the fused kernel, the nodes
// stay as they are (a third-party plugin without fused kernels).
TEST_F(GraphOptimizer, WithoutAFusedKernelTheNodesStay) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{1, 1, 1, 1}, "x");
  b.Op("Relu", {b.Op("Conv2D", {x, b.Const(F32({2}, Shape{1, 1, 1, 1}))}, {}, "conv")}, {}, "y");
  // f64 has no fused kernel on the CPU.
  Output x64 = b.Placeholder(DType::kF64, Shape{1, 1, 1, 1}, "x64");
  b.Op("Relu", {b.Op("Conv2D", {x64, b.Const(Tensor::FromVector<double>({2}, Shape{1, 1, 1, 1}))}, {}, "conv64")}, {},
       "y64");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  OptimizeOptions options;
  options.level = 2;
  OptimizeResult fused = Optimize(b, {"y", "y64"}, {"x", "x64"}, options);
  EXPECT_EQ(fused.graph->Find("y")->op_name(), "_FusedConv2D");
  EXPECT_EQ(fused.graph->Find("y64")->op_name(), "Relu");
  EXPECT_NE(fused.graph->Find("conv64"), nullptr);
  has_fused_kernel_ = false;
  OptimizeResult kept = Optimize(b, {"y", "y64"}, {"x", "x64"}, options);
  EXPECT_EQ(kept.graph->Find("y")->op_name(), "Relu");
  EXPECT_EQ(kept.graph->Find("conv")->op_name(), "Conv2D");

  // The devices' own answer: a node asked for a device that does not
  // exist here cannot be placed by its request; no fusion is promised.
  NodeDef conv = fused.graph->Find("y")->def;
  conv.op = "Conv2D";
  NodeDef fused_def = fused.graph->Find("y")->def;
  EXPECT_TRUE(runtime::FusedKernelEverywhere(*env_.devices(), {}, conv, fused_def));
  conv.device = "/device:TPU:0";
  EXPECT_FALSE(runtime::FusedKernelEverywhere(*env_.devices(), {}, conv, fused_def));
  placement::PlacementOptions pinned;
  pinned.pins = {{"y", "/device:TPU:*", "test"}};
  conv.device = "";
  EXPECT_FALSE(runtime::FusedKernelEverywhere(*env_.devices(), pinned, conv, fused_def));
}

// MatMul + bias + Gelu: [1, 2] x I + [0, -2] = [1, 0]; Gelu(1) =
// 0.5 (1 + erf(1 / sqrt 2)) = 0.8413447, Gelu(0) = 0. A 1x1 convolution
// with x * Sigmoid(x) after it: Swish(2) = 2 / (1 + e^-2) = 1.7615942.
TEST_F(GraphOptimizer, MatMulsAndSwishAreFused) {
  GraphBuilder b;
  Output a = b.Placeholder(DType::kF32, Shape{1, 2}, "a");
  Output mm = b.Op("MatMul", {a, b.Const(F32({1, 0, 0, 1}, Shape{2, 2}))}, {}, "mm");
  Output biased = b.Op("BiasAdd", {mm, b.Const(F32({0, -2}, Shape{2}))}, {}, "mm_bias");
  b.Op("Gelu", {biased}, {}, "gelu");
  Output x = b.Placeholder(DType::kF32, Shape{1, 1, 1, 2}, "x");
  Output conv = b.Op("Conv2D", {x, b.Const(F32({1, 0, 0, 1}, Shape{1, 1, 2, 2}))}, {}, "conv");
  b.Op("Mul", {conv, b.Op("Sigmoid", {conv}, {}, "sig")}, {}, "swish");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  OptimizeOptions options;
  options.level = 2;
  OptimizeResult result = Optimize(b, {"gelu", "swish"}, {"a", "x"}, options);
  const Graph& g = *result.graph;
  EXPECT_EQ(g.Find("gelu")->op_name(), "_FusedMatMul");
  EXPECT_EQ(g.Find("gelu")->def.attrs.at("activation").get<std::string>(), "Gelu");
  EXPECT_EQ(g.Find("swish")->op_name(), "_FusedConv2D");
  EXPECT_EQ(g.Find("swish")->def.attrs.at("activation").get<std::string>(), "Swish");
  EXPECT_EQ(g.Find("sig"), nullptr);
  EXPECT_EQ(Report(result, "matmul_fusion")->changed, 1);

  const std::vector<std::pair<std::string, Tensor>> feeds = {{"a", F32({1, 2}, Shape{1, 2})},
                                                             {"x", F32({0, 2}, Shape{1, 1, 1, 2})}};
  for (int level : {0, 2}) {
    auto out = RunAt(b, level, {"gelu", "swish"}, feeds);
    EXPECT_NEAR(Values(out[0])[0], 0.8413447f, 1e-6) << "level " << level;
    EXPECT_EQ(Values(out[0])[1], 0.0f) << "level " << level;
    EXPECT_EQ(Values(out[1])[0], 0.0f) << "level " << level;
    EXPECT_NEAR(Values(out[1])[1], 1.7615942f, 1e-6) << "level " << level;
  }
}

// A residual whose batch is left open in the graph is fused; at run time a
// residual of batch 1 is broadcast as Add did, and a product of batch 1
// against a wider residual (which Add would have widened) is refused,
// naming the way around it.
TEST_F(GraphOptimizer, AnOpenBatchResidualBroadcastsOrSaysWhyNot) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{-1, 1, 1, 1}, "x");
  Output r = b.Placeholder(DType::kF32, Shape{-1, 1, 1, 1}, "r");
  b.Op("Add", {b.Op("Conv2D", {x, b.Const(F32({2}, Shape{1, 1, 1, 1}))}, {}, "conv"), r}, {}, "y");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  OptimizeOptions options;
  options.level = 2;
  OptimizeResult result = Optimize(b, {"y"}, {"x", "r"}, options);
  ASSERT_EQ(result.graph->Find("y")->op_name(), "_FusedConv2D");
  EXPECT_TRUE(result.graph->Find("y")->def.attrs.at("residual").get<bool>());

  const std::vector<std::pair<std::string, Tensor>> narrow = {{"x", F32({1, 2}, Shape{2, 1, 1, 1})},
                                                              {"r", F32({10}, Shape{1, 1, 1, 1})}};
  for (int level : {0, 2}) EXPECT_EQ(Values(RunAt(b, level, {"y"}, narrow)[0]), (std::vector<float>{12, 14}));

  runtime::SessionOptions session_options;
  session_options.optimizer.level = 2;
  auto session = env_.Session(b, session_options);
  std::vector<Tensor> out;
  Status s =
      session->Run({{"x", F32({1}, Shape{1, 1, 1, 1})}, {"r", F32({10, 20}, Shape{2, 1, 1, 1})}}, {"y"}, {}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'y' (_FusedConv2D)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("the residual added after the product has shape [2,1,1,1] and the product [1,1,1,1]"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("run with --optimize 1"), std::string::npos) << s.message();
  EXPECT_EQ(
      Values(RunAt(b, 0, {"y"}, {{"x", F32({1}, Shape{1, 1, 1, 1})}, {"r", F32({10, 20}, Shape{2, 1, 1, 1})}})[0]),
      (std::vector<float>{12, 22}));
}

// x = [1, 2] through a 1x1 convolution with the filter [1, 2] gives
// [[1, 2], [2, 4]]. An inference batch norm with scale [2, 1], offset
// [1, 0], mean [1, 2], variance [3, 0] and epsilon 1 (so 1/sqrt(var + eps)
// is [0.5, 1]) gives channel 0 unchanged and channel 1 minus 2: [[1, 0],
// [2, 2]]; folded, the filter is [1, 2] * [1, 1] and the bias [0, -2]. A
// Mul by the constant [3, -1] instead gives [[3, -2], [6, -4]].
TEST_F(GraphOptimizer, FrozenBatchNormsAndChannelScalesFoldIntoTheWeights) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{1, 1, 2, 1}, "x");
  auto conv = [&](const std::string& name) {
    return b.Op("Conv2D", {x, b.Const(F32({1, 2}, Shape{1, 1, 1, 2}))}, {}, name);
  };
  auto vec = [&](std::vector<float> v) { return b.Const(F32(std::move(v), Shape{2})); };
  b.AddNode("FusedBatchNorm", {conv("conv"), vec({2, 1}), vec({1, 0}), vec({1, 2}), vec({3, 0})},
            {{"epsilon", AttrValue(1.0)}, {"is_training", AttrValue(false)}}, "bn");
  b.Op("Mul", {conv("conv2"), vec({3, -1})}, {}, "scaled");
  // Not frozen: the mean is fed.
  Output mean = b.Placeholder(DType::kF32, Shape{2}, "mean");
  b.AddNode("FusedBatchNorm", {conv("conv3"), vec({2, 1}), vec({1, 0}), mean, vec({3, 0})},
            {{"epsilon", AttrValue(1.0)}, {"is_training", AttrValue(false)}}, "bn_fed");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeOptions options;
  options.level = 2;
  options.disable = {"cse"};  // the three convolutions are one
  OptimizeResult result = Optimize(b, {"bn", "scaled", "bn_fed"}, {"x", "mean"}, options);
  const Graph& g = *result.graph;
  EXPECT_EQ(Count(g, "FusedBatchNorm"), 1);  // bn_fed's
  EXPECT_EQ(g.Find("bn")->op_name(), "_FusedConv2D");
  EXPECT_TRUE(g.Find("bn")->def.attrs.at("bias").get<bool>());
  EXPECT_EQ(g.Find("scaled")->op_name(), "_FusedConv2D");
  EXPECT_EQ(g.Find("bn_fed")->op_name(), "FusedBatchNorm");
  const PassReport* report = Report(result, "weight_folding");
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->changed, 2);
  EXPECT_EQ(report->examples, (std::vector<std::string>{"bn", "scaled"}));

  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", F32({1, 2}, Shape{1, 1, 2, 1})},
                                                             {"mean", F32({1, 2}, Shape{2})}};
  for (int level : {0, 2}) {
    auto out = RunAt(b, level, {"bn", "scaled", "bn_fed"}, feeds);
    EXPECT_EQ(Values(out[0]), (std::vector<float>{1, 0, 2, 2})) << "level " << level;
    EXPECT_EQ(Values(out[1]), (std::vector<float>{3, -2, 6, -4})) << "level " << level;
    EXPECT_EQ(Values(out[2]), (std::vector<float>{1, 0, 2, 2})) << "level " << level;
  }
}

// What an ONNX export of a linear layer and GELU looks like: a 2-D MatMul,
// a Reshape to 3-D, the bias, x * (1 + erf(x / sqrt 2)) * 0.5 in five ops,
// and a Reshape back. a = [[1, 0], [0, -1]] times the identity plus a zero
// bias gives GELU of [1, 0, 0, -1]: 0.5 (1 + erf(1 / sqrt 2)) = 0.8413447
// and -0.5 (1 - erf(1 / sqrt 2)) = -0.1586553.
TEST_F(GraphOptimizer, AnExportedLinearLayerWithGeluBecomesOneFusedMatMul) {
  GraphBuilder b;
  Output a = b.Placeholder(DType::kF32, Shape{2, 2}, "a");
  Output mm = b.Op("MatMul", {a, b.Const(F32({1, 0, 0, 1}, Shape{2, 2}))}, {}, "mm");
  Output up = b.Op("Reshape", {mm, b.Const(Tensor::FromVector<int64_t>({1, 2, 2}))}, {}, "up");
  Output x = b.Op("Add", {b.Const(F32({0, 0}, Shape{2})), up}, {}, "bias");
  Output erf = b.Op("Erf", {b.Op("Div", {x, b.Scalar<float>(1.4142135f)}, {}, "div")}, {}, "erf");
  Output half = b.Op(
      "Mul",
      {b.Op("Mul", {x, b.Op("Add", {erf, b.Scalar<float>(1.0f)}, {}, "one_plus")}, {}, "times"), b.Scalar<float>(0.5f)},
      {}, "gelu");
  b.Op("Reshape", {half, b.Const(Tensor::FromVector<int64_t>({2, 2}))}, {}, "y");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();

  OptimizeOptions options;
  options.level = 2;
  OptimizeResult result = Optimize(b, {"y"}, {"a"}, options);
  const Graph& g = *result.graph;
  EXPECT_EQ(Count(g, "Erf"), 0);
  EXPECT_EQ(Count(g, "Gelu"), 0);  // inside the fused MatMul
  EXPECT_EQ(Count(g, "_FusedMatMul"), 1);
  EXPECT_EQ(Count(g, "Reshape"), 0);  // moved down to y, which then reshaped 2x2 to 2x2 and went
  const Graph::Node& fused = Fetched(g);
  EXPECT_EQ(fused.op_name(), "_FusedMatMul");
  EXPECT_EQ(fused.def.attrs.at("activation").get<std::string>(), "Gelu");
  EXPECT_TRUE(fused.def.attrs.at("bias").get<bool>());
  EXPECT_EQ(Report(result, "gelu_fusion")->changed, 1);
  EXPECT_EQ(Report(result, "gelu_fusion")->examples, std::vector<std::string>{"gelu"});
  EXPECT_EQ(Report(result, "reshape_sinking")->changed, 1);  // past the bias and the Gelu at once
  EXPECT_EQ(Report(result, "reshape_sinking")->examples, std::vector<std::string>{"up"});

  const std::vector<std::pair<std::string, Tensor>> feeds = {{"a", F32({1, 0, 0, -1}, Shape{2, 2})}};
  for (int level : {0, 2}) {
    const std::vector<float> got = Values(RunAt(b, level, {"y"}, feeds)[0]);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_NEAR(got[0], 0.8413447f, 1e-6) << "level " << level;
    EXPECT_EQ(got[1], 0.0f) << "level " << level;
    EXPECT_EQ(got[2], 0.0f) << "level " << level;
    EXPECT_NEAR(got[3], -0.1586553f, 1e-6) << "level " << level;
  }
}

// A Reshape stays where the op after it broadcasts something other than a
// scalar or a last-axis vector, or changes the last axis under a vector.
TEST_F(GraphOptimizer, AReshapeStaysWhereMovingItWouldChangeTheBroadcast) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2, 3}, "x");
  Output r1 = b.Op("Reshape", {x, b.Const(Tensor::FromVector<int64_t>({3, 2}))}, {}, "r1");
  b.Op("Add", {r1, b.Const(F32({1, 2}, Shape{2}))}, {}, "last_axis_changes");
  Output r2 = b.Op("Reshape", {x, b.Const(Tensor::FromVector<int64_t>({1, 2, 3}))}, {}, "r2");
  b.Op("Add", {r2, b.Const(F32({1, 2}, Shape{2, 1}))}, {}, "not_a_vector");
  Output r3 = b.Op("Reshape", {x, b.Const(Tensor::FromVector<int64_t>({1, 2, 3}))}, {}, "r3");
  b.Op("Relu", {r3}, {}, "relu");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  OptimizeOptions options;
  options.level = 2;
  options.disable = {"cse"};
  OptimizeResult result = Optimize(b, {"last_axis_changes", "not_a_vector", "relu"}, {"x"}, options);
  const Graph& g = *result.graph;
  EXPECT_EQ(g.Find("last_axis_changes")->op_name(), "Add");
  EXPECT_EQ(g.Find("not_a_vector")->op_name(), "Add");
  EXPECT_EQ(g.Find("relu")->op_name(), "Reshape");  // the Relu moved before it
  EXPECT_EQ(Report(result, "reshape_sinking")->changed, 1);
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", F32({-1, 2, -3, 4, -5, 6}, Shape{2, 3})}};
  for (int level : {0, 2}) {
    auto out = RunAt(b, level, {"last_axis_changes", "not_a_vector", "relu"}, feeds);
    EXPECT_EQ(Values(out[0]), (std::vector<float>{0, 4, -2, 6, -4, 8})) << "level " << level;
    EXPECT_EQ(Values(out[1]), (std::vector<float>{0, 3, -2, 6, -3, 8})) << "level " << level;
    EXPECT_EQ(Values(out[2]), (std::vector<float>{0, 2, 0, 4, 0, 6})) << "level " << level;
    EXPECT_EQ(out[2].shape(), (Shape{1, 2, 3}));
  }
}

}  // namespace
}  // namespace weft
