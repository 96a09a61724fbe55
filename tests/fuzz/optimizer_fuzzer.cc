// libFuzzer target: the graph optimizer (core/passes, docs/optimizer.md).
// The input is a small program that builds a graph: chains of unary and
// binary elementwise ops (with constants that are sometimes the neutral
// 1, 0 and -0), reshapes and transposes that may cancel, same-dtype and
// round-trip casts, Shape and Size, convolutions with a bias and an
// activation, and conds; some values are made of constants only. The
// graph runs at level 0, level 1 and the highest level on the CPU plugin,
// and they must agree: the same outputs bit for bit at level 1 (its passes
// change no arithmetic), within 1e-5 relative with the same NaNs and
// infinities at the highest (fused ops add in oneDNN's order), or the same
// error. A difference aborts, so that libFuzzer
// keeps the input.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/config/config.h"
#include "core/graph/builder.h"
#include "core/graph/control_flow.h"
#include "core/passes/pass.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/session.h"
#include "core/tensor/size.h"
#include "tests/fuzz/cpu_env.h"

namespace weft {
namespace {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool done() const { return pos_ >= size_; }
  float Value() {
    static const float kValues[] = {1.0f, 0.0f, -0.0f, -1.0f, 0.5f, 2.0f, -3.0f, 1e-3f, 7.0f, NAN, INFINITY};
    return kValues[Byte() % (sizeof kValues / sizeof kValues[0])];
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

fuzz::CpuEnv* g_env = nullptr;

// Every value is f32 of shape [1, 4, 4, 2] (NHWC), so that any two combine.
const Shape kShape{1, 4, 4, 2};

Tensor Filled(Reader& in, const Shape& shape) {
  Tensor t = *Tensor::Allocate(DType::kF32, shape);
  const float base = in.Value();
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = base + static_cast<float>(i % 5) * 0.25f;
  return t;
}

// Builds the program's graph; returns the outputs to fetch.
std::vector<std::string> Build(Reader& in, GraphBuilder& b) {
  std::vector<Output> values = {b.Placeholder(DType::kF32, kShape, "x")};
  values.push_back(b.Const(Filled(in, kShape), "c"));  // a constant-only start
  Output pred = b.Placeholder(DType::kBool, Shape{}, "p");
  auto pick = [&]() { return values[in.Byte() % values.size()]; };
  static const char* const kUnary[] = {"Relu",   "Neg",      "Sigmoid",      "Tanh",  "Abs",
                                       "Square", "Identity", "StopGradient", "Relu6", "Exp"};
  static const char* const kBinary[] = {"Add", "Mul", "Sub", "RealDiv", "Maximum", "Minimum"};
  const int steps = 1 + in.Byte() % 12;
  for (int s = 0; s < steps && b.status().ok(); ++s) {
    Output x = pick();
    Output y;
    switch (in.Byte() % 9) {
      case 0: y = b.Op(kUnary[in.Byte() % (sizeof kUnary / sizeof kUnary[0])], {x}); break;
      case 1: {  // with a scalar constant, on either side
        Output c = b.Scalar<float>(in.Value());
        const char* op = kBinary[in.Byte() % (sizeof kBinary / sizeof kBinary[0])];
        y = in.Byte() % 2 ? b.Op(op, {x, c}) : b.Op(op, {c, x});
        break;
      }
      case 2:  // two values
        y = b.Op(kBinary[in.Byte() % (sizeof kBinary / sizeof kBinary[0])], {x, pick()});
        break;
      case 3: {  // reshape away and back, or to the same shape
        Output flat = b.Op("Reshape", {x, b.Const(Tensor::FromVector<int64_t>({in.Byte() % 2 ? 32 : 16, -1}))});
        y = b.Op("Reshape",
                 {flat, in.Byte() % 2 ? b.Op("Shape", {x}) : b.Const(Tensor::FromVector<int64_t>({1, 4, 4, 2}))});
        break;
      }
      case 4: {  // transposes that cancel, or not (then transposed back)
        std::vector<int64_t> p = {0, 2, 1, 3};
        if (in.Byte() % 2) p = {0, 1, 2, 3};
        Output t = b.Op("Transpose", {x}, {{"perm", AttrValue(p)}});
        y = b.Op("Transpose", {t}, {{"perm", AttrValue(p)}});
        break;
      }
      case 5: {  // casts: to itself, or there and back
        if (in.Byte() % 2) {
          y = b.Op("Cast", {x}, {{"DstT", AttrValue(DType::kF32)}});
        } else {
          y = b.Op("Cast", {b.Op("Cast", {x}, {{"DstT", AttrValue(DType::kF64)}})}, {{"DstT", AttrValue(DType::kF32)}});
        }
        break;
      }
      case 6: {  // convolution, bias, activation
        Tensor filter = Filled(in, Shape{3, 3, 2, 2});
        Output conv = b.Op(
            "Conv2D", {x, b.Const(filter)},
            {{"strides", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}, {"padding", AttrValue(std::string("SAME"))}});
        Output bias = b.Op("BiasAdd", {conv, b.Const(Filled(in, Shape{2}))});
        // Sometimes a residual, then one of the activations the fusion takes.
        if (in.Byte() % 2) bias = b.Op("Add", {bias, x});
        static const char* const kActivations[] = {"Relu", "Relu6", "Sigmoid", "Tanh", "Elu", "Gelu"};
        y = b.Op(kActivations[in.Byte() % 6], {bias});
        break;
      }
      case 7: {  // a cond
        Output other = pick();
        auto merged = Cond(
            b, pred, [&]() -> Expected<std::vector<Output>> { return std::vector<Output>{b.Op("Neg", {x})}; },
            [&]() -> Expected<std::vector<Output>> {
              return std::vector<Output>{b.Op("Mul", {other, b.Scalar<float>(1.0f)})};
            });
        if (!merged.ok()) return {};
        y = (*merged)[0];
        break;
      }
      default: {  // the same subexpression twice
        Output a = b.Op("Tanh", {x});
        Output c = b.Op("Tanh", {x});
        y = b.Op("Add", {a, c});
        break;
      }
    }
    if (y.valid()) values.push_back(y);
  }
  std::vector<std::string> fetches;
  for (std::size_t i = 2; i < values.size(); ++i) fetches.push_back(values[i].name());
  if (fetches.empty()) fetches.push_back(values[0].name());
  return fetches;
}

struct Result {
  Status status;
  std::vector<Tensor> outputs;
};

// Whether two f32 tensors agree within 1e-5 relative (1e-6 absolute near
// zero), with NaN where the other has NaN and the same infinities.
bool Close(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  if (a.dtype() != DType::kF32) return a.BitwiseEquals(b);
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    const float x = a.data<float>()[i], y = b.data<float>()[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) != std::isnan(y)) return false;
      continue;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return false;
      continue;
    }
    if (std::fabs(x - y) > 1e-6 + 1e-5 * std::fabs(x)) return false;
  }
  return true;
}

