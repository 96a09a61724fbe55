// Collective groups (core/runtime/collectives.h) over the real gloo plugin,
// with ranks as threads of this process meeting through an in-process
// store over real loopback sockets: allreduce, broadcast and allgather for
// every type the plugin serves, against sums derived by hand; the order
// every rank issues in, whatever order operations arrive in; the graph ops
// (fused buckets, mean); a dead peer, a silent peer and a rendezvous
// nobody joins, each failing with a message naming what and who; and the
// errors of choosing a plugin.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <thread>

#include "core/runtime/collectives.h"
#include "tests/support/output_text.h"
#include "tests/support/runtime_env.h"
#include "weft/sdk/half.h"

namespace weft {
namespace {

using runtime::CollectiveGroup;
using runtime::CollectiveGroupOptions;
using runtime::LocalKvStore;
using runtime::OrderKey;
using testing::RuntimeEnv;

bool HaveGloo() { return testing::SharedRuntimeEnv().host().collectives().Find("gloo") != nullptr; }

#define REQUIRE_GLOO()                                                                                  \
  if (!HaveGloo()) {                                                                                    \
    GTEST_SKIP() << "the gloo plugin is not built (tools/setup.sh installs libgloo-dev; then rebuild)"; \
  }

int g_prefix = 0;

CollectiveGroupOptions Options(int rank, int size, const std::shared_ptr<LocalKvStore>& store,
                               const std::string& prefix, int64_t timeout_ms = 20000) {
  CollectiveGroupOptions o;
  o.name = StrCat("g", prefix, "_", rank);
  o.rank = rank;
  o.size = size;
  for (int i = 0; i < size; ++i) {
    o.rank_names.push_back(StrCat("/job:worker/task:", i));
    o.rank_hosts.push_back("127.0.0.1");
  }
  o.store = store;
  o.key_prefix = prefix;
  o.backend = "gloo";
  o.timeout_ms = timeout_ms;
  return o;
}

// Creates |size| groups (one per rank, joined concurrently), runs
// |body|(rank, group) on a thread per rank and returns each rank's status.
std::vector<Status> OnRanks(int size, const std::function<Status(int, CollectiveGroup&)>& body,
                            int64_t timeout_ms = 20000) {
  auto store = std::make_shared<LocalKvStore>();
  const std::string prefix = StrCat("test", g_prefix++);
  std::vector<std::future<Status>> results;
  for (int r = 0; r < size; ++r) {
    results.push_back(std::async(std::launch::async, [&, r]() -> Status {
      auto group =
          CollectiveGroup::Create(testing::SharedRuntimeEnv().host(), Options(r, size, store, prefix, timeout_ms));
      if (!group.ok()) return group.status();
      return body(r, **group);
    }));
  }
  std::vector<Status> out;
  for (auto& f : results) out.push_back(f.get());
  return out;
}

void ExpectAllOk(const std::vector<Status>& statuses) {
  for (std::size_t r = 0; r < statuses.size(); ++r)
    EXPECT_TRUE(statuses[r].ok()) << r << ": " << statuses[r].ToString();
}

weft_comm_buffer_t Buf(weft_dtype_t dtype, void* data, uint64_t count) {
  weft_comm_buffer_t b{};
  b.struct_size = sizeof(b);
  b.dtype = dtype;
  b.count = count;
  b.data = data;
  return b;
}

// Rank r's element i is (r + 1) * (i % 5 + 1); the sum over n ranks is
// (i % 5 + 1) * n (n + 1) / 2, exact in every type here.
TEST(Collectives, AllReduceSumsEveryServedTypeAndSize) {
  REQUIRE_GLOO();
  const int n = 3;
  for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1000}, uint64_t{262147}}) {
    auto statuses = OnRanks(n, [&](int r, CollectiveGroup& g) -> Status {
      std::vector<float> f32(count);
      std::vector<double> f64(count);
      std::vector<int32_t> i32(count);
      std::vector<int64_t> i64(count);
      std::vector<uint16_t> f16(count);
      std::vector<uint16_t> bf16(count);
      for (uint64_t i = 0; i < count; ++i) {
        const int v = (r + 1) * static_cast<int>(i % 5 + 1);
        f32[i] = static_cast<float>(v);
        f64[i] = v;
        i32[i] = v;
        i64[i] = int64_t{v} << 33;
        f16[i] = sdk::FloatToHalf(static_cast<float>(v));
        bf16[i] = sdk::FloatToBfloat16(static_cast<float>(v));
      }
      WEFT_RETURN_IF_ERROR(g.AllReduce(Buf(WEFT_DTYPE_F32, f32.data(), count), WEFT_REDUCE_SUM));
      WEFT_RETURN_IF_ERROR(g.AllReduce(Buf(WEFT_DTYPE_F64, f64.data(), count), WEFT_REDUCE_SUM));
      WEFT_RETURN_IF_ERROR(g.AllReduce(Buf(WEFT_DTYPE_I32, i32.data(), count), WEFT_REDUCE_SUM));
      WEFT_RETURN_IF_ERROR(g.AllReduce(Buf(WEFT_DTYPE_I64, i64.data(), count), WEFT_REDUCE_SUM));
      WEFT_RETURN_IF_ERROR(g.AllReduce(Buf(WEFT_DTYPE_F16, f16.data(), count), WEFT_REDUCE_SUM));
      WEFT_RETURN_IF_ERROR(g.AllReduce(Buf(WEFT_DTYPE_BF16, bf16.data(), count), WEFT_REDUCE_SUM));
      for (uint64_t i = 0; i < count; ++i) {
        const int want = static_cast<int>(i % 5 + 1) * n * (n + 1) / 2;  // 6 * (i % 5 + 1)
        if (f32[i] != want || f64[i] != want || i32[i] != want || i64[i] != (int64_t{want} << 33) ||
            sdk::HalfToFloat(f16[i]) != want || sdk::Bfloat16ToFloat(bf16[i]) != want) {
          return InternalError("rank ", r, " element ", i, " of ", count, ": want ", want, ", f32 ", f32[i], " f64 ",
                               f64[i], " i32 ", i32[i], " i64 ", i64[i] >> 33, " f16 ", sdk::HalfToFloat(f16[i]),
                               " bf16 ", sdk::Bfloat16ToFloat(bf16[i]));
        }
      }
      return Status();
    });
    ExpectAllOk(statuses);
  }
}

