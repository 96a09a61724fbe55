// Slurm's hostlist and tasks-per-node syntax. Expected values are the
// examples of Slurm's documentation (slurm.conf(5) for node ranges,
// srun(1) for SLURM_TASKS_PER_NODE), expanded by hand.
#include "core/distributed/hostlist.h"

#include <gtest/gtest.h>

namespace weft::dist {
namespace {

using Hosts = std::vector<std::string>;

Hosts Expand(std::string_view list) {
  auto hosts = ExpandHostlist(list);
  EXPECT_TRUE(hosts.ok()) << list << ": " << hosts.status().ToString();
  return hosts.ok() ? *hosts : Hosts{};
}

std::string ErrorOf(std::string_view list) {
  auto hosts = ExpandHostlist(list);
  EXPECT_FALSE(hosts.ok()) << list;
  return hosts.ok() ? "" : hosts.status().message();
}

TEST(Hostlist, PlainNames) {
  EXPECT_EQ(Expand("a"), Hosts{"a"});
  EXPECT_EQ(Expand("a,b"), (Hosts{"a", "b"}));
  EXPECT_EQ(Expand("b,a,b"), (Hosts{"b", "a", "b"}));
}

TEST(Hostlist, SlurmConfExamples) {
  // slurm.conf(5), NodeName: "linux[0-64,128]", or "lx[15,18,32-33]".
  EXPECT_EQ(Expand("lx[15,18,32-33]"), (Hosts{"lx15", "lx18", "lx32", "lx33"}));
  Hosts linux_hosts = Expand("linux[0-64,128]");
  ASSERT_EQ(linux_hosts.size(), 66u);
  EXPECT_EQ(linux_hosts[0], "linux0");
  EXPECT_EQ(linux_hosts[9], "linux9");
  EXPECT_EQ(linux_hosts[10], "linux10");
  EXPECT_EQ(linux_hosts[64], "linux64");
  EXPECT_EQ(linux_hosts[65], "linux128");
  // "Multiple numeric ranges can be included in the expression (e.g.
  // "rack[0-63]_blade[0-41]")": 64 x 42 hosts, the last range fastest.
  Hosts blades = Expand("rack[0-63]_blade[0-41]");
  ASSERT_EQ(blades.size(), 64u * 42u);
  EXPECT_EQ(blades[0], "rack0_blade0");
  EXPECT_EQ(blades[1], "rack0_blade1");
  EXPECT_EQ(blades[41], "rack0_blade41");
  EXPECT_EQ(blades[42], "rack1_blade0");
  EXPECT_EQ(blades.back(), "rack63_blade41");
}

TEST(Hostlist, ZeroPaddingIsKept) {
  EXPECT_EQ(Expand("node[01-04,07]"), (Hosts{"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(Expand("n[8-10]"), (Hosts{"n8", "n9", "n10"}));
  EXPECT_EQ(Expand("n[08-10]"), (Hosts{"n08", "n09", "n10"}));
  EXPECT_EQ(Expand("n[001-002]"), (Hosts{"n001", "n002"}));
}

TEST(Hostlist, SeveralBracketsAndEntries) {
  EXPECT_EQ(Expand("rack[1-2]-n[01-02]"), (Hosts{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"}));
  EXPECT_EQ(Expand("a,node[1-2],b"), (Hosts{"a", "node1", "node2", "b"}));
  EXPECT_EQ(Expand("gpu[1-2].example,cpu[3]"), (Hosts{"gpu1.example", "gpu2.example", "cpu3"}));
  EXPECT_EQ(Expand("[1-2]x"), (Hosts{"1x", "2x"}));
}

TEST(Hostlist, MalformedListsNameTheOffendingPart) {
  EXPECT_EQ(ErrorOf(""), "the list is empty");
  EXPECT_EQ(ErrorOf("node[01-04"), "entry \"node[01-04\" has a '[' without ']'");
  EXPECT_EQ(ErrorOf("a,node[1,2"), "entry \"node[1,2\" has a '[' without ']'");
  EXPECT_EQ(ErrorOf("node01-04]"), "entry \"node01-04]\" has a ']' without '['");
  EXPECT_EQ(ErrorOf("node[1-[2]]"), "entry \"node[1-[2]]\" has a '[' inside brackets");
  EXPECT_EQ(ErrorOf("a,,b"), "entry 2 is empty (two commas, or a comma at an end)");
  EXPECT_EQ(ErrorOf("a,"), "entry 2 is empty (two commas, or a comma at an end)");
  EXPECT_EQ(ErrorOf("node[]"), "entry \"node[]\" has empty brackets");
  EXPECT_EQ(ErrorOf("node[4-1]"), "entry \"node[4-1]\": the range \"4-1\" goes down");
  EXPECT_EQ(ErrorOf("node[a-c]"), "entry \"node[a-c]\": \"a-c\" is not a number or a range lo-hi of numbers");
  EXPECT_EQ(ErrorOf("node[1,,3]"), "entry \"node[1,,3]\": \"\" is not a number or a range lo-hi of numbers");
  EXPECT_EQ(ErrorOf("node[1-2-3]"), "entry \"node[1-2-3]\": \"1-2-3\" is not a number or a range lo-hi of numbers");
  EXPECT_EQ(ErrorOf("n[0-99999999]"), "entry \"n[0-99999999]\" expands to more than 65536 hosts");
  EXPECT_EQ(ErrorOf("n[0-999]m[0-999]"), "entry \"n[0-999]m[0-999]\" expands to more than 65536 hosts");
}

TEST(TasksPerNode, SrunManualExample) {
  // srun(1): "SLURM_TASKS_PER_NODE=2(x3),1 indicates that the first three
  // nodes will each execute two tasks and the fourth node will execute one
  // task."
  auto counts = ParseTasksPerNode("2(x3),1");
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ(*counts, (std::vector<int64_t>{2, 2, 2, 1}));
}

TEST(TasksPerNode, PlainAndRepeatedCounts) {
  EXPECT_EQ(*ParseTasksPerNode("4"), std::vector<int64_t>{4});
  EXPECT_EQ(*ParseTasksPerNode("1,3"), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(*ParseTasksPerNode("1(x1),4(x2)"), (std::vector<int64_t>{1, 4, 4}));
}

TEST(TasksPerNode, MalformedEntries) {
  auto error = [](std::string_view text) {
    auto counts = ParseTasksPerNode(text);
    EXPECT_FALSE(counts.ok()) << text;
    return counts.ok() ? std::string() : counts.status().message();
  };
  EXPECT_EQ(error(""), "the list is empty");
  EXPECT_EQ(error("2(3)"), "entry \"2(3)\" is not a count N or N(xM) (M nodes of N tasks)");
  EXPECT_EQ(error("2(x3"), "entry \"2(x3\" is not a count N or N(xM) (M nodes of N tasks)");
  EXPECT_EQ(error("two"), "entry \"two\" is not a count N or N(xM) (M nodes of N tasks)");
  EXPECT_EQ(error("1,,2"), "entry \"\" is not a count N or N(xM) (M nodes of N tasks)");
  EXPECT_EQ(error("0"), "entry \"0\" has a count of 0");
  EXPECT_EQ(error("2(x0)"), "entry \"2(x0)\" has a count of 0");
  EXPECT_EQ(error("1(x99999)"), "entry \"1(x99999)\" gives more than 65536 nodes");
}

}  // namespace
}  // namespace weft::dist
