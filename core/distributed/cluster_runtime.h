// From a resolved cluster (cluster.h) to the options of the runtime's
// pieces: the client session and the task service.
#ifndef WEFT_CORE_DIST_CLUSTER_RUNTIME_H_
#define WEFT_CORE_DIST_CLUSTER_RUNTIME_H_

#include <cstdint>

#include "core/config/config.h"
#include "core/distributed/cluster.h"
#include "core/distributed/dist_session.h"
#include "core/distributed/task_service.h"

namespace weft::dist {

// A hash of the cluster's jobs, tasks and addresses: tasks of two
// clusters whose configs share an address refuse each other's calls.
uint64_t ClusterFingerprint(const ClusterSpec& cluster);

// Every task, those of the "worker" job first (unpinned nodes prefer the
// first task's devices), then the other jobs in the order of the file.
std::vector<Peer> ClusterPeers(const ClusterSpec& cluster);

// [cluster]'s security keys as the RPC layer takes them.
RpcSecurity SecurityFor(const ClusterSpec& cluster);

DistSessionOptions SessionOptionsFor(const ClusterSpec& cluster, const config::Config& config);

// The options of the task |self| of |cluster|.
Expected<TaskService::Options> ServiceOptionsFor(const ClusterSpec& cluster, const TaskId& self,
                                                 const config::Config& config);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_CLUSTER_RUNTIME_H_
