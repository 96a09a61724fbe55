// The synchronous-training ops (core/runtime/accumulator.h,
// core/ops/data_flow_ops.cc) on the CPU device, through Session::Run:
// the mean of the first N gradients of a step, summed in replica order
// whatever the arrival order (expected values derived by hand in f32);
// stale, late, ahead and duplicate gradients; takes that wait, time out
// naming the missing replicas, or are cancelled; the step-token queue's
// "latest released step" semantics and its close; a run of three replica
// threads and a chief thread; and every error with its message.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/runtime/accumulator.h"
#include "tests/support/output_text.h"
#include "tests/support/runtime_env.h"
#include "weft/sdk/half.h"

namespace weft {
namespace {

using testing::RuntimeEnv;

const std::vector<std::string> kNames = {"/job:worker/task:0", "/job:worker/task:1", "/job:worker/task:2"};

struct Taken {
  std::vector<float> average;
  int64_t aggregated = 0;
  int64_t stale = 0;
  int64_t late = 0;
};

// An accumulator "acc" for variable 'w' (dtype, [3], N) with apply nodes
// "apply0".."apply2" (replicas 0-2, fed "s" and "g0".."g2"), takes "take"
// and "take_timed" (300 ms), "set" (fed "s"); a step token queue "tq"
// with "put", "reset", "token" and "token_timed" (200 ms), all fed "s",
// and "close".
struct SyncOps {
  explicit SyncOps(int64_t n = 2, DType type = DType::kF32) : dtype(type) {
    Output acc = b.Op("GradientAccumulator", {},
                      {{"dtype", AttrValue(dtype)},
                       {"shape", AttrValue(Shape{3})},
                       {"replicas_to_aggregate", AttrValue(n)},
                       {"variable", AttrValue("w")}},
                      "acc");
    Output s = b.Placeholder(DType::kI64, Shape{}, "s");
    for (int64_t r = 0; r < 3; ++r) {
      Output g = b.Placeholder(dtype, Shape{-1}, StrCat("g", r));
      b.Op("AccumulatorApplyGradient", {acc, s, g},
           {{"replica", AttrValue(r)}, {"replica_name", AttrValue(kNames[static_cast<std::size_t>(r)])}},
           StrCat("apply", r));
    }
    b.AddNode("AccumulatorTakeGradient", {acc}, {{"dtype", AttrValue(dtype)}}, "take");
    b.AddNode(
        "AccumulatorTakeGradient", {acc},
        {{"dtype", AttrValue(dtype)}, {"timeout_ms", AttrValue(int64_t{300})}, {"replica_names", AttrValue(kNames)}},
        "take_timed");
    b.Op("AccumulatorSetGlobalStep", {acc, s}, {}, "set");
    Output tq = b.Op("StepTokenQueue", {}, {}, "tq");
    b.Op("StepTokenPut", {tq, s}, {}, "put");
    b.Op("StepTokenPut", {tq, s}, {{"reset", AttrValue(true)}}, "reset");
    b.Op("StepTokenTake", {tq, s}, {}, "token");
    b.Op("StepTokenTake", {tq, s}, {{"timeout_ms", AttrValue(int64_t{200})}}, "token_timed");
    b.Op("StepTokenTake", {tq, s}, {{"wait_open", AttrValue(true)}}, "first_token");
    b.Op("StepTokenClose", {tq}, {}, "close");
    b.Op("StepTokenClose", {tq}, {{"aborted", AttrValue(true)}}, "abort");
    session = env.Session(b);
  }

