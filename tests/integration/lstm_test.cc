// The fused LSTM cell (LSTMCell, LSTMCellGrad on the CPU device) against
// the same math composed from primitive ops (core/graph/nn_builders.h),
// whose ops and gradients are checked elsewhere against NumPy and finite
// differences: forward outputs and the gradients AddGradients builds
// through each, on random inputs, in f32 and f64. Plus every error the
// ops report, with its message.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/grad/gradients.h"
#include "core/graph/nn_builders.h"
#include "tests/support/output_text.h"
#include "tests/support/runtime_env.h"

namespace weft {
namespace {

using testing::Contains;
using testing::RuntimeEnv;

Tensor RandomTensor(DType dtype, const Shape& shape, std::mt19937_64& rng, double scale = 1) {
  Tensor t = *Tensor::Allocate(dtype, shape);
  std::uniform_real_distribution<double> u(-scale, scale);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DType::kF64) {
      t.data<double>()[i] = u(rng);
    } else {
      t.data<float>()[i] = static_cast<float>(u(rng));
    }
  }
  return t;
}

std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    out.push_back(t.dtype() == DType::kF64 ? t.data<double>()[i] : static_cast<double>(t.data<float>()[i]));
  }
  return out;
}

void ExpectClose(const Tensor& got, const Tensor& want, double tolerance, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.TypeString(), want.TypeString());
  const std::vector<double> g = AsDoubles(got), w = AsDoubles(want);
  int bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!(std::abs(g[i] - w[i]) <= tolerance * (1 + std::abs(w[i]))) && ++bad <= 5) {
      ADD_FAILURE() << "element " << i << ": fused " << g[i] << ", composed " << w[i];
    }
  }
}

struct CellCase {
  DType dtype;
  int64_t batch, input, hidden;
  double forget_bias;
  // Whether c enters the loss (when not, no gradient arrives at c).
  bool use_c;
};

// Builds the cell (fused or composed) on placeholders x, c_prev, h_prev, w,
// b, the loss L = sum(c * wc) + sum(h * wh) (or only the second term), and
// its gradients; returns the
// fetch names: c, h, gates, then dL/dx, dc_prev, dh_prev, dw, db.
std::vector<std::string> BuildCell(GraphBuilder& b, const CellCase& k, bool fused, const Tensor& wc, const Tensor& wh) {
  const int64_t n = k.batch, in = k.input, hd = k.hidden;
  std::vector<Output> ins = {b.Placeholder(k.dtype, Shape{n, in}, "x"), b.Placeholder(k.dtype, Shape{n, hd}, "c_prev"),
                             b.Placeholder(k.dtype, Shape{n, hd}, "h_prev"),
                             b.Placeholder(k.dtype, Shape{in + hd, 4 * hd}, "w"),
                             b.Placeholder(k.dtype, Shape{4 * hd}, "b")};
  std::vector<Output> outs;
  if (fused) {
    outs = b.AddNode("LSTMCell", ins, {{"forget_bias", AttrValue(k.forget_bias)}}, "cell");
  } else {
    auto composed = LstmCellComposed(b, ins[0], ins[1], ins[2], ins[3], ins[4], k.forget_bias);
    EXPECT_TRUE(composed.ok()) << composed.status().ToString();
    if (composed.ok()) outs = *composed;
  }
  EXPECT_EQ(outs.size(), 3u);
  if (outs.size() != 3) return {};
  Output loss = b.Op("Sum", {b.Op("Mul", {outs[1], b.Const(wh)})});
  if (k.use_c) loss = b.Op("Add", {b.Op("Sum", {b.Op("Mul", {outs[0], b.Const(wc)})}), loss});
  auto grads = grad::AddGradients(b, {loss}, ins);
  EXPECT_TRUE(grads.ok()) << grads.status().ToString();
  if (!grads.ok()) return {};
  std::vector<std::string> fetches;
  for (const Output& o : outs) fetches.push_back(o.name());
  for (const Output& g : *grads) fetches.push_back(g.name());
  return fetches;
}

