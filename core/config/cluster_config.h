// The [cluster] section: which processes make up a distributed Weft job.
//
// A cluster is a set of jobs ("ps", "worker", ...), each a list of tasks;
// every task is one process with an address other tasks reach it at. The
// section says how the tasks are found, which transport each job speaks,
// the deadlines of connections and RPCs, and optionally which task this
// process is:
//
//   [cluster]
//   transport = "tcp"
//   job = "worker"
//   task = 0
//   [cluster.jobs]
//   ps = ["127.0.0.1:7070"]
//   worker = ["127.0.0.1:7071", "127.0.0.1:7072"]
//
// Membership is "static" (the addresses of [cluster.jobs]), "mpi" or
// "slurm" (ranks and hosts from the launcher's environment, mapped to jobs
// by [cluster.tasks]; core/distributed resolves them). Everything a file can get
// wrong is checked when it is loaded, with positions (ParseConfig does it
// through internal/cluster_parse.h); what depends on the machine (which
// transport plugins are loaded, the launcher's variables) is checked by
// core/distributed/cluster.h.
// docs/distributed.md documents every key and rule.
#ifndef WEFT_CORE_CONFIG_CLUSTER_CONFIG_H_
#define WEFT_CORE_CONFIG_CLUSTER_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/base/status.h"
#include "core/config/options.h"
#include "core/config/value.h"

namespace weft::config {

// The transports Weft ships (plugins/transports/<name>). A scheme a
// third-party plugin serves is accepted when the file is parsed and checked
// against the loaded plugins by `weft config check` and by the command that
// starts a task.
inline constexpr std::string_view kBuiltinTransports[] = {"tcp", "zmq", "rdma"};

enum class Membership { kStatic, kMpi, kSlurm };

// "static", "mpi", "slurm".
std::string_view MembershipName(Membership membership);

// A network address without a scheme: "10.0.0.5:7070", "node01:7070",
// "[::1]:7070".
struct HostPort {
  std::string host;  // without brackets; lower-case
  int port = 0;      // 1..65535

  // "host:port", with IPv6 hosts in brackets.
  std::string ToString() const;
};

// Parses "host:port". The host is a hostname (letters, digits, '-' and
// '.'), a dotted IPv4 address, or an IPv6 address in brackets; the port is
// 1..65535. The error says what is wrong with |text| (without naming it:
// callers add the key and the value).
Expected<HostPort> ParseHostPort(std::string_view text);

// Checks a host without a port ("node01", "10.0.0.5", "::1" or "[::1]");
// returns it normalised (lower-case, no brackets).
Expected<std::string> ParseHost(std::string_view text);

// Whether |name| is lower_snake_case: a letter, then letters, digits or
// '_'. Job names must be.
bool IsSnakeCaseName(std::string_view name);

// Whether |scheme| is a lower-case URL scheme ("tcp", "zmq+tcp").
bool IsTransportScheme(std::string_view scheme);

// One job of [cluster.jobs] (static membership) or [cluster.tasks]
// (mpi, slurm), in the order of the file.
struct ClusterJobConfig {
  std::string name;
  SourcePos pos;  // of its key
  // Static membership: the address of each task, task i at index i.
  std::vector<HostPort> addresses;
  std::vector<SourcePos> address_pos;
  // mpi, slurm: how many ranks the job gets; nullopt for "rest" (the ranks
  // the other jobs leave).
  std::optional<int64_t> rank_count;
  // [cluster.transports] override; empty: the cluster's transport.
  std::string transport;
  SourcePos transport_pos;
};

struct ClusterConfig {
  SourcePos pos;  // of the [cluster] header
  std::string transport = "tcp";
  SourcePos transport_pos;  // where transport was set; the header when defaulted
  int64_t connect_timeout_ms = 10000;
  int64_t rpc_timeout_ms = 60000;
  // The task this process is; empty/nullopt when the file does not say
  // (--job/--task or the launcher do).
  std::string job;
  std::optional<int64_t> task;
  Membership membership = Membership::kStatic;
  // mpi and slurm: task ports are base_port + the task's index on its host.
  int64_t base_port = 7070;
  // mpi: the host of every task when all ranks run on one host.
  std::string mpi_host = "127.0.0.1";
  // mpi: the hosts in the order mpirun fills them, when ranks span hosts.
  std::vector<std::string> hosts;
  // The jobs, in the order of the file.
  std::vector<ClusterJobConfig> jobs;
  // weft train: "greedy_bytes" or "round_robin"
  // (core/placement/variable_placement.h).
  std::string variable_placement = "greedy_bytes";
  // "f32" or "bf16": the type f32 tensors travel in between the CPUs of
  // two tasks (bf16: narrowed before the _Send, widened after the _Recv;
  // docs/distributed.md, "Smaller transfers: transfer_dtype").
  std::string transfer_dtype = "f32";
  // "at_start" or "late": when a variable read on another task is pulled
  // (docs/distributed.md, "When variables are read").
  std::string variable_reads = "at_start";
  // weft train: how long a non-chief worker waits for the variables.
  int64_t init_timeout_s = 300;
  // weft train: variables above this many MiB are split across the ps
  // tasks (core/placement/variable_partition.h).
  double partition_mb = 64;
  // weft train, mode "allreduce": the collectives backend ("auto", "gloo",
  // "nccl") and the deadline of the rendezvous and of each collective.
  std::string collectives = "auto";
  int64_t collective_timeout_ms = 60000;
  // Security (docs/distributed.md, "Security"): the shared secret every
  // connection proves it knows (resolved against the config's directory;
  // empty: no authentication), how long an accepted connection has to
  // authenticate and say Hello, and the largest message a peer may send
  // (0: each transport's own max_message_mb).
  std::string secret_file;
  SourcePos secret_file_pos;
  int64_t handshake_timeout_ms = 10000;
  int64_t max_message_mb = 0;
  // Failure detection (core/distributed/heartbeat.h): how often every process
  // heartbeats the tasks it works with, and how long a task may stay
  // silent before it is declared lost and what waits on it fails.
  int64_t heartbeat_interval_ms = 1000;
  int64_t heartbeat_timeout_ms = 10000;
  // weft train (docs/distributed.md, "Recovery"): "off", or "auto": the
  // chief restores the ps tasks from the newest checkpoint when one comes
  // back restarted, a restarted chief resumes, other workers wait and
  // carry on; each waits at most recovery_timeout_s, then exits 75 for its
  // launcher to restart it.
  std::string recovery = "off";
  SourcePos recovery_pos;
  int64_t recovery_timeout_s = 300;

  // The job named |name|, or nullptr.
  const ClusterJobConfig* FindJob(std::string_view name) const;
  // The scheme the tasks of job |of| speak: its override or the cluster's.
  const std::string& TransportOf(const ClusterJobConfig& of) const;
};

// The specs of [cluster]'s scalar keys, for validation and `weft config
// keys`.
std::vector<OptionSpec> ClusterSpecs();

// The documented tables of [cluster] ("cluster.jobs.<job>", ...), listed
// with the scalar keys by `weft config keys`.
std::vector<std::pair<std::string, OptionSpec>> ClusterTableKeys();

}  // namespace weft::config

#endif  // WEFT_CORE_CONFIG_CLUSTER_CONFIG_H_
