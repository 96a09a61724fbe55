// The wire codec: every message kind survives a round trip, tensors travel
// as aligned payload slices, and every malformed message is refused with a
// message that names the sender and what is wrong.
#include "core/distributed/wire.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <thread>

#include "core/distributed/incarnation.h"
#include "core/distributed/status_board.h"
#include "core/distributed/wire.capnp.h"

namespace weft::dist {
namespace {

// The payload slices of |e| as one buffer, 64-byte aligned like a
// transport's receive buffer.
struct Flat {
  std::shared_ptr<void> memory;
  uint64_t size = 0;
};
Flat Join(const Encoded& e) {
  Flat f;
  f.size = e.payload_size;
  void* p = std::aligned_alloc(64, std::max<uint64_t>(64, (e.payload_size + 63) / 64 * 64));
  f.memory = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  uint64_t at = 0;
  for (const Slice& s : e.slices) {
    std::memcpy(static_cast<char*>(p) + at, s.data, s.size);
    at += s.size;
  }
  EXPECT_EQ(at, e.payload_size);
  return f;
}

Expected<Envelope> RoundTrip(const Envelope& in) {
  auto encoded = Encode(in);
  if (!encoded.ok()) return encoded.status();
  Flat flat = Join(*encoded);
  return DecodeBytes(encoded->header, flat.memory.get(), flat.size, flat.memory, "task /job:ps/task:0");
}

TEST(Wire, RunGraphCarriesTensorsAlignedAndBitExact) {
  Envelope e;
  e.call_id = 42;
  e.deadline_ms = 1500;
  e.request.method = Method::kRunGraph;
  e.request.handle = 7;
  e.request.step_id = -3;
  e.request.feeds.push_back({0, Tensor::FromVector<float>({1.5f, -0.0f, 3.25f}, Shape{3})});
  e.request.feeds.push_back({2, Tensor::Scalar<int64_t>(int64_t{1} << 40)});
  e.request.feeds.push_back({5, Tensor::Strings({"a", "", "longer string"}, Shape{3})});
  e.request.feeds.push_back({6, *Tensor::Allocate(DType::kF64, Shape{0, 4})});
  auto encoded = Encode(e);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  auto out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->call_id, 42u);
  EXPECT_EQ(out->deadline_ms, 1500);
  EXPECT_FALSE(out->is_response);
  ASSERT_EQ(out->request.method, Method::kRunGraph);
  EXPECT_EQ(out->request.handle, 7u);
  EXPECT_EQ(out->request.step_id, -3);
  ASSERT_EQ(out->request.feeds.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(out->request.feeds[i].index, e.request.feeds[i].index);
    EXPECT_TRUE(out->request.feeds[i].tensor.BitwiseEquals(e.request.feeds[i].tensor))
        << out->request.feeds[i].tensor.DebugString();
  }
  // In place, 64-byte aligned: no copy on the receiving side.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(out->request.feeds[1].tensor.raw_data()) % 64, 0u);
}

TEST(Wire, EveryRequestKindRoundTrips) {
  Envelope e;
  e.call_id = 1;
  e.request.method = Method::kHello;
  e.request.cluster_fingerprint = 0xfeedface;
  e.request.caller = "/job:worker/task:1";
  e.request.caller_incarnation = 99;
  e.request.expected_task = "/job:ps/task:0";
  auto out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.cluster_fingerprint, 0xfeedfaceu);
  EXPECT_EQ(out->request.caller, "/job:worker/task:1");
  EXPECT_EQ(out->request.caller_incarnation, 99u);
  EXPECT_EQ(out->request.expected_task, "/job:ps/task:0");

