#include "core/distributed/wire.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>

#include "core/distributed/wire.capnp.h"

namespace weft::dist {
namespace {

namespace w = weft::dist::wire;
namespace gw = weft::wire;

// A tensor's bytes inside a received payload, shared with the message.
class PayloadBuffer : public Buffer {
 public:
  PayloadBuffer(void* data, uint64_t size, std::shared_ptr<void> owner)
      : Buffer(data, size, nullptr, nullptr), owner_(std::move(owner)) {}

 private:
  std::shared_ptr<void> owner_;
};

alignas(64) const unsigned char kZeros[64] = {};

std::string Str(capnp::Text::Reader t) { return std::string(t.cStr(), t.size()); }

struct Keep {
  std::vector<Tensor> tensors;
};

// --- Encoding
// -------------------------------------------------------------------------------------

class Writer {
 public:
  Status AddTensor(const Tensor& t, w::TensorMeta::Builder out) {
    if (!t.valid()) return InvalidArgumentError("cannot send an empty tensor");
    if (t.dtype() == DType::kResource) return InvalidArgumentError("cannot send a resource handle between tasks");
    out.setDtype(static_cast<gw::DType>(static_cast<uint16_t>(t.dtype())));
    auto dims = out.initShape(static_cast<unsigned>(t.rank()));
    for (int i = 0; i < t.rank(); ++i) dims.set(static_cast<unsigned>(i), t.dim(i));
    if (t.dtype() == DType::kString) {
      auto strings = out.initStrings(static_cast<unsigned>(t.num_elements()));
      for (int64_t i = 0; i < t.num_elements(); ++i) {
        const std::string s(t.string_at(i));
        strings.set(static_cast<unsigned>(i), capnp::Text::Reader(s.c_str(), s.size()));
      }
      return Status();
    }
    const uint64_t size = t.byte_size();
    if (size > 0 && !t.host_visible()) return InternalError("a tensor to send must be in host memory");
    const uint64_t pad = (64 - payload_size_ % 64) % 64;
    if (size > 0 && pad > 0) {
      slices_.push_back({kZeros, pad});
      payload_size_ += pad;
    }
    out.setPayloadOffset(payload_size_);
    out.setPayloadSize(size);
    if (size > 0) {
      slices_.push_back({t.raw_data(), size});
      payload_size_ += size;
      keep_->tensors.push_back(t);
    }
    return Status();
  }

  Encoded Finish(capnp::MallocMessageBuilder& message) {
    Encoded e;
    kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
    kj::ArrayPtr<const char> bytes = words.asChars();
    e.header.assign(bytes.begin(), bytes.size());
    e.slices = std::move(slices_);
    e.payload_size = payload_size_;
    e.keepalive = std::move(keep_);
    return e;
  }

 private:
  std::vector<Slice> slices_;
  uint64_t payload_size_ = 0;
  std::shared_ptr<Keep> keep_ = std::make_shared<Keep>();
};

void SetStatus(const Status& s, w::WireStatus::Builder out) {
  out.setCode(static_cast<uint32_t>(s.code()));
  out.setMessage(std::string(s.message()));
}

void SetKey(const runtime::RendezvousKey& k, w::RendezvousKey::Builder out) {
  out.setSrcDevice(k.src_device);
  out.setSrcIncarnation(k.src_incarnation);
  out.setDstDevice(k.dst_device);
  out.setEdgeName(k.edge_name);
  out.setFrame(k.frame);
  out.setIteration(k.iteration);
}

Status SetArgs(Writer& writer, const std::vector<ArgMsg>& args, capnp::List<w::Arg>::Builder out) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    out[static_cast<unsigned>(i)].setIndex(args[i].index);
    WEFT_RETURN_IF_ERROR(writer.AddTensor(args[i].tensor, out[static_cast<unsigned>(i)].initTensor())
                             .WithContext(StrCat("argument ", args[i].index)));
  }
  return Status();
}

capnp::Data::Reader AsData(const std::string& s) {
  return capnp::Data::Reader(reinterpret_cast<const kj::byte*>(s.data()), s.size());
}

