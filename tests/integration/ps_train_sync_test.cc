// Synchronous training on a cluster of real processes (training.mode =
// "sync": gradients averaged on the parameter servers, backup workers,
// stragglers, `weft cluster status`) and allreduce training (training.mode
// = "allreduce": gradients averaged by the workers over Gloo), each against
// one process or with its message for what the workers disagree on. The
// fixture is in ps_training.h.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/base/json.h"
#include "core/base/strings.h"
#include "tests/integration/ps_training.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/loopback.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_dir.h"

namespace weft::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Issue 18's equivalence: two workers of batch 64 trained synchronously
// give, step by step, the parameters (and Adam's slots) of one process of
// batch 128: the same examples (each worker takes its half of the global
// batch), the same initial values (the chief initialises with the seeded
// graph), and the mean of two 64-example gradients is the 128-example one
// up to the order of the sums. And the same seed gives the same bits.
TEST_F(PsTraining, SyncReplicasOfBatch64MatchOneProcessOfBatch128StepByStep) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  constexpr int kSteps = 12;
  auto metrics = [&](const std::string& name) { return (dir_ / (name + ".jsonl")).string(); };
  ExpectTwoReplicasMatchOneProcess(
      "sync", [&](const std::string& name) { return StrCat("metrics = \"", metrics(name), "\"\n"); },
      [&](const std::string& name, const std::string& chief) {
        EXPECT_NE(chief.find("synchronous: each step averages the first 2 of the 2 workers' gradients (0 "
                             "backup workers); a global batch is 2 x 64 examples"),
                  std::string::npos)
            << chief;
        EXPECT_NE(chief.find(StrCat("final: step=", kSteps)), std::string::npos) << chief;
        EXPECT_NE(chief.find("aggregated=24 stale_dropped=0"), std::string::npos) << chief;
        // One record per global step: both gradients averaged, none dropped.
        const std::vector<nlohmann::json> records = SyncStepRecords(metrics(name));
        EXPECT_EQ(records.size(), static_cast<std::size_t>(kSteps));
        for (std::size_t k = 0; k < records.size(); ++k) {
          EXPECT_EQ(records[k]["step"], k + 1);
          EXPECT_EQ(records[k]["aggregated"], 2) << records[k].dump();
          EXPECT_EQ(records[k]["stale_dropped"], 0) << records[k].dump();
        }
      });
}

// Issue 18's acceptance run: configs/cluster_sync.toml (1 ps + 3 workers,
// N = 2, b = 1), started by the local launcher, on free ports and with its
// files in the test's folder. The third gradient of every step is dropped
// as stale, and the model still reaches the accuracy.
TEST_F(PsTraining, SyncOnePsAndThreeWorkersWithABackupReachTheAccuracyDroppingStaleGradients) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  std::string config = ReadFile(WEFT_SOURCE_DIR "/configs/cluster_sync.toml");
  for (const char* port : {"7090", "7091", "7092", "7093"}) {
    const std::size_t at = config.find(StrCat("127.0.0.1:", port));
    ASSERT_NE(at, std::string::npos) << port;
    config.replace(at + 10, 4, std::to_string(FreePort()));
  }
  const std::string metrics = (dir_ / "metrics.jsonl").string();
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"../build/train/cluster_sync/metrics.jsonl", metrics},
        {"../build/train/cluster_sync", (dir_ / "ckpt").string()}}) {
    const std::size_t at = config.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    config.replace(at, from.size(), to);
  }
  const fs::path path = dir_ / "cluster_sync.toml";
  std::ofstream(path) << config;
  ProcessResult r = testing::Run({WEFT_SOURCE_DIR "/tools/cluster.sh", "train", path.string(),
                                  kModels + "fashion_mlp.wgt", "--logs", (dir_ / "logs").string(), "--timeout", "900"},
                                 {{"WEFT", WEFT_CLI}, {"WEFT_PLUGIN_PATH", ""}});
  const std::string chief = ReadFile(dir_ / "logs" / "worker-0.log");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err << chief;
  const double accuracy = FinalValue(chief, "test_accuracy");
  EXPECT_GE(accuracy, 0.87) << chief;
  const double dropped = FinalValue(chief, "stale_dropped");
  EXPECT_GT(dropped, 0) << chief;
  EXPECT_EQ(FinalValue(chief, "aggregated"), 2 * 1560) << chief;
  const std::vector<nlohmann::json> records = SyncStepRecords(metrics);
  EXPECT_EQ(records.size(), 1560u);
  int64_t dropped_in_records = 0;
  for (const nlohmann::json& j : records) {
    EXPECT_EQ(j["aggregated"], 2) << j.dump();
    dropped_in_records += j["stale_dropped"].get<int64_t>();
  }
  EXPECT_EQ(static_cast<double>(dropped_in_records), dropped);
  std::cout << "sync, 1 ps + 3 workers (N = 2, b = 1): test accuracy " << accuracy << ", " << dropped
            << " gradients dropped as stale in " << records.size() << " steps\n";
}

