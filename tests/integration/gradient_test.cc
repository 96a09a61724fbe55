// Symbolic gradients (core/grad) checked against central finite
// differences in f64, op by op, on the CPU device; plus the structure of
// AddGradients: fan-in, StopGradient, unreachable xs, variables, errors.
//
// Each case builds y = op(inputs) and the scalar L = sum_k sum(y_k * W_k)
// with fixed random weights W_k, so dL/dx is a general vector-Jacobian
// product. For every element x_j of every differentiated input,
// (L(x + h e_j) - L(x - h e_j)) / 2h must match dL/dx_j from the graph that
// AddGradients built: |numeric - symbolic| <= 1e-6 (1 + |symbolic|).
#include "core/grad/gradients.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"

namespace weft {
namespace {

using testing::RuntimeEnv;

// One input of a case: either a fed f64 tensor of |shape| drawn from
// [lo, hi) (or given |values|), differentiated; or a fixed tensor (indices,
// conditions, shapes), not.
struct In {
  Shape shape;
  double lo = -2, hi = 2;
  // Keep |x| >= away (for functions with a kink or pole at 0).
  double away = 0;
  std::vector<double> values;
  Tensor fixed;

  static In F(Shape s, double lo = -2, double hi = 2) { return Away(std::move(s), 0, lo, hi); }
  static In Away(Shape s, double away = 0.2, double lo = -2, double hi = 2) {
    In in;
    in.shape = std::move(s);
    in.lo = lo;
    in.hi = hi;
    in.away = away;
    return in;
  }
  static In Values(Shape s, std::vector<double> v) {
    In in;
    in.shape = std::move(s);
    in.values = std::move(v);
    return in;
  }
  static In Fixed(Tensor t) {
    In in;
    in.fixed = std::move(t);
    return in;
  }
  bool fed() const { return !fixed.valid(); }
};

struct Case {
  Case(std::string name_, std::string op_, std::vector<In> inputs_, AttrMap attrs_ = {}, std::vector<int> outputs_ = {},
       double h_ = 1e-5, double tolerance_ = 1e-6)
      : name(std::move(name_)),
        op(std::move(op_)),
        inputs(std::move(inputs_)),
        attrs(std::move(attrs_)),
        outputs(std::move(outputs_)),
        h(h_),
        tolerance(tolerance_) {}
  std::string name;
  std::string op;
  std::vector<In> inputs;
  AttrMap attrs;
  // Which outputs enter L (all when empty).
  std::vector<int> outputs;
  double h = 1e-5;
  double tolerance = 1e-6;
};

// Built with append: GCC 12 warns falsely (-Wrestrict) on "x" + to_string.
std::string XName(std::size_t i) {
  std::string name = "x";
  name.append(std::to_string(i));
  return name;
}

Tensor Draw(const In& in, std::mt19937_64& rng) {
  Tensor t = *Tensor::Allocate(DType::kF64, in.shape);
  std::uniform_real_distribution<double> u(in.lo, in.hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    double v = in.values.empty() ? u(rng) : in.values[static_cast<std::size_t>(i)];
    if (in.values.empty() && in.away > 0) {
      while (std::abs(v) < in.away) v = u(rng);
    }
    t.data<double>()[i] = v;
  }
  return t;
}

Tensor RandomLike(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  Tensor t = *Tensor::Allocate(DType::kF64, shape);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<double>()[i] = u(rng);
  if (dtype == DType::kF64) return t;
  Tensor f = *Tensor::Allocate(dtype, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) f.data<float>()[i] = static_cast<float>(t.data<double>()[i]);
  return f;
}

double ScalarOf(const Tensor& t) {
  return t.dtype() == DType::kF64 ? t.scalar<double>() : static_cast<double>(t.scalar<float>());
}

// Runs one case and reports every mismatch.
void Check(RuntimeEnv& env, const Case& c) {
  SCOPED_TRACE(c.name);
  std::mt19937_64 rng(std::hash<std::string>{}(c.name) & 0xffffffff);
  std::vector<Tensor> values;
  for (const In& in : c.inputs) values.push_back(in.fed() ? Draw(in, rng) : in.fixed);

  // The op alone first, for the shapes of its outputs.
  std::vector<Shape> out_shapes;
  std::vector<DType> out_types;
  {
    GraphBuilder b;
    std::vector<Output> ins;
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      const std::string name = XName(i);
      ins.push_back(b.Const(values[i], name));
    }
    std::vector<Output> outs = b.AddNode(c.op, ins, c.attrs, "op");
    ASSERT_TRUE(b.status().ok()) << b.status().ToString();
    auto session = env.Session(b);
    std::vector<std::string> fetches;
    for (const Output& o : outs) fetches.push_back(o.name());
    std::vector<Tensor> results;
    Status s = session->Run({}, fetches, {}, &results);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const Tensor& r : results) {
      out_shapes.push_back(r.shape());
      out_types.push_back(r.dtype());
    }
  }

