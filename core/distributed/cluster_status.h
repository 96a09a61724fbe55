// What every task of a cluster says about itself: `weft cluster status`
// and weft.cluster.status in Python (docs/distributed.md, "Operations").
//
//   WEFT_ASSIGN_OR_RETURN(std::vector<TaskAnswer> answers,
//                         AskClusterStatus(spec, host, 3000));
//   for (const TaskAnswer& a : answers) std::cout << DumpJson(TaskAnswerJson(a));
#ifndef WEFT_CORE_DIST_CLUSTER_STATUS_H_
#define WEFT_CORE_DIST_CLUSTER_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/json.h"
#include "core/base/status.h"
#include "core/distributed/cluster.h"
#include "core/distributed/rpc.h"
#include "core/distributed/wire.h"

namespace weft::plugin {
class PluginHost;
}

namespace weft::dist {

struct TaskAnswer {
  Peer peer;
  Status status;  // why it did not answer (OK when it did)
  TaskStatusMsg task;
  // The freshest answer any other task's heartbeats got from it (-1:
  // none), so that it is known for a task that does not answer now.
  int64_t last_heartbeat_ms = -1;
  std::string heartbeat_seen_by;
};

// Asks every task of |cluster| at once (through |plugins|' transport),
// waiting up to |timeout_ms| to connect to each; one answer per task, in
// ClusterPeers' order. A task that does not answer is an answer with its
// error, not a failure; the call fails only when the cluster has no
// [cluster.jobs] or the transport cannot start.
Expected<std::vector<TaskAnswer>> AskClusterStatus(const ClusterSpec& cluster, const plugin::PluginHost& plugins,
                                                   int64_t timeout_ms, const std::string& identity);

// One answer as an object of `weft cluster status --json`.
Json TaskAnswerJson(const TaskAnswer& answer);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_CLUSTER_STATUS_H_
