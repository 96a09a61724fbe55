#include "core/distributed/task_service.h"

#include <chrono>
#include <optional>
#include <random>

#include "core/base/logging.h"
#include "core/distributed/incarnation.h"
#include "core/graph/serialize.h"
#include "core/plugin/host_services.h"
#include "core/runtime/kernels/send_recv_kernels.h"
#include "core/runtime/op_kernel.h"
#include "core/runtime/session.h"

namespace weft::dist {

// One step's state on this task. Created by the first RunGraph or
// RecvTensor that names the step (a peer may pull before this task's part
// started), dropped on CleanupStep.
struct TaskService::Step {
  int64_t id = 0;
  std::unique_ptr<RemoteRendezvous> rendezvous;
  runtime::StepInfo info;
  std::vector<Tensor> args;
  std::vector<Tensor> retvals;
  runtime::CancellationManager::Token abort_token = runtime::CancellationManager::kInvalidToken;
  bool ran = false;
  // Who ran it (RunGraph's caller): its steps go when it restarts.
  std::string caller;
  std::chrono::steady_clock::time_point touched = std::chrono::steady_clock::now();
  // Why it was cancelled from outside (the client's AbortStep, the
  // caller's restart, shutdown): the first reason is kept, and a partition
  // that ended CANCELLED ends with it, so the step's status names its
  // source rather than the nodes it stopped.
  std::mutex cancel_mutex;
  Status cancel_reason;