  GraphBuilder b;
  std::vector<Output> ins, xs;
  std::vector<std::size_t> x_inputs;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string name = XName(i);
    if (c.inputs[i].fed()) {
      ins.push_back(b.Placeholder(DType::kF64, values[i].shape(), name));
      xs.push_back(ins.back());
      x_inputs.push_back(i);
    } else {
      ins.push_back(b.Const(values[i], name));
    }
  }
  std::vector<Output> outs = b.AddNode(c.op, ins, c.attrs, "op");
  std::vector<Output> terms;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (!c.outputs.empty() && std::find(c.outputs.begin(), c.outputs.end(), static_cast<int>(k)) == c.outputs.end()) {
      continue;
    }
    if (!IsFloating(out_types[k])) continue;
    Output w = b.Const(RandomLike(out_types[k], out_shapes[k], rng));
    Output term = b.Op("Sum", {b.Op("Mul", {outs[k], w})});
    if (out_types[k] != DType::kF64) term = b.Op("Cast", {term}, {{"DstT", AttrValue(DType::kF64)}});
    terms.push_back(term);
  }
  ASSERT_FALSE(terms.empty());
  Output loss = terms.size() == 1 ? b.Op("Identity", {terms[0]}, {}, "loss") : b.Op("AddN", terms, {}, "loss");
  auto grads = grad::AddGradients(b, {loss}, xs);
  ASSERT_TRUE(grads.ok()) << grads.status().ToString();
  auto session = env.Session(b);

  std::vector<std::pair<std::string, Tensor>> feeds;
  for (std::size_t i : x_inputs) feeds.emplace_back(XName(i), values[i]);
  std::vector<std::string> fetches = {"loss"};
  for (const Output& g : *grads) fetches.push_back(g.name());
  std::vector<Tensor> base;
  Status s = session->Run(feeds, fetches, {}, &base);
  ASSERT_TRUE(s.ok()) << s.ToString();

  int mismatches = 0;
  for (std::size_t xi = 0; xi < x_inputs.size(); ++xi) {
    const Tensor& symbolic = base[xi + 1];
    ASSERT_EQ(symbolic.dtype(), DType::kF64);
    ASSERT_EQ(symbolic.shape(), values[x_inputs[xi]].shape()) << "gradient of input " << x_inputs[xi];
    for (int64_t j = 0; j < symbolic.num_elements(); ++j) {
      auto loss_at = [&](double delta) {
        auto shifted = feeds;
        Tensor copy = *Tensor::Allocate(DType::kF64, values[x_inputs[xi]].shape());
        std::copy_n(values[x_inputs[xi]].data<double>(), copy.num_elements(), copy.data<double>());
        copy.data<double>()[j] += delta;
        shifted[xi].second = copy;
        std::vector<Tensor> out;
        Status st = session->Run(shifted, {"loss"}, {}, &out);
        EXPECT_TRUE(st.ok()) << st.ToString();
        return st.ok() ? ScalarOf(out[0]) : 0.0;
      };
      const double numeric = (loss_at(c.h) - loss_at(-c.h)) / (2 * c.h);
      const double got = symbolic.data<double>()[j];
      if (!(std::abs(numeric - got) <= c.tolerance * (1 + std::abs(got))) && ++mismatches <= 5) {
        ADD_FAILURE() << "input " << x_inputs[xi] << " element " << j << ": symbolic " << got << ", numeric "
                      << numeric;
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

Tensor I64(std::vector<int64_t> v, Shape s) { return Tensor::FromVector<int64_t>(v, std::move(s)); }
Tensor I32(std::vector<int32_t> v, Shape s) { return Tensor::FromVector<int32_t>(v, std::move(s)); }
Tensor Bools(std::vector<bool> v, Shape s) {
  Tensor t = *Tensor::Allocate(DType::kBool, s);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<bool>()[i] = v[i];
  return t;
}

AttrMap A(std::initializer_list<std::pair<const std::string, AttrValue>> attrs) { return AttrMap(attrs); }
std::vector<int64_t> L(std::initializer_list<int64_t> v) { return v; }

// Unary and binary elementwise ops, reductions, matrix products.
void AddElementwiseCases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  const Shape m{2, 3};
  // Unary.
  for (const char* op :
       {"Identity", "Neg", "Exp", "Expm1", "Square", "Sin", "Cos", "Tanh", "Sigmoid", "Softplus", "Erf", "Sign"}) {
    add({op, op, {In::F(m)}});
  }
  for (const char* op : {"Abs", "Reciprocal", "Relu", "Elu", "Selu"}) add({op, op, {In::Away(m)}});
  for (const char* op : {"Atan", "Sinh", "Cosh", "Asinh"}) add({op, op, {In::F(m)}});
  add({"Tan", "Tan", {In::F(m, -1, 1)}});
  for (const char* op : {"Asin", "Acos", "Atanh"}) add({op, op, {In::F(m, -0.8, 0.8)}});
  add({"Acosh", "Acosh", {In::F(m, 1.5, 3)}});
  add({"Log", "Log", {In::F(m, 0.2, 3)}});
  add({"Log1p", "Log1p", {In::F(m, -0.5, 3)}});
  add({"Sqrt", "Sqrt", {In::F(m, 0.2, 3)}});
  add({"Rsqrt", "Rsqrt", {In::F(m, 0.2, 3)}});
  add({"Relu6", "Relu6", {In::Values(Shape{6}, {-1.5, -0.3, 0.7, 3.2, 5.5, 7.1})}});
  add({"Gelu", "Gelu", {In::F(m)}});
  add({"Gelu/approximate", "Gelu", {In::F(m)}, A({{"approximate", AttrValue(true)}})});
  add({"Cast/f64-f32", "Cast", {In::F(m)}, A({{"DstT", AttrValue(DType::kF32)}}), {}, 1e-2, 1e-4});
  add({"AddN", "AddN", {In::F(m), In::F(m), In::F(m)}});
  // Binary, with broadcasting.
  for (const char* op : {"Add", "Sub", "Mul", "SquaredDifference", "Maximum", "Minimum"}) {
    add({std::string(op) + "/same", op, {In::F(m), In::F(m)}});
    add({std::string(op) + "/row", op, {In::F(m), In::F(Shape{3})}});
    add({std::string(op) + "/column", op, {In::F(Shape{2, 1}), In::F(m)}});
    add({std::string(op) + "/scalar", op, {In::F(Shape{}), In::F(m)}});
  }
  for (const char* op : {"Div", "RealDiv"}) {
    add({std::string(op) + "/same", op, {In::F(m), In::Away(m, 0.5)}});
    add({std::string(op) + "/row", op, {In::F(Shape{4, 3}), In::Away(Shape{3}, 0.5)}});
  }
  add({"Pow", "Pow", {In::F(m, 0.5, 2), In::F(m, -1, 2)}});
  add({"Pow/broadcast", "Pow", {In::F(m, 0.5, 2), In::F(Shape{}, 1, 3)}});
  add({"FloorMod", "FloorMod", {In::Values(m, {0.3, 1.7, 2.6, 4.1, 5.3, 0.9}), In::Values(Shape{3}, {1.3, 1.9, 1.1})}});
  add({"Select", "Select", {In::Fixed(Bools({true, false, false, true, true, false}, m)), In::F(m), In::F(m)}});
  add({"Select/broadcast", "Select", {In::Fixed(Bools({true, false, true}, Shape{3})), In::F(m), In::F(Shape{1})}});
  add({"ClipByValue",
       "ClipByValue",
       {In::Values(m, {-1.7, -0.2, 0.4, 1.3, 2.2, -0.9}), In::Values(Shape{}, {-0.5}), In::Values(Shape{}, {1.0})}});
  // Reductions.
  const Shape cube{2, 3, 4};
  add({"Sum/axis1", "Sum", {In::F(cube)}, A({{"axis", AttrValue(L({1}))}})});
  add({"Sum/all", "Sum", {In::F(cube)}});
  add({"Sum/keep", "Sum", {In::F(cube)}, A({{"axis", AttrValue(L({0, 2}))}, {"keep_dims", AttrValue(true)}})});
  add({"Mean/axes", "Mean", {In::F(cube)}, A({{"axis", AttrValue(L({0, -1}))}})});
  add({"Mean/all-keep", "Mean", {In::F(cube)}, A({{"keep_dims", AttrValue(true)}})});
  add({"Max/axis1", "Max", {In::F(cube)}, A({{"axis", AttrValue(L({1}))}})});
  add({"Max/ties", "Max", {In::Values(Shape{2, 2}, {1.0, 1.0, -2.0, 3.0})}, A({{"axis", AttrValue(L({1}))}})});
  add({"Min/all", "Min", {In::F(cube)}});
  add({"Prod/axis1", "Prod", {In::F(cube, 0.5, 1.5)}, A({{"axis", AttrValue(L({1}))}})});
  add({"Prod/with-zero",
       "Prod",
       {In::Values(Shape{2, 3}, {0.0, 1.5, -2.0, 0.5, 0.0, 0.0})},
       A({{"axis", AttrValue(L({1}))}})});
  add({"Prod/axes02-keep",
       "Prod",
       {In::F(cube, 0.5, 1.5)},
       A({{"axis", AttrValue(L({0, 2}))}, {"keep_dims", AttrValue(true)}})});
  // Matrix products.
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::string suffix = std::string(ta ? "T" : "N") + (tb ? "T" : "N");
      add({"MatMul/" + suffix,
           "MatMul",
           {In::F(ta ? Shape{4, 3} : Shape{3, 4}), In::F(tb ? Shape{2, 4} : Shape{4, 2})},
           A({{"transpose_a", AttrValue(ta)}, {"transpose_b", AttrValue(tb)}})});
      add({"BatchMatMul/" + suffix,
           "BatchMatMul",
           {In::F(ta ? Shape{2, 4, 3} : Shape{2, 3, 4}), In::F(tb ? Shape{2, 2, 4} : Shape{2, 4, 2})},
           A({{"adj_x", AttrValue(ta)}, {"adj_y", AttrValue(tb)}})});
    }
  }
  add({"BatchMatMul/broadcast", "BatchMatMul", {In::F(Shape{2, 1, 3, 4}), In::F(Shape{3, 4, 2})}});
}

