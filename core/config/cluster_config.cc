#include "core/config/cluster_config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include "core/config/internal/cluster_parse.h"
#include "core/config/internal/toml_convert.h"

namespace weft::config {

std::string_view MembershipName(Membership membership) {
  switch (membership) {
    case Membership::kStatic: return "static";
    case Membership::kMpi: return "mpi";
    case Membership::kSlurm: return "slurm";
  }
  return "static";
}

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return StrCat("[", host, "]:", port);
  return StrCat(host, ":", port);
}

namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool AllDigits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A hostname: dot-separated labels of letters, digits, '-' and '_' (Slurm
// node names often have one), none empty, none starting or ending with '-'.
bool IsHostname(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (const std::string& label : StrSplit(host, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
    }
  }
  return true;
}

bool IsIpv6(std::string_view host) {
  // A zone ("fe80::1%eth0") is allowed and not checked further.
  const std::string address(host.substr(0, host.find('%')));
  in6_addr out{};
  return inet_pton(AF_INET6, address.c_str(), &out) == 1;
}

bool IsIpv4(std::string_view host) {
  const std::string address(host);
  in_addr out{};
  return inet_pton(AF_INET, address.c_str(), &out) == 1;
}

// The host part of an address, checked; |bracketed| when it was written
// in brackets (so it must be IPv6).
Expected<std::string> CheckHost(std::string_view host, bool bracketed) {
  if (host.empty()) return InvalidArgumentError("the host is empty");
  if (bracketed) {
    if (!IsIpv6(host)) return InvalidArgumentError(Quote(host), " is not an IPv6 address");
    return Lower(host);
  }
  if (host.find(':') != std::string_view::npos) {
    if (IsIpv6(host)) return InvalidArgumentError("an IPv6 address needs brackets, as in \"[::1]:7070\"");
    return InvalidArgumentError(Quote(host), " is not a host");
  }
  if (std::all_of(host.begin(), host.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    if (!IsIpv4(host)) {
      return InvalidArgumentError(Quote(host), " is not an IPv4 address (four numbers 0..255 joined by '.')");
    }
    return std::string(host);
  }
  if (!IsHostname(host)) {
    return InvalidArgumentError(Quote(host),
                                " is not a hostname (letters, digits, '-' and "
                                "'_', in labels joined by '.')");
  }
  return Lower(host);
}

}  // namespace

Expected<std::string> ParseHost(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    return CheckHost(text.substr(1, text.size() - 2), true);
  }
  if (text.find(':') != std::string_view::npos && IsIpv6(text)) return Lower(text);
  return CheckHost(text, false);
}

Expected<HostPort> ParseHostPort(std::string_view text) {
  if (text.empty()) return InvalidArgumentError("it is empty");
  if (text.find("://") != std::string_view::npos) {
    return InvalidArgumentError(
        "write host:port without a scheme; the transport comes from "
        "cluster.transport or [cluster.transports]");
  }
  std::string_view host;
  std::string_view port;
  bool bracketed = false;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return InvalidArgumentError("'[' has no matching ']'");
    host = text.substr(1, close - 1);
    bracketed = true;
    std::string_view rest = text.substr(close + 1);
    if (rest.empty()) return InvalidArgumentError("it has no port (write host:port, e.g. \"[::1]:7070\")");
    if (rest.front() != ':') return InvalidArgumentError("expected ':' and a port after ']'");
    port = rest.substr(1);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return InvalidArgumentError("it has no port (write host:port, e.g. \"127.0.0.1:7070\")");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      if (IsIpv6(text) || IsIpv6(host)) {
        return InvalidArgumentError("an IPv6 address needs brackets, as in \"[::1]:7070\"");
      }
      return InvalidArgumentError("it has more than one ':'");
    }
  }
  WEFT_ASSIGN_OR_RETURN(std::string checked_host, CheckHost(host, bracketed));
  if (port.empty()) return InvalidArgumentError("the port is empty");
  if (!AllDigits(port)) return InvalidArgumentError("the port ", Quote(port), " is not a number");
  if (port.size() > 5 || std::stoi(std::string(port)) < 1 || std::stoi(std::string(port)) > 65535) {
    return InvalidArgumentError("the port ", port, " is out of range 1..65535");
  }
  return HostPort{checked_host, std::stoi(std::string(port))};
}

