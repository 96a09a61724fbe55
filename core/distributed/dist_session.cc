#include "core/distributed/dist_session.h"

#include <algorithm>
#include <condition_variable>
#include <random>

#include "core/base/logging.h"
#include "core/distributed/incarnation.h"
#include "core/distributed/remote_rendezvous.h"
#include "core/graph/serialize.h"
#include "core/runtime/run_rewrite.h"

namespace weft::dist {

struct DistSession::Prepared {
  struct TaskPart {
    Peer peer;
    uint64_t handle = 0;
    // The start of the task that registered it: every RunGraph is meant
    // for it, and a restarted task refuses it.
    uint64_t incarnation = 0;
    std::vector<int64_t> feeds;  // the _Arg indices its partitions hold
    // Whether another task pulls tensors from it: then its step state must
    // wait for CleanupStep; otherwise it goes when its part has run.
    bool sends_remote = false;
  };
  std::vector<TaskPart> tasks;
  // Every _Send and _Recv of the partitions, for the flows of a trace.
  struct Transfer {
    std::string task;
    std::string node;
    bool send = false;
    std::string key;  // send device, recv device, tensor name
  };
  std::vector<Transfer> transfers;
  std::vector<std::string> feeds;  // sorted
  std::vector<std::string> fetches;
  std::vector<DType> feed_types;
  std::vector<Shape> feed_shapes;
};

namespace {

// Runs |call| for every index in parallel and waits; the statuses come
// back by index.
template <class Fn>
std::vector<Status> ForAll(std::size_t n, Fn call) {
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t remaining = n;
  std::vector<Status> statuses(n);
  for (std::size_t i = 0; i < n; ++i) {
    call(i, [&, i](Status s) {
      std::lock_guard<std::mutex> lock(mutex);
      statuses[i] = std::move(s);
      if (--remaining == 0) cv.notify_all();
    });
  }
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return remaining == 0; });
  return statuses;
}

// The cause among |statuses|: the first error that is not a cancellation
// it set off.
Status FirstCause(const std::vector<Status>& statuses) {
  for (const Status& s : statuses) {
    if (!s.ok() && s.code() != Code::kCancelled) return s;
  }
  for (const Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return Status();
}

Expected<std::unique_ptr<RpcNode>> MakeClient(const DistSessionOptions& options, const plugin::PluginHost& plugins) {
  RpcNode::Options o;
  o.plugins = &plugins;
  o.identity = options.identity;
  o.cluster_fingerprint = options.cluster_fingerprint;
  o.connect_timeout_ms = options.connect_timeout_ms;
  o.security = options.security;
  o.incarnation = options.incarnation != 0 ? options.incarnation : NewIncarnation();
  return RpcNode::Create(o, nullptr);
}

// Every task's devices; |incarnations|, when given, gets the incarnation of
// each task that answered (what the devices' own incarnations belong to).
Expected<std::vector<DeviceInfo>> GetAllDevices(RpcNode& rpc, const DistSessionOptions& options,
                                                std::map<std::string, uint64_t>* incarnations = nullptr) {
  std::vector<std::vector<DeviceInfo>> per_task(options.tasks.size());
  std::vector<uint64_t> answered_by(options.tasks.size(), 0);
  std::vector<Status> statuses = ForAll(options.tasks.size(), [&](std::size_t i, auto done) {
    Request request;
    request.method = Method::kGetDevices;
    rpc.Call(options.tasks[i], std::move(request), options.rpc_timeout_ms,
             [&per_task, &answered_by, i, done](Status s, Response r) {
               per_task[i] = std::move(r.devices);
               answered_by[i] = r.responder_incarnation;
               done(std::move(s));
             });
  });
  if (incarnations != nullptr) {
    for (std::size_t i = 0; i < options.tasks.size(); ++i) (*incarnations)[options.tasks[i].name] = answered_by[i];
  }
  WEFT_RETURN_IF_ERROR(FirstCause(statuses));
  std::vector<DeviceInfo> all;
  for (std::size_t i = 0; i < per_task.size(); ++i) {
    if (per_task[i].empty()) return FailedPreconditionError("task ", options.tasks[i].name, " has no devices");
    for (DeviceInfo& d : per_task[i]) {
      if (TaskOfDevice(d.name) != options.tasks[i].name) {
        return InternalError("task ", options.tasks[i].name, " reported a device named ", Quote(d.name));
      }
      all.push_back(std::move(d));
    }
  }
  return all;
}

}  // namespace

