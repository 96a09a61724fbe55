#include "tests/support/cluster_trace_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace weft::testing {

int CheckClusterTrace(const Json& trace, const std::vector<std::string>& tasks) {
  EXPECT_TRUE(trace.contains("traceEvents")) << trace.dump();
  std::map<int64_t, std::string> process_of;
  std::map<int64_t, int> complete_per_pid;
  std::map<uint64_t, std::pair<double, double>> flows;  // id -> (s ts, f ts)
  std::map<uint64_t, int> flow_ends;
  for (const Json& e : trace["traceEvents"]) {
    const std::string ph = e["ph"];
    EXPECT_TRUE(ph == "X" || ph == "M" || ph == "s" || ph == "f") << e.dump();
    EXPECT_TRUE(e["pid"].is_number_integer()) << e.dump();
    if (ph == "M") {
      if (e["name"] == "process_name") process_of[e["pid"].get<int64_t>()] = e["args"]["name"];
      continue;
    }
    EXPECT_TRUE(e["tid"].is_number_integer()) << e.dump();
    EXPECT_TRUE(e["ts"].is_number()) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), -5000.0) << e.dump();  // within the clock uncertainty of the client's origin
    if (ph == "X") ++complete_per_pid[e["pid"].get<int64_t>()];
    if (ph == "s") flows[e["id"].get<uint64_t>()].first = e["ts"].get<double>();
    if (ph == "f") {
      EXPECT_EQ(e["bp"], "e") << e.dump();
      flows[e["id"].get<uint64_t>()].second = e["ts"].get<double>();
    }
    if (ph == "s" || ph == "f") ++flow_ends[e["id"].get<uint64_t>()];
  }
  for (const std::string& task : tasks) {
    int64_t pid = -1;
    for (const auto& [p, name] : process_of) {
      if (name == task) pid = p;
    }
    EXPECT_NE(pid, -1) << "no track for " << task;
    EXPECT_GT(complete_per_pid[pid], 0) << "no events of " << task;
  }
  for (const auto& [id, ends] : flow_ends) EXPECT_EQ(ends, 2) << "flow " << id << " is not a pair";
  // Each task's events are put on the client's clock with an offset known
  // to within its recorded uncertainty (clock skew is not corrected for
  // causality), so a flow between two tasks may seem to end up to both
  // uncertainties before it starts; no more.
  double uncertainty = 0;
  for (const auto& [task, offset] : trace["otherData"]["clock_offsets_us"].items()) {
    EXPECT_LT(offset[1].get<double>(), 5000.0) << task << ": the clock offset is too uncertain";
    uncertainty = std::max(uncertainty, offset[1].get<double>());
  }
  for (const auto& [id, ts] : flows) {
    EXPECT_GE(ts.second, ts.first - 2 * uncertainty)
        << "flow " << id << " ends before it starts, by more than the clocks' uncertainty (" << uncertainty << " us)";
  }
  return static_cast<int>(flows.size());
}

}  // namespace weft::testing
