// Clusters of real processes: tasks started with `weft serve` on loopback
// ports chosen at run time, clients run with `weft run/devices/place
// --config`, and the faults and bad input of docs/distributed.md, each with
// its message. Every wait is bounded; every process is killed at the end.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "core/base/json.h"
#include "core/base/strings.h"
#include "core/graph/builder.h"
#include "core/graph/control_flow.h"
#include "core/graph/serialize.h"
#include "core/tensor/npy.h"
#include "tests/support/cluster_trace_check.h"
#include "tests/support/loopback.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_dir.h"
#include "tests/support/weft_cli.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::BackgroundProcess;
using testing::FreePort;
using testing::ProcessResult;

// A raw listener on 127.0.0.1 that accepts and then either stays silent or
// answers |reply| and closes; stops with the object.
class FakeServer {
 public:
  explicit FakeServer(std::string reply) : reply_(std::move(reply)) {
    fd_ = testing::RawListener(16, &port_);
    thread_ = std::thread([this] {
      while (!stop_) {
        timeval tv{0, 100000};
        fd_set set;
        FD_ZERO(&set);
        FD_SET(fd_, &set);
        if (select(fd_ + 1, &set, nullptr, nullptr, &tv) <= 0) continue;
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        if (reply_.empty()) {
          held_.push_back(c);  // silent: keep it open
        } else {
          char buffer[4096];
          (void)!read(c, buffer, sizeof buffer);
          (void)!write(c, reply_.data(), reply_.size());
          close(c);
        }
      }
    });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
    for (int c : held_) close(c);
    close(fd_);
  }
  int port() const { return port_; }

 private:
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;
  std::thread thread_;
};

class Cluster : public ::testing::Test {
 protected:
  void TearDown() override {
    tasks_.clear();  // kills what still runs
  }