Expected<std::vector<DeviceInfo>> DistSession::ListDevices(const DistSessionOptions& options,
                                                           const plugin::PluginHost& plugins) {
  WEFT_ASSIGN_OR_RETURN(auto rpc, MakeClient(options, plugins));
  return GetAllDevices(*rpc, options);
}

Expected<std::unique_ptr<DistSession>> DistSession::Create(Graph graph, DistSessionOptions options,
                                                           const plugin::PluginHost& plugins) {
  if (options.tasks.empty()) return InvalidArgumentError("a distributed session needs a cluster with tasks");
  std::unique_ptr<DistSession> session(new DistSession(std::move(graph), std::move(options)));
  WEFT_RETURN_IF_ERROR(session->Connect(plugins));
  return session;
}

Status DistSession::Connect(const plugin::PluginHost& plugins) {
  WEFT_ASSIGN_OR_RETURN(rpc_, MakeClient(options_, plugins));
  WEFT_ASSIGN_OR_RETURN(devices_, GetAllDevices(*rpc_, options_, &devices_from_));
  if (options_.heartbeat_timeout_ms > 0) {
    // A task that stops answering fails the steps waiting on it at once.
    HeartbeatMonitor::Events events;
    RpcNode* rpc = rpc_.get();
    const int64_t timeout = options_.heartbeat_timeout_ms;
    events.lost = [rpc, timeout](const Peer& peer, int64_t silent_ms) {
      const Status lost = LostPeerStatus(peer, silent_ms, timeout);
      WEFT_LOG(WARNING) << lost.message() << "; failing what waits on it";
      rpc->FailPeer(peer.name, lost);
    };
    // A restart seen first by the heartbeats: the next step registers the
    // graph again before it runs, and so does not fail.
    events.restarted = [this](const Peer& peer, uint64_t before, uint64_t now) {
      WEFT_LOG_AT(FirstToSeeRestart(peer.name, now) ? LogLevel::kInfo : LogLevel::kDebug)
          << "task " << peer.name << " (" << peer.address << ") was restarted (incarnation "
          << FormatIncarnation(before) << " -> " << FormatIncarnation(now)
          << "); the next step registers the graph with it again";
      LearnIncarnation(peer.name, now);
    };
    monitor_ = std::make_unique<HeartbeatMonitor>(rpc_.get(), options_.tasks,
                                                  HeartbeatMonitor::Options{options_.heartbeat_interval_ms, timeout},
                                                  std::move(events));
  }
  // Step ids unique across the clients of one cluster: a random start.
  std::random_device entropy;
  next_step_ = static_cast<int64_t>(((static_cast<uint64_t>(entropy()) << 31) ^ entropy()) & 0x3fffffffffffffffull) + 1;
  return Status();
}

namespace {

struct Handle {
  Peer peer;
  uint64_t handle = 0;
  uint64_t incarnation = 0;
};

// Deregisters |handles| (best effort, a short deadline each).
void Deregister(RpcNode& rpc, const std::vector<Handle>& handles) {
  ForAll(handles.size(), [&](std::size_t i, auto done) {
    Request request;
    request.method = Method::kDeregisterGraph;
    request.handle = handles[i].handle;
    request.target_incarnation = handles[i].incarnation;
    rpc.Call(handles[i].peer, std::move(request), 2000, [done](Status s, Response) { done(std::move(s)); });
  });
}

}  // namespace