// Array and indexing ops.
void AddArrayCases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  const Shape cube{2, 3, 4};
  const Shape m{2, 3};
  // Array ops.
  add({"Reshape", "Reshape", {In::F(cube), In::Fixed(I64({4, -1}, Shape{2}))}});
  add({"ExpandDims", "ExpandDims", {In::F(m)}, A({{"axis", AttrValue(int64_t{1})}})});
  add({"Squeeze", "Squeeze", {In::F(Shape{2, 1, 3})}});
  add({"DynamicExpandDims", "DynamicExpandDims", {In::F(m), In::Fixed(I64({-1, 0}, Shape{2}))}});
  add({"DynamicSqueeze", "DynamicSqueeze", {In::F(Shape{2, 1, 3, 1}), In::Fixed(I64({1, -1}, Shape{2}))}});
  add({"Transpose", "Transpose", {In::F(cube)}, A({{"perm", AttrValue(L({2, 0, 1}))}})});
  add({"Transpose/reverse", "Transpose", {In::F(cube)}});
  add({"Reverse", "Reverse", {In::F(cube)}, A({{"axis", AttrValue(L({0, 2}))}})});
  add({"Concat", "Concat", {In::F(Shape{2, 1}), In::F(m), In::F(Shape{2, 2})}, A({{"axis", AttrValue(int64_t{-1})}})});
  add({"Split",
       "Split",
       {In::F(Shape{6, 2})},
       A({{"num_split", AttrValue(int64_t{3})}, {"axis", AttrValue(int64_t{0})}})});
  add({"Split/one-used",
       "Split",
       {In::F(Shape{6, 2})},
       A({{"num_split", AttrValue(int64_t{3})}, {"axis", AttrValue(int64_t{0})}}),
       {1}});
  add({"Slice", "Slice", {In::F(cube)}, A({{"begin", AttrValue(L({1, 0, 1}))}, {"size", AttrValue(L({1, -1, 2}))}})});
  add({"StridedSlice",
       "StridedSlice",
       {In::F(cube)},
       A({{"begin", AttrValue(L({0, -1, 0}))},
          {"end", AttrValue(L({2, 0, 4}))},
          {"strides", AttrValue(L({1, -1, 2}))},
          {"shrink_axis_mask", AttrValue(int64_t{0})}})});
  add({"StridedSlice/shrink",
       "StridedSlice",
       {In::F(cube)},
       A({{"begin", AttrValue(L({1, 0, 0}))},
          {"end", AttrValue(L({2, 3, 4}))},
          {"strides", AttrValue(L({1, 1, 1}))},
          {"shrink_axis_mask", AttrValue(int64_t{1})}})});
  add({"Pad", "Pad", {In::F(m)}, A({{"paddings", AttrValue(L({1, 0, 2, 1}))}})});
  add({"Tile", "Tile", {In::F(m)}, A({{"multiples", AttrValue(L({2, 3}))}})});
  add({"Gather/axis0", "Gather", {In::F(Shape{4, 3}), In::Fixed(I64({3, 0, 3, 1}, Shape{2, 2}))}});
  add({"Gather/axis1",
       "Gather",
       {In::F(cube), In::Fixed(I32({2, 2, 0}, Shape{3}))},
       A({{"axis", AttrValue(int64_t{1})}})});
  add({"GatherNd", "GatherNd", {In::F(cube), In::Fixed(I64({1, 2, 0, 0, 1, 2}, Shape{3, 2}))}});
  add({"ScatterNd",
       "ScatterNd",
       {In::Fixed(I64({1, 3, 1}, Shape{3, 1})), In::F(Shape{3, 2})},
       A({{"shape", AttrValue(L({4, 2}))}})});
  add({"Fill", "Fill", {In::Fixed(I64({2, 3}, Shape{2})), In::F(Shape{})}});
  add({"DynamicPartition",
       "DynamicPartition",
       {In::F(Shape{5, 2}), In::Fixed(I32({1, 0, 2, 1, 0}, Shape{5}))},
       A({{"num_partitions", AttrValue(int64_t{3})}})});
  add({"DynamicPartition/one-used",
       "DynamicPartition",
       {In::F(Shape{2, 3, 2}), In::Fixed(I32({1, 0, 1, 1, 0, 1}, Shape{2, 3}))},
       A({{"num_partitions", AttrValue(int64_t{2})}}),
       {1}});
  add({"DynamicStitch",
       "DynamicStitch",
       {In::Fixed(I32({0, 3}, Shape{2})), In::Fixed(I32({2, 1, 4, 5}, Shape{2, 2})), In::F(Shape{2, 3}),
        In::F(Shape{2, 2, 3})},
       A({{"N", AttrValue(int64_t{2})}})});
  // Indexing ops. The values are drawn at random, so TopK sees no ties.
  add({"TopK", "TopK", {In::F(Shape{3, 5}), In::Fixed(Tensor::Scalar<int64_t>(3))}});
  add({"TopK/axis0-smallest",
       "TopK",
       {In::F(Shape{4, 3}), In::Fixed(Tensor::Scalar<int32_t>(2))},
       A({{"axis", AttrValue(int64_t{0})}, {"largest", AttrValue(false)}})});
  add({"GatherElements/axis0",
       "GatherElements",
       {In::F(Shape{3, 4}), In::Fixed(I64({2, 0, -1, 1, 0, 0, 2, 1}, Shape{2, 4}))}});
  add({"GatherElements/axis1-narrower",
       "GatherElements",
       {In::F(Shape{3, 3}), In::Fixed(I32({2, 2, 0, 1, -3, 1, 1, 0}, Shape{2, 4}))},
       A({{"axis", AttrValue(int64_t{1})}})});
  // Rows 1 and 2 are written twice in columns 0 and 2: the last update wins.
  add({"ScatterElements/none-repeated",
       "ScatterElements",
       {In::F(Shape{3, 4}), In::Fixed(I64({1, 0, 2, 1, 1, 2, 2, 0}, Shape{2, 4})), In::F(Shape{2, 4})}});
  add({"ScatterElements/add-axis1",
       "ScatterElements",
       {In::F(Shape{2, 4}), In::Fixed(I32({3, 0, 3, -1, 1, 1}, Shape{2, 3})), In::F(Shape{2, 3})},
       A({{"axis", AttrValue(int64_t{-1})}, {"reduction", AttrValue("add")}})});
}