  void Cancel(const Status& why) {
    {
      std::lock_guard<std::mutex> lock(cancel_mutex);
      if (cancel_reason.ok()) cancel_reason = why;
    }
    info.cancelled.store(true);
    rendezvous->Abort(why);
    info.cancellation.StartCancel();
  }
  Status CancelReason() {
    std::lock_guard<std::mutex> lock(cancel_mutex);
    return cancel_reason;
  }
};

namespace {

// Steps nobody cleaned up (their client died) are dropped after this long.
constexpr auto kStaleStep = std::chrono::minutes(10);

}  // namespace

Expected<std::unique_ptr<TaskService>> TaskService::Start(Options options, const plugin::PluginHost& plugins,
                                                          std::shared_ptr<runtime::DeviceSet> devices) {
  if (devices == nullptr || devices->devices().empty()) {
    return FailedPreconditionError(options.name, " has no devices: no device plugin loaded (see `weft plugins`)");
  }
  std::unique_ptr<TaskService> service(new TaskService(std::move(options)));
  service->incarnation_ = NewIncarnation();
  if (service->options_.board == nullptr) {
    service->options_.board = std::make_shared<StatusBoard>();
    service->options_.board->SetRole("weft serve");
    service->options_.board->SetState("serving");
  }
  // Handles start from this incarnation's bits, so that a handle from
  // before a restart does not name a graph another client registered
  // since (it would run that graph with its own feeds).
  service->next_handle_ = ((service->incarnation_ & 0xffffffffull) << 32) | 1;
  service->kv_ = std::make_shared<KvStoreService>(service->options_.name);
  service->devices_ = std::move(devices);
  runtime::SessionOptions session_options;
  session_options.inter_op_threads = service->options_.inter_op_threads;
  session_options.intra_op_threads = service->options_.intra_op_threads;
  const auto [inter, intra] = runtime::ResolveThreads(session_options);
  service->intra_op_pool_ = plugin::IntraOpPoolFor(intra);
  runtime::EnableKernelServices();
  service->pool_ = std::make_unique<ThreadPool>(std::max(1, inter), "inter_op");
  RpcNode::Options rpc;
  rpc.plugins = &plugins;
  rpc.listen_address = service->options_.listen_address;
  rpc.identity = service->options_.name;
  rpc.incarnation = service->incarnation_;
  rpc.cluster_fingerprint = service->options_.cluster_fingerprint;
  rpc.connect_timeout_ms = service->options_.connect_timeout_ms;
  rpc.security = service->options_.security;
  TaskService* raw = service.get();
  rpc.on_caller_restarted = [raw](const std::string& caller, uint64_t before, uint64_t) {
    raw->AbortStepsOf(caller, before);
  };
  WEFT_ASSIGN_OR_RETURN(service->rpc_,
                        RpcNode::Create(rpc, [raw](const std::string& caller, Request request, RpcNode::Reply reply) {
                          raw->Handle(caller, std::move(request), std::move(reply));
                        }));
  if (service->options_.heartbeat_timeout_ms > 0 && service->options_.peers.size() > 1) {
    // Its peers, watched: a lost one fails the pulls and calls waiting on
    // it, and so the steps that need it.
    std::vector<Peer> peers;
    for (const auto& [name, address] : service->options_.peers) {
      if (name != service->options_.name) peers.push_back({name, address});
    }
    HeartbeatMonitor::Events events;
    const int64_t timeout = service->options_.heartbeat_timeout_ms;
    events.lost = [raw, timeout](const Peer& peer, int64_t silent_ms) {
      const Status lost = LostPeerStatus(peer, silent_ms, timeout);
      WEFT_LOG(WARNING) << raw->name() << ": " << lost.message() << "; failing what waits on it";
      raw->rpc_->FailPeer(peer.name, lost);
    };
    events.restarted = [raw](const Peer& peer, uint64_t before, uint64_t now) {
      WEFT_LOG_AT(FirstToSeeRestart(peer.name, now) ? LogLevel::kInfo : LogLevel::kDebug)
          << raw->name() << ": its heartbeat finds " << peer.name << " restarted (incarnation "
          << FormatIncarnation(before) << " -> " << FormatIncarnation(now) << ")";
    };
    auto monitor = std::make_unique<HeartbeatMonitor>(
        service->rpc_.get(), std::move(peers),
        HeartbeatMonitor::Options{service->options_.heartbeat_interval_ms, timeout}, std::move(events));
    std::lock_guard<std::mutex> lock(service->monitor_mutex_);
    service->monitor_ = std::move(monitor);
  }
  return service;
}

std::vector<HeartbeatMonitor::PeerState> TaskService::PeerStates() const {
  std::lock_guard<std::mutex> lock(monitor_mutex_);
  if (monitor_ == nullptr) return {};
  return monitor_->Snapshot();
}

std::optional<HeartbeatMonitor::PeerState> TaskService::PeerStateOf(const std::string& name) const {
  for (HeartbeatMonitor::PeerState& p : PeerStates()) {
    if (p.peer.name == name) return std::move(p);
  }
  return std::nullopt;
}

TaskService::~TaskService() {
  if (kv_ != nullptr) kv_->Close(CancelledError(options_.name, " is shutting down"));
  std::map<int64_t, std::shared_ptr<Step>> steps;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    steps = steps_;
  }
  for (auto& [id, step] : steps) step->Cancel(CancelledError(options_.name, " is shutting down"));
  std::unique_ptr<HeartbeatMonitor> monitor;
  {
    // A status request on the RPC pool may be reading it.
    std::lock_guard<std::mutex> lock(monitor_mutex_);
    monitor = std::move(monitor_);
  }
  monitor.reset();
  // No request is served after this; replies still in flight go nowhere.
  rpc_.reset();
  pool_.reset();
  std::lock_guard<std::mutex> lock(mutex_);
  steps_.clear();
  graphs_.clear();
}

void TaskService::AbortStepsOf(const std::string& caller, uint64_t incarnation) {
  std::vector<std::shared_ptr<Step>> steps;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = steps_.begin(); it != steps_.end();) {
      if (it->second->caller == caller) {
        steps.push_back(it->second);
        it = steps_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& step : steps) {
    const Status why =
        Status(Code::kAborted, StrCat(caller, " was restarted, so its step ", step->id, " (of incarnation ",
                                      FormatIncarnation(incarnation), ") was aborted"));
    step->Cancel(why);
  }
  if (!steps.empty()) {
    WEFT_LOG(INFO) << options_.name << ": aborted " << steps.size() << " step" << (steps.size() == 1 ? "" : "s")
                   << " of " << caller << ", which was restarted";
  }
}

Status TaskService::Ping(const std::string& name, int64_t timeout_ms) {
  return IncarnationOf(name, timeout_ms).status();
}

Expected<uint64_t> TaskService::IncarnationOf(const std::string& name, int64_t timeout_ms) {
  auto it = options_.peers.find(name);
  if (it == options_.peers.end()) return NotFoundError(name, " is not a task of the cluster");
  Request request;
  request.method = Method::kHeartbeat;
  WEFT_ASSIGN_OR_RETURN(Response r, rpc_->CallSync(Peer{name, it->second}, std::move(request), timeout_ms));
  return r.incarnation;
}