// `weft cluster status` while a synchronous run trains: each worker's
// step and step times, the chief's global step and the gradients it kept
// and dropped, the ps task's RunGraph times.
TEST_F(PsTraining, ClusterStatusShowsEachTasksStepWhileItTrains) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Layout layout;
  layout.cluster_extra = "heartbeat_interval_ms = 200\n";
  const std::string config =
      WriteConfig("status.toml", layout, "batch_size = 64\nsteps = 400\nmode = \"sync\"\nlog_every = 50\n");
  ServePs(config, 0, /*train=*/true);
  BackgroundProcess* chief = StartWorker(config, 0);
  BackgroundProcess* other = StartWorker(config, 1);
  Json tasks;
  auto find = [&](const std::string& name) -> const Json& {
    for (const Json& t : tasks) {
      if (t["task"] == name) return t;
    }
    static const Json none;
    return none;
  };
  // Bounded: until both workers are past step 5, or 120 s, or the run ends.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  bool seen = false;
  while (!seen && std::chrono::steady_clock::now() < deadline && chief->running()) {
    ProcessResult r = Weft({"cluster", "status", "--config", config, "--json"});
    if (r.exit_code == 0) {
      tasks = Json::parse(r.out);
      const Json& c = find("/job:worker/task:0");
      const Json& w = find("/job:worker/task:1");
      seen = c.is_object() && w.is_object() && c["step"].get<int64_t>() > 5 && w["step"].get<int64_t>() > 5;
    }
    if (!seen) std::this_thread::sleep_for(200ms);
  }
  ASSERT_TRUE(seen) << tasks.dump(2) << chief->Output();
  const Json& c = find("/job:worker/task:0");
  EXPECT_EQ(c["role"], "worker 0 of 2, the chief, sync") << c.dump();
  EXPECT_EQ(c["state"], "training");
  EXPECT_EQ(c["total_steps"], 400);
  EXPECT_EQ(c["global_step"], c["step"]);
  EXPECT_EQ(c["timed"], "training steps");
  EXPECT_GT(c["step_ms_p50"].get<double>(), 0.0);
  EXPECT_GE(c["accepted_gradients"].get<int64_t>(), 2 * 5);
  EXPECT_GE(c["dropped_gradients"].get<int64_t>(), 0);
  const Json& w = find("/job:worker/task:1");
  EXPECT_EQ(w["role"], "worker 1 of 2, sync");
  EXPECT_GE(w["accepted_gradients"].get<int64_t>() + w["dropped_gradients"].get<int64_t>(), 5);
  const Json& ps = find("/job:ps/task:0");
  EXPECT_EQ(ps["role"], "ps of weft train");
  EXPECT_EQ(ps["timed"], "RunGraph");
  EXPECT_GT(ps["steps_timed"].get<int64_t>(), 5);
  ProcessResult table = Weft({"cluster", "status", "--config", config});
  EXPECT_NE(table.out.find("3 tasks, 3 answer; global step "), std::string::npos) << table.out << table.err;
  EXPECT_NE(table.out.find("/400"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("(training steps)"), std::string::npos) << table.out;
  ASSERT_TRUE(chief->Wait(300000)) << chief->Output();
  EXPECT_EQ(chief->exit_code(), 0) << chief->Output();
  ASSERT_TRUE(other->Wait(60000)) << other->Output();
}