// A group whose ranks join and leave at once: a rank that has linked to
// every peer must not leave while a slower peer is still accepting its
// link, or that peer's join fails with "Connection closed by peer".
TEST(Collectives, RanksThatJoinAndLeaveAtOnceAllJoin) {
  REQUIRE_GLOO();
  for (int round = 0; round < 25; ++round) {
    auto statuses = OnRanks(3, [](int, CollectiveGroup&) { return Status(); });
    for (std::size_t r = 0; r < statuses.size(); ++r)
      ASSERT_TRUE(statuses[r].ok()) << "round " << round << ", rank " << r << ": " << statuses[r].ToString();
  }
}

TEST(Collectives, MinMaxAndOutOfPlace) {
  REQUIRE_GLOO();
  auto statuses = OnRanks(2, [](int r, CollectiveGroup& g) -> Status {
    std::vector<float> in = {r == 0 ? -1.0f : 2.0f, r == 0 ? 5.0f : 3.0f};
    std::vector<float> out(2, 99.0f);
    std::vector<float> mx = in;
    std::promise<Status> done;
    g.AllReduce(std::nullopt, Buf(WEFT_DTYPE_F32, in.data(), 2), Buf(WEFT_DTYPE_F32, out.data(), 2), WEFT_REDUCE_MIN,
                [&](Status s) { done.set_value(s); });
    WEFT_RETURN_IF_ERROR(done.get_future().get());
    WEFT_RETURN_IF_ERROR(g.AllReduce(Buf(WEFT_DTYPE_F32, mx.data(), 2), WEFT_REDUCE_MAX));
    if (out != std::vector<float>{-1.0f, 3.0f}) return InternalError("min: ", out[0], ", ", out[1]);
    if (in != std::vector<float>{r == 0 ? -1.0f : 2.0f, r == 0 ? 5.0f : 3.0f}) {
      return InternalError("out of place changed the input");
    }
    if (mx != std::vector<float>{2.0f, 5.0f}) return InternalError("max: ", mx[0], ", ", mx[1]);
    return Status();
  });
  ExpectAllOk(statuses);
}

