// Loops and conds split across tasks (docs/distributed-internals.md, "How a
// graph is split across tasks"): two task services on loopback ports in this process, a
// client session placing one part of each graph on the other task. Each
// task runs its partition under its own executor; the partitioner's
// control loops keep their frames in step, and dead values cross as
// markers. Results are compared with the same graph in one process (bitwise:
// the same CPU kernels run) and with values worked out by hand.

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>
#include <set>

#include "core/distributed/dist_session.h"
#include "core/distributed/task_service.h"
#include "core/grad/gradients.h"
#include "core/graph/control_flow.h"
#include "core/graph/nn_builders.h"
#include "tests/support/runtime_env.h"
#include "tests/support/split_loop_graphs.h"
#include "tests/support/tensor_values.h"
#include "tests/support/two_tasks.h"

namespace weft::dist {
namespace {

using Outputs = std::vector<Output>;
using testing::CondAndNestedLoop;
using testing::Feeds;
using testing::Floats;
using testing::Recurrence;
using testing::RecurrenceFeeds;
using testing::Wavy;

constexpr const char* kPs = testing::kPsTask;
constexpr const char* kWorker = testing::kWorkerTask;

plugin::PluginHost& Plugins() { return testing::BuiltPlugins(); }

// Builds a graph whose marked parts go to |device| (empty: no pins), and
// returns the names to fetch.
using BuildFn = std::function<std::vector<std::string>(GraphBuilder& b, const std::string& device)>;

Graph Built(const BuildFn& build, const std::string& device, std::vector<std::string>* fetches) {
  GraphBuilder b;
  *fetches = build(b, device);
  EXPECT_TRUE(b.status().ok()) << b.status().ToString();
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(*g);
}

// Two tasks, /job:ps/task:0 and /job:worker/task:0, serving in this
// process; unpinned nodes go to the worker.
class SplitAcrossTasks : public testing::TwoTasksTest {
 protected:
  // Runs |graph| across the two tasks.
  std::vector<Tensor> RunSplit(Graph graph, const Feeds& feeds, const std::vector<std::string>& fetches) {
    auto session = DistSession::Create(std::move(graph), Options(), Plugins());
    EXPECT_TRUE(session.ok()) << session.status().ToString();
    if (!session.ok()) return {};
    std::vector<Tensor> out;
    Status s = (*session)->Run(feeds, fetches, {}, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    // Again, through the registered partitions (a second step id).
    std::vector<Tensor> again;
    s = (*session)->Run(feeds, fetches, {}, &again);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(again.size(), out.size());
    for (std::size_t i = 0; i < std::min(out.size(), again.size()); ++i) {
      EXPECT_TRUE(again[i].BitwiseEquals(out[i])) << "fetch " << i << " differs between two steps";
    }
    return out;
  }

  // Runs |graph| in one process, on one device.
  static std::vector<Tensor> RunLocal(Graph graph, const Feeds& feeds, const std::vector<std::string>& fetches) {
    // The outputs live in the devices' memory: the devices stay open.
    static testing::RuntimeEnv* env = new testing::RuntimeEnv("[plugins]\ndisable = [\"opencl\", \"cuda\", \"hip\"]\n");
    // At level 1, whose passes change no arithmetic: a cluster runs no
    // fusions yet (docs/optimizer.md), and the two must agree bit for bit.
    runtime::SessionOptions options;
    options.optimizer.level = 1;
    auto session = env->Session(std::move(graph), options);
    std::vector<Tensor> out;
    Status s = session->Run(feeds, fetches, {}, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  // Where the cluster places node |name| of |graph|.
  std::string DeviceOf(const Graph& graph, const std::string& name) {
    auto session = DistSession::Create(Graph(graph), Options(), Plugins());
    EXPECT_TRUE(session.ok()) << session.status().ToString();
    if (!session.ok()) return "";
    auto placed = (*session)->Place(graph);
    EXPECT_TRUE(placed.ok()) << placed.status().ToString();
    const Graph::Node* node = graph.Find(name);
    EXPECT_NE(node, nullptr) << name;
    if (!placed.ok() || node == nullptr) return "";
    return placed->devices[static_cast<std::size_t>(placed->placement.device[static_cast<std::size_t>(node->id)])].name;
  }

  // The split run of |split| equals the run of |local| in one process, bit
  // for bit.
  void ExpectSameAsOneProcess(Graph split, Graph local, const Feeds& feeds, const std::vector<std::string>& fetches) {
    std::vector<Tensor> remote = RunSplit(std::move(split), feeds, fetches);
    std::vector<Tensor> expected = RunLocal(std::move(local), feeds, fetches);
    ASSERT_EQ(remote.size(), fetches.size());
    ASSERT_EQ(expected.size(), fetches.size());
    for (std::size_t i = 0; i < fetches.size(); ++i) {
      EXPECT_TRUE(remote[i].BitwiseEquals(expected[i]))
          << fetches[i] << ": " << remote[i].DebugString() << " vs " << expected[i].DebugString();
    }
  }
};

TEST_F(SplitAcrossTasks, ALoopAndItsGradientMatchOneProcessBitForBit) {
  std::vector<std::string> fetches;
  auto build = [](GraphBuilder& b, const std::string& device) { return Recurrence(b, device, true); };
  Graph g = Built(build, kPs, &fetches);
  // The body's product is on the parameter server, the loop's condition
  // on the worker: the loop is split.
  EXPECT_EQ(DeviceOf(g, "while/product"), std::string(kPs) + "/device:CPU:0");
  EXPECT_EQ(DeviceOf(g, "while/LoopCond"), std::string(kWorker) + "/device:CPU:0");
  const Feeds& feeds = RecurrenceFeeds();
  std::vector<std::string> local_fetches;
  Graph local = Built(build, "", &local_fetches);
  ASSERT_EQ(fetches.size(), 5u);  // h, the loss, and its gradients for w, h0, xs
  ASSERT_EQ(fetches, local_fetches);
  ExpectSameAsOneProcess(std::move(g), std::move(local), feeds, fetches);
}

// One iteration at a time: each task holds back its next iteration until
// its current one is done, and neither waits for the other in a cycle.
TEST_F(SplitAcrossTasks, ALoopRunningOneIterationAtATime) {
  auto build = [](GraphBuilder& b, const std::string& device) { return Recurrence(b, device, true, 1); };
  std::vector<std::string> fetches, local_fetches;
  Graph g = Built(build, kPs, &fetches);
  Graph local = Built(build, "", &local_fetches);
  ASSERT_EQ(fetches, local_fetches);
  const Feeds feeds = {{"xs", Wavy(Shape{12, 3, 4}, 0.7f, 0.9f)},
                       {"w", Wavy(Shape{4, 4}, 0.5f, 0.3f)},
                       {"h0", Wavy(Shape{3, 4}, 0.2f, 1.7f)}};
  ExpectSameAsOneProcess(std::move(g), std::move(local), feeds, fetches);
}

// pred ? x : (while i < n: x = x * 1.5 (on |device|)): a split loop in a
// branch that may not be taken. When it is not, every partition's part of
// the loop is dead: the tasks' control loops receive a dead condition and
// stop at once.
std::vector<std::string> LoopInABranch(GraphBuilder& b, const std::string& device) {
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  Output pred = b.Placeholder(DType::kBool, Shape{}, "pred");
  auto c = Cond(
      b, pred, [&]() -> Expected<Outputs> { return Outputs{b.Op("Identity", {x})}; },
      [&]() -> Expected<Outputs> {
        WEFT_ASSIGN_OR_RETURN(Outputs r, WhileLoop(
                                             b,
                                             [&](const Outputs& v) -> Expected<Output> {
                                               return b.Op("Less", {v[0], b.Scalar<int32_t>(3)});
                                             },
                                             [&](const Outputs& v) -> Expected<Outputs> {
                                               std::optional<GraphBuilder::Scope> pin;
                                               if (!device.empty()) pin.emplace(b.DeviceScope(device));
                                               return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}),
                                                              b.Op("Mul", {v[1], b.Scalar<float>(1.5f)}, {}, "grow")};
                                             },
                                             {b.Scalar<int32_t>(0), x}));
        return Outputs{r[1]};
      });
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return {};
  return {(*c)[0].name()};
}

TEST_F(SplitAcrossTasks, ASplitLoopInABranchTakenOrNot) {
  std::vector<std::string> fetches;
  Graph g = Built(LoopInABranch, kPs, &fetches);
  EXPECT_EQ(DeviceOf(g, "cond/while/grow"), std::string(kPs) + "/device:CPU:0");
  EXPECT_EQ(DeviceOf(g, "cond/while/LoopCond"), std::string(kWorker) + "/device:CPU:0");
  for (bool pred : {true, false}) {
    SCOPED_TRACE(pred ? "true: the loop is not run" : "false: the loop runs");
    std::vector<std::string> names;
    std::vector<Tensor> out =
        RunSplit(Built(LoopInABranch, kPs, &names),
                 {{"x", Tensor::FromVector<float>({2, -4})}, {"pred", Tensor::Scalar<bool>(pred)}}, names);
    ASSERT_EQ(out.size(), 1u);
    // By hand: 1.5^3 = 3.375.
    EXPECT_EQ(Floats(out[0]), pred ? std::vector<float>({2, -4}) : std::vector<float>({6.75f, -13.5f}));
  }
}

// pred ? x * 2 (on |device|) : x - 1, at the root: the branch not taken
// sends its dead value across.
std::vector<std::string> RootCond(GraphBuilder& b, const std::string& device) {
  Output x = b.Placeholder(DType::kF32, Shape{2}, "x");
  Output pred = b.Placeholder(DType::kBool, Shape{}, "pred");
  auto c = Cond(
      b, pred,
      [&]() -> Expected<Outputs> {
        std::optional<GraphBuilder::Scope> pin;
        if (!device.empty()) pin.emplace(b.DeviceScope(device));
        return Outputs{b.Op("Mul", {x, b.Scalar<float>(2)}, {}, "twice")};
      },
      [&]() -> Expected<Outputs> {
        return Outputs{b.Op("Sub", {x, b.Scalar<float>(1)})};
      });
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return {};
  return {(*c)[0].name()};
}

TEST_F(SplitAcrossTasks, ACondWithABranchOnTheOtherTask) {
  std::vector<std::string> fetches;
  Graph g = Built(RootCond, kPs, &fetches);
  EXPECT_EQ(DeviceOf(g, "cond/twice"), std::string(kPs) + "/device:CPU:0");
  for (bool pred : {true, false}) {
    SCOPED_TRACE(pred ? "true" : "false");
    std::vector<std::string> names;
    std::vector<Tensor> out =
        RunSplit(Built(RootCond, kPs, &names),
                 {{"x", Tensor::FromVector<float>({1.5f, -4})}, {"pred", Tensor::Scalar<bool>(pred)}}, names);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(Floats(out[0]), pred ? std::vector<float>({3, -8}) : std::vector<float>({0.5f, -5}));
  }
}

TEST_F(SplitAcrossTasks, ACondAndANestedLoopInsideASplitLoop) {
  std::vector<std::string> fetches;
  Graph g = Built(CondAndNestedLoop, kPs, &fetches);
  std::vector<Tensor> out = RunSplit(std::move(g), {{"x", Tensor::FromVector<float>({1.5f, -4})}}, fetches);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(Floats(out[0]), testing::CondAndNestedLoopByHand({1.5f, -4}));
}

// for i < 3: s = s * 10 + (sum over j < 4 of (j + i)): the whole inner loop
// (its condition too) on |device|, the outer loop on the worker. The task
// with the inner loop follows the outer loop with a control loop of its
// own; the inner loop's transfers are keyed by the outer iteration.
std::vector<std::string> NestedLoops(GraphBuilder& b, const std::string& device) {
  Output s0 = b.Placeholder(DType::kI64, Shape{}, "s0");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int64_t>(3)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        std::optional<GraphBuilder::Scope> pin;
        if (!device.empty()) pin.emplace(b.DeviceScope(device));
        WhileOptions inner;
        inner.name = "inner";
        inner.parallel_iterations = 2;
        WEFT_ASSIGN_OR_RETURN(Outputs in, WhileLoop(
                                              b,
                                              [&](const Outputs& u) -> Expected<Output> {
                                                return b.Op("Less", {u[0], b.Scalar<int64_t>(4)});
                                              },
                                              [&](const Outputs& u) -> Expected<Outputs> {
                                                return Outputs{
                                                    b.Op("Add", {u[0], b.Scalar<int64_t>(1)}),
                                                    b.Op("Add", {u[1], b.Op("Add", {u[0], v[0]})}, {}, "add_ji")};
                                              },
                                              {b.Scalar<int64_t>(0), b.Scalar<int64_t>(0)}, inner));
        pin.reset();
        return Outputs{b.Op("Add", {v[0], b.Scalar<int64_t>(1)}),
                       b.Op("Add", {b.Op("Mul", {v[1], b.Scalar<int64_t>(10)}), in[1]}, {}, "shift")};
      },
      {b.Scalar<int64_t>(0), s0});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  return {(*r)[1].name()};
}

