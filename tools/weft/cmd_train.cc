// weft train: trains a model graph file with the training sections of the
// --config file, printing progress and ending with a `final:` line.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/distributed/cluster.h"
#include "core/train/trainer.h"
#include "tools/weft/commands.h"

namespace weft::cli {
namespace {

struct TrainArgs {
  std::string model;
  bool resume = false;
  int64_t steps = 0;
  bool local = false;
  std::string trace;
  std::string trace_steps = "10:10";
  std::string profile_steps;
  int optimize = -1;
};

// "A:B" or "A" (steps from 1, B >= A) for --trace-steps and
// --profile-steps (|flag|).
Expected<std::pair<int64_t, int64_t>> ParseSteps(const std::string& flag, const std::string& text) {
  auto bad = [&] {
    return InvalidArgumentError(flag, " ", Quote(text),
                                ": expected FIRST:LAST or STEP, steps from 1 (for example 10:12)");
  };
  const std::size_t colon = text.find(':');
  const std::string a = text.substr(0, colon), b = colon == std::string::npos ? a : text.substr(colon + 1);
  auto number = [](const std::string& s, int64_t* out) {
    if (s.empty() || s.size() > 15 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    *out = std::stoll(s);
    return *out >= 1;
  };
  int64_t first = 0, last = 0;
  if (!number(a, &first) || !number(b, &last) || last < first) return bad();
  return std::make_pair(first, last);
}

// SIGTERM and SIGINT: the run stops before its next step (the chief saves
// a checkpoint there); a second signal, or 30 s without an end, stops the
// process at once. Exit 128 + the signal, as a shell reports it.
std::atomic<int> g_stop_signal{0};

void OnStopSignal(int signal) {
  if (g_stop_signal.exchange(signal) != 0) _exit(128 + signal);
  static constexpr char kTerm[] = "\nweft train: stopping (SIGTERM) before the next step; again to stop at once\n";
  static constexpr char kInt[] = "\nweft train: stopping (SIGINT) before the next step; again to stop at once\n";
  const ssize_t ignored =
      signal == SIGTERM ? write(STDOUT_FILENO, kTerm, sizeof kTerm - 1) : write(STDOUT_FILENO, kInt, sizeof kInt - 1);
  (void)ignored;
}

// Ends the process 30 s after a stop signal if the run has not ended by
// then (a wait that does not look at the signal), until destroyed.
class StopWatchdog {
 public:
  StopWatchdog() {
    struct sigaction action {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!done_ && g_stop_signal.load() == 0) cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (done_) return;
      if (cv_.wait_for(lock, std::chrono::seconds(30), [this] { return done_; })) return;
      const int signal = g_stop_signal.load();
      std::cout << "weft train: did not stop within 30 s of " << (signal == SIGTERM ? "SIGTERM" : "SIGINT")
                << "; exiting now" << std::endl;
      _exit(128 + signal);
    });
  }
  ~StopWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// What to do when a task was lost and [cluster] recovery is off.
constexpr std::string_view kAfterALostTask =
    "To go on: start it again, then the chief (worker 0) with --resume, which restores the newest checkpoint, and "
    "the other workers as before; or run the cluster under `weft cluster launch` with [cluster] recovery = \"auto\", "
    "which restarts lost tasks and restores by itself (docs/distributed.md, \"Recovery\").";

int Train(Context& ctx, const TrainArgs& args) {
  ApplyOptimizeOption(ctx, args.optimize);
  if (ctx.config().source.rfind("<embedded", 0) == 0) {
    return ReportError(
        InvalidArgumentError("weft train needs a training config: --config FILE.toml with [data], "
                             "[training] and [optimizer] "
                             "(see configs/fashion_mlp.toml)"));
  }
  auto cluster = ctx.Cluster();
  if (!cluster.ok()) return ReportError(cluster.status());
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  train::TrainerOptions options;
  if ((*cluster)->distributed() && !args.local) {
    options.cluster = *cluster;
    // Every task of a training cluster may run the same command (mpirun,
    // srun, tools/cluster.sh): the tasks of the other jobs serve the
    // variables until the chief ends the run.
    if ((*cluster)->self && (*cluster)->self->job != "worker") return ServeTask(ctx, "weft train", true);
  }
  options.model_path = args.model;
  options.read_model = ReadTrainableModel;
  options.resume = args.resume;
  options.steps = args.steps;
  options.out = &std::cout;
  options.interactive = isatty(STDOUT_FILENO) != 0;
  runtime::TraceRecorder trace;
  if (!args.trace.empty()) {
    auto steps = ParseSteps("--trace-steps", args.trace_steps);
    if (!steps.ok()) return ReportError(steps.status());
    options.trace = &trace;
    std::tie(options.trace_first, options.trace_last) = *steps;
  }
  runtime::StepProfile profile;
  if (!args.profile_steps.empty()) {
    auto steps = ParseSteps("--profile-steps", args.profile_steps);
    if (!steps.ok()) return ReportError(steps.status());
    options.profile = &profile;
    std::tie(options.profile_first, options.profile_last) = *steps;
  }
  options.stop_signal = &g_stop_signal;
  std::optional<StopWatchdog> watchdog;
  watchdog.emplace();
  auto result = train::Train(ctx.config(), **host, options);
  watchdog.reset();
  if (!args.trace.empty()) {
    // A failed run's trace helps too: written either way.
    if (Status written = trace.WriteJson(args.trace); !written.ok()) return ReportError(written);
    std::cout << "trace of steps " << options.trace_first << " to " << options.trace_last << " ("
              << trace.events().size() << " events) in " << args.trace << " (open it in ui.perfetto.dev)" << std::endl;
  }
  if (options.profile != nullptr) {
    if (profile.empty()) {
      std::cout << "--profile-steps " << args.profile_steps << ": none of those steps ran" << std::endl;
    } else {
      std::cout << profile.Format() << std::flush;
    }
  }
  if (!result.ok() && result.status().code() == Code::kCancelled && g_stop_signal.load() != 0) {
    std::cout << "weft train: " << result.status().message() << std::endl;
    return 128 + g_stop_signal.load();
  }
  if (!result.ok()) {
    if (options.interactive) std::cout << "\n";
    // Recovery gave up waiting: worth starting again (the launcher does).
    if (result.status().message().find("(recovery_timeout_s)") != std::string::npos) {
      (void)ReportError(result.status());
      return kExitRetry;
    }
    return ReportClusterError(result.status(), kAfterALostTask);
  }
  return kExitOk;
}

}  // namespace

void AddTrainCommand(CLI::App& app, Runner& run) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model graph file as the --config file's training sections say");
  cmd->add_option(
         "MODEL", args->model,
         "A .wg or .wgt graph file with variables, a loss and an initialiser, or an .onnx model (see docs/onnx.md)")
      ->required();
  cmd->add_flag("--resume", args->resume, "Continue from the newest checkpoint in [checkpoint] dir");
  cmd->add_flag("--local", args->local, "Train in this process even when the config has a [cluster] section");
  cmd->add_option("--steps", args->steps,
                  "Stop after this many steps in all (overrides [training] "
                  "steps/epochs)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--trace", args->trace,
                  "Write a Chrome trace (for ui.perfetto.dev) of --trace-steps to this file; on a cluster, with a "
                  "track per task and device and the tensors sent between them");
  cmd->add_option("--trace-steps", args->trace_steps,
                  "Which steps to trace: FIRST:LAST or STEP, from 1 (default 10:10)");
  cmd->add_option("--profile-steps", args->profile_steps,
                  "Time these steps (FIRST:LAST or STEP, from 1) and print, per task, where their time went: "
                  "compute, waiting for other tasks' tensors, serialization, queueing (docs/distributed.md, "
                  "\"Where a step's time goes\")");
  AddOptimizeOption(cmd, &args->optimize);
  cmd->footer(
      "Example: weft --config configs/fashion_cnn.toml train "
      "configs/models/fashion_cnn.wgt\n"
      "On a cluster (a config with [cluster]): start each ps task with weft "
      "serve, then each worker with\n"
      "  weft train MODEL --config C --job worker --task I\n"
      "(worker 0 is the chief; docs/distributed.md, \"Training on a "
      "cluster\"). --local trains in this process.\n"
      "Progress goes to stdout (one line redrawn on a terminal); the last line "
      "is\n"
      "  final: step=<n> loss=<x> test_accuracy=<y> examples_per_sec=<z>");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return Train(ctx, *args); }; });
}

}  // namespace weft::cli