TEST(Collectives, BroadcastFromEveryRootAndAllGather) {
  REQUIRE_GLOO();
  const int n = 3;
  auto statuses = OnRanks(n, [&](int r, CollectiveGroup& g) -> Status {
    for (int root = 0; root < n; ++root) {
      std::vector<int64_t> v = {r * 10 + 1, r * 10 + 2, r * 10 + 3};
      WEFT_RETURN_IF_ERROR(g.Broadcast(Buf(WEFT_DTYPE_I64, v.data(), 3), root));
      if (v != std::vector<int64_t>{root * 10 + 1, root * 10 + 2, root * 10 + 3}) {
        return InternalError("rank ", r, " root ", root, ": got ", v[0], ", ", v[1], ", ", v[2]);
      }
    }
    std::vector<double> in = {r + 0.5, -r - 0.25};
    std::vector<double> out(2 * n, 0.0);
    std::promise<Status> done;
    g.AllGather(std::nullopt, Buf(WEFT_DTYPE_F64, in.data(), 2), Buf(WEFT_DTYPE_F64, out.data(), 2 * n),
                [&](Status s) { done.set_value(s); });
    WEFT_RETURN_IF_ERROR(done.get_future().get());
    for (int k = 0; k < n; ++k) {
      if (out[2 * k] != k + 0.5 || out[2 * k + 1] != -k - 0.25) return InternalError("allgather slot ", k);
    }
    return Status();
  });
  ExpectAllOk(statuses);
}

// Rank 0 hands its operations to the group in reverse order, rank 1 in
// order: the group must still issue them 0, 1, 2 on both, or the sizes
// (1, 1000, 100000 elements) would not match across ranks.
TEST(Collectives, OperationsAreIssuedInTheirOrderWhateverOrderTheyArriveIn) {
  REQUIRE_GLOO();
  auto statuses = OnRanks(2, [](int r, CollectiveGroup& g) -> Status {
    const std::vector<uint64_t> sizes = {1, 1000, 100000};
    for (int pass = 0; pass < 3; ++pass) {
      std::vector<std::vector<float>> data;
      for (uint64_t s : sizes) data.emplace_back(s, static_cast<float>(r + 1));
      std::vector<std::promise<Status>> done(3);
      std::vector<int> arrival = r == 0 ? std::vector<int>{2, 1, 0} : std::vector<int>{0, 1, 2};
      for (int k : arrival) {
        auto* d = &data[static_cast<std::size_t>(k)];
        g.AllReduce(OrderKey{"train", k, 3}, Buf(WEFT_DTYPE_F32, d->data(), d->size()),
                    Buf(WEFT_DTYPE_F32, d->data(), d->size()), WEFT_REDUCE_SUM,
                    [&done, k](Status s) { done[static_cast<std::size_t>(k)].set_value(s); });
      }
      for (int k = 0; k < 3; ++k) WEFT_RETURN_IF_ERROR(done[static_cast<std::size_t>(k)].get_future().get());
      for (const auto& d : data) {
        for (float v : d) {
          if (v != 3.0f) return InternalError("pass ", pass, ": got ", v);
        }
      }
    }
    if (g.stats().ops != 9) return InternalError("stats counted ", g.stats().ops, " ops");
    return Status();
  });
  ExpectAllOk(statuses);
}

