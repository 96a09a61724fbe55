#include "core/train/recovery_machine.h"
#include "core/train/run.h"

namespace weft::train::internal {

Expected<std::map<std::string, uint64_t>> Run::PsIncarnations(Clock::time_point deadline) {
  std::map<std::string, uint64_t> out;
  std::vector<std::string> names;
  for (const dist::TaskSpec& t : cluster_->FindJob("ps")->tasks) names.push_back(dist::TaskPrefix("ps", t.index));
  Status last;
  for (;;) {
    for (const std::string& name : names) {
      if (out.count(name) != 0) continue;
      auto incarnation = runner().service().IncarnationOf(name, 2000);
      if (incarnation.ok()) {
        out[name] = *incarnation;
      } else {
        last = incarnation.status();
      }
    }
    if (out.size() == names.size()) return out;
    if (Clock::now() >= deadline) return UnavailableError("not every ps task answers: ", last.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Status Run::Recover(const Status& why, bool always) {
  const Clock::time_point start = Clock::now();
  const int64_t timeout_s = recovery_timeout_s();
  const Clock::time_point deadline = start + std::chrono::seconds(timeout_s);
  const int64_t before = step_;
  board_->SetState(StrCat("recovering: ", why.message().substr(0, 300)));
  reporter_.Note(StrCat("recovery: step ", step_ + 1, " failed: ", why.message(),
                        "; waiting for every ps task (recovery_timeout_s = ", timeout_s, ")"));
  using State = ChiefRecovery::State;
  ChiefRecovery machine(why, state_incarnations_, always, timeout_s);
  std::string restored_from;
  while (!machine.done()) {
    switch (machine.state()) {
      case State::kWaitingForTasks:
      case State::kCheckingRestore: {
        auto now = PsIncarnations(deadline);
        if (now.ok()) {
          machine.TasksAnswered(*now);
        } else {
          machine.TasksSilent(now.status());
        }
        break;
      }
      case State::kRestoring: {
        WEFT_ASSIGN_OR_RETURN(std::optional<std::string> latest, checkpoints_->Latest());
        if (!latest.has_value()) {
          machine.NoCheckpoint(config_.checkpoint.dir);
          break;
        }
        Status restored = Restore(*latest);
        if (restored.ok()) {
          restored_from = *latest;
          machine.Restored();
          break;
        }
        machine.RestoreFailed(restored, IsRecoverable(restored), Clock::now() >= deadline);
        // Another fault meanwhile: wait for the tasks again.
        if (!machine.done()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
        break;
      }
      default: break;
    }
  }
  switch (machine.state()) {
    case State::kNothingToRestore:
      reporter_.Note(StrCat("recovery: the ps tasks answer and none was restarted; nothing to restore (",
                            Fixed(Seconds(Clock::now() - start), 1), " s)"));
      board_->SetState("training");
      return Status();
    case State::kRecovered: {
      state_incarnations_ = machine.incarnations();
      const double seconds = Seconds(Clock::now() - start);
      const std::string cause =
          machine.restarted().empty()
              ? std::string(
                    " (no ps task was restarted, but the synchronous update may have reached only some of them)")
              : StrCat(" after ", StrJoin(machine.restarted(), ", "), " restarted");
      reporter_.Note(StrCat("recovered from ", restored_from, cause, ": step ", before, " -> ", step_, ", ",
                            before - step_, " steps lost, ", Fixed(seconds, 1), " s"));
      board_->SetState("training");
      return Status();
    }
    default: return machine.error();
  }
}

Status Run::WaitForRecovery(const Status& why) {
  const Clock::time_point start = Clock::now();
  const int64_t timeout_s = recovery_timeout_s();
  board_->SetState("waiting for the chief to restore the variables");
  reporter_.Note(StrCat("recovery: step ", step_ + 1, " failed: ", why.message(),
                        "; waiting for the chief to restore the variables (recovery_timeout_s = ", timeout_s, ")"));
  Clock::time_point next_note = start + std::chrono::seconds(10);
  WorkerRecovery machine(why, timeout_s);
  for (;;) {
    std::vector<Tensor> ready;
    Status asked = session_->Run({}, tg_.state_ready, {}, &ready);
    if (asked.ok()) {
      std::size_t count = 0;
      for (const Tensor& t : ready) count += *static_cast<const uint8_t*>(t.raw_data()) != 0 ? 1 : 0;
      machine.Ready(count, tg_.state_ready.size());
    } else {
      machine.AskFailed(asked, IsRecoverable(asked));
    }
    const Clock::time_point now = Clock::now();
    if (!machine.done() && now >= start + std::chrono::seconds(timeout_s)) machine.TimedOut();
    if (machine.state() == WorkerRecovery::State::kBack) {
      reporter_.Note(StrCat("recovery: every variable has a value again after ", Fixed(Seconds(now - start), 1),
                            " s; carrying on at step ", step_ + 1));
      board_->SetState("training");
      return Status();
    }
    if (machine.done()) return machine.error();
    if (now >= next_note) {
      reporter_.Note(
          StrCat("still waiting for the chief to restore the variables (", Fixed(Seconds(now - start), 0), " s)"));
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int64_t Run::RemoteProgress() {
  // The furthest any task recorded: one that restarted meanwhile lost it.
  int64_t furthest = 0;
  for (const std::string& task : OtherTasks()) {
    auto store = runner().service().KvStoreOf(task);
    if (!store.ok()) continue;
    auto value = (*store)->Get(StrCat("recovery/progress/", worker_), 0);
    if (value.ok()) furthest = std::max(furthest, RecordedStepValue(*value));
  }
  return furthest;
}

Status Run::StopHere(int64_t saved_step) {
  const int signal = options_.stop_signal->load();
  const std::string name = signal == SIGTERM ? "SIGTERM" : signal == SIGINT ? "SIGINT" : StrCat("signal ", signal);
  std::string saved;
  if (chief() && checkpoints_ != nullptr) {
    if (saved_step == step_) {
      auto latest = checkpoints_->Latest();
      if (latest.ok() && latest->has_value()) saved = StrCat("; ", **latest, " holds it: --resume continues from it");
    } else {
      auto prefix = Save(step_);
      saved = prefix.ok() ? StrCat("; saved ", *prefix, ": --resume continues from it")
                          : StrCat("; saving it failed (", prefix.status().message(), ")");
    }
  }
  return CancelledError("stopped by ", name, " at step ", step_, " of ", total_steps_, saved);
}

}  // namespace weft::train::internal
