// Sizes at the edge (core/tensor/size.h): every op that takes a shape, a
// size, a depth, a count, paddings, a window or an index is given the values
// 2^31, 2^32, 2^62 and INT64_MAX there, in one-node graphs, and must refuse
// them with an error naming the node: never a crash, a hang, or an output.
// Each case runs twice: with constant inputs (shape inference sees the
// values and should refuse them while building) and with its inputs fed to
// Placeholders of unknown shape (the kernel's own checks).
//
// The largest tensor is set to 1 GiB for this test, so "too large" does not
// depend on this machine's memory. EveryOpThatTakesASizeIsHere finds the
// ops by the names of their inputs and attrs, so a new op with a size is
// not forgotten.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/graph/builder.h"
#include "core/tensor/size.h"
#include "tests/support/runtime_env.h"

namespace weft {
namespace {

using testing::RuntimeEnv;

constexpr int64_t kValues[] = {int64_t{1} << 31, int64_t{1} << 32, int64_t{1} << 62, INT64_MAX};

// Builds a one-node graph "op"; inputs go through In().
struct Builder {
  GraphBuilder b;
  bool fed = false;
  std::vector<std::pair<std::string, Tensor>> feeds;
  int count = 0;

  // A constant, or a Placeholder of unknown shape fed with |t|.
  Output In(const Tensor& t) {
    const std::string name = StrCat("in", count++);
    if (!fed) return b.Const(t, name);
    feeds.emplace_back(name, t);
    return b.Placeholder(t.dtype(), Shape::UnknownRank(), name);
  }
  Output I64(std::vector<int64_t> v, Shape shape) { return In(Tensor::FromVector<int64_t>(v, shape)); }
  Output I64(std::vector<int64_t> v) {
    const auto n = static_cast<int64_t>(v.size());
    return I64(std::move(v), Shape{n});
  }
  Output F32(Shape shape) {
    std::vector<float> v(static_cast<std::size_t>(shape.num_elements()), 1.0f);
    return In(Tensor::FromVector<float>(v, shape));
  }
  Output Scalar(float x) { return In(Tensor::Scalar<float>(x)); }
  Output Scalar64(int64_t x) { return In(Tensor::Scalar<int64_t>(x)); }
  void Op(const std::string& op, std::vector<Output> inputs, AttrMap attrs = {}) {
    b.AddNode(op, inputs, std::move(attrs), "op");
  }
};

AttrValue Ints(std::vector<int64_t> v) { return AttrValue(std::move(v)); }

struct SizeCase {
  std::string op;
  std::string what;  // the argument that gets the value
  std::function<void(Builder&, int64_t)> build;
  // Where a huge value is legitimate (a window or stride larger than the
  // input, with SAME padding), the output, derived by hand; else an error
  // is expected.
  std::function<Tensor()> want = nullptr;
};

Tensor Ones(Shape shape, float value = 1) {
  std::vector<float> v(static_cast<std::size_t>(shape.num_elements()), value);
  return Tensor::FromVector<float>(v, shape);
}

// Shapes and sizes given as values: what makes a tensor of that many
// elements.
std::vector<SizeCase> ShapeCases() {
  return {
      {"Fill", "dims",
       [](Builder& g, int64_t v) {
         g.Op("Fill", {g.I64({v, v}), g.Scalar(1)});
       }},
      {"Fill", "dims (one huge)",
       [](Builder& g, int64_t v) {
         g.Op("Fill", {g.I64({v}), g.Scalar(1)});
       }},
      {"Range", "limit",
       [](Builder& g, int64_t v) {
         g.Op("Range", {g.Scalar64(0), g.Scalar64(v), g.Scalar64(1)});
       }},
      {"Range", "start",
       [](Builder& g, int64_t v) {
         g.Op("Range", {g.Scalar64(-v), g.Scalar64(v), g.Scalar64(1)});
       }},
      {"Range", "limit (f32)",
       [](Builder& g, int64_t v) {
         g.Op("Range", {g.Scalar(0), g.Scalar(static_cast<float>(v)), g.Scalar(1)});
       }},
      {"BroadcastTo", "shape",
       [](Builder& g, int64_t v) {
         g.Op("BroadcastTo", {g.F32({1}), g.I64({v, v})});
       }},
      {"Tile", "multiples",
       [](Builder& g, int64_t v) {
         g.Op("Tile", {g.F32({2, 2})}, {{"multiples", Ints({v, v})}});
       }},
      {"Tile", "multiples (one huge)",
       [](Builder& g, int64_t v) {
         g.Op("Tile", {g.F32({2, 2})}, {{"multiples", Ints({v, 1})}});
       }},
      {"OneHot", "depth",
       [](Builder& g, int64_t v) {
         g.Op("OneHot", {g.I64({0, 1, 2, 3}, Shape{4})}, {{"depth", AttrValue(v)}});
       }},
      {"Pad", "paddings",
       [](Builder& g, int64_t v) {
         g.Op("Pad", {g.F32({2, 2})}, {{"paddings", Ints({v, v, 0, 0})}});
       }},
      {"Pad", "paddings (before)",
       [](Builder& g, int64_t v) {
         g.Op("Pad", {g.F32({2, 2})}, {{"paddings", Ints({v, 0, 0, 0})}});
       }},
      {"ScatterNd", "shape",
       [](Builder& g, int64_t v) {
         g.Op("ScatterNd", {g.I64({0}, Shape{1, 1}), g.F32({1})}, {{"shape", Ints({v})}});
       }},
      {"UnsortedSegmentSum", "num_segments",
       [](Builder& g, int64_t v) {
         g.Op("UnsortedSegmentSum", {g.F32({2}), g.I64({0, 1}), g.Scalar64(v)});
       }},
      {"RandomUniform", "shape",
       [](Builder& g, int64_t v) {
         g.Op("RandomUniform", {g.I64({v, v})}, {{"dtype", AttrValue(DType::kF32)}});
       }},
      {"RandomNormal", "shape",
       [](Builder& g, int64_t v) {
         g.Op("RandomNormal", {g.I64({v})}, {{"dtype", AttrValue(DType::kF32)}});
       }},
      {"TruncatedNormal", "shape",
       [](Builder& g, int64_t v) {
         g.Op("TruncatedNormal", {g.I64({v, 3})}, {{"dtype", AttrValue(DType::kF32)}});
       }},
      {"Reshape", "shape",
       [](Builder& g, int64_t v) {
         g.Op("Reshape", {g.F32({4}), g.I64({v, v})});
       }},
      {"Reshape", "shape (with -1)",
       [](Builder& g, int64_t v) {
         g.Op("Reshape", {g.F32({4}), g.I64({v, -1})});
       }},
      {"Placeholder", "shape",
       [](Builder& g, int64_t v) {
         g.Op("Placeholder", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{v, v})}});
       }},
      {"VarHandle", "shape",
       [](Builder& g, int64_t v) {
         g.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{v, v})}});
       }},
      {"Slice", "begin",
       [](Builder& g, int64_t v) {
         g.Op("Slice", {g.F32({4})}, {{"begin", Ints({v})}, {"size", Ints({1})}});
       }},
      {"Slice", "size",
       [](Builder& g, int64_t v) {
         g.Op("Slice", {g.F32({4})}, {{"begin", Ints({1})}, {"size", Ints({v})}});
       }},
      {"StridedSliceGrad", "shape",
       [](Builder& g, int64_t v) {
         g.Op("StridedSliceGrad", {g.I64({v, v}), g.I64({0, 0}), g.I64({1, 1}), g.I64({1, 1}), g.F32({1, 1})});
       }},
      {"SumToShape", "shape",
       [](Builder& g, int64_t v) {
         g.Op("SumToShape", {g.F32({2}), g.I64({v, v})});
       }},
  };
}