Status EncodeRequest(Writer& writer, const Request& r, w::Request::Builder out) {
  switch (r.method) {
    case Method::kHello: {
      auto h = out.initHello();
      h.setClusterFingerprint(r.cluster_fingerprint);
      h.setCaller(r.caller);
      h.setCallerIncarnation(r.caller_incarnation);
      h.setExpectedTask(r.expected_task);
      return Status();
    }
    case Method::kGetDevices: out.setGetDevices(); return Status();
    case Method::kQuerySupport: out.setQuerySupport(AsData(r.graph)); return Status();
    case Method::kRegisterGraph: {
      auto parts = out.initRegisterGraph(static_cast<unsigned>(r.partitions.size()));
      for (std::size_t i = 0; i < r.partitions.size(); ++i) {
        parts[static_cast<unsigned>(i)].setDevice(r.partitions[i].device);
        parts[static_cast<unsigned>(i)].setGraph(AsData(r.partitions[i].graph));
      }
      return Status();
    }
    case Method::kDeregisterGraph: out.setDeregisterGraph(r.handle); return Status();
    case Method::kRunGraph: {
      auto run = out.initRunGraph();
      run.setHandle(r.handle);
      run.setStepId(r.step_id);
      run.setLastUse(r.last_use);
      run.setTrace(r.trace);
      run.setProfile(r.profile);
      return SetArgs(writer, r.feeds, run.initFeeds(static_cast<unsigned>(r.feeds.size())));
    }
    case Method::kRecvTensor: {
      auto recv = out.initRecvTensor();
      recv.setStepId(r.step_id);
      SetKey(r.key, recv.initKey());
      return Status();
    }
    case Method::kRecvTensors: {
      if (r.keys.empty() || r.keys.size() > kMaxRecvTensorsKeys) {
        return InternalError("a RecvTensors carries 1 to ", kMaxRecvTensorsKeys, " keys, not ", r.keys.size());
      }
      auto recv = out.initRecvTensors();
      recv.setStepId(r.step_id);
      auto keys = recv.initKeys(static_cast<unsigned>(r.keys.size()));
      for (std::size_t i = 0; i < r.keys.size(); ++i) SetKey(r.keys[i], keys[static_cast<unsigned>(i)]);
      return Status();
    }
    case Method::kAbortStep: {
      auto abort = out.initAbortStep();
      abort.setStepId(r.step_id);
      SetStatus(r.abort_status, abort.initStatus());
      return Status();
    }
    case Method::kCleanupStep: out.setCleanupStep(r.step_id); return Status();
    case Method::kHeartbeat: out.setHeartbeat(); return Status();
    case Method::kStatus: out.setStatus(); return Status();
    case Method::kShutdown: out.setShutdown(r.reason); return Status();
    case Method::kKvSet: {
      if (r.kv_keys.size() != 1) return InternalError("a KvSet carries one key, not ", r.kv_keys.size());
      auto set = out.initKvSet();
      set.setKey(r.kv_keys[0]);
      set.setValue(AsData(r.kv_value));
      return Status();
    }
    case Method::kKvGet: {
      auto get = out.initKvGet();
      auto keys = get.initKeys(static_cast<unsigned>(r.kv_keys.size()));
      for (std::size_t i = 0; i < r.kv_keys.size(); ++i) keys.set(static_cast<unsigned>(i), r.kv_keys[i]);
      get.setWaitMs(r.kv_wait_ms);
      return Status();
    }
    case Method::kNone: break;
  }
  return InternalError("a request without a method");
}

