// Where the variables of a training graph live on a cluster: which
// parameter-server task holds each variable, with its optimizer slots (the
// update op that uses them goes along, since an op that takes a resource
// is colocated with it). `weft train --job worker --task i` turns the
// result into placement pins, and `weft place --explain` shows the reason
// of each.
//
//   std::vector<VariableGroup> groups = TrainingVariableGroups(tg);
//   WEFT_ASSIGN_OR_RETURN(auto assigned, AssignVariables(tg.graph, groups, 2,
//   "greedy_bytes")); options.placement.pins += VariablePins(assigned, "ps");
//
// Strategies ([cluster] variable_placement; docs/distributed.md):
//   greedy_bytes  largest group first (bytes of the variable and its slots),
//                 each to the task holding the fewest bytes so far, then the
//                 fewest reading ops, then the lowest index;
//   round_robin   groups in name order, task 0, 1, ..., 0, 1, ...
#ifndef WEFT_CORE_DIST_VARIABLE_PLACEMENT_H_
#define WEFT_CORE_DIST_VARIABLE_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/graph/graph.h"
#include "core/placement/placer.h"

namespace weft::dist {

// Variables that must share a task: a model variable and its slots, or a
// lone state variable (the global step, batch-norm statistics).
struct VariableGroup {
  std::string variable;              // the VarHandle the group is named after
  std::vector<std::string> members;  // every VarHandle of the group, |variable| first
  // >= 0: the group goes to this task whatever the strategy (a part of a
  // partitioned variable), with |fixed_reason| as the reason.
  int fixed_task = -1;
  std::string fixed_reason = {};
};

struct VariableAssignment {
  VariableGroup group;
  int task = 0;         // index of the ps task
  int64_t bytes = 0;    // of every member (0 for a shape not fully known)
  int64_t readers = 0;  // ops that read a member (ReadVariable, ResourceGather),
                        // not checkpoint/*
  std::string reason;   // for `weft place --explain`
};

// Assigns every group to one of |num_tasks| tasks by |strategy|
// ("greedy_bytes" or "round_robin"). Errors name a member that is not a
// VarHandle of |graph|, or an unknown strategy.
Expected<std::vector<VariableAssignment>> AssignVariables(const Graph& graph, const std::vector<VariableGroup>& groups,
                                                          int num_tasks, std::string_view strategy);

// One pin per member: "/job:<job>/task:<task>", with the reason as its
// source.
std::vector<placement::Pin> VariablePins(const std::vector<VariableAssignment>& assigned, const std::string& job);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_VARIABLE_PLACEMENT_H_
