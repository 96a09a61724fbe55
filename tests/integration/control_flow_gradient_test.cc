// Gradients through conds and while loops (grad/control_flow_grad.h),
// checked against central finite differences of the same graph run
// forward, in f64: both branches of a cond, loops with carried values and
// invariants, nested loops, a cond inside a loop, parallel iterations,
// maximum_iterations and variables read inside a loop. Closed forms are
// given where a pattern has one.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/grad/gradients.h"
#include "core/graph/control_flow.h"
#include "core/graph/nn_builders.h"
#include "tests/support/runtime_env.h"

namespace weft {
namespace {

using testing::RuntimeEnv;
using Outputs = std::vector<Output>;
using Feeds = std::vector<std::pair<std::string, Tensor>>;

constexpr char kCpuOnly[] = "[plugins]\ndisable = [\"opencl\", \"cuda\", \"hip\"]\n";

Tensor Doubles(const std::vector<double>& values, const Shape& shape) {
  return Tensor::FromVector<double>(values, shape);
}

std::vector<double> Values(const Tensor& t) {
  return std::vector<double>(t.data<double>(), t.data<double>() + t.num_elements());
}

struct Param {
  std::string name;
  Tensor value;
};

// Builds the scalar loss from the parameters' placeholders.
using LossFn = std::function<Expected<Output>(GraphBuilder& b, const Outputs& params)>;

struct Checked {
  double loss = 0;
  std::vector<std::vector<double>> grads;  // symbolic, per parameter
};

// Builds loss_fn and its gradients, runs them, and compares each gradient
// element with (loss(p + h) - loss(p - h)) / 2h, h = 1e-6. Returns the
// symbolic values for further checks.
Checked CheckAgainstFiniteDifferences(const std::vector<Param>& params, const LossFn& loss_fn, const Feeds& extra = {},
                                      double tolerance = 1e-6) {
  Checked result;
  RuntimeEnv env(kCpuOnly);
  GraphBuilder b;
  Outputs ps;
  for (const Param& p : params) ps.push_back(b.Placeholder(p.value.dtype(), p.value.shape(), p.name));
  auto loss = loss_fn(b, ps);
  EXPECT_TRUE(loss.ok()) << loss.status().ToString();
  if (!loss.ok()) return result;
  Output y = b.Op("Identity", {*loss}, {}, "loss");
  auto grads = grad::AddGradients(b, {y}, ps);
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  if (!grads.ok()) return result;
  std::vector<std::string> fetches = {"loss"};
  for (const Output& g : *grads) fetches.push_back(g.name());
  auto session = env.Session(b);
  Feeds feeds = extra;
  for (const Param& p : params) feeds.emplace_back(p.name, p.value);
  std::vector<Tensor> out;
  Status s = session->Run(feeds, fetches, {}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return result;
  result.loss = out[0].scalar<double>();
  auto loss_at = [&](std::size_t which, const Tensor& value) {
    Feeds f = extra;
    for (std::size_t i = 0; i < params.size(); ++i)
      f.emplace_back(params[i].name, i == which ? value : params[i].value);
    std::vector<Tensor> o;
    Status st = session->Run(f, {"loss"}, {}, &o);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return st.ok() ? o[0].scalar<double>() : NAN;
  };
  constexpr double h = 1e-6;
  for (std::size_t i = 0; i < params.size(); ++i) {
    result.grads.push_back(Values(out[1 + i]));
    const std::vector<double> base = Values(params[i].value);
    EXPECT_EQ(result.grads.back().size(), base.size()) << params[i].name;
    if (result.grads.back().size() != base.size()) return result;
    for (std::size_t e = 0; e < base.size(); ++e) {
      std::vector<double> plus = base, minus = base;
      plus[e] += h;
      minus[e] -= h;
      const double numeric =
          (loss_at(i, Doubles(plus, params[i].value.shape())) - loss_at(i, Doubles(minus, params[i].value.shape()))) /
          (2 * h);
      const double symbolic = result.grads.back()[e];
      EXPECT_NEAR(symbolic, numeric, tolerance * std::max(1.0, std::fabs(numeric)))
          << "d loss / d " << params[i].name << "[" << e << "]";
    }
  }
  return result;
}

Output Sum(GraphBuilder& b, const Output& x) { return b.Op("Sum", {x}); }

// loss = sum(p ? x * x * w : sin(x) * w), both branches.
TEST(ControlFlowGradient, CondBothBranches) {
  for (bool take : {true, false}) {
    auto c = CheckAgainstFiniteDifferences(
        {{"x", Doubles({0.5, -1.25, 2}, Shape{3})}, {"w", Doubles({1.5, 0.25, -0.75}, Shape{3})}},
        [](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
          Output pred = b.Placeholder(DType::kBool, Shape{}, "pred");
          WEFT_ASSIGN_OR_RETURN(Outputs r, Cond(
                                               b, pred,
                                               [&]() -> Expected<Outputs> {
                                                 return Outputs{b.Op("Mul", {b.Op("Mul", {p[0], p[0]}), p[1]})};
                                               },
                                               [&]() -> Expected<Outputs> {
                                                 return Outputs{b.Op("Mul", {b.Op("Sin", {p[0]}), p[1]})};
                                               }));
          return Sum(b, r[0]);
        },
        {{"pred", Tensor::Scalar<bool>(take)}});
    ASSERT_EQ(c.grads.size(), 2u);
    // d/dx: 2 x w or cos(x) w; d/dw: x^2 or sin(x).
    const double x0 = 0.5, w0 = 1.5;
    EXPECT_NEAR(c.grads[0][0], take ? 2 * x0 * w0 : std::cos(x0) * w0, 1e-12) << (take ? "true" : "false");
    EXPECT_NEAR(c.grads[1][0], take ? x0 * x0 : std::sin(x0), 1e-12);
  }
}

// A branch that ignores x, and a branch returning an outside tensor as is.
TEST(ControlFlowGradient, CondWithUnusedAndPassThroughBranches) {
  for (bool take : {true, false}) {
    auto c = CheckAgainstFiniteDifferences(
        {{"x", Doubles({0.5, 3}, Shape{2})}},
        [](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
          Output pred = b.Placeholder(DType::kBool, Shape{}, "pred");
          WEFT_ASSIGN_OR_RETURN(Outputs r, Cond(
                                               b, pred, [&]() -> Expected<Outputs> { return Outputs{p[0]}; },
                                               [&]() -> Expected<Outputs> {
                                                 return Outputs{b.Const(Tensor::FromVector<double>({7, 8}, Shape{2}))};
                                               }));
          return Sum(b, b.Op("Mul", {r[0], p[0]}));
        },
        {{"pred", Tensor::Scalar<bool>(take)}});
    ASSERT_EQ(c.grads.size(), 1u);
    // true: sum(x * x) -> 2x; false: sum(c * x) -> c.
    EXPECT_EQ(c.grads[0], take ? (std::vector<double>{1, 6}) : (std::vector<double>{7, 8}));
  }
}

// v = x; n times v = v * w + sin(v); loss = sum(v). w is a loop invariant.
LossFn RecurrenceLoss(int parallel_iterations, int n) {
  return [=](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
    WhileOptions options;
    options.parallel_iterations = parallel_iterations;
    WEFT_ASSIGN_OR_RETURN(Outputs r, WhileLoop(
                                         b,
                                         [&](const Outputs& v) -> Expected<Output> {
                                           return b.Op("Less", {v[0], b.Scalar<int32_t>(n)});
                                         },
                                         [&](const Outputs& v) -> Expected<Outputs> {
                                           return Outputs{
                                               b.Op("Add", {v[0], b.Scalar<int32_t>(1)}),
                                               b.Op("Add", {b.Op("Mul", {v[1], p[1]}), b.Op("Sin", {v[1]})})};
                                         },
                                         {b.Scalar<int32_t>(0), p[0]}, options));
    return Sum(b, r[1]);
  };
}

TEST(ControlFlowGradient, WhileCarriedValueAndInvariant) {
  const std::vector<Param> params = {{"x", Doubles({0.3, -0.7}, Shape{2})}, {"w", Doubles({0.9, 1.1}, Shape{2})}};
  CheckAgainstFiniteDifferences(params, RecurrenceLoss(1, 5));
}

// The same loop with 1 and 10 iterations in flight gives the same
// gradients, bit for bit.
TEST(ControlFlowGradient, ParallelIterationsDoNotChangeTheGradient) {
  const std::vector<Param> params = {{"x", Doubles({0.3, -0.7, 0.1}, Shape{3})},
                                     {"w", Doubles({0.9, 1.1, 0.5}, Shape{3})}};
  auto serial = CheckAgainstFiniteDifferences(params, RecurrenceLoss(1, 12));
  auto parallel = CheckAgainstFiniteDifferences(params, RecurrenceLoss(10, 12));
  EXPECT_EQ(serial.loss, parallel.loss);
  EXPECT_EQ(serial.grads, parallel.grads);
}

// A loop that runs no iteration passes the gradient straight through.
TEST(ControlFlowGradient, WhileWithNoIterations) {
  auto c = CheckAgainstFiniteDifferences({{"x", Doubles({0.3, -0.7}, Shape{2})}, {"w", Doubles({2, 3}, Shape{2})}},
                                         RecurrenceLoss(10, 0));
  ASSERT_EQ(c.grads.size(), 2u);
  EXPECT_EQ(c.grads[0], (std::vector<double>{1, 1}));
  EXPECT_EQ(c.grads[1], (std::vector<double>{0, 0}));
}

// v = x; k times v = v * w  ->  v = x w^k: d/dx = w^k, d/dw = k x w^(k-1).
TEST(ControlFlowGradient, WhilePowerMatchesClosedForm) {
  constexpr int k = 7;
  auto c = CheckAgainstFiniteDifferences(
      {{"x", Doubles({1.5}, Shape{1})}, {"w", Doubles({0.8}, Shape{1})}},
      [](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
        WEFT_ASSIGN_OR_RETURN(
            Outputs r, WhileLoop(
                           b,
                           [&](const Outputs& v) -> Expected<Output> {
                             return b.Op("Less", {v[0], b.Scalar<int64_t>(k)});
                           },
                           [&](const Outputs& v) -> Expected<Outputs> {
                             return Outputs{b.Op("Add", {v[0], b.Scalar<int64_t>(1)}), b.Op("Mul", {v[1], p[1]})};
                           },
                           {b.Scalar<int64_t>(0), p[0]}));
        return Sum(b, r[1]);
      });
  ASSERT_EQ(c.grads.size(), 2u);
  EXPECT_NEAR(c.grads[0][0], std::pow(0.8, k), 1e-12);
  EXPECT_NEAR(c.grads[1][0], k * 1.5 * std::pow(0.8, k - 1), 1e-12);
}

// for i < 3: for j < 4: v = v * w + x  (x and w used in the inner loop).
TEST(ControlFlowGradient, NestedLoops) {
  CheckAgainstFiniteDifferences(
      {{"x", Doubles({0.2, -0.1}, Shape{2})}, {"w", Doubles({0.7, 1.05}, Shape{2})}},
      [](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
        WEFT_ASSIGN_OR_RETURN(Outputs r, WhileLoop(
                                             b,
                                             [&](const Outputs& v) -> Expected<Output> {
                                               return b.Op("Less", {v[0], b.Scalar<int32_t>(3)});
                                             },
                                             [&](const Outputs& v) -> Expected<Outputs> {
                                               WhileOptions inner;
                                               inner.name = "inner";
                                               WEFT_ASSIGN_OR_RETURN(
                                                   Outputs in,
                                                   WhileLoop(
                                                       b,
                                                       [&](const Outputs& u) -> Expected<Output> {
                                                         return b.Op("Less", {u[0], b.Scalar<int32_t>(4)});
                                                       },
                                                       [&](const Outputs& u) -> Expected<Outputs> {
                                                         return Outputs{b.Op("Add", {u[0], b.Scalar<int32_t>(1)}),
                                                                        b.Op("Add", {b.Op("Mul", {u[1], p[1]}), p[0]})};
                                                       },
                                                       {b.Scalar<int32_t>(0), v[1]}, inner));
                                               return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), in[1]};
                                             },
                                             {b.Scalar<int32_t>(0), p[0]}));
        return Sum(b, b.Op("Mul", {r[1], r[1]}));
      });
}

// for i < 6: v = (i is even) ? v * w : tanh(v) + x
TEST(ControlFlowGradient, CondInsideLoop) {
  CheckAgainstFiniteDifferences(
      {{"x", Doubles({0.2, -0.4, 0.9}, Shape{3})}, {"w", Doubles({1.3, 0.6, -0.8}, Shape{3})}},
      [](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
        WEFT_ASSIGN_OR_RETURN(
            Outputs r,
            WhileLoop(
                b,
                [&](const Outputs& v) -> Expected<Output> {
                  return b.Op("Less", {v[0], b.Scalar<int32_t>(6)});
                },
                [&](const Outputs& v) -> Expected<Outputs> {
                  Output even = b.Op("Equal", {b.Op("FloorMod", {v[0], b.Scalar<int32_t>(2)}), b.Scalar<int32_t>(0)});
                  WEFT_ASSIGN_OR_RETURN(Outputs c, Cond(
                                                       b, even,
                                                       [&]() -> Expected<Outputs> {
                                                         return Outputs{b.Op("Mul", {v[1], p[1]})};
                                                       },
                                                       [&]() -> Expected<Outputs> {
                                                         return Outputs{b.Op("Add", {b.Op("Tanh", {v[1]}), p[0]})};
                                                       }));
                  return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), c[0]};
                },
                {b.Scalar<int32_t>(0), p[0]}));
        return Sum(b, r[1]);
      });
}

