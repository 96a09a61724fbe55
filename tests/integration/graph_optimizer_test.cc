// The graph optimizer's passes (core/passes, docs/optimizer.md): what each
// must rewrite, what it must leave alone, and that the values a graph
// computes do not change. Expected values are written out by hand. This
// file: level 1; the fusions of level 2 are in
// graph_optimizer_fusion_test.cc, the fixture in graph_optimizer_fixture.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "core/base/strings.h"
#include "core/graph/control_flow.h"
#include "tests/integration/graph_optimizer_fixture.h"

namespace weft::testing {
namespace {

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
  RuntimeEnv two("[devices.cpu]\ncount = 2\n");
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
  ASSERT_EQ(reports.size(), 12u);  // level 3: five passes of level 1, six of level 2, one of its own
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
            "reshape_sinking, conv_fusion, matmul_fusion, quantize_fusion, winograd)");
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
            "reshape_sinking, conv_fusion, matmul_fusion, quantize_fusion, winograd)");
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
  ASSERT_EQ(reports.size(), 12u);  // level 3: five passes of level 1, six of level 2, one of its own
  EXPECT_EQ(reports[0].pass, "identity_removal");
  EXPECT_EQ(reports[0].changed, 1);
  EXPECT_EQ(reports[4].pass, "constant_folding");
  EXPECT_EQ(reports[4].changed, 1);
  EXPECT_EQ(reports[4].examples, std::vector<std::string>{"minus"});
}

}  // namespace
}  // namespace weft::testing
