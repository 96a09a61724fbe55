// The executor's control-flow path, on graphs written op by op (the
// builders have their own tests): frames, iterations, dead values, loop
// invariants, parallel iterations, nesting, and errors inside loops.
// Expected values are closed forms worked out by hand.
#include <gtest/gtest.h>

#include "core/graph/builder.h"
#include "core/runtime/session.h"
#include "tests/support/loop_test_graphs.h"
#include "tests/support/runtime_env.h"

namespace weft {
namespace {

using testing::RuntimeEnv;

int64_t RunSum(RuntimeEnv& env, int64_t n, int parallel) {
  auto session = testing::SumLoopSession(env, parallel);
  std::vector<Tensor> out;
  Status status = session->Run({{"n", Tensor::Scalar<int64_t>(n)}}, {"sum"}, {}, &out);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return status.ok() ? out[0].scalar<int64_t>() : -1;
}

TEST(LoopExecutor, SumsWithOneIterationAtATime) {
  RuntimeEnv env;
  // sum_{i<n} i = n(n-1)/2
  for (int64_t n : {0, 1, 2, 10, 1000}) EXPECT_EQ(RunSum(env, n, 1), n * (n - 1) / 2) << "n=" << n;
}

TEST(LoopExecutor, ParallelIterationsGiveTheSameSum) {
  RuntimeEnv env;
  for (int64_t n : {0, 1, 2, 10, 1000}) {
    for (int parallel : {2, 10, 32}) EXPECT_EQ(RunSum(env, n, parallel), n * (n - 1) / 2) << "n=" << n;
  }
}

// A loop variable whose next value does not depend on itself (t = 3i,
// made through a chain of |chain| Identities) lets iterations finish out
// of order: t's NextIteration of an older iteration can run while the
// newest iteration's one is held back by parallel_iterations. The value
// held back must be the one delivered when the next iteration starts.
TEST(LoopExecutor, HeldBackValuesAreDeliveredWhenIterationsFinishOutOfOrder) {
  RuntimeEnv env;
  for (int chain : {0, 1, 2, 4, 7}) {
    for (int parallel : {1, 2, 3, 4}) {
      GraphBuilder b;
      Output limit = b.Placeholder(DType::kI64, Shape{}, "n");
      std::vector<Output> out = testing::RawLoop(
          b, "loop", parallel, {b.Scalar<int64_t>(0, "i0"), b.Scalar<int64_t>(-1, "t0")}, {limit},
          [&b](const std::vector<Output>& v, const std::vector<Output>& inv) {
            return b.Op("Less", {v[0], inv[0]});
          },
          [&b, chain](const std::vector<Output>& v, const std::vector<Output>&, const testing::InFrame& in) {
            Output t = b.Op("Mul", {v[0], in(3)});
            for (int k = 0; k < chain; ++k) t = b.Op("Identity", {t});
            return std::vector<Output>{b.Op("Add", {v[0], in(1)}), t};
          });
      b.Op("Identity", {out[1]}, {}, "t");
      auto session = env.Session(b);
      for (int64_t n : {1, 2, 5, 20}) {
        std::vector<Tensor> fetched;
        ASSERT_TRUE(session->Run({{"n", Tensor::Scalar<int64_t>(n)}}, {"t"}, {}, &fetched).ok());
        // The last iteration run is i = n - 1, so t = 3(n - 1).
        EXPECT_EQ(fetched[0].scalar<int64_t>(), 3 * (n - 1))
            << "chain " << chain << ", parallel " << parallel << ", n " << n;
      }
    }
  }
}

TEST(LoopExecutor, TheSameSessionRunsTheLoopAgain) {
  RuntimeEnv env;
  auto session = testing::SumLoopSession(env, 10);
  for (int64_t n = 0; n < 50; ++n) {
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({{"n", Tensor::Scalar<int64_t>(n)}}, {"count", "sum"}, {}, &out).ok());
    EXPECT_EQ(out[0].scalar<int64_t>(), n);
    EXPECT_EQ(out[1].scalar<int64_t>(), n * (n - 1) / 2);
  }
}

// The node "switch" of |value| on the fed bool "pred": its outputs 0 (pred
// false) and 1 (true).
std::vector<Output> SwitchOnPred(GraphBuilder& b, const Output& value) {
  Output pred = b.Placeholder(DType::kBool, Shape{}, "pred");
  return b.AddNode("Switch", {value, pred}, {}, "switch");
}

TEST(LoopExecutor, ACondTakesOneBranch) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  std::vector<Output> sw = SwitchOnPred(b, x);
  Output doubled = b.Op("Mul", {sw[1], b.Op("Identity", {sw[1]})}, {}, "square");  // true: x*x
  Output shifted = b.Op("Neg", {sw[0]}, {}, "neg");                                // false: -x
  std::vector<Output> merged = b.AddNode("Merge", {shifted, doubled}, {}, "merge");
  b.Op("Identity", {merged[0]}, {}, "y");
  b.Op("Identity", {merged[1]}, {}, "which");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(
      session->Run({{"x", Tensor::Scalar<float>(3)}, {"pred", Tensor::Scalar<bool>(true)}}, {"y", "which"}, {}, &out)
          .ok());
  EXPECT_EQ(out[0].scalar<float>(), 9);
  EXPECT_EQ(out[1].scalar<int32_t>(), 1);
  ASSERT_TRUE(
      session->Run({{"x", Tensor::Scalar<float>(3)}, {"pred", Tensor::Scalar<bool>(false)}}, {"y", "which"}, {}, &out)
          .ok());
  EXPECT_EQ(out[0].scalar<float>(), -3);
  EXPECT_EQ(out[1].scalar<int32_t>(), 0);
  // Fetching the branch not taken is an error, not a hang or garbage.
  Status s =
      session->Run({{"x", Tensor::Scalar<float>(3)}, {"pred", Tensor::Scalar<bool>(false)}}, {"square"}, {}, &out);
  EXPECT_NE(s.message().find("the fetched value is dead: it comes from the branch of a cond that was not taken"),
            std::string::npos)
      << s.ToString();
}

