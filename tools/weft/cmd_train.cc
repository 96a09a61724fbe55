// weft train: trains a model graph file with the training sections of the
// --config file, printing progress and ending with a `final:` line.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "core/dist/cluster.h"
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
};

// "A:B" or "A" (steps from 1, B >= A) for --trace-steps.
Expected<std::pair<int64_t, int64_t>> ParseTraceSteps(const std::string& text) {
  auto bad = [&] {
    return InvalidArgumentError("--trace-steps ", Quote(text),
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

int Train(Context& ctx, const TrainArgs& args) {
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
    auto steps = ParseTraceSteps(args.trace_steps);
    if (!steps.ok()) return ReportError(steps.status());
    options.trace = &trace;
    std::tie(options.trace_first, options.trace_last) = *steps;
  }
  auto result = train::Train(ctx.config(), **host, options);
  if (!args.trace.empty()) {
    // A failed run's trace helps too: written either way.
    if (Status written = trace.WriteJson(args.trace); !written.ok()) return ReportError(written);
    std::cout << "trace of steps " << options.trace_first << " to " << options.trace_last << " ("
              << trace.events().size() << " events) in " << args.trace << " (open it in ui.perfetto.dev)" << std::endl;
  }
  if (!result.ok()) {
    if (options.interactive) std::cout << "\n";
    const int code = ReportError(result.status());
    // Recovery gave up waiting: worth starting again (the launcher does).
    if (result.status().message().find("(recovery_timeout_s)") != std::string::npos) return kExitRetry;
    return code;
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