Status EncodeResponse(Writer& writer, const Response& r, w::Response::Builder out) {
  switch (r.method) {
    case Method::kHello: {
      auto h = out.initHelloReply();
      h.setTask(r.task);
      h.setIncarnation(r.incarnation);
      return Status();
    }
    case Method::kGetDevices: {
      auto list = out.initDevices(static_cast<unsigned>(r.devices.size()));
      for (std::size_t i = 0; i < r.devices.size(); ++i) {
        const DeviceInfo& d = r.devices[i];
        auto b = list[static_cast<unsigned>(i)];
        b.setName(d.name);
        b.setType(d.type);
        b.setOrdinal(d.ordinal);
        b.setIncarnation(d.incarnation);
        b.setHostVisible(d.host_visible);
        b.setHostToDeviceGbps(d.host_to_device_gbps);
        b.setDeviceToHostGbps(d.device_to_host_gbps);
      }
      return Status();
    }
    case Method::kQuerySupport: {
      auto nodes = out.initSupport(static_cast<unsigned>(r.support.size()));
      for (std::size_t n = 0; n < r.support.size(); ++n) {
        auto devices = nodes[static_cast<unsigned>(n)].initDevices(static_cast<unsigned>(r.support[n].size()));
        for (std::size_t d = 0; d < r.support[n].size(); ++d) {
          auto b = devices[static_cast<unsigned>(d)];
          b.setSupported(r.support[n][d].supported);
          b.setCostNs(r.support[n][d].cost_ns);
          b.setReason(r.support[n][d].reason);
        }
      }
      return Status();
    }
    case Method::kRegisterGraph: out.setGraphHandle(r.handle); return Status();
    case Method::kRunGraph: {
      if (!r.trace.empty()) {
        if (r.trace.size() > kMaxTraceEvents) {
          return ResourceExhaustedError("a trace of ", r.trace.size(), " events (at most ", kMaxTraceEvents,
                                        " travel in one answer)");
        }
        auto events = out.initTrace(static_cast<unsigned>(r.trace.size()));
        for (std::size_t i = 0; i < r.trace.size(); ++i) {
          auto e = events[static_cast<unsigned>(i)];
          e.setNode(r.trace[i].name);
          e.setOp(r.trace[i].op);
          e.setDevice(r.trace[i].device);
          e.setThread(r.trace[i].thread);
          e.setStartUs(r.trace[i].start_us);
          e.setDurationUs(r.trace[i].duration_us);
        }
        out.setTraceOriginNs(r.trace_origin_ns);
      }
      if (r.has_step_time) {
        auto t = out.initStepTime();
        auto ns = [](double ms) { return static_cast<int64_t>(ms * 1e6); };
        t.setRunNs(ns(r.step_time.run_ms));
        t.setComputeNs(ns(r.step_time.compute_ms));
        t.setWaitNs(ns(r.step_time.wait_ms));
        t.setSerializationNs(ns(r.step_time.serialization_ms));
        t.setQueuedNs(ns(r.step_time.queued_ms));
      }
      return SetArgs(writer, r.retvals, out.initRetvals(static_cast<unsigned>(r.retvals.size())));
    }
    case Method::kRecvTensor:
      if (r.is_dead) {
        out.initTensor();
        out.setIsDead(true);
        return Status();
      }
      return writer.AddTensor(r.tensor, out.initTensor());
    case Method::kHeartbeat: {
      auto h = out.initHeartbeatReply();
      h.setTask(r.task);
      h.setIncarnation(r.incarnation);
      return Status();
    }
    case Method::kStatus: {
      const TaskStatusMsg& t = r.status;
      auto o = out.initTaskStatus();
      o.setTask(t.task);
      o.setAddress(t.address);
      o.setIncarnation(t.incarnation);
      o.setMonotonicNs(t.monotonic_ns);
      o.setRole(t.role);
      o.setState(t.state);
      o.setStep(t.step);
      o.setTotalSteps(t.total_steps);
      o.setGlobalStep(t.global_step);
      o.setTimed(t.timed);
      o.setP50Ms(t.p50_ms);
      o.setP90Ms(t.p90_ms);
      o.setP99Ms(t.p99_ms);
      o.setStepsTimed(t.steps_timed);
      o.setAcceptedGradients(t.accepted_gradients);
      o.setDroppedGradients(t.dropped_gradients);
      auto peers = o.initPeers(static_cast<unsigned>(t.peers.size()));
      for (std::size_t i = 0; i < t.peers.size(); ++i) {
        auto p = peers[static_cast<unsigned>(i)];
        p.setTask(t.peers[i].task);
        p.setState(t.peers[i].state);
        p.setIncarnation(t.peers[i].incarnation);
        p.setSilentMs(t.peers[i].silent_ms);
        p.setRoundTripUs(t.peers[i].round_trip_us);
      }
      return Status();
    }
    case Method::kKvGet: {
      auto values = out.initKvValues(static_cast<unsigned>(r.kv_values.size()));
      for (std::size_t i = 0; i < r.kv_values.size(); ++i) values.set(static_cast<unsigned>(i), AsData(r.kv_values[i]));
      return Status();
    }
    default: out.setNone(); return Status();
  }
}

// --- Decoding
// -------------------------------------------------------------------------------------

class Reader {
 public:
  Reader(const void* payload, uint64_t payload_size, std::shared_ptr<void> owner)
      : payload_(static_cast<const char*>(payload)), payload_size_(payload_size), owner_(std::move(owner)) {}

