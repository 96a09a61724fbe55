#include "core/distributed/cluster.h"

#include <algorithm>
#include <cctype>

#include "core/distributed/hostlist.h"

extern char** environ;  // NOLINT: POSIX

namespace weft::dist {

Environment ProcessEnvironment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    const auto eq = text.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
  }
  return env;
}

// --- Device names -------------------------------------------------------------------------------

std::string TaskPrefix(std::string_view job, int64_t task) { return StrCat("/job:", job, "/task:", task); }

std::string TaskDeviceName::ToString() const { return StrCat(TaskPrefix(job, task), device); }

namespace {

// |text| as an integer when it is 1 to 9 digits (so it fits an int).
bool ParseSmall(std::string_view text, int64_t* out) {
  if (text.empty() || text.size() > 9) return false;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  *out = value;
  return true;
}

}  // namespace

Expected<TaskDeviceName> ParseTaskDeviceName(std::string_view name) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError(Quote(name), " is not a task's device name (", why,
                                "); write /job:<job>/task:<n>, optionally followed by /device:<TYPE>:<n>, as in "
                                "/job:worker/task:1/device:CPU:0");
  };
  if (!name.starts_with("/job:")) return bad("it does not start with /job:");
  std::string_view rest = name.substr(5);
  size_t slash = rest.find('/');
  TaskDeviceName out;
  out.job = std::string(rest.substr(0, slash));
  if (!config::IsSnakeCaseName(out.job)) {
    return bad(StrCat("the job ", Quote(out.job), " is not lower_snake_case"));
  }
  if (slash == std::string_view::npos) return bad("no /task:<n> after the job");
  rest = rest.substr(slash);
  if (!rest.starts_with("/task:")) return bad("expected /task:<n> after the job");
  rest = rest.substr(6);
  slash = rest.find('/');
  if (!ParseSmall(rest.substr(0, slash), &out.task)) {
    return bad(StrCat("the task ", Quote(rest.substr(0, slash)), " is not a number >= 0"));
  }
  if (slash == std::string_view::npos) return out;
  rest = rest.substr(slash);
  if (!rest.starts_with("/device:")) {
    return bad(StrCat("expected /device:<TYPE>:<n> after the task, got ", Quote(rest)));
  }
  const std::string_view device = rest.substr(8);
  const auto colon = device.find(':');
  const std::string_view type = device.substr(0, colon);
  if (type.empty() || !std::all_of(type.begin(), type.end(),
                                   [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; })) {
    return bad(StrCat("the device type ", Quote(type), " is not letters, digits and '_'"));
  }
  int64_t index = 0;
  if (colon == std::string_view::npos || !ParseSmall(device.substr(colon + 1), &index)) {
    return bad("the device needs an index, as in /device:CPU:0");
  }
  std::string upper(type);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  out.device = StrCat("/device:", upper, ":", index);
  return out;
}

// --- The cluster --------------------------------------------------------------------------------

std::string TaskSpec::Url() const { return StrCat(transport, "://", address.ToString()); }

const JobSpec* ClusterSpec::FindJob(std::string_view name) const {
  for (const JobSpec& job : jobs) {
    if (job.name == name) return &job;
  }
  return nullptr;
}

const TaskSpec* ClusterSpec::FindTask(const TaskId& id) const {
  const JobSpec* job = FindJob(id.job);
  if (job == nullptr || id.task < 0 || id.task >= static_cast<int64_t>(job->tasks.size())) return nullptr;
  return &job->tasks[static_cast<size_t>(id.task)];
}

size_t ClusterSpec::num_tasks() const {
  size_t n = 0;
  for (const JobSpec& job : jobs) n += job.tasks.size();
  return n;
}