TEST(LoopExecutor, NestedLoopsRunTheInnerLoopPerOuterIteration) {
  RuntimeEnv env;
  for (int parallel : {1, 10}) {
    GraphBuilder b;
    Output outer_n = b.Placeholder(DType::kI64, Shape{}, "outer_n");
    Output inner_n = b.Placeholder(DType::kI64, Shape{}, "inner_n");
    Output total = testing::NestedProductSum(b, outer_n, inner_n, parallel);
    b.Op("Identity", {total}, {}, "total");
    auto session = env.Session(b);
    // sum_{i<a} sum_{j<c} i*j = (a(a-1)/2) * (c(c-1)/2)
    for (auto [a, c] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {1, 5}, {3, 4}, {7, 0}, {20, 30}}) {
      std::vector<Tensor> out;
      Status s = session->Run({{"outer_n", Tensor::Scalar<int64_t>(a)}, {"inner_n", Tensor::Scalar<int64_t>(c)}},
                              {"total"}, {}, &out);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(out[0].scalar<int64_t>(), (a * (a - 1) / 2) * (c * (c - 1) / 2)) << a << " x " << c;
    }
  }
}

TEST(LoopExecutor, ALoopInABranchNotTakenGivesDeadExits) {
  RuntimeEnv env;
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI64, Shape{}, "n");
  std::vector<Output> sw = SwitchOnPred(b, n);
  auto [i, s] = testing::SumLoop(b, sw[1], 10, "loop");  // true branch: the loop
  (void)i;
  Output other = b.Op("Neg", {sw[0]}, {}, "neg");  // false branch: -n
  std::vector<Output> merged = b.AddNode("Merge", {other, s}, {}, "merge");
  b.Op("Identity", {merged[0]}, {}, "y");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(
      session->Run({{"n", Tensor::Scalar<int64_t>(5)}, {"pred", Tensor::Scalar<bool>(true)}}, {"y"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), 10);
  Status st = session->Run({{"n", Tensor::Scalar<int64_t>(5)}, {"pred", Tensor::Scalar<bool>(false)}}, {"y"}, {}, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(out[0].scalar<int64_t>(), -5);
}

TEST(LoopExecutor, AnErrorInsideALoopNamesTheFrameAndIteration) {
  RuntimeEnv env;
  GraphBuilder b;
  Output limit = b.Placeholder(DType::kI64, Shape{}, "n");
  Output table = b.Const(Tensor::FromVector<float>({1, 2, 3}), "table");
  Output looked_up = testing::GatherLoop(b, limit, table);
  b.Op("Identity", {looked_up}, {}, "y");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  // Indices 0, 1, 2 are in range; iteration 3 reads index 3.
  Status ok = session->Run({{"n", Tensor::Scalar<int64_t>(3)}}, {"y"}, {}, &out);
  ASSERT_TRUE(ok.ok()) << ok.ToString();
  EXPECT_EQ(out[0].scalar<float>(), 6);
  Status s = session->Run({{"n", Tensor::Scalar<int64_t>(5)}}, {"y"}, {}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'gloop/gather' (Gather) on /device:CPU:0 (in loop \"gloop\" iteration 3): "),
            std::string::npos)
      << s.message();
}

TEST(LoopExecutor, EdgesBetweenFramesMustGoThroughEnterAndExit) {
  RuntimeEnv env;
  GraphBuilder b;
  Output limit = b.Placeholder(DType::kI64, Shape{}, "n");
  auto [i, s] = testing::SumLoop(b, limit, 10, "loop");
  (void)s;
  // Reads the loop's body value from outside the loop without an Exit.
  b.Op("Neg", {b.Find("loop/i_next")}, {}, "bad");
  b.Op("Add", {b.Op("Neg", {i}), b.Find("bad")}, {}, "y");
  auto graph = b.Build();
  ASSERT_TRUE(graph.ok()) << graph.status().ToString();
  runtime::SessionOptions options;
  auto session = env.Session(std::move(*graph));
  std::vector<Tensor> out;
  Status st = session->Run({{"n", Tensor::Scalar<int64_t>(3)}}, {"y"}, {}, &out);
  EXPECT_NE(st.message().find("node 'y' (Add) has inputs from two frames: "), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("a value enters a loop through Enter and leaves it through Exit"), std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace weft