// maximum_iterations stops the loop; the gradient follows the iterations
// that ran: v = x w^3.
TEST(ControlFlowGradient, MaximumIterations) {
  auto c = CheckAgainstFiniteDifferences(
      {{"x", Doubles({1.25}, Shape{1})}, {"w", Doubles({1.5}, Shape{1})}},
      [](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
        WhileOptions options;
        options.maximum_iterations = 3;
        WEFT_ASSIGN_OR_RETURN(
            Outputs r, WhileLoop(
                           b, [&](const Outputs&) -> Expected<Output> { return b.Const(Tensor::Scalar<bool>(true)); },
                           [&](const Outputs& v) -> Expected<Outputs> {
                             return Outputs{b.Op("Mul", {v[0], p[1]})};
                           },
                           {p[0]}, options));
        return Sum(b, r[0]);
      });
  ASSERT_EQ(c.grads.size(), 2u);
  EXPECT_NEAR(c.grads[0][0], 1.5 * 1.5 * 1.5, 1e-12);
  EXPECT_NEAR(c.grads[1][0], 3 * 1.25 * 1.5 * 1.5, 1e-12);
}

// A matrix recurrence h = tanh(h W + x_t), x_t gathered from a sequence by
// the iteration index; the gradient reaches W, the initial state and the
// whole sequence (an invariant gathered from).
TEST(ControlFlowGradient, RecurrenceOverASequence) {
  CheckAgainstFiniteDifferences(
      {{"h0", Doubles({0.1, -0.2, 0.3, 0.05, 0.2, -0.1}, Shape{2, 3})},
       {"W", Doubles({0.5, -0.3, 0.2, 0.1, 0.4, -0.6, 0.3, 0.2, 0.1}, Shape{3, 3})},
       {"xs", Doubles({0.1, 0.2, 0.3, 0.4, 0.5, 0.6, -0.1, -0.2, -0.3, -0.4, -0.5, -0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2},
                      Shape{3, 2, 3})}},
      [](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
        WEFT_ASSIGN_OR_RETURN(Outputs r, WhileLoop(
                                             b,
                                             [&](const Outputs& v) -> Expected<Output> {
                                               return b.Op("Less", {v[0], b.Scalar<int64_t>(3)});
                                             },
                                             [&](const Outputs& v) -> Expected<Outputs> {
                                               Output x_t = b.Op("Gather", {p[2], v[0]});
                                               return Outputs{
                                                   b.Op("Add", {v[0], b.Scalar<int64_t>(1)}),
                                                   b.Op("Tanh", {b.Op("Add", {b.Op("MatMul", {v[1], p[1]}), x_t})})};
                                             },
                                             {b.Scalar<int64_t>(0), p[0]}));
        return Sum(b, b.Op("Mul", {r[1], r[1]}));
      });
}