void TaskService::NotifyKvSet(const std::string& name, std::string key, std::string value) {
  auto it = options_.peers.find(name);
  if (it == options_.peers.end()) return;
  if (name == options_.name) {
    (void)kv_->Set(key, std::move(value));
    return;
  }
  Request request;
  request.method = Method::kKvSet;
  request.kv_keys = {std::move(key)};
  request.kv_value = std::move(value);
  rpc_->Notify(Peer{name, it->second}, std::move(request));
}

Status TaskService::AskToStop(const std::string& name, const std::string& reason, int64_t timeout_ms) {
  auto it = options_.peers.find(name);
  if (it == options_.peers.end()) return NotFoundError(name, " is not a task of the cluster");
  Request request;
  request.method = Method::kShutdown;
  request.reason = reason;
  return rpc_->CallSync(Peer{name, it->second}, std::move(request), timeout_ms).status();
}

Expected<std::shared_ptr<runtime::KvStore>> TaskService::KvStoreOf(const std::string& name) {
  if (name == options_.name) return std::shared_ptr<runtime::KvStore>(kv_);
  auto it = options_.peers.find(name);
  if (it == options_.peers.end()) return NotFoundError(name, " is not a task of the cluster");
  return std::shared_ptr<runtime::KvStore>(
      std::make_shared<RemoteKvStore>(rpc_.get(), Peer{name, it->second}, options_.rpc_timeout_ms));
}

std::vector<std::string> TaskService::DeviceNames() const {
  std::vector<std::string> names;
  for (const auto& d : devices_->devices()) names.push_back(options_.name + d->name());
  return names;
}

const runtime::RuntimeDevice* TaskService::LocalDevice(const std::string& full_name) const {
  if (full_name.rfind(options_.name + "/", 0) != 0) return nullptr;
  return devices_->Find(full_name.substr(options_.name.size()));
}

Expected<std::shared_ptr<runtime::OpKernel>> TaskService::KernelFor(const Graph& graph, const Graph::Node& node,
                                                                    const runtime::RuntimeDevice& device) {
  if (!node.op->stateful) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::OpKernel> kernel, runtime::CreateKernel(graph, node, device));
    return std::shared_ptr<runtime::OpKernel>(std::move(kernel));
  }
  // Stateful kernels (random ops) keep their state across the graphs
  // clients register, as in one session.
  std::lock_guard<std::mutex> lock(kernels_mutex_);
  std::string definition = StrCat(device.name(), "|", node.op_name());
  for (const auto& [attr, value] : node.def.attrs) definition += StrCat("|", attr, "=", value.ToString());
  auto& slot = stateful_kernels_[{node.name(), definition}];
  if (slot == nullptr) {
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<runtime::OpKernel> kernel, runtime::CreateKernel(graph, node, device));
    slot = std::move(kernel);
  }
  return slot;
}

void TaskService::Handle(const std::string& caller, Request request, RpcNode::Reply reply) {
  auto answer = [&](Expected<Response> r) {
    if (!r.ok()) {
      reply(r.status().WithContext(options_.name), Response());
    } else {
      reply(Status(), std::move(*r));
    }
  };
  switch (request.method) {
    case Method::kGetDevices: answer(GetDevices()); return;
    case Method::kQuerySupport: answer(QuerySupport(request)); return;
    case Method::kRegisterGraph: answer(RegisterGraph(request)); return;
    case Method::kDeregisterGraph: {
      std::lock_guard<std::mutex> lock(mutex_);
      graphs_.erase(request.handle);
      reply(Status(), Response());
      return;
    }
    case Method::kRunGraph: RunGraph(caller, std::move(request), std::move(reply)); return;
    case Method::kRecvTensor: RecvTensor(request, std::move(reply)); return;
    case Method::kAbortStep: {
      if (std::shared_ptr<Step> step = GetStep(request.step_id, /*create=*/true)) {
        step->Cancel(request.abort_status.ok() ? CancelledError("the client aborted the step") : request.abort_status);
      }
      reply(Status(), Response());
      return;
    }
    case Method::kCleanupStep: {
      std::shared_ptr<Step> step;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = steps_.find(request.step_id);
        if (it != steps_.end()) {
          step = it->second;
          steps_.erase(it);
        }
      }
      if (step != nullptr) step->rendezvous->Abort(CancelledError("step ", request.step_id, " was cleaned up"));
      reply(Status(), Response());
      return;
    }
    case Method::kHeartbeat: {
      Response r;
      r.method = Method::kHeartbeat;
      r.task = options_.name;
      r.incarnation = incarnation_;
      reply(Status(), std::move(r));
      return;
    }
    case Method::kStatus: reply(Status(), StatusAnswer()); return;
    case Method::kKvSet: {
      Status set = kv_->Set(request.kv_keys[0], std::move(request.kv_value));
      reply(set, Response());
      return;
    }
    case Method::kKvGet: {
      kv_->Serve(std::move(request.kv_keys), request.kv_wait_ms,
                 [reply = std::move(reply)](Status status, std::vector<std::string> values) {
                   Response r;
                   r.method = Method::kKvGet;
                   r.kv_values = std::move(values);
                   reply(status, std::move(r));
                 });
      return;
    }
    case Method::kShutdown: {
      if (!options_.on_shutdown) {
        reply(FailedPreconditionError(options_.name,
                                      " was started with `weft serve` and stops only on SIGINT or "
                                      "SIGTERM, not when ",
                                      caller, " asks (", request.reason, ")"),
              Response());
        return;
      }
      reply(Status(), Response());
      options_.on_shutdown(caller, request.reason);
      return;
    }
    default: break;
  }
  reply(UnimplementedError(options_.name, " does not serve ", MethodName(request.method), " (from ", caller, ")"),
        Response());
}