  e = Envelope();
  e.request.method = Method::kRegisterGraph;
  e.request.partitions = {{"/job:ps/task:0/device:CPU:0", std::string("\0\1graph", 7)}};
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->request.partitions.size(), 1u);
  EXPECT_EQ(out->request.partitions[0].graph, std::string("\0\1graph", 7));

  e = Envelope();
  e.request.method = Method::kRecvTensor;
  e.request.step_id = 12;
  e.request.key = runtime::RendezvousKey::Make("/job:ps/task:0/device:CPU:0", 5, "/job:worker/task:0/device:CPU:0",
                                               "w/read:0", 3, 17);
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.key, e.request.key);
  EXPECT_EQ(out->request.key.hash, e.request.key.hash);

  e = Envelope();
  e.request.method = Method::kAbortStep;
  e.request.step_id = 8;
  e.request.abort_status = Status(Code::kUnavailable, "task gone");
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.abort_status, e.request.abort_status);

  e = Envelope();
  e.request.method = Method::kShutdown;
  e.request.reason = "the chief ended the training run at step 40";
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.method, Method::kShutdown);
  EXPECT_EQ(out->request.reason, e.request.reason);
  EXPECT_EQ(MethodName(Method::kShutdown), "Shutdown");

  for (Method m : {Method::kGetDevices, Method::kCleanupStep, Method::kHeartbeat, Method::kDeregisterGraph,
                   Method::kQuerySupport}) {
    e = Envelope();
    e.request.method = m;
    out = RoundTrip(e);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->request.method, m);
  }
}

TEST(Wire, AHeartbeatAnswerCarriesTheTaskAndItsIncarnation) {
  Envelope e;
  e.is_response = true;
  e.response.method = Method::kHeartbeat;
  e.response.task = "/job:ps/task:1";
  e.response.incarnation = 0x7123456789abcdefull;
  auto out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->response.method, Method::kHeartbeat);
  EXPECT_EQ(out->response.task, "/job:ps/task:1");
  EXPECT_EQ(out->response.incarnation, 0x7123456789abcdefull);
}

// Requests carry the incarnation of the task they mean, responses (errors
// too) the responder's: both in the envelope.
TEST(Wire, TheEnvelopeCarriesAnIncarnationBothWays) {
  Envelope request;
  request.call_id = 3;
  request.request.method = Method::kRunGraph;
  request.request.handle = 9;
  request.request.target_incarnation = 0x1a21f5e6911cd7ull;
  auto in = RoundTrip(request);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->incarnation, 0x1a21f5e6911cd7ull);
  EXPECT_EQ(in->request.target_incarnation, 0x1a21f5e6911cd7ull);
  for (bool error : {false, true}) {
    Envelope response;
    response.call_id = 3;
    response.is_response = true;
    response.incarnation = 0xfedcba9876543210ull;
    if (error) response.status = Status(Code::kAborted, "restarted");
    auto out = RoundTrip(response);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->response.responder_incarnation, 0xfedcba9876543210ull);
    EXPECT_EQ(out->status.code(), error ? Code::kAborted : Code::kOk);
  }
  // A message without one (an older sender) means any.
  Envelope plain;
  plain.request.method = Method::kHeartbeat;
  auto any = RoundTrip(plain);
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->request.target_incarnation, 0u);
}