bool IsSnakeCaseName(std::string_view name) {
  if (name.empty() || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'; });
}

bool IsTransportScheme(std::string_view scheme) {
  if (scheme.empty() || !(scheme[0] >= 'a' && scheme[0] <= 'z')) return false;
  return std::all_of(scheme.begin(), scheme.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
  });
}

const ClusterJobConfig* ClusterConfig::FindJob(std::string_view name) const {
  for (const ClusterJobConfig& candidate : jobs) {
    if (candidate.name == name) return &candidate;
  }
  return nullptr;
}

const std::string& ClusterConfig::TransportOf(const ClusterJobConfig& of) const {
  return of.transport.empty() ? transport : of.transport;
}

namespace {

OptionSpec MakeSpec(std::string key, OptionType type, std::string default_text, std::string doc) {
  OptionSpec spec;
  spec.key = std::move(key);
  spec.type = type;
  spec.doc = std::move(doc);
  if (!default_text.empty()) {
    auto value = ParseTomlValue(default_text);
    if (value.ok()) spec.default_value = *value;
  }
  return spec;
}

}  // namespace

std::vector<OptionSpec> ClusterSpecs() {
  OptionSpec transport = MakeSpec("transport", OptionType::kString, "\"tcp\"",
                                  "The transport every job speaks unless "
                                  "[cluster.transports] says otherwise: "
                                  "\"tcp\", \"zmq\", \"rdma\", or the scheme "
                                  "of a loaded transport plugin.");
  OptionSpec connect = MakeSpec("connect_timeout_ms", OptionType::kInt, "10000",
                                "Keep trying to connect to a task (with "
                                "backoff) for this long before failing.");
  connect.min = 1;
  OptionSpec rpc = MakeSpec("rpc_timeout_ms", OptionType::kInt, "60000", "The deadline of every RPC.");
  rpc.min = 1;
  OptionSpec job = MakeSpec("job", OptionType::kString, "",
                            "The job of this process (static membership); "
                            "--job overrides it. Unset: from --job.");
  OptionSpec task = MakeSpec("task", OptionType::kInt, "",
                             "The task index of this process in its job; "
                             "--task overrides it. Unset: from "
                             "--task, or 0 when the job has one task.");
  task.min = 0;
  OptionSpec membership = MakeSpec("membership", OptionType::kString, "\"static\"",
                                   "Where the tasks come from: \"static\" ([cluster.jobs]), \"mpi\" "
                                   "(mpirun's "
                                   "OMPI_COMM_WORLD_* variables) or \"slurm\" (srun's SLURM_* variables).");
  membership.choices = {"static", "mpi", "slurm"};
  OptionSpec base_port = MakeSpec("base_port", OptionType::kInt, "7070",
                                  "mpi, slurm: a task listens on base_port + "
                                  "its index among the tasks of its host.");
  base_port.min = 1;
  base_port.max = 65535;
  OptionSpec mpi_host = MakeSpec("mpi_host", OptionType::kString, "\"127.0.0.1\"",
                                 "mpi: the host of every task when mpirun starts all ranks on one host.");
  OptionSpec hosts = MakeSpec("hosts", OptionType::kStringList, "[]",
                              "mpi: the hosts mpirun fills in order, "
                              "OMPI_COMM_WORLD_LOCAL_SIZE ranks each, "
                              "when the ranks span hosts.");
  OptionSpec variable_placement = MakeSpec("variable_placement", OptionType::kString, "\"greedy_bytes\"",
                                           "weft train: how variables (with their optimizer slots and "
                                           "updates) are spread over the ps "
                                           "tasks: \"greedy_bytes\" (largest first, each to the ps holding "
                                           "the fewest bytes, then the fewest "
                                           "reading ops) or \"round_robin\" (in name order).");
  variable_placement.choices = {"greedy_bytes", "round_robin"};
  OptionSpec transfer_dtype =
      MakeSpec("transfer_dtype", OptionType::kString, "\"f32\"",
               "The type f32 tensors travel in between the CPUs of two tasks: \"f32\", or \"bf16\" (half the "
               "bytes: each value rounded to 8 bits of mantissa before it leaves and widened again on arrival; "
               "parameters, gradients and activations alike).");
  transfer_dtype.choices = {"f32", "bf16"};
  OptionSpec variable_reads =
      MakeSpec("variable_reads", OptionType::kString, "\"at_start\"",
               "When a worker pulls a variable's value from its ps task: \"at_start\" (as the step starts, with "
               "the step's other pulls from that task in one request) or \"late\" (on its own, a couple of "
               "ops before the forward pass first uses it: less memory held, one more round trip per "
               "variable).");
  variable_reads.choices = {"at_start", "late"};
  OptionSpec init_timeout = MakeSpec("init_timeout_s", OptionType::kInt, "300",
                                     "weft train: how long a worker other than the chief (worker 0) "
                                     "waits for the "
                                     "chief to initialise or restore the variables.");
  init_timeout.min = 1;
  OptionSpec partition_mb = MakeSpec("partition_mb", OptionType::kFloat, "64.0",
                                     "weft train: a variable larger than this many MiB is split along "
                                     "dimension 0 across the ps tasks, and a gather of it moves only "
                                     "the rows it reads (core/placement/variable_partition.h).");
  partition_mb.min = 0;
  OptionSpec collectives = MakeSpec("collectives", OptionType::kString, "\"auto\"",
                                    "training.mode = \"allreduce\": the collectives plugin that reduces "
                                    "the gradients (\"gloo\" for tensors in host memory, \"nccl\" for "
                                    "CUDA tensors); \"auto\" takes the first loaded one serving the "
                                    "tensors' memory.");
  OptionSpec collective_timeout = MakeSpec("collective_timeout_ms", OptionType::kInt, "60000",
                                           "training.mode = \"allreduce\": the deadline of the workers' "
                                           "rendezvous and of every collective; must exceed the chief's "
                                           "evaluations and checkpoints, which the others wait through.");
  collective_timeout.min = 1;
  OptionSpec secret_file = MakeSpec("secret_file", OptionType::kString, "",
                                    "A file holding the cluster's shared secret (only its owner may read it: "
                                    "chmod 600). Every connection then proves it knows the secret (HMAC-SHA256 "
                                    "over fresh nonces, both ways) before anything else is read. Relative to the "
                                    "config's directory. Unset: connections are not authenticated.");
  OptionSpec handshake_timeout = MakeSpec("handshake_timeout_ms", OptionType::kInt, "10000",
                                          "An accepted connection that has not authenticated and said Hello "
                                          "within this long is closed.");
  handshake_timeout.min = 1;
  OptionSpec max_message = MakeSpec("max_message_mb", OptionType::kInt, "0",
                                    "The largest message a task accepts from an authenticated peer, in MiB, "
                                    "refused before anything is allocated; 0: each transport's own "
                                    "max_message_mb.");
  max_message.min = 0;
  max_message.max = 1 << 20;
  OptionSpec heartbeat_interval = MakeSpec("heartbeat_interval_ms", OptionType::kInt, "1000",
                                           "How often every process heartbeats the tasks it works with.");
  heartbeat_interval.min = 10;
  OptionSpec heartbeat_timeout = MakeSpec("heartbeat_timeout_ms", OptionType::kInt, "10000",
                                          "A task that has not answered a heartbeat for this long is declared "
                                          "lost: every step that waits on it fails at once, naming it.");
  heartbeat_timeout.min = 100;
  OptionSpec recovery = MakeSpec("recovery", OptionType::kString, "\"off\"",
                                 "weft train: \"auto\" recovers from lost tasks: the chief restores every ps task "
                                 "from the newest checkpoint when one comes back restarted, a restarted chief "
                                 "resumes from it, other workers wait and carry on, finished workers stay until "
                                 "the chief ends the run (needs [checkpoint] dir; asynchronous training). "
                                 "\"off\": a lost task ends the run.");
  recovery.choices = {"off", "auto"};
  OptionSpec recovery_timeout = MakeSpec("recovery_timeout_s", OptionType::kInt, "300",
                                         "weft train, recovery = \"auto\": how long a process waits for lost "
                                         "tasks to come back before it exits with code 75 (for its launcher to "
                                         "restart it).");
  recovery_timeout.min = 1;
  return {transport,
          connect,
          rpc,
          job,
          task,
          membership,
          base_port,
          mpi_host,
          hosts,
          variable_placement,
          transfer_dtype,
          variable_reads,
          init_timeout,
          partition_mb,
          collectives,
          collective_timeout,
          secret_file,
          handshake_timeout,
          max_message,
          heartbeat_interval,
          heartbeat_timeout,
          recovery,
          recovery_timeout};
}

