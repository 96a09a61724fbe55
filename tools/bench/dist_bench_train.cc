// Training through a cluster of `weft train` processes (weft_dist_bench):
//
//   ps_train_mlp     the sample MLP (configs/models/fashion_mlp.wgt, 2.7 MB
//                    of parameters) trained with Adam, batch 128, by
//                    `weft train` processes: milliseconds per step through
//                    1 ps + 1 worker (the parameters read from the ps and
//                    the gradients sent back every step) vs the same steps
//                    in one process; and examples per second of 1 ps + 2
//                    workers (asynchronous) vs one process
//   sparse_step      the sparse model (configs/models/debian_bow.wgt: a
//                    1,048,576 x 64 embedding split over 2 ps tasks, Debian
//                    package descriptions, batch 64, Adagrad) through 2 ps +
//                    1 worker: the bytes the worker moves per step vs the
//                    bytes of the distinct rows a batch reads, both ways
//                    (the mean over random batches of the data); ms per
//                    step vs one process; and the sparse bytes vs the same
//                    steps with sparse_updates = false
//   sync_train_mlp   the sample MLP trained synchronously (training.mode =
//                    "sync") by 2 worker processes of batch 64 and 1 ps,
//                    Adam: examples per second (of the averaged gradients)
//                    vs PyTorch DistributedDataParallel over gloo with 2
//                    processes on the same model, batch and data
//                    (tools/bench/torch_ddp_peer.py); one intra-op thread
//                    per process on both sides
//   sync_straggler   milliseconds per synchronous step of the sample MLP
//                    with one worker slowed 5x (WEFT_TEST_SLOW_FACTOR):
//                    without a backup (N = 2 of 2 workers) and with one
//                    (N = 2 of 3), each against the same layout with no
//                    straggler
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/base/strings.h"
#include "core/tensor/npy.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/dist_bench.h"
#include "tools/bench/dist_bench_util.h"

namespace weft::bench {

// --- ps_train_mlp ---------------------------------------------------------------------------

namespace {

// Seconds of training in "trained N steps in X s".
double TrainedSeconds(const std::string& out) {
  const std::size_t at = out.find("trained ");
  const std::size_t in = out.find(" steps in ", at);
  if (at == std::string::npos || in == std::string::npos) {
    std::fprintf(stderr, "no 'trained N steps in X s' line in:\n%s\n", out.c_str());
    std::exit(1);
  }
  return std::atof(out.c_str() + in + 10);
}

// A training config of the sample MLP on Fashion-MNIST: a [cluster] of
// |num_ps| ps tasks and |workers| workers on free ports (none when
// |workers| is 0) with |cluster_extra| keys, and |training| as the
// [training] section's keys.
std::string WriteTrainingConfig(const std::string& path, int num_ps, int workers, const std::string& cluster_extra,
                                const std::string& training) {
  std::ofstream out(path);
  auto ports = [&](int n) {
    std::string list;
    for (int i = 0; i < n; ++i) list += StrCat(i ? ", " : "", "\"127.0.0.1:", FreePort(), "\"");
    return StrCat("[", list, "]");
  };
  if (workers > 0) {
    out << "[cluster]\ntransport = \"tcp\"\nconnect_timeout_ms = 30000\n" << cluster_extra << "[cluster.jobs]\n";
    if (num_ps > 0) out << "ps = " << ports(num_ps) << "\n";
    out << "worker = " << ports(workers) << "\n";
  }
  const std::string fashion = "/usr/share/datasets/fashion-mnist/";
  out << "[model]\nloss = \"loss\"\nimages = \"images\"\nlabels = \"labels\"\naccuracy = \"accuracy\"\ninit = "
         "\"init\"\n"
      << "[data]\nformat = \"idx\"\ntrain_images = \"" << fashion << "train-images-idx3-ubyte.gz\"\ntrain_labels = \""
      << fashion << "train-labels-idx1-ubyte.gz\"\nscale = 0.00392156862745098\nshuffle = true\n"
      << "[training]\n"
      << training << "[optimizer]\nname = \"adam\"\nlearning_rate = 0.001\n";
  return path;
}

std::string TrainingConfig(const std::string& path, int workers, int steps) {
  return WriteTrainingConfig(path, 1, workers, "", StrCat("batch_size = 128\nlog_every = 1000\nsteps = ", steps, "\n"));
}

// One cluster run of |workers| workers (and one ps, also `weft train`);
// the seconds of training of each worker.
std::vector<double> ClusterTrain(const std::string& config, const std::string& model, int workers) {
  std::vector<std::future<std::string>> runs;
  runs.push_back(std::async(std::launch::async, [&] {
    return RunWeft({"train", model, "--config", config, "--job", "ps", "--task", "0"});
  }));
  for (int w = 0; w < workers; ++w) {
    runs.push_back(std::async(std::launch::async, [&, w] {
      return RunWeft({"train", model, "--config", config, "--job", "worker", "--task", std::to_string(w)});
    }));
  }
  std::vector<double> seconds;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string out = runs[i].get();
    if (i > 0) seconds.push_back(TrainedSeconds(out));
  }
  return seconds;
}

}  // namespace

