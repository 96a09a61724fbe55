// Synchronous replicas (training.mode = "sync"; docs/distributed.md,
// "Synchronous training"): every worker offers its gradients for the step
// it holds; the chief averages the first N and releases the next step.
#include "core/train/strategy.h"

namespace weft::train::internal {

bool Run::SyncRunEnded() {
  if (told_to_stop_->load()) return true;
  auto store = runner().service().KvStoreOf(dist::TaskPrefix("worker", 0));
  return store.ok() && (*store)->Get(kSyncEndedKey, 0).ok();
}

Expected<std::optional<int64_t>> Run::RejoinSync(const Status& why) {
  const SyncNodes& sn = *tg_.sync;
  const Clock::time_point start = Clock::now();
  const int64_t timeout_s = recovery_timeout_s();
  const bool first = why.ok();
  if (!first) {
    board_->SetState("waiting for the chief to release a step again");
    reporter_.Note(StrCat("recovery: ", why.message(), "; waiting for the chief to release a step again ",
                          "(recovery_timeout_s = ", timeout_s, ")"));
  }
  std::chrono::milliseconds pause(100);
  for (;;) {
    if (SyncRunEnded()) return std::optional<int64_t>();
    // Bounded, so that the end of the run is seen even when the queue
    // stays closed.
    runtime::RunOptions options;
    options.timeout_ms = 3000;
    std::vector<Tensor> out;
    Status s = session_->Run({{sn.local_step, Tensor::Scalar<int64_t>(-1)}}, {sn.first_token}, {}, &out, options);
    if (s.ok()) {
      const int64_t step = out[0].scalar<int64_t>();
      if (!first) {
        reporter_.Note(StrCat("recovery: the chief released step ", step, " after ",
                              Fixed(Seconds(Clock::now() - start), 1), " s; carrying on"));
        board_->SetState("training");
      }
      return std::optional<int64_t>(step);
    }
    if (s.code() == Code::kOutOfRange) return std::optional<int64_t>();
    if (!IsSyncRecoverable(s)) return s.WithContext("waiting for the chief to release a step");
    if (Clock::now() >= start + std::chrono::seconds(timeout_s)) {
      return Status(
          Code::kUnavailable,
          StrCat(first ? std::string("waiting for the chief to release the first step") : why.message(),
                 "; no step was released within ", timeout_s, " s (", s.message(), "); gave up (recovery_timeout_s)"));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::seconds(1));
  }
}

Status Run::SyncWorkerLoop(SyncWorkerStats* stats, bool report) {
  const SyncNodes& sn = *tg_.sync;
  // recovery = "auto": a worker rides out what the chief recovers from
  // (the chief's own worker ends instead, and the chief starts it again).
  const bool rejoin = recovery_auto() && !chief();
  std::vector<Tensor> out;
  int64_t local = -1;
  // The first step the chief releases: after it initialised or restored
  // the variables and set the accumulators to that step.
  if (rejoin) {
    WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> first, RejoinSync(Status()));
    if (!first.has_value()) {
      reporter_.Note("the chief ended the run before this worker took a step");
      return Status();
    }
    local = *first;
    if (local > 0) reporter_.Note(StrCat("starting at step ", local + 1, ", the step the chief released"));
  } else {
    WEFT_RETURN_IF_ERROR(session_->Run({{sn.local_step, Tensor::Scalar<int64_t>(-1)}}, {sn.first_token}, {}, &out)
                             .WithContext("waiting for the chief to release the first step"));
    local = out[0].scalar<int64_t>();
  }
  std::vector<std::string> fetches = {tg_.loss, sn.token, sn.accepted};
  if (!accuracy_.empty()) fetches.push_back(accuracy_);
  const int64_t batch_size = config_.training.batch_size;
  double interval_loss = 0, interval_accuracy = 0;
  int64_t interval_steps = 0;
  Clock::time_point interval_start = Clock::now();
  Clock::time_point next_chief_check = Clock::now() + std::chrono::seconds(5);
  while (local < total_steps_) {
    if (report && StopRequested()) {
      step_ = local;
      return StopHere(-1);
    }
    if (!chief() && !recovery_auto() && Clock::now() >= next_chief_check) {
      Status alive = static_cast<ClusterRunner*>(session_.get())->Ping("/job:worker/task:0", 5000);
      if (!alive.ok()) return ChiefLost(local, alive);
      next_chief_check = Clock::now() + std::chrono::seconds(5);
    }
    const Clock::time_point t0 = Clock::now();
    // A worker whose gradients came too late skips to the step released
    // since, and to that step's slice of the data.
    const data::Position want = pipeline_->PositionOfStep(local);
    if (!(pipeline_->position() == want)) WEFT_RETURN_IF_ERROR(pipeline_->Seek(want));
    auto batch = pipeline_->Next();
    if (!batch.ok()) return batch.status().WithContext(StrCat("reading training batch ", local + 1));
    Status ran = session_->Run(
        {{images_, batch->features}, {labels_, batch->labels}, {sn.local_step, Tensor::Scalar<int64_t>(local)}},
        fetches, {}, &out, TraceStep(local + 1));
    if (!ran.ok() && rejoin && IsKeptAlready(ran)) {
      // Its gradients for this step were kept before it was restarted:
      // the next step.
      ran = session_->Run({{sn.local_step, Tensor::Scalar<int64_t>(local)}}, {sn.next_token}, {}, &out);
      if (ran.ok()) {
        reporter_.Note(StrCat("its gradients for step ", local + 1, " were kept before it was restarted; rejoined at ",
                              "step ", out[0].scalar<int64_t>() + 1));
        local = out[0].scalar<int64_t>();
        continue;
      }
    }
    if (!ran.ok()) {
      if (ran.code() == Code::kOutOfRange) {
        if (report) reporter_.Note(StrCat("the chief ended the run before step ", local + 1));
        break;
      }
      if (rejoin && IsSyncRecoverable(ran)) {
        WEFT_ASSIGN_OR_RETURN(std::optional<int64_t> again,
                              RejoinSync(ran.WithContext(StrCat("training step ", local + 1))));
        if (!again.has_value()) break;
        local = *again;
        continue;
      }
      return ran.WithContext(StrCat("training step ", local + 1));
    }
    const double loss = ScalarValue(out[0]);
    if (!std::isfinite(loss)) {
      return FailedPreconditionError("the loss became ", loss, " at step ", local + 1,
                                     "; lower optimizer.learning_rate or set training.clip_global_norm");
    }
    const int64_t next = out[1].scalar<int64_t>();
    const bool accepted = out[2].scalar<bool>();
    const double accuracy = accuracy_.empty() ? kNaN : ScalarValue(out[3]);
    const double seconds = Seconds(Clock::now() - t0);
    if (!chief()) {
      board_->StepDone(next, seconds * 1000.0);
      board_->AddGradients(accepted ? 1 : 0, accepted ? 0 : 1);
    }
    {
      std::lock_guard<std::mutex> lock(stats->mutex);
      stats->loss_sum += loss;
      if (!accuracy_.empty()) stats->accuracy_sum += accuracy;
      ++stats->steps;
      ++stats->computed;
      (accepted ? stats->accepted : stats->late) += 1;
      stats->last_loss = loss;
      stats->seconds += seconds;
    }
    interval_loss += loss;
    interval_accuracy += accuracy_.empty() ? 0 : accuracy;
    ++interval_steps;
    // Progress at each multiple of log_every the released step passes.
    if (report && (next / config_.training.log_every > local / config_.training.log_every || next >= total_steps_)) {
      const double elapsed = Seconds(Clock::now() - interval_start);
      int64_t accepted_total, late_total;
      {
        std::lock_guard<std::mutex> lock(stats->mutex);
        accepted_total = stats->accepted;
        late_total = stats->late;
      }
      const double eps = elapsed > 0 ? static_cast<double>(interval_steps * batch_size) / elapsed : 0;
      const double per_step = elapsed / static_cast<double>(interval_steps);
      reporter_.Progress(std::min(next, total_steps_), total_steps_, interval_loss / interval_steps,
                         accuracy_.empty() ? kNaN : interval_accuracy / interval_steps,
                         LearningRateAt(config_.schedule, optimizer_choice_.learning_rate, local, total_steps_), eps,
                         per_step * static_cast<double>(std::max<int64_t>(0, total_steps_ - next)),
                         StrCat("own gradients: ", accepted_total, " kept, ", late_total, " dropped as stale"),
                         {{"own_accepted", accepted_total}, {"own_dropped", late_total}});
      interval_loss = interval_accuracy = 0;
      interval_steps = 0;
      interval_start = Clock::now();
    }
    local = next;
    // recovery = "auto" rejoins by the step queue, not by a recorded step.
    if (!recovery_auto()) RecordProgress(std::min(local, total_steps_));
    std::lock_guard<std::mutex> lock(stats->mutex);
    stats->reached = std::min(local, total_steps_);
  }
  return Status();
}