// Windows, strides and dilations of pools and convolutions, and the sizes
// their gradients are given.
std::vector<SizeCase> WindowCases() {
  return {
      {"AvgPoolGrad", "orig_input_shape",
       [](Builder& g, int64_t v) {
         g.Op("AvgPoolGrad", {g.I64({1, v, v, 1}), g.F32({1, 1, 1, 1})},
              {{"ksize", Ints({1, 1, 1, 1})}, {"strides", Ints({1, 1, 1, 1})}, {"padding", AttrValue("VALID")}});
       }},
      // SAME windows larger than the input: each output is the max (the
      // mean) of the whole input, all ones; the loops must not walk the
      // padding.
      {"AvgPool", "ksize (SAME)",
       [](Builder& g, int64_t v) {
         g.Op("AvgPool", {g.F32({1, 2, 2, 1})},
              {{"ksize", Ints({1, v, v, 1})}, {"strides", Ints({1, 1, 1, 1})}, {"padding", AttrValue("SAME")}});
       },
       [] {
         return Ones({1, 2, 2, 1});
       }},
      {"AvgPool", "ksize (VALID)",
       [](Builder& g, int64_t v) {
         g.Op("AvgPool", {g.F32({1, 2, 2, 1})},
              {{"ksize", Ints({1, v, 1, 1})}, {"strides", Ints({1, 1, 1, 1})}, {"padding", AttrValue("VALID")}});
       }},
      // A stride past the input: one window, at the start.
      {"MaxPool", "strides (SAME)",
       [](Builder& g, int64_t v) {
         g.Op("MaxPool", {g.F32({1, 2, 2, 1})},
              {{"ksize", Ints({1, 2, 2, 1})}, {"strides", Ints({1, v, v, 1})}, {"padding", AttrValue("SAME")}});
       },
       [] {
         return Ones({1, 1, 1, 1});
       }},
      {"MaxPool", "ksize (SAME)",
       [](Builder& g, int64_t v) {
         g.Op("MaxPool", {g.F32({1, 2, 2, 1})},
              {{"ksize", Ints({1, v, v, 1})}, {"strides", Ints({1, 1, 1, 1})}, {"padding", AttrValue("SAME")}});
       },
       [] {
         return Ones({1, 2, 2, 1});
       }},
      {"MaxPool", "ksize (VALID)",
       [](Builder& g, int64_t v) {
         g.Op("MaxPool", {g.F32({1, 2, 2, 1})},
              {{"ksize", Ints({1, 1, v, 1})}, {"strides", Ints({1, 1, 1, 1})}, {"padding", AttrValue("VALID")}});
       }},
      {"MaxPoolGrad", "ksize (VALID)",
       [](Builder& g, int64_t v) {
         g.Op("MaxPoolGrad", {g.F32({1, 2, 2, 1}), g.F32({1, 2, 2, 1}), g.F32({1, 2, 2, 1})},
              {{"ksize", Ints({1, v, v, 1})}, {"strides", Ints({1, 1, 1, 1})}, {"padding", AttrValue("VALID")}});
       }},
      {"Conv2D", "dilations (VALID)",
       [](Builder& g, int64_t v) {
         g.Op("Conv2D", {g.F32({1, 3, 3, 1}), g.F32({2, 2, 1, 1})},
              {{"dilations", Ints({1, v, v, 1})}, {"padding", AttrValue("VALID")}});
       }},
      // SAME with a stride past the input: one output, the 2x2 filter of
      // ones over the top-left corner of ones (no padding needed): 4.
      {"Conv2D", "strides (SAME)",
       [](Builder& g, int64_t v) {
         g.Op("Conv2D", {g.F32({1, 3, 3, 1}), g.F32({2, 2, 1, 1})},
              {{"strides", Ints({1, v, v, 1})}, {"padding", AttrValue("SAME")}});
       },
       [] {
         return Ones({1, 1, 1, 1}, 4);
       }},
      {"Conv2DBackpropInput", "input_sizes",
       [](Builder& g, int64_t v) {
         g.Op("Conv2DBackpropInput", {g.I64({1, v, v, 1}), g.F32({1, 1, 1, 1}), g.F32({1, 1, 1, 1})},
              {{"padding", AttrValue("VALID")}});
       }},
      {"Conv2DBackpropFilter", "filter_sizes",
       [](Builder& g, int64_t v) {
         g.Op("Conv2DBackpropFilter", {g.F32({1, 1, 1, 1}), g.I64({v, v, 1, 1}), g.F32({1, 1, 1, 1})},
              {{"padding", AttrValue("SAME")}});
       }},
      {"DepthwiseConv2D", "dilations",
       [](Builder& g, int64_t v) {
         g.Op("DepthwiseConv2D", {g.F32({1, 3, 3, 1}), g.F32({2, 2, 1, 1})},
              {{"dilations", Ints({1, v, v, 1})}, {"padding", AttrValue("VALID")}});
       }},
      {"DepthwiseConv2DBackpropInput", "input_sizes",
       [](Builder& g, int64_t v) {
         g.Op("DepthwiseConv2DBackpropInput", {g.I64({1, v, v, 1}), g.F32({1, 1, 1, 1}), g.F32({1, 1, 1, 1})},
              {{"padding", AttrValue("VALID")}});
       }},
      {"DepthwiseConv2DBackpropFilter", "filter_sizes",
       [](Builder& g, int64_t v) {
         g.Op("DepthwiseConv2DBackpropFilter", {g.F32({1, 1, 1, 1}), g.I64({v, v, 1, 1}), g.F32({1, 1, 1, 1})},
              {{"padding", AttrValue("SAME")}});
       }},
  };
}