void PsTrainMlp() {
  const std::string model =
      (std::filesystem::path(g_weft_cli).parent_path() / ".." / ".." / "configs" / "models" / "fashion_mlp.wgt")
          .lexically_normal()
          .string();
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_ps_train_bench_", getpid());
  std::filesystem::create_directories(dir);
  constexpr int kSteps = 300;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  std::vector<double> local_ms, one_ms, local_eps, two_eps;
  for (int r = 0; r < repeats; ++r) {
    const double local =
        TrainedSeconds(RunWeft({"train", model, "--config", TrainingConfig(dir + "/local.toml", 0, kSteps)}));
    local_ms.push_back(1000 * local / kSteps);
    local_eps.push_back(kSteps * 128 / local);
    const std::vector<double> one = ClusterTrain(TrainingConfig(dir + "/one.toml", 1, kSteps), model, 1);
    one_ms.push_back(1000 * one[0] / kSteps);
    // Two workers run concurrently: the cluster's examples per second is
    // all the examples over the longer of the two.
    const std::vector<double> two = ClusterTrain(TrainingConfig(dir + "/two.toml", 2, kSteps), model, 2);
    two_eps.push_back(2.0 * kSteps * 128 / std::max(two[0], two[1]));
  }
  std::filesystem::remove_all(dir);
  Bench("ps_train_mlp_1ps_1worker", Median(one_ms), Median(local_ms), "ms/step", false);
  Bench("ps_train_mlp_1ps_2workers", Median(two_eps), Median(local_eps), "examples/s", true);
}

// --- sync_train_mlp, sync_straggler --------------------------------------------------------

namespace {

// The value of "name=" in the final line of |out|.
double FinalField(const std::string& out, const std::string& name) {
  const std::size_t line = out.rfind("final: ");
  const std::size_t at = line == std::string::npos ? line : out.find(" " + name + "=", line);
  if (at == std::string::npos) Die(StrCat("no ", name, "= in the final line of:\n", out));
  return std::atof(out.c_str() + at + name.size() + 2);
}

std::string FashionMlp() {
  return (std::filesystem::path(g_weft_cli).parent_path() / ".." / ".." / "configs" / "models" / "fashion_mlp.wgt")
      .lexically_normal()
      .string();
}

std::string SyncConfig(const std::string& path, int workers, int backups, int steps) {
  return WriteTrainingConfig(
      path, 1, workers, "",
      StrCat("mode = \"sync\"\nbackup_workers = ", backups,
             "\nbatch_size = 64\nseed = 1\nlog_every = 1000\nsteps = ", steps, "\n[runtime]\nintra_op_threads = 1\n"));
}

// One synchronous run (1 ps + |workers| workers, all `weft train`, with
// |env| set for the workers); the chief's output.
std::string SyncTrain(const std::string& config, int workers, const std::string& slow_task = "") {
  std::vector<std::future<std::string>> runs;
  const std::string model = FashionMlp();
  runs.push_back(std::async(std::launch::async, [&] {
    return RunWeft({"train", model, "--config", config, "--job", "ps", "--task", "0"});
  }));
  if (!slow_task.empty()) {
    setenv("WEFT_TEST_SLOW_TASK", slow_task.c_str(), 1);
    setenv("WEFT_TEST_SLOW_FACTOR", "5", 1);
  }
  for (int w = 0; w < workers; ++w) {
    runs.push_back(std::async(std::launch::async, [&, w] {
      return RunWeft({"train", model, "--config", config, "--job", "worker", "--task", std::to_string(w)});
    }));
  }
  std::vector<std::string> outs;
  for (auto& r : runs) outs.push_back(r.get());
  unsetenv("WEFT_TEST_SLOW_TASK");
  unsetenv("WEFT_TEST_SLOW_FACTOR");
  return outs[1];
}

// Milliseconds per step of the chief's "trained N synchronous steps in X s".
double SyncMsPerStep(const std::string& out, int steps) { return 1000 * TrainedSeconds(out) / steps; }

}  // namespace

