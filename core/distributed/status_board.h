// What a task says about itself when asked (`weft cluster status`,
// docs/distributed.md, "Operations"): its role and state, its step, how
// long its steps take, and what happened to its gradients. The task
// service times the RunGraph requests it serves; a training process also
// records its own steps. Every method is thread-safe.
//
//   auto board = std::make_shared<StatusBoard>();
//   board->SetRole("worker 0 of 2, the chief, async");
//   board->StepDone(41, 12.5);
#ifndef WEFT_CORE_DIST_STATUS_BOARD_H_
#define WEFT_CORE_DIST_STATUS_BOARD_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace weft::dist {

class StatusBoard {
 public:
  // The last this many step durations give the percentiles.
  static constexpr std::size_t kWindow = 1024;

  struct Snapshot {
    std::string role;   // "ps of weft train", "worker 0 of 2, the chief, async", "weft serve"
    std::string state;  // "training", "finished", "serving"
    int64_t step = -1;  // -1: unknown
    int64_t total_steps = -1;
    int64_t global_step = -1;
    // Of the training steps when the process trains, else of the RunGraph
    // requests it served; empty when nothing was timed.
    std::string timed;
    double p50_ms = 0, p90_ms = 0, p99_ms = 0;
    int64_t steps_timed = 0;
    // Synchronous training: gradients kept and dropped as stale (-1: not
    // counted, as in async mode).
    int64_t accepted_gradients = -1;
    int64_t dropped_gradients = -1;
  };

  void SetRole(std::string role);
  void SetState(std::string state);
  void SetTotalSteps(int64_t total);
  // A training step finished: this process's step is now |step|, and it
  // took |ms|.
  void StepDone(int64_t step, double ms);
  void SetGlobalStep(int64_t global_step);
  void AddGradients(int64_t accepted, int64_t dropped);
  // The task served a RunGraph that took |ms|.
  void RunGraphDone(double ms);

  Snapshot Take() const;

 private:
  struct Ring {
    std::vector<double> values;
    std::size_t next = 0;
    int64_t count = 0;
    void Add(double v);
  };
  mutable std::mutex mutex_;
  Snapshot now_;
  Ring steps_;
  Ring run_graphs_;
};

}  // namespace weft::dist

#endif  // WEFT_CORE_DIST_STATUS_BOARD_H_