namespace {

using config::ClusterConfig;
using config::ClusterJobConfig;
using config::Membership;

std::string TaskCountText(const std::string& job, size_t count) {
  return StrCat("job '", job, "' has ", count, count == 1 ? " task (0)" : StrCat(" tasks (0..", count - 1, ")"));
}

std::string JobNames(const ClusterConfig& cluster) {
  std::vector<std::string> names;
  for (const ClusterJobConfig& job : cluster.jobs) names.push_back(StrCat("'", job.name, "'"));
  return StrJoin(names, ", ");
}

// Where a [cluster] key was set: " (site.toml:4:7)", or "" for a default.
std::string WhereSet(const config::Config& config, std::string_view key) {
  auto it = config.values.find("cluster");
  if (it == config.values.end()) return "";
  const config::SourcePos* pos = it->second.PositionOf(key);
  return pos == nullptr ? "" : StrCat(" (", pos->ToString(), ")");
}

// The rank of every task: the host it runs on and its index among the
// tasks of that host.
struct Slot {
  std::string host;
  int64_t local = 0;
};
struct Layout {
  int64_t rank = 0;
  int64_t world = 0;
  std::string world_var;  // "OMPI_COMM_WORLD_SIZE=3", for messages
  std::vector<Slot> slots;
};

class LauncherEnv {
 public:
  LauncherEnv(const config::Config& config, const Environment& env) : config_(config), env_(env) {
    const ClusterConfig& cluster = *config.cluster;
    membership_ =
        StrCat("membership = \"", config::MembershipName(cluster.membership), "\"", WhereSet(config, "membership"));
    launch_ =
        cluster.membership == Membership::kMpi
            ? StrCat("start every task with Open MPI's mpirun, e.g. mpirun -np 3 weft serve --config ", config.source)
            : StrCat("start every task with srun in a Slurm allocation, e.g. srun -n 3 weft serve --config ",
                     config.source);
  }

  bool Has(const std::string& name) const { return env_.count(name) != 0; }
  const std::string& Get(const std::string& name) const { return env_.at(name); }

  // The variable |name| as an integer >= |min|.
  Expected<int64_t> Int(const std::string& name, int64_t min) const {
    auto it = env_.find(name);
    if (it == env_.end()) {
      return InvalidArgumentError(config_.source, ": ", membership_, ", but ", name, " is not set: ", launch_);
    }
    int64_t value = 0;
    if (!ParseSmall(it->second, &value) || value < min) {
      return InvalidArgumentError(config_.source, ": ", membership_, ", but ", name, " is ", Quote(it->second),
                                  ", not an integer >= ", min);
    }
    return value;
  }

  // The first of |names| that is set.
  Expected<std::pair<std::string, std::string>> Either(const std::string& a, const std::string& b) const {
    for (const std::string& name : {a, b}) {
      if (auto it = env_.find(name); it != env_.end()) return std::make_pair(name, it->second);
    }
    return InvalidArgumentError(config_.source, ": ", membership_, ", but neither ", a, " nor ", b,
                                " is set: ", launch_);
  }

  Status Error(std::string_view what) const {
    return InvalidArgumentError(config_.source, ": ", membership_, ": ", what);
  }