void SyncStraggler() {
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_sync_straggler_bench_", getpid());
  std::filesystem::create_directories(dir);
  constexpr int kSteps = 100;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  std::vector<double> b0, b0_plain, b1, b1_plain;
  for (int r = 0; r < repeats; ++r) {
    b0_plain.push_back(SyncMsPerStep(SyncTrain(SyncConfig(dir + "/a.toml", 2, 0, kSteps), 2), kSteps));
    b0.push_back(SyncMsPerStep(SyncTrain(SyncConfig(dir + "/b.toml", 2, 0, kSteps), 2, "/job:worker/task:1"), kSteps));
    b1_plain.push_back(SyncMsPerStep(SyncTrain(SyncConfig(dir + "/c.toml", 3, 1, kSteps), 3), kSteps));
    b1.push_back(SyncMsPerStep(SyncTrain(SyncConfig(dir + "/d.toml", 3, 1, kSteps), 3, "/job:worker/task:2"), kSteps));
  }
  std::filesystem::remove_all(dir);
  Bench("sync_straggler_5x_b0", Median(b0), Median(b0_plain), "ms/step", false);
  Bench("sync_straggler_5x_b1", Median(b1), Median(b1_plain), "ms/step", false);
}

namespace {

// Allreduce mode (no ps): |workers| `weft train` processes; the chief's
// output.
std::string AllreduceConfig(const std::string& path, int workers, int steps) {
  return WriteTrainingConfig(path, 0, workers, "collectives = \"gloo\"\n",
                             StrCat("mode = \"allreduce\"\nbatch_size = 64\nseed = 1\nlog_every = 1000\nsteps = ",
                                    steps, "\n[runtime]\nintra_op_threads = 1\n"));
}

std::string AllreduceTrain(const std::string& config, int workers) {
  std::vector<std::future<std::string>> runs;
  const std::string model = FashionMlp();
  for (int w = 0; w < workers; ++w) {
    runs.push_back(std::async(std::launch::async, [&, w] {
      return RunWeft({"train", model, "--config", config, "--job", "worker", "--task", std::to_string(w)});
    }));
  }
  std::vector<std::string> outs;
  for (auto& r : runs) outs.push_back(r.get());
  return outs[0];
}

}  // namespace

void SyncTrainMlp() {
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_sync_train_bench_", getpid());
  std::filesystem::create_directories(dir);
  constexpr int kSteps = 300;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  std::vector<double> ps, allreduce, torch;
  for (int r = 0; r < repeats; ++r) {
    const std::string out = SyncTrain(SyncConfig(dir + "/sync.toml", 2, 0, kSteps), 2);
    ps.push_back(FinalField(out, "examples_per_sec"));
    // A worker's examples/s is its own batch's; the global batch is 2 x 64.
    const std::string ar = AllreduceTrain(AllreduceConfig(dir + "/allreduce.toml", 2, kSteps), 2);
    allreduce.push_back(2.0 * 64 * kSteps / TrainedSeconds(ar));
    const std::string peer = RunCommand(
        {"/usr/bin/python3", SourcePath("tools/bench/torch_ddp_peer.py"), "2", "64", std::to_string(kSteps), "1"});
    const std::size_t at = peer.find("examples_per_sec=");
    if (at == std::string::npos) Die("torch_ddp_peer.py printed no examples_per_sec=: " + peer);
    torch.push_back(std::atof(peer.c_str() + at + 17));
  }
  std::filesystem::remove_all(dir);
  Bench("sync_train_mlp_allreduce_2workers", Median(allreduce), Median(torch), "examples/s", true);
  Bench("sync_train_mlp_ps_2workers", Median(ps), Median(torch), "examples/s", true);
}

// --- sparse_step -----------------------------------------------------------------------

