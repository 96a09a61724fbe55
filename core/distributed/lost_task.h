// A failure that comes from losing a task of the cluster, told in the
// user's terms (docs/distributed.md, "When something goes wrong").
//
// A step that needs a task that died fails deep inside the runtime, and
// its status is a chain of contexts that leads with internal names: the
// step, a _Recv node the partitioner made, the pull, and only at the end
// "task /job:ps/task:0 (tcp://...) closed the connection". The commands
// show it led by the cause instead:
//
//   /job:ps/task:0 (tcp://127.0.0.1:7080) was lost during training step 132:
//   it closed the connection (its process ended or was killed). To go on: ...
//   (what failed: training step 132: ... pulling ... from /job:ps/task:0)
//
//   if (auto lost = dist::FindLostTask(status)) ...
//   Status shown = dist::ExplainLostTask(status, "start it again, then ...");
#ifndef WEFT_CORE_DIST_LOST_TASK_H_
#define WEFT_CORE_DIST_LOST_TASK_H_

#include <optional>
#include <string>
#include <string_view>

#include "core/base/status.h"

namespace weft::dist {

struct LostTask {
  std::string task;     // "/job:ps/task:0"
  std::string address;  // "tcp://127.0.0.1:7080"
  // What was seen, for people: "it closed the connection (its process
  // ended or was killed)", "it has not answered for 10.0 s (...)".
  std::string how;
};

// The task whose loss |status| reports: a connection it closed during a
// call, or heartbeats it stopped answering (core/distributed/heartbeat.h). Nothing
// for any other failure, OK included.
std::optional<LostTask> FindLostTask(const Status& status);

// UNAVAILABLE, led by the cause: "|task| (|address|) was lost: |how|.",
// then |what_to_do| (sentences) on a line of its own, then "(what failed:
// |what_failed|)", shortened to its first and last parts, when not empty.
Status LostTaskError(const LostTask& lost, std::string_view what_to_do, std::string_view what_failed);

// |status| as LostTaskError tells it when it reports a lost task; any other
// status, and one LostTaskError already told, unchanged.
Status ExplainLostTask(const Status& status, std::string_view what_to_do);

// Whether |status| reports a lost task, as it came (FindLostTask) or as
// LostTaskError told it: what `weft` exits 3 for (docs/cli.md).
bool IsLostTask(const Status& status);

// "a ... z" of at most |max_chars|: the start and the end of |text| with
// the middle left out.
std::string ShortenMiddle(std::string_view text, std::size_t max_chars);

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_LOST_TASK_H_