TEST_F(SplitAcrossTasks, AnInnerLoopOnTheOtherTask) {
  std::vector<std::string> fetches;
  Graph g = Built(NestedLoops, kPs, &fetches);
  EXPECT_EQ(DeviceOf(g, "while/inner/LoopCond"), std::string(kPs) + "/device:CPU:0");
  EXPECT_EQ(DeviceOf(g, "while/LoopCond"), std::string(kWorker) + "/device:CPU:0");
  std::vector<Tensor> out = RunSplit(std::move(g), {{"s0", Tensor::Scalar<int64_t>(7)}}, fetches);
  ASSERT_EQ(out.size(), 1u);
  // By hand: the inner sums are 6 + 4i: 6, 10, 14; s = ((7 * 10 + 6) * 10 + 10) * 10 + 14.
  EXPECT_EQ(*out[0].data<int64_t>(), 7714);
}

// The LSTM over sequences of different lengths (DynamicLstm, fused cell),
// the loss sum(h * h) + sum(c), and its gradients.
std::vector<std::string> Lstm(GraphBuilder& b, const std::string&) {
  Output inputs = b.Placeholder(DType::kF32, Shape{5, 3, 2}, "inputs");
  Output seq = b.Placeholder(DType::kI64, Shape{3}, "sequence_length");
  Output w = b.Placeholder(DType::kF32, Shape{6, 16}, "w");
  Output bias = b.Placeholder(DType::kF32, Shape{16}, "bias");
  Output h0 = b.Placeholder(DType::kF32, Shape{3, 4}, "h0");
  Output c0 = b.Const(Tensor::FromVector<float>(std::vector<float>(12, 0.25f), Shape{3, 4}), "c0");
  DynamicLstmOptions options;
  options.parallel_iterations = 3;
  auto r = DynamicLstm(b, inputs, seq, w, bias, c0, h0, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return {};
  Output loss = b.Op("AddN", {b.Op("Sum", {b.Op("Mul", {r->h, r->h})}), b.Op("Sum", {r->c})}, {}, "loss");
  auto g = grad::AddGradients(b, {loss}, {inputs, w, bias, h0});
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return {};
  std::vector<std::string> fetches = {r->h.name(), r->c.name(), "loss"};
  for (const Output& o : *g) fetches.push_back(o.name());
  return fetches;
}

// |graph| with every node of op |ops| on |device|.
Graph Pinned(const Graph& graph, const std::set<std::string>& ops, const std::string& device, int* pinned) {
  GraphDef def = graph.ToGraphDef();
  *pinned = 0;
  for (NodeDef& n : def.nodes) {
    if (ops.count(n.op) > 0) {
      n.device = device;
      ++*pinned;
    }
  }
  auto g = Graph::FromGraphDef(std::move(def));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(*g);
}

TEST_F(SplitAcrossTasks, TheLstmWithItsCellOnTheOtherTaskMatchesOneProcess) {
  std::vector<std::string> fetches;
  Graph local = Built(Lstm, "", &fetches);
  ASSERT_EQ(fetches.size(), 7u);  // h, c, the loss, and its gradients for inputs, w, bias, h0
  // The cell in the forward loop, and in the backward loop the cell the
  // gradient recomputes and its gradient.
  int pinned = 0;
  Graph split = Pinned(local, {"LSTMCell", "LSTMCellGrad"}, kPs, &pinned);
  EXPECT_EQ(pinned, 3);
  EXPECT_EQ(DeviceOf(split, "gradients/rnn/backward/grad/gradients/rnn/backward/recompute/rnn/cell/LSTMCellGrad"),
            std::string(kPs) + "/device:CPU:0");
  EXPECT_EQ(DeviceOf(split, "rnn/cell"), std::string(kPs) + "/device:CPU:0");
  EXPECT_EQ(DeviceOf(split, "rnn/LoopCond"), std::string(kWorker) + "/device:CPU:0");
  const Feeds feeds = {{"inputs", Wavy(Shape{5, 3, 2}, 1.0f, 0.1f)},
                       {"sequence_length", Tensor::FromVector<int64_t>({5, 2, 4}, Shape{3})},
                       {"w", Wavy(Shape{6, 16}, 0.5f, 0.7f)},
                       {"bias", Wavy(Shape{16}, 0.2f, 1.3f)},
                       {"h0", Wavy(Shape{3, 4}, 0.3f, 2.1f)}};
  ExpectSameAsOneProcess(std::move(split), std::move(local), feeds, fetches);
}

}  // namespace
}  // namespace weft::dist