std::vector<std::pair<std::string, OptionSpec>> ClusterTableKeys() {
  OptionSpec jobs = MakeSpec("jobs.<job>", OptionType::kStringList, "",
                             "static: the \"host:port\" of each task of <job>, task 0 first.");
  OptionSpec transports = MakeSpec("transports.<job>", OptionType::kString, "",
                                   "The transport of <job>'s tasks, overriding cluster.transport.");
  OptionSpec tasks = MakeSpec("tasks.<job>", OptionType::kInt, "",
                              "mpi, slurm: how many ranks <job> gets, in file "
                              "order, or \"rest\" (one job).");
  tasks.min = 1;
  return {{"cluster.jobs.<job>", jobs}, {"cluster.transports.<job>", transports}, {"cluster.tasks.<job>", tasks}};
}

namespace internal {
namespace {

constexpr std::string_view kTables[] = {"jobs", "transports", "tasks"};

// An entry of a [cluster.*] table, with its positions, in file order
// (toml++ keeps keys sorted).
struct Entry {
  std::string key;
  SourcePos key_pos;
  const toml::node* node;
};

std::vector<Entry> InFileOrder(const toml::table& table, std::string_view file) {
  std::vector<Entry> entries;
  for (const auto& [key, node] : table) {
    entries.push_back({std::string(key.str()), PosOf(key.source(), file), &node});
  }
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.key_pos.line, a.key_pos.column) < std::tie(b.key_pos.line, b.key_pos.column);
  });
  return entries;
}

