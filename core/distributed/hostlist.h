// Slurm's compact lists of hosts and task counts, as srun and sbatch put
// them in the environment.
//
//   ExpandHostlist("node[01-04,07]")   -> node01 node02 node03 node04 node07
//   ExpandHostlist("rack[1-2]-n[01-02]") -> rack1-n01 rack1-n02 rack2-n01 rack2-n02
//   ParseTasksPerNode("2(x3),1")        -> 2 2 2 1
//
// The syntax is Slurm's (hostlist.c and the SLURM_TASKS_PER_NODE entry of
// srun(1)): comma-separated entries; in an entry, each bracket holds
// comma-separated numbers or ranges lo-hi, zero padding kept (the width of
// lo), and several brackets expand left to right, the leftmost varying
// slowest. Malformed lists are errors naming the offending part; nothing
// is guessed.
#ifndef WEFT_CORE_DIST_HOSTLIST_H_
#define WEFT_CORE_DIST_HOSTLIST_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace weft::dist {

// Lists longer than this are refused (a typo such as node[0-99999999]
// must not exhaust memory).
inline constexpr size_t kMaxHostlistSize = 65536;

// The hosts of |hostlist|, in order, duplicates kept. INVALID_ARGUMENT
// for an empty list, an empty entry, an unbalanced or nested bracket, a
// range that is not numbers or goes down, or more than kMaxHostlistSize
// hosts; the message names the part and does not repeat |hostlist|.
Expected<std::vector<std::string>> ExpandHostlist(std::string_view hostlist);

// The task count of each node from SLURM_STEP_TASKS_PER_NODE's syntax:
// comma-separated counts, "N(xM)" standing for M nodes of N tasks.
// Counts are >= 1 and repetitions >= 1; anything else is INVALID_ARGUMENT
// naming the entry.
Expected<std::vector<int64_t>> ParseTasksPerNode(std::string_view text);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_HOSTLIST_H_