  Expected<Tensor> ReadTensor(w::TensorMeta::Reader in) const {
    const auto number = static_cast<int32_t>(static_cast<uint16_t>(in.getDtype()));
    DType dtype = DType::kInvalid;
    for (DType known : AllDTypes()) {
      if (static_cast<int32_t>(known) == number) dtype = known;
    }
    if (dtype == DType::kInvalid || dtype == DType::kResource) {
      return InvalidArgumentError("a tensor of unknown or unsendable dtype number ", number);
    }
    std::vector<int64_t> dims;
    for (int64_t d : in.getShape()) {
      if (d < 0) return InvalidArgumentError("a tensor with a negative dimension ", d);
      dims.push_back(d);
    }
    if (dims.size() > 64) return InvalidArgumentError("a tensor of rank ", dims.size(), " (at most 64)");
    WEFT_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(dims));
    const Shape shape(dims);
    if (dtype == DType::kString) {
      auto strings = in.getStrings();
      if (static_cast<int64_t>(strings.size()) != n) {
        return InvalidArgumentError("a string tensor of shape ", shape.ToString(), " carries ", strings.size(),
                                    " strings");
      }
      std::vector<std::string> values;
      values.reserve(strings.size());
      for (auto s : strings) values.emplace_back(s.cStr(), s.size());
      return Tensor::Strings(values, shape);
    }
    const uint64_t element = DTypeSize(dtype);
    if (n > 0 && static_cast<uint64_t>(n) > std::numeric_limits<uint64_t>::max() / element) {
      return InvalidArgumentError("a tensor of shape ", shape.ToString(), " is too large");
    }
    const uint64_t size = static_cast<uint64_t>(n) * element;
    if (in.getPayloadSize() != size) {
      return InvalidArgumentError("a ", DTypeName(dtype), shape.ToString(), " tensor needs ", size,
                                  " bytes but the message says ", in.getPayloadSize());
    }
    const uint64_t offset = in.getPayloadOffset();
    if (offset > payload_size_ || size > payload_size_ - offset) {
      return InvalidArgumentError("a tensor's bytes [", offset, ", +", size, ") lie outside the payload of ",
                                  payload_size_, " bytes");
    }
    if (size == 0) return Tensor::Allocate(dtype, shape);
    void* data = const_cast<char*>(payload_ + offset);
    if (reinterpret_cast<uintptr_t>(data) % 64 != 0) {
      // Not where a kernel wants it: copy (the sender pads, so this is a
      // transport that does not keep alignment).
      WEFT_ASSIGN_OR_RETURN(Tensor copy, Tensor::Allocate(dtype, shape));
      std::memcpy(copy.raw_data(), data, size);
      return copy;
    }
    return Tensor(dtype, shape, std::make_shared<PayloadBuffer>(data, size, owner_));
  }

  Expected<std::vector<ArgMsg>> ReadArgs(capnp::List<w::Arg>::Reader in) const {
    std::vector<ArgMsg> out;
    for (auto a : in) {
      ArgMsg arg;
      arg.index = a.getIndex();
      auto t = ReadTensor(a.getTensor());
      if (!t.ok()) return t.status().WithContext(StrCat("argument ", arg.index));
      arg.tensor = std::move(*t);
      out.push_back(std::move(arg));
    }
    return out;
  }

 private:
  const char* payload_;
  uint64_t payload_size_;
  std::shared_ptr<void> owner_;
};

Status ReadStatus(w::WireStatus::Reader in) {
  const uint32_t code = in.getCode();
  if (code == 0) return Status();
  if (code > static_cast<uint32_t>(Code::kUnauthenticated)) {
    return Status(Code::kUnknown, StrCat("(unknown status code ", code, ") ", in.getMessage().cStr()));
  }
  return Status(static_cast<Code>(code), Str(in.getMessage()));
}

std::string ToString(capnp::Data::Reader d) { return std::string(reinterpret_cast<const char*>(d.begin()), d.size()); }

