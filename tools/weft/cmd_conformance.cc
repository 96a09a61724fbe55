// `weft conformance --plugin PATH`: the device conformance kit
// (tools/conformance/kit.h) against one device plugin, built in this tree
// or anywhere else. Only that plugin is loaded, so every node of every case
// runs on its devices.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "core/plugin/plugin_host.h"
#include "core/runtime/device_set.h"
#include "tools/conformance/kit.h"
#include "tools/weft/commands.h"

namespace weft::cli {
namespace {

struct Flags {
  std::string plugin;
  std::string device;
  std::string ops;
  std::string cases;
  bool skip_abi = false;
};

int Run(Context& ctx, const Flags& flags) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(flags.plugin, ec)) {
    return ReportError(NotFoundError("--plugin ", Quote(flags.plugin), ": no such file"));
  }
  auto cases = conformance::LoadCases(flags.cases.empty() ? conformance::DefaultCasesDir() : flags.cases);
  if (!cases.ok()) return ReportError(cases.status());

  // The config's sections for the plugin apply ([devices.<name>]); its
  // search path does not: this plugin alone is loaded.
  config::Config config = ctx.config();
  config.plugins.paths.clear();
  config.plugins.disable.clear();
  plugin::PluginHostOptions options;
  options.use_environment = false;
  options.use_builtin_folder = false;
  plugin::PluginHost host(std::move(config), options);
  Status loaded = host.Load(flags.plugin);
  if (!loaded.ok()) return ReportError(loaded);
  const plugin::PluginInfo& info = host.plugins().back();
  if (info.state != plugin::PluginState::kLoaded) {
    return ReportError(FailedPreconditionError("plugin ", info.path, " is ", plugin::StateName(info.state),
                                               " here: ", info.reason, "; nothing to test"));
  }
  if (info.kind != plugin::PluginKind::kDevice) {
    return ReportError(InvalidArgumentError("plugin ", info.path, " is a plugin of kind ", plugin::KindName(*info.kind),
                                            ", not a device plugin; the conformance kit tests device plugins "
                                            "(transports have their own suite, docs/plugins.md)"));
  }
  auto devices = runtime::DeviceSet::Open(host);
  if (!devices.ok()) return ReportError(devices.status());
  std::shared_ptr<runtime::DeviceSet> shared(std::move(*devices));

  conformance::Options kit;
  kit.ops = flags.ops;
  kit.abi_checks = !flags.skip_abi;
  if (!flags.device.empty()) {
    if (shared->Find(flags.device) == nullptr) {
      std::string names;
      for (const std::string& n : shared->Names()) names += (names.empty() ? "" : ", ") + n;
      return ReportError(NotFoundError("--device ", Quote(flags.device), ": plugin ", info.name, " opened ",
                                       names.empty() ? "no device" : names));
    }
    kit.devices.push_back(flags.device);
  } else {
    kit.devices = shared->Names();
  }
  if (kit.devices.empty()) {
    return ReportError(FailedPreconditionError("plugin ", info.name, " opened no device here; nothing to test"));
  }
  if (isatty(STDERR_FILENO)) {
    kit.progress = [](const std::string& what) { std::cerr << "\r\033[K" << what << std::flush; };
  }
  std::cout << "Conformance of plugin " << info.name << " " << info.version << " (" << info.path << ")\n"
            << "cases: " << cases->dir << "\n\n";
  const conformance::Report report = conformance::Run(shared, *cases, kit);
  if (kit.progress) std::cerr << "\r\033[K" << std::flush;
  if (report.ops.empty() && !flags.ops.empty()) {
    std::cout << "no op matching " << Quote(flags.ops) << " has both cases and a kernel on the device\n";
  }
  conformance::PrintReport(std::cout, report);
  return report.ok() ? kExitOk : kExitUserError;
}

}  // namespace

void AddConformanceCommand(CLI::App& app, Runner& run) {
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "conformance", "Check a device plugin against the device ABI and every op conformance case it has kernels for");
  cmd->add_option("--plugin", flags->plugin, "The device plugin's .so (built in this tree or out of it)")->required();
  cmd->add_option("--device", flags->device, "Test only this device (/device:TYPE:N); default: every device it opens");
  cmd->add_option("--ops", flags->ops, "Only ops matching this pattern ('*' and '?'; comma-separated alternatives)");
  cmd->add_option("--cases", flags->cases,
                  "The reference cases' folder (default: share/weft/conformance of this installation, or "
                  "$WEFT_CONFORMANCE_CASES)");
  cmd->add_flag("--skip-abi", flags->skip_abi, "Skip the device ABI checks");
  cmd->footer(
      "Prints the ABI checks and, per op, the cases passed and failed with the worst error; exits 1 on any "
      "failure.\nExample: weft conformance --plugin build/weft_device_mydev.so --ops 'Add,Mul,MatMul'");
  cmd->callback([&run, flags] { run = [flags](Context& ctx) { return Run(ctx, *flags); }; });
}

}  // namespace weft::cli
