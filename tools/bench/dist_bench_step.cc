// The null step and the remote loop (weft_dist_bench):
//
//   null_step        the paper's null step: milliseconds per step of a
//                    client ("worker") whose step reads one scalar variable
//                    from each parameter server task (`weft serve`
//                    processes), for 1, 2, 4 and 8 concurrent workers and
//                    1 and 2 ps tasks, and for 1 worker and 8 ps tasks. Its peer is one raw TCP round trip
//                    per ps task (a 8-byte request and answer), the least
//                    such a step could cost over the same network.
//   null_step_auth, null_step_tls  the same with a [cluster]
//                    secret_file (every connection authenticates once), or
//                    with TLS on every link
//   remote_loop      microseconds per iteration of a 1000-iteration while
//                    loop (s += i; i += 1 while i < n) whose "s += i" runs
//                    on /job:ps/task:0 and the rest on /job:worker/task:0
//                    (both `weft serve` processes), vs the same loop in one
//                    process (a local session): the per-iteration cost of
//                    keeping two tasks' frames in step (the loop predicate
//                    and the loop values cross the network every iteration)
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/distributed/dist_session.h"
#include "core/graph/builder.h"
#include "core/graph/control_flow.h"
#include "core/runtime/device_set.h"
#include "core/runtime/session.h"
#include "tools/bench/bench_util.h"
#include "tools/bench/dist_bench.h"
#include "tools/bench/dist_bench_util.h"

namespace weft::bench {

// --- null_step --------------------------------------------------------------------------------

namespace {

struct Tasks {
  std::vector<pid_t> pids;
  std::string config;
  std::vector<dist::Peer> peers;
};

Tasks StartPs(int num_ps, const std::string& dir) {
  Tasks t;
  std::string list;
  for (int i = 0; i < num_ps; ++i) {
    const std::string address = "127.0.0.1:" + std::to_string(FreePort());
    list += (i ? ", \"" : "\"") + address + "\"";
    t.peers.push_back({StrCat("/job:ps/task:", i), "tcp://" + address});
  }
  t.config = dir + "/null_step.toml";
  std::ofstream(t.config) << TlsLines()
                          << "[runtime]\ninter_op_threads = 1\nintra_op_threads = 1\n[cluster]\ntransport = \"tcp\"\n"
                          << (SecretFile().empty() ? "" : "secret_file = \"" + SecretFile() + "\"\n")
                          << "[cluster.jobs]\nps = [" << list << "]\n";
  for (int i = 0; i < num_ps; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string task = std::to_string(i);
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      execl(g_weft_cli.c_str(), g_weft_cli.c_str(), "serve", "--config", t.config.c_str(), "--job", "ps", "--task",
            task.c_str(), static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    t.pids.push_back(pid);
  }
  return t;
}

void StopTasks(const Tasks& t) {
  for (pid_t pid : t.pids) kill(pid, SIGTERM);
  for (pid_t pid : t.pids) waitpid(pid, nullptr, 0);
}

Graph NullStepGraph(int num_ps) {
  GraphBuilder b;
  std::vector<Output> inits;
  for (int p = 0; p < num_ps; ++p) {
    auto on = b.DeviceScope(StrCat("/job:ps/task:", p));
    Output v =
        b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{})}}, StrCat("v", p));
    inits.push_back(b.Op("Assign", {v, b.Scalar<float>(1.0f)}, {}, StrCat("init", p)));
    b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, StrCat("read", p));
  }
  auto g = b.Build();
  Check(g.status());
  return std::move(*g);
}