class ClusterParser {
 public:
  ClusterParser(std::string_view file, std::vector<ConfigError>& errors) : file_(file), errors_(errors) {}

  ClusterConfig Parse(const toml::table& table, const SourcePos& header, OptionValues* values);

 private:
  void Error(const SourcePos& pos, std::string path, std::string message) {
    errors_.push_back({pos, std::move(path), std::move(message)});
  }
  std::string MembershipText() const {
    return written_.count("membership") ? StrCat("membership is \"", MembershipName(out_.membership), "\"")
                                        : "membership is \"static\" (the default)";
  }
  // A subtable that must be a table; nullptr (and an error) otherwise.
  const toml::table* Table(const toml::table& cluster, std::string_view name);
  bool CheckJobName(const Entry& entry, std::string_view table);
  std::vector<ClusterJobConfig> ParseJobs(const toml::table& jobs);
  std::vector<ClusterJobConfig> ParseTasks(const toml::table& tasks);
  void ParseTransports(const toml::table& transports);
  void CheckScheme(const Value& value, std::string path);
  void CheckMembership(const toml::table& cluster);
  void CheckSelf();
  std::string JobListText() const;

  std::string_view file_;
  std::vector<ConfigError>& errors_;
  ClusterConfig out_;
  std::map<std::string, Value> written_;  // the scalar keys as written
};

const toml::table* ClusterParser::Table(const toml::table& cluster, std::string_view name) {
  const toml::node* node = cluster.get(name);
  if (node == nullptr) return nullptr;
  if (!node->is_table()) {
    Error(PosOf(node->source(), file_), StrCat("cluster.", name),
          StrCat("expected a table [cluster.", name, "] of job = ...; got ",
                 ConvertNode(*node, file_, SourcePos{}).text));
    return nullptr;
  }
  return node->as_table();
}

bool ClusterParser::CheckJobName(const Entry& entry, std::string_view table) {
  if (IsSnakeCaseName(entry.key)) return true;
  Error(entry.key_pos, StrCat("cluster.", table, ".", entry.key),
        "job names are lower_snake_case (letters, digits and '_', starting "
        "with a letter), as in "
        "/job:<name>");
  return false;
}

