// `weft cluster status`: what every task of the config's cluster says
// about itself (docs/distributed.md, "Operations"). `weft cluster launch`:
// starts every task of a training cluster on this machine and, with
// [cluster] recovery = "auto", starts again the ones that die, as
// Kubernetes or Slurm --requeue would (docs/distributed.md, "Recovery").
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>

#include "core/distributed/cluster_runtime.h"
#include "core/distributed/cluster_status.h"
#include "core/distributed/heartbeat.h"
#include "core/distributed/incarnation.h"
#include "core/distributed/rpc.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

using Answer = dist::TaskAnswer;

std::string Ms(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), v < 10 ? "%.2f" : v < 100 ? "%.1f" : "%.0f", v);
  return text;
}

void PrintJson(const std::vector<Answer>& answers) {
  Json all = Json::array();
  for (const Answer& a : answers) all.push_back(dist::TaskAnswerJson(a));
  std::cout << DumpJson(all) << '\n';
}

void PrintTable(const std::vector<Answer>& answers, const std::string& config_path) {
  std::size_t answered = 0;
  int64_t global_step = -1;
  for (const Answer& a : answers) {
    if (!a.status.ok()) continue;
    ++answered;
    global_step = std::max(global_step, a.task.global_step);
  }
  std::cout << "cluster of " << (config_path.empty() ? std::string("the default config") : config_path) << ": "
            << answers.size() << " task" << (answers.size() == 1 ? "" : "s") << ", " << answered << " answer"
            << (answered == 1 ? "s" : "");
  if (global_step >= 0) std::cout << "; global step " << global_step;
  std::cout << "\n";
  Table table(
      {"TASK", "ADDRESS", "INCARNATION", "UP", "LAST HEARTBEAT", "STEP", "STEP MS P50/P90/P99", "DROPPED", "STATE"});
  for (const Answer& a : answers) {
    const dist::TaskStatusMsg& t = a.task;
    const std::string heartbeat =
        a.last_heartbeat_ms < 0 ? "-" : StrCat(dist::FormatSilence(a.last_heartbeat_ms), " ago");
    if (!a.status.ok()) {
      table.AddRow({a.peer.name, a.peer.address, "-", "-", heartbeat, "-", "-", "-",
                    StrCat("not answering: ", a.status.message())});
      continue;
    }
    std::string step = "-";
    if (t.step >= 0) step = t.total_steps > 0 ? StrCat(t.step, "/", t.total_steps) : StrCat(t.step);
    const std::string times =
        t.steps_timed > 0 ? StrCat(Ms(t.p50_ms), "/", Ms(t.p90_ms), "/", Ms(t.p99_ms), " (", t.timed, ")") : "-";
    const std::string up = dist::IncarnationAge(t.incarnation);
    table.AddRow({a.peer.name, a.peer.address, dist::FormatIncarnation(t.incarnation), up.empty() ? "-" : up, heartbeat,
                  step, times, t.dropped_gradients >= 0 ? StrCat(t.dropped_gradients) : "-",
                  t.role.empty() ? t.state : StrCat(t.state, "; ", t.role)});
  }
  table.Print(std::cout);
}

int RunStatus(Context& ctx, bool json, int64_t timeout_ms) {
  auto cluster = ctx.Cluster();
  if (!cluster.ok()) return ReportError(cluster.status());
  const dist::ClusterSpec& spec = **cluster;
  if (!spec.distributed()) {
    return ReportError(InvalidArgumentError(
        "the config has no [cluster.jobs]: `weft cluster status` asks the tasks of a cluster (pass --config "
        "with the cluster's file)"));
  }
  auto host = ctx.Plugins();
  if (!host.ok()) return ReportError(host.status());
  auto asked = dist::AskClusterStatus(spec, **host, timeout_ms, "weft cluster status");
  if (!asked.ok()) return ReportError(asked.status());
  const std::vector<Answer>& answers = *asked;
  if (json) {
    PrintJson(answers);
  } else {
    PrintTable(answers, ctx.options().config_path);
  }
  const auto silent = std::count_if(answers.begin(), answers.end(), [](const Answer& a) { return !a.status.ok(); });
  if (silent == 0) return kExitOk;
  std::cerr << "weft: " << silent << " of " << answers.size() << " tasks did not answer within " << timeout_ms
            << " ms\n";
  return kExitUserError;
}

// --- weft cluster launch ---------------------------------------------------

