// Cond and WhileLoop graphs run by the Session on the CPU device: both
// branches, loops with several variables, nesting, captures,
// parallel_iterations and maximum_iterations. Expected values are
// closed forms or NumPy results (the command is next to each).
#include "core/graph/control_flow.h"

#include <gtest/gtest.h>

#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"

namespace weft {
namespace {

using testing::RuntimeEnv;
using Outputs = std::vector<Output>;

using testing::Values;

// Runs |fetches| of what |b| built with |feeds| (nothing on failure, which
// the caller checks before reading values).
std::vector<Tensor> RunGraph(RuntimeEnv& env, const GraphBuilder& b,
                             const std::vector<std::pair<std::string, Tensor>>& feeds,
                             const std::vector<std::string>& fetches) {
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run(feeds, fetches, {}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) out.clear();
  return out;
}

TEST(ControlFlowRun, CondTakesEitherBranch) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  auto r = Cond(
      b, p, [&]() -> Expected<Outputs> { return Outputs{b.Op("Neg", {x})}; },
      [&]() -> Expected<Outputs> {
        return Outputs{b.Op("Mul", {x, b.Const(Tensor::FromVector<float>({10, 100}), "scale")})};
      });
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string y = (*r)[0].name();
  const Tensor xv = Tensor::FromVector<float>({1.5f, -2});
  auto t = RunGraph(env, b, {{"x", xv}, {"p", Tensor::Scalar<bool>(true)}}, {y});
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(Values<float>(t[0]), (std::vector<float>{-1.5f, 2}));
  auto f = RunGraph(env, b, {{"x", xv}, {"p", Tensor::Scalar<bool>(false)}}, {y});
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(Values<float>(f[0]), (std::vector<float>{15, -200}));
}

// i = 0; s = 0; while (i < n) { i += 1; s += i; }  ->  s = n (n + 1) / 2.
TEST(ControlFlowRun, WhileSumsOneToN) {
  RuntimeEnv env;
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI32, Shape{}, "n");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output i = b.Op("Add", {v[0], b.Scalar<int32_t>(1)});
        return Outputs{i, b.Op("Add", {v[1], i})};
      },
      {b.Scalar<int32_t>(0), b.Scalar<int32_t>(0)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (int32_t value : {0, 1, 100, 1000}) {
    auto out = RunGraph(env, b, {{"n", Tensor::Scalar<int32_t>(value)}}, {(*r)[0].name(), (*r)[1].name()});
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out[0].scalar<int32_t>(), value);
    EXPECT_EQ(out[1].scalar<int32_t>(), value * (value + 1) / 2) << "n = " << value;
  }
}

// (a, b) = (0, 1); k times (a, b) = (b, a + b)  ->  a = F(k).
// F(30) = 832040, F(50) = 12586269025 (OEIS A000045).
TEST(ControlFlowRun, WhileComputesFibonacci) {
  RuntimeEnv env;
  GraphBuilder b;
  Output k = b.Placeholder(DType::kI64, Shape{}, "k");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], k});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Add", {v[0], b.Scalar<int64_t>(1)}), v[2], b.Op("Add", {v[1], v[2]})};
      },
      {b.Scalar<int64_t>(0), b.Scalar<int64_t>(0), b.Scalar<int64_t>(1)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto f30 = RunGraph(env, b, {{"k", Tensor::Scalar<int64_t>(30)}}, {(*r)[1].name()});
  ASSERT_FALSE(f30.empty());
  EXPECT_EQ(f30[0].scalar<int64_t>(), 832040);
  auto f50 = RunGraph(env, b, {{"k", Tensor::Scalar<int64_t>(50)}}, {(*r)[1].name()});
  ASSERT_FALSE(f50.empty());
  EXPECT_EQ(f50[0].scalar<int64_t>(), 12586269025);
}

// sum over i < n, j < m of i * j = (n (n - 1) / 2) (m (m - 1) / 2): the
// inner loop uses the outer loop's i and m from the top level.
TEST(ControlFlowRun, NestedLoops) {
  RuntimeEnv env;
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI32, Shape{}, "n");
  Output m = b.Placeholder(DType::kI32, Shape{}, "m");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output i = v[0];
        WEFT_ASSIGN_OR_RETURN(Outputs inner, WhileLoop(
                                                 b,
                                                 [&](const Outputs& w) -> Expected<Output> {
                                                   return b.Op("Less", {w[0], m});
                                                 },
                                                 [&](const Outputs& w) -> Expected<Outputs> {
                                                   return Outputs{b.Op("Add", {w[0], b.Scalar<int32_t>(1)}),
                                                                  b.Op("Add", {w[1], b.Op("Mul", {i, w[0]})})};
                                                 },
                                                 {b.Scalar<int32_t>(0), v[1]}));
        return Outputs{b.Op("Add", {i, b.Scalar<int32_t>(1)}), inner[1]};
      },
      {b.Scalar<int32_t>(0), b.Scalar<int32_t>(0)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (auto [nv, mv] : {std::pair{7, 5}, std::pair{10, 10}, std::pair{1, 9}, std::pair{23, 17}}) {
    auto out =
        RunGraph(env, b, {{"n", Tensor::Scalar<int32_t>(nv)}, {"m", Tensor::Scalar<int32_t>(mv)}}, {(*r)[1].name()});
    ASSERT_FALSE(out.empty());
    EXPECT_EQ(out[0].scalar<int32_t>(), (nv * (nv - 1) / 2) * (mv * (mv - 1) / 2)) << nv << " x " << mv;
  }
}

