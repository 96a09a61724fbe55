#include <iostream>
#include <memory>
#include <sstream>

#include "core/config/config.h"
#include "core/distributed/auth.h"
#include "core/distributed/cluster.h"
#include "core/placement/placer.h"
#include "core/plugin/plugin_host.h"
#include "core/runtime/device_set.h"
#include "core/runtime/placement_support.h"
#include "core/train/trainer.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

// The tasks of a resolved cluster, for `weft config check`.
void PrintCluster(const dist::ClusterSpec& cluster) {
  std::cout << "cluster: " << cluster.jobs.size() << (cluster.jobs.size() == 1 ? " job, " : " jobs, ")
            << cluster.num_tasks() << (cluster.num_tasks() == 1 ? " task" : " tasks") << " (membership "
            << config::MembershipName(cluster.membership) << "); connect timeout " << cluster.connect_timeout_ms
            << " ms, RPC timeout " << cluster.rpc_timeout_ms << " ms\n";
  Table table({"TASK", "ADDRESS", "TRANSPORT"});
  for (const dist::JobSpec& job : cluster.jobs) {
    for (const dist::TaskSpec& task : job.tasks) {
      table.AddRow({dist::TaskPrefix(job.name, task.index), task.address.ToString(), task.transport});
    }
  }
  std::ostringstream text;
  table.Print(text);
  std::istringstream lines(text.str());
  for (std::string line; std::getline(lines, line);) std::cout << "  " << line << '\n';
  std::cout << "connections: "
            << (cluster.secret_file.empty() ? std::string("not authenticated (no [cluster] secret_file)")
                                            : "authenticated with the secret in " + cluster.secret_file)
            << "; heartbeats every " << cluster.heartbeat_interval_ms << " ms, a task silent for "
            << cluster.heartbeat_timeout_ms << " ms is lost\n";
  if (cluster.self) std::cout << "this task: " << cluster.self->ToString() << '\n';
}

// A cluster whose tasks come from a launcher that has not started this
// process: what the file says, without addresses.
void PrintLaunchedCluster(const config::ClusterConfig& cluster) {
  std::vector<std::string> jobs;
  for (const config::ClusterJobConfig& job : cluster.jobs) {
    jobs.push_back(StrCat(job.name, " = ", job.rank_count ? std::to_string(*job.rank_count) : "\"rest\"", " (",
                          cluster.TransportOf(job), ")"));
  }
  const bool mpi = cluster.membership == config::Membership::kMpi;
  std::cout << "cluster: membership " << config::MembershipName(cluster.membership) << ", ranks per job "
            << StrJoin(jobs, ", ") << ", ports from " << cluster.base_port << "; addresses come from "
            << (mpi ? "mpirun's" : "srun's") << " environment when each task starts\n";
}

// [cluster]: transports against the plugins loaded here, then the tasks
// with --job/--task. Returns the exit code; prints the summary when OK.
int CheckCluster(const config::Config& config, const plugin::PluginHost& host, const GlobalOptions& options) {
  if (config.cluster) {
    std::vector<std::string> schemes;
    for (const plugin::TransportPlugin* transport : host.transports().All()) {
      schemes.emplace_back(transport->table->scheme);
    }
    dist::TransportCheck transports = dist::CheckTransports(*config.cluster, schemes);
    if (Status errors = config::ErrorsToStatus(transports.errors); !errors.ok()) {
      std::cout << errors.message() << '\n';
      return ExitCodeFor(errors);
    }
    for (const config::ConfigError& warning : transports.warnings) {
      std::cout << "warning: " << warning.ToString() << '\n';
    }
  }
  const dist::Environment env = dist::ProcessEnvironment();
  const bool launched = config.cluster && config.cluster->membership != config::Membership::kStatic;
  const char* rank_var =
      launched && config.cluster->membership == config::Membership::kMpi ? "OMPI_COMM_WORLD_RANK" : "SLURM_PROCID";
  if (launched && env.count(rank_var) == 0 && !options.job && !options.task) {
    PrintLaunchedCluster(*config.cluster);
    return kExitOk;
  }
  auto cluster = dist::ResolveCluster(config, options.job, options.task, env);
  if (!cluster.ok()) {
    std::cout << cluster.status().message() << '\n';
    return ExitCodeFor(cluster.status());
  }
  if (cluster->distributed()) {
    const dist::JobSpec* workers = cluster->FindJob("worker");
    const dist::JobSpec* ps = cluster->FindJob("ps");
    Status mode = train::CheckTrainingMode(config, workers == nullptr ? 0 : static_cast<int64_t>(workers->tasks.size()),
                                           ps != nullptr && !ps->tasks.empty());
    if (!mode.ok()) {
      std::cout << mode.message() << '\n';
      return ExitCodeFor(mode);
    }
    // The secret is this machine's file: checked here as every task and
    // client on this machine will read it.
    if (!cluster->secret_file.empty()) {
      auto secret = dist::ReadSecretFile(cluster->secret_file);
      if (!secret.ok()) {
        std::cout << secret.status().message() << '\n';
        return ExitCodeFor(secret.status());
      }
    }
    PrintCluster(*cluster);
  }
  return kExitOk;
}

// Checks one file: the core sections, then each plugin section against the
// plugins found with that file's own search path, then the cluster.
int Check(const std::string& path, const GlobalOptions& options) {
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
  if (Status data = train::CheckDataSection(*config); !data.ok()) {
    std::cout << data.message() << '\n';
    return ExitCodeFor(data);
  }
  // Pins name devices of this process (a cluster's pins name other tasks'
  // devices too: those are checked when the cluster runs).
  if (!config->placement.pins.empty() && !config->cluster.has_value()) {
    auto devices = runtime::DeviceSet::Open(host);
    Status pins = devices.ok() ? placement::CheckPins(runtime::PlacementOptionsFromConfig(*config).pins,
                                                      runtime::PlacementDevices(**devices))
                                     .status()
                               : devices.status();
    if (!pins.ok()) {
      std::cout << pins.message() << '\n';
      return ExitCodeFor(pins);
    }
  }
  for (const config::ConfigError& warning : host.UnusedSections()) {
    std::cout << "warning: " << warning.ToString() << '\n';
  }
  if (int code = CheckCluster(*config, host, options); code != kExitOk) return code;
  std::cout << "OK\n";
  return kExitOk;
}

}  // namespace

void AddConfigCommand(CLI::App& app, Runner& run) {
  CLI::App* cmd = app.add_subcommand("config", "Check and explain configuration files");
  cmd->require_subcommand(1);

  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* check =
      cmd->add_subcommand("check", "Validate TOML files, plugin sections included; print OK or every error");
  check->add_option("FILE", *files, "Configuration files to check")->required();
  check->callback([&run, files] {
    run = [files](Context& context) {
      int worst = kExitOk;
      for (const std::string& file : *files) {
        if (files->size() > 1) std::cout << file << ": ";
        worst = std::max(worst, Check(file, context.options()));
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
                      spec.default_value            ? spec.default_value->text
                      : key.starts_with("cluster.") ? "(unset)"
                                                    : "(derived)",
                      spec.doc});
      }
      table.Print(std::cout);
      std::cout << "\n[cluster] is documented in docs/distributed.md. Plugin sections ([devices.<name>], ...) are "
                   "listed by `weft plugins --options`.\n";
      return kExitOk;
    };
  });
}

}  // namespace weft::cli
