// Loops whose bodies are split across devices: two CPU devices
// ([devices.cpu] count = 2) and the CPU plus OpenCL on PoCL. Each graph is
// run with and without its device pins; the results must agree (bitwise
// between CPU devices, within float tolerance with OpenCL). Also: a cond
// inside a loop whose branch runs on the other device (dead values cross
// the cut), nested loops, and the gradient of a split loop.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "core/grad/gradients.h"
#include "core/graph/control_flow.h"
#include "core/runtime/trace.h"
#include "tests/integration/runtime_env.h"

namespace weft {
namespace {

using testing::RuntimeEnv;
using Outputs = std::vector<Output>;
using Feeds = std::vector<std::pair<std::string, Tensor>>;

constexpr char kTwoCpus[] = "[devices.cpu]\ncount = 2\n[plugins]\ndisable = [\"opencl\", \"cuda\", \"hip\"]\n";
constexpr char kCpuAndOpenCl[] = "[plugins]\ndisable = [\"cuda\", \"hip\"]\n";

std::vector<float> Floats(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.num_elements());
}

Tensor Wavy(const Shape& shape, float scale, float phase) {
  std::vector<float> v(static_cast<std::size_t>(shape.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(1.3f * static_cast<float>(i) + phase);
  return Tensor::FromVector<float>(v, shape);
}

// Builds a graph with |device| as the device of the marked parts (empty:
// no pins) and returns the names to fetch.
using BuildFn = std::function<std::vector<std::string>(GraphBuilder& b, const std::string& device)>;

// What ran where: events per (device, op) of a traced run.
using Ran = std::map<std::pair<std::string, std::string>, int>;

std::vector<Tensor> RunBuilt(RuntimeEnv& env, const BuildFn& build, const std::string& device, const Feeds& feeds,
                             Ran* ran = nullptr) {
  GraphBuilder b;
  std::vector<std::string> fetches = build(b, device);
  EXPECT_TRUE(b.status().ok()) << b.status().ToString();
  // At level 1, whose passes change no arithmetic: a fusion (level 2) of
  // the one-device graph's MatMul, Add and Tanh would round differently
  // from the split graph, where they run on two devices and stay apart.
  runtime::SessionOptions session_options;
  session_options.optimizer.level = 1;
  auto session = env.Session(b, session_options);
  std::vector<Tensor> out;
  runtime::TraceRecorder trace;
  runtime::RunOptions options;
  options.trace = &trace;
  Status s = session->Run(feeds, fetches, {}, &out, options);
  EXPECT_TRUE(s.ok()) << (device.empty() ? "unpinned" : device) << ": " << s.ToString();
  if (ran != nullptr) {
    for (const auto& e : trace.events()) ++(*ran)[{e.device, e.op}];
  }
  return out;
}

// h = tanh(h W + x_t) over the rows of xs, the MatMul on |device|; the
// loop counts iterations on the default device.
std::vector<std::string> Recurrence(GraphBuilder& b, const std::string& device, bool with_gradient) {
  Output xs = b.Placeholder(DType::kF32, Shape{12, 3, 4}, "xs");
  Output w = b.Placeholder(DType::kF32, Shape{4, 4}, "w");
  Output h0 = b.Placeholder(DType::kF32, Shape{3, 4}, "h0");
  WhileOptions options;
  options.parallel_iterations = 4;
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int64_t>(12)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output product;
        {
          std::optional<GraphBuilder::Scope> pin;
          if (!device.empty()) pin.emplace(b.DeviceScope(device));
          product = b.Op("MatMul", {v[1], w}, {}, "product");
        }
        Output x_t = b.Op("Gather", {xs, v[0]}, {}, "x_t");
        return Outputs{b.Op("Add", {v[0], b.Scalar<int64_t>(1)}), b.Op("Tanh", {b.Op("Add", {product, x_t})})};
      },
      {b.Scalar<int64_t>(0), h0}, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  Output loss = b.Op("Sum", {b.Op("Mul", {(*r)[1], (*r)[1]})}, {}, "loss");
  std::vector<std::string> fetches = {(*r)[1].name(), "loss"};
  if (with_gradient) {
    auto g = grad::AddGradients(b, {loss}, {w, h0, xs});
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    if (!g.ok()) return {};
    for (const Output& o : *g) fetches.push_back(o.name());
  }
  return fetches;
}

const Feeds& RecurrenceFeeds() {
  static const Feeds feeds = {{"xs", Wavy(Shape{12, 3, 4}, 0.5f, 0.2f)},
                              {"w", Wavy(Shape{4, 4}, 0.6f, 1.1f)},
                              {"h0", Wavy(Shape{3, 4}, 0.4f, 2.3f)}};
  return feeds;
}

TEST(LoopAcrossDevices, TwoCpuDevicesGiveTheSameResult) {
  RuntimeEnv env(kTwoCpus);
  auto build = [](GraphBuilder& b, const std::string& device) { return Recurrence(b, device, false); };
  auto one = RunBuilt(env, build, "", RecurrenceFeeds());
  Ran ran;
  auto split = RunBuilt(env, build, "/device:CPU:1", RecurrenceFeeds(), &ran);
  // Every iteration's MatMul ran on CPU:1, and its result came back.
  EXPECT_EQ((ran[{"/device:CPU:1", "MatMul"}]), 12);
  EXPECT_EQ((ran[{"/device:CPU:0", "MatMul"}]), 0);
  EXPECT_GE((ran[{"/device:CPU:0", "_Recv"}]), 12);
  ASSERT_EQ(one.size(), 2u);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(Floats(one[0]), Floats(split[0]));
  EXPECT_EQ(Floats(one[1]), Floats(split[1]));
}

TEST(LoopAcrossDevices, TheGradientOfASplitLoop) {
  RuntimeEnv env(kTwoCpus);
  auto build = [](GraphBuilder& b, const std::string& device) { return Recurrence(b, device, true); };
  auto one = RunBuilt(env, build, "", RecurrenceFeeds());
  auto split = RunBuilt(env, build, "/device:CPU:1", RecurrenceFeeds());
  ASSERT_EQ(one.size(), 5u);
  ASSERT_EQ(split.size(), 5u);
  for (std::size_t i = 0; i < one.size(); ++i) EXPECT_EQ(Floats(one[i]), Floats(split[i])) << "fetch " << i;
}

// for i < 9: v = (i % 3 == 0) ? v * 2 (on |device|) : v - 1, with an inner
// loop adding i to v twice: dead values cross the cut in the iterations
// that take the other branch, and the inner frame's transfers are keyed by
// the outer iteration too.
std::vector<std::string> CondAndNestedLoop(GraphBuilder& b, const std::string& device) {
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(9)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        Output third = b.Op("Equal", {b.Op("FloorMod", {v[0], b.Scalar<int32_t>(3)}), b.Scalar<int32_t>(0)});
        WEFT_ASSIGN_OR_RETURN(Outputs c, Cond(
                                             b, third,
                                             [&]() -> Expected<Outputs> {
                                               std::optional<GraphBuilder::Scope> pin;
                                               if (!device.empty()) pin.emplace(b.DeviceScope(device));
                                               return Outputs{b.Op("Mul", {v[1], b.Scalar<float>(2)}, {}, "twice")};
                                             },
                                             [&]() -> Expected<Outputs> {
                                               return Outputs{b.Op("Sub", {v[1], b.Scalar<float>(1)})};
                                             }));
        Output as_float = b.Op("Cast", {v[0]}, {{"DstT", AttrValue(DType::kF32)}});
        WhileOptions inner;
        inner.name = "inner";
        WEFT_ASSIGN_OR_RETURN(
            Outputs in,
            WhileLoop(
                b,
                [&](const Outputs& u) -> Expected<Output> {
                  return b.Op("Less", {u[0], b.Scalar<int32_t>(2)});
                },
                [&](const Outputs& u) -> Expected<Outputs> {
                  std::optional<GraphBuilder::Scope> pin;
                  if (!device.empty()) pin.emplace(b.DeviceScope(device));
                  return Outputs{b.Op("Add", {u[0], b.Scalar<int32_t>(1)}), b.Op("Add", {u[1], as_float}, {}, "add_i")};
                },
                {b.Scalar<int32_t>(0), c[0]}, inner));
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}), in[1]};
      },
      {b.Scalar<int32_t>(0), x});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  return {(*r)[1].name()};
}