// Counts (of outputs, inputs, partitions) and axes or indices.
std::vector<SizeCase> CountAndAxisCases() {
  return {
      {"Split", "num_split",
       [](Builder& g, int64_t v) {
         g.Op("Split", {g.F32({4})}, {{"num_split", AttrValue(v)}, {"axis", AttrValue(int64_t{0})}});
       }},
      {"DynamicSplit", "num_split",
       [](Builder& g, int64_t v) {
         g.Op("DynamicSplit", {g.F32({4}), g.In(Tensor::FromVector<int64_t>({2, 2}, Shape{2}))},
              {{"num_split", AttrValue(v)}, {"axis", AttrValue(int64_t{0})}});
       }},
      {"DynamicPartition", "num_partitions",
       [](Builder& g, int64_t v) {
         g.Op("DynamicPartition", {g.F32({2}), g.In(Tensor::FromVector<int32_t>({0, 1}, Shape{2}))},
              {{"num_partitions", AttrValue(v)}});
       }},
      {"AddN", "N",
       [](Builder& g, int64_t v) {
         g.Op("AddN", {g.F32({2}), g.F32({2})}, {{"N", AttrValue(v)}});
       }},
      // A bound, not a size: a huge max_output_boxes_per_class (exported
      // models give INT64_MAX) selects what there is. Two boxes of no area
      // suppress nothing; equal scores take the lower index first.
      {"NonMaxSuppression", "max_output_boxes_per_class",
       [](Builder& g, int64_t v) {
         g.Op("NonMaxSuppression", {g.F32({1, 2, 4}), g.F32({1, 1, 2}), g.Scalar64(v), g.Scalar(0.5), g.Scalar(0)});
       },
       [] {
         return Tensor::FromVector<int64_t>({0, 0, 0, 0, 0, 1}, Shape{2, 3});
       }},
      {"OnnxUnique", "axis",
       [](Builder& g, int64_t v) {
         g.Op("OnnxUnique", {g.F32({4})}, {{"axis", AttrValue(v)}, {"has_axis", AttrValue(true)}});
       }},
      {"ExpandDims", "axis",
       [](Builder& g, int64_t v) {
         g.Op("ExpandDims", {g.F32({2})}, {{"axis", AttrValue(v)}});
       }},
      {"Gather", "indices",
       [](Builder& g, int64_t v) {
         g.Op("Gather", {g.F32({4}), g.I64({v})});
       }},
      {"GatherNd", "indices",
       [](Builder& g, int64_t v) {
         g.Op("GatherNd", {g.F32({4}), g.I64({v}, Shape{1, 1})});
       }},
      {"GatherElements", "indices",
       [](Builder& g, int64_t v) {
         g.Op("GatherElements", {g.F32({4}), g.I64({v})});
       }},
      {"ScatterElements", "indices",
       [](Builder& g, int64_t v) {
         g.Op("ScatterElements", {g.F32({4}), g.I64({v}), g.F32({1})});
       }},
      {"TopK", "k",
       [](Builder& g, int64_t v) {
         g.Op("TopK", {g.F32({4}), g.Scalar64(v)});
       }},
      {"Cumsum", "axis",
       [](Builder& g, int64_t v) {
         g.Op("Cumsum", {g.F32({4}), g.Scalar64(v)});
       }},
      {"Sum", "axis",
       [](Builder& g, int64_t v) {
         g.Op("Sum", {g.F32({4})}, {{"axis", Ints({v})}});
       }},
      {"Transpose", "perm",
       [](Builder& g, int64_t v) {
         g.Op("Transpose", {g.F32({2, 2})}, {{"perm", Ints({v, 0})}});
       }},
      {"Softmax", "axis",
       [](Builder& g, int64_t v) {
         g.Op("Softmax", {g.F32({4})}, {{"axis", AttrValue(v)}});
       }},
      {"Concat", "axis",
       [](Builder& g, int64_t v) {
         g.Op("Concat", {g.F32({2}), g.F32({2})}, {{"axis", AttrValue(v)}});
       }},
  };
}

