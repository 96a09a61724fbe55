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

}  // namespace
}  // namespace weft::placement