Response TaskService::GetDevices() const {
  Response r;
  r.method = Method::kGetDevices;
  for (const auto& d : devices_->devices()) {
    DeviceInfo info;
    info.name = options_.name + d->name();
    info.type = d->type();
    info.ordinal = d->device().ordinal();
    info.incarnation = d->incarnation();
    info.host_visible = d->host_visible();
    info.host_to_device_gbps = d->host_to_device_gbps();
    info.device_to_host_gbps = d->device_to_host_gbps();
    r.devices.push_back(std::move(info));
  }
  return r;
}

Response TaskService::StatusAnswer() const {
  Response r;
  r.method = Method::kStatus;
  TaskStatusMsg& t = r.status;
  t.task = options_.name;
  t.address = rpc_->address();
  t.incarnation = incarnation_;
  t.monotonic_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const StatusBoard::Snapshot b = options_.board->Take();
  t.role = b.role;
  t.state = b.state;
  t.step = b.step;
  t.total_steps = b.total_steps;
  t.global_step = b.global_step;
  t.timed = b.timed;
  t.p50_ms = b.p50_ms;
  t.p90_ms = b.p90_ms;
  t.p99_ms = b.p99_ms;
  t.steps_timed = b.steps_timed;
  t.accepted_gradients = b.accepted_gradients;
  t.dropped_gradients = b.dropped_gradients;
  for (const HeartbeatMonitor::PeerState& p : PeerStates()) {
    PeerHealthMsg h;
    h.task = p.peer.name;
    h.state = p.state == HeartbeatMonitor::PeerState::State::kAlive  ? "alive"
              : p.state == HeartbeatMonitor::PeerState::State::kLost ? "lost"
                                                                     : "unknown";
    h.incarnation = p.incarnation;
    h.silent_ms = p.silent_ms;
    h.round_trip_us = p.round_trip_us;
    t.peers.push_back(std::move(h));
  }
  return r;
}

Expected<Response> TaskService::QuerySupport(const Request& request) const {
  WEFT_ASSIGN_OR_RETURN(GraphDef def, ParseGraphDef(request.graph, GraphFormat::kBinary, "the graph to place"));
  WEFT_ASSIGN_OR_RETURN(Graph graph, Graph::FromGraphDef(std::move(def)));
  Response r;
  r.method = Method::kQuerySupport;
  for (const Graph::Node& node : graph.nodes()) {
    std::vector<DeviceSupport> per_device;
    for (const auto& d : devices_->devices()) {
      runtime::KernelSupport s = runtime::QueryKernelSupport(graph, node, *d);
      per_device.push_back({s.supported, s.cost_ns, s.reason});
    }
    r.support.push_back(std::move(per_device));
  }
  return r;
}