// Every case, in one list.
const std::vector<SizeCase>& Cases() {
  static const std::vector<SizeCase> cases = [] {
    std::vector<SizeCase> all;
    for (std::vector<SizeCase> part : {ShapeCases(), WindowCases(), CountAndAxisCases()}) {
      all.insert(all.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
    }
    return all;
  }();
  return cases;
}

class HugeShapeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env_ = new RuntimeEnv();
    SetMaxTensorBytes(uint64_t{1} << 30);
  }
  static void TearDownTestSuite() {
    SetMaxTensorBytes(0);
    delete env_;
    env_ = nullptr;
  }

  // Builds and runs the case with |v|; returns the first error, or OK when
  // it produced an output.
  static Status Run(const SizeCase& c, int64_t v, bool fed, std::vector<Tensor>* out = nullptr) {
    Builder g;
    g.fed = fed;
    c.build(g, v);
    auto graph = g.b.Build();
    if (!graph.ok()) return graph.status();
    auto session = runtime::Session::Create(std::move(*graph), env_->devices());
    if (!session.ok()) return session.status();
    const Graph::Node* node = (*session)->graph().Find("op");
    std::vector<std::string> fetches;
    for (int i = 0; i < node->num_outputs(); ++i) fetches.push_back(InputRefString("op", i));
    std::vector<Tensor> ignored;
    return (*session)->Run(g.feeds, fetches,
                           fetches.empty() ? std::vector<std::string>{"op"} : std::vector<std::string>{},
                           out != nullptr ? out : &ignored);
  }

  static RuntimeEnv* env_;
};