Result RunAt(const Graph& graph, int level, const std::vector<std::pair<std::string, Tensor>>& feeds,
             const std::vector<std::string>& fetches) {
  Result r;
  runtime::SessionOptions options;
  options.optimizer.level = level;
  options.intra_op_threads = 1;
  auto session = runtime::Session::Create(Graph(graph), g_env->devices, options);
  if (!session.ok()) {
    r.status = session.status();
    return r;
  }
  r.status = (*session)->Run(feeds, fetches, {}, &r.outputs);
  return r;
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::g_env = weft::fuzz::LoadCpuEnv("optimizer_fuzzer");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace weft;
  Reader in(data, size);
  GraphBuilder b;
  const std::vector<std::string> fetches = Build(in, b);
  if (fetches.empty() || !b.status().ok()) return 0;
  auto graph = b.Build();
  if (!graph.ok()) return 0;
  Tensor x = *Tensor::Allocate(DType::kF32, kShape);
  for (int64_t i = 0; i < x.num_elements(); ++i) x.data<float>()[i] = static_cast<float>(i % 7) - 3.0f + 0.5f;
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x}, {"p", Tensor::Scalar<bool>(data[0] % 2)}};
  const auto base = RunAt(*graph, 0, feeds, fetches);
  for (int level : {1, passes::kMaxLevel}) {
    const auto top = RunAt(*graph, level, feeds, fetches);
    if (base.status.ok() != top.status.ok() || (!base.status.ok() && base.status.message() != top.status.message())) {
      std::fprintf(stderr, "level 0: %s\nlevel %d: %s\n", base.status.ToString().c_str(), level,
                   top.status.ToString().c_str());
      std::abort();
    }
    for (std::size_t i = 0; i < base.outputs.size(); ++i) {
      // Level 1 changes no arithmetic: bit for bit. The fusions add in
      // oneDNN's order: 1e-5 relative, NaN where NaN, the same infinities.
      if (!(level == 1 ? base.outputs[i].BitwiseEquals(top.outputs[i]) : Close(base.outputs[i], top.outputs[i]))) {
        std::fprintf(stderr, "%s differs: level 0 %s, level %d %s\n", fetches[i].c_str(),
                     base.outputs[i].DebugString().c_str(), level, top.outputs[i].DebugString().c_str());
        std::abort();
      }
    }
  }
  return 0;
}
