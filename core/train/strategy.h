// How a training run takes its steps and finishes them: one strategy per
// training mode, in the spirit of tf.distribute's strategies
// (docs/architecture.md, "Training modes"). Run::Go prepares and starts a
// run the same way in every mode, then hands it to its strategy:
//
//   LocalStrategy      one process (step_loop.cc)
//   AsyncStrategy      a worker of a cluster of parameter servers, updates
//                      applied as they come (async_mode.cc)
//   SyncStrategy       a worker of synchronous replicas: the chief averages
//                      the first N workers' gradients (sync_mode.cc)
//   AllReduceStrategy  a worker averaging gradients with the others through
//                      collectives (allreduce_mode.cc)
//
// The first, second and fourth share StepLoop, the loop of reading a batch,
// running a step, reporting, evaluating and saving; they differ only in its
// hooks. Internal to core/train.
#pragma once

#include "core/train/run.h"

namespace weft::train::internal {

class Run::Strategy {
 public:
  explicit Strategy(Run& run) : run_(run) {}
  virtual ~Strategy() = default;
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // "local", "async", "sync" or "allreduce".
  virtual const char* name() const = 0;
  // After Run::Start: every step to the last, the end of training (the
  // last checkpoint, the final evaluation) and, on a cluster, the finish.
  // |restored|: the run starts at a checkpoint it loaded.
  virtual Expected<TrainResult> Train(bool restored) = 0;

 protected:
  Run& run_;
};

// The step loop, with what a mode adds as hooks.
class Run::StepLoop : public Run::Strategy {
 public:
  using Strategy::Strategy;
  Expected<TrainResult> Train(bool restored) final;

 protected:
  // Before the first step.
  virtual Status BeforeLoop() { return Status(); }
  // Before each step: OK, or what the run stops with.
  virtual Status BeforeStep() { return Status(); }
  // Step |step| (from 1) ran.
  virtual void StepDone(int64_t /*step*/) {}
  // A step, an evaluation, a save or the end of training failed with
  // |why|: OK once the run can carry on at step_ (recovery), or the error
  // it stops with.
  virtual Status Recover(const Status& why) { return why; }
  // Whether the end of training runs inside the loop, after the last step,
  // so that a failure there is recovered like any other.
  virtual bool EndsInLoop() const { return false; }
  // After the last step, before the end of training: |trained| steps ran.
  virtual void AfterSteps(int64_t /*trained*/, TrainResult* /*result*/) {}
  // After the end of training: what the mode finishes with.
  virtual Status Finish(int64_t /*trained*/, TrainResult* /*result*/) { return Status(); }
};

class Run::LocalStrategy final : public Run::StepLoop {
 public:
  using StepLoop::StepLoop;
  const char* name() const override { return "local"; }
};

class Run::AsyncStrategy final : public Run::StepLoop {
 public:
  using StepLoop::StepLoop;
  const char* name() const override { return "async"; }

 private:
  Status BeforeLoop() override;
  Status BeforeStep() override;
  void StepDone(int64_t step) override;
  Status Recover(const Status& why) override;
  bool EndsInLoop() const override;
  void AfterSteps(int64_t trained, TrainResult* result) override;
  Status Finish(int64_t trained, TrainResult* result) override;

  // A worker other than the chief, recovery off: when it next checks that
  // the chief is still there.
  Clock::time_point next_chief_check_{};
  dist::WireCounters wire_before_{};
};

class Run::AllReduceStrategy final : public Run::StepLoop {
 public:
  using StepLoop::StepLoop;
  const char* name() const override { return "allreduce"; }

 private:
  Status BeforeLoop() override { return run_.JoinAllReduce(); }
  Status Finish(int64_t trained, TrainResult* /*result*/) override { return run_.EndAllReduce(trained); }
};

class Run::SyncStrategy final : public Run::Strategy {
 public:
  explicit SyncStrategy(Run& run);
  ~SyncStrategy() override;
  const char* name() const override { return "sync"; }
  Expected<TrainResult> Train(bool restored) override;

 private:
  // A worker other than the chief: SyncWorkerLoop to the last step.
  Expected<TrainResult> TrainWorker();
  // The chief's own worker, on a thread of its own.
  void StartWorker();
  // Ends the run for the workers and joins the chief's worker thread: at
  // the end, those waiting for a step get OUT_OF_RANGE (a clean end);
  // after an error (|aborted|), ABORTED.
  Status Close(bool aborted);
  // What the run stops with: |s|, or the chief's worker's error when it
  // failed first (this thread then waited for its gradients in vain).
  Status Fail(Status s);
  // An update, release, evaluation or save failed with |why|: OK once the
  // run goes on from the restored step (recovery = "auto"), else Fail.
  Status Recover(Status why);
  // The chief: one update, then what is due (evaluation, checkpoint, the
  // end) and the release of the next step. false: recovered instead.
  Expected<bool> Step();
  void ReportProgress(double lr);
  // After the last step: the end of training and the finish.
  Expected<TrainResult> Finish();

  const SyncNodes& sn_;
  // What each update fetches: the gradients aggregated, stale and late.
  const std::vector<std::string> counts_;
  int64_t replicas_ = 0;  // the gradients averaged per step
  TrainResult result_;
  SyncWorkerStats stats_;
  // The chief's own worker: its status, set once when it ends (read only
  // after worker_failed_ says so, or after the join).
  std::thread worker_;
  Status worker_status_;
  std::atomic<bool> worker_failed_{false};
  bool closed_ = false;
  checkpoint::SavePolicy policy_;
  int64_t first_step_ = 0;
  int64_t saved_step_ = -1;
  int64_t aggregated_total_ = 0, dropped_total_ = 0;
  int64_t interval_aggregated_ = 0, interval_dropped_ = 0, interval_steps_ = 0;
  int64_t last_aggregated_ = 0, last_dropped_ = 0;
  double train_seconds_ = 0;
  Clock::time_point interval_start_{};
  // recovery = "auto": since when no update succeeded.
  std::optional<Clock::time_point> failing_since_;
};

}  // namespace weft::train::internal