RuntimeEnv* HugeShapeTest::env_ = nullptr;

class EverySize : public HugeShapeTest, public ::testing::WithParamInterface<std::size_t> {};

TEST_P(EverySize, AtTheEdgeIsRefusedNamingTheNode) {
  const SizeCase& c = Cases()[GetParam()];
  for (int64_t v : kValues) {
    for (bool fed : {false, true}) {
      SCOPED_TRACE(StrCat(c.op, " with ", c.what, " = ", v, fed ? ", inputs fed" : ", inputs constant"));
      std::vector<Tensor> out;
      Status s = Run(c, v, fed, &out);
      if (c.want) {
        ASSERT_TRUE(s.ok()) << s.ToString();
        ASSERT_EQ(out.size(), 1u);
        const Tensor want = c.want();
        EXPECT_TRUE(out[0].BitwiseEquals(want)) << out[0].DebugString(8) << ", want " << want.DebugString(8);
        continue;
      }
      ASSERT_FALSE(s.ok()) << "produced an output";
      EXPECT_NE(s.message().find("'op'"), std::string::npos) << "the error does not name the node: " << s.ToString();
      EXPECT_TRUE(s.code() == Code::kInvalidArgument || s.code() == Code::kResourceExhausted ||
                  s.code() == Code::kOutOfRange)
          << s.ToString();
    }
  }
}

