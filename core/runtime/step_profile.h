// Where a step's time went, task by task: `weft train --profile-steps`
// (docs/distributed.md, "Where a step's time goes").
//
// A profiled step tells each task that runs part of it to time its part;
// each answers with a TaskStepTime, and the caller adds the step to a
// StepProfile:
//
//   runtime::StepProfile profile;
//   runtime::RunOptions options;
//   options.profile = &profile;
//   session->Run(feeds, fetches, targets, &out, options);  // a few steps
//   std::cout << profile.Format();
//
// The figures are wall time, not CPU time: `compute` is the time at least
// one kernel of the task ran (two kernels running together count once), and
// `wait` the time the task had nothing to run because a _Recv was waiting
// for its tensor (from another task, over the network, or from another
// device). A task whose `wait` is most of its step waits for the others; a
// task whose `compute` is most of it is the one the others wait for.
#ifndef WEFT_CORE_RUNTIME_STEP_PROFILE_H_
#define WEFT_CORE_RUNTIME_STEP_PROFILE_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/runtime/trace.h"

namespace weft::runtime {

// One task's part of one step, in milliseconds.
struct TaskStepTime {
  // "/job:ps/task:0"; empty for a session in this process.
  std::string task;
  // The caller's view: the RunGraph request sent to its answer received
  // (0 in a session in this process).
  double round_trip_ms = 0;
  // On the task: the request received to its answer ready (its part of
  // the step, with the request's decoding and queueing).
  double run_ms = 0;
  // At least one kernel other than a _Recv running.
  double compute_ms = 0;
  // A _Recv waiting for its tensor while no other kernel ran.
  double wait_ms = 0;
  // Encoding and decoding messages (every message of the task's process,
  // while its part ran: a few steps at once make it an upper bound).
  double serialization_ms = 0;
  // Requests waiting for a thread of the task's RPC pool, likewise.
  double queued_ms = 0;
};

struct StepTime {
  int64_t step_id = 0;
  // The caller's Run, start to end.
  double step_ms = 0;
  std::vector<TaskStepTime> tasks;
};

// The wall time some kernel other than a _Recv ran, and the time a _Recv
// waited while none did, from one process's trace events (microseconds;
// intervals that overlap count once).
struct BusyTime {
  int64_t compute_us = 0;
  int64_t wait_us = 0;
};
BusyTime SummarizeBusy(const std::vector<TraceRecorder::Event>& events);

// The profiled steps of a run. Thread-safe.
class StepProfile {
 public:
  void Add(StepTime step);
  std::vector<StepTime> steps() const;
  bool empty() const;

  // A table: per task, the mean of each figure over the steps, and the
  // step's mean; then which task computed longest, and what the calls to
  // the tasks cost beyond their own parts. Empty when no step was added.
  std::string Format() const;

 private:
  mutable std::mutex mutex_;
  std::vector<StepTime> steps_;
};

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_STEP_PROFILE_H_