// --- The synchronous strategy
// ------------------------------------------------------------------
//
// A worker other than the chief runs SyncWorkerLoop to the end. The chief
// runs its own worker on a thread of its own, and on this one applies the
// averaged gradients of each step and releases the next; between an
// update and the next release every worker waits, so an evaluation or a
// checkpoint sees exactly step_ updates.

Run::SyncStrategy::SyncStrategy(Run& run)
    : Strategy(run),
      sn_(*run.tg_.sync),
      counts_{sn_.aggregated, sn_.stale, sn_.late},
      policy_(run.config_.checkpoint.every_steps, run.config_.checkpoint.every_seconds) {
  const config::TrainingConfig& t = run.config_.training;
  replicas_ = t.replicas_to_aggregate > 0 ? t.replicas_to_aggregate : run.num_workers_ - t.backup_workers;
}

Run::SyncStrategy::~SyncStrategy() {
  // Every path out of Train joins the chief's worker; this is for one that
  // did not (the queue is aborted first, or the thread would wait on).
  if (worker_.joinable()) {
    (void)run_.session_->Run({}, {}, {sn_.abort}, nullptr);
    worker_.join();
  }
}

Expected<TrainResult> Run::SyncStrategy::Train(bool restored) {
  run_.board_->SetState("training");
  run_.board_->SetTotalSteps(run_.total_steps_);
  if (!run_.chief()) return TrainWorker();
  run_.reporter_.Note(StrCat("synchronous: each step averages the first ", replicas_, " of the ", run_.num_workers_,
                             " workers' gradients (", run_.num_workers_ - replicas_, " backup worker",
                             run_.num_workers_ - replicas_ == 1 ? "" : "s", "); a global batch is ", run_.num_workers_,
                             " x ", run_.config_.training.batch_size, " examples"));
  // Accumulators and the first token at the current step (0, or the
  // restored one): the workers start there.
  WEFT_RETURN_IF_ERROR(
      run_.session_->Run({{sn_.reset_step, Tensor::Scalar<int64_t>(run_.step_)}}, {}, {sn_.reset}, nullptr)
          .WithContext("setting the gradient accumulators to the first step"));
  StartWorker();
  policy_.Saved(run_.step_, Clock::now());
  first_step_ = run_.step_;
  saved_step_ = restored ? run_.step_ : -1;
  interval_start_ = Clock::now();
  while (run_.step_ < run_.total_steps_) {
    if (run_.StopRequested()) return Fail(run_.StopHere(saved_step_));
    WEFT_ASSIGN_OR_RETURN(bool carry_on, Step());
    (void)carry_on;  // false: recovered, the loop goes on from step_
  }
  return Finish();
}