struct LaunchArgs {
  std::string model;
  std::vector<std::string> only;
  std::string logs;
  int max_restarts = 20;
  int64_t timeout_s = 3600;
};

std::atomic<int> g_launch_signal{0};
void OnLaunchSignal(int signal) { g_launch_signal.store(signal); }

struct Launched {
  std::string job;
  int64_t index = 0;
  std::string name;  // "/job:ps/task:0"
  std::string log;
  pid_t pid = -1;
  int starts = 0;
  bool running = false;
  bool done = false;  // exited 0
  int exit_code = -1;
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point restart_at;
  std::chrono::milliseconds backoff{200};
};

// weft train stops cleanly on SIGTERM and SIGINT, exiting 128 + the
// signal: a task stopped by a signal all the same.
bool StoppedBySignal(int exit_code) { return exit_code == 128 + SIGTERM || exit_code == 128 + SIGINT; }

std::string SignalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev != nullptr ? StrCat("SIG", abbrev) : StrCat("signal ", signal);
}

Status Spawn(Launched& task, const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, task.log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&files, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A process group of its own: the launcher's terminal signals reach the
  // launcher, which forwards them.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, argv[0].c_str(), &files, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (error != 0) return InternalError("starting ", task.name, ": ", std::strerror(error));
  task.pid = pid;
  task.running = true;
  task.started = std::chrono::steady_clock::now();
  ++task.starts;
  return Status();
}

