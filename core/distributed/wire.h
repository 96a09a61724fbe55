// Control messages between tasks (core/distributed/wire.capnp), as plain C++
// values. Encode turns an Envelope into a transport message (Cap'n Proto
// header, tensor bytes as payload slices, nothing copied); Decode turns a
// received one back, checking everything: a truncated, oversized, garbage
// or wrong-version message is an error naming the sender, never a crash
// or an allocation the message's own size does not bound.
#ifndef WEFT_CORE_DIST_WIRE_H_
#define WEFT_CORE_DIST_WIRE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/distributed/transport.h"
#include "core/runtime/rendezvous.h"
#include "core/runtime/step_profile.h"
#include "core/runtime/trace.h"
#include "core/tensor/tensor.h"

namespace weft::dist {

// The wire protocol's version (wire.capnp's wireVersion).
inline constexpr uint32_t kWireVersion = 1;
// The largest control message accepted (graphs travel in them).
inline constexpr uint64_t kMaxHeaderBytes = uint64_t{64} << 20;

enum class Method {
  kNone,
  kHello,
  kGetDevices,
  kQuerySupport,
  kRegisterGraph,
  kDeregisterGraph,
  kRunGraph,
  kRecvTensor,
  kAbortStep,
  kCleanupStep,
  kHeartbeat,
  kShutdown,
  kKvSet,
  kKvGet,
  kStatus,
  // Several RecvTensor in one request (Request::keys): call id + i
  // answers keys[i] (core/distributed/rpc.h, CallRecvTensors).
  kRecvTensors,
};

// Limits of the rendezvous store's messages, checked on decoding.
inline constexpr std::size_t kMaxKvKeyBytes = 256;
inline constexpr std::size_t kMaxKvValueBytes = 1 << 20;
inline constexpr std::size_t kMaxKvKeysPerGet = 1024;
inline constexpr int64_t kMaxKvWaitMs = int64_t{24} * 3600 * 1000;
// The most keys one RecvTensors carries, checked on decoding.
inline constexpr std::size_t kMaxRecvTensorsKeys = 4096;
// Limits of a Status answer, checked on decoding.
inline constexpr std::size_t kMaxStatusPeers = 4096;
inline constexpr std::size_t kMaxStatusText = 4096;
// The most trace events a RunGraph answer carries.
inline constexpr std::size_t kMaxTraceEvents = std::size_t{1} << 20;
// "RunGraph", ...
std::string_view MethodName(Method method);

struct DeviceInfo {
  std::string name;  // "/job:ps/task:0/device:CPU:0"
  std::string type;
  int32_t ordinal = 0;
  uint64_t incarnation = 0;
  bool host_visible = true;
  double host_to_device_gbps = 0;
  double device_to_host_gbps = 0;
};

struct DeviceSupport {
  bool supported = false;
  double cost_ns = 0;
  std::string reason;
};

struct PartitionMsg {
  std::string device;  // full name
  std::string graph;   // a binary .wg graph
};

// One peer as a task's heartbeats see it.
struct PeerHealthMsg {
  std::string task;
  std::string state;  // "alive", "lost", "unknown"
  uint64_t incarnation = 0;
  int64_t silent_ms = -1;
  int64_t round_trip_us = -1;
};

// A task's answer to Status (wire.capnp's TaskStatus).
struct TaskStatusMsg {
  std::string task;
  std::string address;
  uint64_t incarnation = 0;
  int64_t monotonic_ns = 0;
  std::string role;
  std::string state;
  int64_t step = -1;
  int64_t total_steps = -1;
  int64_t global_step = -1;
  std::string timed;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0;
  int64_t steps_timed = 0;
  int64_t accepted_gradients = -1;
  int64_t dropped_gradients = -1;
  std::vector<PeerHealthMsg> peers;
};

struct ArgMsg {
  int64_t index = 0;
  Tensor tensor;  // host memory
};

struct Request {
  Method method = Method::kNone;
  // Hello
  uint64_t cluster_fingerprint = 0;
  std::string caller;
  uint64_t caller_incarnation = 0;
  std::string expected_task;
  // QuerySupport: a .wg graph
  std::string graph;
  // RegisterGraph
  std::vector<PartitionMsg> partitions;
  // DeregisterGraph, RunGraph
  uint64_t handle = 0;
  // RunGraph, RecvTensor, AbortStep, CleanupStep
  int64_t step_id = 0;
  std::vector<ArgMsg> feeds;
  // RunGraph: no other task pulls from this one in the step.
  bool last_use = false;
  // RunGraph: record a trace of the step's nodes.
  bool trace = false;
  // RunGraph: time the task's part of the step (Response::step_time).
  bool profile = false;
  // Not on the wire: when the receiving process started reading the
  // request (steady clock, ns; 0 when not stamped).
  int64_t received_ns = 0;
  runtime::RendezvousKey key;
  // RecvTensors
  std::vector<runtime::RendezvousKey> keys;
  Status abort_status;
  // Shutdown: why.
  std::string reason;
  // KvSet (one key, |kv_value|), KvGet (waiting up to |kv_wait_ms|).
  std::vector<std::string> kv_keys;
  std::string kv_value;
  int64_t kv_wait_ms = 0;
  // The incarnation of the task meant (0: any); travels in the envelope.
  uint64_t target_incarnation = 0;
};

struct Response {
  Method method = Method::kNone;  // what it answers; kNone for "no body"
  // Hello
  std::string task;
  uint64_t incarnation = 0;
  // GetDevices
  std::vector<DeviceInfo> devices;
  // QuerySupport: per node of the graph, per device of the task
  std::vector<std::vector<DeviceSupport>> support;
  // RegisterGraph
  uint64_t handle = 0;
  // RunGraph
  std::vector<ArgMsg> retvals;
  // RunGraph with trace: the events (process empty), and the task's
  // steady clock at their origin.
  std::vector<runtime::TraceRecorder::Event> trace;
  int64_t trace_origin_ns = 0;
  // RunGraph with `profile`: where the task's part of the step went
  // (core/runtime/step_profile.h; round_trip_ms and task are the caller's).
  bool has_step_time = false;
  runtime::TaskStepTime step_time;
  // RecvTensor
  Tensor tensor;
  bool is_dead = false;  // then |tensor| is empty
  // KvGet: the values of the keys, in order.
  std::vector<std::string> kv_values;
  // Status
  TaskStatusMsg status;
  // Who answered: its incarnation, from the envelope (errors carry it too).
  uint64_t responder_incarnation = 0;
};

struct Envelope {
  uint32_t version = kWireVersion;
  uint64_t call_id = 0;  // 0: no response wanted
  bool is_response = false;
  int64_t deadline_ms = 0;
  // Requests: the target's incarnation; responses: the responder's.
  uint64_t incarnation = 0;
  Status status;  // responses
  Request request;
  Response response;
};

// A message ready for Connection::Send.
struct Encoded {
  std::string header;
  std::vector<Slice> slices;
  // Holds the tensors the slices point into.
  std::shared_ptr<const void> keepalive;
  uint64_t payload_size = 0;
};

// Tensors must be in host memory. Each tensor's bytes start 64-byte
// aligned in the payload, so the receiver can use them in place.
Expected<Encoded> Encode(const Envelope& envelope);

// |from| names the sender in messages ("task /job:ps/task:0 (tcp://...)").
// Tensors in the result point into |message|'s payload and keep it alive.
Expected<Envelope> Decode(const ReceivedMessage& message, std::string_view from);
// The same, from raw bytes (the fuzz target; tests).
Expected<Envelope> DecodeBytes(std::string_view header, const void* payload, uint64_t payload_size,
                               std::shared_ptr<void> owner, std::string_view from);

// What this process spent encoding and decoding messages, and what
// requests waited for an RPC thread, since it started (ns): how a profiled
// step's serialization and queueing are measured (step_profile.h).
struct RpcTimes {
  int64_t encode_ns = 0;
  int64_t decode_ns = 0;
  int64_t queued_ns = 0;
};
RpcTimes ReadRpcTimes();
void CountQueued(int64_t ns);
// The steady clock in ns since its epoch.
int64_t SteadyNowNs();

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_WIRE_H_