Status DecodeRequest(const Reader& reader, w::Request::Reader in, Request& r) {
  switch (in.which()) {
    case w::Request::HELLO: {
      r.method = Method::kHello;
      auto h = in.getHello();
      r.cluster_fingerprint = h.getClusterFingerprint();
      r.caller = Str(h.getCaller());
      r.caller_incarnation = h.getCallerIncarnation();
      r.expected_task = Str(h.getExpectedTask());
      return Status();
    }
    case w::Request::GET_DEVICES: r.method = Method::kGetDevices; return Status();
    case w::Request::QUERY_SUPPORT:
      r.method = Method::kQuerySupport;
      r.graph = ToString(in.getQuerySupport());
      return Status();
    case w::Request::REGISTER_GRAPH:
      r.method = Method::kRegisterGraph;
      for (auto p : in.getRegisterGraph()) r.partitions.push_back({Str(p.getDevice()), ToString(p.getGraph())});
      return Status();
    case w::Request::DEREGISTER_GRAPH:
      r.method = Method::kDeregisterGraph;
      r.handle = in.getDeregisterGraph();
      return Status();
    case w::Request::RUN_GRAPH: {
      r.method = Method::kRunGraph;
      auto run = in.getRunGraph();
      r.handle = run.getHandle();
      r.step_id = run.getStepId();
      r.last_use = run.getLastUse();
      r.trace = run.getTrace();
      r.profile = run.getProfile();
      WEFT_ASSIGN_OR_RETURN(r.feeds, reader.ReadArgs(run.getFeeds()));
      return Status();
    }
    case w::Request::RECV_TENSOR: {
      r.method = Method::kRecvTensor;
      auto recv = in.getRecvTensor();
      r.step_id = recv.getStepId();
      auto k = recv.getKey();
      r.key = runtime::RendezvousKey::Make(Str(k.getSrcDevice()), k.getSrcIncarnation(), Str(k.getDstDevice()),
                                           Str(k.getEdgeName()), k.getFrame(), k.getIteration());
      return Status();
    }
    case w::Request::RECV_TENSORS: {
      r.method = Method::kRecvTensors;
      auto recv = in.getRecvTensors();
      r.step_id = recv.getStepId();
      auto keys = recv.getKeys();
      if (keys.size() == 0 || keys.size() > kMaxRecvTensorsKeys) {
        return InvalidArgumentError("a RecvTensors of ", keys.size(), " keys (1 to ", kMaxRecvTensorsKeys, ")");
      }
      r.keys.reserve(keys.size());
      for (auto k : keys) {
        r.keys.push_back(runtime::RendezvousKey::Make(Str(k.getSrcDevice()), k.getSrcIncarnation(),
                                                      Str(k.getDstDevice()), Str(k.getEdgeName()), k.getFrame(),
                                                      k.getIteration()));
      }
      return Status();
    }
    case w::Request::ABORT_STEP:
      r.method = Method::kAbortStep;
      r.step_id = in.getAbortStep().getStepId();
      r.abort_status = ReadStatus(in.getAbortStep().getStatus());
      return Status();
    case w::Request::CLEANUP_STEP:
      r.method = Method::kCleanupStep;
      r.step_id = in.getCleanupStep();
      return Status();
    case w::Request::HEARTBEAT: r.method = Method::kHeartbeat; return Status();
    case w::Request::STATUS: r.method = Method::kStatus; return Status();
    case w::Request::SHUTDOWN:
      r.method = Method::kShutdown;
      r.reason = Str(in.getShutdown());
      return Status();
    case w::Request::KV_SET: {
      r.method = Method::kKvSet;
      auto set = in.getKvSet();
      if (set.getKey().size() == 0 || set.getKey().size() > kMaxKvKeyBytes) {
        return InvalidArgumentError("a KvSet key of ", set.getKey().size(), " bytes (1 to ", kMaxKvKeyBytes, ")");
      }
      if (set.getValue().size() > kMaxKvValueBytes) {
        return InvalidArgumentError("a KvSet value of ", set.getValue().size(), " bytes (at most ", kMaxKvValueBytes,
                                    ")");
      }
      r.kv_keys.push_back(Str(set.getKey()));
      r.kv_value = ToString(set.getValue());
      return Status();
    }
    case w::Request::KV_GET: {
      r.method = Method::kKvGet;
      auto get = in.getKvGet();
      if (get.getKeys().size() == 0 || get.getKeys().size() > kMaxKvKeysPerGet) {
        return InvalidArgumentError("a KvGet of ", get.getKeys().size(), " keys (1 to ", kMaxKvKeysPerGet, ")");
      }
      for (auto key : get.getKeys()) {
        if (key.size() == 0 || key.size() > kMaxKvKeyBytes) {
          return InvalidArgumentError("a KvGet key of ", key.size(), " bytes (1 to ", kMaxKvKeyBytes, ")");
        }
        r.kv_keys.push_back(Str(key));
      }
      r.kv_wait_ms = get.getWaitMs();
      if (r.kv_wait_ms < 0 || r.kv_wait_ms > kMaxKvWaitMs) {
        return InvalidArgumentError("a KvGet wait of ", r.kv_wait_ms, " ms (0 to ", kMaxKvWaitMs, ")");
      }
      return Status();
    }
  }
  return InvalidArgumentError("a request of unknown kind ", static_cast<int>(in.which()), " (from a newer Weft?)");
}