TEST(Wire, AStatusAnswerRoundTripsAndKeepsToItsLimits) {
  Envelope e;
  e.is_response = true;
  e.response.method = Method::kStatus;
  TaskStatusMsg& t = e.response.status;
  t.task = "/job:worker/task:1";
  t.address = "tcp://127.0.0.1:7071";
  t.incarnation = 0x1a21f5e6911cd7ull;
  t.monotonic_ns = 123456789;
  t.role = "worker 1 of 2, sync";
  t.state = "training";
  t.step = 41;
  t.total_steps = 400;
  t.global_step = 40;
  t.timed = "training steps";
  t.p50_ms = 1.5;
  t.p90_ms = 2.5;
  t.p99_ms = 9.25;
  t.steps_timed = 41;
  t.accepted_gradients = 39;
  t.dropped_gradients = 2;
  t.peers.push_back({"/job:ps/task:0", "alive", 77, 120, 450});
  auto out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const TaskStatusMsg& o = out->response.status;
  EXPECT_EQ(out->response.method, Method::kStatus);
  EXPECT_EQ(o.task, t.task);
  EXPECT_EQ(o.address, t.address);
  EXPECT_EQ(o.incarnation, t.incarnation);
  EXPECT_EQ(o.monotonic_ns, 123456789);
  EXPECT_EQ(o.role, t.role);
  EXPECT_EQ(o.state, "training");
  EXPECT_EQ(o.step, 41);
  EXPECT_EQ(o.total_steps, 400);
  EXPECT_EQ(o.global_step, 40);
  EXPECT_EQ(o.timed, "training steps");
  EXPECT_EQ(o.p50_ms, 1.5);
  EXPECT_EQ(o.p99_ms, 9.25);
  EXPECT_EQ(o.steps_timed, 41);
  EXPECT_EQ(o.accepted_gradients, 39);
  EXPECT_EQ(o.dropped_gradients, 2);
  ASSERT_EQ(o.peers.size(), 1u);
  EXPECT_EQ(o.peers[0].task, "/job:ps/task:0");
  EXPECT_EQ(o.peers[0].state, "alive");
  EXPECT_EQ(o.peers[0].incarnation, 77u);
  EXPECT_EQ(o.peers[0].silent_ms, 120);
  EXPECT_EQ(o.peers[0].round_trip_us, 450);
  Envelope request;
  request.request.method = Method::kStatus;
  auto in = RoundTrip(request);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->request.method, Method::kStatus);
  // A text past 4 KiB, or more than 4096 peers: refused on decoding.
  t.state = std::string(kMaxStatusText + 1, 'x');
  auto long_text = RoundTrip(e);
  ASSERT_FALSE(long_text.ok());
  EXPECT_NE(long_text.status().message().find("a Status answer's state of 4097 bytes (at most 4096)"),
            std::string::npos)
      << long_text.status().ToString();
  t.state = "training";
  t.peers.assign(kMaxStatusPeers + 1, PeerHealthMsg{});
  auto many = RoundTrip(e);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("a Status answer with 4097 peers (at most 4096)"), std::string::npos)
      << many.status().ToString();
}

// Nearest-rank percentiles (hand-derived: of 1..100 ms, p50 is 50, p90 90,
// p99 99), of the training steps when there are any, over the last 1024.
TEST(StatusBoard, PercentilesAreNearestRankOverTheLastWindow) {
  StatusBoard board;
  EXPECT_EQ(board.Take().timed, "");
  EXPECT_EQ(board.Take().step, -1);
  for (int i = 100; i >= 1; --i) board.RunGraphDone(i);
  StatusBoard::Snapshot s = board.Take();
  EXPECT_EQ(s.timed, "RunGraph");
  EXPECT_EQ(s.steps_timed, 100);
  EXPECT_EQ(s.p50_ms, 50);
  EXPECT_EQ(s.p90_ms, 90);
  EXPECT_EQ(s.p99_ms, 99);
  // Training steps win over RunGraphs; only the last 1024 count: 2000
  // steps of 1 ms, then 1024 of 3 ms.
  for (int i = 0; i < 2000; ++i) board.StepDone(i + 1, 1.0);
  for (int i = 0; i < 1024; ++i) board.StepDone(2001 + i, 3.0);
  s = board.Take();
  EXPECT_EQ(s.timed, "training steps");
  EXPECT_EQ(s.steps_timed, 3024);
  EXPECT_EQ(s.step, 3024);
  EXPECT_EQ(s.p50_ms, 3.0);
  EXPECT_EQ(s.accepted_gradients, -1);  // not counted until a sync step adds some
  board.AddGradients(2, 1);
  board.AddGradients(2, 0);
  s = board.Take();
  EXPECT_EQ(s.accepted_gradients, 4);
  EXPECT_EQ(s.dropped_gradients, 1);
}