TEST(LoopAcrossDevices, CondAndNestedLoopOnTwoCpuDevices) {
  RuntimeEnv env(kTwoCpus);
  const Feeds feeds = {{"x", Tensor::FromVector<float>({1.5f, -4})}};
  auto one = RunBuilt(env, CondAndNestedLoop, "", feeds);
  Ran ran;
  auto split = RunBuilt(env, CondAndNestedLoop, "/device:CPU:1", feeds, &ran);
  // The branch taken in iterations 0, 3 and 6 ran on CPU:1; the inner
  // loop's body too: 2 iterations of 2 Adds per outer iteration.
  EXPECT_EQ((ran[{"/device:CPU:1", "Mul"}]), 3);
  EXPECT_EQ((ran[{"/device:CPU:1", "Add"}]), 36);
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(split.size(), 1u);
  // By hand: i = 0..8; i % 3 == 0 doubles, else subtracts 1; then adds 2i.
  std::vector<float> expected = {1.5f, -4};
  for (int i = 0; i < 9; ++i) {
    for (float& e : expected) e = (i % 3 == 0 ? e * 2 : e - 1) + 2.0f * static_cast<float>(i);
  }
  EXPECT_EQ(Floats(one[0]), expected);
  EXPECT_EQ(Floats(split[0]), expected);
}

