// The graph optimizer's quantize_fusion (level 2, docs/quantization.md):
// what it fuses into _QConv2D and _QMatMul, what it leaves in f32 and the
// note it leaves, and that the values do not change. Expected values are
// worked out by hand (every value below is exact in binary).
#include <gtest/gtest.h>

#include "tests/integration/graph_optimizer_fixture.h"

namespace weft::testing {
namespace {

// x = [0.5, 1, 1.5, 2] ([1, 2, 2, 1]) quantized u8 by 0.5 (q = 1..4); a 1x1
// filter of int8 [2, -4] with scales [0.25, 0.5] (real [0.5, -2]); a bias
// [0.25, 4.5]; then |activation|; quantized u8 by 0.25 and dequantized
// ("y"). Channel 0 is 0.5x + 0.25 = 0.5, 0.75, 1, 1.25; channel 1 is
// -2x + 4.5 = 3.5, 2.5, 1.5, 0.5.
struct QdqConv {
  std::string activation = "Relu";
  int8_t weight_zero_point = 0;
  bool quantize_output = true;
  bool f32_residual = false;
};

void BuildQdqConv(GraphBuilder& b, const QdqConv& spec) {
  Output x = b.Placeholder(DType::kF32, Shape{1, 2, 2, 1}, "x");
  Output x_scale = b.Const(Tensor::Scalar<float>(0.5f), "x_scale");
  Output x_zp = b.Const(Tensor::Scalar<uint8_t>(0), "x_zp");
  Output xq = b.Op("QuantizeLinear", {x, x_scale, x_zp}, {}, "xq");
  Output xd = b.Op("DequantizeLinear", {xq, x_scale, x_zp}, {}, "xd");
  Output w = b.Const(Tensor::FromVector<int8_t>({2, -4}, Shape{1, 1, 1, 2}), "w");
  Output wd = b.Op("DequantizeLinear",
                   {w, b.Const(F32({0.25f, 0.5f}, Shape{2}), "w_scales"),
                    b.Const(Tensor::FromVector<int8_t>({spec.weight_zero_point, 0}, Shape{2}), "w_zps")},
                   {{"axis", AttrValue(int64_t{3})}}, "wd");
  Output conv = b.Op("Conv2D", {xd, wd}, {{"padding", AttrValue(std::string("VALID"))}}, "conv");
  Output y = b.Op("BiasAdd", {conv, b.Const(F32({0.25f, 4.5f}, Shape{2}), "bias")}, {}, "biased");
  if (spec.f32_residual) y = b.Op("Add", {y, b.Placeholder(DType::kF32, Shape{1, 2, 2, 2}, "r")}, {}, "sum");
  y = b.Op(spec.activation, {y}, {}, "act");
  if (spec.quantize_output) {
    Output y_scale = b.Const(Tensor::Scalar<float>(0.25f), "y_scale");
    Output y_zp = b.Const(Tensor::Scalar<uint8_t>(0), "y_zp");
    b.Op("DequantizeLinear", {b.Op("QuantizeLinear", {y, y_scale, y_zp}, {}, "yq"), y_scale, y_zp}, {}, "y");
  } else {
    b.Op("Identity", {y}, {}, "y");
  }
}

const std::vector<std::pair<std::string, Tensor>> kFeeds = {{"x", F32({0.5f, 1, 1.5f, 2}, Shape{1, 2, 2, 1})}};
const std::vector<float> kWant = {0.5f, 3.5f, 0.75f, 2.5f, 1, 1.5f, 1.25f, 0.5f};

TEST_F(GraphOptimizer, DequantizeConvQuantizeBecomesOneQuantizedConvolution) {
  GraphBuilder b;
  BuildQdqConv(b, {});
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  OptimizeOptions options;
  options.level = 2;
  const OptimizeResult result = Optimize(b, {"y"}, {"x"}, options);
  const Graph::Node* q = result.graph->Find("yq");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->op_name(), "_QConv2D");
  EXPECT_EQ(q->def.attrs.at("Tin").get<DType>(), DType::kU8);
  EXPECT_EQ(q->def.attrs.at("Tout").get<DType>(), DType::kU8);
  EXPECT_EQ(q->def.attrs.at("filter_scales").get<std::vector<double>>(), (std::vector<double>{0.25, 0.5}));
  EXPECT_EQ(q->def.attrs.at("input_scale").get<double>(), 0.5);
  EXPECT_EQ(q->def.attrs.at("output_scale").get<double>(), 0.25);
  EXPECT_EQ(q->def.attrs.at("activation").get<std::string>(), "Relu");
  EXPECT_EQ(q->def.attrs.at("Nb").get<int64_t>(), 1);
  // It reads the int8 values themselves: the quantized input and weights.
  EXPECT_EQ(q->def.inputs[0], "xq");
  EXPECT_EQ(q->def.inputs[1], "w");
  EXPECT_EQ(result.graph->Find("conv"), nullptr);
  const PassReport* report = Report(result, "quantize_fusion");
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->changed, 1);
  for (int level : {0, 2}) EXPECT_EQ(Values(RunAt(b, level, {"y"}, kFeeds)[0]), kWant) << "level " << level;
}