TEST(Collectives, TwoRoundsAtOnceAreRefusedNamingBoth) {
  REQUIRE_GLOO();
  auto statuses = OnRanks(1, [](int, CollectiveGroup& g) -> Status {
    std::vector<float> a(4, 1.0f);
    std::promise<Status> first;
    std::promise<Status> second;
    // Order 1 of "train" waits for order 0, so the round stays open.
    g.AllReduce(OrderKey{"train", 1, 2}, Buf(WEFT_DTYPE_F32, a.data(), 4), Buf(WEFT_DTYPE_F32, a.data(), 4),
                WEFT_REDUCE_SUM, [&](Status s) { first.set_value(s); });
    g.Broadcast(OrderKey{"init", 0, 1}, Buf(WEFT_DTYPE_F32, a.data(), 4), 0, [&](Status s) { second.set_value(s); });
    Status refused = second.get_future().get();
    if (refused.message() !=
        "collective round 'init' (1 ops) started while round 'train' (2 ops) is incomplete: two graphs with "
        "collectives must not run at once in group '" +
            g.options().name + "'") {
      return InternalError("unexpected: ", refused.ToString());
    }
    g.AllReduce(OrderKey{"train", 0, 2}, Buf(WEFT_DTYPE_F32, a.data(), 4), Buf(WEFT_DTYPE_F32, a.data(), 4),
                WEFT_REDUCE_SUM, [](Status) {});
    // A round that cannot complete fails the group: the waiting op too.
    Status waiting = first.get_future().get();
    if (waiting.message() != refused.message()) {
      return InternalError("the waiting op: ", waiting.ToString());
    }
    return Status();
  });
  ExpectAllOk(statuses);
}

// A rank whose communicator is aborted (as the group does after its own
// failure, or a process that dies) closes its links: the others, waiting
// in an allreduce it never joins, fail at once with a message naming
// themselves and what gloo saw, rather than after the 60 s timeout.
TEST(Collectives, APeerThatGoesAwayFailsTheOthersAtOnce) {
  REQUIRE_GLOO();
  const auto start = std::chrono::steady_clock::now();
  std::promise<void> others_waiting;
  auto waiting = others_waiting.get_future().share();
  auto statuses = OnRanks(
      3,
      [&](int r, CollectiveGroup& g) -> Status {
        std::vector<float> v(1000, 1.0f);
        if (r == 2) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          g.Abort(AbortedError("test: rank 2 goes away"));
          return Status();
        }
        Status s = g.AllReduce(Buf(WEFT_DTYPE_F32, v.data(), v.size()), WEFT_REDUCE_SUM);
        if (s.ok()) return InternalError("rank ", r, ": the allreduce succeeded without rank 2");
        const std::string want = StrCat("allreduce of 3.9 KiB in group '", g.options().name, "' (/job:worker/task:", r,
                                        ", rank ", r, " of 3) failed: gloo said: ");
        if (s.message().rfind(want, 0) != 0) return InternalError("rank ", r, ": unexpected: ", s.ToString());
        // Later operations fail at once with the first error.
        Status later = g.AllReduce(Buf(WEFT_DTYPE_F32, v.data(), v.size()), WEFT_REDUCE_SUM);
        if (later.message() != s.message()) return InternalError("rank ", r, ": later op: ", later.ToString());
        return Status();
      },
      60000);
  ExpectAllOk(statuses);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("the others failed %.2f s after the start (timeout 60 s)\n", s);
}

TEST(Collectives, ASilentPeerFailsTheOperationAtTheTimeout) {
  REQUIRE_GLOO();
  auto statuses = OnRanks(
      2,
      [&](int r, CollectiveGroup& g) -> Status {
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          return Status();
        }
        std::vector<float> v(10, 1.0f);
        Status s = g.AllReduce(Buf(WEFT_DTYPE_F32, v.data(), v.size()), WEFT_REDUCE_SUM);
        if (s.ok()) return InternalError("the allreduce succeeded without rank 1");
        if (s.message().find("(/job:worker/task:0, rank 0 of 2) failed: gloo said: ") == std::string::npos ||
            s.message().find("Timed out") == std::string::npos) {
          return InternalError("unexpected: ", s.ToString());
        }
        return Status();
      },
      500);
  ExpectAllOk(statuses);
}