class FusedAndComposed : public ::testing::TestWithParam<CellCase> {};

TEST_P(FusedAndComposed, AgreeForwardAndBackward) {
  const CellCase k = GetParam();
  std::mt19937_64 rng(1234 + static_cast<uint64_t>(k.hidden));
  const std::vector<std::pair<std::string, Tensor>> feeds = {
      {"x", RandomTensor(k.dtype, Shape{k.batch, k.input}, rng)},
      {"c_prev", RandomTensor(k.dtype, Shape{k.batch, k.hidden}, rng)},
      {"h_prev", RandomTensor(k.dtype, Shape{k.batch, k.hidden}, rng)},
      {"w", RandomTensor(k.dtype, Shape{k.input + k.hidden, 4 * k.hidden}, rng, 0.8)},
      {"b", RandomTensor(k.dtype, Shape{4 * k.hidden}, rng, 0.5)}};
  const Tensor wc = RandomTensor(k.dtype, Shape{k.batch, k.hidden}, rng);
  const Tensor wh = RandomTensor(k.dtype, Shape{k.batch, k.hidden}, rng);
  std::vector<Tensor> results[2];
  for (int fused = 0; fused < 2; ++fused) {
    GraphBuilder b;
    const std::vector<std::string> fetches = BuildCell(b, k, fused == 1, wc, wh);
    ASSERT_EQ(fetches.size(), 8u);
    auto session = testing::SharedRuntimeEnv().Session(b);
    Status s = session->Run(feeds, fetches, {}, &results[fused]);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  const double tolerance = k.dtype == DType::kF64 ? 1e-12 : 2e-5;
  const char* names[] = {"c", "h", "gates", "dx", "dc_prev", "dh_prev", "dw", "db"};
  for (std::size_t i = 0; i < 8; ++i) ExpectClose(results[1][i], results[0][i], tolerance, names[i]);
}

INSTANTIATE_TEST_SUITE_P(
    Cells, FusedAndComposed,
    ::testing::Values(CellCase{DType::kF64, 3, 5, 4, 1.0, true}, CellCase{DType::kF32, 3, 5, 4, 1.0, true},
                      CellCase{DType::kF64, 7, 3, 6, 0.5, true}, CellCase{DType::kF32, 64, 32, 48, 0.0, true},
                      CellCase{DType::kF64, 1, 1, 1, 2.0, true}, CellCase{DType::kF64, 4, 3, 5, 1.0, false}),
    [](const ::testing::TestParamInfo<CellCase>& p) {
      return StrCat(p.param.dtype == DType::kF64 ? "f64" : "f32", "_b", p.param.batch, "_i", p.param.input, "_h",
                    p.param.hidden, "_fb", static_cast<int>(p.param.forget_bias * 10), p.param.use_c ? "" : "_h_only");
    });

// One cell on constants of the given shapes (for the shape errors).
Status BuildWithShapes(const Shape& x, const Shape& c, const Shape& h, const Shape& w, const Shape& bias) {
  GraphBuilder b;
  std::vector<Output> ins;
  for (const Shape& s : {x, c, h, w, bias}) ins.push_back(b.Placeholder(DType::kF32, s, StrCat("in", ins.size())));
  b.AddNode("LSTMCell", ins, {}, "cell");
  return b.status();
}

TEST(LstmCell, ShapeErrorsNameTheInputAndTheExpectedShape) {
  EXPECT_TRUE(BuildWithShapes({2, 3}, {2, 4}, {2, 4}, {7, 16}, {16}).ok());
  EXPECT_TRUE(BuildWithShapes({-1, 3}, {-1, 4}, Shape::UnknownRank(), {-1, 16}, {-1}).ok());
  struct Bad {
    Shape x, c, h, w, bias;
    const char* message;
  };
  const Bad cases[] = {
      {{2, 3},
       {2, 4},
       {2, 4},
       {6, 16},
       {16},
       "w has shape [6,16], expected [input + hidden, 4 * hidden] = [7,16] (batch 2, input 3, hidden 4)"},
      {{2, 3},
       {2, 4},
       {2, 4},
       {7, 12},
       {16},
       "w has shape [7,12], expected [input + hidden, 4 * hidden] = [7,16] (batch 2, input 3, hidden 4)"},
      {{2, 3},
       {2, 4},
       {2, 4},
       {7, 10},
       {16},
       "w has shape [7,10]: dimension 1 (10) must be 4 * hidden, one block per gate i, f, g, o"},
      {{2, 3}, {2, 4}, {2, 4}, {7, 16, 1}, {16}, "w must have rank 2 ([input + hidden, 4 * hidden]), got [7,16,1]"},
      {{2, 3},
       {2, 4},
       {2, 4},
       {7, 16},
       {12},
       "b has shape [12], expected [4 * hidden] = [16] (batch 2, input 3, hidden 4)"},
      {{2, 3},
       {2, 4},
       {3, 4},
       {7, 16},
       {16},
       "h_prev has shape [3,4], expected [batch, hidden] = [2,4] (batch 2, input 3, hidden 4)"},
      {{3}, {2, 4}, {2, 4}, {7, 16}, {16}, "x must have rank 2 ([batch, input]), got [3]"},
      {Shape::UnknownRank(),
       {2, 4},
       {2, 4},
       {3, 16},
       {16},
       "w has shape [3,16]: dimension 0 (3) must be input + hidden, at least hidden = 4"},
      // Input and hidden both from w when x and the states are unknown;
      // the batch stays unknown.
      {Shape::UnknownRank(),
       Shape::UnknownRank(),
       Shape::UnknownRank(),
       {7, 16},
       {12},
       "b has shape [12], expected [4 * hidden] = [16] (batch ?, input 3, hidden 4)"},
      // With x and c_prev unknown, h_prev gives the hidden size, and w
      // disagrees with it.
      {Shape::UnknownRank(),
       Shape::UnknownRank(),
       {2, 5},
       {7, 16},
       {16},
       "w has shape [7,16], expected [input + hidden, 4 * hidden] = [7,20] (batch 2, input 2, hidden 5)"},
  };
  for (const Bad& bad : cases) {
    Status s = BuildWithShapes(bad.x, bad.c, bad.h, bad.w, bad.bias);
    EXPECT_TRUE(Contains(s.message(), bad.message));
  }
}

TEST(LstmCellGrad, ShapeErrorsNameTheInput) {
  GraphBuilder b;
  std::vector<Output> ins;
  for (const Shape& s :
       {Shape{2, 3}, Shape{2, 4}, Shape{2, 4}, Shape{7, 16}, Shape{2, 4}, Shape{2, 12}, Shape{2, 4}, Shape{2, 4}}) {
    ins.push_back(b.Placeholder(DType::kF64, s, StrCat("in", ins.size())));
  }
  b.AddNode("LSTMCellGrad", ins, {}, "grad");
  EXPECT_TRUE(Contains(b.status().message(),
                       "gates has shape [2,12], expected [batch, 4 * hidden] = [2,16] (batch 2, input 3, hidden 4)"));
}

// Shapes unknown while building reach the kernel, which checks them again.
TEST(LstmCell, TheKernelRejectsShapesUnknownWhileBuilding) {
  GraphBuilder b;
  std::vector<Output> ins;
  for (const char* name : {"x", "c_prev", "h_prev", "w", "b"}) {
    ins.push_back(b.Placeholder(DType::kF64, Shape::UnknownRank(), name));
  }
  b.AddNode("LSTMCell", ins, {}, "cell");
  auto session = testing::SharedRuntimeEnv().Session(b);
  auto zeros = [](Shape s) { return *Tensor::Zeros(DType::kF64, s); };
  std::vector<std::pair<std::string, Tensor>> feeds = {{"x", zeros({2, 3})},
                                                       {"c_prev", zeros({2, 4})},
                                                       {"h_prev", zeros({2, 4})},
                                                       {"w", zeros({6, 16})},
                                                       {"b", zeros({16})}};
  // One input after the other of the wrong shape, the one before set right
  // again (w is wrong from the start).
  struct Wrong {
    std::size_t input;  // in feeds
    Shape bad, good;
    std::string message;
  };
  const std::vector<Wrong> wrongs = {
      {3, {6, 16}, {7, 16}, "w has shape [6,16], expected [input + hidden, 4 * hidden] = [7,16]"},
      {2, {2, 5}, {2, 4}, "h_prev has shape [2,5], expected [batch, hidden] = [2,4]"},
      {4, {12}, {16}, "b has shape [12], expected [4 * hidden] = [16]"},
      {1, {3, 4}, {2, 4}, "c_prev has shape [3,4] but x has 2 rows (the batch)"},
      {0, {6}, {2, 3}, "x must have rank 2 ([batch, input]), got [6]"},
  };
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < wrongs.size(); ++k) {
    if (k > 0) feeds[wrongs[k - 1].input].second = zeros(wrongs[k - 1].good);
    feeds[wrongs[k].input].second = zeros(wrongs[k].bad);
    Status s = session->Run(feeds, {"cell:1"}, {}, &out);
    if (k == 0) {
      EXPECT_TRUE(Contains(s.message(), "cell"));
    }
    EXPECT_TRUE(Contains(s.message(), wrongs[k].message));
  }
}