// Runs in a forked worker: |steps| null steps; writes ms per step (median
// over rounds) to |fd|.
void NullStepWorker(const Tasks& tasks, int num_ps, int steps, int fd) {
  dist::DistSessionOptions o;
  o.tasks = tasks.peers;
  o.connect_timeout_ms = 30000;
  o.security.secret_file = SecretFile();
  auto session = dist::DistSession::Create(NullStepGraph(num_ps), o, Plugins());
  Check(session.status());
  std::vector<std::string> reads, inits;
  for (int p = 0; p < num_ps; ++p) {
    reads.push_back(StrCat("read", p));
    inits.push_back(StrCat("init", p));
  }
  Check((*session)->Run({}, {}, inits, nullptr));
  std::vector<Tensor> out;
  for (int i = 0; i < 50; ++i) Check((*session)->Run({}, reads, {}, &out));  // warm up
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    const auto start = Clock::now();
    for (int i = 0; i < steps; ++i) Check((*session)->Run({}, reads, {}, &out));
    rounds.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count() / steps);
  }
  const double ms = Median(rounds);
  (void)!write(fd, &ms, sizeof ms);
  std::_Exit(0);
}

// The peer: one raw round trip of 8 bytes to each of |num_ps| echo
// processes per step, from |workers| processes at once.
double RawNullStep(int num_ps, int workers, int steps) {
  // One echo peer serves one connection: one set per worker.
  std::vector<std::vector<Peer>> per_worker(static_cast<size_t>(workers));
  for (auto& set : per_worker) {
    for (int p = 0; p < num_ps; ++p) set.push_back(StartPeer({"", 8, -1}));
  }
  std::vector<int> fds(static_cast<size_t>(workers));
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) Die("pipe");
    const pid_t pid = fork();
    if (pid == 0) {
      std::vector<int> socks;
      for (const Peer& p : per_worker[static_cast<size_t>(w)]) socks.push_back(ConnectTo(p.port));
      char buffer[8] = {};
      std::vector<double> rounds;
      for (int r = 0; r < 5; ++r) {
        const auto start = Clock::now();
        for (int i = 0; i < steps; ++i) {
          for (int s : socks) SendAll(s, buffer, 8);
          for (int s : socks) RecvAll(s, buffer, 8);
        }
        rounds.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count() / steps);
      }
      const double ms = Median(rounds);
      (void)!write(pipe_fds[1], &ms, sizeof ms);
      std::_Exit(0);
    }
    close(pipe_fds[1]);
    fds[static_cast<size_t>(w)] = pipe_fds[0];
    pids.push_back(pid);
  }
  std::vector<double> per;
  for (int fd : fds) {
    double ms = 0;
    if (read(fd, &ms, sizeof ms) != sizeof ms) Die("a raw worker failed");
    per.push_back(ms);
    close(fd);
  }
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  for (auto& set : per_worker) {
    for (const Peer& p : set) StopPeer(p);
  }
  return Median(per);
}

}  // namespace

void NullStep() {
  const int steps = g_repeats > 0 ? g_repeats : 200;
  const std::string dir = std::filesystem::temp_directory_path() / ("weft_null_step_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (int num_ps : {1, 2, 8}) {
    for (int workers : {1, 2, 4, 8}) {
      // Eight ps tasks: one worker, whose RunGraph requests go to all of
      // them at once (null_step_ps8_w1 against null_step_ps1_w1).
      if (num_ps == 8 && workers > 1) continue;
      Tasks tasks = StartPs(num_ps, dir);
      std::vector<int> fds;
      std::vector<pid_t> pids;
      for (int w = 0; w < workers; ++w) {
        int pipe_fds[2];
        if (pipe(pipe_fds) != 0) Die("pipe");
        const pid_t pid = fork();
        if (pid == 0) {
          close(pipe_fds[0]);
          NullStepWorker(tasks, num_ps, steps, pipe_fds[1]);
        }
        close(pipe_fds[1]);
        fds.push_back(pipe_fds[0]);
        pids.push_back(pid);
      }
      std::vector<double> per;
      for (int fd : fds) {
        double ms = 0;
        if (read(fd, &ms, sizeof ms) != sizeof ms) Die("a worker failed");
        per.push_back(ms);
        close(fd);
      }
      for (pid_t pid : pids) waitpid(pid, nullptr, 0);
      StopTasks(tasks);
      const double raw = RawNullStep(num_ps, workers, steps * 5);
      Bench(StrCat("null_step_ps", num_ps, "_w", workers, SecuritySuffix()), Median(per), raw, "ms", false);
    }
  }
  std::filesystem::remove_all(dir);
}