TEST(Incarnation, IsOrderedByStartTimeAndNeverZero) {
  const uint64_t first = NewIncarnation();
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const uint64_t second = NewIncarnation();
  EXPECT_NE(first, 0u);
  EXPECT_LT(first, second);
  // The start time in ms since the epoch, then 16 random bits.
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  EXPECT_LE(static_cast<int64_t>(second >> 16), ms);
  EXPECT_GT(static_cast<int64_t>(second >> 16), ms - 10000);
  EXPECT_EQ(FormatIncarnation(0x18f3a2c41b2e7d10ull), "18f3a2c41b2e-7d10");
  EXPECT_EQ(FormatIncarnation(0x10005ull), "1-0005");
  EXPECT_NE(IncarnationAge(second).find(" s"), std::string::npos) << IncarnationAge(second);
  EXPECT_EQ(IncarnationAge(12345), "");  // not a start time
}

TEST(Incarnation, TheRefusalsSayWhatHappenedAndAreRecognised) {
  const Status restarted =
      RestartedTaskError("/job:ps/task:1", "tcp://10.0.0.7:7071", 0x10005ull, 0x20006ull, "/job:worker/task:0");
  EXPECT_EQ(restarted.code(), Code::kAborted);
  EXPECT_EQ(restarted.message(),
            "/job:ps/task:1 (tcp://10.0.0.7:7071) was restarted: it is incarnation 1-0005, not 2-0006, to which "
            "/job:worker/task:0 registered this graph; its graphs, steps and variables from before are gone (the "
            "client registers the graph again before its next step; variables come back from a checkpoint: "
            "[cluster] recovery = \"auto\", or start the chief again with --resume)");
  EXPECT_TRUE(IsStaleIncarnation(restarted));
  const Status older = OlderCallerError("/job:ps/task:0", "RunGraph", "/job:worker/task:1", 0x10005ull, 0x20006ull);
  EXPECT_EQ(older.message(),
            "/job:ps/task:0 refuses RunGraph from /job:worker/task:1 from an older incarnation 1-0005: that task has "
            "started again since (incarnation 2-0006), so this message is from a process that should be gone");
  EXPECT_TRUE(IsStaleIncarnation(older));
  EXPECT_FALSE(IsStaleIncarnation(Status(Code::kUnavailable, restarted.message())));
  EXPECT_FALSE(IsStaleIncarnation(Status(Code::kAborted, "step 4 was aborted")));
}

TEST(Wire, TheRendezvousStoresMessagesRoundTripAndKeepToTheirLimits) {
  Envelope e;
  e.request.method = Method::kKvSet;
  e.request.kv_keys = {"weft/abc/train/rank_0"};
  e.request.kv_value = std::string("\0binary\xff", 8);
  auto out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.method, Method::kKvSet);
  EXPECT_EQ(out->request.kv_keys, e.request.kv_keys);
  EXPECT_EQ(out->request.kv_value, e.request.kv_value);
  EXPECT_EQ(MethodName(Method::kKvSet), "KvSet");

  e = Envelope();
  e.request.method = Method::kKvGet;
  e.request.kv_keys = {"a", "b"};
  e.request.kv_wait_ms = 1500;
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.kv_keys, e.request.kv_keys);
  EXPECT_EQ(out->request.kv_wait_ms, 1500);
  EXPECT_EQ(MethodName(Method::kKvGet), "KvGet");

  e = Envelope();
  e.is_response = true;
  e.response.method = Method::kKvGet;
  e.response.kv_values = {"x", std::string(3, '\0')};
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->response.method, Method::kKvGet);
  EXPECT_EQ(out->response.kv_values, e.response.kv_values);

  // Limits, checked on arrival.
  auto refused = [](Envelope bad) {
    auto r = RoundTrip(bad);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  Envelope big;
  big.request.method = Method::kKvSet;
  big.request.kv_keys = {"k"};
  big.request.kv_value = std::string(kMaxKvValueBytes + 1, 'v');
  EXPECT_NE(refused(big).find("a KvSet value of 1048577 bytes (at most 1048576)"), std::string::npos);
  Envelope long_key;
  long_key.request.method = Method::kKvSet;
  long_key.request.kv_keys = {std::string(kMaxKvKeyBytes + 1, 'k')};
  EXPECT_NE(refused(long_key).find("a KvSet key of 257 bytes (1 to 256)"), std::string::npos);
  Envelope many;
  many.request.method = Method::kKvGet;
  many.request.kv_keys = std::vector<std::string>(kMaxKvKeysPerGet + 1, "k");
  EXPECT_NE(refused(many).find("a KvGet of 1025 keys (1 to 1024)"), std::string::npos);
  Envelope none;
  none.request.method = Method::kKvGet;
  EXPECT_NE(refused(none).find("a KvGet of 0 keys (1 to 1024)"), std::string::npos);
  Envelope negative;
  negative.request.method = Method::kKvGet;
  negative.request.kv_keys = {"k"};
  negative.request.kv_wait_ms = -5;
  EXPECT_NE(refused(negative).find("a KvGet wait of -5 ms (0 to 86400000)"), std::string::npos);
}

