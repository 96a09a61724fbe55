// Session and executor behaviour on the CPU device: feeds, fetches,
// targets, pruning, the executor cache, errors, variables and concurrency.
#include "core/runtime/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "core/base/strings.h"
#include "core/base/thread_pool.h"
#include "core/graph/control_flow.h"
#include "core/ops/control_flow_ops.h"
#include "core/plugin/host_services.h"
#include "core/runtime/executor.h"
#include "core/runtime/kernels/queue_kernels.h"
#include "core/runtime/kernels/stack_kernels.h"
#include "core/runtime/op_kernel.h"

#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"

namespace weft {
namespace {

using testing::Floats;
using testing::RuntimeEnv;

TEST(Session, AddsFedValuesWithBroadcasting) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2, 3}, "x");
  Output y = b.Placeholder(DType::kF32, Shape{3}, "y");
  b.Op("Add", {x, y}, {}, "sum");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3})},
                           {"y", Tensor::FromVector<float>({10, 20, 30})}},
                          {"sum"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(Session, MatMulOfConstants) {
  RuntimeEnv env;
  GraphBuilder b;
  Output a = b.Const(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3}), "a");
  Output c = b.Const(Tensor::FromVector<float>({1, 0, 0, 1, 1, 1}, Shape{3, 2}), "c");
  b.Op("MatMul", {a, c}, {}, "ac");
  b.Op("MatMul", {a, a}, {{"transpose_b", AttrValue(true)}}, "aat");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"ac", "aat"}, {}, &out).ok());
  // By hand: [1 2 3; 4 5 6] x [1 0; 0 1; 1 1] = [4 5; 10 11]; A A^T = [14 32; 32 77].
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(Floats(out[1]), (std::vector<float>{14, 32, 32, 77}));
}

// A step in which no node has an input (a lone NoOp target): the executor
// once took the address of element 0 of its empty input array (UBSan; found
// by op_fuzzer).
TEST(Session, AStepWithoutAnyInputRuns) {
  RuntimeEnv env;
  GraphBuilder b;
  b.Op("NoOp", {}, {}, "nothing");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({}, {}, {"nothing"}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(out.empty());
}

TEST(Session, ExecutorCacheIgnoresArgumentOrder) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  Output y = b.Placeholder(DType::kF32, Shape{}, "y");
  b.Op("Sub", {x, y}, {}, "d");
  b.Op("Mul", {x, y}, {}, "p");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(
      session->Run({{"x", Tensor::Scalar<float>(5)}, {"y", Tensor::Scalar<float>(2)}}, {"d", "p"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<float>(), 3);
  EXPECT_EQ(out[1].scalar<float>(), 10);
  ASSERT_TRUE(
      session->Run({{"y", Tensor::Scalar<float>(2)}, {"x", Tensor::Scalar<float>(5)}}, {"p", "d"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<float>(), 10);
  EXPECT_EQ(out[1].scalar<float>(), 3);
  EXPECT_EQ(session->cached_executors(), 1u);
}

TEST(Session, PrunesWhatTheFetchesDoNotNeed) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  b.Op("Neg", {x}, {}, "needs_x");
  b.Op("Neg", {b.Scalar<float>(4)}, {}, "free");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  // x is not fed, but "free" does not need it.
  Status s = session->Run({}, {"free"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out[0].scalar<float>(), -4);
}

TEST(Session, FeedingAnIntermediateTensorCutsItsInputs) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  Output h = b.Op("Neg", {x}, {}, "h");
  b.Op("Square", {h}, {}, "y");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"h", Tensor::Scalar<float>(3)}}, {"y"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<float>(), 9);
}

// A control input on a fed Placeholder waits for the fed value; the
// Placeholder itself (which would fail: not fed) does not run.
TEST(Session, ControlInputOnAFedNodeWaitsForTheFeed) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  {
    auto deps = b.ControlDependencies({x});
    b.Scalar<float>(5, "five");
  }
  b.Op("Add", {x, b.Find("five")}, {}, "y");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x", Tensor::Scalar<float>(2)}}, {"y", "five"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out[0].scalar<float>(), 7);
  EXPECT_EQ(out[1].scalar<float>(), 5);
}