// Collatz: steps from 27 to 1 is 111 (OEIS A006577; also
//   /usr/bin/python3 -c "n=27;s=0
//   while n!=1: n=n//2 if n%2==0 else 3*n+1; s+=1
//   print(s)"), a cond in the loop body picking 3n+1 or n/2.
TEST(ControlFlowRun, CondInsideALoopCountsCollatzSteps) {
  RuntimeEnv env;
  GraphBuilder b;
  Output start = b.Placeholder(DType::kI64, Shape{}, "start");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("NotEqual", {v[0], b.Scalar<int64_t>(1)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output odd = b.Op("Equal", {b.Op("FloorMod", {v[0], b.Scalar<int64_t>(2)}), b.Scalar<int64_t>(1)});
        WEFT_ASSIGN_OR_RETURN(
            Outputs next,
            Cond(
                b, odd,
                [&]() -> Expected<Outputs> {
                  return Outputs{b.Op("Add", {b.Op("Mul", {v[0], b.Scalar<int64_t>(3)}), b.Scalar<int64_t>(1)})};
                },
                [&]() -> Expected<Outputs> {
                  return Outputs{b.Op("FloorDiv", {v[0], b.Scalar<int64_t>(2)})};
                }));
        return Outputs{next[0], b.Op("Add", {v[1], b.Scalar<int64_t>(1)})};
      },
      {start, b.Scalar<int64_t>(0)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto out = RunGraph(env, b, {{"start", Tensor::Scalar<int64_t>(27)}}, {(*r)[0].name(), (*r)[1].name()});
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].scalar<int64_t>(), 1);
  EXPECT_EQ(out[1].scalar<int64_t>(), 111);
  // 6 -> 3 -> 10 -> 5 -> 16 -> 8 -> 4 -> 2 -> 1 (by hand).
  out = RunGraph(env, b, {{"start", Tensor::Scalar<int64_t>(6)}}, {(*r)[1].name()});
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].scalar<int64_t>(), 8);
}

// M = I; 6 times M = M A, with A a constant outside the loop (captured).
// /usr/bin/python3 -c "import numpy as np; A=np.array([[0.5,0.25],[-0.75,1.0]]);
//   print(np.linalg.matrix_power(A,6)*4096)"  ->  [[-1619, 450], [-1350, -719]]
// (exact in f32: every entry is a multiple of 1/4096).
TEST(ControlFlowRun, MatrixPowerWithACapturedMatrix) {
  RuntimeEnv env;
  GraphBuilder b;
  Output a = b.Const(Tensor::FromVector<float>({0.5f, 0.25f, -0.75f, 1.0f}, Shape{2, 2}), "a");
  Output power = b.Placeholder(DType::kI32, Shape{}, "power");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], power});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), b.Op("MatMul", {v[1], a})};
      },
      {b.Scalar<int32_t>(0), b.Const(Tensor::FromVector<float>({1, 0, 0, 1}, Shape{2, 2}), "identity")});
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto out = RunGraph(env, b, {{"power", Tensor::Scalar<int32_t>(6)}}, {(*r)[1].name()});
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
  EXPECT_EQ(Values<float>(out[0]),
            (std::vector<float>{-1619.0f / 4096, 450.0f / 4096, -1350.0f / 4096, -719.0f / 4096}));
  out = RunGraph(env, b, {{"power", Tensor::Scalar<int32_t>(0)}}, {(*r)[1].name()});
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{1, 0, 0, 1}));
}