 private:
  const config::Config& config_;
  const Environment& env_;
  std::string membership_;
  std::string launch_;
};

// Open MPI: ranks fill the hosts in order, OMPI_COMM_WORLD_LOCAL_SIZE per
// host (mpirun's default by-slot mapping).
Expected<Layout> MpiLayout(const ClusterConfig& cluster, const LauncherEnv& env) {
  Layout layout;
  WEFT_ASSIGN_OR_RETURN(layout.world, env.Int("OMPI_COMM_WORLD_SIZE", 1));
  WEFT_ASSIGN_OR_RETURN(layout.rank, env.Int("OMPI_COMM_WORLD_RANK", 0));
  WEFT_ASSIGN_OR_RETURN(const int64_t local_size, env.Int("OMPI_COMM_WORLD_LOCAL_SIZE", 1));
  WEFT_ASSIGN_OR_RETURN(const int64_t local_rank, env.Int("OMPI_COMM_WORLD_LOCAL_RANK", 0));
  layout.world_var = StrCat("OMPI_COMM_WORLD_SIZE=", layout.world);
  if (layout.rank >= layout.world) {
    return env.Error(StrCat("OMPI_COMM_WORLD_RANK=", layout.rank, " is not below OMPI_COMM_WORLD_SIZE=", layout.world));
  }
  if (local_size > layout.world || local_rank >= local_size) {
    return env.Error(StrCat("OMPI_COMM_WORLD_LOCAL_RANK=", local_rank, " and OMPI_COMM_WORLD_LOCAL_SIZE=", local_size,
                            " do not fit OMPI_COMM_WORLD_SIZE=", layout.world));
  }
  const int64_t hosts = static_cast<int64_t>(cluster.hosts.size());
  if (hosts == 0) {
    if (local_size != layout.world) {
      return env.Error(StrCat("the ranks span hosts (OMPI_COMM_WORLD_LOCAL_SIZE=", local_size,
                              " of OMPI_COMM_WORLD_SIZE=", layout.world,
                              "): list the hosts in [cluster] hosts = [...] in the order mpirun fills them, and start "
                              "the same number of ranks on each (mpirun -npernode N); or start every rank on one "
                              "host"));
    }
    for (int64_t r = 0; r < layout.world; ++r) layout.slots.push_back({cluster.mpi_host, r});
    return layout;
  }
  if (hosts * local_size != layout.world) {
    return env.Error(StrCat("[cluster] hosts lists ", hosts, " hosts and this host runs OMPI_COMM_WORLD_LOCAL_SIZE=",
                            local_size, " ranks, but OMPI_COMM_WORLD_SIZE=", layout.world, " is not ", hosts, " x ",
                            local_size, ": start the same number of ranks on every listed host, e.g. mpirun -np ",
                            hosts * local_size, " -npernode ", local_size));
  }
  if (local_rank != layout.rank % local_size) {
    return env.Error(StrCat("rank ", layout.rank, " has OMPI_COMM_WORLD_LOCAL_RANK=", local_rank,
                            ", but filling the hosts in order gives it ", layout.rank % local_size,
                            ": start with mpirun --map-by slot (the default), not by node"));
  }
  for (int64_t r = 0; r < layout.world; ++r) {
    layout.slots.push_back({cluster.hosts[static_cast<size_t>(r / local_size)], r % local_size});
  }
  return layout;
}

// Slurm: the step's nodes and its tasks per node, ranks in block order.
Expected<Layout> SlurmLayout(const LauncherEnv& env) {
  Layout layout;
  WEFT_ASSIGN_OR_RETURN(layout.world, env.Int("SLURM_NTASKS", 1));
  WEFT_ASSIGN_OR_RETURN(layout.rank, env.Int("SLURM_PROCID", 0));
  layout.world_var = StrCat("SLURM_NTASKS=", layout.world);
  if (layout.rank >= layout.world) {
    return env.Error(StrCat("SLURM_PROCID=", layout.rank, " is not below SLURM_NTASKS=", layout.world));
  }
  WEFT_ASSIGN_OR_RETURN(auto nodelist, env.Either("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"));
  auto hosts = ExpandHostlist(nodelist.second);
  if (!hosts.ok()) {
    return env.Error(StrCat(nodelist.first, " is ", Quote(nodelist.second), ": ", hosts.status().message()));
  }
  for (std::string& host : *hosts) {
    auto checked = config::ParseHost(host);
    if (!checked.ok()) {
      return env.Error(StrCat(nodelist.first, " is ", Quote(nodelist.second), ": ", checked.status().message()));
    }
    host = *checked;
  }
  WEFT_ASSIGN_OR_RETURN(auto per_node, env.Either("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"));
  auto counts = ParseTasksPerNode(per_node.second);
  if (!counts.ok()) {
    return env.Error(StrCat(per_node.first, " is ", Quote(per_node.second), ": ", counts.status().message()));
  }
  if (counts->size() != hosts->size()) {
    return env.Error(StrCat(nodelist.first, "=", nodelist.second, " names ", hosts->size(), " hosts, but ",
                            per_node.first, "=", per_node.second, " gives task counts for ", counts->size()));
  }
  int64_t total = 0;
  for (size_t h = 0; h < hosts->size(); ++h) {
    for (int64_t local = 0; local < (*counts)[h]; ++local) layout.slots.push_back({(*hosts)[h], local});
    total += (*counts)[h];
  }
  if (total != layout.world) {
    return env.Error(
        StrCat(per_node.first, "=", per_node.second, " adds up to ", total, " tasks, but SLURM_NTASKS=", layout.world));
  }
  if (env.Has("SLURM_LOCALID")) {
    WEFT_ASSIGN_OR_RETURN(const int64_t local, env.Int("SLURM_LOCALID", 0));
    const Slot& slot = layout.slots[static_cast<size_t>(layout.rank)];
    if (local != slot.local) {
      return env.Error(StrCat("rank ", layout.rank, " has SLURM_LOCALID=", local, ", but block distribution gives it ",
                              slot.local, " on ", slot.host,
                              ": start with srun --distribution=block (the default), not cyclic"));
    }
  }
  return layout;
}

// How many ranks each job of [cluster.tasks] gets.
Expected<std::vector<int64_t>> RanksPerJob(const config::Config& config, const Layout& layout) {
  const ClusterConfig& cluster = *config.cluster;
  int64_t fixed = 0;
  const ClusterJobConfig* rest = nullptr;
  std::vector<std::string> written;
  for (const ClusterJobConfig& job : cluster.jobs) {
    if (job.rank_count) {
      fixed += *job.rank_count;
      written.push_back(StrCat(job.name, " = ", *job.rank_count));
    } else {
      rest = &job;
      written.push_back(StrCat(job.name, " = \"rest\""));
    }
  }
  const std::string tasks = StrCat(config.source, ": [cluster.tasks] (", StrJoin(written, ", "), ")");
  if (fixed > layout.world || (rest != nullptr && fixed == layout.world)) {
    // With a "rest" job, one rank more than the fixed counts.
    return InvalidArgumentError(tasks, " needs ", rest != nullptr ? StrCat("at least ", fixed + 1) : StrCat(fixed),
                                " ranks, but the launcher started ", layout.world, " (", layout.world_var,
                                "): start more ranks or lower the counts");
  }
  if (rest == nullptr && fixed < layout.world) {
    return InvalidArgumentError(tasks, " gives jobs ranks 0..", fixed - 1, ", but the launcher started ", layout.world,
                                " (", layout.world_var, "), leaving ranks ", fixed, "..", layout.world - 1,
                                " without a job: give one job \"rest\", or start exactly ", fixed, " ranks");
  }
  std::vector<int64_t> counts;
  for (const ClusterJobConfig& job : cluster.jobs) counts.push_back(job.rank_count.value_or(layout.world - fixed));
  return counts;
}

Expected<ClusterSpec> ResolveLaunched(const config::Config& config, ClusterSpec spec, const Environment& environment) {
  const ClusterConfig& cluster = *config.cluster;
  LauncherEnv env(config, environment);
  WEFT_ASSIGN_OR_RETURN(Layout layout,
                        cluster.membership == Membership::kMpi ? MpiLayout(cluster, env) : SlurmLayout(env));
  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> counts, RanksPerJob(config, layout));
  int64_t rank = 0;
  for (size_t j = 0; j < cluster.jobs.size(); ++j) {
    const ClusterJobConfig& job_config = cluster.jobs[j];
    JobSpec job{job_config.name, cluster.TransportOf(job_config), {}};
    for (int64_t t = 0; t < counts[j]; ++t, ++rank) {
      const Slot& slot = layout.slots[static_cast<size_t>(rank)];
      const int64_t port = cluster.base_port + slot.local;
      if (port > 65535) {
        return InvalidArgumentError(config.source, ": [cluster] base_port = ", cluster.base_port,
                                    WhereSet(config, "base_port"), " plus ", slot.local, " (the index of rank ", rank,
                                    " on ", slot.host, ") is past port 65535: lower base_port");
      }
      job.tasks.push_back({t, config::HostPort{slot.host, static_cast<int>(port)}, job.transport, rank});
      if (rank == layout.rank) spec.self = TaskId{job.name, t};
    }
    spec.jobs.push_back(std::move(job));
  }
  return spec;
}