  // A cluster config of one ps and one worker on the given ports (no
  // worker when |worker_port| is 0).
  std::string WriteConfig(const std::string& name, int ps_port, int worker_port, int64_t connect_ms = 20000,
                          int64_t rpc_ms = 30000) {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path);
    out << "[cluster]\ntransport = \"tcp\"\nconnect_timeout_ms = " << connect_ms << "\nrpc_timeout_ms = " << rpc_ms
        << "\n[cluster.jobs]\nps = [\"127.0.0.1:" << ps_port << "\"]\n";
    if (worker_port != 0) out << "worker = [\"127.0.0.1:" << worker_port << "\"]\n";
    return path;
  }

  // Inserts |keys| into the [cluster] section of the config |config|;
  // returns the new text.
  static std::string WithClusterKeys(const std::string& config, const std::string& keys) {
    std::string text = testing::ReadFile(config);
    text.insert(text.find("[cluster.jobs]"), keys);
    return text;
  }

  ProcessResult Weft(std::vector<std::string> args) { return testing::RunWeft(std::move(args)); }

  // `weft devices` of a cluster whose ps task is at loopback |ps_port|
  // (and no worker), which must fail (exit code 1); what it said on stderr.
  std::string DevicesFailure(int ps_port, int64_t connect_ms) {
    ProcessResult r = Weft({"devices", "--config", WriteConfig("c.toml", ps_port, 0, connect_ms)});
    EXPECT_EQ(r.exit_code, 1);
    return r.err;
  }

  // Starts `weft serve` for one task and waits until it listens.
  BackgroundProcess* Serve(const std::string& config, const std::string& job, int task) {
    tasks_.push_back(testing::StartListening(
        {"serve", "--config", config, "--job", job, "--task", std::to_string(task)}, "weft serve --job " + job));
    return tasks_.back().get();
  }

  // `weft serve` of ps task 0 of |config|, which must fail to start: it
  // ends within 30 s with exit code 1. Returns what it printed.
  std::string ServeThatFails(const std::string& config) {
    BackgroundProcess serve({WEFT_CLI, "serve", "--config", config, "--job", "ps", "--task", "0"},
                            {{"WEFT_PLUGIN_PATH", ""}});
    EXPECT_TRUE(serve.Wait(30000));
    EXPECT_EQ(serve.exit_code(), 1);
    return serve.Output();
  }

  // Writes |value| as <dir>/<name>.npy; returns the --feed that feeds it.
  std::string WriteFeed(const std::string& name, const Tensor& value) {
    const std::string path = dir_.File(name + ".npy");
    EXPECT_TRUE(WriteNpy(path, value).ok()) << path;
    return name + "=" + path;
  }

  // `weft run` of |graph| with |feed| and |run_flags| (the fetches, and
  // more) on the cluster of |config|, writing to <dir>/remote, and in one
  // process, writing to <dir>/local; both must succeed.
  void RunOnClusterAndInOneProcess(const std::string& graph, const std::string& config, const std::string& feed,
                                   const std::vector<std::string>& fetches, bool quiet) {
    std::vector<std::string> remote = {"run", graph, "--config", config, "--feed", feed};
    std::vector<std::string> local = {"run", graph, "--feed", feed};
    for (const std::string& f : fetches) {
      for (auto* args : {&remote, &local}) args->insert(args->end(), {"--fetch", f});
    }
    remote.insert(remote.end(), {"--out", (dir_ / "remote").string()});
    local.insert(local.end(), {"--out", (dir_ / "local").string()});
    if (quiet) {
      remote.push_back("--quiet");
      local.push_back("--quiet");
    }
    ProcessResult r = Weft(remote);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    r = Weft(local);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  std::string WriteGraph(const std::string& name, const GraphBuilder& b) {
    auto g = b.Build();
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    const std::string path = (dir_ / name).string();
    EXPECT_TRUE(WriteGraphFile(path, g->ToGraphDef()).ok());
    return path;
  }

  std::string FeedForwardGraph() {
    GraphBuilder b;
    Output x = b.Placeholder(DType::kF32, Shape{2, 3}, "x");
    Output h;
    {
      auto on_ps = b.DeviceScope("/job:ps/task:0");
      h = b.Op("MatMul",
               {x, b.Const(Tensor::FromVector<float>({0.5f, -1, 2, 0.25f, 3, -0.5f, 1.5f, 1, -2, 0.75f, 0.125f, 4},
                                                     Shape{3, 4}),
                           "w")},
               {}, "matmul");
    }
    auto on_worker = b.DeviceScope("/job:worker/task:0");
    b.Op("Tanh", {b.Op("BiasAdd", {h, b.Const(Tensor::FromVector<float>({0.1f, 0.2f, -0.3f, 0.4f}, Shape{4}))})}, {},
         "y");
    return WriteGraph("ff.wg", b);
  }

  static std::string Read(const fs::path& path) { return testing::ReadFile(path); }

  // `weft run` of a step whose ps part waits on a queue nobody fills, in
  // the background: it cannot finish until something fails it.
  class StepThatWaits {
   public:
    StepThatWaits(Cluster* test, const std::string& config) {
      GraphBuilder b;
      Output dequeued;
      {
        auto on_ps = b.DeviceScope("/job:ps/task:0");
        Output q = b.Op("FIFOQueue", {},
                        {{"component_types", AttrValue(std::vector<DType>{DType::kF32})},
                         {"shapes", AttrValue(std::vector<Shape>{Shape{}})}},
                        "q");
        dequeued = b.AddNode("QueueDequeueMany", {q, b.Scalar<int32_t>(1)},
                             {{"component_types", AttrValue(std::vector<DType>{DType::kF32})}}, "dequeue")[0];
      }
      auto on_worker = b.DeviceScope("/job:worker/task:0");
      b.Op("Neg", {dequeued}, {}, "y");
      const std::string graph = test->WriteGraph("wait.wg", b);
      client_ = std::thread([this, test, graph, config] {
        result_ = test->Weft({"run", graph, "--config", config, "--fetch", "y"});
        done_ = true;
      });
      std::this_thread::sleep_for(3s);
      EXPECT_FALSE(done_.load()) << "the step should still wait: " << result_.err;
    }
    ~StepThatWaits() {
      if (client_.joinable()) client_.join();
    }
    ProcessResult Join() {
      client_.join();
      return result_;
    }

   private:
    std::atomic<bool> done_{false};
    ProcessResult result_;
    std::thread client_;
  };

  // How a step ended that a signal to its ps task interrupted.
  struct Interrupted {
    ProcessResult result;
    std::chrono::steady_clock::duration took;  // from the signal to the step's end
    BackgroundProcess* ps;
  };
  // Serves the ps and the worker of |config|, starts a step that waits on
  // the ps (StepThatWaits), and sends the ps task |signal|.
  Interrupted StepWhenThePsGets(const std::string& config, int signal) {
    BackgroundProcess* ps = Serve(config, "ps", 0);
    Serve(config, "worker", 0);
    StepThatWaits waiting(this, config);
    ps->Kill(signal);
    const auto sent = std::chrono::steady_clock::now();
    ProcessResult r = waiting.Join();
    return {std::move(r), std::chrono::steady_clock::now() - sent, ps};
  }

  testing::TestDir dir_{"weft_cluster_test"};
  int ps_port_ = 0;
  std::vector<std::unique_ptr<BackgroundProcess>> tasks_;
};

