#include "core/graph/builder.h"

#include <gtest/gtest.h>

#include "core/ops/ops.h"

namespace weft {
namespace {

TEST(Builder, ScopesMakeUniqueNames) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{-1, 4}, "x");
  Output y1, y2;
  {
    auto s = b.NameScope("dense");
    y1 = b.Op("Relu", {x});
  }
  {
    auto s = b.NameScope("dense");
    y2 = b.Op("Relu", {x});
    b.Op("Relu", {x});
  }
  EXPECT_EQ(y1.node_name(), "dense/Relu");
  EXPECT_EQ(y2.node_name(), "dense_1/Relu");
  EXPECT_EQ(b.def().nodes.back().name, "dense_1/Relu_1");
  EXPECT_EQ(y1.shape(), (Shape{-1, 4}));
  EXPECT_EQ(y1.dtype(), DType::kF32);
}

TEST(Builder, DevicesAndControlDependencies) {
  GraphBuilder b;
  Output a = b.Scalar<float>(1, "a");
  Output n;
  {
    auto d = b.DeviceScope("/device:CPU:1");
    auto c = b.ControlDependencies({a});
    n = b.Op("Neg", {b.Scalar<float>(2, "two")}, {}, "n");
  }
  EXPECT_EQ(b.node_def(n.node()).device, "/device:CPU:1");
  EXPECT_EQ(b.node_def(n.node()).inputs, (std::vector<std::string>{"two", "^a"}));
  EXPECT_TRUE(b.node_def(a.node()).device.empty());
}

TEST(Builder, FirstErrorIsKept) {
  GraphBuilder b;
  Output a = b.Const(*Tensor::Zeros(DType::kF32, Shape{2, 3}), "a");
  Output bad = b.Op("MatMul", {a, a}, {}, "bad");
  EXPECT_FALSE(bad.valid());
  b.Op("Neg", {a}, {}, "after");
  EXPECT_EQ(b.status().message(), "node 'bad' (MatMul): inner dimensions differ: [2,3] x [2,3] (3 vs 2)");
  EXPECT_EQ(b.Build().status().message(), b.status().message());
  EXPECT_FALSE(b.Find("after").valid());
}

TEST(Builder, MultiOutputOpsNeedAddNode) {
  GraphBuilder b;
  Output a = b.Const(*Tensor::Zeros(DType::kF32, Shape{4}), "a");
  auto parts =
      b.AddNode("Split", {a}, {{"num_split", AttrValue(int64_t{2})}, {"axis", AttrValue(int64_t{0})}}, "split");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].name(), "split:1");
  EXPECT_EQ(parts[1].shape(), (Shape{2}));
  GraphBuilder c;
  Output z = c.Const(*Tensor::Zeros(DType::kF32, Shape{4}), "z");
  c.Op("Split", {z}, {{"num_split", AttrValue(int64_t{2})}, {"axis", AttrValue(int64_t{0})}}, "split");
  EXPECT_EQ(c.status().message(), "node 'split' (Split) has 2 outputs; use AddNode");
}