  Tensor Gradient(const std::vector<float>& v) const {
    if (dtype == DType::kF32) return Tensor::FromVector<float>(v);
    Tensor t = *Tensor::Allocate(dtype, Shape{static_cast<int64_t>(v.size())});
    for (std::size_t i = 0; i < v.size(); ++i) t.data<uint16_t>()[i] = sdk::FloatToHalf(v[i]);
    return t;
  }
  Expected<bool> Apply(int64_t replica, int64_t step, const std::vector<float>& g) {
    std::vector<Tensor> out;
    WEFT_RETURN_IF_ERROR(session->Run({{"s", Tensor::Scalar<int64_t>(step)}, {StrCat("g", replica), Gradient(g)}},
                                      {StrCat("apply", replica)}, {}, &out));
    return out[0].scalar<bool>();
  }
  Expected<Taken> Take(const std::string& node = "take", const runtime::RunOptions& options = {}) {
    std::vector<Tensor> out;
    WEFT_RETURN_IF_ERROR(session->Run({}, {node + ":0", node + ":1", node + ":2", node + ":3"}, {}, &out, options));
    Taken t;
    for (int64_t i = 0; i < out[0].num_elements(); ++i) {
      t.average.push_back(dtype == DType::kF32 ? out[0].data<float>()[i]
                                               : sdk::HalfToFloat(out[0].data<uint16_t>()[i]));
    }
    t.aggregated = out[1].scalar<int64_t>();
    t.stale = out[2].scalar<int64_t>();
    t.late = out[3].scalar<int64_t>();
    return t;
  }
  Status Run(const std::string& target, int64_t step) {
    return session->Run({{"s", Tensor::Scalar<int64_t>(step)}}, {}, {target}, nullptr);
  }
  Expected<int64_t> Token(int64_t local_step, const std::string& node = "token") {
    std::vector<Tensor> out;
    WEFT_RETURN_IF_ERROR(session->Run({{"s", Tensor::Scalar<int64_t>(local_step)}}, {node}, {}, &out));
    return out[0].scalar<int64_t>();
  }
  // Takes a token for |local_step| through |take| on another thread, and
  // once that waits runs |op| (step 0), which must succeed; returns what
  // the take got.
  Expected<int64_t> TakeWhile(int64_t local_step, const std::string& op, const std::string& take = "token") {
    Expected<int64_t> got = InvalidArgumentError("not run");
    std::thread worker([&] { got = Token(local_step, take); });
    while (TokensWaiting() == 0) std::this_thread::yield();
    Status s = Run(op, 0);
    EXPECT_TRUE(s.ok()) << op << ": " << s.ToString();
    worker.join();
    return got;
  }
  // The resources, made when a step first runs a node that uses them.
  template <class T>
  std::shared_ptr<T> Find(const std::string& name) {
    auto all = env.devices()->Find("/device:CPU:0")->resources().AllResources();
    auto it = all.find(name);
    return it == all.end() ? nullptr : std::dynamic_pointer_cast<T>(it->second);
  }
  runtime::GradientAccumulator& accumulator() { return *Find<runtime::GradientAccumulator>("acc"); }
  runtime::StepTokenQueue& tokens() { return *Find<runtime::StepTokenQueue>("tq"); }
  bool TakeWaiting() {
    auto acc = Find<runtime::GradientAccumulator>("acc");
    return acc != nullptr && acc->take_waiting();
  }
  int64_t TokensWaiting() {
    auto tq = Find<runtime::StepTokenQueue>("tq");
    return tq == nullptr ? 0 : tq->waiting();
  }

  DType dtype;
  RuntimeEnv env;
  GraphBuilder b;
  std::unique_ptr<runtime::Session> session;
};

TEST(GradientAccumulator, TakesTheMeanOfTheFirstNAndCountsTheLateOnes) {
  SyncOps ops(2);
  EXPECT_EQ(*ops.Apply(1, 0, {3, -1, 0.5f}), true);
  EXPECT_EQ(*ops.Apply(0, 0, {1, 5, 0.25f}), true);
  // A third gradient for step 0 arrives after two were kept: late.
  EXPECT_EQ(*ops.Apply(2, 0, {100, 100, 100}), false);
  auto t = ops.Take();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // (1 + 3) / 2, (5 - 1) / 2, (0.25 + 0.5) / 2: exact in f32.
  EXPECT_EQ(t->average, (std::vector<float>{2, 2, 0.375f}));
  EXPECT_EQ(t->aggregated, 2);
  EXPECT_EQ(t->stale, 0);
  EXPECT_EQ(t->late, 1);
  EXPECT_EQ(ops.accumulator().global_step(), 1);
  // A gradient of step 0, the step just taken, is late now; step 1
  // starts empty.
  EXPECT_EQ(*ops.Apply(2, 0, {1, 1, 1}), false);
  EXPECT_EQ(*ops.Apply(2, 1, {4, 4, 4}), true);
  EXPECT_EQ(*ops.Apply(0, 1, {2, 2, 2}), true);
  t = ops.Take();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->average, (std::vector<float>{3, 3, 3}));
  EXPECT_EQ(t->stale, 0);
  EXPECT_EQ(t->late, 1);
  // At step 2, a gradient of step 0 is stale (older than the step taken
  // last), one of step 1 late.
  EXPECT_EQ(*ops.Apply(1, 0, {1, 1, 1}), false);
  EXPECT_EQ(*ops.Apply(1, 1, {1, 1, 1}), false);
  ASSERT_TRUE(*ops.Apply(0, 2, {1, 1, 1}));
  ASSERT_TRUE(*ops.Apply(1, 2, {1, 1, 1}));
  t = ops.Take();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->stale, 1);
  EXPECT_EQ(t->late, 1);
}

