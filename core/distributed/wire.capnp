# Weft's control messages between the tasks of a cluster (docs/distributed.md).
#
# Every transport message carries one Envelope as its header (Cap'n Proto,
# unpacked, at most 64 MiB) and the bytes of the tensors it names as its
# payload: a TensorMeta says where in the payload each tensor is, so tensor
# bytes are never copied into the control message.
#
# Versioning: `version` is kWireVersion of the sender. A receiver refuses a
# message of another version with an error naming both. Fields are only
# ever added (Cap'n Proto's rules), so a minor change keeps the version.
@0xe57fb5bc7a52acba;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("weft::dist::wire");

using Graph = import "/core/graph/graph.capnp";

const wireVersion :UInt32 = 1;

struct WireStatus {
  code @0 :UInt32;
  message @1 :Text;
}

struct TensorMeta {
  dtype @0 :Graph.DType;
  shape @1 :List(Int64);
  # Where the tensor's bytes are in the message's payload.
  payloadOffset @2 :UInt64;
  payloadSize @3 :UInt64;
  # String tensors travel here instead of in the payload.
  strings @4 :List(Text);
}

struct DeviceInfo {
  name @0 :Text;          # full name: "/job:ps/task:0/device:CPU:0"
  type @1 :Text;
  ordinal @2 :Int32;
  incarnation @3 :UInt64;
  hostVisible @4 :Bool;
  hostToDeviceGbps @5 :Float64;
  deviceToHostGbps @6 :Float64;
}

struct RendezvousKey {
  srcDevice @0 :Text;
  srcIncarnation @1 :UInt64;
  dstDevice @2 :Text;
  edgeName @3 :Text;
  frame @4 :Int64;
  iteration @5 :Int64;
}

struct Hello {
  # A fingerprint of the cluster spec (jobs and addresses): a task of
  # another cluster that happens to listen on the same port refuses.
  clusterFingerprint @0 :UInt64;
  # Who is calling: "/job:worker/task:0", or "client".
  caller @1 :Text;
  callerIncarnation @2 :UInt64;
  # The task the caller expects to reach.
  expectedTask @3 :Text;
}

struct HelloReply {
  task @0 :Text;
  incarnation @1 :UInt64;
}

struct NodeSupport {
  # One entry per device of the task, in the order of GetDevices.
  devices @0 :List(DeviceSupport);
}

struct DeviceSupport {
  supported @0 :Bool;
  costNs @1 :Float64;
  reason @2 :Text;
}

struct PartitionGraph {
  device @0 :Text;   # full device name
  graph @1 :Data;    # a binary graph file (.wg), validated on arrival
}

struct Arg {
  index @0 :Int64;   # the _Arg/_Retval index
  tensor @1 :TensorMeta;
}

struct Request {
  union {
    hello @0 :Hello;
    getDevices @1 :Void;
    querySupport @2 :Data;         # a binary graph file; answer per node, per device
    registerGraph @3 :List(PartitionGraph);
    deregisterGraph @4 :UInt64;    # a handle
    runGraph @5 :RunGraph;
    recvTensor @6 :RecvTensor;
    abortStep @7 :AbortStep;
    cleanupStep @8 :Int64;         # a step id
    heartbeat @9 :Void;
    # Asks a task that was started to serve one training run (`weft train`
    # on a ps task) to stop; the text says why. Others refuse.
    shutdown @10 :Text;
    # The rendezvous store the chief serves for training.mode = "allreduce"
    # (core/distributed/kv_store.h).
    kvSet @11 :KvSet;
    kvGet @12 :KvGet;
    # What the task says about itself (`weft cluster status`).
    status @13 :Void;
    recvTensors @14 :RecvTensors;
  }
}