// `weft train --trace` on a cluster: the chief's traced steps hold every

// Two workers given configs that differ in replicas_to_aggregate (each
// valid on its own): the worker's first step names both counts, and the
// chief, which waits for that worker's gradients (no backup), names it.
TEST_F(PsTraining, SyncWorkersThatDisagreeOnReplicasToAggregateAreRefusedNamingBoth) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Layout layout;
  layout.cluster_extra = "rpc_timeout_ms = 8000\n";
  std::string chief_config = WriteConfig("n2.toml", layout,
                                         "batch_size = 64\nsteps = 50\nmode = \"sync\"\n"
                                         "replicas_to_aggregate = 2\nbackup_workers = 0\n");
  const std::string text = ReadFile(chief_config);
  std::string other_text = text;
  const std::string from = "replicas_to_aggregate = 2\nbackup_workers = 0";
  other_text.replace(other_text.find(from), from.size(), "replicas_to_aggregate = 1\nbackup_workers = 1");
  // The fixture's rpc_timeout_ms comes first; this one later would be a
  // duplicate key, so replace it.
  other_text.replace(other_text.find("rpc_timeout_ms = 60000\n"), 23, "");
  std::string chief_text = text;
  chief_text.replace(chief_text.find("rpc_timeout_ms = 60000\n"), 23, "");
  std::ofstream(chief_config) << chief_text;
  const std::string other_config = (dir_ / "n1.toml").string();
  std::ofstream(other_config) << other_text;

  ServePs(chief_config, 0, /*train=*/true);
  BackgroundProcess* chief = StartWorker(chief_config, 0);
  BackgroundProcess* other = StartWorker(other_config, 1);
  ASSERT_TRUE(other->Wait(120000)) << other->Output();
  EXPECT_EQ(other->exit_code(), 1) << other->Output();
  EXPECT_NE(other->Output().find("node 'dense1/bias/sync/accumulator' (GradientAccumulator) on /device:CPU:0: "
                                 "gradient accumulator 'dense1/bias/sync/accumulator' exists with "
                                 "replicas_to_aggregate 2, f32[512]; this node asks for replicas_to_aggregate 1, "
                                 "f32[512] (do the workers' models and training.replicas_to_aggregate agree?)"),
            std::string::npos)
      << other->Output();
  ASSERT_TRUE(chief->Wait(120000)) << chief->Output();
  EXPECT_EQ(chief->exit_code(), 1) << chief->Output();
  EXPECT_NE(chief->Output().find("waited 3 s at step 0 for 2 gradients (training.replicas_to_aggregate); 1 "
                                 "arrived, from /job:worker/task:0; none from /job:worker/task:1 (with "
                                 "backup_workers = 0 every worker is needed)"),
            std::string::npos)
      << chief->Output();
}

// A sync worker whose model is not the chief's is refused, naming the
// variable; with a backup worker the chief trains on.
TEST_F(PsTraining, SyncWorkerWithAnotherModelIsRefusedNamingTheVariable) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string config = WriteConfig(
      "sync_disagree.toml", {}, "batch_size = 64\nsteps = 3000\nlog_every = 50\nmode = \"sync\"\nbackup_workers = 1\n");
  ServePs(config, 0, /*train=*/true);
  ExpectAWorkerWithAnotherModelRefused(config, {"step 50/"});
}