// s = 0; for i in 0..19: s = 2 s + i, and a vector v += c (c captured):
// /usr/bin/python3 -c "s=0
// for i in range(20): s=s*2+i
// print(s)"  ->  1048555; v = 20 c.
TEST(ControlFlowRun, ParallelIterationsDoNotChangeResults) {
  RuntimeEnv env;
  std::vector<std::vector<Tensor>> results;
  for (int parallel : {1, 10}) {
    GraphBuilder b;
    Output c = b.Const(Tensor::FromVector<int32_t>({1, -2, 3}), "c");
    WhileOptions options;
    options.parallel_iterations = parallel;
    auto r = WhileLoop(
        b,
        [&](const Outputs& v) -> Expected<Output> {
          return b.Op("Less", {v[0], b.Scalar<int32_t>(20)});
        },
        [&](const Outputs& v) -> Expected<Outputs> {
          return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}),
                         b.Op("Add", {b.Op("Mul", {v[1], b.Scalar<int32_t>(2)}), v[0]}), b.Op("Add", {v[2], c})};
        },
        {b.Scalar<int32_t>(0), b.Scalar<int32_t>(0), b.Const(Tensor::FromVector<int32_t>({0, 0, 0}), "v0")}, options);
    ASSERT_TRUE(r.ok()) << r.status().message();
    results.push_back(RunGraph(env, b, {}, {(*r)[1].name(), (*r)[2].name()}));
    ASSERT_FALSE(results.back().empty());
    EXPECT_EQ(results.back()[0].scalar<int32_t>(), 1048555) << "parallel_iterations " << parallel;
    EXPECT_EQ(Values<int32_t>(results.back()[1]), (std::vector<int32_t>{20, -40, 60}));
  }
  EXPECT_EQ(results[0][0].scalar<int32_t>(), results[1][0].scalar<int32_t>());
  EXPECT_EQ(Values<int32_t>(results[0][1]), Values<int32_t>(results[1][1]));
}

Expected<Output> CountTo(GraphBuilder& b, const Output& limit, std::optional<int64_t> maximum) {
  WhileOptions options;
  options.maximum_iterations = maximum;
  WEFT_ASSIGN_OR_RETURN(Outputs r, WhileLoop(
                                       b,
                                       [&](const Outputs& v) -> Expected<Output> {
                                         return b.Op("Less", {v[0], limit});
                                       },
                                       [&](const Outputs& v) -> Expected<Outputs> {
                                         return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)})};
                                       },
                                       {b.Scalar<int32_t>(0)}, options));
  return r[0];
}

TEST(ControlFlowRun, MaximumIterationsStopsTheLoop) {
  RuntimeEnv env;
  GraphBuilder b;
  Output limit = b.Placeholder(DType::kI32, Shape{}, "limit");
  auto capped = CountTo(b, limit, 7);
  auto zero = CountTo(b, limit, 0);
  auto free = CountTo(b, limit, std::nullopt);
  ASSERT_TRUE(b.status().ok()) << b.status().message();
  const std::vector<std::string> fetches = {capped->name(), zero->name(), free->name()};
  // The condition would go on to 1000: the cap stops it.
  auto out = RunGraph(env, b, {{"limit", Tensor::Scalar<int32_t>(1000)}}, fetches);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].scalar<int32_t>(), 7);
  EXPECT_EQ(out[1].scalar<int32_t>(), 0);
  EXPECT_EQ(out[2].scalar<int32_t>(), 1000);
  // The condition stops first.
  out = RunGraph(env, b, {{"limit", Tensor::Scalar<int32_t>(3)}}, fetches);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].scalar<int32_t>(), 3);
  EXPECT_EQ(out[1].scalar<int32_t>(), 0);
  EXPECT_EQ(out[2].scalar<int32_t>(), 3);
}

// p ? (count up to x) : x + 100, the loop starting from a tensor outside
// the cond.
TEST(ControlFlowRun, LoopInsideACond) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kI32, Shape{}, "x");
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  auto r = Cond(
      b, p,
      [&]() -> Expected<Outputs> {
        return WhileLoop(
            b,
            [&](const Outputs& v) -> Expected<Output> {
              return b.Op("Less", {v[0], b.Scalar<int32_t>(50)});
            },
            [&](const Outputs& v) -> Expected<Outputs> {
              return Outputs{b.Op("Add", {v[0], x})};
            },
            {x});
      },
      [&]() -> Expected<Outputs> {
        return Outputs{b.Op("Add", {x, b.Scalar<int32_t>(100)})};
      });
  ASSERT_TRUE(r.ok()) << r.status().message();
  // 7, 14, ..., 49, 56: the first multiple of 7 that is not below 50.
  auto out = RunGraph(env, b, {{"x", Tensor::Scalar<int32_t>(7)}, {"p", Tensor::Scalar<bool>(true)}}, {(*r)[0].name()});
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].scalar<int32_t>(), 56);
  out = RunGraph(env, b, {{"x", Tensor::Scalar<int32_t>(7)}, {"p", Tensor::Scalar<bool>(false)}}, {(*r)[0].name()});
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].scalar<int32_t>(), 107);
}

// A loop variable that grows (shape invariant [?]): 3 doublings of [1, 2].
TEST(ControlFlowRun, ShapeInvariantLetsAVectorGrow) {
  RuntimeEnv env;
  GraphBuilder b;
  WhileOptions options;
  options.shape_invariants = {Shape{}, Shape{-1}};
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(3)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}),
                       b.Op("Concat", {v[1], v[1]}, {{"axis", AttrValue(int64_t{0})}})};
      },
      {b.Scalar<int32_t>(0), b.Const(Tensor::FromVector<float>({1, 2}), "v0")}, options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto out = RunGraph(env, b, {}, {(*r)[1].name()});
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].shape(), Shape{16});
  EXPECT_EQ(Values<float>(out[0]), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2}));
}

}  // namespace
}  // namespace weft
