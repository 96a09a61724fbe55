// The resolved cluster: every task of every job with its address and
// transport, and which task this process is.
//
// A config's [cluster] section (core/config/cluster_config.h) says how to
// find the tasks; ResolveCluster turns it into a ClusterSpec, reading the
// launcher's environment for membership = "mpi" or "slurm" and applying
// --job/--task:
//
//   WEFT_ASSIGN_OR_RETURN(ClusterSpec cluster,
//                         ResolveCluster(config, job_flag, task_flag, ProcessEnvironment()));
//   if (!cluster.distributed()) ...                  // no [cluster]: one process
//   const TaskSpec* me = cluster.Self();             // /job:worker/task:1
//   for (const JobSpec& job : cluster.jobs) ...      // in the order of the file
//
// The rules (which rank is which task, which port it listens on) are in
// docs/distributed.md. Resolution is a pure function of its arguments, so
// every process of a job computes the same cluster from the same file and
// launcher environment.
#ifndef WEFT_CORE_DIST_CLUSTER_H_
#define WEFT_CORE_DIST_CLUSTER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/config/cluster_config.h"
#include "core/config/config.h"

namespace weft::dist {

// Environment variables by name. Tests pass their own; processes pass
// ProcessEnvironment().
using Environment = std::map<std::string, std::string>;

// A copy of this process's environment.
Environment ProcessEnvironment();

// --- Device names -------------------------------------------------------------------------------

// "/job:ps/task:0": the prefix of the devices of one task.
std::string TaskPrefix(std::string_view job, int64_t task);

// A device name qualified with its task: "/job:worker/task:1/device:CPU:0".
struct TaskDeviceName {
  std::string job;
  int64_t task = 0;
  // The device within the task, "/device:CPU:0"; empty for the task itself
  // ("/job:worker/task:1").
  std::string device;

  std::string ToString() const;  // the name again, canonical
};

// Parses a name that starts with /job:<name>/task:<n> (the job
// lower_snake_case, n >= 0), optionally followed by /device:<TYPE>:<n>.
// INVALID_ARGUMENT naming the name and what is wrong. Partial specs
// ("/device:CPU:*", "/job:ps") are the placer's business
// (core/placement/placer.h), not this function's.
Expected<TaskDeviceName> ParseTaskDeviceName(std::string_view name);

// --- The cluster --------------------------------------------------------------------------------

struct TaskSpec {
  int64_t index = 0;         // within its job
  config::HostPort address;  // where it listens
  std::string transport;     // the scheme, "tcp"
  int64_t rank = -1;         // mpi, slurm: the launcher's rank; -1 for static membership

  // "tcp://127.0.0.1:7070"
  std::string Url() const;
};

struct JobSpec {
  std::string name;
  std::string transport;
  std::vector<TaskSpec> tasks;  // task i at index i
};

// Which task a process is.
struct TaskId {
  std::string job;
  int64_t task = 0;

  std::string ToString() const { return TaskPrefix(job, task); }
  friend bool operator==(const TaskId& a, const TaskId& b) { return a.job == b.job && a.task == b.task; }
};

struct ClusterSpec {
  // The jobs, in the order of [cluster.jobs] or [cluster.tasks]; empty
  // when the config has no [cluster] (a single process).
  std::vector<JobSpec> jobs;
  // This process, when known (from the file, --job/--task or the rank).
  std::optional<TaskId> self;
  config::Membership membership = config::Membership::kStatic;
  int64_t connect_timeout_ms = 10000;
  int64_t rpc_timeout_ms = 60000;
  // [cluster] secret_file (resolved), handshake_timeout_ms, max_message_mb.
  std::string secret_file;
  int64_t handshake_timeout_ms = 10000;
  int64_t max_message_mb = 0;
  // [cluster] heartbeat_interval_ms, heartbeat_timeout_ms.
  int64_t heartbeat_interval_ms = 1000;
  int64_t heartbeat_timeout_ms = 10000;

  bool distributed() const { return !jobs.empty(); }
  const JobSpec* FindJob(std::string_view name) const;
  // nullptr when |id| is not a task of the cluster.
  const TaskSpec* FindTask(const TaskId& id) const;
  // This process's task, or nullptr.
  const TaskSpec* Self() const { return self ? FindTask(*self) : nullptr; }
  size_t num_tasks() const;
};

// Resolves |config|'s [cluster] section.
//
// |job| and |task| are --job and --task: each overrides [cluster] job and
// task. With static membership the task of a job with one task defaults
// to 0; a job with more needs a task. With mpi or slurm membership this
// process's task comes from its rank, and a --job/--task that disagrees is
// an error. Without a [cluster] section the result is a single process,
// and --job/--task are an error (there is no job to be).
//
// Errors (INVALID_ARGUMENT) name what is wrong and what to do: an unknown
// job, a task out of range, a launcher variable that is missing or not a
// number (with its name and value), a hostlist that does not parse,
// [cluster.tasks] counts that do not fit the world size, a port past
// 65535.
Expected<ClusterSpec> ResolveCluster(const config::Config& config, const std::optional<std::string>& job,
                                     const std::optional<int64_t>& task, const Environment& env);

// What the transport plugins loaded on this machine make of the cluster's
// schemes, for `weft config check` and the command that starts a task.
struct TransportCheck {
  // A scheme that is neither built in (config::kBuiltinTransports) nor
  // served by a loaded plugin: surely a mistake.
  std::vector<config::ConfigError> errors;
  // A built-in scheme whose plugin is not loaded here (not built on this
  // machine, disabled, or unavailable): another machine may have it.
  std::vector<config::ConfigError> warnings;
};
TransportCheck CheckTransports(const config::ClusterConfig& cluster, const std::vector<std::string>& loaded_schemes);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_CLUSTER_H_
