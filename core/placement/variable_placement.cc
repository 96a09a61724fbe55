#include "core/placement/variable_placement.h"

#include <algorithm>
#include <numeric>

#include "core/base/strings.h"

namespace weft::dist {
namespace {

bool ReadsVariable(const std::string& op) { return op == "ReadVariable" || op == "ResourceGather"; }

}  // namespace

Expected<std::vector<VariableAssignment>> AssignVariables(const Graph& graph, const std::vector<VariableGroup>& groups,
                                                          int num_tasks, std::string_view strategy) {
  if (num_tasks <= 0) return InvalidArgumentError("variable placement needs at least one ps task");
  if (strategy != "greedy_bytes" && strategy != "round_robin") {
    return InvalidArgumentError("cluster.variable_placement: unknown strategy ", Quote(strategy),
                                " (expected \"greedy_bytes\" or \"round_robin\")");
  }
  std::vector<VariableAssignment> out;
  out.reserve(groups.size());
  for (const VariableGroup& group : groups) {
    VariableAssignment a;
    a.group = group;
    for (const std::string& member : group.members) {
      const Graph::Node* node = graph.Find(member);
      if (node == nullptr || node->op_name() != "VarHandle") {
        return InvalidArgumentError("variable placement: ", Quote(member), " is not a VarHandle of the graph");
      }
      const Shape& shape = node->def.attrs.at("shape").get<Shape>();
      const DType dtype = node->def.attrs.at("dtype").get<DType>();
      if (shape.IsFullyDefined()) a.bytes += shape.num_elements() * static_cast<int64_t>(DTypeSize(dtype));
      for (const auto& [consumer, index] : graph.consumers()[static_cast<std::size_t>(node->id)]) {
        // The reads of the model; not those that save or restore it.
        const Graph::Node& reader = graph.node(consumer);
        if (index >= 0 && ReadsVariable(reader.op_name()) && reader.name().rfind("checkpoint/", 0) != 0) ++a.readers;
      }
    }
    if (group.fixed_task >= num_tasks) {
      return InvalidArgumentError("variable placement: ", Quote(group.variable), " must go to ps task ",
                                  group.fixed_task, ", but there are ", num_tasks);
    }
    if (group.fixed_task >= 0) {
      a.task = group.fixed_task;
      a.reason = group.fixed_reason;
    }
    out.push_back(std::move(a));
  }
  const std::string key = StrCat("cluster.variable_placement = ", Quote(strategy));
  auto with_slots = [](const VariableAssignment& a) {
    const std::size_t slots = a.group.members.size() - 1;
    return slots == 0 ? std::string() : StrCat(" with its ", slots, " slot", slots == 1 ? "" : "s");
  };
  if (strategy == "round_robin") {
    std::vector<std::size_t> order(out.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return out[a].group.variable < out[b].group.variable; });
    for (std::size_t k = 0; k < order.size(); ++k) {
      VariableAssignment& a = out[order[k]];
      if (a.group.fixed_task >= 0) continue;
      a.task = static_cast<int>(k % static_cast<std::size_t>(num_tasks));
      a.reason = StrCat(key, ": variable ", k + 1, " of ", order.size(), " in name order", with_slots(a), " (",
                        HumanBytes(static_cast<uint64_t>(a.bytes)), ") to ps task ", a.task, " of ", num_tasks);
    }
    return out;
  }
  // greedy_bytes: largest first; ties by readers, then name, so the result
  // does not depend on the order of |groups|.
  std::vector<std::size_t> order(out.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (out[a].bytes != out[b].bytes) return out[a].bytes > out[b].bytes;
    if (out[a].readers != out[b].readers) return out[a].readers > out[b].readers;
    return out[a].group.variable < out[b].group.variable;
  });
  std::vector<int64_t> bytes(static_cast<std::size_t>(num_tasks), 0);
  std::vector<int64_t> readers(static_cast<std::size_t>(num_tasks), 0);
  for (VariableAssignment& a : out) {
    if (a.group.fixed_task < 0) continue;
    const auto ut = static_cast<std::size_t>(a.group.fixed_task);
    bytes[ut] += a.bytes;
    readers[ut] += a.readers;
  }
  for (std::size_t i : order) {
    VariableAssignment& a = out[i];
    if (a.group.fixed_task >= 0) continue;
    int best = 0;
    for (int t = 1; t < num_tasks; ++t) {
      const auto ut = static_cast<std::size_t>(t);
      const auto ub = static_cast<std::size_t>(best);
      if (bytes[ut] < bytes[ub] || (bytes[ut] == bytes[ub] && readers[ut] < readers[ub])) best = t;
    }
    const auto ub = static_cast<std::size_t>(best);
    a.task = best;
    a.reason = StrCat(key, ": ", HumanBytes(static_cast<uint64_t>(a.bytes)), with_slots(a), ", read by ", a.readers,
                      " op", a.readers == 1 ? "" : "s", ", to ps task ", best, " of ", num_tasks,
                      ", which held the fewest (", HumanBytes(static_cast<uint64_t>(bytes[ub])), ")");
    bytes[ub] += a.bytes;
    readers[ub] += a.readers;
  }
  return out;
}

std::vector<placement::Pin> VariablePins(const std::vector<VariableAssignment>& assigned, const std::string& job) {
  std::vector<placement::Pin> pins;
  for (const VariableAssignment& a : assigned) {
    for (const std::string& member : a.group.members) {
      placement::Pin pin;
      pin.pattern = member;
      pin.device = StrCat("/job:", job, "/task:", a.task);
      pin.where = "cluster.variable_placement";
      pin.source =
          member == a.group.variable ? a.reason : StrCat("a slot of ", Quote(a.group.variable), ": ", a.reason);
      pins.push_back(std::move(pin));
    }
  }
  return pins;
}

}  // namespace weft::dist