// What backup workers buy: one worker slowed 5x (the test-only knob,
// WEFT_TEST_SLOW_TASK / WEFT_TEST_SLOW_FACTOR). Without a backup (N = 2 of
// 2) every step waits for it and nothing is dropped; with one (N = 2 of 3)
// its gradients come too late and are dropped, and the steps go at the
// pace of the others. The step times are printed (tools/bench's
// sync_straggler measures them); only the counts are asserted.
TEST_F(PsTraining, SyncBackupWorkersDropAStragglersGradients) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  constexpr int kSteps = 40;
  auto run = [&](const std::string& name, int workers, int backups, int slow) {
    Layout layout;
    layout.workers = workers;
    const std::string config =
        WriteConfig(name + ".toml", layout,
                    StrCat("batch_size = 64\nsteps = ", kSteps,
                           "\nlog_every = 10\nmode = \"sync\"\nbackup_workers = ", backups, "\n"));
    std::map<std::string, std::string> env = Env();
    env["WEFT_TEST_SLOW_TASK"] = StrCat("/job:worker/task:", slow);
    env["WEFT_TEST_SLOW_FACTOR"] = "5";
    ServePs(config, 0, /*train=*/true);
    std::vector<BackgroundProcess*> ws;
    for (int w = 0; w < workers; ++w) {
      workers_.push_back(std::make_unique<BackgroundProcess>(
          std::vector<std::string>{WEFT_CLI, "train", kModels + "fashion_mlp.wgt", "--config", config, "--job",
                                   "worker", "--task", std::to_string(w)},
          env));
      ws.push_back(workers_.back().get());
    }
    std::vector<std::string> outs;
    for (BackgroundProcess* w : ws) {
      EXPECT_TRUE(w->Wait(300000)) << w->Output();
      EXPECT_EQ(w->exit_code(), 0) << w->Output();
      outs.push_back(w->Output());
    }
    EXPECT_NE(outs[static_cast<std::size_t>(slow)].find("this worker's steps take 5 times as long"), std::string::npos)
        << outs[static_cast<std::size_t>(slow)];
    workers_.clear();
    tasks_.clear();
    return outs;
  };
  auto seconds = [](const std::string& out) {
    const std::size_t at = out.find(" synchronous steps in ");
    return at == std::string::npos ? std::nan("") : std::strtod(out.c_str() + at + 22, nullptr);
  };
  const std::vector<std::string> a = run("no_backup", 2, 0, 1);
  const std::vector<std::string> b = run("one_backup", 3, 1, 2);
  // No backup: both gradients of every step are needed, none dropped.
  EXPECT_EQ(FinalValue(a[0], "stale_dropped"), 0) << a[0];
  EXPECT_EQ(FinalValue(a[1], "late_gradients"), 0) << a[1];
  // One backup: the straggler's gradients are (nearly) all dropped. It
  // computes a step about every 5 of the others' (it joins at the latest
  // step each time), so its count is what the chief drops.
  const std::size_t at = b[2].find("computed ");
  ASSERT_NE(at, std::string::npos) << b[2];
  const double computed = std::strtod(b[2].c_str() + at + 9, nullptr);
  EXPECT_GE(computed, 1) << b[2];
  EXPECT_GE(FinalValue(b[2], "late_gradients"), 0.5 * computed) << b[2];
  EXPECT_GE(FinalValue(b[0], "stale_dropped"), 0.5 * computed) << b[0];
  std::cout << "a worker slowed 5x, " << kSteps << " steps: without a backup " << seconds(a[0])
            << " s, with one backup worker " << seconds(b[0]) << " s (the straggler computed " << computed << " steps, "
            << FinalValue(b[2], "late_gradients") << " of its gradients dropped)\n";
}

// --- Allreduce (training.mode = "allreduce") ---------------------------------

// Issue 18's equivalence in allreduce mode: two workers of batch 64 whose
// gradients are averaged by Gloo give, step by step, the parameters (and
// Adam's slots) of one process of batch 128; the same seed gives the same
// bits.
TEST_F(PsTraining, AllreduceReplicasOfBatch64MatchOneProcessOfBatch128StepByStep) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  constexpr int kSteps = 12;
  ExpectTwoReplicasMatchOneProcess(
      "allreduce", [](const std::string&) { return std::string(); },
      [&](const std::string&, const std::string& chief) {
        EXPECT_NE(chief.find("worker 0 of 2 (the chief): gradients averaged by allreduce over gloo in 2 buckets"),
                  std::string::npos)
            << chief;
        EXPECT_NE(chief.find(StrCat("final: step=", kSteps)), std::string::npos) << chief;
        // fashion_mlp's 2.6 MiB of gradients: the 1 MiB first bucket takes
        // the last layers, the second the rest.
        EXPECT_NE(chief.find(" per step, over gloo among 2 workers"), std::string::npos) << chief;
      });
}