// This process's task under static membership, from the flags and the file.
Status ResolveStaticSelf(const config::Config& config, const std::optional<std::string>& job_flag,
                         const std::optional<int64_t>& task_flag, ClusterSpec& spec) {
  const ClusterConfig& cluster = *config.cluster;
  std::optional<std::string> job = job_flag;
  std::string job_source = job_flag ? "--job" : "";
  if (!job && !cluster.job.empty()) {
    job = cluster.job;
    job_source = StrCat("[cluster] job", WhereSet(config, "job"));
  }
  std::optional<int64_t> task = task_flag;
  std::string task_source = task_flag ? StrCat("--task ", *task_flag) : "";
  if (!task && cluster.task) {
    task = cluster.task;
    task_source = StrCat("[cluster] task = ", *cluster.task, WhereSet(config, "task"));
  }
  if (!job && !task) return Status();
  if (!job) {
    return InvalidArgumentError(task_source,
                                " says which task this process is, but nothing says of which job: "
                                "pass --job (or set [cluster] job)");
  }
  const JobSpec* found = spec.FindJob(*job);
  if (found == nullptr) {
    std::vector<std::string> names;
    for (const JobSpec& j : spec.jobs) names.push_back(j.name);
    const std::string hint = ClosestMatch(*job, names);
    return InvalidArgumentError(
        job_source, " names job ", Quote(*job), ", which [cluster.jobs] of ", config.source, " does not have",
        hint.empty() ? StrCat(" (the jobs: ", JobNames(cluster), ")") : StrCat("; did you mean '", hint, "'?"));
  }
  if (!task) {
    if (found->tasks.size() != 1) {
      return InvalidArgumentError(TaskCountText(found->name, found->tasks.size()),
                                  "; say which this process is with --task (or [cluster] task)");
    }
    task = 0;
  }
  if (*task >= static_cast<int64_t>(found->tasks.size())) {
    return InvalidArgumentError(task_source, " is out of range: ", TaskCountText(found->name, found->tasks.size()));
  }
  spec.self = TaskId{*job, *task};
  return Status();
}

}  // namespace