TEST(Session, ErrorsNameWhatIsWrong) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{-1, 4}, "x");
  b.Op("Neg", {x}, {}, "y");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  EXPECT_EQ(session->Run({}, {"yy"}, {}, &out).message(),
            "fetch \"yy\": the graph has no node \"yy\"; did you mean \"y\"?");
  EXPECT_EQ(session->Run({}, {"y:1"}, {}, &out).message(),
            "fetch \"y:1\": node 'y' (Neg) has 1 output; there is no output 1");
  EXPECT_EQ(session->Run({{"x", Tensor::FromVector<double>({1, 2, 3, 4}, Shape{1, 4})}}, {"y"}, {}, &out).message(),
            "feed \"x\" has dtype f64; the graph expects f32");
  EXPECT_EQ(session->Run({{"x", Tensor::FromVector<float>({1, 2, 3}, Shape{1, 3})}}, {"y"}, {}, &out).message(),
            "feed \"x\" has shape [1,3]; the graph expects [?,4]");
  EXPECT_EQ(session->Run({}, {"y"}, {}, &out).message(),
            "node 'x' (Placeholder) on /device:CPU:0: Placeholder 'x' was not fed; give it a value (weft run --feed "
            "x=FILE.npy, or a feed in Session::Run)");
  EXPECT_EQ(session->Run({}, {}, {"nothing"}, &out).message(), "target \"nothing\": the graph has no node \"nothing\"");
  EXPECT_EQ(session->Run({}, {}, {}, &out).message(), "nothing to run: give at least one fetch or target");
}

TEST(Session, KernelErrorsNameNodeOpAndDevice) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kI32, Shape{2}, "x");
  Output y = b.Placeholder(DType::kI32, Shape{2}, "y");
  b.Op("Div", {x, y}, {}, "ratio");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x", Tensor::FromVector<int32_t>({4, 5})}, {"y", Tensor::FromVector<int32_t>({2, 0})}},
                          {"ratio"}, {}, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "node 'ratio' (Div) on /device:CPU:0: integer division by zero");
}

TEST(Session, VariablesPersistAcrossRuns) {
  RuntimeEnv env;
  GraphBuilder b;
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{2})}}, "v");
  b.Op("Assign", {v, b.Const(Tensor::FromVector<float>({1, 2}))}, {}, "init");
  b.Op("AssignAdd", {v, b.Const(Tensor::FromVector<float>({10, 20}))}, {}, "bump");
  b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, "read");
  b.Op("VarIsInitialized", {v}, {}, "ready");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"ready"}, {}, &out).ok());
  EXPECT_FALSE(out[0].scalar<bool>());
  Status s = session->Run({}, {"read"}, {}, &out);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "node 'read' (ReadVariable) on /device:CPU:0: variable \"v\" (f32[2]) is read before it was assigned a "
            "value; run its initializer first");
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {"read"}, {}, &out).ok());
  Tensor before = out[0];
  ASSERT_TRUE(session->Run({}, {}, {"bump"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {"read", "ready"}, {}, &out).ok());
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{11, 22}));
  EXPECT_TRUE(out[1].scalar<bool>());
  // The earlier read is a snapshot: the in-place update did not touch it.
  EXPECT_EQ(Floats(before), (std::vector<float>{1, 2}));
}

TEST(Session, ConcurrentAssignAddIsExact) {
  // The acceptance test: 8 threads x 1,000 runs on one session.
  RuntimeEnv env;
  GraphBuilder b;
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kI64)}, {"shape", AttrValue(Shape{})}}, "counter");
  b.Op("Assign", {v, b.Scalar<int64_t>(0)}, {}, "init");
  b.Op("AssignAdd", {v, b.Scalar<int64_t>(3)}, {}, "add");
  b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kI64)}}, "read");
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  constexpr int kThreads = 8, kRuns = 1000;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRuns; ++i) {
        if (!session->Run({}, {}, {"add"}, nullptr).ok()) failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"read"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), int64_t{3} * kThreads * kRuns);
}