// A variable read inside the loop (ReadVariable of the entered handle):
// its gradient is summed over the iterations.
TEST(ControlFlowGradient, VariableReadInsideTheLoop) {
  RuntimeEnv env(kCpuOnly);
  GraphBuilder b;
  Output var = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF64)}, {"shape", AttrValue(Shape{2})}}, "w");
  Output init = b.Op("Assign", {var, b.Const(Tensor::FromVector<double>({0.5, 2.0}, Shape{2}))},
                     {{"dtype", AttrValue(DType::kF64)}}, "init");
  Output x = b.Placeholder(DType::kF64, Shape{2}, "x");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(4)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output w = b.Op("ReadVariable", {var}, {{"dtype", AttrValue(DType::kF64)}});
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), b.Op("Mul", {v[1], w})};
      },
      {b.Scalar<int32_t>(0), x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Output loss = Sum(b, (*r)[1]);
  auto g = grad::AddGradients(b, {loss}, {var, x});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {}, {init.node_name()}, nullptr).ok());
  std::vector<Tensor> out;
  Status s =
      session->Run({{"x", Tensor::FromVector<double>({3, -1}, Shape{2})}}, {(*g)[0].name(), (*g)[1].name()}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // loss = sum(x w^4): d/dw = 4 x w^3, d/dx = w^4.
  EXPECT_EQ(Values(out[0]), (std::vector<double>{4 * 3 * 0.125, 4 * -1 * 8.0}));
  EXPECT_EQ(Values(out[1]), (std::vector<double>{0.0625, 16}));
}

