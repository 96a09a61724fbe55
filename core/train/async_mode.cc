// Asynchronous training on parameter servers (training.mode = "async"):
// every worker runs the step loop against the variables on the ps tasks and
// applies its own updates as they come (docs/distributed.md, "Training on
// a cluster"). What the step loop adds here: the chief's liveness check,
// progress records, recovery and the finish.
#include "core/train/strategy.h"

namespace weft::train::internal {

Status Run::AsyncStrategy::BeforeLoop() {
  next_chief_check_ = Clock::now() + std::chrono::seconds(5);
  wire_before_ = dist::ReadWireCounters();
  return Status();
}

Status Run::AsyncStrategy::BeforeStep() {
  // A worker other than the chief checks every few seconds that the chief
  // is still there (without recovery = "auto" it stops).
  if (run_.chief() || run_.recovery_auto() || Clock::now() < next_chief_check_) return Status();
  Status alive = run_.runner().Ping("/job:worker/task:0", 5000);
  if (!alive.ok()) return run_.ChiefLost(run_.step_, alive);
  next_chief_check_ = Clock::now() + std::chrono::seconds(5);
  return Status();
}

void Run::AsyncStrategy::StepDone(int64_t step) { run_.RecordProgress(step); }

Status Run::AsyncStrategy::Recover(const Status& why) {
  // recovery = "auto": a task that was lost is waited out (the chief
  // restores the ps tasks when one came back restarted).
  if (!run_.recovery_auto() || !IsRecoverable(why)) return why;
  return run_.chief() ? run_.Recover(why) : run_.WaitForRecovery(why);
}

bool Run::AsyncStrategy::EndsInLoop() const { return run_.chief() && run_.recovery_auto(); }

void Run::AsyncStrategy::AfterSteps(int64_t trained, TrainResult* result) {
  if (trained > 0) run_.ReportWire(wire_before_, trained, result);
}

Status Run::AsyncStrategy::Finish(int64_t /*trained*/, TrainResult* result) {
  WEFT_RETURN_IF_ERROR(run_.FinishCluster());
  if (run_.final_evaluation_.has_value()) {
    result->test_loss = run_.final_evaluation_->loss;
    result->test_accuracy = run_.final_evaluation_->accuracy;
  }
  return Status();
}

}  // namespace weft::train::internal