std::vector<ClusterJobConfig> ClusterParser::ParseJobs(const toml::table& jobs) {
  std::vector<ClusterJobConfig> out;
  // Where each address was first used, for duplicates.
  struct FirstUse {
    std::string job;
    size_t task;
    SourcePos pos;
  };
  std::map<std::string, FirstUse> used;
  for (const Entry& entry : InFileOrder(jobs, file_)) {
    const std::string path = StrCat("cluster.jobs.", entry.key);
    if (!CheckJobName(entry, "jobs")) continue;
    const toml::array* array = entry.node->as_array();
    if (array == nullptr) {
      Error(PosOf(entry.node->source(), file_), path,
            StrCat("expected an array of \"host:port\" strings, one per task, got ",
                   ConvertNode(*entry.node, file_, entry.key_pos).text));
      continue;
    }
    ClusterJobConfig job;
    job.name = entry.key;
    job.pos = entry.key_pos;
    if (array->empty()) {
      Error(PosOf(entry.node->source(), file_), path,
            StrCat("job '", entry.key,
                   "' has no tasks; give the \"host:port\" of at least one, or "
                   "remove it"));
    }
    for (size_t i = 0; i < array->size(); ++i) {
      const Value element = ConvertNode(*array->get(i), file_, entry.key_pos);
      const std::string element_path = StrCat(path, "[", i, "]");
      // A bad address keeps its place, so that task i stays at index i
      // and the task count is what the file says.
      job.addresses.emplace_back();
      job.address_pos.push_back(element.pos);
      if (element.kind != Value::Kind::kString) {
        Error(element.pos, element_path, StrCat("expected a \"host:port\" string, got ", element.text));
        continue;
      }
      auto address = ParseHostPort(element.s);
      if (!address.ok()) {
        Error(element.pos, element_path,
              StrCat("expected host:port, got ", element.text, ": ", address.status().message()));
        continue;
      }
      const std::string key = address->ToString();
      auto [it, inserted] = used.emplace(key, FirstUse{job.name, i, element.pos});
      if (!inserted) {
        Error(element.pos, element_path,
              StrCat("address ", element.text, " is also used by job '", it->second.job, "' task ", it->second.task,
                     " at ", it->second.pos.ToString(), "; give every task its own host:port"));
      }
      job.addresses.back() = *address;
    }
    out.push_back(std::move(job));
  }
  return out;
}

std::vector<ClusterJobConfig> ClusterParser::ParseTasks(const toml::table& tasks) {
  std::vector<ClusterJobConfig> out;
  std::optional<Entry> rest;
  for (const Entry& entry : InFileOrder(tasks, file_)) {
    const std::string path = StrCat("cluster.tasks.", entry.key);
    if (!CheckJobName(entry, "tasks")) continue;
    const Value value = ConvertNode(*entry.node, file_, entry.key_pos);
    ClusterJobConfig job;
    job.name = entry.key;
    job.pos = entry.key_pos;
    if (value.kind == Value::Kind::kInt && value.i >= 1) {
      job.rank_count = value.i;
    } else if (value.kind == Value::Kind::kString && value.s == "rest") {
      if (rest) {
        Error(value.pos, path,
              StrCat("only one job may take the \"rest\" of the ranks; job '", rest->key, "' at ",
                     rest->key_pos.ToString(), " already does"));
        continue;
      }
      rest = entry;
    } else {
      Error(value.pos, path,
            StrCat("expected the number of ranks job '", entry.key, "' gets (an integer >= 1) or \"rest\", got ",
                   value.text));
      continue;
    }
    out.push_back(std::move(job));
  }
  return out;
}

std::string ClusterParser::JobListText() const {
  std::vector<std::string> names;
  for (const ClusterJobConfig& job : out_.jobs) names.push_back(StrCat("'", job.name, "'"));
  return names.empty() ? "none" : StrJoin(names, ", ");
}