TEST(Wire, ResponsesRoundTripAndErrorsCarryNoBody) {
  Envelope e;
  e.is_response = true;
  e.call_id = 3;
  e.response.method = Method::kGetDevices;
  e.response.devices = {{"/job:ps/task:0/device:CPU:0", "CPU", 0, 77, true, 0, 0},
                        {"/job:ps/task:0/device:OPENCL:0", "OPENCL", 0, 78, false, 2.5, 3.5}};
  auto out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->response.devices.size(), 2u);
  EXPECT_EQ(out->response.devices[1].type, "OPENCL");
  EXPECT_FALSE(out->response.devices[1].host_visible);
  EXPECT_EQ(out->response.devices[1].device_to_host_gbps, 3.5);

  e.status = Status(Code::kNotFound, "no such graph");
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->status, e.status);
  EXPECT_TRUE(out->response.devices.empty());

  e = Envelope();
  e.is_response = true;
  e.response.method = Method::kRecvTensor;
  e.response.tensor = Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->response.tensor.BitwiseEquals(e.response.tensor));
  EXPECT_FALSE(out->response.is_dead);

  // A dead value (a branch not taken) travels as a marker without a tensor.
  e.response.tensor = Tensor();
  e.response.is_dead = true;
  out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->response.method, Method::kRecvTensor);
  EXPECT_TRUE(out->response.is_dead);
  EXPECT_FALSE(out->response.tensor.valid());
}

// A profiled RunGraph: the request asks for the task's timing, and the
// answer carries it (to the nanosecond), beside the outputs; an answer
// without it says so.
TEST(Wire, AProfiledRunGraphCarriesTheTasksStepTime) {
  Envelope e;
  e.request.method = Method::kRunGraph;
  e.request.profile = true;
  e.request.received_ns = 12345;  // not on the wire
  auto in = RoundTrip(e);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_TRUE(in->request.profile);
  EXPECT_FALSE(in->request.trace);
  EXPECT_EQ(in->request.received_ns, 0);

  Envelope r;
  r.is_response = true;
  r.response.method = Method::kRunGraph;
  r.response.retvals.push_back({0, Tensor::Scalar<float>(2.5f)});
  auto plain = RoundTrip(r);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_FALSE(plain->response.has_step_time);
  r.response.has_step_time = true;
  r.response.step_time = {"ignored", 99, 8.125, 6.5, 1.25, 0.031, 0.002};
  auto out = RoundTrip(r);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE(out->response.has_step_time);
  const runtime::TaskStepTime& t = out->response.step_time;
  EXPECT_EQ(t.task, "");            // the caller names it
  EXPECT_EQ(t.round_trip_ms, 0.0);  // and times the call
  EXPECT_DOUBLE_EQ(t.run_ms, 8.125);
  EXPECT_DOUBLE_EQ(t.compute_ms, 6.5);
  EXPECT_DOUBLE_EQ(t.wait_ms, 1.25);
  EXPECT_DOUBLE_EQ(t.serialization_ms, 0.031);
  EXPECT_DOUBLE_EQ(t.queued_ms, 0.002);
  ASSERT_EQ(out->response.retvals.size(), 1u);
  EXPECT_EQ(out->response.retvals[0].tensor.scalar<float>(), 2.5f);
}