Status DecodeResponse(const Reader& reader, w::Response::Reader in, Response& r) {
  switch (in.which()) {
    case w::Response::NONE: r.method = Method::kNone; return Status();
    case w::Response::HELLO_REPLY:
      r.method = Method::kHello;
      r.task = Str(in.getHelloReply().getTask());
      r.incarnation = in.getHelloReply().getIncarnation();
      return Status();
    case w::Response::DEVICES:
      r.method = Method::kGetDevices;
      for (auto d : in.getDevices()) {
        r.devices.push_back({Str(d.getName()), Str(d.getType()), d.getOrdinal(), d.getIncarnation(), d.getHostVisible(),
                             d.getHostToDeviceGbps(), d.getDeviceToHostGbps()});
      }
      return Status();
    case w::Response::SUPPORT:
      r.method = Method::kQuerySupport;
      for (auto node : in.getSupport()) {
        std::vector<DeviceSupport> devices;
        for (auto d : node.getDevices()) devices.push_back({d.getSupported(), d.getCostNs(), Str(d.getReason())});
        r.support.push_back(std::move(devices));
      }
      return Status();
    case w::Response::GRAPH_HANDLE:
      r.method = Method::kRegisterGraph;
      r.handle = in.getGraphHandle();
      return Status();
    case w::Response::RETVALS: {
      r.method = Method::kRunGraph;
      WEFT_ASSIGN_OR_RETURN(r.retvals, reader.ReadArgs(in.getRetvals()));
      if (in.getTrace().size() > kMaxTraceEvents) {
        return InvalidArgumentError("a trace of ", in.getTrace().size(), " events (at most ", kMaxTraceEvents, ")");
      }
      for (auto e : in.getTrace()) {
        runtime::TraceRecorder::Event event;
        event.name = Str(e.getNode());
        event.op = Str(e.getOp());
        event.device = Str(e.getDevice());
        event.thread = e.getThread();
        event.start_us = e.getStartUs();
        event.duration_us = e.getDurationUs();
        event.step_id = 0;
        r.trace.push_back(std::move(event));
      }
      r.trace_origin_ns = in.getTraceOriginNs();
      if (in.hasStepTime()) {
        auto t = in.getStepTime();
        auto ms = [](int64_t ns) { return static_cast<double>(ns) / 1e6; };
        r.has_step_time = true;
        r.step_time.run_ms = ms(t.getRunNs());
        r.step_time.compute_ms = ms(t.getComputeNs());
        r.step_time.wait_ms = ms(t.getWaitNs());
        r.step_time.serialization_ms = ms(t.getSerializationNs());
        r.step_time.queued_ms = ms(t.getQueuedNs());
      }
      return Status();
    }
    case w::Response::TENSOR: {
      r.method = Method::kRecvTensor;
      r.is_dead = in.getIsDead();
      if (r.is_dead) return Status();
      WEFT_ASSIGN_OR_RETURN(r.tensor, reader.ReadTensor(in.getTensor()));
      return Status();
    }
    case w::Response::HEARTBEAT_REPLY:
      r.method = Method::kHeartbeat;
      r.task = Str(in.getHeartbeatReply().getTask());
      r.incarnation = in.getHeartbeatReply().getIncarnation();
      return Status();
    case w::Response::KV_VALUES:
      r.method = Method::kKvGet;
      for (auto value : in.getKvValues()) r.kv_values.push_back(ToString(value));
      return Status();
    case w::Response::TASK_STATUS: {
      r.method = Method::kStatus;
      auto t = in.getTaskStatus();
      auto text = [](capnp::Text::Reader v, const char* what) -> Expected<std::string> {
        if (v.size() > kMaxStatusText) {
          return InvalidArgumentError("a Status answer's ", what, " of ", v.size(), " bytes (at most ", kMaxStatusText,
                                      ")");
        }
        return Str(v);
      };
      TaskStatusMsg& o = r.status;
      WEFT_ASSIGN_OR_RETURN(o.task, text(t.getTask(), "task"));
      WEFT_ASSIGN_OR_RETURN(o.address, text(t.getAddress(), "address"));
      WEFT_ASSIGN_OR_RETURN(o.role, text(t.getRole(), "role"));
      WEFT_ASSIGN_OR_RETURN(o.state, text(t.getState(), "state"));
      WEFT_ASSIGN_OR_RETURN(o.timed, text(t.getTimed(), "timed"));
      o.incarnation = t.getIncarnation();
      o.monotonic_ns = t.getMonotonicNs();
      o.step = t.getStep();
      o.total_steps = t.getTotalSteps();
      o.global_step = t.getGlobalStep();
      o.p50_ms = t.getP50Ms();
      o.p90_ms = t.getP90Ms();
      o.p99_ms = t.getP99Ms();
      o.steps_timed = t.getStepsTimed();
      o.accepted_gradients = t.getAcceptedGradients();
      o.dropped_gradients = t.getDroppedGradients();
      if (t.getPeers().size() > kMaxStatusPeers) {
        return InvalidArgumentError("a Status answer with ", t.getPeers().size(), " peers (at most ", kMaxStatusPeers,
                                    ")");
      }
      for (auto p : t.getPeers()) {
        PeerHealthMsg peer;
        WEFT_ASSIGN_OR_RETURN(peer.task, text(p.getTask(), "peer name"));
        WEFT_ASSIGN_OR_RETURN(peer.state, text(p.getState(), "peer state"));
        peer.incarnation = p.getIncarnation();
        peer.silent_ms = p.getSilentMs();
        peer.round_trip_us = p.getRoundTripUs();
        o.peers.push_back(std::move(peer));
      }
      return Status();
    }
  }
  return InvalidArgumentError("a response of unknown kind ", static_cast<int>(in.which()), " (from a newer Weft?)");
}

