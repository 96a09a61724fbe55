#include "core/distributed/cluster_status.h"

#include <condition_variable>
#include <mutex>

#include "core/distributed/cluster_runtime.h"
#include "core/distributed/incarnation.h"
#include "core/distributed/rpc.h"

namespace weft::dist {
namespace {

std::vector<TaskAnswer> AskAll(RpcNode& rpc, const std::vector<Peer>& peers, int64_t timeout_ms) {
  std::vector<TaskAnswer> answers(peers.size());
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t remaining = peers.size();
  for (std::size_t i = 0; i < peers.size(); ++i) {
    answers[i].peer = peers[i];
    Request request;
    request.method = Method::kStatus;
    rpc.Call(peers[i], std::move(request), timeout_ms, [&, i](Status s, Response r) {
      std::lock_guard<std::mutex> lock(mutex);
      answers[i].status = std::move(s);
      answers[i].task = std::move(r.status);
      if (--remaining == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return remaining == 0; });
  // "Last heartbeat": what the other tasks' monitors saw.
  for (TaskAnswer& a : answers) {
    for (const TaskAnswer& other : answers) {
      if (!other.status.ok()) continue;
      for (const PeerHealthMsg& p : other.task.peers) {
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

}  // namespace

Expected<std::vector<TaskAnswer>> AskClusterStatus(const ClusterSpec& cluster, const plugin::PluginHost& plugins,
                                                   int64_t timeout_ms, const std::string& identity) {
  if (!cluster.distributed()) {
    return InvalidArgumentError(
        "the config has no [cluster.jobs]: there is no cluster to ask (give the cluster's "
        "config file)");
  }
  RpcNode::Options o;
  o.plugins = &plugins;
  o.identity = identity;
  o.incarnation = NewIncarnation();
  o.cluster_fingerprint = ClusterFingerprint(cluster);
  o.connect_timeout_ms = timeout_ms;
  o.security = SecurityFor(cluster);
  WEFT_ASSIGN_OR_RETURN(auto rpc, RpcNode::Create(o, nullptr));
  // Past the connect timeout, so that a task that is down is named as such.
  return AskAll(*rpc, ClusterPeers(cluster), timeout_ms + 1000);
}

Json TaskAnswerJson(const TaskAnswer& a) {
  const TaskStatusMsg& t = a.task;
  Json j = Json::object();
  j["task"] = a.peer.name;
  j["address"] = a.peer.address;
  j["answered"] = a.status.ok();
  if (!a.status.ok()) j["error"] = a.status.message();
  j["last_heartbeat_ms"] = a.last_heartbeat_ms >= 0 ? Json(a.last_heartbeat_ms) : Json(nullptr);
  if (!a.status.ok()) return j;
  j["incarnation"] = FormatIncarnation(t.incarnation);
  j["role"] = t.role;
  j["state"] = t.state;
  j["step"] = t.step;
  j["total_steps"] = t.total_steps;
  j["global_step"] = t.global_step;
  j["timed"] = t.timed;
  j["steps_timed"] = t.steps_timed;
  j["step_ms_p50"] = t.p50_ms;
  j["step_ms_p90"] = t.p90_ms;
  j["step_ms_p99"] = t.p99_ms;
  j["accepted_gradients"] = t.accepted_gradients;
  j["dropped_gradients"] = t.dropped_gradients;
  Json peers = Json::array();
  for (const PeerHealthMsg& p : t.peers) {
    peers.push_back({{"task", p.task},
                     {"state", p.state},
                     {"incarnation", p.incarnation == 0 ? std::string() : FormatIncarnation(p.incarnation)},
                     {"silent_ms", p.silent_ms},
                     {"round_trip_us", p.round_trip_us}});
  }
  j["peers"] = std::move(peers);
  return j;
}

}  // namespace weft::dist