// What the indexing ops' shape functions infer from partly known inputs
// (their values and errors are the conformance cases').
TEST(Builder, IndexingOpsInferWhatTheirInputsTell) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3, -1, 5}, "x");
  Output k = b.Placeholder(DType::kI64, Shape{}, "k");
  Output unknown = b.Placeholder(DType::kI64, Shape::UnknownRank(), "unknown");
  EXPECT_EQ(b.AddNode("TopK", {x, b.Scalar<int64_t>(2)})[0].shape(), (Shape{3, -1, 2}));
  EXPECT_EQ(b.AddNode("TopK", {x, k}, {{"axis", AttrValue(int64_t{0})}})[1].shape(), (Shape{-1, -1, 5}));
  // Against an unknown dimension, k is the kernel's to check.
  EXPECT_EQ(b.AddNode("TopK", {x, b.Scalar<int64_t>(9)}, {{"axis", AttrValue(int64_t{1})}})[0].shape(),
            (Shape{3, 9, 5}));
  EXPECT_TRUE(b.AddNode("TopK", {unknown, k})[0].shape().unknown_rank());
  EXPECT_EQ(b.Op("NonZero", {x}).shape(), (Shape{3, -1}));
  EXPECT_EQ(b.Op("NonZero", {b.Placeholder(DType::kBool, Shape{2, 0}, "empty")}).shape(), (Shape{2, 0}));
  EXPECT_EQ(b.Op("NonZero", {unknown}).shape(), (Shape{-1, -1}));
  Output i = b.Placeholder(DType::kI64, Shape{2, -1, 7}, "i");
  EXPECT_EQ(b.Op("GatherElements", {x, i}, {{"axis", AttrValue(int64_t{2})}}).shape(), (Shape{2, -1, 7}));
  EXPECT_EQ(b.Op("GatherElements", {x, unknown}).shape(), (Shape{-1, -1, -1}));
  Output u = b.Placeholder(DType::kF32, Shape{-1, 4, -1}, "u");
  EXPECT_EQ(b.Op("ScatterElements", {x, i, u}, {{"axis", AttrValue(int64_t{-1})}}).shape(), (Shape{3, -1, 5}));
  EXPECT_EQ(b.Op("ScatterElements", {b.Placeholder(DType::kF32, Shape::UnknownRank(), "d"), i, u}).shape(),
            (Shape{-1, -1, -1}));
  EXPECT_TRUE(b.status().ok()) << b.status().ToString();
}

TEST(OpRegistry, EveryOpIsDocumentedAndShaped) {
  const auto ops = OpRegistry::Global().All();
  int visible = 0;
  for (const OpDef* op : ops) {
    EXPECT_FALSE(op->doc.empty()) << op->name;
    EXPECT_TRUE(op->shape_fn != nullptr) << op->name;
    if (op->name[0] != '_') ++visible;
  }
  EXPECT_GE(visible, 110);
  EXPECT_EQ(OpRegistry::Global().Find("MatMul")->Signature(),
            "MatMul(a: T, b: T) -> (product: T) with T: {f16, bf16, f32, f64, i32, i64}, transpose_a: bool = false, "
            "transpose_b: bool = false");
  EXPECT_EQ(OpRegistry::Global().Find("AddN")->Signature(),
            "AddN(inputs: N * T) -> (sum: T) with N: int >= 1, T: {f16, bf16, f32, f64, i8, i16, i32, i64, u8}");
}

TEST(OpRegistry, RejectsMalformedDefinitions) {
  OpRegistry r;
  EXPECT_EQ(
      r.Register(OpDefBuilder("X").Input("a T").Shape([](InferenceContext&) { return Status(); }).Doc("d")).message(),
      "op X: \"a T\": expected 'name: type'");
  EXPECT_EQ(
      r.Register(OpDefBuilder("X").Input("a: T").Shape([](InferenceContext&) { return Status(); }).Doc("d")).message(),
      "op X: arg 'a' uses type attr 'T', which is not declared as a type");
  EXPECT_EQ(
      r.Register(OpDefBuilder("X").Attr("T: {f32, cplx}").Shape([](InferenceContext&) { return Status(); }).Doc("d"))
          .message(),
      "op X: \"T: {f32, cplx}\": unknown dtype \"cplx\" in \"{f32, cplx}\"");
  EXPECT_EQ(r.Register(OpDefBuilder("X").Doc("d")).message(), "op X has no shape function");
  EXPECT_TRUE(r.Register(OpDefBuilder("X").Shape([](InferenceContext&) { return Status(); }).Doc("d")).ok());
  EXPECT_EQ(r.Register(OpDefBuilder("X").Shape([](InferenceContext&) { return Status(); }).Doc("d")).message(),
            "op X is registered twice");
}

}  // namespace
}  // namespace weft
