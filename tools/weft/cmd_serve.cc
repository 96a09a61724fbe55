// `weft serve --config C --job ps --task 0`: runs one task of a cluster
// (core/dist/task_service.h) until SIGINT or SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "core/dist/cluster_runtime.h"
#include "core/dist/task_service.h"
#include "tools/weft/commands.h"

namespace weft::cli {
namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int signal) {
  const char c = static_cast<char>(signal);
  const ssize_t ignored = write(g_signal_pipe[1], &c, 1);
  (void)ignored;
}

// Waits for SIGINT or SIGTERM; returns the signal.
int WaitForStopSignal() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return 0;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  char c = 0;
  while (read(g_signal_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  return c;
}

int Serve(Context& ctx) {
  auto cluster = ctx.Cluster();
  if (!cluster.ok()) return ReportError(cluster.status());
  const dist::ClusterSpec& spec = **cluster;
  if (!spec.distributed()) {
    return ReportError(InvalidArgumentError(
        "weft serve runs a task of a cluster, but ", ctx.config().source,
        " has no [cluster] section (see configs/cluster_local.toml and docs/distributed.md)"));
  }
  if (!spec.self) {
    return ReportError(InvalidArgumentError("which task is this? give --job and --task (the jobs of ",
                                            ctx.config().source, " are ", [&] {
                                              std::vector<std::string> names;
                                              for (const auto& j : spec.jobs) {
                                                names.push_back(StrCat(j.name, " (", j.tasks.size(), " task",
                                                                       j.tasks.size() == 1 ? "" : "s", ")"));
                                              }
                                              return StrJoin(names, ", ");
                                            }(),
                                            ")"));
  }
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  auto options = dist::ServiceOptionsFor(spec, *spec.self, ctx.config());
  if (!options.ok()) return ReportError(options.status());
  auto devices = runtime::DeviceSet::Open(**host);
  if (!devices.ok()) return ReportError(devices.status());
  auto service = dist::TaskService::Start(*options, **host, std::move(*devices));
  if (!service.ok()) return ReportError(service.status());
  std::cout << "weft serve: " << (*service)->name() << " listening on " << (*service)->address() << " with "
            << StrJoin((*service)->DeviceNames(), ", ") << std::endl;
  const int signal = WaitForStopSignal();
  std::cout << "weft serve: " << (*service)->name() << " stopping (" << (signal == SIGTERM ? "SIGTERM" : "SIGINT")
            << ")" << std::endl;
  service->reset();
  return kExitOk;
}

}  // namespace

void AddServeCommand(CLI::App& app, Runner& run) {
  CLI::App* cmd = app.add_subcommand("serve", "Run one task of a cluster (a parameter server or a worker)");
  cmd->footer(
      "Example: weft serve --config configs/cluster_local.toml --job ps --task 0\n"
      "The task listens on its address from [cluster] and runs the graph partitions clients register with it,\n"
      "until SIGINT or SIGTERM. Clients: weft run GRAPH --config C; docs/distributed.md explains the rest.");
  cmd->callback([&run] { run = [](Context& ctx) { return Serve(ctx); }; });
}

}  // namespace weft::cli