// oneDNN's default scratchpad belongs to the thread that made a
// primitive, so a primitive made on one thread and run on two at once
// shared it and answered wrong values (the model server's batch threads
// did this). Here primitives are made on this thread, then run by four
// threads at once with batches of 1 to 4 rows; every answer is checked
// against a product computed in double in the test.
TEST(Session, ConcurrentRunsOfOneSessionsMatMulsAreRight) {
  constexpr int64_t kWidth = 512, kDepth = 12;
  constexpr int kThreads = 4, kRuns = 200;
  std::vector<float> w(static_cast<std::size_t>(kWidth * kWidth));
  uint32_t seed = 12345;
  auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<double>(seed >> 8) / (1 << 24) - 0.5);
  };
  for (float& v : w) v = next() * 2.0f * 1.7f / std::sqrt(static_cast<float>(kWidth));
  RuntimeEnv env;
  GraphBuilder b;
  Output h = b.Placeholder(DType::kF32, Shape{-1, kWidth}, "x");
  Output weights = b.Const(Tensor::FromVector<float>(w, Shape{kWidth, kWidth}), "w");
  // Tanh after each product: the optimizer fuses the pair (_FusedMatMul);
  // the last product stays a MatMul.
  for (int64_t i = 0; i < kDepth; ++i) h = b.Op("Tanh", {b.Op("MatMul", {h, weights})});
  b.Op("MatMul", {h, weights}, {}, "y");
  for (const int intra : {1, 2}) {
    SCOPED_TRACE(intra);
    runtime::SessionOptions options;
    options.intra_op_threads = intra;
    options.inter_op_threads = 1;
    auto session = env.Session(b, options);
    // Inputs of 1 to 4 rows and what the graph makes of them, in double.
    std::vector<std::vector<float>> inputs, expected;
    for (int64_t rows = 1; rows <= 4; ++rows) {
      std::vector<float> x(static_cast<std::size_t>(rows * kWidth));
      for (float& v : x) v = next() * 2.0f;
      std::vector<double> cur(x.begin(), x.end()), out(x.size());
      for (int64_t layer = 0; layer <= kDepth; ++layer) {
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t j = 0; j < kWidth; ++j) {
            double sum = 0;
            for (int64_t k = 0; k < kWidth; ++k) {
              sum += cur[static_cast<std::size_t>(r * kWidth + k)] * w[static_cast<std::size_t>(k * kWidth + j)];
            }
            out[static_cast<std::size_t>(r * kWidth + j)] = layer < kDepth ? std::tanh(sum) : sum;
          }
        }
        cur.swap(out);
      }
      inputs.push_back(std::move(x));
      expected.emplace_back(cur.begin(), cur.end());
    }
    // Every primitive made here, on this thread.
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      std::vector<Tensor> out;
      const int64_t rows = static_cast<int64_t>(i) + 1;
      ASSERT_TRUE(
          session->Run({{"x", Tensor::FromVector<float>(inputs[i], Shape{rows, kWidth})}}, {"y"}, {}, &out).ok());
    }
    std::atomic<int> wrong{0}, failed{0};
    std::string first_wrong;  // written by the thread that finds the first
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int run = 0; run < kRuns; ++run) {
          const std::size_t i = static_cast<std::size_t>((t + run) % 4);
          const int64_t rows = static_cast<int64_t>(i) + 1;
          std::vector<Tensor> out;
          const Status s =
              session->Run({{"x", Tensor::FromVector<float>(inputs[i], Shape{rows, kWidth})}}, {"y"}, {}, &out);
          if (!s.ok()) {
            failed++;
            continue;
          }
          const std::vector<float> got = Floats(out[0]);
          for (std::size_t e = 0; e < got.size(); ++e) {
            const double err = std::abs(got[e] - expected[i][e]);
            if (!(err <= 1e-3 * (1 + std::abs(expected[i][e])))) {
              if (wrong++ == 0) {
                first_wrong =
                    StrCat("run ", run, ", ", rows, " rows, element ", e, ": ", got[e], " against ", expected[i][e]);
              }
              break;
            }
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failed.load(), 0);
    EXPECT_EQ(wrong.load(), 0) << "the first: " << first_wrong;
  }
}

TEST(Session, WideFanOutRunsEveryNode) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  std::vector<Output> parts;
  for (int i = 0; i < 200; ++i) parts.push_back(b.Op("Mul", {x, b.Scalar<float>(static_cast<float>(i))}));
  b.Op("AddN", {parts}, {}, "total");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(2)}}, {"total"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<float>(), 2.0f * 199 * 200 / 2);
}

TEST(Session, AsyncKernelsCompleteThroughCallbacks) {
  // The test device's Neg finishes on a thread of its own.
  RuntimeEnv env("", {WEFT_TEST_PLUGIN_ROOT "/good"});
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
  Output y;
  {
    auto device = b.DeviceScope("/device:TESTDEV:0");
    y = b.Op("Neg", {b.Op("Neg", {b.Op("Neg", {x})})}, {}, "negated");
  }
  b.Op("Add", {y, x}, {}, "zero");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x", Tensor::FromVector<float>({1, -2, 3})}}, {"negated", "zero"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{-1, 2, -3}));
  EXPECT_EQ(Floats(out[1]), (std::vector<float>{0, 0, 0}));
}