std::string CaseName(const ::testing::TestParamInfo<std::size_t>& info) {
  const SizeCase& c = Cases()[info.param];
  std::string name = StrCat(c.op, "_", c.what);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return StrCat(name, "_", info.param);
}

INSTANTIATE_TEST_SUITE_P(HugeShape, EverySize, ::testing::Range<std::size_t>(0, Cases().size()), CaseName);

// A too large tensor names the limit and what it would have needed.
TEST_F(HugeShapeTest, TheAllocationLimitIsNamed) {
  Status s = Run(Cases()[1], int64_t{1} << 31, /*fed=*/true);
  EXPECT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("f32[2147483648] needs 8.0 GiB, more than the largest tensor allowed, 1.0 GiB "
                             "(runtime.max_tensor_mb"),
            std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("node 'op' (Fill)"), std::string::npos) << s.ToString();
}

// Strings count what they cost on the host (a std::string and a view, 48
// bytes here), not one byte each: 2^27 of them are 6 GiB.
TEST_F(HugeShapeTest, StringsCountWhatTheyCost) {
  auto bytes = TensorBytes(DType::kString, Shape{int64_t{1} << 27});
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), Code::kResourceExhausted);
  EXPECT_NE(bytes.status().message().find("string[134217728] needs 6.0 GiB"), std::string::npos)
      << bytes.status().ToString();
  // And a tensor of strings is refused before it is made.
  auto t = Tensor::Allocate(DType::kString, Shape{int64_t{1} << 27});
  EXPECT_EQ(t.status().code(), Code::kResourceExhausted) << t.status().ToString();
}

// A shape no tensor can have is refused while building, naming the output.
TEST_F(HugeShapeTest, AnImpossibleShapeIsRefusedWhileBuilding) {
  Builder g;
  g.Op("Fill", {g.I64({int64_t{1} << 60, 4}), g.Scalar(1)});
  auto graph = g.b.Build();
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.status().message().find(
                "node 'op' (Fill): output 0: f32[1152921504606846976,4] would take more than 2^63 bytes"),
            std::string::npos)
      << graph.status().ToString();
}

TEST_F(HugeShapeTest, RankNineIsRefusedWhileBuilding) {
  Builder g;
  g.Op("ExpandDims", {g.F32({1, 1, 1, 1, 1, 1, 1, 1})}, {{"axis", AttrValue(int64_t{0})}});
  auto graph = g.b.Build();
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.status().message().find("node 'op' (ExpandDims): output 0: shape [1,1,1,1,1,1,1,1,1] has rank 9, "
                                          "above the maximum of 8"),
            std::string::npos)
      << graph.status().ToString();
}

// A slice whose end (begin + size) would pass INT64_MAX is refused while
// building, not at run time.
TEST_F(HugeShapeTest, ASliceEndPastInt64IsRefusedWhileBuilding) {
  Builder g;
  g.Op("Slice", {g.F32({4})}, {{"begin", Ints({1})}, {"size", Ints({INT64_MAX})}});
  auto graph = g.b.Build();
  ASSERT_FALSE(graph.ok());
  EXPECT_NE(graph.status().message().find(
                "node 'op' (Slice): a slice of size 9223372036854775807 from 1 is outside dimension 0 of [4]"),
            std::string::npos)
      << graph.status().ToString();
}

