// The distributed runtime in one test process: real task services on
// loopback ports, a client session placing graphs across them over the tcp
// transport, compared with the same graph in a local session (bitwise).
// Multi-process runs through `weft serve` are in cluster_cli_test.cc.

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "core/distributed/dist_session.h"
#include "core/distributed/heartbeat.h"
#include "core/distributed/incarnation.h"
#include "core/distributed/task_service.h"
#include "core/graph/builder.h"
#include "core/graph/serialize.h"
#include "core/runtime/trace.h"
#include "tests/support/loopback.h"
#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"
#include "tests/support/two_tasks.h"

namespace weft::dist {
namespace {

using testing::FreePort;
using TwoTasks = testing::TwoTasksTest;

plugin::PluginHost& Plugins() { return testing::BuiltPlugins(); }

Graph FeedForward() {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2, 3}, "x");
  Output h;
  {
    auto on_ps = b.DeviceScope("/job:ps/task:0");
    Output w = b.Const(
        Tensor::FromVector<float>({0.5f, -1, 2, 0.25f, 3, -0.5f, 1.5f, 1, -2, 0.75f, 0.125f, 4}, Shape{3, 4}), "w");
    h = b.Op("MatMul", {x, w}, {}, "matmul");
  }
  Output y;
  {
    auto on_worker = b.DeviceScope("/job:worker/task:0");
    Output bias = b.Const(Tensor::FromVector<float>({0.1f, 0.2f, -0.3f, 0.4f}, Shape{4}), "bias");
    y = b.Op("Relu", {b.Op("BiasAdd", {h, bias}, {}, "add")}, {}, "y");
  }
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(*g);
}

TEST_F(TwoTasks, ListsEveryTasksDevicesUnderItsName) {
  auto devices = DistSession::ListDevices(Options(), Plugins());
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  bool ps_cpu = false, worker_cpu = false;
  for (const DeviceInfo& d : *devices) {
    ps_cpu = ps_cpu || d.name == "/job:ps/task:0/device:CPU:0";
    worker_cpu = worker_cpu || d.name == "/job:worker/task:0/device:CPU:0";
  }
  EXPECT_TRUE(ps_cpu && worker_cpu);
}

TEST_F(TwoTasks, AFeedForwardGraphAcrossTasksMatchesOneProcessBitForBit) {
  const Tensor x = Tensor::FromVector<float>({1, 2, 3, -4, 5.5f, 0.25f}, Shape{2, 3});
  auto session = DistSession::Create(FeedForward(), Options(), Plugins());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> remote;
  Status s = (*session)->Run({{"x", x}}, {"y", "matmul"}, {}, &remote);
  ASSERT_TRUE(s.ok()) << s.ToString();

  testing::RuntimeEnv env;
  auto local = env.Session(FeedForward());
  std::vector<Tensor> expected;
  ASSERT_TRUE(local->Run({{"x", x}}, {"y", "matmul"}, {}, &expected).ok());
  ASSERT_EQ(remote.size(), 2u);
  EXPECT_TRUE(remote[0].BitwiseEquals(expected[0])) << remote[0].DebugString() << " vs " << expected[0].DebugString();
  EXPECT_TRUE(remote[1].BitwiseEquals(expected[1]));
  // Second run through the cached registration.
  ASSERT_TRUE((*session)->Run({{"x", x}}, {"y", "matmul"}, {}, &remote).ok());
  EXPECT_TRUE(remote[0].BitwiseEquals(expected[0]));
}

TEST_F(TwoTasks, PlacesPinnedNodesOnTheirTasks) {
  auto session = DistSession::Create(FeedForward(), Options(), Plugins());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  Graph g = FeedForward();
  auto placed = (*session)->Place(g);
  ASSERT_TRUE(placed.ok()) << placed.status().ToString();
  auto device_of = [&](const std::string& node) {
    return placed
        ->devices[static_cast<std::size_t>(placed->placement.device[static_cast<std::size_t>(g.Find(node)->id)])]
        .name;
  };
  EXPECT_EQ(device_of("matmul"), "/job:ps/task:0/device:CPU:0");
  EXPECT_EQ(device_of("y"), "/job:worker/task:0/device:CPU:0");
}