Expected<TrainResult> Run::SyncStrategy::TrainWorker() {
  const Clock::time_point start = Clock::now();
  WEFT_RETURN_IF_ERROR(run_.SyncWorkerLoop(&stats_, /*report=*/true));
  const double seconds = Seconds(Clock::now() - start);
  result_.step = stats_.reached;
  result_.loss = stats_.last_loss;
  result_.test_loss = result_.test_accuracy = kNaN;
  result_.examples_per_sec =
      seconds > 0 ? static_cast<double>(stats_.computed * run_.config_.training.batch_size) / seconds : 0;
  result_.late_gradients = stats_.late;
  run_.reporter_.Note(StrCat("computed ", stats_.computed, " steps; ", stats_.accepted,
                             " of this worker's gradients were averaged, ", stats_.late, " dropped as stale"));
  WEFT_RETURN_IF_ERROR(run_.FinishCluster());
  run_.reporter_.Final(result_);
  return result_;
}

void Run::SyncStrategy::StartWorker() {
  worker_status_ = Status();
  worker_failed_.store(false);
  worker_ = std::thread([this] {
    Status s = run_.SyncWorkerLoop(&stats_, /*report=*/false);
    if (!s.ok()) {
      worker_status_ = std::move(s);
      worker_failed_.store(true);
    }
  });
}