DistSession::~DistSession() {
  // Its events use the members below it.
  monitor_.reset();
  std::vector<Handle> handles;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, prepared] : cache_) {
      for (const auto& t : prepared->tasks) handles.push_back({t.peer, t.handle, t.incarnation});
    }
  }
  if (rpc_ == nullptr) return;
  Deregister(*rpc_, handles);
}

std::vector<DeviceInfo> DistSession::devices() {
  std::lock_guard<std::mutex> lock(mutex_);
  return devices_;
}

uint64_t DistSession::KnownIncarnation(const std::string& task) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = known_incarnation_.find(task);
  return it == known_incarnation_.end() ? 0 : it->second;
}

void DistSession::LearnIncarnation(const std::string& task, uint64_t incarnation) {
  if (incarnation == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  known_incarnation_[task] = incarnation;
}

std::vector<std::string> DistSession::RestartedTasks() {
  std::vector<std::string> restarted;
  for (const Peer& peer : options_.tasks) {
    uint64_t listed = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = devices_from_.find(peer.name);
      if (it != devices_from_.end()) listed = it->second;
    }
    if (listed == 0) continue;
    // What this process's connection to it says (a reconnection's Hello),
    // and what its heartbeats and replies said.
    const uint64_t connected = rpc_->PeerIncarnation(peer.name);
    const uint64_t known = KnownIncarnation(peer.name);
    if ((connected != 0 && connected != listed) || (known != 0 && known != listed)) restarted.push_back(peer.name);
  }
  return restarted;
}

Status DistSession::Invalidate(const std::vector<std::string>& tasks) {
  if (tasks.empty()) return Status();
  auto involved = [&](const Prepared& p) {
    for (const auto& t : p.tasks) {
      if (std::find(tasks.begin(), tasks.end(), t.peer.name) != tasks.end()) return true;
    }
    return false;
  };
  std::vector<Handle> handles;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end();) {
      if (!involved(*it->second)) {
        ++it;
        continue;
      }
      // The partitions on the tasks that kept running would pile up.
      for (const auto& t : it->second->tasks) {
        if (std::find(tasks.begin(), tasks.end(), t.peer.name) == tasks.end()) {
          handles.push_back({t.peer, t.handle, t.incarnation});
        }
      }
      it = cache_.erase(it);
    }
  }
  Deregister(*rpc_, handles);
  // Their devices now: a restarted task's devices have new incarnations,
  // which the transfers of the next placement must name.
  DistSessionOptions only = options_;
  std::erase_if(only.tasks,
                [&](const Peer& p) { return std::find(tasks.begin(), tasks.end(), p.name) == tasks.end(); });
  std::map<std::string, uint64_t> fresh_from;
  WEFT_ASSIGN_OR_RETURN(std::vector<DeviceInfo> fresh, GetAllDevices(*rpc_, only, &fresh_from));
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [task, incarnation] : fresh_from) devices_from_[task] = incarnation;
  std::vector<DeviceInfo> devices;
  for (const Peer& p : options_.tasks) {
    const bool restarted = std::find(tasks.begin(), tasks.end(), p.name) != tasks.end();
    for (const DeviceInfo& d : restarted ? fresh : devices_) {
      if (TaskOfDevice(d.name) == p.name) devices.push_back(d);
    }
  }
  devices_ = std::move(devices);
  return Status();
}

const Peer& DistSession::TaskOf(const std::string& device) const {
  const std::string task = TaskOfDevice(device);
  for (const Peer& p : options_.tasks) {
    if (p.name == task) return p;
  }
  return options_.tasks.front();  // unreachable: devices come from the tasks
}