// A float Range to infinity (or from NaN) has no length: refused with the
// values, while building and by the kernel.
TEST_F(HugeShapeTest, AFloatRangeToInfinityIsRefused) {
  for (bool fed : {false, true}) {
    Builder g;
    g.fed = fed;
    g.Op("Range", {g.Scalar(0), g.Scalar(INFINITY), g.Scalar(1)});
    Status s;
    auto graph = g.b.Build();
    if (!graph.ok()) {
      s = graph.status();
      EXPECT_FALSE(fed) << "a fed Range cannot be refused while building";
    } else {
      auto session = runtime::Session::Create(std::move(*graph), env_->devices());
      ASSERT_TRUE(session.ok()) << session.status().ToString();
      std::vector<Tensor> out;
      s = (*session)->Run(g.feeds, {"op"}, {}, &out);
    }
    EXPECT_NE(s.message().find("node 'op' (Range)"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("start, limit and delta must be finite, got 0, inf, 1"), std::string::npos)
        << s.ToString();
  }
}

// Names of inputs and attrs that carry a size, a shape, a count, paddings,
// a window or an index. Every op with one must have a case above, or a
// reason here.
TEST_F(HugeShapeTest, EveryOpThatTakesASizeIsHere) {
  static const std::set<std::string> kSizeNames = {"dims",
                                                   "shape",
                                                   "limit",
                                                   "num_segments",
                                                   "multiples",
                                                   "paddings",
                                                   "depth",
                                                   "size",
                                                   "begin",
                                                   "ksize",
                                                   "strides",
                                                   "dilations",
                                                   "input_sizes",
                                                   "filter_sizes",
                                                   "orig_input_shape",
                                                   "num_split",
                                                   "num_partitions",
                                                   "N",
                                                   "indices",
                                                   "k",
                                                   "n",
                                                   "capacity",
                                                   "index",
                                                   "parallel_iterations",
                                                   "num_shards",
                                                   "shard",
                                                   "min_after_dequeue"};
  static const std::map<std::string, std::string> kElsewhere = {
      {"StridedSlice", "begin/end are indices clamped as NumPy clamps them; the edge-case suite covers them"},
      {"ResourceGather", "variable_test.cc: an index out of range is an error naming it"},
      {"ResourceScatterAdd", "variable_test.cc"},
      {"Pack", "N must equal the number of inputs, as for AddN"},
      {"Concat", "N: as AddN; its axis is here"},
      {"ConcatOffset", "N: as AddN"},
      {"DynamicStitch", "N: as AddN"},
      {"Merge", "N: as AddN"},
      {"QueueDequeueMany", "queue_test.cc: n above the capacity, and n on a closed queue"},
      {"FIFOQueue", "queue_test.cc: capacity is a bound, nothing is allocated from it"},
      {"RandomShuffleQueue", "queue_test.cc"},
      {"StackPush", "stack_test.cc: an index is a key, nothing is allocated from it"},
      {"StackPop", "stack_test.cc"},
      {"Enter", "loop_executor_test.cc: parallel_iterations bounds the iterations in flight"},
      {"SaveShard", "checkpoint_test.cc: shard and num_shards only name files"},
      {"GradientAccumulator",
       "sync_ops_test.cc: a huge shape is refused through CheckShapeFits; memory comes from the gradients"},
      {"CollectiveAllReduce", "N: as AddN (collectives_test.cc)"},
  };
  std::set<std::string> covered;
  for (const SizeCase& c : Cases()) covered.insert(c.op);
  for (const OpDef* op : OpRegistry::Global().All()) {
    if (op->name[0] == '_') continue;
    bool takes_size = false;
    for (const ArgDef& arg : op->inputs) takes_size |= kSizeNames.count(arg.name) != 0;
    for (const AttrDef& attr : op->attrs) takes_size |= kSizeNames.count(attr.name) != 0;
    if (!takes_size) continue;
    EXPECT_TRUE(covered.count(op->name) != 0 || kElsewhere.count(op->name) != 0)
        << op->name << " takes a size but has no case in huge_shape_test.cc";
  }
}

}  // namespace
}  // namespace weft