TEST_F(Cluster, AGraphAcrossTwoServedTasksMatchesOneProcessBitForBit) {
  const std::string config = WriteConfig("c.toml", FreePort(), FreePort());
  BackgroundProcess* ps = Serve(config, "ps", 0);
  Serve(config, "worker", 0);
  const std::string graph = FeedForwardGraph();
  const std::string feed = WriteFeed("x", Tensor::FromVector<float>({1, 2, 3, -4, 5.5f, 0.25f}, Shape{2, 3}));
  ASSERT_NO_FATAL_FAILURE(RunOnClusterAndInOneProcess(graph, config, feed, {"y", "matmul"}, /*quiet=*/false));
  for (const char* file : {"y.npy", "matmul.npy"}) {
    const std::string a = Read(dir_ / "remote" / file), b = Read(dir_ / "local" / file);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, b) << file << " differs between the cluster and one process";
  }
  // `weft devices` and `weft place` see the cluster.
  ProcessResult devices = Weft({"devices", "--config", config});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_NE(devices.out.find("/job:ps/task:0/device:CPU:0"), std::string::npos) << devices.out;
  EXPECT_NE(devices.out.find("/job:worker/task:0/device:CPU:0"), std::string::npos) << devices.out;
  ProcessResult place = Weft({"place", graph, "--config", config, "--explain"});
  ASSERT_EQ(place.exit_code, 0) << place.err;
  EXPECT_NE(place.out.find("matmul"), std::string::npos);
  EXPECT_NE(place.out.find("/job:ps/task:0/device:CPU:0"), std::string::npos) << place.out;
  // SIGTERM stops a task cleanly.
  ps->Kill(SIGTERM);
  ASSERT_TRUE(ps->Wait(20000));
  EXPECT_EQ(ps->exit_code(), 0) << ps->Output();
  EXPECT_NE(ps->Output().find("stopping (SIGTERM)"), std::string::npos);
}

