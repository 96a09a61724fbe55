// What every `weft` subcommand starts from: the configuration (from
// --config or the embedded default), logging set up from it, and on demand
// the plugin host with every plugin loaded.
#ifndef WEFT_TOOLS_WEFT_CONTEXT_H_
#define WEFT_TOOLS_WEFT_CONTEXT_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/config/config.h"
#include "core/distributed/cluster.h"
#include "core/plugin/plugin_host.h"

namespace weft::cli {

// Exit codes of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUserError = 1;
inline constexpr int kExitInternalError = 2;
// A task of the cluster was lost while the command ran: it closed its
// connection, or stopped answering heartbeats (core/distributed/lost_task.h).
inline constexpr int kExitTaskLost = 3;
// weft train, [cluster] recovery = "auto": lost tasks did not come back
// within recovery_timeout_s; a launcher restarts a task that exits so
// (EX_TEMPFAIL).
inline constexpr int kExitRetry = 75;

// The exit code for a failed |status|: 2 for INTERNAL and UNKNOWN (a bug in
// Weft or a plugin), 3 for a lost task of the cluster, 1 for everything
// else.
int ExitCodeFor(const Status& status);

// Prints "weft: error: <message>" (each line of a multi-line message
// indented under the first) to stderr and returns ExitCodeFor(status).
int ReportError(const Status& status);

// ReportError for a command on a cluster: a failure that comes from a lost
// task leads with that task and |what_to_do| (dist::ExplainLostTask).
int ReportClusterError(const Status& status, std::string_view what_to_do);

struct GlobalOptions {
  std::string config_path;  // empty: the embedded default
  std::string log_level;    // empty: from the config
  // --job and --task: which task of the [cluster] this process is,
  // overriding [cluster] job and task.
  std::optional<std::string> job;
  std::optional<int64_t> task;
};

class Context {
 public:
  explicit Context(GlobalOptions options) : options_(std::move(options)) {}

  // Loads the configuration and applies its [logging] section, then the
  // --log-level override.
  Status Init();

  const config::Config& config() const { return *config_; }
  // For a command's flags that override the file (`--optimize`).
  config::Config& mutable_config() { return *config_; }

  // Loads plugins on first use.
  Expected<plugin::PluginHost*> Plugins();
  // Plugins() leaves counting devices to their first use: for commands
  // that run graphs on a DeviceSet opened with Opening::kLazy, so that a
  // one-op run never starts the OpenCL platform (plugin_host.h). Call it
  // before Plugins().
  void DeferDeviceCounting() { defer_device_count_ = true; }
  // Plugins() leaves out the transport and collectives plugins: for
  // commands that run in this process only. Call it before Plugins().
  void LocalOnly() { local_only_ = true; }

  const GlobalOptions& options() const { return options_; }

  // The configuration's [cluster] resolved with --job/--task and this
  // process's environment (see core/distributed/cluster.h), on first use.
  Expected<const dist::ClusterSpec*> Cluster();

 private:
  GlobalOptions options_;
  std::optional<config::Config> config_;
  bool defer_device_count_ = false;
  bool local_only_ = false;
  std::unique_ptr<plugin::PluginHost> host_;
  std::optional<dist::ClusterSpec> cluster_;
};

}  // namespace weft::cli

#endif  // WEFT_TOOLS_WEFT_CONTEXT_H_