// --- remote_loop ------------------------------------------------------------------------------

namespace {

Graph LoopGraph(bool split) {
  GraphBuilder b;
  Output n = b.Placeholder(DType::kI64, Shape{}, "n");
  auto r = WhileLoop(
      b,
      [&](const std::vector<Output>& v) -> Expected<Output> {
        return b.Op("Less", {v[0], n});
      },
      [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
        Output s;
        {
          std::optional<GraphBuilder::Scope> on_ps;
          if (split) on_ps.emplace(b.DeviceScope("/job:ps/task:0"));
          s = b.Op("Add", {v[1], v[0]}, {}, "s");
        }
        return std::vector<Output>{b.Op("Add", {v[0], b.Scalar<int64_t>(1)}), s};
      },
      {b.Scalar<int64_t>(0), b.Scalar<int64_t>(0)});
  if (!r.ok()) Die(std::string(r.status().message()));
  b.Op("Identity", {(*r)[1]}, {}, "sum");
  auto g = b.Build();
  Check(g.status());
  return std::move(*g);
}

}  // namespace

void RemoteLoop() {
  const int64_t n = 1000;
  const int repeats = g_repeats > 0 ? g_repeats : 9;
  const std::string dir = std::filesystem::temp_directory_path() / StrCat("weft_remote_loop_", getpid());
  std::filesystem::create_directories(dir);
  Tasks tasks;
  const std::string ps = StrCat("127.0.0.1:", FreePort()), worker = StrCat("127.0.0.1:", FreePort());
  tasks.config = dir + "/remote_loop.toml";
  std::ofstream(tasks.config) << "[cluster]\ntransport = \"tcp\"\n[cluster.jobs]\nps = [\"" << ps << "\"]\nworker = [\""
                              << worker << "\"]\n";
  tasks.peers = {{"/job:worker/task:0", "tcp://" + worker}, {"/job:ps/task:0", "tcp://" + ps}};
  for (const auto& [job, task] : {std::pair<const char*, const char*>{"ps", "0"}, {"worker", "0"}}) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int null = open("/dev/null", O_WRONLY);
      dup2(null, 1);
      execl(g_weft_cli.c_str(), g_weft_cli.c_str(), "serve", "--config", tasks.config.c_str(), "--job", job, "--task",
            task, static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    tasks.pids.push_back(pid);
  }
  dist::DistSessionOptions o;
  o.tasks = tasks.peers;
  o.connect_timeout_ms = 30000;
  auto remote = dist::DistSession::Create(LoopGraph(true), o, Plugins());
  Check(remote.status());
  auto devices = runtime::DeviceSet::Open(Plugins());
  Check(devices.status());
  auto local = runtime::Session::Create(LoopGraph(false), std::move(*devices));
  Check(local.status());
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"n", Tensor::Scalar<int64_t>(n)}};
  std::vector<Tensor> out;
  auto run_remote = [&] { Check((*remote)->Run(feeds, {"sum"}, {}, &out)); };
  auto run_local = [&] { Check((*local)->Run(feeds, {"sum"}, {}, &out)); };
  run_remote();
  if (out[0].scalar<int64_t>() != n * (n - 1) / 2) Die("remote_loop computed a wrong sum");
  run_local();
  std::vector<double> remote_times, local_times;
  for (int r = 0; r < repeats; ++r) {
    auto time = [](const std::function<void()>& fn) {
      const auto start = Clock::now();
      fn();
      return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    };
    remote_times.push_back(time(run_remote) / static_cast<double>(n));
    local_times.push_back(time(run_local) / static_cast<double>(n));
  }
  remote->reset();
  StopTasks(tasks);
  std::filesystem::remove_all(dir);
  Bench("remote_loop", Median(remote_times), Median(local_times), "us", false);
}

}  // namespace weft::bench