// Two workers given configs that differ only in bucket_mb: both stop
// before training, each naming both values.
TEST_F(PsTraining, AllreduceWorkersThatDisagreeOnBucketSizesAreRefusedNamingBoth) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string chief_config =
      WriteConfig("b25.toml", WorkersOnly(), "batch_size = 64\nsteps = 20\nmode = \"allreduce\"\nbucket_mb = 25\n");
  std::string other_text = ReadFile(chief_config);
  other_text.replace(other_text.find("bucket_mb = 25"), 14, "bucket_mb = 4");
  const std::string other_config = (dir_ / "b4.toml").string();
  std::ofstream(other_config) << other_text;
  BackgroundProcess* chief = StartWorker(chief_config, 0);
  BackgroundProcess* other = StartWorker(other_config, 1);
  ASSERT_TRUE(chief->Wait(120000)) << chief->Output();
  ASSERT_TRUE(other->Wait(120000)) << other->Output();
  const std::string want =
      "the workers disagree: training.bucket_mb is 25 on the chief (/job:worker/task:0) but 4 on "
      "/job:worker/task:1; every worker must train the same model with the same settings";
  EXPECT_EQ(chief->exit_code(), 1) << chief->Output();
  EXPECT_NE(chief->Output().find(want), std::string::npos) << chief->Output();
  EXPECT_EQ(other->exit_code(), 1) << other->Output();
  EXPECT_NE(other->Output().find(want), std::string::npos) << other->Output();
}

// A worker that joins with another model is refused, naming the variable.
TEST_F(PsTraining, AllreduceWorkerWithAnotherModelIsRefusedNamingTheVariable) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const std::string config =
      WriteConfig("other_model.toml", WorkersOnly(), "batch_size = 64\nsteps = 20\nmode = \"allreduce\"\n");
  BackgroundProcess* chief = StartWorker(config, 0);
  BackgroundProcess* other = StartWorker(config, 1, "fashion_cnn.wgt");
  ASSERT_TRUE(chief->Wait(120000)) << chief->Output();
  ASSERT_TRUE(other->Wait(120000)) << other->Output();
  for (BackgroundProcess* p : {chief, other}) {
    EXPECT_EQ(p->exit_code(), 1) << p->Output();
    EXPECT_TRUE(p->Output().find("the workers train different models: variable \"") != std::string::npos ||
                p->Output().find("the workers disagree: variable \"") != std::string::npos)
        << p->Output();
    EXPECT_NE(p->Output().find("/job:worker/task:1"), std::string::npos) << p->Output();
  }
}

// A worker killed mid-run: the others fail at once (Gloo sees its links
// close), each naming it, well before the collective timeout.
TEST_F(PsTraining, AllreducePeerKilledMidRunFailsEveryOtherWorkerNamingIt) {
  if (!DataPresent()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  Layout layout = WorkersOnly();
  layout.workers = 3;
  layout.cluster_extra = "collective_timeout_ms = 20000\n";
  const std::string config =
      WriteConfig("kill_peer.toml", layout, "batch_size = 32\nsteps = 100000\nlog_every = 10\nmode = \"allreduce\"\n");
  BackgroundProcess* chief = StartWorker(config, 0);
  BackgroundProcess* one = StartWorker(config, 1);
  BackgroundProcess* two = StartWorker(config, 2);
  ASSERT_TRUE(chief->WaitForOutput("step 10/", 120000)) << chief->Output();
  const auto killed = std::chrono::steady_clock::now();
  two->Kill(SIGKILL);
  for (BackgroundProcess* p : {chief, one}) {
    ASSERT_TRUE(p->Wait(120000)) << p->Output();
    EXPECT_EQ(p->exit_code(), 1) << p->Output();
    EXPECT_NE(p->Output().find("/job:worker/task:2"), std::string::npos) << p->Output();
    EXPECT_NE(p->Output().find("gloo said: "), std::string::npos) << p->Output();
  }
  std::cout << "the others stopped " << std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count()
            << " s after the kill (collective timeout 20 s)\n";
}

}  // namespace
}  // namespace weft::testing
