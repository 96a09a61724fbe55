// The step loop (strategy.h): read a batch, run a step, report, evaluate
// and save, to the last step; then the end of training. One process,
// asynchronous workers and allreduce workers share it through its hooks.
#include "core/train/strategy.h"

namespace weft::train::internal {

Expected<TrainResult> Run::StepLoop::Train(bool restored) {
  WEFT_RETURN_IF_ERROR(BeforeLoop());
  TrainResult result;
  std::vector<std::string> fetches = {run_.tg_.loss};
  if (!run_.accuracy_.empty()) fetches.push_back(run_.accuracy_);
  checkpoint::SavePolicy policy(run_.config_.checkpoint.every_steps, run_.config_.checkpoint.every_seconds);
  policy.Saved(run_.step_, Clock::now());
  const int64_t batch_size = run_.config_.training.batch_size;
  const int64_t first_step = run_.step_;
  double train_seconds = 0;
  double wait_at_start = run_.pipeline_->wait_seconds();
  double interval_loss = 0, interval_accuracy = 0;
  int64_t interval_steps = 0;
  Clock::time_point interval_start = Clock::now();
  // A resumed run has its starting step saved already.
  int64_t saved_step = restored ? run_.step_ : -1;
  // A step, evaluation or save that failed is the run's error, unless the
  // strategy recovers from it (recovery = "auto": the chief restores the
  // ps tasks when one came back restarted); the loop then carries on from
  // the run's step.
  auto recover = [&](const Status& why) -> Status {
    WEFT_RETURN_IF_ERROR(Recover(why));
    if (run_.chief()) {
      policy.Saved(run_.step_, Clock::now());
      saved_step = run_.step_;
    }
    interval_loss = interval_accuracy = 0;
    interval_steps = 0;
    interval_start = Clock::now();
    return Status();
  };
  run_.board_->SetState("training");
  run_.board_->SetTotalSteps(run_.total_steps_);
  while (run_.step_ < run_.total_steps_) {
    if (run_.StopRequested()) return run_.StopHere(saved_step);
    WEFT_RETURN_IF_ERROR(BeforeStep());
    const Clock::time_point t0 = Clock::now();
    auto batch = run_.pipeline_->Next();
    if (!batch.ok()) return batch.status().WithContext(StrCat("reading training batch ", run_.step_ + 1));
    const double lr =
        LearningRateAt(run_.config_.schedule, run_.optimizer_choice_.learning_rate, run_.step_, run_.total_steps_);
    std::vector<Tensor> out;
    Status ran = run_.session_->Run({{run_.images_, batch->features},
                                     {run_.labels_, batch->labels},
                                     {run_.tg_.learning_rate, Tensor::Scalar<float>(static_cast<float>(lr))}},
                                    fetches, {run_.tg_.train}, &out, run_.TraceStep(run_.step_ + 1));
    if (!ran.ok()) {
      WEFT_RETURN_IF_ERROR(recover(ran.WithContext(StrCat("training step ", run_.step_ + 1))));
      continue;
    }
    ++run_.step_;
    StepDone(run_.step_);
    train_seconds += Seconds(Clock::now() - t0);
    run_.board_->StepDone(run_.step_, Seconds(Clock::now() - t0) * 1000.0);
    const double loss = ScalarValue(out[0]);
    if (!std::isfinite(loss)) {
      return FailedPreconditionError("the loss became ", loss, " at step ", run_.step_, " (learning rate ", lr,
                                     "); lower optimizer.learning_rate or set training.clip_global_norm");
    }
    interval_loss += loss;
    if (!run_.accuracy_.empty()) interval_accuracy += ScalarValue(out[1]);
    ++interval_steps;
    if (run_.step_ % run_.config_.training.log_every == 0 || run_.step_ == run_.total_steps_) {
      const double seconds = Seconds(Clock::now() - interval_start);
      const double eps = seconds > 0 ? static_cast<double>(interval_steps * batch_size) / seconds : 0;
      const double mean_loss = interval_loss / static_cast<double>(interval_steps);
      const double mean_acc = run_.accuracy_.empty() ? kNaN : interval_accuracy / static_cast<double>(interval_steps);
      const double per_step = seconds / static_cast<double>(interval_steps);
      run_.reporter_.Progress(run_.step_, run_.total_steps_, mean_loss, mean_acc, lr, eps,
                              per_step * static_cast<double>(run_.total_steps_ - run_.step_));
      result.loss = mean_loss;
      interval_loss = interval_accuracy = 0;
      interval_steps = 0;
      interval_start = Clock::now();
    }
    if (run_.config_.training.eval_every > 0 && run_.step_ % run_.config_.training.eval_every == 0 &&
        run_.step_ != run_.total_steps_) {
      auto e = run_.Evaluate();
      if (!e.ok()) {
        WEFT_RETURN_IF_ERROR(recover(e.status()));
        continue;
      }
      if (e->examples > 0) run_.reporter_.Evaluation(run_.step_, e->loss, e->accuracy, e->examples);
    }
    if (run_.checkpoints_ != nullptr && run_.step_ != run_.total_steps_ && policy.Due(run_.step_, Clock::now())) {
      auto saved = run_.Save(run_.step_);
      if (!saved.ok()) {
        WEFT_RETURN_IF_ERROR(recover(saved.status().WithContext(StrCat("saving at step ", run_.step_))));
        continue;
      }
      result.checkpoint = *saved;
      policy.Saved(run_.step_, Clock::now());
      saved_step = run_.step_;
      WEFT_LOG(INFO) << "saved " << result.checkpoint;
    }
    if (run_.step_ == run_.total_steps_ && EndsInLoop()) {
      // The end needs the ps tasks too: a fault there goes back to the
      // checkpoint like any other.
      Status ended = run_.EndOfTraining(saved_step, &result);
      if (!ended.ok()) {
        WEFT_RETURN_IF_ERROR(recover(ended));
        continue;
      }
      run_.ended_ = true;
    }
  }
  if (interval_steps > 0) result.loss = interval_loss / static_cast<double>(interval_steps);
  AfterSteps(run_.step_ - first_step, &result);
  if (!run_.ended_) WEFT_RETURN_IF_ERROR(run_.EndOfTraining(saved_step, &result));
  const int64_t trained = run_.step_ - first_step;
  result.examples_per_sec = train_seconds > 0 ? static_cast<double>(trained * batch_size) / train_seconds : 0;
  result.input_wait_fraction = train_seconds > 0 ? (run_.pipeline_->wait_seconds() - wait_at_start) / train_seconds : 0;
  run_.reporter_.Note(StrCat("trained ", trained, " steps in ", Fixed(train_seconds, 1), " s; waiting for input took ",
                             Fixed(100 * result.input_wait_fraction, 1), "% of it"));
  WEFT_RETURN_IF_ERROR(Finish(trained, &result));
  run_.reporter_.Final(result);
  return result;
}

}  // namespace weft::train::internal