TEST(LoopAcrossDevices, CpuAndOpenCl) {
  RuntimeEnv env(kCpuAndOpenCl);
  bool has_opencl = false;
  for (const auto& d : env.devices()->devices()) has_opencl = has_opencl || d->name() == "/device:OPENCL:0";
  if (!has_opencl) GTEST_SKIP() << "no OpenCL device (PoCL) here";
  auto build = [](GraphBuilder& b, const std::string& device) { return Recurrence(b, device, true); };
  auto one = RunBuilt(env, build, "/device:CPU:0", RecurrenceFeeds());
  Ran ran;
  auto split = RunBuilt(env, build, "/device:OPENCL:0", RecurrenceFeeds(), &ran);
  // Per iteration: the forward MatMul, its copy in the backward loop, and
  // its gradient's two (placed with the op they differentiate).
  EXPECT_EQ((ran[{"/device:OPENCL:0", "MatMul"}]), 48);
  ASSERT_EQ(one.size(), 5u);
  ASSERT_EQ(split.size(), 5u);
  for (std::size_t i = 0; i < one.size(); ++i) {
    const std::vector<float> a = Floats(one[i]), c = Floats(split[i]);
    ASSERT_EQ(a.size(), c.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
      EXPECT_NEAR(a[k], c[k], 1e-4f * std::max(1.0f, std::fabs(a[k]))) << "fetch " << i << " element " << k;
    }
  }
  auto cond_one = RunBuilt(env, CondAndNestedLoop, "/device:CPU:0", {{"x", Tensor::FromVector<float>({1.5f, -4})}});
  auto cond_split =
      RunBuilt(env, CondAndNestedLoop, "/device:OPENCL:0", {{"x", Tensor::FromVector<float>({1.5f, -4})}});
  ASSERT_EQ(cond_one.size(), 1u);
  ASSERT_EQ(cond_split.size(), 1u);
  EXPECT_EQ(Floats(cond_one[0]), Floats(cond_split[0]));
}

}  // namespace
}  // namespace weft