Expected<ClusterPlacement> DistSession::Place(const Graph& graph) {
  const std::string bytes = SerializeGraphDef(graph.ToGraphDef(), GraphFormat::kBinary);
  // Which device can run which node: each task answers for its own.
  std::vector<std::vector<std::vector<DeviceSupport>>> support(options_.tasks.size());
  std::vector<Status> statuses = ForAll(options_.tasks.size(), [&](std::size_t i, auto done) {
    Request request;
    request.method = Method::kQuerySupport;
    request.graph = bytes;
    rpc_->Call(options_.tasks[i], std::move(request), options_.rpc_timeout_ms,
               [&support, i, done](Status s, Response r) {
                 support[i] = std::move(r.support);
                 done(std::move(s));
               });
  });
  WEFT_RETURN_IF_ERROR(FirstCause(statuses));
  // Device index -> (task, index within the task).
  std::vector<std::pair<std::size_t, std::size_t>> where;
  std::vector<placement::PlacementDevice> devices;
  const std::vector<DeviceInfo> known_devices = this->devices();
  for (std::size_t t = 0; t < options_.tasks.size(); ++t) {
    std::size_t local = 0;
    for (const DeviceInfo& d : known_devices) {
      if (TaskOfDevice(d.name) != options_.tasks[t].name) continue;
      placement::PlacementDevice p;
      p.name = d.name;
      p.type = d.type;
      p.ordinal = d.ordinal;
      p.host_to_device_gbps = d.host_to_device_gbps;
      p.device_to_host_gbps = d.device_to_host_gbps;
      p.host_visible = d.host_visible;
      auto spec = placement::ParseDeviceSpec(d.name);
      if (spec.ok()) {
        p.job = spec->job;
        p.task = spec->task;
      }
      devices.push_back(std::move(p));
      where.emplace_back(t, local++);
    }
    if (support[t].size() != static_cast<std::size_t>(graph.num_nodes())) {
      return InternalError("task ", options_.tasks[t].name, " answered for ", support[t].size(), " nodes of ",
                           graph.num_nodes());
    }
  }
  placement::SupportFn support_fn = [&](const Graph&, const Graph::Node& node, int d,
                                        double* cost_ns) -> std::optional<std::string> {
    const auto [t, local] = where[static_cast<std::size_t>(d)];
    const auto& per_device = support[t][static_cast<std::size_t>(node.id)];
    if (local >= per_device.size()) return std::string("the task did not answer for this device");
    const DeviceSupport& s = per_device[local];
    if (!s.supported) return s.reason;
    *cost_ns = s.cost_ns;
    return std::nullopt;
  };
  ClusterPlacement out;
  placement::PlacementOptions options = options_.placement;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    options.fixed = stateful_placements_;
  }
  WEFT_ASSIGN_OR_RETURN(out.placement, placement::Place(graph, devices, support_fn, options));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Graph::Node& node : graph.nodes()) {
      if (!node.op->stateful) continue;
      stateful_placements_.emplace(
          node.name(), devices[static_cast<std::size_t>(out.placement.device[static_cast<std::size_t>(node.id)])].name);
    }
  }
  for (const placement::PlacementDevice& p : devices) {
    for (const DeviceInfo& d : known_devices) {
      if (d.name == p.name) out.devices.push_back(d);
    }
  }
  return out;
}