TEST_F(Cluster, AWhileLoopSplitAcrossServedTasksMatchesOneProcessBitForBit) {
  const std::string config = WriteConfig("c.toml", FreePort(), FreePort());
  Serve(config, "ps", 0);
  Serve(config, "worker", 0);
  // h <- tanh(h W + 0.5) ten times; the MatMul runs on the ps, the rest on
  // the worker, so every iteration crosses between the tasks both ways.
  GraphBuilder b;
  Output h0 = b.Placeholder(DType::kF32, Shape{2, 3}, "h0");
  Output w =
      b.Const(Tensor::FromVector<float>({0.5f, -0.25f, 0.125f, 0.75f, 0.5f, -1, -0.5f, 0.25f, 1}, Shape{3, 3}), "w");
  auto r = WhileLoop(
      b,
      [&](const std::vector<Output>& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(10)});
      },
      [&](const std::vector<Output>& v) -> Expected<std::vector<Output>> {
        Output product;
        {
          auto on_ps = b.DeviceScope("/job:ps/task:0");
          product = b.Op("MatMul", {v[1], w}, {}, "product");
        }
        return std::vector<Output>{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}),
                                   b.Op("Tanh", {b.Op("Add", {product, b.Scalar<float>(0.5f)})})};
      },
      {b.Scalar<int32_t>(0), h0});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  {
    auto on_worker = b.DeviceScope("/job:worker/task:0");
    b.Op("Identity", {(*r)[1]}, {}, "h");
  }
  const std::string graph = WriteGraph("loop.wg", b);
  const std::string feed = WriteFeed("h0", Tensor::FromVector<float>({0.1f, -0.2f, 0.3f, 1, 2, -3}, Shape{2, 3}));
  ASSERT_NO_FATAL_FAILURE(RunOnClusterAndInOneProcess(graph, config, feed, {"h"}, /*quiet=*/true));
  const std::string a = Read(dir_ / "remote" / "h.npy"), c = Read(dir_ / "local" / "h.npy");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, c) << "the split loop's result differs from one process";
  ProcessResult place = Weft({"place", graph, "--config", config});
  ASSERT_EQ(place.exit_code, 0) << place.err;
  EXPECT_NE(place.out.find("/job:ps/task:0/device:CPU:0"), std::string::npos) << place.out;
}

TEST_F(Cluster, TasksWithDifferentHardwareRunOneGraph) {
  // The ps loads no OpenCL plugin (CPU only); the worker's MatMul is pinned
  // to its OpenCL device (PoCL). Each task reads its own config.
  ProcessResult devices_here = Weft({"devices", "--local"});
  if (devices_here.out.find("/device:OPENCL:0") == std::string::npos) GTEST_SKIP() << "no OpenCL device here";
  const int ps_port = FreePort(), worker_port = FreePort();
  const std::string worker_config = WriteConfig("worker.toml", ps_port, worker_port);
  const std::string ps_config = (dir_ / "ps.toml").string();
  {
    std::ifstream in(worker_config);
    std::ofstream out(ps_config);
    out << "[plugins]\ndisable = [\"opencl\"]\n" << in.rdbuf();
  }
  Serve(ps_config, "ps", 0);
  Serve(worker_config, "worker", 0);
  ProcessResult devices = Weft({"devices", "--config", worker_config});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_EQ(devices.out.find("/job:ps/task:0/device:OPENCL"), std::string::npos) << devices.out;
  EXPECT_NE(devices.out.find("/job:worker/task:0/device:OPENCL:0"), std::string::npos) << devices.out;
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{2, 3}, "x");
  Output h;
  {
    auto on_ps = b.DeviceScope("/job:ps/task:0");
    h = b.Op("Tanh", {x}, {}, "tanh");
  }
  {
    auto on_opencl = b.DeviceScope("/job:worker/task:0/device:OPENCL:0");
    h = b.Op("MatMul", {h, b.Const(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, Shape{3, 2}))}, {}, "matmul");
  }
  b.Op("Neg", {h}, {}, "y");
  const std::string graph = WriteGraph("mixed.wg", b);
  const std::string feed = WriteFeed("x", Tensor::FromVector<float>({1, -2, 3, 0.5f, 0.25f, -1}, Shape{2, 3}));
  ASSERT_NO_FATAL_FAILURE(RunOnClusterAndInOneProcess(graph, worker_config, feed, {"y"}, /*quiet=*/true));
  EXPECT_EQ(Read(dir_ / "remote" / "y.npy"), Read(dir_ / "local" / "y.npy"));
  ProcessResult place = Weft({"place", graph, "--config", worker_config, "--explain"});
  EXPECT_NE(place.out.find("/job:worker/task:0/device:OPENCL:0"), std::string::npos) << place.out;
}