namespace {

std::string BowConfig(const std::string& path, const std::string& data, int num_ps, int steps, bool sparse) {
  std::ofstream out(path);
  if (num_ps > 0) {
    out << "[cluster]\ntransport = \"tcp\"\nconnect_timeout_ms = 30000\nrpc_timeout_ms = 120000\npartition_mb = 64\n"
        << "[cluster.jobs]\nps = [";
    for (int k = 0; k < num_ps; ++k) out << (k ? ", " : "") << "\"127.0.0.1:" << FreePort() << "\"";
    out << "]\nworker = [\"127.0.0.1:" << FreePort() << "\"]\n";
  }
  out << "[model]\nloss = \"loss\"\nimages = \"images\"\nlabels = \"labels\"\naccuracy = \"accuracy\"\ninit = "
         "\"init\"\n"
      << "[data]\nformat = \"npy\"\ntrain_images = \"" << data << "/train_ids.npy\"\ntrain_labels = \"" << data
      << "/train_labels.npy\"\nshuffle = true\n"
      << "[training]\nbatch_size = 64\nseed = 1\nlog_every = 1000\nsteps = " << steps
      << "\nsparse_updates = " << (sparse ? "true" : "false") << "\n"
      << "[optimizer]\nname = \"adagrad\"\nlearning_rate = 0.3\n";
  return path;
}

// The mean number of distinct ids (rows of the embedding) in a batch of
// 64 of |ids| (f32 [n, 64]), over random batches as the shuffled input
// makes them.
double MeanDistinctRows(const std::string& ids_path) {
  auto ids = ReadNpy(ids_path);
  if (!ids.ok()) Die(ids.status().ToString());
  const int64_t n = ids->dim(0), width = ids->dim(1);
  const float* p = ids->data<float>();
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  std::mt19937_64 rng(1);
  double total = 0;
  int batches = 0;
  for (int round = 0; round < 20; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t b = 0; b + 64 <= n; b += 64, ++batches) {
      std::set<float> distinct;
      for (int64_t e = b; e < b + 64; ++e) {
        const float* row = p + order[static_cast<std::size_t>(e)] * width;
        distinct.insert(row, row + width);
      }
      total += static_cast<double>(distinct.size());
    }
  }
  return total / batches;
}

// One run of |num_ps| ps tasks and one worker; the worker's output.
std::string BowCluster(const std::string& config, const std::string& model, int num_ps) {
  std::vector<std::future<std::string>> ps;
  for (int k = 0; k < num_ps; ++k) {
    ps.push_back(std::async(std::launch::async, [&, k] {
      return RunWeft({"train", model, "--config", config, "--job", "ps", "--task", std::to_string(k)});
    }));
  }
  const std::string out = RunWeft({"train", model, "--config", config, "--job", "worker", "--task", "0"});
  for (auto& p : ps) p.get();
  return out;
}

}  // namespace

void SparseStep() {
  // Absolute: the config's relative paths would be taken from its own folder.
  const std::filesystem::path repo =
      std::filesystem::absolute(std::filesystem::path(g_weft_cli).parent_path() / ".." / "..").lexically_normal();
  const std::string model = (repo / "configs" / "models" / "debian_bow.wgt").string();
  const std::string data = (repo / "build" / "data" / "debian_sections").string();
  if (!std::filesystem::exists(data + "/train_ids.npy")) {
    const std::string make =
        StrCat("/usr/bin/python3 ", (repo / "tools" / "data" / "debian_sections.py").string(), " -o ", data, " >&2");
    if (std::system(make.c_str()) != 0) Die("cannot make the data: " + make);
  }
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_sparse_step_bench_", getpid());
  std::filesystem::create_directories(dir);
  const double rows = MeanDistinctRows(data + "/train_ids.npy");
  // The rows a step reads, to the worker, and their gradients, back.
  const double rows_bytes = 2 * rows * 64 * 4;
  constexpr int kSteps = 300, kDenseSteps = 10;
  const int repeats = g_repeats > 0 ? g_repeats : 3;
  std::vector<double> wire, cluster_ms, local_ms, dense_wire;
  for (int r = 0; r < repeats; ++r) {
    const std::string out = BowCluster(BowConfig(dir + "/two.toml", data, 2, kSteps, true), model, 2);
    wire.push_back(FinalField(out, "wire_bytes_per_step"));
    cluster_ms.push_back(1000 * TrainedSeconds(out) / kSteps);
    const std::string local =
        RunWeft({"train", model, "--config", BowConfig(dir + "/one.toml", data, 0, kSteps, true)});
    local_ms.push_back(1000 * TrainedSeconds(local) / kSteps);
  }
  // What the same steps move with a dense gradient (sparse_updates = false).
  dense_wire.push_back(FinalField(BowCluster(BowConfig(dir + "/dense.toml", data, 2, kDenseSteps, false), model, 2),
                                  "wire_bytes_per_step"));
  std::filesystem::remove_all(dir);
  std::fprintf(stderr, "sparse_step: %.1f distinct rows per batch of 64 (%.0f bytes each way)\n", rows, rows_bytes / 2);
  Bench("sparse_step_bytes", Median(wire), rows_bytes, "bytes/step", false);
  Bench("sparse_step_ms_2ps", Median(cluster_ms), Median(local_ms), "ms/step", false);
  Bench("sparse_step_dense_bytes", Median(wire), Median(dense_wire), "bytes/step", false);
}

}  // namespace weft::bench