void ClusterParser::CheckScheme(const Value& value, std::string path) {
  if (value.kind != Value::Kind::kString) {
    Error(value.pos, std::move(path),
          StrCat("expected a transport scheme such as \"tcp\", \"zmq\" or "
                 "\"rdma\", got ",
                 value.text));
    return;
  }
  if (IsTransportScheme(value.s)) return;
  std::string message = StrCat(
      "expected a transport scheme such as \"tcp\", "
      "\"zmq\" or \"rdma\" (lower-case "
      "letters, digits, '+', '-' and '.'), got ",
      value.text);
  const std::string lower = Lower(value.s);
  for (std::string_view builtin : kBuiltinTransports) {
    if (lower == builtin) message += StrCat("; did you mean \"", builtin, "\"?");
  }
  Error(value.pos, std::move(path), std::move(message));
}

void ClusterParser::ParseTransports(const toml::table& transports) {
  std::vector<std::string> names;
  for (const ClusterJobConfig& job : out_.jobs) names.push_back(job.name);
  const std::string_view jobs_table = out_.membership == Membership::kStatic ? "jobs" : "tasks";
  for (const Entry& entry : InFileOrder(transports, file_)) {
    const std::string path = StrCat("cluster.transports.", entry.key);
    if (!CheckJobName(entry, "transports")) continue;
    const Value value = ConvertNode(*entry.node, file_, entry.key_pos);
    const size_t errors_before = errors_.size();
    CheckScheme(value, path);
    ClusterJobConfig* job = nullptr;
    for (ClusterJobConfig& candidate : out_.jobs) {
      if (candidate.name == entry.key) job = &candidate;
    }
    if (job == nullptr) {
      std::string message = StrCat("no job '", entry.key, "' in [cluster.", jobs_table, "]");
      const std::string hint = ClosestMatch(entry.key, names);
      message += hint.empty() ? StrCat(" (the jobs: ", JobListText(), ")") : StrCat("; did you mean '", hint, "'?");
      Error(entry.key_pos, path, message);
      continue;
    }
    if (errors_.size() != errors_before) continue;
    job->transport = value.s;
    job->transport_pos = value.pos;
  }
}

// Keys that belong to one kind of membership.
void ClusterParser::CheckMembership(const toml::table& cluster) {
  const bool launcher = out_.membership != Membership::kStatic;
  auto wrong = [&](const SourcePos& pos, std::string path, std::string_view applies_to) {
    Error(pos, std::move(path), StrCat("applies to membership = ", applies_to, " only, but ", MembershipText()));
  };
  for (const auto& [key, value] : written_) {
    if (!launcher && (key == "base_port" || key == "mpi_host" || key == "hosts")) {
      wrong(value.key_pos, StrCat("cluster.", key), key == "base_port" ? "\"mpi\" or \"slurm\"" : "\"mpi\"");
    } else if (out_.membership == Membership::kSlurm && (key == "mpi_host" || key == "hosts")) {
      wrong(value.key_pos, StrCat("cluster.", key), "\"mpi\"");
    } else if (launcher && (key == "job" || key == "task")) {
      Error(value.key_pos, StrCat("cluster.", key),
            StrCat(MembershipText(),
                   ": every process's job and task come from "
                   "its rank; remove this key"));
    }
  }
  if (out_.membership == Membership::kMpi && written_.count("mpi_host") && written_.count("hosts") &&
      !written_.at("hosts").elements.empty()) {
    Error(written_.at("hosts").key_pos, "cluster.hosts",
          "set either mpi_host (all ranks on one host) or hosts (ranks across "
          "hosts), not both");
  }
  if (auto it = written_.find("mpi_host"); it != written_.end()) {
    if (auto host = ParseHost(it->second.s); !host.ok()) {
      Error(it->second.pos, "cluster.mpi_host",
            StrCat("expected a host, got ", it->second.text, ": ", host.status().message()));
    } else {
      out_.mpi_host = *host;
    }
  }
  if (auto it = written_.find("hosts"); it != written_.end()) {
    for (size_t i = 0; i < it->second.elements.size(); ++i) {
      const Value& element = it->second.elements[i];
      auto host = ParseHost(element.s);
      if (!host.ok()) {
        Error(element.pos, StrCat("cluster.hosts[", i, "]"),
              StrCat("expected a host, got ", element.text, ": ", host.status().message()));
      } else {
        out_.hosts.push_back(*host);
      }
    }
  }
  const toml::node* jobs = cluster.get("jobs");
  const toml::node* tasks = cluster.get("tasks");
  if (launcher && jobs != nullptr) {
    Error(PosOf(jobs->source(), file_), "cluster.jobs",
          StrCat("static addresses do not apply: ", MembershipText(),
                 ", so ranks and hosts come from the launcher; say how many "
                 "ranks each job gets in "
                 "[cluster.tasks] instead"));
  }
  if (!launcher && tasks != nullptr) {
    wrong(PosOf(tasks->source(), file_), "cluster.tasks", "\"mpi\" or \"slurm\"");
  }
  if (launcher && tasks == nullptr) {
    Error(out_.pos, "cluster",
          StrCat("membership = \"", MembershipName(out_.membership),
                 "\" needs [cluster.tasks]: how many ranks each job gets, in "
                 "order, e.g. ps = 1 and "
                 "worker = \"rest\""));
  }
  if (!launcher && jobs == nullptr) {
    Error(out_.pos, "cluster",
          StrCat("membership = \"static\"", written_.count("membership") ? "" : " (the default)",
                 " needs [cluster.jobs] with the \"host:port\" of every task, "
                 "e.g. ps = [\"127.0.0.1:7070\"] "
                 "and worker = [\"127.0.0.1:7071\"]"));
  }
}

