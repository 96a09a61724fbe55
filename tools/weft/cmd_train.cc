// weft train: trains a model graph file with the training sections of the
// --config file, printing progress and ending with a `final:` line.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "core/train/trainer.h"
#include "tools/weft/commands.h"

namespace weft::cli {
namespace {

struct TrainArgs {
  std::string model;
  bool resume = false;
  int64_t steps = 0;
};

int Train(Context& ctx, const TrainArgs& args) {
  if (ctx.config().source.rfind("<embedded", 0) == 0) {
    return ReportError(InvalidArgumentError(
        "weft train needs a training config: --config FILE.toml with [data], [training] and [optimizer] "
        "(see configs/fashion_mlp.toml)"));
  }
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  train::TrainerOptions options;
  options.model_path = args.model;
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
  cmd->add_option("MODEL", args->model, "A .wg or .wgt graph file with variables, a loss and an initialiser")
      ->required();
  cmd->add_flag("--resume", args->resume, "Continue from the newest checkpoint in [checkpoint] dir");
  cmd->add_option("--steps", args->steps, "Stop after this many steps in all (overrides [training] steps/epochs)")
      ->check(CLI::PositiveNumber);
  cmd->footer(
      "Example: weft --config configs/fashion_cnn.toml train configs/models/fashion_cnn.wgt\n"
      "Progress goes to stdout (one line redrawn on a terminal); the last line is\n"
      "  final: step=<n> loss=<x> test_accuracy=<y> examples_per_sec=<z>");
  cmd->callback([&run, args] { run = [args](Context& ctx) { return Train(ctx, *args); }; });
}

}  // namespace weft::cli