// Running the gradient graph again (a training loop's next step) starts
// from fresh stacks.
TEST(ControlFlowGradient, RunsAgainWithFreshStacks) {
  RuntimeEnv env(kCpuOnly);
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF64, Shape{1}, "x");
  Output n = b.Placeholder(DType::kI32, Shape{}, "n");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), b.Op("Mul", {v[1], v[1]})};
      },
      {b.Scalar<int32_t>(0), x});
  ASSERT_TRUE(r.ok());
  auto g = grad::AddGradients(b, {Sum(b, (*r)[1])}, {x});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto session = env.Session(b);
  // v = x^(2^n): d/dx = 2^n x^(2^n - 1).
  for (int32_t steps : {3, 1, 0, 4}) {
    std::vector<Tensor> out;
    Status s = session->Run({{"x", Tensor::FromVector<double>({1.1}, Shape{1})}, {"n", Tensor::Scalar<int32_t>(steps)}},
                            {(*g)[0].name()}, {}, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    const double p = std::pow(2.0, steps);
    EXPECT_NEAR(out[0].data<double>()[0], p * std::pow(1.1, p - 1), 1e-12) << "n = " << steps;
  }
}

// Deterministic values in [-scale, scale).
Tensor Wavy(const Shape& shape, double scale, double phase) {
  std::vector<double> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(1.7 * static_cast<double>(i) + phase);
  return Doubles(v, shape);
}