std::string Describe(const kj::Exception& e) {
  std::string text = e.getDescription().cStr();
  const auto newline = text.find('\n');
  if (newline != std::string::npos) text = text.substr(0, newline);
  return text;
}

}  // namespace

std::string_view MethodName(Method method) {
  switch (method) {
    case Method::kNone: return "(none)";
    case Method::kHello: return "Hello";
    case Method::kGetDevices: return "GetDevices";
    case Method::kQuerySupport: return "QuerySupport";
    case Method::kRegisterGraph: return "RegisterGraph";
    case Method::kDeregisterGraph: return "DeregisterGraph";
    case Method::kRunGraph: return "RunGraph";
    case Method::kRecvTensor: return "RecvTensor";
    case Method::kAbortStep: return "AbortStep";
    case Method::kCleanupStep: return "CleanupStep";
    case Method::kHeartbeat: return "Heartbeat";
    case Method::kShutdown: return "Shutdown";
    case Method::kKvSet: return "KvSet";
    case Method::kKvGet: return "KvGet";
    case Method::kStatus: return "Status";
    case Method::kRecvTensors: return "RecvTensors";
  }
  return "(unknown)";
}

namespace {

std::atomic<int64_t> g_encode_ns{0}, g_decode_ns{0}, g_queued_ns{0};

// Adds the time from its creation to its end to a counter.
class Timed {
 public:
  explicit Timed(std::atomic<int64_t>& counter) : counter_(counter), start_(SteadyNowNs()) {}
  ~Timed() { counter_.fetch_add(SteadyNowNs() - start_, std::memory_order_relaxed); }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  std::atomic<int64_t>& counter_;
  int64_t start_;
};

}  // namespace

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

RpcTimes ReadRpcTimes() {
  return {g_encode_ns.load(std::memory_order_relaxed), g_decode_ns.load(std::memory_order_relaxed),
          g_queued_ns.load(std::memory_order_relaxed)};
}

void CountQueued(int64_t ns) { g_queued_ns.fetch_add(ns, std::memory_order_relaxed); }