TEST(GradientAccumulator, SumsInReplicaOrderWhateverTheArrivalOrder) {
  // In f32, 1 + 1e8 rounds to 1e8 (the spacing there is 8), so
  // (1 + 1e8) + -1e8 = 0 but (-1e8 + 1e8) + 1 = 1. The replica order
  // 0, 1, 2 always gives the first: mean 0.
  for (const std::vector<int64_t>& order :
       {std::vector<int64_t>{0, 1, 2}, std::vector<int64_t>{2, 1, 0}, std::vector<int64_t>{1, 2, 0}}) {
    SyncOps ops(3);
    const std::vector<std::vector<float>> g = {{1, 2, 0}, {1e8f, 1e8f, 0}, {-1e8f, -1e8f, 0}};
    for (int64_t r : order) ASSERT_TRUE(*ops.Apply(r, 0, g[static_cast<std::size_t>(r)]));
    auto t = ops.Take();
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->average, (std::vector<float>{0, 0, 0})) << "arrival order " << order[0] << order[1] << order[2];
  }
}

TEST(GradientAccumulator, HalfGradientsAreSummedInF32) {
  // f16 has 11 significant bits: 2048 + 1 is not representable, so summing
  // in f16 would give (2048 + 1) + 1 = 2048, while f32 gives 2050; the mean
  // of (2048, 1, 1) over N = 3 is 683.33 -> f16 683.5 (spacing 0.5 there).
  SyncOps ops(3, DType::kF16);
  ASSERT_TRUE(*ops.Apply(0, 0, {2048, 2, -4}));
  ASSERT_TRUE(*ops.Apply(1, 0, {1, 2, -4}));
  ASSERT_TRUE(*ops.Apply(2, 0, {1, 2, -4}));
  auto t = ops.Take();
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->average, (std::vector<float>{683.5f, 2, -4}));
}