// tests/sdk/add_device: a device with its own memory and one kernel on
// the SDK's kernel layer (weft/sdk/kernel.h). Inputs go to its memory
// through its copies, the sum comes back; its shape check reaches the
// caller as an error naming the node.
TEST(Session, SdkKernelRunsOnADeviceWithItsOwnMemory) {
  RuntimeEnv env("", {WEFT_TEST_PLUGIN_ROOT "/add_device"});
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{-1, 3}, "x");
  Output y = b.Placeholder(DType::kF32, Shape{-1, 3}, "y");
  {
    auto device = b.DeviceScope("/device:ADD:0");
    b.Op("Add", {x, y}, {}, "sum");
  }
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Tensor a = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  Tensor c = Tensor::FromVector<float>({10, 20, 30, 40, 50, 60}, Shape{2, 3});
  Status s = session->Run({{"x", a}, {"y", c}}, {"sum"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{11, 22, 33, 44, 55, 66}));

  Tensor row = Tensor::FromVector<float>({1, 2, 3}, Shape{1, 3});
  s = session->Run({{"x", a}, {"y", row}}, {"sum"}, {}, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "node 'sum' (Add) on /device:ADD:0: Add on the ADD device (no broadcasting): shapes [2,3] and [1,3] "
            "differ");
}

TEST(Session, AsyncKernelErrorsCancelTheStep) {
  RuntimeEnv env("", {WEFT_TEST_PLUGIN_ROOT "/good"});
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{3}, "x");
  {
    auto device = b.DeviceScope("/device:TESTDEV:0");
    b.Op("Neg", {b.Op("Relu", {x}, {}, "hangs_up")}, {}, "after");
  }
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({{"x", Tensor::FromVector<float>({1, 2, 3})}}, {"after"}, {}, &out);
  EXPECT_EQ(s.code(), Code::kAborted);
  EXPECT_EQ(s.message(), "node 'hangs_up' (Relu) on /device:TESTDEV:0: the frobnicator hung up (test)");
}

// Two sessions in one process with different intra-op thread counts: each
// one's kernels get its own count, whichever session was created last and
// while the other runs (the host's services answer per step, not per
// process). The test device's Sign reports the count its kernel is given.
TEST(Session, TwoSessionsKeepTheirOwnIntraOpThreads) {
  RuntimeEnv env("", {WEFT_TEST_PLUGIN_ROOT "/good"});
  auto graph = [] {
    GraphBuilder b;
    Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
    {
      auto device = b.DeviceScope("/device:TESTDEV:0");
      b.Op("Sign", {x}, {}, "threads");
    }
    auto built = b.Build();
    EXPECT_TRUE(built.ok()) << built.status().ToString();
    return std::move(*built);
  };
  runtime::SessionOptions one, three;
  one.intra_op_threads = 1;
  three.intra_op_threads = 3;
  auto a = env.Session(graph(), one);
  auto b = env.Session(graph(), three);
  auto run = [](runtime::Session& s) {
    std::vector<Tensor> out;
    Status status = s.Run({{"x", Tensor::FromVector<float>({0, 0})}}, {"threads"}, {}, &out);
    EXPECT_TRUE(status.ok()) << status.ToString();
    return status.ok() ? out[0].data<float>()[0] : -1.0f;
  };
  EXPECT_EQ(run(*a), 1.0f);
  EXPECT_EQ(run(*b), 3.0f);
  EXPECT_EQ(run(*a), 1.0f);  // b's creation did not resize a's pool
  // Side by side, from two threads.
  std::thread other([&] {
    for (int i = 0; i < 50; ++i) EXPECT_EQ(run(*b), 3.0f);
  });
  for (int i = 0; i < 50; ++i) EXPECT_EQ(run(*a), 1.0f);
  other.join();
  // Outside any session, the process's default: every core.
  EXPECT_EQ(plugin::HostTable()->intra_op_threads(), AvailableCores());
}

