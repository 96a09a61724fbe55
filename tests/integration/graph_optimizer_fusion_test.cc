// The graph optimizer's fusions (level 2, core/passes, docs/optimizer.md):
// what each must fuse, what it must leave alone, and that the values a
// graph computes do not change. Expected values are written out by hand.
// The fixture is in graph_optimizer_fixture.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "core/base/strings.h"
#include "core/graph/control_flow.h"
#include "tests/integration/graph_optimizer_fixture.h"

namespace weft::testing {
namespace {

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
}  // namespace weft::testing