// Neural-network ops.
void AddNnCases(std::vector<Case>& cases) {
  auto add = [&](Case c) { cases.push_back(std::move(c)); };
  const Shape cube{2, 3, 4};
  // Neural-network ops.
  for (const char* format : {"NHWC", "NCHW"}) {
    const bool nhwc = std::string(format) == "NHWC";
    const Shape image = nhwc ? Shape{2, 5, 6, 3} : Shape{2, 3, 5, 6};
    const std::vector<int64_t> stride2 = nhwc ? L({1, 2, 2, 1}) : L({1, 1, 2, 2});
    const std::vector<int64_t> dilation2 = nhwc ? L({1, 2, 1, 1}) : L({1, 1, 2, 1});
    for (const char* op : {"Conv2D", "DepthwiseConv2D"}) {
      const Shape filter = std::string(op) == "Conv2D" ? Shape{3, 2, 3, 4} : Shape{3, 2, 3, 2};
      add({std::string(op) + "/" + format + "/SAME",
           op,
           {In::F(image), In::F(filter)},
           A({{"padding", AttrValue("SAME")}, {"data_format", AttrValue(format)}})});
      add({std::string(op) + "/" + format + "/VALID-stride2",
           op,
           {In::F(image), In::F(filter)},
           A({{"padding", AttrValue("VALID")}, {"data_format", AttrValue(format)}, {"strides", AttrValue(stride2)}})});
      add({std::string(op) + "/" + format + "/SAME-stride2-dilation",
           op,
           {In::F(image), In::F(filter)},
           A({{"padding", AttrValue("SAME")},
              {"data_format", AttrValue(format)},
              {"strides", AttrValue(stride2)},
              {"dilations", AttrValue(dilation2)}})});
    }
    const std::vector<int64_t> window = nhwc ? L({1, 2, 3, 1}) : L({1, 1, 2, 3});
    for (const char* op : {"MaxPool", "AvgPool"}) {
      for (const char* padding : {"SAME", "VALID"}) {
        add({std::string(op) + "/" + format + "/" + padding,
             op,
             {In::F(image)},
             A({{"ksize", AttrValue(window)},
                {"strides", AttrValue(stride2)},
                {"padding", AttrValue(padding)},
                {"data_format", AttrValue(format)}})});
      }
    }
    add({std::string("BiasAdd/") + format,
         "BiasAdd",
         {In::F(image), In::F(Shape{3})},
         A({{"data_format", AttrValue(format)}})});
    for (bool training : {true, false}) {
      add({std::string("FusedBatchNorm/") + format + (training ? "/training" : "/inference"),
           "FusedBatchNorm",
           {In::F(image), In::F(Shape{3}, 0.5, 2), In::F(Shape{3}), In::F(Shape{3}), In::F(Shape{3}, 0.5, 2)},
           A({{"is_training", AttrValue(training)}, {"data_format", AttrValue(format)}}),
           {0}});
    }
  }
  add({"BiasAdd/2d", "BiasAdd", {In::F(Shape{4, 3}), In::F(Shape{3})}});
  add({"LayerNorm/last", "LayerNorm", {In::F(cube), In::F(Shape{4}), In::F(Shape{4})}});
  add({"LayerNorm/from1",
       "LayerNorm",
       {In::F(cube), In::F(Shape{3, 4}), In::F(Shape{3, 4})},
       A({{"begin_norm_axis", AttrValue(int64_t{1})}})});
  // Only c and h are differentiable (gates is saved for the backward op).
  for (double forget_bias : {1.0, -0.5}) {
    add({StrCat("LSTMCell/forget_bias_", forget_bias),
         "LSTMCell",
         {In::F(Shape{2, 3}), In::F(Shape{2, 2}), In::F(Shape{2, 2}), In::F(Shape{5, 8}, -1, 1),
          In::F(Shape{8}, -1, 1)},
         A({{"forget_bias", AttrValue(forget_bias)}}),
         {0, 1}});
  }
  add({"Softmax", "Softmax", {In::F(Shape{3, 4})}});
  add({"Softmax/axis0", "Softmax", {In::F(Shape{3, 4})}, A({{"axis", AttrValue(int64_t{0})}})});
  add({"LogSoftmax", "LogSoftmax", {In::F(Shape{3, 4})}});
  add({"LogSoftmax/axis0", "LogSoftmax", {In::F(Shape{3, 4})}, A({{"axis", AttrValue(int64_t{0})}})});
  add({"SoftmaxCrossEntropyWithLogits",
       "SoftmaxCrossEntropyWithLogits",  // Labels are distributions (rows sum to 1), as the op's contract says.
       {In::F(Shape{3, 4}), In::Values(Shape{3, 4}, {0.1, 0.2, 0.3, 0.4, 0.25, 0.25, 0.5, 0, 0.7, 0.1, 0.1, 0.1})},
       {},
       {0}});
  add({"SparseSoftmaxCrossEntropyWithLogits",
       "SparseSoftmaxCrossEntropyWithLogits",
       {In::F(Shape{3, 4}), In::Fixed(I64({2, 0, 3}, Shape{3}))},
       {},
       {0}});
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  AddElementwiseCases(cases);
  AddArrayCases(cases);
  AddNnCases(cases);
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class FiniteDifferences : public ::testing::TestWithParam<Case> {};

TEST_P(FiniteDifferences, MatchTheSymbolicGradient) {
  static RuntimeEnv* env = new RuntimeEnv();
  Check(*env, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Ops, FiniteDifferences, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& param_info) {
                           std::string name = param_info.param.name;
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

// Ops checked by the variable tests below, or by whole conds in
// control_flow_gradient_test, rather than by a case.
const std::set<std::string> kCheckedElsewhere = {"ReadVariable", "ResourceGather", "Switch", "Merge"};

TEST(Gradients, EveryGradientFunctionHasAFiniteDifferenceCase) {
  std::set<std::string> covered = kCheckedElsewhere;
  for (const Case& c : Cases()) covered.insert(c.op);
  for (const std::string& op : grad::GradRegistry::Global().Differentiable()) {
    EXPECT_TRUE(covered.count(op)) << op << " has a gradient function but no finite-difference case";
  }
}

// Ops that need no gradient function: they have no data inputs, no
// outputs, or are themselves parts of a backward pass (second derivatives
// are not provided).
bool NeedsNoGradient(const OpDef& op) {
  static const std::set<std::string> kBackward = {"ReluGrad",
                                                  "Relu6Grad",
                                                  "EluGrad",
                                                  "SeluGrad",
                                                  "SoftplusGrad",
                                                  "GeluGrad",
                                                  "SigmoidGrad",
                                                  "TanhGrad",
                                                  "SqrtGrad",
                                                  "RsqrtGrad",
                                                  "ReciprocalGrad",
                                                  "SumToShape",
                                                  "BroadcastTo",
                                                  "UnsortedSegmentSum",
                                                  "Pack",
                                                  "InvertPermutation",
                                                  "ConcatOffset",
                                                  "StridedSliceGrad",
                                                  "Cumsum",
                                                  "Cumprod",
                                                  "Conv2DBackpropInput",
                                                  "Conv2DBackpropFilter",
                                                  "DepthwiseConv2DBackpropInput",
                                                  "DepthwiseConv2DBackpropFilter",
                                                  "MaxPoolGrad",
                                                  "AvgPoolGrad",
                                                  "BiasAddGrad",
                                                  "FusedBatchNormGrad",
                                                  "LayerNormGrad",
                                                  "LSTMCellGrad"};
  // A loop's primitives are differentiated as a whole loop by the gradient
  // builder, not one op at a time (a cond's Switch and Merge have gradient
  // functions).
  static const std::set<std::string> kControlFlow = {"Enter", "Exit", "NextIteration"};
  return op.inputs.empty() || op.outputs.empty() || op.name[0] == '_' || kBackward.count(op.name) != 0 ||
         kControlFlow.count(op.name) != 0;
}

TEST(Gradients, EveryOpIsDifferentiableOrDeclaredNot) {
  const grad::GradRegistry& registry = grad::GradRegistry::Global();
  for (const OpDef* op : OpRegistry::Global().All()) {
    if (NeedsNoGradient(*op)) continue;
    bool not_differentiable = false;
    const grad::GradFn* fn = registry.Find(op->name, &not_differentiable);
    EXPECT_TRUE(fn != nullptr || not_differentiable) << op->name
                                                     << " has no gradient function and is not declared "
                                                        "not differentiable";
  }
}

using testing::Doubles;

// Runs |b| and returns |fetches| (failing the test on error).
std::vector<Tensor> RunGraph(RuntimeEnv& env, const GraphBuilder& b, const std::vector<std::string>& fetches,
                             const std::vector<std::pair<std::string, Tensor>>& feeds = {},
                             const std::vector<std::string>& targets = {}) {
  auto session = env.Session(b);
  if (!targets.empty()) {
    Status s = session->Run({}, {}, targets, nullptr);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<Tensor> out;
  Status s = session->Run(feeds, fetches, {}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

TEST(Gradients, FanInIsSummed) {
  RuntimeEnv env;
  GraphBuilder b;
  // y = x*x + x: dy/dx = 2x + 1, with x used three times.
  Output x = b.Const(Tensor::FromVector<double>({1, 2, 3}), "x");
  Output y = b.Op("Add", {b.Op("Mul", {x, x}), x}, {}, "y");
  auto g = grad::AddGradients(b, {y}, {x});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Doubles(RunGraph(env, b, {(*g)[0].name()})[0]), (std::vector<double>{3, 5, 7}));
}

TEST(Gradients, GradYsWeightTheYs) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Const(Tensor::FromVector<double>({1, 2}), "x");
  Output y1 = b.Op("Mul", {x, x}, {}, "y1");  // d/dx = 2x
  Output y2 = b.Op("Neg", {x}, {}, "y2");     // d/dx = -1
  Output w1 = b.Const(Tensor::FromVector<double>({10, 100}));
  Output w2 = b.Const(Tensor::FromVector<double>({1, 1}));
  auto g = grad::AddGradients(b, {y1, y2}, {x}, {w1, w2});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  // 10*2*1 - 1 = 19; 100*2*2 - 1 = 399.
  EXPECT_EQ(Doubles(RunGraph(env, b, {(*g)[0].name()})[0]), (std::vector<double>{19, 399}));
}

TEST(Gradients, StopGradientBlocksTheFlow) {
  RuntimeEnv env;
  GraphBuilder b;
  // y = x * stop(x): dy/dx = stop(x) = x, not 2x.
  Output x = b.Const(Tensor::FromVector<double>({1, 2, 3}), "x");
  Output y = b.Op("Mul", {x, b.Op("StopGradient", {x})}, {}, "y");
  auto g = grad::AddGradients(b, {y}, {x});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Doubles(RunGraph(env, b, {(*g)[0].name()})[0]), (std::vector<double>{1, 2, 3}));
}

TEST(Gradients, UnreachableXsGetZerosOrAnError) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Const(Tensor::FromVector<double>({1, 2}), "x");
  Output z = b.Const(Tensor::FromVector<double>({5, 6, 7}), "z");
  Output y = b.Op("Exp", {x}, {}, "y");
  auto zeros = grad::AddGradients(b, {y}, {z});
  ASSERT_TRUE(zeros.ok()) << zeros.status().ToString();
  EXPECT_EQ(Doubles(RunGraph(env, b, {(*zeros)[0].name()})[0]), (std::vector<double>{0, 0, 0}));

  grad::GradientOptions strict;
  strict.unreachable = grad::GradientOptions::Unreachable::kError;
  auto error = grad::AddGradients(b, {y}, {z}, {}, strict);
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().message(), "gradients: no y depends on x 'z'");
}

TEST(Gradients, VariableGradientsSumEveryReadAndGather) {
  RuntimeEnv env;
  GraphBuilder b;
  // L = sum(read(v) * W) + sum(gather(v, [1, 1, 3])): dL/dv = W plus 1 in
  // every element of each gathered row, per gather.
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF64)}, {"shape", AttrValue(Shape{4, 2})}}, "v");
  Output init = b.Op("Assign", {v, b.Const(Tensor::FromVector<double>({1, 2, 3, 4, 5, 6, 7, 8}, Shape{4, 2}))},
                     {{"dtype", AttrValue(DType::kF64)}}, "init");
  (void)init;
  Output w = b.Const(Tensor::FromVector<double>({1, 2, 3, 4, 5, 6, 7, 8}, Shape{4, 2}), "w");
  Output read = b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF64)}});
  Output rows =
      b.Op("ResourceGather", {v, b.Const(Tensor::FromVector<int64_t>({1, 1, 3}))}, {{"dtype", AttrValue(DType::kF64)}});
  Output loss = b.Op("Add", {b.Op("Sum", {b.Op("Mul", {read, w})}), b.Op("Sum", {rows})}, {}, "loss");
  auto g = grad::AddGradients(b, {loss}, {v});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)[0].dtype(), DType::kF64);
  auto out = RunGraph(env, b, {(*g)[0].name()}, {}, {"init"});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{4, 2}));
  EXPECT_EQ(Doubles(out[0]), (std::vector<double>{1, 2, 3 + 2, 4 + 2, 5, 6, 7 + 1, 8 + 1}));
}

