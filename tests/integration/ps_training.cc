#include "tests/integration/ps_training.h"

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include "core/base/strings.h"
#include "core/checkpoint/bundle.h"
#include "tests/support/fashion_mnist.h"
#include "tests/support/loopback.h"
#include "tests/support/weft_cli.h"

namespace weft::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool DataPresent() { return FashionMnistPresent(); }

double FinalValue(const std::string& out, const std::string& name) {
  const std::size_t line = out.rfind("final: ");
  if (line == std::string::npos) return std::nan("");
  const std::size_t at = out.find(" " + name + "=", line);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(out.c_str() + at + name.size() + 2, nullptr);
}

std::vector<nlohmann::json> SyncStepRecords(const std::string& path) {
  std::vector<nlohmann::json> records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("aggregated") && !j.contains("loss") && !j.contains("final")) records.push_back(j);
  }
  return records;
}

namespace {

// The relative difference ||a - b|| / ||b|| of two float tensors (f32).
double RelativeDifference(const Tensor& a, const Tensor& b, double* max_abs) {
  double diff = 0, norm = 0;
  *max_abs = 0;
  for (int64_t i = 0; i < b.num_elements(); ++i) {
    const double x = a.data<float>()[i], y = b.data<float>()[i];
    diff += (x - y) * (x - y);
    norm += y * y;
    *max_abs = std::max(*max_abs, std::abs(x - y));
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Checkpoints of every step of a run of |kSteps| (the chief's).
std::string EveryStepCheckpoints(const fs::path& dir) {
  return StrCat("\n[checkpoint]\ndir = \"", dir.string(), "\"\nevery_steps = 1\nkeep = 100\n",
                "\n[runtime]\nintra_op_threads = 1\ninter_op_threads = 1\n");
}

// The largest relative difference of the f32 tensors of checkpoints
// |got|/ckpt-k and |want|/ckpt-k for k = 1..steps, and how many were
// compared.
struct Compared {
  double worst = 0;
  int count = 0;
};
Compared CompareCheckpoints(const fs::path& want_dir, const fs::path& got_dir, int steps) {
  Compared c;
  for (int step = 1; step <= steps; ++step) {
    auto want = checkpoint::BundleReader::Open((want_dir / StrCat("ckpt-", step)).string());
    auto got = checkpoint::BundleReader::Open((got_dir / StrCat("ckpt-", step)).string());
    EXPECT_TRUE(want.ok() && got.ok()) << step;
    if (!want.ok() || !got.ok()) return c;
    for (const checkpoint::TensorEntry& e : (*want)->entries()) {
      if (e.dtype != DType::kF32) continue;
      auto a = (*got)->Read(e.name);
      auto b = (*want)->Read(e.name);
      EXPECT_TRUE(a.ok() && b.ok()) << e.name << " at step " << step;
      if (!a.ok() || !b.ok()) continue;
      double max_abs = 0;
      const double rel = RelativeDifference(*a, *b, &max_abs);
      EXPECT_LE(rel, 1e-5) << e.name << " at step " << step << ": max |difference| " << max_abs;
      c.worst = std::max(c.worst, rel);
      ++c.count;
    }
    auto gs = (*got)->Read("train/global_step");
    EXPECT_TRUE(gs.ok() && gs->scalar<int64_t>() == step) << step;
  }
  return c;
}

// Every tensor of |a|/ckpt-|step| has the same bits in |b|/ckpt-|step|.
void ExpectSameBits(const fs::path& a, const fs::path& b, int step) {
  auto first = checkpoint::BundleReader::Open((a / StrCat("ckpt-", step)).string());
  auto second = checkpoint::BundleReader::Open((b / StrCat("ckpt-", step)).string());
  ASSERT_TRUE(first.ok() && second.ok());
  for (const checkpoint::TensorEntry& e : (*first)->entries()) {
    auto x = (*first)->Read(e.name);
    auto y = (*second)->Read(e.name);
    ASSERT_TRUE(x.ok() && y.ok()) << e.name;
    EXPECT_TRUE(x->BitwiseEquals(*y)) << e.name;
  }
}

}  // namespace

void PsTraining::TearDown() {
  workers_.clear();
  tasks_.clear();  // kills what still runs
}

std::string PsTraining::WriteConfig(const std::string& name, const Layout& layout, const std::string& training,
                                    int64_t connect_ms) {
  const std::filesystem::path path = dir_ / name;
  std::ofstream out(path);
  out << "[cluster]\ntransport = \"tcp\"\nconnect_timeout_ms = " << connect_ms << "\nrpc_timeout_ms = 60000\n"
      << layout.cluster_extra << "[cluster.jobs]\n";
  auto ports = [&](int n, const std::string& host) {
    std::vector<std::string> list;
    for (int i = 0; i < n; ++i) list.push_back(StrCat("\"", host, ":", FreePort(), "\""));
    return StrCat("[", StrJoin(list, ", "), "]");
  };
  if (layout.ps_job) out << "ps = " << ports(layout.ps, layout.ps_host) << "\n";
  out << "worker = " << ports(layout.workers, layout.worker_host) << "\n\n";
  out << "[model]\nloss = \"loss\"\nimages = \"images\"\nlabels = "
         "\"labels\"\naccuracy = \"accuracy\"\n"
      << "init = \"init\"\n\n"
      << "[data]\nformat = \"idx\"\n"
      << FashionMnistFiles() << "scale = 0.00392156862745098\nshuffle = true\n\n"
      << "[training]\n"
      << training << "\n"
      << "[optimizer]\nname = \"adam\"\nlearning_rate = 0.001\n"
      << layout.more;
  return path.string();
}

ProcessResult PsTraining::Weft(std::vector<std::string> args) { return RunWeft(std::move(args), Env()); }

ProcessResult PsTraining::TrainWorker(const std::string& config, int task) {
  return Weft(
      {"train", kModels + "fashion_mlp.wgt", "--config", config, "--job", "worker", "--task", std::to_string(task)});
}

std::string PsTraining::RefusalOfWorker(const std::string& config, int task) {
  ProcessResult r = TrainWorker(config, task);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  return r.err;
}

BackgroundProcess* PsTraining::ServePs(const std::string& config, int task, bool train) {
  std::vector<std::string> args = {"serve", "--config", config, "--job", "ps", "--task", std::to_string(task)};
  if (train) {
    args = {"train", kModels + "fashion_mlp.wgt", "--config", config, "--job", "ps", "--task", std::to_string(task)};
  }
  tasks_.push_back(StartListening(args, StrCat("ps task ", task)));
  return tasks_.back().get();
}

BackgroundProcess* PsTraining::StartWorker(const std::string& config, int task, const std::string& model,
                                           const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {WEFT_CLI, "train",  kModels + model, "--config",          config,
                                   "--job",  "worker", "--task",        std::to_string(task)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  workers_.push_back(std::make_unique<BackgroundProcess>(argv, Env()));
  return workers_.back().get();
}

std::string PsTraining::TrainOnCluster(const std::string& config, int num_ps, const std::vector<std::string>& extra) {
  std::vector<BackgroundProcess*> ps;
  for (int k = 0; k < num_ps; ++k) ps.push_back(ServePs(config, k, /*train=*/true));
  BackgroundProcess* chief = StartWorker(config, 0, "fashion_mlp.wgt", extra);
  EXPECT_TRUE(chief->Wait(300000)) << chief->Output();
  EXPECT_EQ(chief->exit_code(), 0) << chief->Output();
  for (BackgroundProcess* p : ps) {
    EXPECT_TRUE(p->Wait(30000)) << p->Output();
  }
  return chief->Output();
}

void PsTraining::ExpectTwoReplicasMatchOneProcess(
    const std::string& mode, const std::function<std::string(const std::string& name)>& more_training,
    const std::function<void(const std::string& name, const std::string& chief)>& check) {
  constexpr int kSteps = 12;
  const std::string common = StrCat("steps = ", kSteps, "\nseed = 1\nlog_every = 1\n");
  Layout ref_layout;
  ref_layout.more = EveryStepCheckpoints(dir_ / "ref");
  const std::string ref = WriteConfig("ref.toml", ref_layout, "batch_size = 128\n" + common);
  ProcessResult local = Weft({"train", kModels + "fashion_mlp.wgt", "--config", ref, "--local"});
  ASSERT_EQ(local.exit_code, 0) << local.out << local.err;

  for (const std::string& name : {mode + "_a", mode + "_b"}) {
    Layout layout;
    layout.ps_job = mode != "allreduce";
    layout.more = EveryStepCheckpoints(dir_ / name);
    const std::string config = WriteConfig(
        name + ".toml", layout, StrCat("batch_size = 64\nmode = \"", mode, "\"\n", more_training(name), common));
    if (layout.ps_job) ServePs(config, 0, /*train=*/true);
    BackgroundProcess* chief = StartWorker(config, 0);
    BackgroundProcess* other = StartWorker(config, 1);
    EXPECT_TRUE(chief->Wait(120000)) << chief->Output();
    EXPECT_TRUE(other->Wait(120000)) << other->Output();
    EXPECT_EQ(chief->exit_code(), 0) << chief->Output();
    EXPECT_EQ(other->exit_code(), 0) << other->Output();
    check(name, chief->Output());
    workers_.clear();
    tasks_.clear();
  }

  const Compared c = CompareCheckpoints(dir_ / "ref", dir_ / (mode + "_a"), kSteps);
  // fashion_mlp: 6 variables (3 layers' kernels and biases) and their 2
  // Adam slots each, every step.
  EXPECT_EQ(c.count, kSteps * 18);
  std::cout << (mode == "allreduce" ? "allreduce: " : "")
            << "largest relative difference from one process of batch 128: " << c.worst << "\n";
  // The same seed, the same bits.
  ExpectSameBits(dir_ / (mode + "_a"), dir_ / (mode + "_b"), kSteps);
}

std::string PsTraining::OutputAfterKilling(BackgroundProcess* victim, BackgroundProcess* watched) {
  const bool trains = watched->WaitForOutput("step 20/", 120000);
  EXPECT_TRUE(trains) << watched->Output();
  if (!trains) return "";
  victim->Kill(SIGKILL);
  const bool ended = watched->Wait(120000);
  EXPECT_TRUE(ended) << watched->Output();
  if (!ended) return "";
  const std::string out = watched->Output();
  EXPECT_EQ(watched->exit_code(), 3) << out;
  return out;
}

void PsTraining::ExpectAWorkerWithAnotherModelRefused(const std::string& config,
                                                      const std::vector<std::string>& progress) {
  BackgroundProcess* chief = StartWorker(config, 0);
  // Wait until the chief trains (the variables exist on the ps).
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  auto trains = [&] {
    const std::string out = chief->Output();
    for (const std::string& p : progress) {
      if (out.find(p) != std::string::npos) return true;
    }
    return false;
  };
  while (!trains()) {
    ASSERT_TRUE(chief->running()) << chief->Output();
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << chief->Output();
    std::this_thread::sleep_for(50ms);
  }
  BackgroundProcess* other = StartWorker(config, 1, "fashion_cnn.wgt");
  ASSERT_TRUE(other->Wait(120000)) << other->Output();
  const std::string out = other->Output();
  EXPECT_EQ(other->exit_code(), 1) << out;
  EXPECT_NE(out.find("dense1/kernel"), std::string::npos) << out;
  EXPECT_TRUE(chief->running()) << chief->Output();
}

}  // namespace weft::testing