// job and task, when the file names this process.
void ClusterParser::CheckSelf() {
  if (out_.membership != Membership::kStatic) return;
  auto job_it = written_.find("job");
  if (job_it == written_.end()) return;
  const Value& job_value = job_it->second;
  const ClusterJobConfig* job = out_.FindJob(job_value.s);
  if (job == nullptr) {
    std::vector<std::string> names;
    for (const ClusterJobConfig& j : out_.jobs) names.push_back(j.name);
    const std::string hint = ClosestMatch(job_value.s, names);
    Error(job_value.pos, "cluster.job",
          StrCat("no job ", job_value.text, " in [cluster.jobs]",
                 hint.empty() ? StrCat(" (the jobs: ", JobListText(), ")") : StrCat("; did you mean '", hint, "'?")));
    return;
  }
  auto task_it = written_.find("task");
  if (task_it == written_.end() || job->addresses.empty()) return;
  const int64_t count = static_cast<int64_t>(job->addresses.size());
  if (task_it->second.i >= count) {
    Error(task_it->second.pos, "cluster.task",
          StrCat("task ", task_it->second.i, " is out of range: job '", job->name, "' has ", count,
                 count == 1 ? " task (0)" : StrCat(" tasks (0..", count - 1, ")")));
  }
}

ClusterConfig ClusterParser::Parse(const toml::table& table, const SourcePos& header, OptionValues* values) {
  out_.pos = header;
  Section section;
  section.path = "cluster";
  section.pos = header;
  for (const auto& [key, node] : table) {
    if (std::find(std::begin(kTables), std::end(kTables), key.str()) != std::end(kTables)) continue;
    section.values[std::string(key.str())] = ConvertNode(node, file_, PosOf(key.source(), file_));
  }
  const std::vector<OptionSpec> specs = ClusterSpecs();
  OptionValues checked;
  const size_t errors_before = errors_.size();
  for (ConfigError& error : CheckOptions(&section, "cluster", specs, &checked)) errors_.push_back(std::move(error));
  if (errors_.size() == errors_before && values != nullptr) *values = checked;
  // The checks across keys use the values that fit their spec, so that one
  // wrong value does not hide the problems of the others.
  for (const auto& [key, value] : section.values) {
    for (const OptionSpec& spec : specs) {
      if (spec.key == key && ValueFits(value, spec)) written_[key] = value;
    }
  }
  const bool membership_known = section.values.count("membership") == written_.count("membership");
  out_.transport_pos = header;
  if (auto it = written_.find("transport"); it != written_.end()) {
    out_.transport = it->second.s;
    out_.transport_pos = it->second.pos;
    CheckScheme(it->second, "cluster.transport");
  }
  if (auto it = written_.find("connect_timeout_ms"); it != written_.end()) out_.connect_timeout_ms = it->second.i;
  if (auto it = written_.find("rpc_timeout_ms"); it != written_.end()) out_.rpc_timeout_ms = it->second.i;
  if (auto it = written_.find("job"); it != written_.end()) out_.job = it->second.s;
  if (auto it = written_.find("task"); it != written_.end()) out_.task = it->second.i;
  if (auto it = written_.find("base_port"); it != written_.end()) out_.base_port = it->second.i;
  if (auto it = written_.find("variable_placement"); it != written_.end()) out_.variable_placement = it->second.s;
  if (auto it = written_.find("transfer_dtype"); it != written_.end()) out_.transfer_dtype = it->second.s;
  if (auto it = written_.find("variable_reads"); it != written_.end()) out_.variable_reads = it->second.s;
  if (auto it = written_.find("init_timeout_s"); it != written_.end()) out_.init_timeout_s = it->second.i;
  if (auto it = written_.find("collectives"); it != written_.end()) out_.collectives = it->second.s;
  if (auto it = written_.find("collective_timeout_ms"); it != written_.end()) {
    out_.collective_timeout_ms = it->second.i;
  }
  if (auto it = written_.find("secret_file"); it != written_.end()) {
    out_.secret_file = it->second.s;
    out_.secret_file_pos = it->second.pos;
  }
  if (auto it = written_.find("handshake_timeout_ms"); it != written_.end()) out_.handshake_timeout_ms = it->second.i;
  if (auto it = written_.find("max_message_mb"); it != written_.end()) out_.max_message_mb = it->second.i;
  if (auto it = written_.find("heartbeat_interval_ms"); it != written_.end()) {
    out_.heartbeat_interval_ms = it->second.i;
  }
  if (auto it = written_.find("heartbeat_timeout_ms"); it != written_.end()) out_.heartbeat_timeout_ms = it->second.i;
  if (auto it = written_.find("recovery"); it != written_.end()) {
    out_.recovery = it->second.s;
    out_.recovery_pos = it->second.pos;
  }
  if (auto it = written_.find("recovery_timeout_s"); it != written_.end()) out_.recovery_timeout_s = it->second.i;
  if (auto it = written_.find("partition_mb"); it != written_.end()) {
    out_.partition_mb = it->second.kind == Value::Kind::kInt ? static_cast<double>(it->second.i) : it->second.f;
  }
  if (auto it = written_.find("membership"); it != written_.end()) {
    out_.membership = it->second.s == "mpi"     ? Membership::kMpi
                      : it->second.s == "slurm" ? Membership::kSlurm
                                                : Membership::kStatic;
  }
  // Both tables are checked whatever the membership (the one that does
  // not apply is reported by CheckMembership); the jobs come from the one
  // that does (or, when the membership is itself wrong, the one written).
  std::vector<ClusterJobConfig> static_jobs;
  std::vector<ClusterJobConfig> rank_jobs;
  if (const toml::table* jobs = Table(table, "jobs")) static_jobs = ParseJobs(*jobs);
  if (const toml::table* tasks = Table(table, "tasks")) rank_jobs = ParseTasks(*tasks);
  const bool use_static = membership_known ? out_.membership == Membership::kStatic : table.get("jobs") != nullptr;
  out_.jobs = std::move(use_static ? static_jobs : rank_jobs);
  if (const toml::table* transports = Table(table, "transports")) ParseTransports(*transports);
  if (membership_known) {
    CheckMembership(table);
    CheckSelf();
  }
  return std::move(out_);
}

}  // namespace

ClusterConfig ParseClusterSection(const toml::node& node, std::string_view file, const SourcePos& key_pos,
                                  OptionValues* values, std::vector<ConfigError>& errors) {
  if (!node.is_table()) {
    errors.push_back({PosOf(node.source(), file), "cluster",
                      StrCat("expected a table [cluster], got ", ConvertNode(node, file, key_pos).text)});
    return ClusterConfig{};
  }
  return ClusterParser(file, errors).Parse(*node.as_table(), PosOf(node.source(), file), values);
}

}  // namespace internal
}  // namespace weft::config
