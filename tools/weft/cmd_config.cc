#include <iostream>
#include <memory>

#include "core/config/config.h"
#include "core/plugin/plugin_host.h"
#include "core/train/trainer.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

// Checks one file: the core sections, then each plugin section against the
// plugins found with that file's own search path.
int Check(const std::string& path) {
  auto config = config::LoadConfigFile(path);
  if (!config.ok()) {
    std::cout << config.status().message() << '\n';
    return ExitCodeFor(config.status());
  }
  plugin::PluginHost host(*config);
  Status loaded = host.LoadAll();
  if (!loaded.ok()) {
    std::cout << loaded.message() << '\n';
    return ExitCodeFor(loaded);
  }
  if (Status optimizer = train::CheckOptimizerSection(*config, host); !optimizer.ok()) {
    std::cout << optimizer.message() << '\n';
    return ExitCodeFor(optimizer);
  }
  for (const config::ConfigError& warning : host.UnusedSections()) {
    std::cout << "warning: " << warning.ToString() << '\n';
  }
  std::cout << "OK\n";
  return kExitOk;
}

}  // namespace

void AddConfigCommand(CLI::App& app, Runner& run) {
  CLI::App* cmd = app.add_subcommand("config", "Check and explain configuration files");
  cmd->require_subcommand(1);

  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* check = cmd->add_subcommand(
      "check", "Validate TOML files, plugin sections included; print OK or every error");
  check->add_option("FILE", *files, "Configuration files to check")->required();
  check->callback([&run, files] {
    run = [files](Context&) {
      int worst = kExitOk;
      for (const std::string& file : *files) {
        if (files->size() > 1) std::cout << file << ": ";
        worst = std::max(worst, Check(file));
      }
      return worst;
    };
  });

  CLI::App* show_default =
      cmd->add_subcommand("default", "Print the embedded default configuration (configs/local.toml)");
  show_default->callback([&run] {
    run = [](Context&) {
      std::cout << config::EmbeddedDefaultText();
      return kExitOk;
    };
  });

  CLI::App* keys = cmd->add_subcommand("keys", "List the keys of the core's sections");
  keys->callback([&run] {
    run = [](Context&) {
      Table table({"KEY", "EXPECTS", "DEFAULT", "DESCRIPTION"});
      for (const auto& [key, spec] : config::CoreKeys()) {
        table.AddRow({key, config::DescribeExpected(spec),
                      spec.default_value ? spec.default_value->text : "(derived)", spec.doc});
      }
      table.Print(std::cout);
      std::cout << "\nPlugin sections ([devices.<name>], ...) are listed by `weft plugins --options`.\n";
      return kExitOk;
    };
  });
}

}  // namespace weft::cli
