// Graph validation: every bad-input case reported with its node.
#include "core/graph/graph.h"

#include <gtest/gtest.h>

#include "core/graph/builder.h"
#include "tests/support/node_def.h"

namespace weft {
namespace {

using testing::MakeNodeDef;
NodeDef Const(std::string name, const Tensor& value) {
  return MakeNodeDef(std::move(name), "Const", {}, {{"value", AttrValue(value)}, {"dtype", AttrValue(value.dtype())}});
}

std::string ErrorOf(std::vector<NodeDef> nodes) {
  GraphDef def;
  def.nodes = std::move(nodes);
  auto g = Graph::FromGraphDef(std::move(def));
  EXPECT_FALSE(g.ok());
  return g.ok() ? "" : g.status().message();
}

TEST(Graph, ValidatesAndInfersTypesAndShapes) {
  GraphDef def;
  def.nodes = {
      MakeNodeDef("x", "Placeholder", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{-1, 784})}}),
      Const("w", *Tensor::Zeros(DType::kF32, Shape{784, 10})), MakeNodeDef("logits", "MatMul", {"x", "w"})};
  auto g = Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const Graph::Node* logits = g->Find("logits");
  ASSERT_NE(logits, nullptr);
  EXPECT_EQ(logits->output_types[0], DType::kF32);
  EXPECT_EQ(logits->output_shapes[0], (Shape{-1, 10}));
  // T was inferred; defaults were filled in.
  EXPECT_EQ(logits->def.attrs.at("T").get<DType>(), DType::kF32);
  EXPECT_FALSE(logits->def.attrs.at("transpose_a").get<bool>());
  EXPECT_EQ(g->topological_order().back(), logits->id);
}

TEST(Graph, ShapeErrorsNameTheNode) {
  // The message STYLE.md gives as its example.
  EXPECT_EQ(ErrorOf({Const("a", *Tensor::Zeros(DType::kF32, Shape{128, 784})),
                     Const("b", *Tensor::Zeros(DType::kF32, Shape{512, 10})),
                     MakeNodeDef("dense1/matmul", "MatMul", {"a", "b"})}),
            "node 'dense1/matmul' (MatMul): inner dimensions differ: [128,784] x [512,10] (784 vs 512)");
}

TEST(Graph, UnknownOpSuggestsTheClosest) {
  EXPECT_EQ(ErrorOf({MakeNodeDef("m", "MatMull")}),
            "node 'm' (MatMull): unknown op \"MatMull\"; did you mean \"MatMul\"? (`weft ops` lists them)");
  EXPECT_EQ(ErrorOf({MakeNodeDef("m", "Frobnicate")}),
            "node 'm' (Frobnicate): unknown op \"Frobnicate\" (`weft ops` lists them)");
}

TEST(Graph, AttrErrors) {
  const Tensor one = Tensor::Scalar<float>(1);
  EXPECT_EQ(ErrorOf({MakeNodeDef("c", "Const", {}, {{"dtype", AttrValue(DType::kF32)}})}),
            "node 'c' (Const): missing attr \"value\" (value: tensor)");
  EXPECT_EQ(ErrorOf({Const("a", one), Const("b", one),
                     MakeNodeDef("m", "MatMul", {"a", "b"}, {{"transpose_a", AttrValue(int64_t{1})}})}),
            "node 'm' (MatMul): attr \"transpose_a\" must be a bool, got 1 (an int)");
  EXPECT_EQ(ErrorOf({Const("a", one), MakeNodeDef("m", "Neg", {"a"}, {{"transpose", AttrValue(true)}})}),
            "node 'm' (Neg): unknown attr \"transpose\"; Neg takes T");
  EXPECT_EQ(ErrorOf({Const("a", one), Const("b", one),
                     MakeNodeDef("m", "MatMul", {"a", "b"}, {{"transpose_c", AttrValue(true)}})}),
            "node 'm' (MatMul): unknown attr \"transpose_c\"; did you mean \"transpose_a\"?");
  EXPECT_EQ(ErrorOf({Const("s", Tensor::Strings({"x"}, Shape{})), MakeNodeDef("m", "Exp", {"s"})}),
            "node 'm' (Exp): attr \"T\" is string, which Exp does not accept (f16, bf16, f32, f64)");
  EXPECT_EQ(ErrorOf({Const("a", *Tensor::Zeros(DType::kF32, Shape{1, 4, 4, 1})),
                     MakeNodeDef("p", "MaxPool", {"a"},
                                 {{"ksize", AttrValue(std::vector<int64_t>{1, 2, 2, 1})},
                                  {"strides", AttrValue(std::vector<int64_t>{1, 2, 2, 1})},
                                  {"padding", AttrValue("FULL")}})}),
            "node 'p' (MaxPool): attr \"padding\" is \"FULL\"; expected one of \"SAME\", \"VALID\"");
  EXPECT_EQ(
      ErrorOf({Const("a", one), MakeNodeDef("s", "Split", {"a"},
                                            {{"num_split", AttrValue(int64_t{0})}, {"axis", AttrValue(int64_t{0})}})}),
      "node 's' (Split): attr \"num_split\" is 0; it must be >= 1");
}