// An LSTM over a batch of three sequences of lengths 4, 1 and 3 (time 4,
// input 2, hidden 3), the loss summing a weighted h over the valid steps
// and the final states: checked with finite differences for the fused cell
// and the composed one, and input steps past a sequence's end get exactly
// zero gradient. (The fused cell's gradient has five outputs: this once
// caught the loop executor reading dead flags past its two-entry array.)
TEST(ControlFlowGradient, LstmOverVariableLengthSequences) {
  const std::vector<int64_t> lengths = {4, 1, 3};
  for (bool fused : {true, false}) {
    SCOPED_TRACE(fused ? "fused LSTMCell" : "composed cell");
    auto c = CheckAgainstFiniteDifferences(
        {{"inputs", Wavy(Shape{4, 3, 2}, 1.0, 0.1)},
         {"w", Wavy(Shape{5, 12}, 0.5, 0.7)},
         {"bias", Wavy(Shape{12}, 0.2, 1.3)},
         {"h0", Wavy(Shape{3, 3}, 0.3, 2.1)}},
        [&](GraphBuilder& b, const Outputs& p) -> Expected<Output> {
          Output seq = b.Placeholder(DType::kI64, Shape{3}, "sequence_length");
          Output c0 = b.Const(Tensor::FromVector<double>(std::vector<double>(9, 0.25), Shape{3, 3}), "c0");
          Output weights = b.Const(Tensor::FromVector<double>({1.0, -2.0, 0.5}, Shape{3}), "head");
          DynamicLstmOptions options;
          options.fused = fused;
          options.per_step = [&](const Output&, const Output& h, const Output& mask) -> Expected<Output> {
            Output column = b.Op("ExpandDims", {mask}, {{"axis", AttrValue(int64_t{1})}});
            return b.Op("Sum", {b.Op("Mul", {b.Op("Mul", {h, column}), weights})});
          };
          WEFT_ASSIGN_OR_RETURN(DynamicLstmResult r, DynamicLstm(b, p[0], seq, p[1], p[2], c0, p[3], options));
          return b.Op("AddN", {r.sum, Sum(b, b.Op("Mul", {r.h, r.h})), Sum(b, r.c)});
        },
        {{"sequence_length", Tensor::FromVector<int64_t>(lengths, Shape{3})}});
    ASSERT_EQ(c.grads.size(), 4u);
    const std::vector<double>& d_inputs = c.grads[0];  // [time, batch, input]
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t j = 0; j < 3; ++j) {
        for (int64_t k = 0; k < 2; ++k) {
          const double g = d_inputs[static_cast<std::size_t>((t * 3 + j) * 2 + k)];
          if (t >= lengths[static_cast<std::size_t>(j)]) {
            EXPECT_EQ(g, 0.0) << "inputs[" << t << "," << j << "," << k << "] is past the sequence's end";
          } else {
            EXPECT_NE(g, 0.0) << "inputs[" << t << "," << j << "," << k << "]";
          }
        }
      }
    }
  }
}

TEST(ControlFlowGradient, StatefulOpInTheBodyIsAnError) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(3)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output noise = b.Op("RandomUniform", {b.Const(Tensor::FromVector<int64_t>({2}))},
                            {{"dtype", AttrValue(DType::kF32)}}, "noise");
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), b.Op("Mul", {v[1], noise})};
      },
      {b.Scalar<int32_t>(0), x});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto g = grad::AddGradients(b, {Sum(b, (*r)[1])}, {x});
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("gradient of while loop 'while': node 'while/noise' (RandomUniform) in the "
                                      "loop body is stateful"),
            std::string::npos)
      << g.status().message();
}

TEST(ControlFlowGradient, XInsideALoopIsAnError) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  Output inside;
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(3)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        inside = b.Op("Neg", {v[1]}, {}, "neg");
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), inside};
      },
      {b.Scalar<int32_t>(0), x});
  ASSERT_TRUE(r.ok());
  auto g = grad::AddGradients(b, {Sum(b, (*r)[1])}, {inside});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "gradients: x 'while/neg' is made inside a while loop; differentiate with respect to a value outside "
            "the loop, or to the loop's result");
}

}  // namespace
}  // namespace weft
