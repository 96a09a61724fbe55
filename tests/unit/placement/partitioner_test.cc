// The partitioner's control loops (docs/distributed-internals.md, "How a
// graph is split across tasks"): a loop split across devices gets, on every device holding
// part of it, a control loop driven by the loop's condition, and every
// transfer inside the loop is tied to it. Checked on the partitioned
// graphs; running them is loop_devices_test's and dist_loop_test's job.
#include "core/placement/partitioner.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/graph/control_flow.h"
#include "tests/support/node_def.h"

namespace weft::placement {
namespace {

using Outputs = std::vector<Output>;
using testing::MakeNodeDef;

const std::vector<PartitionDevice> kDevices = {{"/device:CPU:0", 1}, {"/device:CPU:1", 2}};

const NodeDef* Find(const GraphDef& def, const std::string& name) {
  for (const NodeDef& n : def.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// while i < 5: i += 1; x = x * 3 (the Mul on device 1, the rest on 0).
Graph SplitLoop(std::vector<int>* device_of) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  auto r = WhileLoop(
      b,
      [&](const Outputs& v) -> Expected<Output> {
        return b.Op("Less", {v[0], b.Scalar<int32_t>(5)});
      },
      [&](const Outputs& v) -> Expected<Outputs> {
        return Outputs{b.Op("Add", {v[0], b.Scalar<int32_t>(1)}),
                       b.Op("Mul", {v[1], b.Scalar<float>(3)}, {}, "triple")};
      },
      {b.Scalar<int32_t>(0), x});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  device_of->assign(static_cast<std::size_t>(g->num_nodes()), 0);
  const Graph::Node* triple = g->Find("while/triple");
  EXPECT_NE(triple, nullptr);
  if (triple != nullptr) (*device_of)[static_cast<std::size_t>(triple->id)] = 1;
  return std::move(*g);
}

TEST(Partitioner, ASplitLoopGetsAControlLoopOnTheOtherDevice) {
  std::vector<int> device_of;
  Graph g = SplitLoop(&device_of);
  auto parts = Partition(g, device_of, kDevices);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->graphs.size(), 2u);
  const GraphDef& other = parts->graphs.at(1);
  const std::string base = "while/_control_loop_CPU_1/";
  const NodeDef* enter = Find(other, base + "enter");
  const NodeDef* merge = Find(other, base + "merge");
  const NodeDef* sw = Find(other, base + "switch");
  const NodeDef* next = Find(other, base + "next_iteration");
  const NodeDef* exit = Find(other, base + "exit");
  ASSERT_TRUE(enter && merge && sw && next && exit);
  EXPECT_EQ(enter->op, "Enter");
  EXPECT_EQ(enter->attrs.at("frame_name").get<std::string>(), "while");
  EXPECT_FALSE(enter->attrs.at("is_constant").get<bool>());
  EXPECT_EQ(enter->attrs.at("parallel_iterations").get<int64_t>(), 10);
  EXPECT_EQ(enter->inputs, std::vector<std::string>{base + "start"});
  EXPECT_EQ(merge->inputs, (std::vector<std::string>{base + "enter", base + "next_iteration"}));
  EXPECT_EQ(next->inputs, std::vector<std::string>{base + "pivot"});
  EXPECT_EQ(exit->inputs, std::vector<std::string>{base + "switch"});
  // The predicate: the loop's LoopCond, received once per iteration.
  ASSERT_EQ(sw->inputs.size(), 2u);
  const NodeDef* pred = Find(other, sw->inputs[1]);
  ASSERT_NE(pred, nullptr);
  EXPECT_EQ(pred->op, "_Recv");
  EXPECT_EQ(pred->attrs.at("tensor_name").get<std::string>(), "while/LoopCond");
  // Every _Recv there runs in the loop, once per iteration, and may be dead.
  int recvs = 0;
  for (const NodeDef& n : other.nodes) {
    if (n.op != "_Recv") continue;
    ++recvs;
    EXPECT_TRUE(Has(n.inputs, "^" + base + "merge")) << n.name;
    EXPECT_TRUE(n.attrs.at("may_be_dead").get<bool>()) << n.name;
  }
  EXPECT_EQ(recvs, 3);  // x in the loop, the constant 3, the predicate
  // The device with the LoopCond receives the product inside the loop: its
  // control loop reads the LoopCond itself.
  const NodeDef* local = Find(parts->graphs.at(0), "while/_control_loop_CPU_0/switch");
  ASSERT_NE(local, nullptr);
  EXPECT_EQ(local->inputs, (std::vector<std::string>{"while/_control_loop_CPU_0/merge", "while/LoopCond"}));
  const NodeDef* product = Find(parts->graphs.at(0), "while/triple/_recv_0_from_CPU_1");
  ASSERT_NE(product, nullptr);
  EXPECT_TRUE(Has(product->inputs, "^while/_control_loop_CPU_0/merge"));
}

TEST(Partitioner, AGraphWithoutControlFlowGetsNoControlLoops) {
  GraphBuilder b;
  Output x = b.Placeholder(DType::kF32, Shape{}, "x");
  b.Op("Neg", {x}, {}, "neg");
  auto g = b.Build();
  ASSERT_TRUE(g.ok());
  std::vector<int> device_of(static_cast<std::size_t>(g->num_nodes()), 0);
  device_of[static_cast<std::size_t>(g->Find("neg")->id)] = 1;
  auto parts = Partition(*g, device_of, kDevices);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ASSERT_EQ(parts->graphs.at(1).nodes.size(), 2u);
  const NodeDef* recv = Find(parts->graphs.at(1), "x/_recv_0_from_CPU_0");
  ASSERT_NE(recv, nullptr);
  EXPECT_EQ(recv->attrs.count("may_be_dead"), 0u);
  EXPECT_TRUE(recv->inputs.empty());
}

// A frame "f" entered by a bool, with |loop_conds| LoopConds, and a Neg in
// it on device 1.
Graph FrameWithLoopConds(int loop_conds) {
  GraphDef def;
  def.nodes.push_back(MakeNodeDef(
      "b", "Const", {}, {{"dtype", AttrValue(DType::kBool)}, {"value", AttrValue(Tensor::Scalar<bool>(true))}}));
  def.nodes.push_back(MakeNodeDef("x", "Const", {},
                                  {{"dtype", AttrValue(DType::kF32)}, {"value", AttrValue(Tensor::Scalar<float>(1))}}));
  def.nodes.push_back(MakeNodeDef("enter_b", "Enter", {"b"},
                                  {{"T", AttrValue(DType::kBool)}, {"frame_name", AttrValue(std::string("f"))}}));
  def.nodes.push_back(MakeNodeDef("enter_x", "Enter", {"x"},
                                  {{"T", AttrValue(DType::kF32)}, {"frame_name", AttrValue(std::string("f"))}}));
  for (int k = 0; k < loop_conds; ++k) def.nodes.push_back(MakeNodeDef(StrCat("cond", k), "LoopCond", {"enter_b"}, {}));
  def.nodes.push_back(MakeNodeDef("neg", "Neg", {"enter_x"}, {{"T", AttrValue(DType::kF32)}}));
  def.nodes.push_back(MakeNodeDef("exit", "Exit", {"neg"}, {{"T", AttrValue(DType::kF32)}}));
  auto g = Graph::FromGraphDef(std::move(def));
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(*g);
}

TEST(Partitioner, ASplitFrameWithoutALoopCondIsRefused) {
  Graph g = FrameWithLoopConds(0);
  std::vector<int> device_of(static_cast<std::size_t>(g.num_nodes()), 0);
  device_of[static_cast<std::size_t>(g.Find("neg")->id)] = 1;
  auto parts = Partition(g, device_of, kDevices);
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parts.status().message(),
            "loop frame \"f\" is split across devices (/device:CPU:0, /device:CPU:1) but has no LoopCond to keep its "
            "parts in step; build loops with WhileLoop, or pin the whole loop to one device");
}

TEST(Partitioner, ASplitFrameWithTwoLoopCondsIsRefused) {
  Graph g = FrameWithLoopConds(2);
  std::vector<int> device_of(static_cast<std::size_t>(g.num_nodes()), 0);
  device_of[static_cast<std::size_t>(g.Find("neg")->id)] = 1;
  auto parts = Partition(g, device_of, kDevices);
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().message(),
            "loop frame \"f\" is split across devices (/device:CPU:0, /device:CPU:1) and has two LoopCond nodes, "
            "\"cond0\" and \"cond1\"; give each loop a frame name of its own");
}