TEST(Graph, InputErrors) {
  const Tensor one = Tensor::Scalar<float>(1);
  EXPECT_EQ(ErrorOf({Const("a", one), MakeNodeDef("n", "Neg", {"b"})}),
            "node 'n' (Neg): input 0 \"b\" names no node in the graph");
  EXPECT_EQ(ErrorOf({Const("a", one), MakeNodeDef("n", "Neg", {"a:1"})}),
            "node 'n' (Neg): input 0 \"a:1\" but node 'a' (Const) has 1 output");
  EXPECT_EQ(ErrorOf({Const("a", one), MakeNodeDef("n", "Add", {"a"})}).substr(0, 45),
            "node 'n' (Add): expects 2 data inputs (Add(x:");
  EXPECT_EQ(ErrorOf({Const("a", one), Const("b", Tensor::Scalar<double>(1)), MakeNodeDef("n", "Add", {"a", "b"})}),
            "node 'n' (Add): input 1 \"b\" is f64, but 'y' must be f32 (attr T)");
  EXPECT_EQ(ErrorOf({Const("a", one), MakeNodeDef("n", "Neg", {"^a", "a"})}),
            "node 'n' (Neg): data input \"a\" comes after a control input; list '^' inputs last");
  EXPECT_EQ(ErrorOf({Const("a", one), MakeNodeDef("n", "Neg", {"a:x"})}),
            "node 'n' (Neg): input \"a:x\" is not 'node', 'node:k' or '^node'");
}

TEST(Graph, CyclesAreNamed) {
  EXPECT_EQ(ErrorOf({MakeNodeDef("a", "Neg", {"c"}), MakeNodeDef("b", "Neg", {"a"}), MakeNodeDef("c", "Neg", {"b"})}),
            "the graph has a cycle: 'a' -> 'b' -> 'c' -> 'a' (loops need the control-flow ops "
            "Enter/NextIteration)");
  EXPECT_EQ(ErrorOf({MakeNodeDef("a", "NoOp", {"^a"})}),
            "the graph has a cycle: 'a' -> 'a' (loops need the control-flow ops Enter/NextIteration)");
}

TEST(Graph, NamesAndVersions) {
  const Tensor one = Tensor::Scalar<float>(1);
  EXPECT_EQ(ErrorOf({Const("a", one), Const("a", one)}), "node \"a\" is defined twice (nodes #0 and #1)");
  EXPECT_EQ(ErrorOf({Const("a b", one)}),
            "node #0: node name \"a b\" contains \" \"; names use letters, digits and _ . - /");
  EXPECT_EQ(ErrorOf({Const("", one)}), "node #0: a node has an empty name");
  GraphDef future;
  future.producer = 9;
  future.min_consumer = 7;
  EXPECT_EQ(Graph::FromGraphDef(future).status().message(),
            "the graph needs a reader of graph format v7 or newer (it was written by v9); this weft reads up to v1: "
            "upgrade weft");
}

TEST(Graph, ResolveTensorNames) {
  GraphBuilder b;
  b.Op("Neg", {b.Scalar<float>(1, "one")}, {}, "neg");
  Graph g = *b.Build();
  EXPECT_EQ(g.ResolveTensor("neg")->node, g.Find("neg")->id);
  EXPECT_EQ(g.ResolveTensor("ng").status().message(), "the graph has no node \"ng\"; did you mean \"neg\"?");
  EXPECT_EQ(g.ResolveTensor("^neg").status().message(), "\"^neg\" names a node, not a tensor");
}

}  // namespace
}  // namespace weft