TEST(Collectives, ARendezvousNobodyJoinsTimesOutNamingTheKey) {
  REQUIRE_GLOO();
  auto store = std::make_shared<LocalKvStore>();
  CollectiveGroupOptions o = Options(1, 2, store, "lonely", 300);
  o.diagnose = [] { return std::string("/job:worker/task:0 (127.0.0.1:1) does not answer"); };
  auto group = CollectiveGroup::Create(testing::SharedRuntimeEnv().host(), o);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), Code::kDeadlineExceeded);
  EXPECT_EQ(group.status().message(),
            "collective group 'glonely_1' (/job:worker/task:1, rank 1 of 2) could not join: /job:worker/task:0 "
            "(127.0.0.1:1) does not answer; gloo said: rendezvous: \"lonely/rank_0\" did not appear within 300 ms")
      << group.status().ToString();
}

TEST(Collectives, ChoosingThePluginSaysWhatIsLoaded) {
  REQUIRE_GLOO();
  auto store = std::make_shared<LocalKvStore>();
  CollectiveGroupOptions o = Options(0, 1, store, "choose");
  o.backend = "glo";
  auto typo = CollectiveGroup::Create(testing::SharedRuntimeEnv().host(), o);
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().message(),
            "cluster.collectives: no collectives plugin 'glo' is loaded (did you mean 'gloo'?); loaded: gloo");
  o.backend = "auto";
  o.device_type = "CUDA";
  auto cuda = CollectiveGroup::Create(testing::SharedRuntimeEnv().host(), o);
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().message(),
            "no loaded collectives plugin serves CUDA memory (loaded: gloo); `weft plugins` lists them, and "
            "tools/setup.sh installs Gloo (libgloo-dev) for the gloo plugin");
  o.backend = "gloo";
  auto gloo_cuda = CollectiveGroup::Create(testing::SharedRuntimeEnv().host(), o);
  ASSERT_FALSE(gloo_cuda.ok());
  EXPECT_EQ(gloo_cuda.status().message(), "collectives plugin 'gloo' serves CPU memory, not CUDA");
  o.device_type = "CPU";
  o.rank = 1;
  auto bad_rank = CollectiveGroup::Create(testing::SharedRuntimeEnv().host(), o);
  ASSERT_FALSE(bad_rank.ok());
  EXPECT_EQ(bad_rank.status().message(), "collective group 'gchoose_0': rank 1 of 1 is not a rank");
}