TEST_F(Cluster, ATaskThatIsNotUpIsRetriedThenNamed) {
  const int port = FreePort();
  const std::string config = WriteConfig("c.toml", port, 0, /*connect_ms=*/700);
  const auto start = std::chrono::steady_clock::now();
  ProcessResult r = Weft({"devices", "--config", config});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot reach task"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tcp://127.0.0.1:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("within 700 ms"), std::string::npos) << r.err;
  EXPECT_LT(took, 30s);
}

TEST_F(Cluster, ATaskStartedLateIsWaitedFor) {
  const int ps_port = FreePort(), worker_port = FreePort();
  const std::string config = WriteConfig("c.toml", ps_port, worker_port);
  Serve(config, "worker", 0);
  // The ps comes up two seconds after the client started asking.
  std::thread late([&] {
    std::this_thread::sleep_for(2s);
    Serve(config, "ps", 0);
  });
  ProcessResult r = Weft({"devices", "--config", config});
  late.join();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("/job:ps/task:0/device:CPU:0"), std::string::npos);
}

TEST_F(Cluster, ASilentNonWeftListenerIsNamed) {
  FakeServer silent("");
  const std::string err = DevicesFailure(silent.port(), /*connect_ms=*/800);
  EXPECT_NE(err.find("did not answer Weft's handshake"), std::string::npos) << err;
  EXPECT_NE(err.find(StrCat("127.0.0.1:", silent.port())), std::string::npos) << err;
}

TEST_F(Cluster, ANonWeftServerThatAnswersIsRefused) {
  FakeServer http("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
  const std::string err = DevicesFailure(http.port(), /*connect_ms=*/2000);
  EXPECT_NE(err.find("/job:ps/task:0"), std::string::npos) << err;
  EXPECT_NE(err.find("not a Weft tcp peer"), std::string::npos) << err;
}

TEST_F(Cluster, TwoClustersSharingAnAddressRefuseEachOther) {
  const int ps_port = FreePort();
  const std::string a = WriteConfig("a.toml", ps_port, FreePort());
  Serve(a, "ps", 0);
  const std::string b = WriteConfig("b.toml", ps_port, 0, /*connect_ms=*/3000);
  ProcessResult r = Weft({"devices", "--config", b});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("belongs to another cluster"), std::string::npos) << r.err;
  // And a second task cannot listen on a taken port.
  const std::string second = ServeThatFails(b);
  EXPECT_NE(second.find("Address already in use"), std::string::npos) << second;
  EXPECT_NE(second.find("another process, perhaps a task of another cluster"), std::string::npos);
}

TEST_F(Cluster, ATaskKilledMidStepFailsTheStepNamingIt) {
  ps_port_ = FreePort();
  const std::string config = WriteConfig("c.toml", ps_port_, FreePort(), 20000, /*rpc_ms=*/60000);
  const Interrupted step = StepWhenThePsGets(config, SIGKILL);
  EXPECT_LT(step.took, 20s) << "the step did not fail promptly";
  const ProcessResult& r = step.result;
  // A lost task exits 3, not 1 (a user error), and the message leads with
  // it in the user's terms, then what to do, then the chain of nodes.
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const std::string error = r.err.substr(std::min(r.err.size(), r.err.find("weft: error: ")));
  EXPECT_EQ(error.find(StrCat("weft: error: /job:ps/task:0 (tcp://127.0.0.1:", ps_port_,
                              ") was lost: it closed the connection (its process ended or was killed, or the link to "
                              "it broke).\n  Start it again and run the command again")),
            0u)
      << r.err;
  EXPECT_NE(r.err.find("\n  (what failed: "), std::string::npos) << r.err;
}