Status Run::SyncStrategy::Close(bool aborted) {
  if (closed_) return Status();
  closed_ = true;
  Status s = run_.session_->Run({}, {}, {aborted ? sn_.abort : sn_.close}, nullptr);
  if (worker_.joinable()) worker_.join();
  return s;
}

Status Run::SyncStrategy::Fail(Status s) {
  const bool worker_first = worker_failed_.load();
  (void)Close(/*aborted=*/true);
  if (worker_first) return worker_status_.WithContext("the chief's own worker");
  return s;
}

// recovery = "auto": an update, release, evaluation or save that failed
// because a task was lost, or the chief's own worker's step, goes back to
// the newest checkpoint, whether or not a ps task was restarted: nothing
// else tells which part of a synchronous update reached the ps tasks. The
// queue is closed with an error first (waiting workers take their first
// step again), and opened at the restored step.
Status Run::SyncStrategy::Recover(Status why) {
  if (!run_.recovery_auto() || !IsSyncRecoverable(why)) return Fail(std::move(why));
  (void)run_.session_->Run({}, {}, {sn_.abort}, nullptr);
  if (worker_.joinable()) worker_.join();
  if (worker_failed_.load() && !IsSyncRecoverable(worker_status_)) {
    return Fail(worker_status_.WithContext("the chief's own worker"));
  }
  // Its error is this one's (a lost task); what the recovery says wins.
  worker_failed_.store(false);
  if (!failing_since_.has_value()) failing_since_ = Clock::now();
  const int64_t timeout_s = run_.recovery_timeout_s();
  for (;;) {
    if (Clock::now() - *failing_since_ > std::chrono::seconds(timeout_s)) {
      return Fail(Status(Code::kUnavailable, StrCat(why.message(), "; no update succeeded for ", timeout_s,
                                                    " s; gave up (recovery_timeout_s)")));
    }
    Status recovered = run_.Recover(why, /*always=*/true);
    if (!recovered.ok()) return Fail(std::move(recovered));
    // Again: a restarted ps task's new queue, or one not reached before.
    (void)run_.session_->Run({}, {}, {sn_.abort}, nullptr);
    Status reset =
        run_.session_->Run({{sn_.reset_step, Tensor::Scalar<int64_t>(run_.step_)}}, {}, {sn_.reset}, nullptr);
    if (reset.ok()) break;
    if (!IsSyncRecoverable(reset)) return Fail(reset.WithContext("setting the gradient accumulators again"));
    why = reset.WithContext("setting the gradient accumulators again");
  }
  StartWorker();
  policy_.Saved(run_.step_, Clock::now());
  saved_step_ = run_.step_;
  run_.ended_ = false;
  interval_aggregated_ = interval_dropped_ = 0;
  interval_steps_ = 0;
  interval_start_ = Clock::now();
  return Status();
}