TEST(Wire, EncodingAndDecodingAreTimed) {
  const RpcTimes before = ReadRpcTimes();
  Envelope e;
  e.request.method = Method::kRunGraph;
  e.request.feeds.push_back({0, Tensor::FromVector<float>(std::vector<float>(4096, 1.0f), Shape{4096})});
  ASSERT_TRUE(RoundTrip(e).ok());
  const RpcTimes after = ReadRpcTimes();
  EXPECT_GT(after.encode_ns, before.encode_ns);
  EXPECT_GT(after.decode_ns, before.decode_ns);
  CountQueued(250);
  EXPECT_EQ(ReadRpcTimes().queued_ns, after.queued_ns + 250);
}

// A raw envelope, for messages Encode would never write.
std::string Raw(const std::function<void(wire::Envelope::Builder)>& fill) {
  capnp::MallocMessageBuilder message;
  fill(message.initRoot<wire::Envelope>());
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  return std::string(words.asChars().begin(), words.asChars().size());
}

Status DecodeError(const std::string& header, uint64_t payload_size = 0) {
  std::vector<char> payload(payload_size + 64);
  auto e = DecodeBytes(header, payload.data(), payload_size, nullptr, "task /job:ps/task:0 (tcp://127.0.0.1:1)");
  return e.ok() ? Status() : e.status();
}

// A partition's pulls from one task as its step starts travel as one
// RecvTensors (core/distributed/remote_rendezvous.h, Prefetch): its keys
// come back in order, and what the server would answer under call ids past
// 2^64, a batch with no answer id, no keys or too many is refused naming
// the sender.
TEST(Wire, ABatchOfPullsRoundTripsAndKeepsToItsLimits) {
  Envelope e;
  e.call_id = 41;
  e.request.method = Method::kRecvTensors;
  e.request.step_id = 77;
  e.request.keys.push_back(runtime::RendezvousKey::Make("/job:ps/task:0/device:CPU:0", 9,
                                                        "/job:worker/task:0/device:CPU:0", "dense1/kernel/read:0"));
  e.request.keys.push_back(runtime::RendezvousKey::Make("/job:ps/task:0/device:CPU:0", 9,
                                                        "/job:worker/task:0/device:CPU:0", "dense2/bias/read:0", 3, 4));
  auto out = RoundTrip(e);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->request.method, Method::kRecvTensors);
  EXPECT_EQ(out->call_id, 41u);
  EXPECT_EQ(out->request.step_id, 77);
  ASSERT_EQ(out->request.keys.size(), 2u);
  EXPECT_TRUE(out->request.keys[0] == e.request.keys[0]);
  EXPECT_TRUE(out->request.keys[1] == e.request.keys[1]);
  EXPECT_EQ(out->request.keys[1].frame, 3);
  EXPECT_EQ(out->request.keys[1].iteration, 4);
  EXPECT_EQ(MethodName(Method::kRecvTensors), "RecvTensors");

  auto refused = [](Envelope bad) {
    auto r = RoundTrip(bad);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  Envelope no_id = e;
  no_id.call_id = 0;
  std::string why = refused(no_id);
  EXPECT_NE(why.find("malformed message from task /job:ps/task:0"), std::string::npos) << why;
  EXPECT_NE(why.find("a RecvTensors with call id 0"), std::string::npos) << why;
  Envelope wraps = e;
  wraps.call_id = std::numeric_limits<uint64_t>::max() - 1;
  why = refused(wraps);
  EXPECT_NE(why.find("a RecvTensors whose 2 answer ids would pass 2^64"), std::string::npos) << why;
  // Encode refuses what Decode would (no keys, too many); a peer that
  // sends them anyway is refused on arrival.
  Envelope none = e;
  none.request.keys.clear();
  EXPECT_FALSE(Encode(none).ok());
  Status s = DecodeError(Raw([](wire::Envelope::Builder b) {
    b.setVersion(1);
    b.setCallId(5);
    b.initRequest().initRecvTensors().initKeys(0);
  }));
  EXPECT_NE(s.message().find("a RecvTensors of 0 keys (1 to 4096)"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("task /job:ps/task:0 (tcp://127.0.0.1:1)"), std::string::npos) << s.ToString();
  s = DecodeError(Raw([](wire::Envelope::Builder b) {
    b.setVersion(1);
    b.setCallId(5);
    b.initRequest().initRecvTensors().initKeys(kMaxRecvTensorsKeys + 1);
  }));
  EXPECT_NE(s.message().find("a RecvTensors of 4097 keys (1 to 4096)"), std::string::npos) << s.ToString();
  // Cut short, it is refused as any truncated message is.
  auto encoded = Encode(e);
  ASSERT_TRUE(encoded.ok());
  s = DecodeError(encoded->header.substr(0, encoded->header.size() - 8));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("malformed message from task /job:ps/task:0"), std::string::npos) << s.ToString();
}

