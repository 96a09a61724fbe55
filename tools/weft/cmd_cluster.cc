// `weft cluster status`: what every task of the config's cluster says
// about itself (docs/distributed.md, "Operations").
#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>

#include "core/dist/cluster_runtime.h"
#include "core/dist/heartbeat.h"
#include "core/dist/incarnation.h"
#include "core/dist/rpc.h"
#include "tools/weft/commands.h"
#include "tools/weft/output.h"

namespace weft::cli {
namespace {

struct Answer {
  dist::Peer peer;
  Status status;  // why it did not answer
  dist::TaskStatusMsg task;
  // The freshest answer any other task's heartbeats got from it (-1: none).
  int64_t last_heartbeat_ms = -1;
  std::string heartbeat_seen_by;
};

std::string Ms(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), v < 10 ? "%.2f" : v < 100 ? "%.1f" : "%.0f", v);
  return text;
}

// Asks every task at once; each answer or failure comes back in order.
std::vector<Answer> AskAll(dist::RpcNode& rpc, const std::vector<dist::Peer>& peers, int64_t timeout_ms) {
  std::vector<Answer> answers(peers.size());
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t remaining = peers.size();
  for (std::size_t i = 0; i < peers.size(); ++i) {
    answers[i].peer = peers[i];
    dist::Request request;
    request.method = dist::Method::kStatus;
    rpc.Call(peers[i], std::move(request), timeout_ms, [&, i](Status s, dist::Response r) {
      std::lock_guard<std::mutex> lock(mutex);
      answers[i].status = std::move(s);
      answers[i].task = std::move(r.status);
      if (--remaining == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return remaining == 0; });
  // "Last heartbeat": what the other tasks' monitors saw, so that it is
  // known for a task that does not answer now.
  for (Answer& a : answers) {
    for (const Answer& other : answers) {
      if (!other.status.ok()) continue;
      for (const dist::PeerHealthMsg& p : other.task.peers) {
        if (p.task != a.peer.name || p.silent_ms < 0) continue;
        if (a.last_heartbeat_ms < 0 || p.silent_ms < a.last_heartbeat_ms) {
          a.last_heartbeat_ms = p.silent_ms;
          a.heartbeat_seen_by = other.peer.name;
        }
      }
    }
  }
  return answers;
}

void PrintJson(const std::vector<Answer>& answers) {
  JsonWriter j(std::cout);
  j.BeginArray();
  for (const Answer& a : answers) {
    const dist::TaskStatusMsg& t = a.task;
    j.BeginObject();
    j.Key("task");
    j.String(a.peer.name);
    j.Key("address");
    j.String(a.peer.address);
    j.Key("answered");
    j.Bool(a.status.ok());
    if (!a.status.ok()) {
      j.Key("error");
      j.String(a.status.message());
    }
    j.Key("last_heartbeat_ms");
    if (a.last_heartbeat_ms >= 0) {
      j.Int(a.last_heartbeat_ms);
    } else {
      j.Null();
    }
    if (a.status.ok()) {
      j.Key("incarnation");
      j.String(dist::FormatIncarnation(t.incarnation));
      j.Key("role");
      j.String(t.role);
      j.Key("state");
      j.String(t.state);
      j.Key("step");
      j.Int(t.step);
      j.Key("total_steps");
      j.Int(t.total_steps);
      j.Key("global_step");
      j.Int(t.global_step);
      j.Key("timed");
      j.String(t.timed);
      j.Key("steps_timed");
      j.Int(t.steps_timed);
      j.Key("step_ms_p50");
      j.Number(t.p50_ms);
      j.Key("step_ms_p90");
      j.Number(t.p90_ms);
      j.Key("step_ms_p99");
      j.Number(t.p99_ms);
      j.Key("accepted_gradients");
      j.Int(t.accepted_gradients);
      j.Key("dropped_gradients");
      j.Int(t.dropped_gradients);
      j.Key("peers");
      j.BeginArray();
      for (const dist::PeerHealthMsg& p : t.peers) {
        j.BeginObject();
        j.Key("task");
        j.String(p.task);
        j.Key("state");
        j.String(p.state);
        j.Key("incarnation");
        j.String(p.incarnation == 0 ? std::string() : dist::FormatIncarnation(p.incarnation));
        j.Key("silent_ms");
        j.Int(p.silent_ms);
        j.Key("round_trip_us");
        j.Int(p.round_trip_us);
        j.EndObject();
      }
      j.EndArray();
    }
    j.EndObject();
  }
  j.EndArray();
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
  dist::RpcNode::Options o;
  o.plugins = *host;
  o.identity = "weft cluster status";
  o.incarnation = dist::NewIncarnation();
  o.cluster_fingerprint = dist::ClusterFingerprint(spec);
  o.connect_timeout_ms = timeout_ms;
  o.security = dist::SecurityFor(spec);
  auto rpc = dist::RpcNode::Create(o, nullptr);
  if (!rpc.ok()) return ReportError(rpc.status());
  // Past the connect timeout, so that a task that is down is named as such.
  const std::vector<Answer> answers = AskAll(**rpc, dist::ClusterPeers(spec), timeout_ms + 1000);
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
}

}  // namespace weft::cli