// The graph ops: a fused bucket of two gradients averaged (mean), a
// broadcast from rank 1, an allgather; each rank runs its own graph whose
// ops name its own group.
TEST(Collectives, GraphOpsFuseAverageBroadcastAndGather) {
  REQUIRE_GLOO();
  auto statuses = OnRanks(2, [](int r, CollectiveGroup& g) -> Status {
    std::shared_ptr<CollectiveGroup> shared(&g, [](CollectiveGroup*) {});
    WEFT_RETURN_IF_ERROR(runtime::RegisterCollectiveGroup(shared));
    GraphBuilder b;
    Output a = b.Const(Tensor::FromVector<float>({1.0f + r, 2.0f, 3.0f}), "a");
    Output c = b.Const(Tensor::FromVector<float>({10.0f * (r + 1), -4.0f}, Shape{2, 1}), "c");
    const AttrValue group(g.options().name);
    b.AddNode("CollectiveAllReduce", {a, c},
              {{"N", AttrValue(int64_t{2})},
               {"T", AttrValue(DType::kF32)},
               {"group", group},
               {"reduction", AttrValue("mean")}},
              "bucket");
    b.AddNode("CollectiveBroadcast", {a},
              {{"T", AttrValue(DType::kF32)}, {"group", group}, {"root", AttrValue(int64_t{1})}}, "bcast");
    b.AddNode("CollectiveAllGather", {c}, {{"T", AttrValue(DType::kF32)}, {"group", group}}, "gather");
    auto session = testing::SharedRuntimeEnv().Session(b);
    std::vector<Tensor> all;
    Status run = session->Run({}, {"bucket:0", "bucket:1"}, {}, &all);
    if (run.ok()) {
      // mean of {1,2,3} and {2,2,3}; of {10,-4} and {20,-4}.
      if (std::vector<float>(all[0].data<float>(), all[0].data<float>() + 3) != std::vector<float>{1.5f, 2.0f, 3.0f} ||
          all[1].shape() != Shape({2, 1}) || all[1].data<float>()[0] != 15.0f || all[1].data<float>()[1] != -4.0f) {
        run = InternalError("rank ", r, ": bucket gave ", all[0].data<float>()[0], " and ", all[1].data<float>()[0]);
      }
    }
    std::vector<Tensor> bc;
    if (run.ok()) run = session->Run({}, {"bcast"}, {}, &bc);
    if (run.ok() && bc[0].data<float>()[0] != 2.0f)
      run = InternalError("rank ", r, ": broadcast gave ", bc[0].data<float>()[0]);
    std::vector<Tensor> ga;
    if (run.ok()) run = session->Run({}, {"gather"}, {}, &ga);
    if (run.ok()) {
      const float* p = ga[0].data<float>();
      if (ga[0].shape() != Shape({4, 1}) || p[0] != 10.0f || p[1] != -4.0f || p[2] != 20.0f || p[3] != -4.0f) {
        run = InternalError("rank ", r, ": gather gave ", ga[0].shape().ToString());
      }
    }
    runtime::UnregisterCollectiveGroup(g.options().name);
    return run;
  });
  ExpectAllOk(statuses);
}

TEST(Collectives, AnOpWithoutItsGroupSaysHowToSetOneUp) {
  GraphBuilder b;
  Output a = b.Const(Tensor::FromVector<float>({1.0f}), "a");
  b.AddNode("CollectiveAllReduce", {a}, {{"N", AttrValue(int64_t{1})}, {"T", AttrValue(DType::kF32)}}, "ar");
  auto session = testing::SharedRuntimeEnv().Session(b);
  std::vector<Tensor> out;
  Status run = session->Run({}, {"ar"}, {}, &out);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.message().find("collective group 'train' is not set up in this process (collective ops run under "
                               "weft train with training.mode = \"allreduce\", or in a program that creates the "
                               "group first)"),
            std::string::npos)
      << run.ToString();
}

// Why a graph of one CollectiveAllReduce ("ar") of |value| (a constant
// named |name|) with |reduction| does not build.
std::string AllReduceBuildError(const Tensor& value, const std::string& name, const std::string& reduction) {
  GraphBuilder b;
  Output a = b.Const(value, name);
  b.AddNode("CollectiveAllReduce", {a},
            {{"N", AttrValue(int64_t{1})}, {"T", AttrValue(value.dtype())}, {"reduction", AttrValue(reduction)}}, "ar");
  auto graph = b.Build();
  EXPECT_FALSE(graph.ok());
  return graph.ok() ? "" : std::string(graph.status().message());
}

TEST(Collectives, TheOpsRefuseBadAttrs) {
  EXPECT_TRUE(testing::Contains(AllReduceBuildError(Tensor::FromVector<int32_t>({1}), "a", "mean"),
                                "reduction 'mean' needs a floating-point type, not i32"));
  EXPECT_TRUE(testing::Contains(AllReduceBuildError(Tensor::FromVector<float>({1.0f}), "f", "avg"),
                                "reduction is 'avg'; it must be 'sum', 'mean', 'min' or 'max'"));
}

}  // namespace
}  // namespace weft