TEST(Wire, RefusesAnotherVersionNamingBoth) {
  const Status s = DecodeError(Raw([](wire::Envelope::Builder e) {
    e.setVersion(2);
    e.initRequest().setHeartbeat();
  }));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("task /job:ps/task:0 (tcp://127.0.0.1:1)"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("version 2, this Weft speaks version 1"), std::string::npos) << s.ToString();
}

TEST(Wire, RefusesTruncatedAndGarbageHeaders) {
  const std::string good = Raw([](wire::Envelope::Builder e) {
    e.setVersion(1);
    e.initRequest().setHeartbeat();
  });
  Status s = DecodeError(good.substr(0, good.size() - 3));
  EXPECT_NE(s.message().find("not a whole number of 8-byte words"), std::string::npos) << s.ToString();
  s = DecodeError(good.substr(0, 8));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("malformed message from task /job:ps/task:0"), std::string::npos) << s.ToString();
  s = DecodeError(std::string(64, '\xff'));
  EXPECT_FALSE(s.ok());
  s = DecodeError("");
  EXPECT_NE(s.message().find("0 bytes"), std::string::npos) << s.ToString();
}

TEST(Wire, RefusesAnOversizedHeaderBeforeReadingIt) {
  const Status s = DecodeError(std::string(kMaxHeaderBytes + 8, '\0'));
  EXPECT_NE(s.message().find("exceeds"), std::string::npos) << s.ToString();
}

TEST(Wire, RefusesTensorsThatDoNotFitTheirPayload) {
  auto with_tensor = [](uint64_t offset, uint64_t size, std::vector<int64_t> dims, uint16_t dtype) {
    return Raw([&](wire::Envelope::Builder e) {
      e.setVersion(1);
      auto r = e.initResponse();
      auto t = r.initTensor();
      t.setDtype(static_cast<weft::wire::DType>(dtype));
      auto d = t.initShape(static_cast<unsigned>(dims.size()));
      for (unsigned i = 0; i < dims.size(); ++i) d.set(i, dims[i]);
      t.setPayloadOffset(offset);
      t.setPayloadSize(size);
    });
  };
  // f32 is 1 in the ABI's numbering.
  Status s = DecodeError(with_tensor(0, 16, {4}, 1), 8);
  EXPECT_NE(s.message().find("outside the payload of 8 bytes"), std::string::npos) << s.ToString();
  s = DecodeError(with_tensor(uint64_t{1} << 63, 16, {4}, 1), 64);
  EXPECT_NE(s.message().find("outside the payload"), std::string::npos) << s.ToString();
  s = DecodeError(with_tensor(0, 12, {4}, 1), 64);
  EXPECT_NE(s.message().find("needs 16 bytes but the message says 12"), std::string::npos) << s.ToString();
  s = DecodeError(with_tensor(0, 0, {-1}, 1), 64);
  EXPECT_NE(s.message().find("negative dimension"), std::string::npos) << s.ToString();
  s = DecodeError(with_tensor(0, 0, {int64_t{1} << 62, int64_t{1} << 62}, 1), 64);
  EXPECT_FALSE(s.ok());
  s = DecodeError(with_tensor(0, 4, {1}, 12345), 64);
  EXPECT_NE(s.message().find("unknown or unsendable dtype number 12345"), std::string::npos) << s.ToString();
}