TEST(Partitioner, AFrameOnOneDeviceNeedsNoLoopCond) {
  Graph g = FrameWithLoopConds(0);
  std::vector<int> device_of(static_cast<std::size_t>(g.num_nodes()), 1);
  device_of[static_cast<std::size_t>(g.Find("x")->id)] = 0;
  device_of[static_cast<std::size_t>(g.Find("b")->id)] = 0;
  auto parts = Partition(g, device_of, kDevices);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  for (const auto& [d, def] : parts->graphs) {
    for (const NodeDef& n : def.nodes) EXPECT_EQ(n.name.find("_control_loop"), std::string::npos) << n.name;
  }
}

// Late variable reads (PartitionOptions::late_variable_reads): three layers
// on a worker, their weights read on a ps task. By the longest path in ops:
// the VarHandles and x start at 0, the reads at 1, h1 at 2, a1 at 3, h2 at
// 4, a2 at 5, h3 at 6. With a slack of 2, r2 (first used at 4) waits for a
// worker node at 2 (h1), r3 (used at 6) for one at 4 (h2), and r1, used at
// 2, is pulled as the step starts.
const std::vector<PartitionDevice> kTasks = {{"/job:ps/task:0/device:CPU:0", 1},
                                             {"/job:worker/task:0/device:CPU:0", 2}};