Expected<std::shared_ptr<DistSession::Prepared>> DistSession::Prepare(const std::vector<std::string>& feeds,
                                                                      const std::vector<std::string>& fetches,
                                                                      const std::vector<std::string>& targets) {
  auto prepared = std::make_shared<Prepared>();
  prepared->feeds = feeds;
  prepared->fetches = fetches;
  WEFT_ASSIGN_OR_RETURN(runtime::RunGraph rewritten, runtime::RewriteForRun(graph_, feeds, fetches, targets));
  prepared->feed_types = std::move(rewritten.feed_types);
  prepared->feed_shapes = std::move(rewritten.feed_shapes);
  std::shared_ptr<const Graph> optimized = std::move(rewritten.graph);
  if (options_.optimizer.level > 0) {
    passes::PassContext context;
    context.keep.insert(rewritten.roots.begin(), rewritten.roots.end());
    context.requested_device = [this](const NodeDef& node) {
      return runtime::RequestedDevice(options_.placement, node);
    };
    WEFT_ASSIGN_OR_RETURN(passes::OptimizeResult result, passes::Optimize(optimized, options_.optimizer, context));
    optimized = std::move(result.graph);
  }
  const Graph& graph = *optimized;
  WEFT_ASSIGN_OR_RETURN(ClusterPlacement placed, Place(graph));

  std::vector<placement::PartitionDevice> parts;
  for (const DeviceInfo& d : placed.devices) parts.push_back({d.name, d.incarnation});
  std::map<int, GraphDef> partitions;
  bool one = true;
  for (int d : placed.placement.device) one = one && d == placed.placement.device.front();
  if (one) {
    GraphDef def = graph.ToGraphDef();
    const std::string& name = placed.devices[static_cast<std::size_t>(placed.placement.device.front())].name;
    for (NodeDef& n : def.nodes) n.device = name;
    partitions[placed.placement.device.front()] = std::move(def);
  } else {
    placement::PartitionOptions cut_options;
    cut_options.transfer_f32_as = options_.transfer_f32_as;
    cut_options.late_variable_reads = options_.late_variable_reads;
    WEFT_ASSIGN_OR_RETURN(placement::Partitions cut,
                          placement::Partition(graph, placed.placement.device, parts, cut_options));
    partitions = std::move(cut.graphs);
  }
  // Each task's partitions, registered with it.
  std::map<std::string, std::size_t> task_index;
  for (auto& [d, def] : partitions) {
    const DeviceInfo& device = placed.devices[static_cast<std::size_t>(d)];
    const Peer& peer = TaskOf(device.name);
    auto [it, added] = task_index.emplace(peer.name, prepared->tasks.size());
    if (added) prepared->tasks.push_back({peer, 0, 0, {}});
    for (const NodeDef& n : def.nodes) {
      if (n.op == "_Send" || n.op == "_Recv") {
        prepared->transfers.push_back(
            {peer.name, n.name, n.op == "_Send",
             StrCat(n.attrs.at("send_device").get<std::string>(), " -> ", n.attrs.at("recv_device").get<std::string>(),
                    " ", n.attrs.at("tensor_name").get<std::string>())});
      }
      if (n.op == "_Arg") prepared->tasks[it->second].feeds.push_back(n.attrs.at("index").get<int64_t>());
      if (n.op == "_Send" && TaskOfDevice(n.attrs.at("recv_device").get<std::string>()) != peer.name) {
        prepared->tasks[it->second].sends_remote = true;
      }
    }
  }
  std::vector<Request> requests(prepared->tasks.size());
  for (auto& [d, def] : partitions) {
    const DeviceInfo& device = placed.devices[static_cast<std::size_t>(d)];
    Request& r = requests[task_index.at(TaskOf(device.name).name)];
    r.method = Method::kRegisterGraph;
    r.partitions.push_back({device.name, SerializeGraphDef(def, GraphFormat::kBinary)});
  }
  std::vector<Status> statuses = ForAll(prepared->tasks.size(), [&](std::size_t i, auto done) {
    rpc_->Call(prepared->tasks[i].peer, std::move(requests[i]), options_.rpc_timeout_ms,
               [&prepared, i, done](Status s, Response r) {
                 prepared->tasks[i].handle = r.handle;
                 prepared->tasks[i].incarnation = r.responder_incarnation;
                 done(std::move(s));
               });
  });
  for (const auto& t : prepared->tasks) LearnIncarnation(t.peer.name, t.incarnation);
  WEFT_RETURN_IF_ERROR(FirstCause(statuses).WithContext("registering the graph's partitions"));
  return prepared;
}

