// Variable placement on parameter servers (core/placement/variable_placement.h):
// the two strategies on a hand-made graph, with the expected assignments
// worked out by hand from the sizes, and the errors.
#include "core/placement/variable_placement.h"

#include <gtest/gtest.h>

#include "core/graph/builder.h"

namespace weft::dist {
namespace {

Output Var(GraphBuilder& b, const Shape& shape, std::string_view name) {
  return b.Op("VarHandle", {}, {{"dtype", AttrValue(DType::kF32)}, {"shape", AttrValue(shape)}}, name);
}

// Four variables of 4000, 3000, 2000 and 400 bytes; "c" is read twice,
// "d" once, and a read under checkpoint/ is not counted.
Graph Model() {
  GraphBuilder b;
  Output a = Var(b, Shape{1000}, "a");
  Output bb = Var(b, Shape{750}, "b");
  Output c = Var(b, Shape{500}, "c");
  Output d = Var(b, Shape{100}, "d");
  Var(b, Shape{250}, "a/slot");
  b.Op("ReadVariable", {c}, {{"dtype", AttrValue(DType::kF32)}}, "read_c1");
  b.Op("ReadVariable", {c}, {{"dtype", AttrValue(DType::kF32)}}, "read_c2");
  b.Op("ReadVariable", {d}, {{"dtype", AttrValue(DType::kF32)}}, "read_d");
  b.Op("ReadVariable", {a}, {{"dtype", AttrValue(DType::kF32)}}, "checkpoint/a/read");
  (void)bb;
  auto g = b.Build();
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return std::move(*g);
}

std::vector<VariableGroup> Groups() { return {{"d", {"d"}}, {"c", {"c"}}, {"b", {"b"}}, {"a", {"a", "a/slot"}}}; }

std::map<std::string, int> TaskOf(const std::vector<VariableAssignment>& assigned) {
  std::map<std::string, int> out;
  for (const auto& a : assigned) out[a.group.variable] = a.task;
  return out;
}

TEST(VariablePlacement, GreedyBytesPutsTheLargestFirstOnTheEmptiestTask) {
  auto assigned = AssignVariables(Model(), Groups(), 2, "greedy_bytes");
  ASSERT_TRUE(assigned.ok()) << assigned.status().ToString();
  // a (4000 + 1000 of its slot) -> 0; b (3000) -> 1; c (2000) -> 1 (3000 <
  // 5000); d (400) -> 0 (5000 vs 5000: the fewest readers, task 0 has none
  // counted, task 1 has c's two).
  EXPECT_EQ(TaskOf(*assigned), (std::map<std::string, int>{{"a", 0}, {"b", 1}, {"c", 1}, {"d", 0}}));
  for (const auto& a : *assigned) {
    if (a.group.variable == "a") {
      EXPECT_EQ(a.bytes, 5000);
      EXPECT_EQ(a.readers, 0);  // the checkpoint read does not count
      EXPECT_EQ(a.reason,
                "cluster.variable_placement = \"greedy_bytes\": 4.9 "
                "KiB with its 1 slot, read by 0 ops, to "
                "ps task 0 of 2, which held the fewest (0 B)");
    }
    if (a.group.variable == "c") {
      EXPECT_EQ(a.readers, 2);
    }
  }
  auto pins = VariablePins(*assigned, "ps");
  ASSERT_EQ(pins.size(), 5u);
  for (const auto& pin : pins) {
    if (pin.pattern == "a/slot") {
      EXPECT_EQ(pin.device, "/job:ps/task:0");
      EXPECT_EQ(pin.source.rfind("a slot of \"a\": ", 0), 0u) << pin.source;
    }
  }
}

TEST(VariablePlacement, RoundRobinGoesInNameOrder) {
  auto assigned = AssignVariables(Model(), Groups(), 3, "round_robin");
  ASSERT_TRUE(assigned.ok()) << assigned.status().ToString();
  EXPECT_EQ(TaskOf(*assigned), (std::map<std::string, int>{{"a", 0}, {"b", 1}, {"c", 2}, {"d", 0}}));
  for (const auto& a : *assigned) {
    if (a.group.variable == "d") {
      EXPECT_EQ(a.reason,
                "cluster.variable_placement = \"round_robin\": "
                "variable 4 of 4 in name order (400 B) to ps "
                "task 0 of 3");
    }
  }
}

TEST(VariablePlacement, ErrorsNameWhatIsWrong) {
  const Graph g = Model();
  EXPECT_EQ(AssignVariables(g, Groups(), 2, "by_size").status().message(),
            "cluster.variable_placement: unknown strategy \"by_size\" "
            "(expected \"greedy_bytes\" or \"round_robin\")");
  EXPECT_EQ(AssignVariables(g, Groups(), 0, "round_robin").status().message(),
            "variable placement needs at least one ps task");
  EXPECT_EQ(AssignVariables(g, {{"x", {"read_d"}}}, 1, "round_robin").status().message(),
            "variable placement: \"read_d\" is not a VarHandle of the graph");
}

}  // namespace
}  // namespace weft::dist