Expected<Response> TaskService::RegisterGraph(const Request& request) {
  auto registered = std::make_shared<Registered>();
  for (const PartitionMsg& partition : request.partitions) {
    const runtime::RuntimeDevice* device = LocalDevice(partition.device);
    if (device == nullptr) {
      return NotFoundError("a partition for device ", Quote(partition.device), ", which is not one of this task's (",
                           StrJoin(DeviceNames(), ", "), ")");
    }
    const std::string what = StrCat("the partition for ", partition.device);
    WEFT_ASSIGN_OR_RETURN(GraphDef def, ParseGraphDef(partition.graph, GraphFormat::kBinary, what));
    auto graph = Graph::FromGraphDef(std::move(def));
    if (!graph.ok()) return graph.status().WithContext(what);
    Part part;
    part.graph = std::make_shared<const Graph>(std::move(*graph));
    part.device = device;
    for (const Graph::Node& node : part.graph->nodes()) {
      if (node.op_name() == "_Retval") {
        registered->num_retvals = std::max(registered->num_retvals, node.def.attrs.at("index").get<int64_t>() + 1);
      }
      if (!node.def.device.empty() && node.def.device != partition.device) {
        return InvalidArgumentError(what, ": node ", Quote(node.name()), " is placed on ", Quote(node.def.device));
      }
      // A transfer from a device of this task must name its incarnation
      // now: a client that placed the graph before a restart places again.
      if (node.op_name() == "_Send" || node.op_name() == "_Recv") {
        const AttrMap& a = node.def.attrs;
        auto device_attr = a.find("send_device");
        auto incarnation_attr = a.find("send_device_incarnation");
        if (device_attr != a.end() && incarnation_attr != a.end() &&
            LocalDevice(device_attr->second.get<std::string>()) != nullptr) {
          WEFT_RETURN_IF_ERROR(CheckSendIncarnation(device_attr->second.get<std::string>(),
                                                    static_cast<uint64_t>(incarnation_attr->second.get<int64_t>()),
                                                    StrCat(what, ": node ", Quote(node.name()))));
        }
      }
    }
    std::vector<const runtime::RuntimeDevice*> node_devices(static_cast<std::size_t>(part.graph->num_nodes()), device);
    auto factory = [this](const Graph& g, const Graph::Node& node, const runtime::RuntimeDevice& d) {
      return KernelFor(g, node, d);
    };
    auto executor = runtime::Executor::Create(part.graph, std::move(node_devices), pool_.get(), factory);
    if (!executor.ok()) return executor.status().WithContext(what);
    part.executor = std::move(*executor);
    for (const Graph::Node& node : part.graph->nodes()) {
      if (node.op_name() != "_Recv" || !node.inputs.empty() || !node.control_inputs.empty()) continue;
      runtime::RendezvousKey key = runtime::SendRecvKeyOf(node);
      const std::string from = TaskOfDevice(key.src_device);
      if (!from.empty() && from != options_.name) registered->prefetch[from].push_back(std::move(key));
    }
    registered->parts.push_back(std::move(part));
  }
  Response r;
  r.method = Method::kRegisterGraph;
  std::lock_guard<std::mutex> lock(mutex_);
  r.handle = next_handle_++;
  graphs_[r.handle] = std::move(registered);
  return r;
}

std::shared_ptr<TaskService::Step> TaskService::GetStep(int64_t step_id, bool create) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = steps_.find(step_id);
  const auto now = std::chrono::steady_clock::now();
  if (it != steps_.end()) {
    it->second->touched = now;
    return it->second;
  }
  if (!create) return nullptr;
  // Drop steps whose client never cleaned them up.
  for (auto s = steps_.begin(); s != steps_.end();) {
    s = now - s->second->touched > kStaleStep ? steps_.erase(s) : std::next(s);
  }
  auto step = std::make_shared<Step>();
  step->id = step_id;
  step->info.step_id = step_id;
  step->info.intra_op = intra_op_pool_.get();
  auto peers = options_.peers;
  step->rendezvous = std::make_unique<RemoteRendezvous>(
      step_id, options_.name, rpc_.get(),
      [peers](const std::string& task) -> std::optional<Peer> {
        auto p = peers.find(task);
        if (p == peers.end()) return std::nullopt;
        return Peer{p->first, p->second};
      },
      options_.rpc_timeout_ms);
  step->info.rendezvous = step->rendezvous.get();
  RemoteRendezvous* rendezvous = step->rendezvous.get();
  step->abort_token = step->info.cancellation.Register(
      [rendezvous] { rendezvous->Abort(CancelledError("another part of the step failed")); });
  steps_[step_id] = step;
  return step;
}

