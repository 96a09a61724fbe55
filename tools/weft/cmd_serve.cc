// `weft serve --config C --job ps --task 0`: runs one task of a cluster
// (core/distributed/task_service.h) until SIGINT or SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "core/distributed/cluster_runtime.h"
#include "core/distributed/incarnation.h"
#include "core/distributed/task_service.h"
#include "tools/weft/commands.h"

namespace weft::cli {
namespace {

int g_signal_pipe[2] = {-1, -1};
std::mutex g_shutdown_mutex;
std::string g_shutdown_reason;

void OnSignal(int signal) {
  const char c = static_cast<char>(signal);
  const ssize_t ignored = write(g_signal_pipe[1], &c, 1);
  (void)ignored;
}

// Routes SIGINT and SIGTERM to the pipe WaitForStop reads.
bool InstallStopHandlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return false;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  return true;
}

// Waits for SIGINT, SIGTERM or a Shutdown request ('S'); returns which.
int WaitForStop() {
  if (g_signal_pipe[0] < 0) return 0;
  char c = 0;
  while (read(g_signal_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  return c;
}

}  // namespace

int ServeTask(Context& ctx, const char* command, bool stop_when_told) {
  auto cluster = ctx.Cluster();
  if (!cluster.ok()) return ReportError(cluster.status());
  const dist::ClusterSpec& spec = **cluster;
  if (!spec.distributed()) {
    return ReportError(InvalidArgumentError("weft serve runs a task of a cluster, but ", ctx.config().source,
                                            " has no [cluster] section (see configs/cluster_local.toml and "
                                            "docs/distributed.md)"));
  }
  if (!spec.self) {
    return ReportError(InvalidArgumentError(
        "which task is this? give --job and --task (the jobs of ", ctx.config().source, " are ",
        [&] {
          std::vector<std::string> names;
          for (const auto& j : spec.jobs) {
            names.push_back(StrCat(j.name, " (", j.tasks.size(), " task", j.tasks.size() == 1 ? "" : "s", ")"));
          }
          return StrJoin(names, ", ");
        }(),
        ")"));
  }
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  auto options = dist::ServiceOptionsFor(spec, *spec.self, ctx.config());
  if (!options.ok()) return ReportError(options.status());
  if (stop_when_told) {
    options->on_shutdown = [](const std::string& caller, const std::string& reason) {
      {
        std::lock_guard<std::mutex> lock(g_shutdown_mutex);
        g_shutdown_reason = StrCat(caller, ": ", reason);
      }
      const char c = 'S';
      const ssize_t ignored = write(g_signal_pipe[1], &c, 1);
      (void)ignored;
    };
    options->board = std::make_shared<dist::StatusBoard>();
    options->board->SetRole(StrCat(spec.self->job, " of weft train"));
    options->board->SetState("serving the training run");
  }
  if (!InstallStopHandlers()) return ReportError(InternalError("cannot make a pipe for the stop signals"));
  auto devices = runtime::DeviceSet::Open(**host);
  if (!devices.ok()) return ReportError(devices.status());
  auto service = dist::TaskService::Start(*options, **host, std::move(*devices));
  if (!service.ok()) return ReportError(service.status());
  std::cout << command << ": " << (*service)->name() << " listening on " << (*service)->address() << " with "
            << StrJoin((*service)->DeviceNames(), ", ") << " (incarnation "
            << dist::FormatIncarnation((*service)->incarnation()) << ")" << std::endl;
  if (stop_when_told) {
    std::cout << command << ": " << (*service)->name()
              << " serves this training run's variables; it stops when the "
                 "chief (/job:worker/task:0) ends the run"
              << std::endl;
  }
  // recovery = "auto": a task of a training run stops once the chief has
  // not answered for recovery_timeout_s (the run ended without it, or
  // nobody restarts the chief), rather than serve forever.
  std::atomic<bool> serving{true};
  std::thread watcher;
  const config::Config& config = ctx.config();
  if (stop_when_told && config.cluster.has_value() && config.cluster->recovery == "auto") {
    const int64_t timeout_s = config.cluster->recovery_timeout_s;
    watcher = std::thread([&serving, timeout_s, service = service->get()] {
      const std::string chief = dist::TaskPrefix("worker", 0);
      auto last_seen = std::chrono::steady_clock::now();
      while (serving.load()) {
        if (service->IncarnationOf(chief, 2000).ok()) {
          last_seen = std::chrono::steady_clock::now();
        } else if (std::chrono::steady_clock::now() - last_seen > std::chrono::seconds(timeout_s)) {
          {
            std::lock_guard<std::mutex> lock(g_shutdown_mutex);
            g_shutdown_reason =
                StrCat("the chief (", chief, ") has not answered for ", timeout_s, " s (recovery_timeout_s)");
          }
          const char c = 'S';
          const ssize_t ignored = write(g_signal_pipe[1], &c, 1);
          (void)ignored;
          return;
        }
        for (int i = 0; i < 10 && serving.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  const int signal = WaitForStop();
  serving.store(false);
  if (watcher.joinable()) watcher.join();
  std::string why = signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : "";
  if (signal == 'S') {
    std::lock_guard<std::mutex> lock(g_shutdown_mutex);
    why = g_shutdown_reason;
    // The reply to the Shutdown is on its way out: let it leave before the
    // connections close, so the chief hears "done", not a lost task.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  std::cout << command << ": " << (*service)->name() << " stopping (" << why << ")" << std::endl;
  service->reset();
  // A task of a training run stopped by a signal rather than by the chief
  // did not end with the run: 128 + the signal, as weft train's workers,
  // so that `weft cluster launch` starts it again (recovery = "auto").
  if (stop_when_told && (signal == SIGTERM || signal == SIGINT)) return 128 + signal;
  return kExitOk;
}

namespace {

int Serve(Context& ctx) { return ServeTask(ctx, "weft serve", false); }

}  // namespace

void AddServeCommand(CLI::App& app, Runner& run) {
  CLI::App* cmd = app.add_subcommand("serve", "Run one task of a cluster (a parameter server or a worker)");
  cmd->footer(
      "Example: weft serve --config configs/cluster_local.toml --job "
      "ps --task 0\n"
      "The task listens on its address from [cluster] and runs the "
      "graph partitions clients register with it,\n"
      "until SIGINT or SIGTERM. Clients: weft run GRAPH --config C; "
      "docs/distributed.md explains the rest.");
  cmd->callback([&run] { run = [](Context& ctx) { return Serve(ctx); }; });
}

}  // namespace weft::cli