// A task that hangs (SIGSTOP: its connections stay open, so nothing
// closes) is caught by the heartbeats within heartbeat_timeout_ms, long
// before the 60 s RPC deadline, and the step fails naming it.
TEST_F(Cluster, AHungTaskIsDeclaredLostAndItsStepFailsNamingIt) {
  const int ps_port = FreePort();
  const std::string config = WriteConfig("c.toml", ps_port, FreePort(), 20000, /*rpc_ms=*/60000);
  testing::WriteFile(config, WithClusterKeys(config, "heartbeat_interval_ms = 200\nheartbeat_timeout_ms = 1500\n"));
  const Interrupted step = StepWhenThePsGets(config, SIGSTOP);
  step.ps->Kill(SIGCONT);
  EXPECT_LT(step.took, 15s) << "the step did not fail at the heartbeat timeout";
  const ProcessResult& r = step.result;
  EXPECT_EQ(r.exit_code, 3) << r.err;
  // After the heartbeat's warning in the log: the error leads with the task.
  const std::string error = r.err.substr(std::min(r.err.size(), r.err.find("weft: error: ")));
  EXPECT_EQ(error.find(StrCat("weft: error: /job:ps/task:0 (tcp://127.0.0.1:", ps_port,
                              ") was lost: it has not answered for ")),
            0u)
      << r.err;
  EXPECT_NE(r.err.find("): hung, killed, or cut off.\n  Start it again and run the command again"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("([cluster] heartbeat_timeout_ms = 1500)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("; step "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" cancelled"), std::string::npos) << r.err;
}

// `weft cluster status` against running tasks: every task with its
// address, the incarnation it printed at start, the last heartbeat its
// peers got, its RunGraph times; then, with the ps killed, the ps as not
// answering (its last heartbeat still known from the worker) and exit 1.
TEST_F(Cluster, ClusterStatusShowsEveryTaskAndWhichDoNotAnswer) {
  const int ps_port = FreePort(), worker_port = FreePort();
  const std::string config = WriteConfig("c.toml", ps_port, worker_port);
  testing::WriteFile(config, WithClusterKeys(config, "heartbeat_interval_ms = 100\nheartbeat_timeout_ms = 5000\n"));
  BackgroundProcess* ps = Serve(config, "ps", 0);
  BackgroundProcess* worker = Serve(config, "worker", 0);
  auto incarnation_of = [](const std::string& output) {
    const auto at = output.find("(incarnation ");
    if (at == std::string::npos) return std::string();
    return output.substr(at + 13, output.find(')', at) - at - 13);
  };
  const std::string ps_incarnation = incarnation_of(ps->Output());
  const std::string worker_incarnation = incarnation_of(worker->Output());
  ASSERT_FALSE(ps_incarnation.empty()) << ps->Output();
  ASSERT_NE(ps_incarnation, worker_incarnation);
  // A step across both, so that the ps has served RunGraphs.
  const std::string feed = WriteFeed("x", Tensor::FromVector<float>({1, 2, 3, -4, 5.5f, 0.25f}, Shape{2, 3}));
  ProcessResult ran =
      Weft({"run", FeedForwardGraph(), "--config", config, "--feed", feed, "--fetch", "y", "--out", dir_.File("out")});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  std::this_thread::sleep_for(500ms);  // a few heartbeats each way

  ProcessResult status = Weft({"cluster", "status", "--config", config});
  ASSERT_EQ(status.exit_code, 0) << status.err << status.out;
  EXPECT_NE(status.out.find("2 tasks, 2 answer"), std::string::npos) << status.out;
  for (const char* header :
       {"TASK", "ADDRESS", "INCARNATION", "UP", "LAST HEARTBEAT", "STEP", "STEP MS P50/P90/P99", "DROPPED", "STATE"}) {
    EXPECT_NE(status.out.find(header), std::string::npos) << header << "\n" << status.out;
  }
  EXPECT_NE(status.out.find(StrCat("tcp://127.0.0.1:", ps_port)), std::string::npos) << status.out;
  EXPECT_NE(status.out.find(ps_incarnation), std::string::npos) << status.out;
  EXPECT_NE(status.out.find(worker_incarnation), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("(RunGraph)"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("serving; weft serve"), std::string::npos) << status.out;

  ProcessResult json = Weft({"cluster", "status", "--config", config, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const Json tasks = Json::parse(json.out);
  ASSERT_EQ(tasks.size(), 2u) << json.out;
  for (const Json& t : tasks) {
    EXPECT_TRUE(t["answered"].get<bool>());
    const bool is_ps = t["task"] == "/job:ps/task:0";
    EXPECT_EQ(t["incarnation"], is_ps ? ps_incarnation : worker_incarnation);
    EXPECT_EQ(t["address"], StrCat("tcp://127.0.0.1:", is_ps ? ps_port : worker_port));
    // Each watches the other, and has heard from it lately.
    ASSERT_EQ(t["peers"].size(), 1u) << t.dump();
    EXPECT_EQ(t["peers"][0]["state"], "alive") << t.dump();
    EXPECT_EQ(t["peers"][0]["incarnation"], is_ps ? worker_incarnation : ps_incarnation);
    ASSERT_TRUE(t["last_heartbeat_ms"].is_number()) << t.dump();
    EXPECT_LT(t["last_heartbeat_ms"].get<int64_t>(), 3000);
    EXPECT_EQ(t["step"], -1);
  }
  const Json& ps_json = tasks[0]["task"] == "/job:ps/task:0" ? tasks[0] : tasks[1];
  EXPECT_EQ(ps_json["timed"], "RunGraph");
  EXPECT_GE(ps_json["steps_timed"].get<int64_t>(), 1);
  EXPECT_GT(ps_json["step_ms_p50"].get<double>(), 0.0);
  EXPECT_LE(ps_json["step_ms_p50"].get<double>(), ps_json["step_ms_p99"].get<double>());

  ps->Kill(SIGKILL);
  ps->Wait(10000);
  ProcessResult gone = Weft({"cluster", "status", "--config", config, "--timeout-ms", "1500"});
  EXPECT_EQ(gone.exit_code, 1) << gone.out << gone.err;
  EXPECT_NE(gone.out.find("2 tasks, 1 answers"), std::string::npos) << gone.out;
  EXPECT_NE(gone.out.find("not answering: cannot reach task /job:ps/task:0"), std::string::npos) << gone.out;
  EXPECT_NE(gone.err.find("1 of 2 tasks did not answer within 1500 ms"), std::string::npos) << gone.err;
  // The worker's heartbeats still say when the ps last answered.
  const std::string ps_row = gone.out.substr(gone.out.find("/job:ps/task:0"));
  EXPECT_NE(ps_row.substr(0, ps_row.find('\n')).find(" ago"), std::string::npos) << gone.out;
  ProcessResult bare = Weft({"cluster", "status"});
  EXPECT_EQ(bare.exit_code, 1);
  EXPECT_NE(bare.err.find("the config has no [cluster.jobs]: `weft cluster status` asks the tasks of a cluster"),
            std::string::npos)
      << bare.err;
}

// `weft cluster launch --only` that names no task of the cluster is
// refused, listing the tasks there are (the short form of a job, "ps",
// is accepted beside "/job:ps").
TEST_F(Cluster, LaunchOnlyANameTheClusterDoesNotHaveIsRefusedListingItsTasks) {
  const std::string config = WriteConfig("c.toml", FreePort(), FreePort());
  for (const std::string& only : {std::string("nosuch"), std::string("/job:ps/task:3")}) {
    ProcessResult r = Weft({"cluster", "launch", FeedForwardGraph(), "--config", config, "--only", only, "--logs",
                            (dir_ / "logs").string()});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("--only " + only + " names no task of the cluster ("), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/job:ps/task:0"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/job:worker/task:0"), std::string::npos) << r.err;
  }
}

// `weft run --trace` on a cluster: one Chrome trace with a process per
// task, a track per device and thread, and a flow for the tensor the ps
// sends to the worker.
TEST_F(Cluster, RunTraceOnAClusterMergesEveryTasksTrack) {
  const std::string config = WriteConfig("c.toml", FreePort(), FreePort());
  Serve(config, "ps", 0);
  Serve(config, "worker", 0);
  const std::string feed = WriteFeed("x", Tensor::FromVector<float>({1, 2, 3, -4, 5.5f, 0.25f}, Shape{2, 3}));
  const std::string trace_path = (dir_ / "trace.json").string();
  ProcessResult ran = Weft({"run", FeedForwardGraph(), "--config", config, "--feed", feed, "--fetch", "y", "--out",
                            dir_.File("out"), "--trace", trace_path});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_NE(ran.out.find("trace in " + trace_path), std::string::npos) << ran.out;
  const Json trace = Json::parse(Read(trace_path));
  EXPECT_GE(testing::CheckClusterTrace(trace, {"/job:ps/task:0", "/job:worker/task:0"}), 1) << trace.dump(1);
  // The MatMul ran on the ps, the Relu on the worker, each on its track.
  bool matmul_on_ps = false, relu_on_worker = false;
  for (const Json& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    matmul_on_ps |= e["name"] == "matmul" && e["args"]["device"] == "/job:ps/task:0/device:CPU:0";
    relu_on_worker |= e["name"] == "y" && e["args"]["device"] == "/job:worker/task:0/device:CPU:0";
  }
  EXPECT_TRUE(matmul_on_ps && relu_on_worker) << trace.dump(1);
  EXPECT_TRUE(trace["otherData"]["clock_offsets_us"].contains("/job:ps/task:0")) << trace.dump(1);
}

// [cluster] secret_file end to end: a task and a client that share it
// work; a client without it is refused; a secret others may read stops
// the task from starting, saying how to fix it.
TEST_F(Cluster, ASecretFileGuardsTheTasksPorts) {
  const std::string secret = (dir_ / "cluster.secret").string();
  std::ofstream(secret) << "0123456789abcdef0123456789abcdef\n";
  chmod(secret.c_str(), 0600);
  const int ps_port = FreePort();
  const std::string open_config = WriteConfig("open.toml", ps_port, 0, /*connect_ms=*/3000);
  const std::string config =
      dir_.Write("secured.toml", WithClusterKeys(open_config, "secret_file = \"cluster.secret\"\n"));
  BackgroundProcess* ps = Serve(config, "ps", 0);
  ProcessResult r = Weft({"devices", "--config", config});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("/job:ps/task:0/device:CPU:0"), std::string::npos) << r.out;
  r = Weft({"devices", "--config", open_config});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("[cluster] secret_file"), std::string::npos) << r.err;
  EXPECT_NE(ps->Output().find("refused a connection from tcp://127.0.0.1:"), std::string::npos) << ps->Output();
  r = Weft({"config", "check", config});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("connections: authenticated with the secret in " + secret), std::string::npos) << r.out;
  chmod(secret.c_str(), 0644);
  r = Weft({"config", "check", config});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("may be read or written by others (mode 0644)"), std::string::npos) << r.out;
  const std::string second = ServeThatFails(config);
  EXPECT_NE(second.find("may be read or written by others (mode 0644)"), std::string::npos) << second;
  EXPECT_NE(second.find("chmod 600 " + secret), std::string::npos) << second;
}

TEST_F(Cluster, GarbageOnATasksPortLeavesItServing) {
  const int ps_port = FreePort();
  const std::string config = WriteConfig("c.toml", ps_port, FreePort());
  BackgroundProcess* ps = Serve(config, "ps", 0);
  Serve(config, "worker", 0);
  // A well-framed tcp message whose header is garbage, then a truncated one.
  for (const std::string& bytes :
       {std::string("WFT1") + std::string("\x10\0\0\0\0\0\0\0\0\0\0\0", 12) + std::string(16, '\xab'),
        std::string("WFT1\xff\xff\x00\x00", 8)}) {
    const int fd = testing::RawConnect(ps_port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    std::this_thread::sleep_for(300ms);
    close(fd);
  }
  ProcessResult r = Weft({"devices", "--config", config});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ps->running());
  EXPECT_NE(ps->Output().find("malformed message"), std::string::npos) << ps->Output();
}

TEST_F(Cluster, ServeExplainsWhatItNeeds) {
  ProcessResult r = Weft({"serve"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("has no [cluster] section"), std::string::npos) << r.err;
  const std::string config = WriteConfig("c.toml", FreePort(), FreePort());
  r = Weft({"serve", "--config", config});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--job"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace weft