Expected<bool> Run::SyncStrategy::Step() {
  const int64_t total = run_.total_steps_;
  const Clock::time_point t0 = Clock::now();
  const int64_t next = run_.step_ + 1;
  const config::TrainingConfig& training = run_.config_.training;
  const bool eval_due = training.eval_every > 0 && next % training.eval_every == 0 && next != total;
  const bool save_due = run_.checkpoints_ != nullptr && next != total && policy_.Due(next, Clock::now());
  // recovery = "auto": the end (last checkpoint, evaluation) before the
  // last release, so that a fault there goes back like any other.
  const bool end_due = run_.recovery_auto() && next == total;
  const bool pause = eval_due || save_due || end_due;
  const double lr = LearningRateAt(run_.config_.schedule, run_.optimizer_choice_.learning_rate, run_.step_, total);
  std::vector<Tensor> out;
  // Traced with the step; the profile is of the workers' steps only.
  runtime::RunOptions options = run_.TraceStep(run_.step_ + 1);
  options.profile = nullptr;
  Status applied = run_.session_->Run({{run_.tg_.learning_rate, Tensor::Scalar<float>(static_cast<float>(lr))}},
                                      counts_, {pause ? sn_.apply : sn_.apply_and_release}, &out, options);
  if (!applied.ok()) {
    WEFT_RETURN_IF_ERROR(Recover(applied.WithContext(
        StrCat("update ", next, " (the averaged gradients of the workers' step at global step ", run_.step_, ")"))));
    return false;
  }
  failing_since_.reset();
  run_.step_ = next;
  train_seconds_ += Seconds(Clock::now() - t0);
  const int64_t aggregated = out[0].scalar<int64_t>();
  const int64_t stale = out[1].scalar<int64_t>();
  const int64_t late = out[2].scalar<int64_t>();
  run_.board_->StepDone(run_.step_, Seconds(Clock::now() - t0) * 1000.0);
  run_.board_->SetGlobalStep(run_.step_);
  run_.board_->AddGradients(aggregated, stale + late);
  run_.reporter_.SyncStep(run_.step_, aggregated, stale, late);
  aggregated_total_ += aggregated;
  dropped_total_ += stale + late;
  interval_aggregated_ += aggregated;
  interval_dropped_ += stale + late;
  last_aggregated_ = aggregated;
  last_dropped_ = stale + late;
  ++interval_steps_;
  if (run_.step_ % training.log_every == 0 || run_.step_ == total) ReportProgress(lr);
  // Between this update and the release of the next step every worker
  // waits, so an evaluation or a checkpoint sees exactly step_ updates.
  if (eval_due) {
    auto e = run_.Evaluate();
    if (!e.ok()) {
      WEFT_RETURN_IF_ERROR(Recover(e.status()));
      return false;
    }
    if (e->examples > 0) run_.reporter_.Evaluation(run_.step_, e->loss, e->accuracy, e->examples);
  }
  if (save_due) {
    auto saved = run_.Save(run_.step_);
    if (!saved.ok()) {
      WEFT_RETURN_IF_ERROR(Recover(saved.status().WithContext(StrCat("saving at step ", run_.step_))));
      return false;
    }
    result_.checkpoint = *saved;
    policy_.Saved(run_.step_, Clock::now());
    saved_step_ = run_.step_;
    WEFT_LOG(INFO) << "saved " << result_.checkpoint;
  }
  if (end_due) {
    if (saved_step_ != run_.step_) {
      // The end always has a checkpoint to go back to.
      auto saved = run_.Save(run_.step_);
      if (!saved.ok()) {
        WEFT_RETURN_IF_ERROR(Recover(saved.status().WithContext(StrCat("saving at step ", run_.step_))));
        return false;
      }
      result_.checkpoint = *saved;
      saved_step_ = run_.step_;
      run_.reporter_.Note(StrCat("saved ", result_.checkpoint));
    }
    Status ended = run_.EndOfTraining(saved_step_, &result_);
    if (!ended.ok()) {
      WEFT_RETURN_IF_ERROR(Recover(ended));
      return false;
    }
    run_.ended_ = true;
    saved_step_ = run_.step_;
  }
  if (pause) {
    Status released = run_.session_->Run({}, {}, {sn_.release}, nullptr);
    if (!released.ok()) {
      WEFT_RETURN_IF_ERROR(Recover(released.WithContext(StrCat("releasing step ", run_.step_))));
      return false;
    }
  }
  if (worker_failed_.load()) {
    if (!run_.recovery_auto()) {
      Status failed = Fail(Status());  // the worker's error, as it failed first
      if (failed.ok()) return false;
      return failed;
    }
    WEFT_RETURN_IF_ERROR(Recover(worker_status_.WithContext("the chief's own worker")));
  }
  return true;
}