Expected<ClusterSpec> ResolveCluster(const config::Config& config, const std::optional<std::string>& job,
                                     const std::optional<int64_t>& task, const Environment& env) {
  if (!config.cluster) {
    if (job || task) {
      return InvalidArgumentError(job ? StrCat("--job ", *job) : StrCat("--task ", *task), " given, but ",
                                  config.source,
                                  " has no [cluster] section: a single process has no job or task. Add [cluster] "
                                  "(see docs/distributed.md) or drop the flag");
    }
    return ClusterSpec{};
  }
  const ClusterConfig& cluster = *config.cluster;
  ClusterSpec spec;
  spec.membership = cluster.membership;
  spec.connect_timeout_ms = cluster.connect_timeout_ms;
  spec.rpc_timeout_ms = cluster.rpc_timeout_ms;
  spec.secret_file = cluster.secret_file;
  spec.handshake_timeout_ms = cluster.handshake_timeout_ms;
  spec.max_message_mb = cluster.max_message_mb;
  spec.heartbeat_interval_ms = cluster.heartbeat_interval_ms;
  spec.heartbeat_timeout_ms = cluster.heartbeat_timeout_ms;
  if (task && *task < 0) return InvalidArgumentError("--task ", *task, " is negative; tasks count from 0");
  if (cluster.membership == Membership::kStatic) {
    for (const ClusterJobConfig& job_config : cluster.jobs) {
      JobSpec resolved{job_config.name, cluster.TransportOf(job_config), {}};
      for (size_t t = 0; t < job_config.addresses.size(); ++t) {
        resolved.tasks.push_back({static_cast<int64_t>(t), job_config.addresses[t], resolved.transport, -1});
      }
      spec.jobs.push_back(std::move(resolved));
    }
    WEFT_RETURN_IF_ERROR(ResolveStaticSelf(config, job, task, spec));
    return spec;
  }
  WEFT_ASSIGN_OR_RETURN(spec, ResolveLaunched(config, std::move(spec), env));
  // The launcher decides; a flag may only agree.
  if ((job && *job != spec.self->job) || (task && *task != spec.self->task)) {
    const std::string flags =
        StrCat(job ? StrCat("--job ", *job) : "", job && task ? " " : "", task ? StrCat("--task ", *task) : "");
    return InvalidArgumentError(flags, " disagrees with the launcher: with membership = \"",
                                config::MembershipName(cluster.membership), "\" this rank is ", spec.self->ToString(),
                                " by [cluster.tasks]; drop the flag");
  }
  return spec;
}

TransportCheck CheckTransports(const ClusterConfig& cluster, const std::vector<std::string>& loaded_schemes) {
  TransportCheck out;
  std::vector<std::string> known(std::begin(config::kBuiltinTransports), std::end(config::kBuiltinTransports));
  for (const std::string& scheme : loaded_schemes) {
    if (std::find(known.begin(), known.end(), scheme) == known.end()) known.push_back(scheme);
  }
  auto check = [&](const std::string& scheme, const config::SourcePos& pos, std::string path) {
    if (std::find(loaded_schemes.begin(), loaded_schemes.end(), scheme) != loaded_schemes.end()) return;
    if (std::find(std::begin(config::kBuiltinTransports), std::end(config::kBuiltinTransports), scheme) !=
        std::end(config::kBuiltinTransports)) {
      out.warnings.push_back({pos, std::move(path),
                              StrCat("the \"", scheme,
                                     "\" transport plugin is not loaded on this machine (`weft "
                                     "plugins` says why); tasks started here cannot use it")});
      return;
    }
    const std::string hint = ClosestMatch(scheme, known);
    out.errors.push_back({pos, std::move(path),
                          StrCat("unknown transport \"", scheme,
                                 "\": not built in (tcp, zmq, rdma) and no loaded "
                                 "plugin serves it",
                                 hint.empty() ? "" : StrCat("; did you mean \"", hint, "\"?"))});
  };
  const bool default_used = std::any_of(cluster.jobs.begin(), cluster.jobs.end(),
                                        [](const ClusterJobConfig& job) { return job.transport.empty(); });
  if (default_used) check(cluster.transport, cluster.transport_pos, "cluster.transport");
  for (const ClusterJobConfig& job : cluster.jobs) {
    if (!job.transport.empty()) check(job.transport, job.transport_pos, StrCat("cluster.transports.", job.name));
  }
  return out;
}

}  // namespace weft::dist
