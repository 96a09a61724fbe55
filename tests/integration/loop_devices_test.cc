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

#include "core/runtime/trace.h"
#include "tests/support/runtime_env.h"
#include "tests/support/split_loop_graphs.h"
#include "tests/support/tensor_values.h"

namespace weft {
namespace {

using testing::CondAndNestedLoop;
using testing::Feeds;
using testing::Floats;
using testing::Recurrence;
using testing::RecurrenceFeeds;
using testing::RuntimeEnv;

constexpr char kTwoCpus[] = "[devices.cpu]\ncount = 2\n[plugins]\ndisable = [\"opencl\", \"cuda\", \"hip\"]\n";
constexpr char kCpuAndOpenCl[] = "[plugins]\ndisable = [\"cuda\", \"hip\"]\n";

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
  const std::vector<float> expected = testing::CondAndNestedLoopByHand({1.5f, -4});
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