void TaskService::RunGraph(const std::string& caller, Request request, RpcNode::Reply reply) {
  std::shared_ptr<Registered> registered;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = graphs_.find(request.handle);
    if (it != graphs_.end()) registered = it->second;
  }
  if (registered == nullptr) {
    reply(NotFoundError(options_.name, " has no graph registered as ", request.handle,
                        " (was the task restarted after the client registered it? Its graphs and variables are "
                        "then gone: start the client again, with --resume when it trains)"),
          Response());
    return;
  }
  std::shared_ptr<Step> step = GetStep(request.step_id, /*create=*/true);
  if (step->ran) {
    reply(FailedPreconditionError(options_.name, ": step ", request.step_id, " was already run here"), Response());
    return;
  }
  step->ran = true;
  step->caller = caller;
  int64_t num_args = 0;
  for (const ArgMsg& feed : request.feeds) num_args = std::max(num_args, feed.index + 1);
  step->args.assign(static_cast<std::size_t>(num_args), Tensor());
  for (ArgMsg& feed : request.feeds) {
    if (feed.index < 0) {
      reply(InvalidArgumentError("feed index ", feed.index), Response());
      return;
    }
    step->args[static_cast<std::size_t>(feed.index)] = std::move(feed.tensor);
  }
  step->retvals.assign(static_cast<std::size_t>(registered->num_retvals), Tensor());
  step->info.args = &step->args;
  step->info.retvals = &step->retvals;

  struct Join {
    std::mutex mutex;
    std::size_t remaining;
    Status status;
  };
  auto join = std::make_shared<Join>();
  join->remaining = registered->parts.size();
  const std::string name = options_.name;
  const bool last_use = request.last_use;
  const auto started = std::chrono::steady_clock::now();
  std::shared_ptr<StatusBoard> board = options_.board;
  // The client asked for a trace of this step: its nodes, with the clock
  // the client puts them on its own by.
  // A profiled step is traced too, its events summed up here.
  std::shared_ptr<runtime::TraceRecorder> trace =
      request.trace || request.profile ? std::make_shared<runtime::TraceRecorder>() : nullptr;
  struct Profiled {
    bool send_trace;
    int64_t received_ns;  // the request read
    int64_t started_ns;   // this handler started (decoded, off the queue)
    RpcTimes before;
  };
  std::optional<Profiled> profiled;
  if (request.profile) {
    const int64_t now = SteadyNowNs();
    profiled = Profiled{request.trace, request.received_ns != 0 ? request.received_ns : now, now, ReadRpcTimes()};
  }
  auto forget = [this](int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    steps_.erase(id);
  };
  auto finish = [step, registered, reply, join, name, last_use, forget, started, board, trace, profiled]() {
    board->RunGraphDone(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
    Response r;
    r.method = Method::kRunGraph;
    if (trace != nullptr) {
      r.trace = trace->events();
      r.trace_origin_ns = trace->origin_ns();
    }
    if (profiled) {
      const RpcTimes after = ReadRpcTimes();
      const runtime::BusyTime busy = runtime::SummarizeBusy(r.trace);
      r.has_step_time = true;
      r.step_time.run_ms = static_cast<double>(SteadyNowNs() - profiled->received_ns) / 1e6;
      r.step_time.compute_ms = static_cast<double>(busy.compute_us) / 1000.0;
      r.step_time.wait_ms = static_cast<double>(busy.wait_us) / 1000.0;
      r.step_time.serialization_ms = static_cast<double>(after.encode_ns - profiled->before.encode_ns +
                                                         after.decode_ns - profiled->before.decode_ns) /
                                     1e6;
      // The other requests' waits meanwhile, and this one's own.
      r.step_time.queued_ms = static_cast<double>(after.queued_ns - profiled->before.queued_ns + profiled->started_ns -
                                                  profiled->received_ns) /
                              1e6;
      if (!profiled->send_trace) r.trace.clear();
    }
    Status status = join->status;
    if (status.code() == Code::kCancelled) {
      // Cancelled from outside: said with the reason it was given.
      if (Status reason = step->CancelReason(); !reason.ok()) status = std::move(reason);
    }
    if (status.ok()) {
      for (const Part& part : registered->parts) {
        for (const Graph::Node& node : part.graph->nodes()) {
          if (node.op_name() != "_Retval") continue;
          const int64_t index = node.def.attrs.at("index").get<int64_t>();
          if (!step->retvals[static_cast<std::size_t>(index)].valid()) {
            // Its executors ended without an error but without this output:
            // the step was cut short (another task of it was lost, and the
            // client cancelled it here). Said so, rather than failing to
            // send an empty tensor.
            status =
                Status(Code::kAborted, StrCat("output ", index, " was not produced",
                                              step->info.cancellation.IsCancelled() ? " (the step was cancelled)" : "",
                                              "; run the step again"));
            break;
          }
          auto host = part.device->CopyToHost(step->retvals[static_cast<std::size_t>(index)]);
          if (!host.ok()) {
            status = host.status().WithContext(StrCat("fetching output ", index));
            break;
          }
          r.retvals.push_back({index, std::move(*host)});
        }
      }
    }
    step->info.cancellation.Deregister(step->abort_token);
    reply(status.ok() ? Status() : status.WithContext(StrCat(name, ", step ", step->id)), std::move(r));
    if (last_use) forget(step->id);
  };
  if (registered->parts.empty()) {
    finish();
    return;
  }
  if (!registered->prefetch.empty()) step->rendezvous->Prefetch(registered->prefetch);
  for (const Part& part : registered->parts) {
    part.executor->RunAsync(step->info, trace.get(), [join, finish](Status status) {
      bool last;
      {
        std::lock_guard<std::mutex> lock(join->mutex);
        // The cause, rather than the cancellations it set off.
        if (!status.ok() && (join->status.ok() || join->status.code() == Code::kCancelled)) {
          join->status = std::move(status);
        }
        last = --join->remaining == 0;
      }
      if (last) finish();
    });
  }
}