Graph ThreeLayers(std::vector<int>* device_of) {
  GraphBuilder b;
  std::vector<Output> reads;
  for (int k = 1; k <= 3; ++k) {
    Output v =
        b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{4, 4})}}, StrCat("w", k));
    reads.push_back(b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, StrCat("r", k)));
  }
  Output a = b.Placeholder(DType::kF32, Shape{4, 4}, "x");
  for (int k = 1; k <= 3; ++k) {
    Output h = b.Op("MatMul", {a, reads[static_cast<std::size_t>(k - 1)]}, {}, StrCat("h", k));
    a = k < 3 ? b.Op("Relu", {h}, {}, StrCat("a", k)) : h;
  }
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  device_of->assign(static_cast<std::size_t>(g->num_nodes()), 1);
  for (const Graph::Node& n : g->nodes()) {
    if (n.op_name() == "VarHandle" || n.op_name() == "ReadVariable") (*device_of)[static_cast<std::size_t>(n.id)] = 0;
  }
  return std::move(*g);
}

TEST(Partitioner, LateReadsWaitForANodeTwoOpsBeforeTheirFirstUse) {
  std::vector<int> device_of;
  Graph g = ThreeLayers(&device_of);
  PartitionOptions late;
  late.late_variable_reads = true;
  auto parts = Partition(g, device_of, kTasks, late);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  const GraphDef& worker = parts->graphs.at(1);
  const NodeDef* r1 = Find(worker, "r1/_recv_0_from_CPU_0");
  const NodeDef* r2 = Find(worker, "r2/_recv_0_from_CPU_0");
  const NodeDef* r3 = Find(worker, "r3/_recv_0_from_CPU_0");
  ASSERT_TRUE(r1 && r2 && r3);
  EXPECT_TRUE(r1->inputs.empty());
  EXPECT_EQ(r2->inputs, std::vector<std::string>{"^h1"});
  EXPECT_EQ(r3->inputs, std::vector<std::string>{"^h2"});

  // Off (the default), every read is pulled as the step starts.
  auto early = Partition(g, device_of, kTasks);
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  for (const NodeDef& n : early->graphs.at(1).nodes) {
    if (n.op == "_Recv") {
      EXPECT_TRUE(n.inputs.empty()) << n.name;
    }
  }
  // A larger slack holds r3 back only until a1 (3), and r2 not at all.
  late.late_read_slack = 3;
  auto slack = Partition(g, device_of, kTasks, late);
  ASSERT_TRUE(slack.ok()) << slack.status().ToString();
  EXPECT_TRUE(Find(slack->graphs.at(1), "r2/_recv_0_from_CPU_0")->inputs.empty());
  EXPECT_EQ(Find(slack->graphs.at(1), "r3/_recv_0_from_CPU_0")->inputs, std::vector<std::string>{"^a1"});
}

TEST(Partitioner, LateReadsStayEarlyWithinATask) {
  std::vector<int> device_of;
  Graph g = ThreeLayers(&device_of);
  PartitionOptions late;
  late.late_variable_reads = true;
  const std::vector<PartitionDevice> one_task = {{"/job:worker/task:0/device:CPU:0", 1},
                                                 {"/job:worker/task:0/device:CPU:1", 2}};
  auto parts = Partition(g, device_of, one_task, late);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  for (const NodeDef& n : parts->graphs.at(1).nodes) {
    if (n.op == "_Recv") {
      EXPECT_TRUE(n.inputs.empty()) << n.name;
    }
  }
}

// A node a Switch may leave dead never holds a read back: here every worker
// node that starts early enough for r's first use (the MatMul, at 5) is
// downstream of the Switch, so r is pulled as the step starts.
TEST(Partitioner, LateReadsNeverWaitForANodeThatMayBeDead) {
  GraphBuilder b;
  Output v = b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(Shape{4, 4})}}, "w");
  Output r = b.Op("ReadVariable", {v}, {{"dtype", AttrValue(DType::kF32)}}, "r");
  Output x = b.Placeholder(DType::kF32, Shape{4, 4}, "x");
  Output p = b.Placeholder(DType::kBool, Shape{}, "p");
  std::vector<Output> sw = b.AddNode("Switch", {x, p}, {}, "switch");
  Output neg = b.Op("Neg", {b.Op("Identity", {sw[1]}, {}, "taken")}, {}, "neg");
  Output merged = b.AddNode("Merge", {sw[0], neg}, {}, "merge")[0];
  b.Op("MatMul", {merged, r}, {}, "h");
  auto g = b.Build();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::vector<int> device_of(static_cast<std::size_t>(g->num_nodes()), 1);
  device_of[static_cast<std::size_t>(g->Find("w")->id)] = 0;
  device_of[static_cast<std::size_t>(g->Find("r")->id)] = 0;
  PartitionOptions late;
  late.late_variable_reads = true;
  auto parts = Partition(*g, device_of, kTasks, late);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  const NodeDef* recv = Find(parts->graphs.at(1), "r/_recv_0_from_CPU_0");
  ASSERT_NE(recv, nullptr);
  EXPECT_TRUE(recv->inputs.empty());
}

}  // namespace
}  // namespace weft::placement