void Run::SyncStrategy::ReportProgress(double lr) {
  double loss_sum, accuracy_sum, last_loss;
  int64_t steps;
  {
    std::lock_guard<std::mutex> lock(stats_.mutex);
    loss_sum = stats_.loss_sum;
    accuracy_sum = stats_.accuracy_sum;
    steps = stats_.steps;
    stats_.loss_sum = stats_.accuracy_sum = 0;
    stats_.steps = 0;
    // The chief's own worker finishes step k after its release, so the
    // losses lag a step; before the first, say so with NaN.
    last_loss = stats_.last_loss;
  }
  const double seconds = Seconds(Clock::now() - interval_start_);
  const double eps =
      seconds > 0 ? static_cast<double>(interval_steps_ * replicas_ * run_.config_.training.batch_size) / seconds : 0;
  const double mean_loss = steps > 0 ? loss_sum / static_cast<double>(steps) : last_loss;
  const double mean_acc = run_.accuracy_.empty() || steps == 0 ? kNaN : accuracy_sum / static_cast<double>(steps);
  run_.reporter_.Progress(
      run_.step_, run_.total_steps_, mean_loss, mean_acc, lr, eps,
      seconds / static_cast<double>(interval_steps_) * static_cast<double>(run_.total_steps_ - run_.step_),
      StrCat("gradients ", last_aggregated_, " aggregated, ", last_dropped_, " dropped as stale (last step); ",
             interval_steps_, " steps: ", interval_aggregated_, " aggregated, ", interval_dropped_, " dropped"),
      {{"aggregated", interval_aggregated_}, {"stale_dropped", interval_dropped_}});
  if (steps > 0) result_.loss = mean_loss;
  interval_aggregated_ = interval_dropped_ = 0;
  interval_steps_ = 0;
  interval_start_ = Clock::now();
}

Expected<TrainResult> Run::SyncStrategy::Finish() {
  // A worker started again from now on finishes at once.
  if (run_.recovery_auto()) {
    run_.runner().service().NotifyKvSet(dist::TaskPrefix("worker", 0), kSyncEndedKey, "1");
  }
  Status closed_ok = Close(/*aborted=*/false);
  if (worker_failed_.load()) {
    // recovery = "auto": the run is over; a lost task no longer matters.
    if (!(run_.recovery_auto() && run_.ended_ && IsSyncRecoverable(worker_status_))) {
      return worker_status_.WithContext("the chief's own worker");
    }
  }
  if (run_.recovery_auto() && run_.ended_ && !closed_ok.ok()) {
    // The workers learn the end from this task's store.
    run_.reporter_.Note(StrCat("note: closing the step queue: ", closed_ok.message()));
    closed_ok = Status();
  }
  WEFT_RETURN_IF_ERROR(closed_ok.WithContext("ending the run for the workers"));
  if (!run_.ended_) WEFT_RETURN_IF_ERROR(run_.EndOfTraining(saved_step_, &result_));
  const int64_t trained = run_.step_ - first_step_;
  result_.examples_per_sec =
      train_seconds_ > 0 ? static_cast<double>(trained * replicas_ * run_.config_.training.batch_size) / train_seconds_
                         : 0;
  result_.aggregated = aggregated_total_;
  result_.stale_dropped = dropped_total_;
  {
    std::lock_guard<std::mutex> lock(stats_.mutex);
    result_.late_gradients = stats_.late;
  }
  run_.reporter_.Note(StrCat("trained ", trained, " synchronous steps in ", Fixed(train_seconds_, 1),
                             " s: ", aggregated_total_, " gradients averaged, ", dropped_total_, " dropped as stale"));
  WEFT_RETURN_IF_ERROR(run_.FinishCluster());
  run_.reporter_.Final(result_);
  return result_;
}

}  // namespace weft::train::internal