TEST_F(GraphOptimizer, AQuantizedConvolutionWithoutAQuantizeAfterItReturnsF32) {
  GraphBuilder b;
  BuildQdqConv(b, {.quantize_output = false});
  OptimizeOptions options;
  options.level = 2;
  const OptimizeResult result = Optimize(b, {"y"}, {"x"}, options);
  const Graph::Node* act = result.graph->Find("act");
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->op_name(), "_QConv2D");
  EXPECT_EQ(act->def.attrs.at("Tout").get<DType>(), DType::kF32);
  for (int level : {0, 2}) EXPECT_EQ(Values(RunAt(b, level, {"y"}, kFeeds)[0]), kWant) << "level " << level;
}

TEST_F(GraphOptimizer, QuantizeFusionLeavesWhatTheQuantizedOpsCannotComputeInF32) {
  OptimizeOptions options;
  options.level = 2;
  // An activation the quantized ops do not apply: fused in f32, with a note.
  {
    GraphBuilder b;
    BuildQdqConv(b, {.activation = "Sigmoid"});
    const OptimizeResult result = Optimize(b, {"y"}, {"x"}, options);
    EXPECT_EQ(result.graph->Find("act")->op_name(), "_FusedConv2D");
    const PassReport* report = Report(result, "quantize_fusion");
    ASSERT_NE(report, nullptr);
    EXPECT_EQ(report->changed, 0);
    ASSERT_EQ(report->notes.size(), 1u);
    EXPECT_NE(report->notes[0].find("stays f32: quantized ops do not apply Sigmoid"), std::string::npos)
        << report->notes[0];
  }
  // Weights with a zero point (not symmetric): left alone.
  {
    GraphBuilder b;
    BuildQdqConv(b, {.weight_zero_point = 1});
    const OptimizeResult result = Optimize(b, {"y"}, {"x"}, options);
    EXPECT_EQ(result.graph->Find("act")->op_name(), "_FusedConv2D");
    EXPECT_EQ(Report(result, "quantize_fusion")->changed, 0);
  }
  // A residual that is not dequantized int8: fused in f32, with a note.
  {
    GraphBuilder b;
    BuildQdqConv(b, {.f32_residual = true});
    const OptimizeResult result = Optimize(b, {"y"}, {"x", "r"}, options);
    EXPECT_EQ(result.graph->Find("act")->op_name(), "_FusedConv2D");
    const PassReport* report = Report(result, "quantize_fusion");
    ASSERT_EQ(report->notes.size(), 1u);
    EXPECT_NE(report->notes[0].find("stays f32: its residual is not dequantized int8"), std::string::npos)
        << report->notes[0];
  }
}

// a = [1, 2] quantized i8 by 0.5 with zero point -3 (q = -1, 1); b = int8
// [[1, 2], [3, 4]] with column scales [0.5, 0.25] (real [[0.5, 0.5], [1.5,
// 1]]): a b = [0.5 + 3, 0.5 + 2] = [3.5, 2.5], returned in f32.
TEST_F(GraphOptimizer, DequantizeMatMulBecomesOneQuantizedProduct) {
  GraphBuilder b;
  Output a = b.Placeholder(DType::kF32, Shape{1, 2}, "a");
  Output scale = b.Const(Tensor::Scalar<float>(0.5f), "a_scale");
  Output zp = b.Const(Tensor::Scalar<int8_t>(-3), "a_zp");
  Output ad = b.Op("DequantizeLinear", {b.Op("QuantizeLinear", {a, scale, zp}, {}, "aq"), scale, zp}, {}, "ad");
  Output bd = b.Op("DequantizeLinear",
                   {b.Const(Tensor::FromVector<int8_t>({1, 2, 3, 4}, Shape{2, 2}), "b"),
                    b.Const(F32({0.5f, 0.25f}, Shape{2}), "b_scales"),
                    b.Const(Tensor::FromVector<int8_t>({0, 0}, Shape{2}), "b_zps")},
                   {{"axis", AttrValue(int64_t{1})}}, "bd");
  b.Op("MatMul", {ad, bd}, {}, "y");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  OptimizeOptions options;
  options.level = 2;
  const OptimizeResult result = Optimize(b, {"y"}, {"a"}, options);
  const Graph::Node* y = result.graph->Find("y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->op_name(), "_QMatMul");
  EXPECT_EQ(y->def.attrs.at("b_scales").get<std::vector<double>>(), (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(y->def.attrs.at("input_zero_point").get<int64_t>(), -3);
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"a", F32({1, 2}, Shape{1, 2})}};
  for (int level : {0, 2}) {
    EXPECT_EQ(Values(RunAt(b, level, {"y"}, feeds)[0]), (std::vector<float>{3.5f, 2.5f})) << "level " << level;
  }
}

}  // namespace
}  // namespace weft::testing
