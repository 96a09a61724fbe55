// Args typed by a list(type) attr ("values: T" with "T: list(type)"): one
// tensor per listed dtype, as Save takes and Restore returns. Also the
// empty-list defaults of list(type) and list(shape) attrs.
#include <gtest/gtest.h>

#include "core/graph/builder.h"
#include "core/graph/shape_inference.h"

namespace weft {
namespace {

Status NoShapes(InferenceContext&) { return Status(); }

// Echo(xs: T, y: f32) -> (out: T, count: i64): its outputs mirror the
// heterogeneous list it takes.
OpRegistry EchoRegistry() {
  OpRegistry r;
  EXPECT_TRUE(r.Register(OpDefBuilder("Const")
                             .Output("output: dtype")
                             .Attr("value: tensor")
                             .Attr("dtype: type")
                             .Shape(NoShapes)
                             .Doc("c"))
                  .ok());
  EXPECT_TRUE(r.Register(OpDefBuilder("Echo")
                             .Input("xs: T")
                             .Input("y: f32")
                             .Output("out: T")
                             .Output("count: i64")
                             .Attr("T: list(type)")
                             .Attr("shapes: list(shape) = []")
                             .Attr("types: list(type) = []")
                             .Shape(NoShapes)
                             .Doc("echo"))
                  .ok());
  return r;
}

TEST(TypeListArgs, SignatureAndDefaults) {
  OpRegistry r = EchoRegistry();
  const OpDef* echo = r.Find("Echo");
  ASSERT_NE(echo, nullptr);
  EXPECT_EQ(echo->inputs[0].type_list_attr, "T");
  EXPECT_TRUE(echo->inputs[0].type_attr.empty());
  EXPECT_TRUE(echo->inputs[0].is_list());
  EXPECT_FALSE(echo->inputs[1].is_list());
  EXPECT_EQ(echo->Signature(),
            "Echo(xs: T, y: f32) -> (out: T, count: i64) with T: list(type), shapes: list(shape) = [], "
            "types: list(type) = []");
  EXPECT_EQ(*echo->FindAttr("shapes")->default_value, AttrValue(std::vector<Shape>()));
  EXPECT_EQ(*echo->FindAttr("types")->default_value, AttrValue(std::vector<DType>()));
}

TEST(TypeListArgs, InfersTheListFromTheInputs) {
  OpRegistry r = EchoRegistry();
  GraphBuilder b(r);
  Output i = b.Const(Tensor::Scalar<int32_t>(1));
  Output d = b.Const(Tensor::Scalar<double>(2));
  Output y = b.Const(Tensor::Scalar<float>(3));
  std::vector<Output> out = b.AddNode("Echo", {i, d, y}, {}, "echo");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(b.node_def(b.Find("echo").node()).attrs.at("T"), AttrValue(std::vector<DType>{DType::kI32, DType::kF64}));
  EXPECT_EQ(b.node_types(b.Find("echo").node()).output_types,
            (std::vector<DType>{DType::kI32, DType::kF64, DType::kI64}));
  // An empty list is fine.
  std::vector<Output> none = b.AddNode("Echo", {y}, {}, "none");
  ASSERT_TRUE(b.status().ok()) << b.status().ToString();
  EXPECT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].dtype(), DType::kI64);
}

TEST(TypeListArgs, ChecksAnExplicitList) {
  OpRegistry r = EchoRegistry();
  GraphBuilder b(r);
  Output i = b.Const(Tensor::Scalar<int32_t>(1), "i");
  Output y = b.Const(Tensor::Scalar<float>(3), "y");
  b.AddNode("Echo", {i, y}, {{"T", AttrValue(std::vector<DType>{DType::kF32})}}, "echo");
  EXPECT_EQ(b.status(),
            InvalidArgumentError("node 'echo' (Echo): input 0 \"i\" is i32, but 'xs' must be f32 (attr T)"));
  GraphBuilder b2(r);
  Output y2 = b2.Const(Tensor::Scalar<float>(3), "y");
  b2.AddNode("Echo", {y2}, {{"T", AttrValue(std::vector<DType>{DType::kF32, DType::kF32})}}, "echo");
  EXPECT_EQ(b2.status(), InvalidArgumentError("node 'echo' (Echo): expects 3 data inputs (",
                                              r.Find("Echo")->Signature(), "), has 1"));
}

TEST(TypeListArgs, RejectsANumberAttrOnATypeList) {
  OpRegistry r;
  EXPECT_EQ(
      r.Register(OpDefBuilder("X").Input("v: N * T").Attr("N: int").Attr("T: list(type)").Shape(NoShapes).Doc("d"))
          .message(),
      "op X: arg 'v' has both a number attr and the list(type) attr 'T'");
}

}  // namespace
}  // namespace weft
