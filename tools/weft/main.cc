// `weft`: the command-line host. Loads the configuration and plugins, then
// runs one subcommand. Exit codes: 0 success, 1 user error (bad input,
// bad config, missing file), 2 internal error (a bug: please report it).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "core/base/version.h"
#include "tools/weft/commands.h"
#include "tools/weft/context.h"

namespace {

// CLI11 reports an unknown command as a missing one; say what was typed.
std::string DescribeParseError(const CLI::App& app, const CLI::ParseError& error, int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->get_name() == argv[1];
    if (!known) {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({})) {
        names += (names.empty() ? "" : ", ") + sub->get_name();
      }
      return std::string("unknown command '") + argv[1] + "'; the commands are " + names;
    }
  }
  return error.what();
}

int Main(int argc, char** argv) {
  using weft::cli::kExitUserError;

  CLI::App app("Weft: dataflow graphs for machine learning, on every device you have.", "weft");
  app.require_subcommand(1);
  app.fallthrough();
  app.footer("Run `weft <command> --help` for the options of a command.");

  weft::cli::GlobalOptions options;
  app.add_option("-c,--config", options.config_path, "Configuration file (default: the embedded configs/local.toml)");
  app.add_option("--log-level", options.log_level, "Override logging.level: trace, debug, info, warning, error, off");
  app.add_option_function<std::string>(
      "--job", [&options](const std::string& job) { options.job = job; },
      "The job of this process in the config's [cluster] (overrides [cluster] job)");
  app.add_option_function<int64_t>(
         "--task", [&options](const int64_t& task) { options.task = task; },
         "The task index of this process in its job, from 0 (overrides [cluster] task)")
      ->check(CLI::NonNegativeNumber);
  app.set_version_flag("--version", std::string("weft ") + weft::kVersion);

  weft::cli::Runner run;
  weft::cli::AddVersionCommand(app, run);
  weft::cli::AddPluginsCommand(app, run);
  weft::cli::AddDevicesCommand(app, run);
  weft::cli::AddConfigCommand(app, run);
  weft::cli::AddRunCommand(app, run);
  weft::cli::AddTrainCommand(app, run);
  weft::cli::AddPlaceCommand(app, run);
  weft::cli::AddServeCommand(app, run);
  weft::cli::AddModelServerCommand(app, run);
  weft::cli::AddPredictCommand(app, run);
  weft::cli::AddClusterCommands(app, run);
  weft::cli::AddGraphCommands(app, run);
  weft::cli::AddCheckpointCommands(app, run);
  weft::cli::AddConformanceCommand(app, run);
  weft::cli::AddOnnxCommands(app, run);
  weft::cli::AddOptimizeCommand(app, run);
  weft::cli::AddQuantizeCommand(app, run);
  weft::cli::AddBenchCommand(app, run);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "weft: error: " << DescribeParseError(app, e, argc, argv) << "\nRun `weft --help` for usage.\n";
    return kExitUserError;
  }
  if (!run) {
    std::cerr << "weft: error: no command given\nRun `weft --help` for usage.\n";
    return kExitUserError;
  }
  weft::cli::Context context(options);
  if (weft::Status status = context.Init(); !status.ok()) {
    return weft::cli::ReportError(status);
  }
  return run(context);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "weft: internal error: " << e.what()
              << "\nThis is a bug in Weft; please report it with the command you ran.\n";
  } catch (...) {
    std::cerr << "weft: internal error: unknown exception\n"
                 "This is a bug in Weft; please report it with the command you ran.\n";
  }
  return weft::cli::kExitInternalError;
}
