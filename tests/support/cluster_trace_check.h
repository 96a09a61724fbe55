// What a merged cluster trace (weft run/train --trace on a cluster) must
// hold for Perfetto's JSON importer and for a reader: shared by the
// cluster tests. Perfetto's own trace_processor downloads itself on first
// use, which CI cannot do, so these are the trace-event format's rules
// checked directly.
#ifndef WEFT_TESTS_SUPPORT_CLUSTER_TRACE_CHECK_H_
#define WEFT_TESTS_SUPPORT_CLUSTER_TRACE_CHECK_H_

#include <string>
#include <vector>

#include "core/base/json.h"

namespace weft::testing {

// The checks of a merged cluster trace that Perfetto's JSON importer
// needs: every event of a known phase with numeric ts and integer
// pid/tid; a process_name for each task; complete events of every task;
// flows paired by id, each ending no earlier than it starts (within the
// clocks' recorded uncertainty). Returns the number of flows.
int CheckClusterTrace(const Json& trace, const std::vector<std::string>& tasks);

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_CLUSTER_TRACE_CHECK_H_