Expected<Encoded> Encode(const Envelope& envelope) {
  Timed timed(g_encode_ns);
  try {
    capnp::MallocMessageBuilder message;
    auto root = message.initRoot<w::Envelope>();
    root.setVersion(envelope.version);
    root.setCallId(envelope.call_id);
    root.setDeadlineMs(envelope.deadline_ms);
    uint64_t incarnation = envelope.incarnation;
    if (incarnation == 0) {
      incarnation =
          envelope.is_response ? envelope.response.responder_incarnation : envelope.request.target_incarnation;
    }
    root.setIncarnation(incarnation);
    Writer writer;
    if (envelope.is_response) {
      SetStatus(envelope.status, root.initStatus());
      auto response = root.initResponse();
      if (envelope.status.ok()) {
        WEFT_RETURN_IF_ERROR(EncodeResponse(writer, envelope.response, response));
      } else {
        response.setNone();
      }
    } else {
      WEFT_RETURN_IF_ERROR(EncodeRequest(writer, envelope.request, root.initRequest()));
    }
    Encoded e = writer.Finish(message);
    if (e.header.size() > kMaxHeaderBytes) {
      return ResourceExhaustedError(
          "a ", MethodName(envelope.is_response ? envelope.response.method : envelope.request.method), " message of ",
          e.header.size(), " bytes exceeds the limit of ", kMaxHeaderBytes, " bytes for control messages");
    }
    return e;
  } catch (const kj::Exception& e) {
    return InternalError("encoding a message: ", Describe(e));
  }
}

Expected<Envelope> DecodeBytes(std::string_view header, const void* payload, uint64_t payload_size,
                               std::shared_ptr<void> owner, std::string_view from) {
  Timed timed(g_decode_ns);
  auto bad = [&](const auto&... what) { return InvalidArgumentError("malformed message from ", from, ": ", what...); };
  if (header.size() > kMaxHeaderBytes) return bad("its header of ", header.size(), " bytes exceeds ", kMaxHeaderBytes);
  if (header.size() < sizeof(capnp::word) || header.size() % sizeof(capnp::word) != 0) {
    return bad("its header of ", header.size(), " bytes is not a whole number of 8-byte words (truncated?)");
  }
  kj::Array<capnp::word> copy;
  kj::ArrayPtr<const capnp::word> words;
  if (reinterpret_cast<uintptr_t>(header.data()) % alignof(capnp::word) == 0) {
    words = kj::ArrayPtr<const capnp::word>(reinterpret_cast<const capnp::word*>(header.data()),
                                            header.size() / sizeof(capnp::word));
  } else {
    copy = kj::heapArray<capnp::word>(header.size() / sizeof(capnp::word));
    std::memcpy(copy.begin(), header.data(), header.size());
    words = copy;
  }
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = words.size() * 4 + 1024;
    options.nestingLimit = 16;
    capnp::FlatArrayMessageReader message(words, options);
    auto root = message.getRoot<w::Envelope>();
    Envelope e;
    e.version = root.getVersion();
    if (e.version != kWireVersion) {
      return bad("it speaks wire protocol version ", e.version, ", this Weft speaks version ", kWireVersion,
                 " (run the same Weft release on every task)");
    }
    e.call_id = root.getCallId();
    e.deadline_ms = root.getDeadlineMs();
    Reader reader(payload, payload_size, std::move(owner));
    Status decoded;
    if (root.isResponse()) {
      e.is_response = true;
      e.status = ReadStatus(root.getStatus());
      decoded = DecodeResponse(reader, root.getResponse(), e.response);
    } else {
      decoded = DecodeRequest(reader, root.getRequest(), e.request);
    }
    if (!decoded.ok()) return bad(decoded.message());
    if (!e.is_response && e.request.method == Method::kRecvTensors) {
      // Its answers take the call ids callId .. callId + keys - 1.
      if (e.call_id == 0) return bad("a RecvTensors with call id 0 (its answers need ids)");
      if (e.call_id > std::numeric_limits<uint64_t>::max() - e.request.keys.size()) {
        return bad("a RecvTensors whose ", e.request.keys.size(), " answer ids would pass 2^64 (call id ", e.call_id,
                   ")");
      }
    }
    e.incarnation = root.getIncarnation();
    if (e.is_response) {
      e.response.responder_incarnation = e.incarnation;
    } else {
      e.request.target_incarnation = e.incarnation;
    }
    return e;
  } catch (const kj::Exception& ex) {
    return bad(Describe(ex));
  }
}

Expected<Envelope> Decode(const ReceivedMessage& message, std::string_view from) {
  return DecodeBytes(message.header(), message.payload(), message.payload_size(), message.owner(), from);
}

}  // namespace weft::dist