TEST(LstmCell, AnEmptyBatchGivesEmptyOutputsAndZeroWeightGradients) {
  GraphBuilder b;
  std::vector<Output> ins = {b.Placeholder(DType::kF64, Shape{0, 2}, "x"), b.Placeholder(DType::kF64, Shape{0, 1}, "c"),
                             b.Placeholder(DType::kF64, Shape{0, 1}, "h"), b.Placeholder(DType::kF64, Shape{3, 4}, "w"),
                             b.Placeholder(DType::kF64, Shape{4}, "b")};
  std::vector<Output> outs = b.AddNode("LSTMCell", ins, {}, "cell");
  auto grads = grad::AddGradients(b, {b.Op("Sum", {outs[1]})}, ins);
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  auto session = testing::SharedRuntimeEnv().Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x", *Tensor::Zeros(DType::kF64, {0, 2})},
                           {"c", *Tensor::Zeros(DType::kF64, {0, 1})},
                           {"h", *Tensor::Zeros(DType::kF64, {0, 1})},
                           {"w", *Tensor::Zeros(DType::kF64, {3, 4})},
                           {"b", *Tensor::Zeros(DType::kF64, {4})}},
                          {"cell:0", "cell:2", (*grads)[3].name(), (*grads)[4].name()}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out[0].TypeString(), "f64[0,1]");
  EXPECT_EQ(out[1].TypeString(), "f64[0,4]");
  EXPECT_EQ(AsDoubles(out[2]), std::vector<double>(12, 0.0));
  EXPECT_EQ(AsDoubles(out[3]), std::vector<double>(4, 0.0));
}

TEST(LstmCell, OnlyCAndHAreDifferentiable) {
  GraphBuilder b;
  std::vector<Output> ins = {b.Placeholder(DType::kF64, Shape{2, 3}, "x"), b.Placeholder(DType::kF64, Shape{2, 4}, "c"),
                             b.Placeholder(DType::kF64, Shape{2, 4}, "h"),
                             b.Placeholder(DType::kF64, Shape{7, 16}, "w"), b.Placeholder(DType::kF64, Shape{16}, "b")};
  std::vector<Output> outs = b.AddNode("LSTMCell", ins, {}, "cell");
  auto grads = grad::AddGradients(b, {outs[2]}, {ins[0]});
  ASSERT_FALSE(grads.ok());
  EXPECT_TRUE(Contains(grads.status().message(),
                       "differentiating the gates output of LSTMCell (only c and h are differentiable)"));
}

}  // namespace
}  // namespace weft
