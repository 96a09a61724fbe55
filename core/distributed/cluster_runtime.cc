#include "core/distributed/cluster_runtime.h"

#include "core/base/hash.h"
#include "core/runtime/placement_support.h"

namespace weft::dist {

RpcSecurity SecurityFor(const ClusterSpec& cluster) {
  RpcSecurity s;
  s.secret_file = cluster.secret_file;
  s.handshake_timeout_ms = cluster.handshake_timeout_ms;
  s.max_message_bytes = static_cast<uint64_t>(cluster.max_message_mb) << 20;
  return s;
}

uint64_t ClusterFingerprint(const ClusterSpec& cluster) {
  Fnv1a h;
  for (const JobSpec& job : cluster.jobs) {
    h.AddField(job.name);
    for (const TaskSpec& task : job.tasks) h.AddField(task.Url());
  }
  return h.value() == 0 ? 1 : h.value();
}

std::vector<Peer> ClusterPeers(const ClusterSpec& cluster) {
  std::vector<Peer> peers;
  for (int pass = 0; pass < 2; ++pass) {
    for (const JobSpec& job : cluster.jobs) {
      if ((job.name == "worker") != (pass == 0)) continue;
      for (const TaskSpec& task : job.tasks) peers.push_back({TaskPrefix(job.name, task.index), task.Url()});
    }
  }
  return peers;
}

DistSessionOptions SessionOptionsFor(const ClusterSpec& cluster, const config::Config& config) {
  DistSessionOptions o;
  o.tasks = ClusterPeers(cluster);
  o.cluster_fingerprint = ClusterFingerprint(cluster);
  o.connect_timeout_ms = cluster.connect_timeout_ms;
  o.rpc_timeout_ms = cluster.rpc_timeout_ms;
  o.security = SecurityFor(cluster);
  o.heartbeat_interval_ms = cluster.heartbeat_interval_ms;
  o.heartbeat_timeout_ms = cluster.heartbeat_timeout_ms;
  o.placement = runtime::PlacementOptionsFromConfig(config);
  o.optimizer = runtime::SessionOptions::FromConfig(config).optimizer;
  if (config.cluster && config.cluster->transfer_dtype == "bf16") o.transfer_f32_as = DType::kBF16;
  if (config.cluster && config.cluster->variable_reads == "late") o.late_variable_reads = true;
  if (cluster.self) o.identity = cluster.self->ToString();
  return o;
}

Expected<TaskService::Options> ServiceOptionsFor(const ClusterSpec& cluster, const TaskId& self,
                                                 const config::Config& config) {
  const TaskSpec* me = cluster.FindTask(self);
  if (me == nullptr) return InvalidArgumentError(self.ToString(), " is not a task of the cluster");
  TaskService::Options o;
  o.name = self.ToString();
  o.listen_address = me->Url();
  for (const Peer& p : ClusterPeers(cluster)) o.peers[p.name] = p.address;
  o.cluster_fingerprint = ClusterFingerprint(cluster);
  o.connect_timeout_ms = cluster.connect_timeout_ms;
  o.rpc_timeout_ms = cluster.rpc_timeout_ms;
  o.security = SecurityFor(cluster);
  o.heartbeat_interval_ms = cluster.heartbeat_interval_ms;
  o.heartbeat_timeout_ms = cluster.heartbeat_timeout_ms;
  if (config.runtime.inter_op_threads) o.inter_op_threads = static_cast<int>(*config.runtime.inter_op_threads);
  if (config.runtime.intra_op_threads) o.intra_op_threads = static_cast<int>(*config.runtime.intra_op_threads);
  return o;
}

}  // namespace weft::dist