# The answer to Status (core/distributed/status_board.h).
struct TaskStatus {
  task @0 :Text;
  address @1 :Text;
  incarnation @2 :UInt64;
  # The task's steady clock when it answered, in ns.
  monotonicNs @3 :Int64;
  role @4 :Text;
  state @5 :Text;
  step @6 :Int64;          # -1: unknown
  totalSteps @7 :Int64;
  globalStep @8 :Int64;
  # What the percentiles are of ("training steps", "RunGraph"; empty: none).
  timed @9 :Text;
  p50Ms @10 :Float64;
  p90Ms @11 :Float64;
  p99Ms @12 :Float64;
  stepsTimed @13 :Int64;
  acceptedGradients @14 :Int64;   # -1: not counted
  droppedGradients @15 :Int64;
  # What its heartbeats know of its peers.
  peers @16 :List(PeerHealth);
}

struct PeerHealth {
  task @0 :Text;
  state @1 :Text;          # "alive", "lost", "unknown"
  incarnation @2 :UInt64;
  silentMs @3 :Int64;      # since its last answer; -1: never answered
  roundTripUs @4 :Int64;
}

struct KvSet {
  key @0 :Text;
  value @1 :Data;
}

# Waits up to waitMs for every key; the answer is their values in order.
struct KvGet {
  keys @0 :List(Text);
  waitMs @1 :Int64;
}

struct RunGraph {
  handle @0 :UInt64;
  stepId @1 :Int64;
  feeds @2 :List(Arg);
  # No other task pulls a tensor of this step from this one: drop the
  # step's state as soon as the partitions ran (no CleanupStep follows).
  lastUse @3 :Bool;
  # Record a trace of the partitions' nodes; the answer carries it.
  trace @4 :Bool;
  # Time the task's part of the step; the answer carries stepTime.
  profile @5 :Bool;
}

# Where a task's part of a profiled step went, in ns
# (core/runtime/step_profile.h).
struct StepTime {
  runNs @0 :Int64;
  computeNs @1 :Int64;
  waitNs @2 :Int64;
  serializationNs @3 :Int64;
  queuedNs @4 :Int64;
}

# One node's execution on a task (core/runtime/trace.h).
struct TraceEvent {
  node @0 :Text;
  op @1 :Text;
  device @2 :Text;
  thread @3 :UInt64;
  startUs @4 :Int64;      # since traceOriginNs
  durationUs @5 :Int64;
}

struct RecvTensor {
  stepId @0 :Int64;
  key @1 :RendezvousKey;
}

# Several RecvTensor at once, from the tensors a step's partition pulls
# from one task as it starts: the envelope's callId answers keys[0], and
# callId + i answers keys[i], each when its tensor is there (one request,
# as many answers).
struct RecvTensors {
  stepId @0 :Int64;
  keys @1 :List(RendezvousKey);
}

struct AbortStep {
  stepId @0 :Int64;
  status @1 :WireStatus;
}

struct Response {
  union {
    none @0 :Void;
    helloReply @1 :HelloReply;
    devices @2 :List(DeviceInfo);
    support @3 :List(NodeSupport);
    graphHandle @4 :UInt64;
    retvals @5 :List(Arg);
    tensor @6 :TensorMeta;
    kvValues @8 :List(Data);
    # Heartbeat: who answered, and which start of it (core/distributed/heartbeat.h).
    heartbeatReply @9 :HelloReply;
    taskStatus @10 :TaskStatus;
  }
  # RecvTensor: the sender's value is dead (a branch not taken, or a loop's
  # last check); `tensor` is then empty and not read.
  isDead @7 :Bool;
  # RunGraph with `trace`: the nodes it ran, and the task's steady clock
  # (ns) at the trace's origin.
  trace @11 :List(TraceEvent);
  traceOriginNs @12 :Int64;
  # RunGraph with `profile`.
  stepTime @13 :StepTime;
}

struct Envelope {
  version @0 :UInt32;
  # Pairs a response with its request; 0 for a message that wants none.
  callId @1 :UInt64;
  union {
    request @2 :Request;
    response @3 :Response;
  }
  # Requests: how long the caller waits, in ms (0: no deadline).
  deadlineMs @4 :Int64;
  # Responses: the outcome; an error response carries no body.
  status @5 :WireStatus;
  # Requests: the incarnation of the task the caller means to reach (the
  # one that registered the graph it names; 0: any, as for Hello or a
  # Heartbeat). Responses: the responder's own (core/distributed/incarnation.h).
  incarnation @6 :UInt64;
}