Status TaskService::CheckSendIncarnation(const std::string& device_name, uint64_t incarnation,
                                         const std::string& what) const {
  const runtime::RuntimeDevice* device = LocalDevice(device_name);
  if (device == nullptr) {
    return NotFoundError(options_.name, ": ", what, " names sending device ", Quote(device_name),
                         ", which is not one of this task's (", StrJoin(DeviceNames(), ", "), ")");
  }
  if (incarnation != device->incarnation()) {
    return Status(Code::kAborted,
                  StrCat(options_.name, ": ", what, " names device ", device_name, " incarnation ", incarnation,
                         ", but that device is incarnation ", device->incarnation(), " now: the task", kRestartedPhrase,
                         FormatIncarnation(incarnation_), ", and the graph was placed before"));
  }
  return Status();
}

void TaskService::RecvTensor(const Request& request, RpcNode::Reply reply) {
  const runtime::RendezvousKey key = request.key;
  // A pull meant for a device of an earlier start of this task (its step
  // state is gone), refused before it creates any.
  if (Status stale = CheckSendIncarnation(key.src_device, key.src_incarnation, StrCat("tensor ", key.edge_name));
      !stale.ok()) {
    reply(stale, Response());
    return;
  }
  std::shared_ptr<Step> step = GetStep(request.step_id, /*create=*/true);
  // The base class's receive: the key's sender is on this task. This runs on
  // the transport's thread (RpcNode serves pulls there), and so may the
  // answer: a tensor that must first be copied off its device is answered
  // from the inter-op pool instead, so that no copy holds that thread up.
  step->rendezvous->runtime::Rendezvous::RecvAsync(key, [step, reply, key, name = options_.name, pool = pool_.get()](
                                                            const Status& status, runtime::Rendezvous::Item item) {
    if (!status.ok()) {
      reply(Status(status.code(), StrCat(name, ": ", key.ToString(), ": ", status.message())), Response());
      return;
    }
    if (!item.is_dead && item.device != nullptr && !item.value.host_visible()) {
      pool->Schedule([reply, key, name, item = std::move(item)] {
        auto host = item.device->CopyToHost(item.value);
        if (!host.ok()) {
          reply(host.status().WithContext(StrCat(name, ": copying ", key.ToString(), " to the host")), Response());
          return;
        }
        Response copied;
        copied.method = Method::kRecvTensor;
        copied.tensor = std::move(*host);
        reply(Status(), std::move(copied));
      });
      return;
    }
    Response r;
    r.method = Method::kRecvTensor;
    r.is_dead = item.is_dead;
    if (!item.is_dead) r.tensor = std::move(item.value);
    reply(Status(), std::move(r));
  });
}

}  // namespace weft::dist