TEST_F(TwoTasks, AVariableOnTheParameterServerKeepsItsValueAcrossRuns) {
  GraphBuilder b;
  Output var, init, add;
  {
    auto on_ps = b.DeviceScope("/job:ps/task:0");
    var = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{2})}}, "v");
    init = b.Op("Assign", {var, b.Const(Tensor::FromVector<float>({1, 2}, Shape{2}))}, {}, "init");
  }
  {
    auto on_worker = b.DeviceScope("/job:worker/task:0");
    Output delta =
        b.Op("Mul", {b.Const(Tensor::FromVector<float>({10, 100}, Shape{2})), b.Scalar<float>(0.5f)}, {}, "delta");
    auto on_ps = b.DeviceScope("/job:ps/task:0");
    add = b.Op("AssignAdd", {var, delta}, {}, "add");
  }
  Output read;
  {
    auto on_worker = b.DeviceScope("/job:worker/task:0");
    read = b.Op("ReadVariable", {var}, {{"dtype", AttrValue(DType::kF32)}}, "read");
  }
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto session = DistSession::Create(std::move(*g), Options(), Plugins());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, nullptr).ok());
  for (int i = 0; i < 3; ++i) {
    Status s = (*session)->Run({}, {}, {"add"}, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<Tensor> out;
  Status s = (*session)->Run({}, {"read"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // 1 + 3 * 5 and 2 + 3 * 50, by hand.
  EXPECT_EQ(out[0].data<float>()[0], 16.0f);
  EXPECT_EQ(out[0].data<float>()[1], 152.0f);
}

TEST_F(TwoTasks, AnErrorOnOneTaskFailsTheStepNamingIt) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{-1}, "x");
  Output bad;
  {
    auto on_ps = b.DeviceScope("/job:ps/task:0");
    // Reshape to a shape of the wrong size fails at run time.
    bad = b.Op("Reshape", {x, b.Const(Tensor::FromVector<int64_t>({5}, Shape{1}))}, {}, "reshape");
  }
  Output y;
  {
    auto on_worker = b.DeviceScope("/job:worker/task:0");
    y = b.Op("Neg", {bad}, {}, "y");
  }
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto session = DistSession::Create(std::move(*g), Options(), Plugins());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> out;
  Status s = (*session)->Run({{"x", Tensor::FromVector<float>({1, 2, 3}, Shape{3})}}, {"y"}, {}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/job:ps/task:0"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("reshape"), std::string::npos) << s.ToString();
  // The session still works after a failed step.
  s = (*session)->Run({{"x", Tensor::FromVector<float>({1, 2, 3, 4, 5}, Shape{5})}}, {"y"}, {}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(DistSession, ATaskThatIsNotUpFailsNamingItsAddressAfterTheConnectTimeout) {
  DistSessionOptions o;
  const std::string address = "tcp://127.0.0.1:" + std::to_string(FreePort());
  o.tasks = {{"/job:ps/task:0", address}};
  o.connect_timeout_ms = 600;
  const auto start = std::chrono::steady_clock::now();
  auto devices = DistSession::ListDevices(o, Plugins());
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(devices.ok());
  EXPECT_NE(devices.status().message().find("cannot reach task /job:ps/task:0 (" + address + ") within 600 ms"),
            std::string::npos)
      << devices.status().ToString();
  EXPECT_NE(devices.status().message().find("weft serve"), std::string::npos);
  EXPECT_GE(took, std::chrono::milliseconds(500));
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST_F(TwoTasks, AClientOfAnotherClusterIsRefused) {
  DistSessionOptions o = Options();
  o.cluster_fingerprint = TwoTasks::kFingerprint + 1;
  auto devices = DistSession::ListDevices(o, Plugins());
  ASSERT_FALSE(devices.ok());
  EXPECT_NE(devices.status().message().find("belongs to another cluster"), std::string::npos)
      << devices.status().ToString();
}

TEST_F(TwoTasks, ATaskReachedUnderAnotherNameSaysWhoItIs) {
  DistSessionOptions o = Options();
  o.tasks = {{"/job:worker/task:7", peers_.at("/job:ps/task:0")}};
  auto devices = DistSession::ListDevices(o, Plugins());
  ASSERT_FALSE(devices.ok());
  EXPECT_NE(devices.status().message().find("is /job:ps/task:0, not /job:worker/task:7"), std::string::npos)
      << devices.status().ToString();
}

// The rendezvous store each task serves: a get for keys not set yet waits
// (holding no RPC thread) until a set completes it, from another task over
// RPC; one that waits too long names the missing keys; and a task's own
// view is the same store.
TEST_F(TwoTasks, TheRendezvousStoreServesGetsThatWaitForTheirKeys) {
  auto ps_view = services_[0]->KvStoreOf("/job:ps/task:0");
  ASSERT_TRUE(ps_view.ok()) << ps_view.status().ToString();
  auto remote = services_[1]->KvStoreOf("/job:ps/task:0");
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();

  ASSERT_TRUE((*remote)->Set("k1", "one").ok());
  auto got = (*ps_view)->Get("k1", 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "one");

  // Two remote gets wait for a key set later, by the owner itself.
  std::vector<std::thread> waiters;
  std::vector<std::string> seen(2);
  for (int i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      auto v = (*remote)->Get("later", 10000);
      seen[static_cast<std::size_t>(i)] = v.ok() ? *v : std::string(v.status().message());
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // The store still answers others meanwhile.
  ASSERT_TRUE((*remote)->Wait({"k1"}, 0).ok());
  ASSERT_TRUE((*ps_view)->Set("later", "now").ok());
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(seen, (std::vector<std::string>{"now", "now"}));

  Status waited = (*remote)->Wait({"k1", "never", "nor"}, 300);
  EXPECT_EQ(waited.code(), Code::kDeadlineExceeded) << waited.ToString();
  EXPECT_NE(waited.message().find("rendezvous at /job:ps/task:0: \"never\", \"nor\" did not appear within 300 ms"),
            std::string::npos)
      << waited.ToString();
  auto unknown = services_[1]->KvStoreOf("/job:ps/task:7");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "/job:ps/task:7 is not a task of the cluster");
}

// A task that stops answers the gets parked at it rather than leaving them
// to their deadline.
TEST(KvStoreService, ClosingAnswersParkedGets) {
  auto store = std::make_shared<KvStoreService>("/job:worker/task:0");
  std::string answer;
  store->Serve({"x"}, 60000, [&](Status s, std::vector<std::string>) { answer = std::string(s.message()); });
  EXPECT_EQ(answer, "");
  store->Close(CancelledError("/job:worker/task:0 is shutting down"));
  EXPECT_EQ(answer, "/job:worker/task:0 is shutting down");
  Status later = store->Set("x", "1");
  EXPECT_EQ(later.message(), "/job:worker/task:0 is shutting down");
}

// The heartbeats: a task that goes away is declared lost once it has been
// silent past the timeout (not before), what waits on it through
// FailPeer fails with the sentence naming it, and a task started again on
// the same address is seen as restarted.
TEST_F(TwoTasks, HeartbeatsDeclareAGoneTaskLostAndSeeItsRestart) {
  RpcNode::Options ro;
  ro.plugins = &Plugins();
  ro.cluster_fingerprint = kFingerprint;
  ro.connect_timeout_ms = 500;
  auto rpc = RpcNode::Create(ro, nullptr);
  ASSERT_TRUE(rpc.ok()) << rpc.status().ToString();
  const Peer ps{testing::kPsTask, peers_.at(testing::kPsTask)};
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::pair<std::string, int64_t>> lost;
  std::vector<std::pair<uint64_t, uint64_t>> restarts;
  HeartbeatMonitor::Events events;
  events.lost = [&](const Peer& p, int64_t silent_ms) {
    (*rpc)->FailPeer(p.name, LostPeerStatus(p, silent_ms, 600));
    std::lock_guard<std::mutex> lock(mutex);
    lost.emplace_back(p.name, silent_ms);
    cv.notify_all();
  };
  events.restarted = [&](const Peer&, uint64_t before, uint64_t now) {
    std::lock_guard<std::mutex> lock(mutex);
    restarts.emplace_back(before, now);
    cv.notify_all();
  };
  HeartbeatMonitor monitor(rpc->get(), {ps}, {/*interval_ms=*/100, /*timeout_ms=*/600}, events);
  auto wait_for = [&](auto predicate) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, std::chrono::seconds(10), predicate);
  };
  // Alive first.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (monitor.Snapshot()[0].state != HeartbeatMonitor::PeerState::State::kAlive &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const uint64_t first = services_[0]->incarnation();
  EXPECT_EQ(monitor.Snapshot()[0].incarnation, first);
  // Gone: lost after at least the timeout of silence.
  services_[0].reset();
  const auto gone = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_for([&] { return !lost.empty(); }));
  EXPECT_GE(std::chrono::steady_clock::now() - gone, std::chrono::milliseconds(500));
  EXPECT_EQ(lost[0].first, testing::kPsTask);
  EXPECT_GT(lost[0].second, 600);
  EXPECT_EQ(monitor.Snapshot()[0].state, HeartbeatMonitor::PeerState::State::kLost);
  const Status message = LostPeerStatus(ps, 1234, 600);
  EXPECT_EQ(message.message(), StrCat("task /job:ps/task:0 (", ps.address,
                                      ") has not answered for 1.2 s ([cluster] heartbeat_timeout_ms = 600)"));
  EXPECT_TRUE(IsLostPeer(message));
  // Back, as a new incarnation on the same address.
  auto again = StartTask(testing::kPsTask);
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(wait_for([&] { return !restarts.empty(); }));
  EXPECT_EQ(restarts[0], std::make_pair(first, again->incarnation()));
  EXPECT_EQ(monitor.Snapshot()[0].state, HeartbeatMonitor::PeerState::State::kAlive);
}

// A raw client of the two tasks, for requests a session would not send.
std::unique_ptr<RpcNode> RawClient(const std::string& identity, uint64_t incarnation, uint64_t fingerprint) {
  RpcNode::Options o;
  o.plugins = &Plugins();
  o.identity = identity;
  o.incarnation = incarnation;
  o.cluster_fingerprint = fingerprint;
  o.connect_timeout_ms = 5000;
  auto rpc = RpcNode::Create(o, nullptr);
  EXPECT_TRUE(rpc.ok()) << rpc.status().ToString();
  return rpc.ok() ? std::move(*rpc) : nullptr;
}

// A partition for |device| that receives a float from |send_device| (at
// device incarnation |incarnation|) and returns it.
std::string RecvPartition(const std::string& device, const std::string& send_device, uint64_t incarnation) {
  GraphBuilder b;
  Output r = b.Op("_Recv", {},
                  {{"tensor_type", DType::kF32},
                   {"shape", Shape{}},
                   {"tensor_name", "t:0"},
                   {"send_device", send_device},
                   {"send_device_incarnation", static_cast<int64_t>(incarnation)},
                   {"recv_device", device}},
                  "recv");
  b.Op("_Retval", {r}, {{"T", DType::kF32}, {"index", 0}}, "out");
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  GraphDef def = g->ToGraphDef();
  for (NodeDef& n : def.nodes) n.device = device;
  return SerializeGraphDef(def, GraphFormat::kBinary);
}

uint64_t DeviceIncarnation(RpcNode& rpc, const Peer& task) {
  Request request;
  request.method = Method::kGetDevices;
  auto r = rpc.CallSync(task, std::move(request), 5000);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() && !r->devices.empty() ? r->devices[0].incarnation : 0;
}

// A task that was restarted refuses a step meant for its earlier start,
// naming both incarnations, even when another client registered a graph
// with the new process first (whose handle a stale one could otherwise
// name); the client registers again, and its next step runs.
TEST_F(TwoTasks, ARestartedTaskRefusesAStepForItsEarlierStartAndTheClientRegistersAgain) {
  const Tensor x = Tensor::FromVector<float>({1, 2, 3, -4, 5.5f, 0.25f}, Shape{2, 3});
  DistSessionOptions options = Options();
  options.heartbeat_timeout_ms = 0;  // so that the step, not a heartbeat, meets the restart
  auto before = DistSession::Create(FeedForward(), options, Plugins());
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  std::vector<Tensor> first, out;
  ASSERT_TRUE((*before)->Run({{"x", x}}, {"y"}, {}, &first).ok());
  const uint64_t old = services_[0]->incarnation();
  EXPECT_EQ((*before)->KnownIncarnation(testing::kPsTask), old);
  services_[0].reset();
  auto again = StartTask(testing::kPsTask);
  ASSERT_NE(again, nullptr);
  ASSERT_GT(again->incarnation(), old);  // ordered by start time
  auto after = DistSession::Create(FeedForward(), options, Plugins());
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_TRUE((*after)->Run({{"x", x}}, {"y"}, {}, &out).ok());
  Status stale = (*before)->Run({{"x", x}}, {"y"}, {}, &out);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.code(), Code::kAborted) << stale.ToString();
  EXPECT_TRUE(IsStaleIncarnation(stale)) << stale.ToString();
  const std::string expected = StrCat(" was restarted: it is incarnation ", FormatIncarnation(again->incarnation()));
  EXPECT_NE(stale.message().find(expected), std::string::npos) << stale.ToString();
  // Refused by the ps's RunGraph (meant for the old start), or by its
  // answer to the worker's pull (naming the old start's device).
  EXPECT_TRUE(stale.message().find(StrCat("not ", FormatIncarnation(old), ", to which client registered this graph")) !=
                  std::string::npos ||
              stale.message().find("and the graph was placed before") != std::string::npos)
      << stale.ToString();
  EXPECT_NE(stale.message().find("cancelled (the next step registers the graph again)"), std::string::npos)
      << stale.ToString();
  EXPECT_EQ((*before)->KnownIncarnation(testing::kPsTask), again->incarnation());
  // Registered again with the new process: the same answer as before.
  ASSERT_TRUE((*before)->Run({{"x", x}}, {"y"}, {}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].BitwiseEquals(first[0])) << out[0].DebugString();
}

// When the heartbeats see the restart first, the next step registers
// again before it runs and does not fail.
TEST_F(TwoTasks, ARestartTheHeartbeatsSawCostsNoStep) {
  const Tensor x = Tensor::FromVector<float>({1, 2, 3, -4, 5.5f, 0.25f}, Shape{2, 3});
  DistSessionOptions options = Options();
  options.heartbeat_interval_ms = 50;
  options.heartbeat_timeout_ms = 5000;
  auto session = DistSession::Create(FeedForward(), options, Plugins());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> first, out;
  ASSERT_TRUE((*session)->Run({{"x", x}}, {"y"}, {}, &first).ok());
  services_[0].reset();
  auto again = StartTask(testing::kPsTask);
  ASSERT_NE(again, nullptr);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((*session)->KnownIncarnation(testing::kPsTask) != again->incarnation() &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ((*session)->KnownIncarnation(testing::kPsTask), again->incarnation());
  Status ran = (*session)->Run({{"x", x}}, {"y"}, {}, &out);
  ASSERT_TRUE(ran.ok()) << ran.ToString();
  EXPECT_TRUE(out[0].BitwiseEquals(first[0])) << out[0].DebugString();
}

// A request meant for another incarnation of the task runs nothing there.
TEST_F(TwoTasks, ARequestMeantForAnotherIncarnationRunsNothing) {
  auto rpc = RawClient("client", NewIncarnation(), kFingerprint);
  ASSERT_NE(rpc, nullptr);
  const Peer ps{testing::kPsTask, peers_.at(testing::kPsTask)};
  services_[1].reset();  // the worker's heartbeats would count on the ps
  const uint64_t handled = services_[0]->requests_handled();
  Request request;
  request.method = Method::kRunGraph;
  request.handle = 1;
  request.step_id = 7;
  request.target_incarnation = services_[0]->incarnation() ^ 0x5a5a;
  auto r = rpc->CallSync(ps, std::move(request), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAborted);
  EXPECT_NE(r.status().message().find(StrCat("not ", FormatIncarnation(services_[0]->incarnation() ^ 0x5a5a),
                                             ", to which client registered this graph")),
            std::string::npos)
      << r.status().ToString();
  EXPECT_EQ(services_[0]->requests_handled(), handled);
  // The task's own incarnation is served (and every answer carries it).
  Request heartbeat;
  heartbeat.method = Method::kHeartbeat;
  heartbeat.target_incarnation = services_[0]->incarnation();
  auto ok = rpc->CallSync(ps, std::move(heartbeat), 5000);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->responder_incarnation, services_[0]->incarnation());
  EXPECT_EQ(rpc->PeerIncarnation(testing::kPsTask), services_[0]->incarnation());
}

// A call made with AnswerOn::kTransportThreadIfSmall gets a small answer
// (a heartbeat's) on the transport's thread even while every pool thread
// is busy (a tensor pull
// goes on with its step there, core/distributed/remote_rendezvous.cc); an
// ordinary call's answer, and an error of either kind, wait for the pool.
TEST_F(TwoTasks, AnAnswerOnTheTransportThreadNeedsNoPoolThread) {
  RpcNode::Options o;
  o.plugins = &Plugins();
  o.identity = "client";
  o.incarnation = NewIncarnation();
  o.cluster_fingerprint = kFingerprint;
  o.connect_timeout_ms = 5000;
  o.handler_threads = 1;
  auto rpc = RpcNode::Create(o, nullptr);
  ASSERT_TRUE(rpc.ok()) << rpc.status().ToString();
  const Peer ps{testing::kPsTask, peers_.at(testing::kPsTask)};
  auto heartbeat = [] {
    Request r;
    r.method = Method::kHeartbeat;
    return r;
  };
  ASSERT_TRUE((*rpc)->CallSync(ps, heartbeat(), 5000).ok());  // connected
  // The pool's one thread waits in the answer of this call.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> holding;
  (*rpc)->Call(ps, heartbeat(), 5000, [&holding, released](Status, Response) {
    holding.set_value();
    released.wait();
  });
  holding.get_future().wait();
  std::promise<Status> on_transport, on_pool, failed;
  (*rpc)->Call(
      ps, heartbeat(), 5000, [&](Status s, Response) { on_transport.set_value(s); },
      RpcNode::AnswerOn::kTransportThreadIfSmall);
  (*rpc)->Call(ps, heartbeat(), 5000, [&](Status s, Response) { on_pool.set_value(s); });
  const Peer nobody{"/job:ps/task:9", StrCat("tcp://127.0.0.1:", FreePort())};
  (*rpc)->Call(
      nobody, heartbeat(), 300, [&](Status s, Response) { failed.set_value(s); },
      RpcNode::AnswerOn::kTransportThreadIfSmall);
  std::future<Status> transport_answer = on_transport.get_future();
  ASSERT_EQ(transport_answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(transport_answer.get().ok());
  std::future<Status> pool_answer = on_pool.get_future(), failure = failed.get_future();
  // Well past the failing call's 300 ms deadline: both still wait.
  EXPECT_EQ(pool_answer.wait_for(std::chrono::milliseconds(1500)), std::future_status::timeout);
  EXPECT_EQ(failure.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  release.set_value();
  ASSERT_EQ(pool_answer.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(pool_answer.get().ok());
  ASSERT_EQ(failure.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Status why = failure.get();
  EXPECT_FALSE(why.ok());
  EXPECT_NE(why.message().find("/job:ps/task:9"), std::string::npos) << why.ToString();
}

// A transfer that names a device of an earlier start of the task (a stale
// placement) is refused: a pull before it makes any step state, a graph
// before it is registered.
TEST_F(TwoTasks, TransfersNamingAnEarlierDeviceIncarnationAreRefused) {
  auto rpc = RawClient("client", NewIncarnation(), kFingerprint);
  ASSERT_NE(rpc, nullptr);
  const Peer ps{testing::kPsTask, peers_.at(testing::kPsTask)};
  const std::string cpu = StrCat(testing::kPsTask, "/device:CPU:0");
  const uint64_t now = DeviceIncarnation(*rpc, ps);
  ASSERT_NE(now, 0u);
  Request pull;
  pull.method = Method::kRecvTensor;
  pull.step_id = 11;
  pull.key = runtime::RendezvousKey::Make(cpu, now + 1, StrCat(testing::kWorkerTask, "/device:CPU:0"), "t:0");
  auto r = rpc->CallSync(ps, std::move(pull), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kAborted);
  EXPECT_EQ(r.status().message(),
            StrCat("/job:ps/task:0: tensor t:0 names device ", cpu, " incarnation ", now + 1,
                   ", but that device is incarnation ", now, " now: the task was restarted: it is incarnation ",
                   FormatIncarnation(services_[0]->incarnation()), ", and the graph was placed before"));
  EXPECT_TRUE(IsStaleIncarnation(r.status()));
  Request elsewhere;
  elsewhere.method = Method::kRecvTensor;
  elsewhere.step_id = 11;
  elsewhere.key = runtime::RendezvousKey::Make("/job:ps/task:0/device:GPU:9", now, cpu, "t:0");
  r = rpc->CallSync(ps, std::move(elsewhere), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("names sending device \"/job:ps/task:0/device:GPU:9\", which is not one of"),
            std::string::npos)
      << r.status().ToString();
  // Registering: a _Recv from this task's own device names its incarnation.
  for (uint64_t incarnation : {now + 1, now}) {
    Request reg;
    reg.method = Method::kRegisterGraph;
    reg.partitions.push_back({cpu, RecvPartition(cpu, cpu, incarnation)});
    r = rpc->CallSync(ps, std::move(reg), 5000);
    if (incarnation == now) {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), Code::kAborted);
      EXPECT_NE(r.status().message().find(
                    StrCat("the partition for ", cpu, ": node \"recv\" names device ", cpu, " incarnation ", now + 1)),
                std::string::npos)
          << r.status().ToString();
    }
  }
}

// The pulls a partition makes as its step starts go to each sending task
// as one RecvTensors (RemoteRendezvous::Prefetch); the task answers each
// key on its own, under its own call id, so each caller hears its own
// answer: here two refusals that say different things.
TEST_F(TwoTasks, ABatchOfPullsIsAnsweredKeyByKey) {
  auto rpc = RawClient("client", NewIncarnation(), kFingerprint);
  ASSERT_NE(rpc, nullptr);
  const Peer ps{testing::kPsTask, peers_.at(testing::kPsTask)};
  const std::string cpu = StrCat(testing::kPsTask, "/device:CPU:0");
  const std::string worker_cpu = StrCat(testing::kWorkerTask, "/device:CPU:0");
  const uint64_t now = DeviceIncarnation(*rpc, ps);
  ASSERT_NE(now, 0u);
  Request batch;
  batch.method = Method::kRecvTensors;
  batch.step_id = 12;
  batch.keys.push_back(runtime::RendezvousKey::Make(cpu, now + 1, worker_cpu, "stale:0"));
  batch.keys.push_back(runtime::RendezvousKey::Make("/job:ps/task:0/device:GPU:9", now, worker_cpu, "elsewhere:0"));
  std::promise<Status> first, second;
  std::vector<std::function<void(Status, Response)>> dones;
  dones.push_back([&](Status s, Response) { first.set_value(s); });
  dones.push_back([&](Status s, Response) { second.set_value(s); });
  rpc->CallRecvTensors(ps, std::move(batch), 5000, std::move(dones), RpcNode::AnswerOn::kPool);
  auto a = first.get_future(), b = second.get_future();
  ASSERT_EQ(a.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(b.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Status stale = a.get(), elsewhere = b.get();
  EXPECT_EQ(stale.code(), Code::kAborted) << stale.ToString();
  EXPECT_NE(stale.message().find("tensor stale:0 names device"), std::string::npos) << stale.ToString();
  EXPECT_EQ(elsewhere.code(), Code::kNotFound) << elsewhere.ToString();
  EXPECT_NE(elsewhere.message().find("tensor elsewhere:0 names sending device \"/job:ps/task:0/device:GPU:9\""),
            std::string::npos)
      << elsewhere.ToString();
  // A batch whose callbacks do not match its keys is the caller's bug,
  // said to each callback rather than sent.
  Request odd;
  odd.method = Method::kRecvTensors;
  odd.keys.push_back(runtime::RendezvousKey::Make(cpu, now, worker_cpu, "t:0"));
  std::promise<Status> one, two;
  std::vector<std::function<void(Status, Response)>> extra;
  extra.push_back([&](Status s, Response) { one.set_value(s); });
  extra.push_back([&](Status s, Response) { two.set_value(s); });
  rpc->CallRecvTensors(ps, std::move(odd), 5000, std::move(extra), RpcNode::AnswerOn::kPool);
  const Status mismatch = one.get_future().get();
  EXPECT_EQ(mismatch.code(), Code::kInternal);
  EXPECT_NE(mismatch.message().find("CallRecvTensors with a RecvTensors of 1 keys and 2 callbacks"), std::string::npos)
      << mismatch.ToString();
  EXPECT_EQ(two.get_future().get().code(), Code::kInternal);
}

// A caller that started again is the only one of its name: requests from
// its earlier start are refused, its Hello too, and that start's steps are
// aborted at once rather than left to their deadline.
TEST_F(TwoTasks, AnEarlierStartOfACallerIsRefusedAndItsStepsAborted) {
  const std::string caller = "/job:worker/task:7";
  const uint64_t first = NewIncarnation();
  auto old_rpc = RawClient(caller, first, kFingerprint);
  ASSERT_NE(old_rpc, nullptr);
  const Peer ps{testing::kPsTask, peers_.at(testing::kPsTask)};
  const Peer worker{testing::kWorkerTask, peers_.at(testing::kWorkerTask)};
  // A step of the first start that waits: the ps pulls a tensor the
  // worker's CPU never sends in that step.
  const std::string ps_cpu = StrCat(testing::kPsTask, "/device:CPU:0");
  const std::string worker_cpu = StrCat(testing::kWorkerTask, "/device:CPU:0");
  Request reg;
  reg.method = Method::kRegisterGraph;
  reg.partitions.push_back({ps_cpu, RecvPartition(ps_cpu, worker_cpu, DeviceIncarnation(*old_rpc, worker))});
  auto handle = old_rpc->CallSync(ps, std::move(reg), 5000);
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  std::promise<Status> step_done;
  Request run;
  run.method = Method::kRunGraph;
  run.handle = handle->handle;
  run.target_incarnation = handle->responder_incarnation;
  run.step_id = 99;
  old_rpc->Call(ps, std::move(run), 15000, [&](Status s, Response) { step_done.set_value(std::move(s)); });
  auto step = step_done.get_future();
  EXPECT_EQ(step.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  // The caller starts again.
  const uint64_t second = first + (uint64_t{5} << 16);
  auto new_rpc = RawClient(caller, second, kFingerprint);
  ASSERT_NE(new_rpc, nullptr);
  Request heartbeat;
  heartbeat.method = Method::kHeartbeat;
  ASSERT_TRUE(new_rpc->CallSync(ps, heartbeat, 5000).ok());
  ASSERT_EQ(step.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const Status aborted = step.get();
  EXPECT_EQ(aborted.code(), Code::kAborted) << aborted.ToString();
  EXPECT_NE(aborted.message().find(StrCat(caller, " was restarted, so its step 99 (of incarnation ",
                                          FormatIncarnation(first), ") was aborted")),
            std::string::npos)
      << aborted.ToString();
  // The first start's connection is refused from now on ...
  auto refused = old_rpc->CallSync(ps, heartbeat, 5000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            StrCat("/job:ps/task:0 refuses Heartbeat from ", caller, " from an older incarnation ",
                   FormatIncarnation(first), ": that task has started again since (incarnation ",
                   FormatIncarnation(second), "), so this message is from a process that should be gone"));
  // ... and so is a new connection of it.
  auto zombie = RawClient(caller, first, kFingerprint);
  ASSERT_NE(zombie, nullptr);
  auto hello = zombie->CallSync(ps, heartbeat, 5000);
  ASSERT_FALSE(hello.ok());
  EXPECT_TRUE(IsStaleIncarnation(hello.status())) << hello.status().ToString();
  EXPECT_NE(hello.status().message().find(StrCat("refuses Hello from ", caller, " from an older incarnation")),
            std::string::npos)
      << hello.status().ToString();
  // The newer start is served.
  EXPECT_TRUE(new_rpc->CallSync(ps, heartbeat, 5000).ok());
}

// A step the client aborted before its RunGraph arrived runs none of its
// nodes there, and answers with the client's reason, not "output 0 was not
// produced" (what the chaos runs found: a cancelled partition ended OK).
TEST_F(TwoTasks, AStepAbortedBeforeItRunsAnswersWithTheAbortsReason) {
  auto rpc = RawClient("client", NewIncarnation(), kFingerprint);
  ASSERT_NE(rpc, nullptr);
  const Peer ps{testing::kPsTask, peers_.at(testing::kPsTask)};
  const std::string cpu = StrCat(testing::kPsTask, "/device:CPU:0");
  GraphBuilder b;
  b.Op("_Retval", {b.Scalar<float>(3)}, {{"T", DType::kF32}, {"index", 0}}, "out");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  GraphDef def = g->ToGraphDef();
  for (NodeDef& n : def.nodes) n.device = cpu;
  Request reg;
  reg.method = Method::kRegisterGraph;
  reg.partitions.push_back({cpu, SerializeGraphDef(def, GraphFormat::kBinary)});
  auto handle = rpc->CallSync(ps, std::move(reg), 5000);
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  auto run = [&](int64_t step_id) {
    Request r;
    r.method = Method::kRunGraph;
    r.handle = handle->handle;
    r.target_incarnation = handle->responder_incarnation;
    r.step_id = step_id;
    return rpc->CallSync(ps, std::move(r), 5000);
  };
  Request abort;
  abort.method = Method::kAbortStep;
  abort.step_id = 31;
  abort.abort_status = Status(Code::kCancelled, "step 31 was aborted: the test stopped it");
  ASSERT_TRUE(rpc->CallSync(ps, std::move(abort), 5000).ok());
  auto aborted = run(31);
  ASSERT_FALSE(aborted.ok());
  EXPECT_EQ(aborted.status().code(), Code::kCancelled) << aborted.status().ToString();
  EXPECT_EQ(aborted.status().message(), "/job:ps/task:0, step 31: step 31 was aborted: the test stopped it");
  // Another step of the same graph runs and answers its output.
  auto ran = run(32);
  ASSERT_TRUE(ran.ok()) << ran.status().ToString();
  ASSERT_EQ(ran->retvals.size(), 1u);
  EXPECT_EQ(ran->retvals[0].tensor.scalar<float>(), 3.0f);
}

// [cluster] transfer_dtype = "bf16": a tensor that crosses between the
// tasks arrives rounded to bf16, to nearest even (values worked out by
// hand), and its bytes on the wire halve.
TEST_F(TwoTasks, Bf16TransfersRoundToNearestEvenAndHalveTheBytes) {
  auto graph = [] {
    GraphBuilder b;
    Output a, z;
    {
      auto on_ps = b.DeviceScope("/job:ps/task:0");
      // A batch dimension: narrowed however few its values (a shape known
      // to hold fewer than 1,024 would travel as it is).
      a = b.Op("Identity", {b.Placeholder(DType::kF32, Shape{Shape::kUnknownDim}, "x")}, {}, "a");
      z = b.Const(Tensor::FromVector<float>(std::vector<float>(65536, 0.75f), Shape{65536}), "z");
    }
    {
      auto on_worker = b.DeviceScope("/job:worker/task:0");
      b.Op("Identity", {a}, {}, "y");
      b.Op("Identity", {z}, {}, "zr");
    }
    auto g = b.Build();
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return std::move(*g);
  };
  // 1 + 2^-8 is half a bf16 step above 1: a tie, to the even 1. 1 + 3 * 2^-8
  // is a tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even). pi in [2, 4),
  // where a step is 2^-6: 201 steps, 3.140625. -2.5 is exact.
  const Tensor x = Tensor::FromVector<float>({1.00390625f, 1.01171875f, 3.14159274f, -2.5f}, Shape{4});
  DistSessionOptions narrow = Options();
  narrow.transfer_f32_as = DType::kBF16;
  auto session = DistSession::Create(graph(), narrow, Plugins());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  std::vector<Tensor> out;
  Status s = (*session)->Run({{"x", x}}, {"y"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out[0].dtype(), DType::kF32);
  EXPECT_EQ(testing::Floats(out[0]), (std::vector<float>{1.0f, 1.015625f, 3.140625f, -2.5f}));

  // 256 KiB of f32 from the ps to the worker, each way of transfer.
  auto bytes_per_step = [&](DistSession& target) {
    EXPECT_TRUE(target.Run({}, {}, {"zr"}, nullptr).ok());  // registered
    const WireCounters before = ReadWireCounters();
    EXPECT_TRUE(target.Run({}, {}, {"zr"}, nullptr).ok());
    const WireCounters after = ReadWireCounters();
    return static_cast<double>(after.sent_bytes - before.sent_bytes);
  };
  auto plain = DistSession::Create(graph(), Options(), Plugins());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  const double f32_bytes = bytes_per_step(**plain);
  const double bf16_bytes = bytes_per_step(**session);
  EXPECT_GT(f32_bytes, 262144.0);
  EXPECT_LT(bf16_bytes, 0.55 * f32_bytes) << bf16_bytes << " vs " << f32_bytes;
}

// [cluster] variable_reads = "late": three layers on the worker, their
// weights read on the ps task. Both ways give the same result (worked out
// by hand); late, the worker pulls the second and third weights on their
// own, each after the worker op two ops before its first use has ended
// (PartitionOptions::late_variable_reads); at the start, all three go in
// one request as the step starts.
TEST_F(TwoTasks, LateVariableReadsArePulledWhenTheForwardPassNearsThem) {
  auto graph = [] {
    GraphBuilder b;
    const std::vector<std::vector<float>> weights = {{1, 0, 0, 1}, {2, 0, 0, -1}, {1, 1, 1, 1}};
    std::vector<Output> reads;
    std::vector<Output> inits;
    {
      auto on_ps = b.DeviceScope("/job:ps/task:0");
      for (std::size_t k = 0; k < weights.size(); ++k) {
        Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{2, 2})}},
                        StrCat("w", k + 1));
        inits.push_back(b.Op("Assign", {v, b.Const(Tensor::FromVector<float>(weights[k], Shape{2, 2}))}, {},
                             StrCat("init", k + 1)));
        reads.push_back(b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, StrCat("r", k + 1)));
      }
    }
    {
      auto on_worker = b.DeviceScope("/job:worker/task:0");
      Output a = b.Placeholder(DType::kF32, Shape{1, 2}, "x");
      for (int k = 1; k <= 3; ++k) {
        Output h = b.Op("MatMul", {a, reads[static_cast<std::size_t>(k - 1)]}, {}, StrCat("h", k));
        a = k < 3 ? b.Op("Relu", {h}, {}, StrCat("a", k)) : h;
      }
    }
    auto g = b.Build();
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return std::move(*g);
  };
  const Tensor x = Tensor::FromVector<float>({1, 2}, Shape{1, 2});
  // [1, 2] -> identity -> [1, 2] -> [2, -2], relu [2, 0] -> [2, 2].
  const std::vector<float> expected = {2, 2};
  DistSessionOptions late_options = Options();
  late_options.late_variable_reads = true;
  for (bool late : {false, true}) {
    SCOPED_TRACE(late ? "late" : "at the start");
    auto session = DistSession::Create(graph(), late ? late_options : Options(), Plugins());
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    ASSERT_TRUE((*session)->Run({}, {}, {"init1", "init2", "init3"}, nullptr).ok());
    std::vector<Tensor> out;
    Status s = (*session)->Run({{"x", x}}, {"h3"}, {}, &out);  // registered
    ASSERT_TRUE(s.ok()) << s.ToString();
    runtime::TraceRecorder trace;
    runtime::RunOptions traced;
    traced.trace = &trace;
    s = (*session)->Run({{"x", x}}, {"h3"}, {}, &out, traced);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(testing::Floats(out[0]), expected);
    std::map<std::string, runtime::TraceRecorder::Event> on_worker;
    for (const runtime::TraceRecorder::Event& e : trace.events()) {
      if (e.process == testing::kWorkerTask) on_worker[e.name] = e;
    }
    for (const char* name : {"h1", "h2", "r2/_recv_0_from_CPU_0", "r3/_recv_0_from_CPU_0"}) {
      ASSERT_EQ(on_worker.count(name), 1u) << name;
    }
    auto end = [&](const char* name) { return on_worker[name].start_us + on_worker[name].duration_us; };
    const int64_t r2 = on_worker["r2/_recv_0_from_CPU_0"].start_us;
    const int64_t r3 = on_worker["r3/_recv_0_from_CPU_0"].start_us;
    // At the start, the executor may still run them after the layers
    // before (it runs a ready node's successors first), so only the late
    // order is certain.
    if (late) {
      EXPECT_GE(r2, end("h1"));
      EXPECT_GE(r3, end("h2"));
    }
  }
}

// A profiled step across two tasks: each task's part, named, with the
// call to it enclosing its own time; the worker waits for the ps's
// product, which the ps computes.
TEST_F(TwoTasks, AProfiledStepHasEachTasksPartAndTheCallsAroundThem) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{192, 192}, "x");
  Output h;
  {
    auto on_ps = b.DeviceScope("/job:ps/task:0");
    h = b.Op("MatMul", {b.Op("MatMul", {x, x}, {}, "m1"), x}, {}, "m2");
  }
  {
    auto on_worker = b.DeviceScope("/job:worker/task:0");
    b.Op("Relu", {h}, {}, "y");
  }
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto session = DistSession::Create(std::move(*g), Options(), Plugins());
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const Tensor x_value = Tensor::FromVector<float>(std::vector<float>(192 * 192, 0.25f), Shape{192, 192});
  runtime::StepProfile profile;
  runtime::RunOptions options;
  options.profile = &profile;
  std::vector<Tensor> out;
  for (int i = 0; i < 3; ++i) {
    Status s = (*session)->Run({{"x", x_value}}, {"y"}, {}, &out, i == 0 ? runtime::RunOptions() : options);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  const std::vector<runtime::StepTime> steps = profile.steps();
  ASSERT_EQ(steps.size(), 2u);
  for (const runtime::StepTime& step : steps) {
    ASSERT_EQ(step.tasks.size(), 2u);
    for (const runtime::TaskStepTime& t : step.tasks) {
      SCOPED_TRACE(t.task);
      EXPECT_TRUE(t.task == testing::kPsTask || t.task == testing::kWorkerTask);
      // One clock (both tasks are in this process): the call encloses the
      // task's part, and the step encloses the call.
      EXPECT_GE(t.round_trip_ms, t.run_ms);
      EXPECT_GE(step.step_ms, t.round_trip_ms);
      EXPECT_LE(t.compute_ms + t.wait_ms, t.run_ms + 0.002);  // µs events in a ns window
      if (t.task == testing::kPsTask) {
        EXPECT_GT(t.compute_ms, 0.0);
      } else {
        EXPECT_GT(t.wait_ms, 0.0);
      }
    }
  }
  // Which task computed longest depends on the machine (under TSan the
  // worker's ReLU can take as long as the ps's products): only the form.
  const std::string table = profile.Format();
  EXPECT_NE(table.find("\n  /job:ps/task:0 "), std::string::npos) << table;
  EXPECT_NE(table.find("\n  /job:worker/task:0 "), std::string::npos) << table;
  EXPECT_NE(table.find(" computed longest: "), std::string::npos) << table;
  // The step's outputs are the same as unprofiled.
  EXPECT_EQ(out[0].shape(), (Shape{192, 192}));
}

}  // namespace
}  // namespace weft::dist