// The table plugins hold is built once and never changes: the kernel and
// graph services are there from the start (forwarding to the runtime's).
TEST(Session, TheHostTableNeverChanges) {
  const weft_host_t* table = plugin::HostTable();
  const weft_host_t before = *table;
  RuntimeEnv env;
  GraphBuilder b;
  b.Op("Neg", {b.Scalar<float>(1)}, {}, "n");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"n"}, {}, &out).ok());
  EXPECT_EQ(plugin::HostTable(), table);
  EXPECT_EQ(std::memcmp(&before, table, sizeof before), 0);
  EXPECT_NE(table->kernel, nullptr);
  EXPECT_NE(table->graph, nullptr);
}

TEST(Session, ThreadBudgetsShareTheCores) {
  const int cores = AvailableCores();
  runtime::SessionOptions none, inter4, intra1, both;
  inter4.inter_op_threads = 4;
  intra1.intra_op_threads = 1;
  both.inter_op_threads = 3;
  both.intra_op_threads = 5;
  EXPECT_EQ(runtime::ResolveThreads(none), std::make_pair(1, cores));
  EXPECT_EQ(runtime::ResolveThreads(inter4), std::make_pair(4, std::max(1, cores / 4)));
  EXPECT_EQ(runtime::ResolveThreads(intra1), std::make_pair(cores, 1));
  EXPECT_EQ(runtime::ResolveThreads(both), std::make_pair(3, 5));  // as asked
}

TEST(Session, TraceRecordsEveryNode) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  b.Op("Exp", {b.Op("Neg", {x}, {}, "n")}, {}, "e");
  auto session = env.Session(b);
  runtime::TraceRecorder trace;
  runtime::RunOptions options;
  options.trace = &trace;
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(0)}}, {"e"}, {}, &out, options).ok());
  std::vector<std::string> names;
  for (const auto& e : trace.events()) names.push_back(e.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "n"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "e"), names.end());
  const std::string json = trace.ToJson();
  EXPECT_NE(json.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"e\",\"cat\":\"Exp\""), std::string::npos) << json;
}

// A chain of expensive nodes stays on the thread that starts the step;
// under Executor::OnlyCheapNodesHere (a transport's thread delivering a
// pulled tensor) that thread runs only the cheap ones and the pool the rest
// (with a pool: a session's default of one inter-op thread has none, and
// runs everything on the caller).
TEST(Session, OnlyCheapNodesRunOnAThreadThatAsksForThat) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  Output e = b.Op("Exp", {b.Op("Neg", {x}, {}, "n")}, {}, "e");
  b.Op("Identity", {e}, {}, "out");
  runtime::SessionOptions two_threads;  // the caller and one pool thread
  two_threads.inter_op_threads = 2;
  auto session = env.Session(b, two_threads);
  ThreadPool elsewhere(1, "elsewhere");
  auto threads_of = [&](bool cheap_only) {
    std::optional<runtime::Executor::OnlyCheapNodesHere> guard;
    if (cheap_only) guard.emplace(&elsewhere);
    EXPECT_EQ(runtime::Executor::OnlyCheapNodesHere::Active(), cheap_only);
    runtime::TraceRecorder trace;
    runtime::RunOptions options;
    options.trace = &trace;
    std::vector<Tensor> out;
    Status s = session->Run({{"x", Tensor::Scalar<float>(0)}}, {"out"}, {}, &out, options);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(Floats(out[0]), (std::vector<float>{1}));
    std::map<std::string, uint64_t> thread;
    for (const auto& event : trace.events()) thread[event.name] = event.thread;
    return thread;
  };
  const uint64_t here = runtime::TraceThreadId();
  std::map<std::string, uint64_t> plain = threads_of(false);
  EXPECT_EQ(plain["n"], here);
  EXPECT_EQ(plain["e"], here);
  std::map<std::string, uint64_t> cheap = threads_of(true);
  ASSERT_TRUE(cheap.count("n") && cheap.count("e"));
  // The expensive chain ran on the thread of the pool the guard named.
  std::promise<uint64_t> elsewhere_thread;
  elsewhere.Schedule([&] { elsewhere_thread.set_value(runtime::TraceThreadId()); });
  const uint64_t there = elsewhere_thread.get_future().get();
  EXPECT_NE(there, here);
  EXPECT_EQ(cheap["n"], there);
  EXPECT_EQ(cheap["e"], there);
  // The fed argument is cheap: it runs here.
  EXPECT_EQ(cheap["_arg_0"], here);
  EXPECT_FALSE(runtime::Executor::OnlyCheapNodesHere::Active());
}

