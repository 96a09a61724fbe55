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
};

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
  auto result = train::Train(ctx.config(), **host, options);
  if (!result.ok()) {
    if (options.interactive) std::cout << "\n";
    return ReportError(result.status());
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