Status DistSession::Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                        const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                        std::vector<Tensor>* outputs, const runtime::RunOptions& options) {
  WEFT_ASSIGN_OR_RETURN(runtime::RunSignature signature, runtime::RunSignature::Make(feeds, fetches, targets));
  std::shared_ptr<Prepared> prepared;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(signature.key);
    if (it != cache_.end()) prepared = it->second;
  }
  // A task restarted since its devices were listed has lost every graph
  // registered with it, and its devices have new incarnations: list them
  // again, and place, cut and register before anything runs.
  if (std::vector<std::string> restarted = RestartedTasks(); !restarted.empty()) {
    WEFT_RETURN_IF_ERROR(Invalidate(restarted).WithContext(
        StrCat("registering the graph again after ", StrJoin(restarted, ", "), " restarted")));
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(signature.key);
    prepared = it != cache_.end() ? it->second : nullptr;
  }
  if (prepared == nullptr) {
    WEFT_ASSIGN_OR_RETURN(prepared, Prepare(signature.feeds, signature.fetches, signature.targets));
    std::lock_guard<std::mutex> lock(mutex_);
    prepared = cache_.emplace(signature.key, prepared).first->second;
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<Tensor> args, signature.Args(feeds, prepared->feed_types, prepared->feed_shapes));
  for (const auto& [name, value] : feeds) {
    if (!value.host_visible()) return InvalidArgumentError("feed ", Quote(name), " is not in host memory");
  }

  const int64_t step_id = next_step_.fetch_add(1);
  const int64_t step_started_ns = SteadyNowNs();
  // A profiled step: each task's own account of its part, and how long
  // the call to it took from here.
  std::vector<runtime::TaskStepTime> profiled(options.profile != nullptr ? prepared->tasks.size() : 0);
  int64_t timeout = options_.rpc_timeout_ms;
  if (options.timeout_ms > 0) timeout = std::min(timeout, options.timeout_ms);
  std::vector<Tensor> retvals(signature.fetches.size());
  // With a trace: what each task recorded, and its clock at the origin.
  std::vector<std::vector<runtime::TraceRecorder::Event>> traced(prepared->tasks.size());
  std::vector<int64_t> traced_origin(prepared->tasks.size(), 0);
  std::mutex mutex;
  std::atomic<bool> aborted{false};
  auto abort_others = [&](std::size_t failed, const Status& why) {
    if (aborted.exchange(true)) return;
    for (std::size_t j = 0; j < prepared->tasks.size(); ++j) {
      if (j == failed) continue;
      Request abort;
      abort.method = Method::kAbortStep;
      abort.step_id = step_id;
      abort.abort_status = Status(Code::kCancelled, StrCat("step ", step_id, " was aborted: ", why.message()));
      rpc_->Notify(prepared->tasks[j].peer, std::move(abort));
    }
  };
  std::vector<Status> statuses = ForAll(prepared->tasks.size(), [&](std::size_t i, auto done) {
    const auto& task = prepared->tasks[i];
    Request request;
    request.method = Method::kRunGraph;
    request.handle = task.handle;
    request.target_incarnation = task.incarnation;
    request.step_id = step_id;
    request.last_use = !task.sends_remote;
    request.trace = options.trace != nullptr;
    request.profile = options.profile != nullptr;
    for (int64_t index : task.feeds) request.feeds.push_back({index, args[static_cast<std::size_t>(index)]});
    const int64_t called_ns = request.profile ? SteadyNowNs() : 0;
    rpc_->Call(task.peer, std::move(request), timeout, [&, i, done, called_ns](Status s, Response r) {
      LearnIncarnation(prepared->tasks[i].peer.name, r.responder_incarnation);
      if (s.ok()) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!profiled.empty()) {
          profiled[i] = r.step_time;
          profiled[i].task = prepared->tasks[i].peer.name;
          profiled[i].round_trip_ms = static_cast<double>(SteadyNowNs() - called_ns) / 1e6;
        }
        traced[i] = std::move(r.trace);
        traced_origin[i] = r.trace_origin_ns;
        for (ArgMsg& retval : r.retvals) {
          if (retval.index >= 0 && static_cast<std::size_t>(retval.index) < retvals.size()) {
            retvals[static_cast<std::size_t>(retval.index)] = std::move(retval.tensor);
          }
        }
      } else if (s.code() != Code::kCancelled) {
        abort_others(i, s);
      }
      done(std::move(s));
    });
  });
  const bool failed = !FirstCause(statuses).ok();
  for (const auto& task : prepared->tasks) {
    if (!task.sends_remote && !failed) continue;  // it dropped the step itself
    Request cleanup;
    cleanup.method = Method::kCleanupStep;
    cleanup.step_id = step_id;
    rpc_->Notify(task.peer, std::move(cleanup));
  }
  if (options.trace != nullptr) RecordTrace(*prepared, step_id, traced, traced_origin, *options.trace);
  Status status = FirstCause(statuses);
  if (options.profile != nullptr && status.ok()) {
    options.profile->Add({step_id, static_cast<double>(SteadyNowNs() - step_started_ns) / 1e6, std::move(profiled)});
  }
  if (IsLostPeer(status)) {
    return Status(status.code(), StrCat(status.message(), "; step ", step_id, " cancelled"));
  }
  if (IsStaleIncarnation(status)) {
    // Nothing retried here: other tasks may have run part of the step.
    Status again = Invalidate(RestartedTasks());
    return Status(status.code(),
                  StrCat(status.message(), "; step ", step_id, " cancelled",
                         again.ok() ? " (the next step registers the graph again)"
                                    : StrCat(" (and registering it again failed: ", again.message(), ")")));
  }
  if (!status.ok()) {
    if (status.code() == Code::kDeadlineExceeded && options.timeout_ms > 0 &&
        options.timeout_ms < options_.rpc_timeout_ms) {
      return Status(Code::kDeadlineExceeded,
                    StrCat("step ", step_id, " did not finish within ", options.timeout_ms,
                           " ms (RunOptions::timeout_ms) and was cancelled: ", status.message()));
    }
    return status;
  }
  if (outputs != nullptr) {
    outputs->clear();
    for (const std::string& fetch : fetches) {
      const std::size_t i = signature.FetchIndex(fetch);
      if (!retvals[i].valid()) return InternalError("no task returned ", Quote(fetch));
      outputs->push_back(retvals[i]);
    }
  }
  return Status();
}