// A profiled step in one process is one row: this process, its kernels'
// time, and no waiting (nothing is received from elsewhere).
TEST(Session, AProfiledStepIsTimedWithoutATraceOfTheCallers) {
  RuntimeEnv env;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{256, 256}, "x");
  b.Op("MatMul", {b.Op("MatMul", {x, x}, {}, "m1"), x}, {}, "m2");
  auto session = env.Session(b);
  runtime::StepProfile profile;
  runtime::RunOptions options;
  options.profile = &profile;
  std::vector<Tensor> out;
  const Tensor x_value = Tensor::FromVector<float>(std::vector<float>(256 * 256, 0.5f), Shape{256, 256});
  ASSERT_TRUE(session->Run({{"x", x_value}}, {"m2"}, {}, &out).ok());  // not profiled
  ASSERT_TRUE(session->Run({{"x", x_value}}, {"m2"}, {}, &out, options).ok());
  const std::vector<runtime::StepTime> steps = profile.steps();
  ASSERT_EQ(steps.size(), 1u);
  ASSERT_EQ(steps[0].tasks.size(), 1u);
  const runtime::TaskStepTime& t = steps[0].tasks[0];
  EXPECT_EQ(t.task, "");
  EXPECT_GT(t.compute_ms, 0.0);
  EXPECT_LE(t.compute_ms, t.run_ms);
  EXPECT_EQ(t.wait_ms, 0.0);
  EXPECT_EQ(t.round_trip_ms, 0.0);
  EXPECT_EQ(steps[0].step_ms, t.run_ms);
}

}  // namespace
// The runtime's own kernels are one table: every op in it is a registered
// op, and every op the executor runs itself (control flow) or that needs
// the runtime's state (queues, stacks, the partition edges) is in it.
// RunOptions::cancel, how a caller interrupts a step (Ctrl-C in Python,
// docs/python.md): a loop of 10^12 iterations is cancelled from another
// thread and the step ends CANCELLED, saying so; the session then runs
// again; a manager already cancelled stops a step before it starts.
TEST(Session, ACallerCancelsARunningStep) {
  RuntimeEnv env;
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI64, Shape{}, "n");
  auto loop = WhileLoop(
      b,
      [&](const std::vector<Output>& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
        return std::vector<Output>{b.Op("Add", {v[0], b.Scalar<int64_t>(1)})};
      },
      {b.Scalar<int64_t>(0)});
  ASSERT_TRUE(loop.ok()) << loop.status().ToString();
  b.Op("Identity", {(*loop)[0]}, {}, "count");
  auto session = env.Session(b);
  std::vector<Tensor> out;

  runtime::CancellationManager cancel;
  runtime::RunOptions options;
  options.cancel = &cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel.StartCancel();
  });
  const auto start = std::chrono::steady_clock::now();
  Status s = session->Run({{"n", Tensor::Scalar<int64_t>(1'000'000'000'000)}}, {"count"}, {}, &out, options);
  canceller.join();
  EXPECT_EQ(s.code(), Code::kCancelled) << s.ToString();
  EXPECT_NE(s.message().find("cancelled by its caller (RunOptions::cancel)"), std::string::npos) << s.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));

  ASSERT_TRUE(session->Run({{"n", Tensor::Scalar<int64_t>(7)}}, {"count"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), 7);

  // Already cancelled: the step does not start.
  s = session->Run({{"n", Tensor::Scalar<int64_t>(7)}}, {"count"}, {}, &out, options);
  EXPECT_EQ(s.code(), Code::kCancelled) << s.ToString();
}

TEST(RuntimeOps, TheTableAndTheRegistryAgree) {
  const std::vector<std::string> ops = runtime::RuntimeOps();
  for (const std::string& op : ops) EXPECT_NE(OpRegistry::Global().Find(op), nullptr) << op;
  for (const OpDef* op : OpRegistry::Global().All()) {
    // The graph optimizer's fused ops are internal too, but their kernels
    // come from the device plugins (docs/optimizer.md).
    if (op->name.starts_with("_Fused") || op->name == "_QConv2D" || op->name == "_QMatMul") continue;
    if (ops::IsControlFlowOp(op->name) || runtime::IsQueueOp(op->name) || runtime::IsStackOp(op->name) ||
        op->name[0] == '_') {
      EXPECT_TRUE(runtime::IsRuntimeOp(op->name)) << op->name << " has no runtime kernel";
    }
  }
  EXPECT_FALSE(runtime::IsRuntimeOp("MatMul"));
}

}  // namespace weft