TEST(GradientAccumulator, RefusesAheadDuplicateAndMisshapenGradientsNamingThem) {
  SyncOps ops(2);
  auto ahead = ops.Apply(0, 3, {1, 1, 1});
  EXPECT_EQ(ahead.status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(ahead.status().message(),
            "node 'apply0' (AccumulatorApplyGradient) on /device:CPU:0: gradient for step 3 but the accumulator of "
            "'w' is at step 0 (was the chief restarted without --resume?)");
  ASSERT_TRUE(*ops.Apply(1, 0, {1, 1, 1}));
  auto twice = ops.Apply(1, 0, {1, 1, 1});
  EXPECT_EQ(twice.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(twice.status().message(),
            "node 'apply1' (AccumulatorApplyGradient) on /device:CPU:0: /job:worker/task:1 sent a second gradient "
            "for step 0 to the accumulator of 'w'; two processes may be running as the same task");
  auto shape = ops.Apply(0, 0, {1, 1, 1, 1});
  EXPECT_EQ(shape.status().message(),
            "node 'apply0' (AccumulatorApplyGradient) on /device:CPU:0: gradient for 'w' is f32[4]; the "
            "accumulator of 'w' holds f32[3]");
  // None of them counted.
  EXPECT_EQ(ops.accumulator().kept(), 1);
}

TEST(GradientAccumulator, ATakeWaitsForTheNthGradient) {
  SyncOps ops(2);
  Expected<Taken> got = InvalidArgumentError("not run");
  std::thread chief([&] { got = ops.Take(); });
  while (!ops.TakeWaiting()) std::this_thread::yield();
  ASSERT_TRUE(*ops.Apply(0, 0, {2, 2, 2}));
  // One of two: the take still waits.
  EXPECT_TRUE(ops.accumulator().take_waiting());
  ASSERT_TRUE(*ops.Apply(2, 0, {4, 4, 4}));
  chief.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->average, (std::vector<float>{3, 3, 3}));
  EXPECT_FALSE(ops.accumulator().take_waiting());
}

TEST(GradientAccumulator, ATakeTimesOutNamingTheReplicasThatSentNothing) {
  SyncOps ops(2);
  ASSERT_TRUE(*ops.Apply(1, 0, {1, 1, 1}));
  auto t = ops.Take("take_timed");
  EXPECT_EQ(t.status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(t.status().message(),
            "node 'take_timed' (AccumulatorTakeGradient) on /device:CPU:0: the accumulator of 'w' waited 0.3 s at "
            "step 0 for 2 gradients (training.replicas_to_aggregate); 1 arrived, from /job:worker/task:1; none from "
            "/job:worker/task:0, /job:worker/task:2");
  // The step did not advance and the kept gradient stays.
  EXPECT_EQ(ops.accumulator().global_step(), 0);
  ASSERT_TRUE(*ops.Apply(0, 0, {3, 3, 3}));
  t = ops.Take("take_timed");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->average, (std::vector<float>{2, 2, 2}));
}

TEST(GradientAccumulator, WithNoBackupWorkersTheTimeoutSaysEveryWorkerIsNeeded) {
  // N = 3 of 3 names: no backups.
  SyncOps ops(3);
  auto t = ops.Take("take_timed");
  EXPECT_EQ(t.status().message(),
            "node 'take_timed' (AccumulatorTakeGradient) on /device:CPU:0: the accumulator of 'w' waited 0.3 s at "
            "step 0 for 3 gradients (training.replicas_to_aggregate); 0 arrived; none from /job:worker/task:0, "
            "/job:worker/task:1, /job:worker/task:2 (with backup_workers = 0 every worker is needed)");
}

TEST(GradientAccumulator, ACancelledTakeLeavesNothingWaiting) {
  SyncOps ops(2);
  runtime::RunOptions options;
  options.timeout_ms = 50;
  auto t = ops.Take("take", options);
  EXPECT_EQ(t.status().code(), Code::kDeadlineExceeded);
  EXPECT_FALSE(ops.accumulator().take_waiting());
  // A later take works as usual.
  ASSERT_TRUE(*ops.Apply(0, 0, {1, 1, 1}));
  ASSERT_TRUE(*ops.Apply(1, 0, {1, 1, 1}));
  EXPECT_TRUE(ops.Take().ok());
}

TEST(GradientAccumulator, SetGlobalStepMovesTheStepAndDropsWhatWasKept) {
  SyncOps ops(2);
  ASSERT_TRUE(*ops.Apply(0, 0, {9, 9, 9}));
  ASSERT_TRUE(ops.Run("set", 5).ok());
  EXPECT_EQ(ops.accumulator().kept(), 0);
  EXPECT_EQ(*ops.Apply(1, 3, {1, 1, 1}), false);  // stale
  ASSERT_TRUE(*ops.Apply(1, 5, {1, 1, 1}));
  ASSERT_TRUE(*ops.Apply(0, 5, {3, 3, 3}));
  auto t = ops.Take();
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->average, (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(t->stale, 1);
  EXPECT_EQ(ops.accumulator().global_step(), 6);
  Status negative = ops.Run("set", -1);
  EXPECT_EQ(negative.message(), "node 'set' (AccumulatorSetGlobalStep) on /device:CPU:0: step is -1; it must be >= 0");
}

// The attrs of a GradientAccumulator of f32 |shape| that aggregates
// |replicas| gradients, with |more|.
AttrMap AccumulatorAttrs(const Shape& shape, int64_t replicas, const AttrMap& more = {}) {
  AttrMap attrs = {
      {"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(shape)}, {"replicas_to_aggregate", AttrValue(replicas)}};
  attrs.insert(more.begin(), more.end());
  return attrs;
}

TEST(GradientAccumulator, AWorkerWithoutTheChiefsAccumulatorIsToldWhy) {
  RuntimeEnv env;
  GraphBuilder b;
  b.Op("GradientAccumulator", {},
       AccumulatorAttrs(Shape{10}, 2, {{"variable", AttrValue("extra/kernel")}, {"create", AttrValue(false)}}),
       "extra/kernel/sync/accumulator");
  auto session = env.Session(b);
  Status s = session->Run({}, {"extra/kernel/sync/accumulator"}, {}, nullptr);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("there is no gradient accumulator for variable 'extra/kernel' (f32[10]) on "
                             "/device:CPU:0: the chief's model has no such variable (is this worker's model the "
                             "chief's?)"),
            std::string::npos)
      << s.message();
}

TEST(GradientAccumulator, ASecondNodeWithOtherSettingsIsRefusedNamingBoth) {
  RuntimeEnv env;
  GraphBuilder b;
  auto make = [&](int64_t n, const char* name) {
    b.Op("GradientAccumulator", {},
         AccumulatorAttrs(
             Shape{784, 512}, n,
             {{"variable", AttrValue("dense1/kernel")}, {"shared_name", AttrValue("dense1/kernel/sync/accumulator")}}),
         name);
  };
  make(2, "a");
  make(3, "b");
  auto session = env.Session(b);
  ASSERT_TRUE(session->Run({}, {"a"}, {}, nullptr).ok());
  Status s = session->Run({}, {"b"}, {}, nullptr);
  EXPECT_TRUE(testing::Contains(s.message(),
                                "gradient accumulator 'dense1/kernel/sync/accumulator' exists with "
                                "replicas_to_aggregate 2, f32[784,512]; this node asks for replicas_to_aggregate 3, "
                                "f32[784,512] (do the workers' models and training.replicas_to_aggregate agree?)"));
}

TEST(GradientAccumulator, BadAttrsAreRefusedWhenTheGraphIsBuilt) {
  struct Case {
    AttrMap attrs;
    std::string message;
  };
  const std::vector<Case> cases = {
      {AccumulatorAttrs(Shape{-1}, 2), "shape is [?]; an accumulator's shape must be fully defined"},
      {AccumulatorAttrs(Shape{3}, 0), "replicas_to_aggregate is 0; it must be >= 1"},
      {AccumulatorAttrs(Shape{int64_t{1} << 40, int64_t{1} << 40}, 1), "has more than 2^63 elements"},
  };
  for (const Case& c : cases) {
    GraphBuilder b;
    b.Op("GradientAccumulator", {}, c.attrs, "acc");
    auto graph = b.Build();
    ASSERT_FALSE(graph.ok()) << c.message;
    EXPECT_NE(graph.status().message().find(c.message), std::string::npos) << graph.status().message();
  }
}

// --- StepTokenQueue ----------------------------------------------------------

TEST(StepTokenQueue, ATakeGetsTheLatestReleasedStep) {
  SyncOps ops;
  Expected<int64_t> got = InvalidArgumentError("not run");
  std::thread worker([&] { got = ops.Token(0); });
  while (ops.TokensWaiting() == 0) std::this_thread::yield();
  ASSERT_TRUE(ops.Run("put", 0).ok());  // not later than 0: still waiting
  EXPECT_EQ(ops.tokens().waiting(), 1);
  ASSERT_TRUE(ops.Run("put", 1).ok());
  worker.join();
  EXPECT_EQ(*got, 1);
  // A straggler at step 1 skips straight to the latest step, 3.
  ASSERT_TRUE(ops.Run("put", 2).ok());
  ASSERT_TRUE(ops.Run("put", 3).ok());
  EXPECT_EQ(*ops.Token(1), 3);
  // A lower step is ignored; reset sets it exactly.
  ASSERT_TRUE(ops.Run("put", 2).ok());
  EXPECT_EQ(ops.tokens().released(), 3);
  ASSERT_TRUE(ops.Run("reset", 2).ok());
  EXPECT_EQ(ops.tokens().released(), 2);
}

TEST(StepTokenQueue, CloseEndsTheRunForWorkersWaitingForMore) {
  SyncOps ops;
  ASSERT_TRUE(ops.Run("put", 20).ok());
  Expected<int64_t> got = ops.TakeWhile(20, "close");
  EXPECT_EQ(got.status().code(), Code::kOutOfRange);
  EXPECT_EQ(got.status().message(),
            "node 'token' (StepTokenTake) on /device:CPU:0: the chief ended the run at step 20");
  // A straggler behind the last step still gets it after the close.
  EXPECT_EQ(*ops.Token(19), 20);
  // reset opens the queue again.
  ASSERT_TRUE(ops.Run("reset", 20).ok());
  EXPECT_FALSE(ops.tokens().closed());
}

TEST(StepTokenQueue, AnAbortEndsWaitingTakesWithAnError) {
  SyncOps ops;
  ASSERT_TRUE(ops.Run("put", 7).ok());
  Expected<int64_t> got = ops.TakeWhile(7, "abort");
  EXPECT_EQ(got.status().code(), Code::kAborted);
  EXPECT_EQ(got.status().message(),
            "node 'token' (StepTokenTake) on /device:CPU:0: the chief stopped the run after an error, at step 7 "
            "(its output says which)");
}

TEST(StepTokenQueue, AFirstTakeWaitsForAQueueAnEarlierRunClosedToOpenAgain) {
  // A run ended at step 20 and closed the queue; a new run's worker asks
  // for its first step (-1) before the new chief has reset the queue: it
  // must not be handed the old 20.
  SyncOps ops;
  ASSERT_TRUE(ops.Run("put", 20).ok());
  ASSERT_TRUE(ops.Run("close", 0).ok());
  Expected<int64_t> got = ops.TakeWhile(-1, "reset", "first_token");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 0);
}

TEST(StepTokenQueue, AResetToAnEarlierStepEndsTheTakesWaitingPastIt) {
  // recovery = "auto": the chief restored step 7 while workers waited for
  // a step after 10 (and after 7). Neither can come before their
  // gradients for step 7, so both end with ABORTED and take their first
  // step again; a worker behind step 7 gets it.
  SyncOps ops;
  ASSERT_TRUE(ops.Run("put", 10).ok());
  Expected<int64_t> past = InvalidArgumentError("not run");
  Expected<int64_t> at = InvalidArgumentError("not run");
  std::thread w1([&] { past = ops.Token(10); });
  while (ops.TokensWaiting() < 1) std::this_thread::yield();
  ASSERT_TRUE(ops.Run("reset", 7).ok());
  w1.join();
  EXPECT_EQ(past.status().code(), Code::kAborted);
  EXPECT_EQ(past.status().message(),
            "node 'token' (StepTokenTake) on /device:CPU:0: step token queue 'tq' went back to step 7 while this "
            "worker waited for a step after 10 (the chief restored a checkpoint after a task was lost); the worker "
            "takes its first step again");
  std::thread w2([&] { at = ops.Token(7); });
  while (ops.TokensWaiting() < 1) std::this_thread::yield();
  ASSERT_TRUE(ops.Run("reset", 7).ok());
  w2.join();
  EXPECT_EQ(at.status().code(), Code::kAborted);
  // A take for a step after the released one ends at once.
  auto ahead = ops.Token(9);
  EXPECT_EQ(ahead.status().code(), Code::kAborted);
  EXPECT_NE(ahead.status().message().find("went back to step 7 while this worker waited for a step after 9"),
            std::string::npos)
      << ahead.status().message();
  EXPECT_EQ(*ops.Token(6), 7);
  EXPECT_EQ(*ops.Token(-1, "first_token"), 7);
  EXPECT_EQ(ops.tokens().waiting(), 0);
}

TEST(StepTokenQueue, ATimedTakeNamesTheStepsAndTheLikelyCauses) {
  SyncOps ops;
  ASSERT_TRUE(ops.Run("put", 4).ok());
  auto got = ops.Token(4, "token_timed");
  EXPECT_EQ(got.status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(got.status().message(),
            "node 'token_timed' (StepTokenTake) on /device:CPU:0: waited 0.2 s in step token queue 'tq' for a step "
            "after 4; the chief has released step 4 (is the chief alive, and are the other workers sending their "
            "gradients?)");
  EXPECT_EQ(ops.tokens().waiting(), 0);
}

TEST(StepTokenQueue, ACancelledTakeLeavesNothingWaiting) {
  SyncOps ops;
  runtime::RunOptions options;
  options.timeout_ms = 30;
  std::vector<Tensor> out;
  Status s = ops.session->Run({{"s", Tensor::Scalar<int64_t>(0)}}, {"token"}, {}, &out, options);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded);
  EXPECT_EQ(ops.tokens().waiting(), 0);
}

// --- The timer ---------------------------------------------------------------

TEST(Timer, CancellingTheEntryItWaitsForLeavesItServingOthers) {
  // The timer thread waits for the earliest entry; cancelling that entry
  // meanwhile must not leave it reading freed memory (ASan once saw it:
  // wait_until re-reads its deadline), and later entries still run.
  runtime::Timer timer;
  std::atomic<int> ran{0};
  for (int round = 0; round < 20; ++round) {
    const runtime::Timer::Id far =
        timer.Schedule(runtime::Timer::Clock::now() + std::chrono::seconds(30), [&] { ran += 100; });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(timer.Cancel(far));
    EXPECT_FALSE(timer.Cancel(far));
  }
  std::atomic<bool> soon{false};
  timer.Schedule(runtime::Timer::Clock::now() + std::chrono::milliseconds(1), [&] { soon = true; });
  while (!soon.load()) std::this_thread::yield();
  EXPECT_EQ(ran.load(), 0);
}

// --- Both, on threads --------------------------------------------------------

TEST(SyncOps, ThreeReplicaThreadsAndAChiefRunFiftyStepsWithOneBackup) {
  // N = 2 of 3 workers. Each worker sends the gradient {step, step, step}
  // for the step it computes at, then waits for a later step; the chief
  // takes, checks, and releases. Every take must average two gradients of
  // its own step, so its mean is the step itself.
  constexpr int64_t kSteps = 50;
  SyncOps ops(2);
  ASSERT_TRUE(ops.Run("put", 0).ok());
  std::atomic<int64_t> offered{0};
  std::atomic<int64_t> accepted{0};
  std::vector<std::thread> workers;
  for (int64_t r = 0; r < 3; ++r) {
    workers.emplace_back([&, r] {
      int64_t local = 0;
      while (local < kSteps) {
        const auto step = static_cast<float>(local);
        auto ok = ops.Apply(r, local, {step, step, step});
        ASSERT_TRUE(ok.ok()) << ok.status().ToString();
        ++offered;
        if (*ok) ++accepted;
        auto token = ops.Token(local);
        ASSERT_TRUE(token.ok()) << token.status().ToString();
        ASSERT_GT(*token, local);
        local = *token;
      }
    });
  }
  int64_t dropped = 0;
  for (int64_t k = 0; k < kSteps; ++k) {
    auto t = ops.Take();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->average, std::vector<float>(3, static_cast<float>(k))) << "step " << k;
    EXPECT_EQ(t->aggregated, 2);
    dropped += t->stale + t->late;
    ASSERT_TRUE(ops.Run("put", k + 1).ok());
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(accepted.load(), 2 * kSteps);
  // Every offered gradient was kept or counted as dropped by some take,
  // except those that arrived after the last take.
  EXPECT_LE(dropped + accepted.load(), offered.load());
  EXPECT_EQ(ops.accumulator().global_step(), kSteps);
}

}  // namespace
}  // namespace weft