TEST(Wire, RefusesToSendWhatCannotTravel) {
  Envelope e;
  e.request.method = Method::kRunGraph;
  e.request.feeds.push_back({0, Tensor()});
  auto encoded = Encode(e);
  ASSERT_FALSE(encoded.ok());
  EXPECT_NE(encoded.status().message().find("argument 0"), std::string::npos) << encoded.status().ToString();
}

// With WEFT_WRITE_WIRE_CORPUS=DIR, writes one message of each kind as seeds
// for tests/fuzz/wire_fuzzer (its input: 4-byte header size, header,
// payload).
TEST(Wire, WritesFuzzSeedsOnRequest) {
  const char* dir = std::getenv("WEFT_WRITE_WIRE_CORPUS");
  if (dir == nullptr) GTEST_SKIP() << "set WEFT_WRITE_WIRE_CORPUS to write the seeds";
  std::vector<Envelope> samples(4);
  samples[0].request.method = Method::kRunGraph;
  samples[0].request.feeds.push_back({0, Tensor::FromVector<float>({1, 2, 3}, Shape{3})});
  samples[0].request.feeds.push_back({1, Tensor::Strings({"ab"}, Shape{1})});
  samples[1].request.method = Method::kRecvTensor;
  samples[1].request.key =
      runtime::RendezvousKey::Make("/job:ps/task:0/device:CPU:0", 1, "/job:worker/task:0/device:CPU:0", "x:0");
  samples[2].is_response = true;
  samples[2].response.method = Method::kGetDevices;
  samples[2].response.devices = {{"/job:ps/task:0/device:CPU:0", "CPU", 0, 1, true, 0, 0}};
  samples[3].request.method = Method::kHello;
  samples[3].request.caller = "client";
  samples.resize(6);
  samples[4].request.method = Method::kKvSet;
  samples[4].request.kv_keys = {"weft/1f/train/rank_0"};
  samples[4].request.kv_value = "127.0.0.1";
  samples[5].request.method = Method::kKvGet;
  samples[5].request.kv_keys = {"weft/1f/train/0", "weft/1f/train/1"};
  samples[5].request.kv_wait_ms = 60000;
  samples.resize(7);
  samples[6].call_id = 9;
  samples[6].request.method = Method::kRecvTensors;
  samples[6].request.keys = {
      samples[1].request.key,
      runtime::RendezvousKey::Make("/job:ps/task:0/device:CPU:0", 1, "/job:worker/task:0/device:CPU:0", "y:0")};
  for (std::size_t i = 0; i < samples.size(); ++i) {
    auto e = Encode(samples[i]);
    ASSERT_TRUE(e.ok());
    Flat flat = Join(*e);
    std::string bytes(4, '\0');
    const uint32_t n = static_cast<uint32_t>(e->header.size());
    std::memcpy(bytes.data(), &n, 4);
    bytes += e->header;
    bytes.append(static_cast<const char*>(flat.memory.get()), flat.size);
    std::ofstream(std::string(dir) + "/seed_" + std::to_string(i), std::ios::binary) << bytes;
  }
}

}  // namespace
}  // namespace weft::dist