Expected<std::pair<int64_t, int64_t>> DistSession::ClockOffset(const Peer& task) {
  const uint64_t incarnation = KnownIncarnation(task.name);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = clock_offsets_.find(task.name);
    if (it != clock_offsets_.end() && it->second.incarnation == incarnation) {
      return std::make_pair(it->second.offset_ns, it->second.uncertainty_ns);
    }
  }
  // NTP's estimate: the task read its clock about halfway through the
  // round trip; the shortest of a few round trips bounds the error best.
  int64_t best_rtt = -1, offset = 0;
  for (int i = 0; i < 5; ++i) {
    Request request;
    request.method = Method::kStatus;
    const auto c0 = std::chrono::steady_clock::now();
    auto r = rpc_->CallSync(task, std::move(request), std::min<int64_t>(options_.rpc_timeout_ms, 5000));
    const auto c1 = std::chrono::steady_clock::now();
    if (!r.ok()) return r.status().WithContext(StrCat("reading the clock of ", task.name, " for the trace"));
    const int64_t rtt = std::chrono::duration_cast<std::chrono::nanoseconds>(c1 - c0).count();
    if (best_rtt < 0 || rtt < best_rtt) {
      best_rtt = rtt;
      const int64_t mid = std::chrono::duration_cast<std::chrono::nanoseconds>(c0.time_since_epoch()).count() + rtt / 2;
      offset = r->status.monotonic_ns - mid;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  clock_offsets_[task.name] = {incarnation, offset, best_rtt / 2};
  return std::make_pair(offset, best_rtt / 2);
}

void DistSession::RecordTrace(const Prepared& prepared, int64_t step_id,
                              const std::vector<std::vector<runtime::TraceRecorder::Event>>& traced,
                              const std::vector<int64_t>& origins, runtime::TraceRecorder& trace) {
  // Each task's events, on the recorder's clock.
  std::map<std::pair<std::string, std::string>, std::vector<runtime::TraceRecorder::Event>> by_node;
  for (std::size_t i = 0; i < prepared.tasks.size(); ++i) {
    if (traced[i].empty()) continue;
    const Peer& peer = prepared.tasks[i].peer;
    auto offset = ClockOffset(peer);
    if (!offset.ok()) {
      WEFT_LOG(WARNING) << offset.status().message() << "; its events are left out of the trace";
      continue;
    }
    trace.SetClockOffset(peer.name, static_cast<double>(offset->first) / 1000.0,
                         static_cast<double>(offset->second) / 1000.0);
    for (runtime::TraceRecorder::Event e : traced[i]) {
      const int64_t at_ns = origins[i] + e.start_us * 1000 - offset->first - trace.origin_ns();
      e.start_us = at_ns / 1000;
      e.step_id = step_id;
      e.process = peer.name;
      if (e.device.rfind("/job:", 0) != 0) e.device = peer.name + e.device;
      by_node[{e.process, e.name}].push_back(e);
      trace.Record(std::move(e));
    }
  }
  // A flow from each _Send to its _Recv (in a loop, the k-th of each).
  std::map<std::string, std::pair<const Prepared::Transfer*, const Prepared::Transfer*>> pairs;
  for (const Prepared::Transfer& t : prepared.transfers) {
    auto& pair = pairs[t.key];
    (t.send ? pair.first : pair.second) = &t;
  }
  for (const auto& [key, pair] : pairs) {
    if (pair.first == nullptr || pair.second == nullptr) continue;
    auto sends = by_node.find({pair.first->task, pair.first->node});
    auto recvs = by_node.find({pair.second->task, pair.second->node});
    if (sends == by_node.end() || recvs == by_node.end()) continue;
    const std::size_t n = std::min(sends->second.size(), recvs->second.size());
    for (std::size_t k = 0; k < n; ++k) {
      const auto& s = sends->second[k];
      const auto& r = recvs->second[k];
      runtime::TraceRecorder::Flow flow;
      flow.id =
          (static_cast<uint64_t>(step_id) * 1000003u) ^ (std::hash<std::string>()(key) + k * 0x9e3779b97f4a7c15ull);
      flow.name = key;
      flow.from_process = s.process;
      flow.from_device = s.device;
      flow.from_thread = s.thread;
      flow.from_us = s.start_us;
      flow.to_process = r.process;
      flow.to_device = r.device;
      flow.to_thread = r.thread;
      flow.to_us = r.start_us + std::max<int64_t>(r.duration_us - 1, 0);
      trace.AddFlow(std::move(flow));
    }
  }
}

Status DistSession::StopTasks(const std::vector<std::string>& task_names, const std::string& reason) {
  std::vector<std::string> failed;
  for (const std::string& name : task_names) {
    const Peer* peer = nullptr;
    for (const Peer& p : options_.tasks) {
      if (p.name == name) peer = &p;
    }
    if (peer == nullptr) {
      failed.push_back(StrCat(name, ": not a task of the cluster"));
      continue;
    }
    Request request;
    request.method = Method::kShutdown;
    request.reason = reason;
    auto r = rpc_->CallSync(*peer, std::move(request), std::min<int64_t>(options_.rpc_timeout_ms, 10000));
    if (!r.ok()) failed.push_back(r.status().message());
  }
  if (failed.empty()) return Status();
  return UnavailableError("stopping the tasks: ", StrJoin(failed, "; "));
}

}  // namespace weft::dist