// DIR/pids: "job task pid starts" per task, replaced whole at each start
// (what a test or a person reads to find a task's process).
void WritePids(const std::string& dir, const std::vector<Launched>& tasks) {
  const std::string path = dir + "/pids";
  {
    std::ofstream out(path + ".tmp");
    for (const Launched& t : tasks)
      out << t.job << ' ' << t.index << ' ' << (t.running ? t.pid : 0) << ' ' << t.starts << '\n';
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

int Launch(Context& ctx, const LaunchArgs& args) {
  auto cluster = ctx.Cluster();
  if (!cluster.ok()) return ReportError(cluster.status());
  const dist::ClusterSpec& spec = **cluster;
  if (!spec.distributed() || ctx.options().config_path.empty()) {
    return ReportError(
        InvalidArgumentError("`weft cluster launch` starts the tasks of a cluster: pass --config with "
                             "a file that has [cluster.jobs]"));
  }
  if (spec.membership != config::Membership::kStatic) {
    return ReportError(InvalidArgumentError(
        "`weft cluster launch` starts the tasks of static [cluster.jobs]; with membership = \"mpi\" or \"slurm\" "
        "the launcher (mpirun, srun) starts them"));
  }
  const bool restart = ctx.config().cluster && ctx.config().cluster->recovery == "auto";
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return ReportError(InternalError("cannot find this program (/proc/self/exe)"));
  std::vector<Launched> tasks;
  for (const dist::JobSpec& job : spec.jobs) {
    for (const dist::TaskSpec& t : job.tasks) {
      Launched l;
      l.job = job.name;
      l.index = t.index;
      l.name = dist::TaskPrefix(job.name, t.index);
      bool chosen = args.only.empty();
      for (std::string only : args.only) {
        if (only.rfind("/job:", 0) != 0) only = "/job:" + only;  // "ps", "worker/task:1"
        chosen = chosen || l.name == only || l.name.rfind(only + "/", 0) == 0;
      }
      if (chosen) tasks.push_back(std::move(l));
    }
  }
  if (tasks.empty()) {
    std::vector<std::string> names;
    for (const dist::Peer& p : dist::ClusterPeers(spec)) names.push_back(p.name);
    return ReportError(InvalidArgumentError("--only ", StrJoin(args.only, ", "), " names no task of the cluster (",
                                            StrJoin(names, ", "), ")"));
  }
  std::string logs = args.logs;
  if (logs.empty()) logs = StrCat("weft-logs/", std::filesystem::path(ctx.options().config_path).stem().string());
  std::error_code ec;
  std::filesystem::create_directories(logs, ec);
  if (ec) return ReportError(InvalidArgumentError("--logs ", Quote(logs), ": cannot create it: ", ec.message()));
  for (Launched& t : tasks) t.log = StrCat(logs, "/", t.job, "-", t.index, ".log");

  struct sigaction action {};
  action.sa_handler = OnLaunchSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  auto argv_of = [&](const Launched& t) {
    return std::vector<std::string>{self,
                                    "train",
                                    args.model,
                                    "--config",
                                    ctx.options().config_path,
                                    "--job",
                                    t.job,
                                    "--task",
                                    std::to_string(t.index)};
  };
  std::cout << "cluster launch: " << tasks.size() << " task" << (tasks.size() == 1 ? "" : "s") << " of "
            << ctx.options().config_path << ", logs in " << logs << "/"
            << (restart ? "; tasks that die are started again ([cluster] recovery = \"auto\")"
                        : "; tasks that die are not started again (set [cluster] recovery = \"auto\")")
            << std::endl;
  for (Launched& t : tasks) {
    if (Status s = Spawn(t, argv_of(t)); !s.ok()) return ReportError(s);
    std::cout << "cluster launch: " << t.name << " started (pid " << t.pid << ")" << std::endl;
  }
  WritePids(logs, tasks);

  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(args.timeout_s);
  std::optional<Clock::time_point> workers_done_at;
  std::optional<Clock::time_point> stopping_since;
  bool chief_done = false;
  int result = kExitOk;
  auto stop_all = [&](int signal) {
    for (const Launched& t : tasks) {
      if (t.running) kill(t.pid, signal);
    }
  };
  for (;;) {
    // Reap what ended.
    bool pids_changed = false;
    for (Launched& t : tasks) {
      if (!t.running) continue;
      int status = 0;
      const pid_t got = waitpid(t.pid, &status, WNOHANG);
      if (got != t.pid) continue;
      t.running = false;
      pids_changed = true;
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      const bool signalled = WIFSIGNALED(status) || StoppedBySignal(code);
      t.exit_code = code;
      if (!signalled && code == 0) {
        t.done = true;
        std::cout << "cluster launch: " << t.name << " (pid " << t.pid << ") finished" << std::endl;
        // The chief ends the run: from now on nothing starts again.
        if (t.job == "worker" && t.index == 0) chief_done = true;
        continue;
      }
      const std::string how = WIFSIGNALED(status) ? StrCat("killed by ", SignalName(WTERMSIG(status)))
                              : signalled         ? StrCat("stopped by ", SignalName(code - 128), " (exit ", code, ")")
                                                  : StrCat("exited ", code);
      const bool retry = restart && !stopping_since && !chief_done && (signalled || code == kExitRetry);
      if (retry && t.starts <= args.max_restarts) {
        if (Clock::now() - t.started > std::chrono::seconds(30)) t.backoff = std::chrono::milliseconds(200);
        t.restart_at = Clock::now() + t.backoff;
        t.backoff = std::min<std::chrono::milliseconds>(t.backoff * 2, std::chrono::seconds(8));
        std::cout << "cluster launch: " << t.name << " (pid " << t.pid << ") " << how << "; restarting (restart "
                  << t.starts << " of at most " << args.max_restarts << ")" << std::endl;
        continue;
      }
      if (restart && chief_done && !stopping_since && (signalled || code == kExitRetry)) {
        // The run is over: a worker lost or giving up now has nothing to
        // rejoin, and its loss costs the run nothing.
        std::cout << "cluster launch: " << t.name << " (pid " << t.pid << ") " << how
                  << " after the chief finished the run; not restarted" << std::endl;
        continue;
      }
      std::cout << "cluster launch: " << t.name << " (pid " << t.pid << ") " << how
                << (retry ? StrCat("; not restarted: it was restarted ", args.max_restarts, " times (--max-restarts)")
                          : std::string())
                << std::endl;
      if (t.job == "worker" && !stopping_since) {
        // A worker that fails for good ends the run.
        result = code > 0 ? code : kExitUserError;
        std::cout << "cluster launch: stopping the others (see " << t.log << ")" << std::endl;
        stopping_since = Clock::now();
        stop_all(SIGTERM);
      }
    }
    // Start again what is due.
    for (Launched& t : tasks) {
      if (t.running || t.done || stopping_since || t.restart_at == Clock::time_point() || Clock::now() < t.restart_at) {
        continue;
      }
      t.restart_at = Clock::time_point();
      if (t.exit_code == 0 || (t.exit_code > 0 && t.exit_code != kExitRetry && !StoppedBySignal(t.exit_code))) continue;
      std::ofstream(t.log, std::ios::app) << "=== restart " << t.starts << " ===" << std::endl;
      if (Status s = Spawn(t, argv_of(t)); !s.ok()) {
        std::cout << "cluster launch: " << s.message() << std::endl;
        continue;
      }
      std::cout << "cluster launch: " << t.name << " started again (pid " << t.pid << ")" << std::endl;
      pids_changed = true;
    }
    if (pids_changed) WritePids(logs, tasks);
    const bool any_running = std::any_of(tasks.begin(), tasks.end(), [](const Launched& t) { return t.running; });
    const bool any_pending = std::any_of(tasks.begin(), tasks.end(), [](const Launched& t) {
      return !t.running && t.restart_at != Clock::time_point();
    });
    if (!any_running && !any_pending) break;
    // The workers all finished: the rest stop by themselves (the chief
    // ends the run); those that do not within 30 s are stopped.
    const bool workers_finished =
        std::all_of(tasks.begin(), tasks.end(), [](const Launched& t) { return t.job != "worker" || t.done; });
    const bool has_workers =
        std::any_of(tasks.begin(), tasks.end(), [](const Launched& t) { return t.job == "worker"; });
    if (has_workers && (workers_finished || chief_done) && !workers_done_at) workers_done_at = Clock::now();
    if (workers_done_at && !stopping_since && Clock::now() - *workers_done_at > std::chrono::seconds(30)) {
      std::cout << "cluster launch: the workers finished 30 s ago; stopping the tasks still running" << std::endl;
      stopping_since = Clock::now();
      stop_all(SIGTERM);
    }
    if (const int signal = g_launch_signal.exchange(0); signal != 0 && !stopping_since) {
      std::cout << "cluster launch: " << SignalName(signal) << "; stopping every task" << std::endl;
      stopping_since = Clock::now();
      result = 128 + signal;
      stop_all(SIGTERM);
    }
    if (Clock::now() >= deadline && !stopping_since) {
      std::cout << "cluster launch: the run took longer than --timeout " << args.timeout_s << " s; stopping it"
                << std::endl;
      stopping_since = Clock::now();
      result = 124;
      stop_all(SIGTERM);
    }
    if (stopping_since && Clock::now() - *stopping_since > std::chrono::seconds(10)) stop_all(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  WritePids(logs, tasks);
  std::cout << "cluster launch: every task ended" << (result == 0 ? "" : StrCat(" (exit ", result, ")")) << std::endl;
  return result;
}

}  // namespace

void AddClusterCommands(CLI::App& app, Runner& run) {
  CLI::App* cluster = app.add_subcommand("cluster", "Operate a running cluster of the config's [cluster]");
  cluster->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  auto timeout_ms = std::make_shared<int64_t>(3000);
  CLI::App* status = cluster->add_subcommand(
      "status",
      "Ask every task for its address, incarnation, last heartbeat, step, step-time percentiles, dropped "
      "gradients and state; exits 1 when a task does not answer");
  status->add_flag("--json", *json, "Print as JSON, one object per task");
  status->add_option("--timeout-ms", *timeout_ms, "How long to wait for each task (default 3000)")
      ->check(CLI::PositiveNumber);
  status->callback([&run, json, timeout_ms] {
    run = [json, timeout_ms](Context& ctx) { return RunStatus(ctx, *json, *timeout_ms); };
  });
  auto launch = std::make_shared<LaunchArgs>();
  CLI::App* launch_cmd = cluster->add_subcommand(
      "launch",
      "Start every task of the config's [cluster.jobs] on this machine as `weft train MODEL --job J --task I`, "
      "each with its own log; with [cluster] recovery = \"auto\", start again a task that is killed or exits 75");
  launch_cmd->add_option("MODEL", launch->model, "The model graph file every task trains")->required();
  launch_cmd->add_option("--only", launch->only,
                         "Only these tasks: a job (ps or /job:ps) or a task (/job:worker/task:1); repeat for more "
                         "(one launcher per host)");
  launch_cmd->add_option("--logs", launch->logs,
                         "Where each task's output goes, as JOB-TASK.log, with a `pids` file (default "
                         "weft-logs/<config name>)");
  launch_cmd->add_option("--max-restarts", launch->max_restarts, "Restarts per task at most (default 20)")
      ->check(CLI::NonNegativeNumber);
  launch_cmd->add_option("--timeout", launch->timeout_s, "Stop the run after this many seconds (default 3600)")
      ->check(CLI::PositiveNumber);
  launch_cmd->footer(
      "Ends with exit 0 when every worker finished and the other tasks stopped; a worker that fails for good "
      "(exit 1 or 2, or past --max-restarts) stops the rest and its code is the launcher's; SIGINT or SIGTERM "
      "stop every task.");
  launch_cmd->callback([&run, launch] { run = [launch](Context& ctx) { return Launch(ctx, *launch); }; });
}

}  // namespace weft::cli