TEST(Gradients, AnUnreachedVariableGetsZerosOfItsShape) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF64)}, {"shape", AttrValue(Shape{3})}}, "v");
  b.Op("Assign", {v, b.Const(Tensor::FromVector<double>({1, 2, 3}))}, {{"dtype", AttrValue(DType::kF64)}}, "init");
  Output y = b.Op("Exp", {b.Const(Tensor::Scalar<double>(1))}, {}, "y");
  auto g = grad::AddGradients(b, {y}, {v});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(Doubles(RunGraph(env, b, {(*g)[0].name()}, {}, {"init"})[0]), (std::vector<double>{0, 0, 0}));
}

TEST(Gradients, AnOpWithoutAGradientFunctionIsNamed) {
  GraphBuilder b;
  Output x = b.Const(Tensor::FromVector<double>({1, 2}), "x");
  Output y = b.Op("Cumsum", {x, b.Const(Tensor::Scalar<int64_t>(0))}, {}, "running");
  auto g = grad::AddGradients(b, {y}, {x});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "gradients: op Cumsum (node 'running') has no gradient function, and it lies between the xs and the ys");
}

TEST(Gradients, ScatterElementsWithMulHasNone) {
  GraphBuilder b;
  Output data = b.Const(Tensor::FromVector<double>({1, 2, 3}), "data");
  Output y = b.Op("ScatterElements",
                  {data, b.Const(Tensor::FromVector<int64_t>({0, 0})), b.Const(Tensor::FromVector<double>({4, 5}))},
                  {{"reduction", AttrValue("mul")}}, "scatter");
  auto g = grad::AddGradients(b, {y}, {data});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "gradient of node 'scatter' (ScatterElements): the gradient of ScatterElements is implemented for "
            "reduction 'none' and 'add', not 'mul'");
}

TEST(Gradients, OnlyFloatingPointTensorsAreDifferentiated) {
  GraphBuilder b;
  Output i = b.Const(Tensor::FromVector<int64_t>({1, 2}), "i");
  Output f = b.Const(Tensor::FromVector<double>({1, 2}), "f");
  auto g = grad::AddGradients(b, {i}, {f});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "gradients: y 'i' is i64; only floating-point tensors can be differentiated");
  g = grad::AddGradients(b, {f}, {i});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "gradients: x 'i' is i64; only floating-point tensors and variables can be differentiated against");
}

TEST(Gradients, GradYsMustMatchTheYs) {
  GraphBuilder b;
  Output x = b.Const(Tensor::FromVector<double>({1, 2}), "x");
  Output y = b.Op("Exp", {x}, {}, "y");
  auto g = grad::AddGradients(b, {y}, {x}, {b.Const(Tensor::FromVector<double>({1, 2, 3}))});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(), "gradients: grad_ys[0] is f64[3] but y 'y' is f64[2]");
}

}  // namespace
}  // namespace weft
