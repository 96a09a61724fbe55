#include "core/train/recovery_machine.h"

#include "core/base/logging.h"
#include "core/base/strings.h"
#include "core/distributed/incarnation.h"

namespace weft::train::internal {

ChiefStart DecideChiefStart(bool resume, bool has_checkpoint, bool all_variables_set) {
  if (resume) return ChiefStart::kResume;
  if (!has_checkpoint) return ChiefStart::kFresh;
  return all_variables_set ? ChiefStart::kKeep : ChiefStart::kResumeByRecovery;
}

const char* ChiefStartName(ChiefStart s) {
  switch (s) {
    case ChiefStart::kFresh: return "fresh";
    case ChiefStart::kResume: return "resume";
    case ChiefStart::kResumeByRecovery: return "resume by recovery";
    case ChiefStart::kKeep: return "keep";
  }
  return "?";
}

ChiefRecovery::ChiefRecovery(Status why, std::map<std::string, uint64_t> known, bool always, int64_t timeout_s)
    : why_(std::move(why)), known_(std::move(known)), always_(always), timeout_s_(timeout_s) {}

bool ChiefRecovery::done() const {
  return state_ == State::kNothingToRestore || state_ == State::kRecovered || state_ == State::kFailed ||
         state_ == State::kGaveUp;
}

const char* ChiefRecovery::StateName(State s) {
  switch (s) {
    case State::kWaitingForTasks: return "waiting for tasks";
    case State::kRestoring: return "restoring";
    case State::kCheckingRestore: return "checking the restore";
    case State::kNothingToRestore: return "nothing to restore";
    case State::kRecovered: return "recovered";
    case State::kFailed: return "failed";
    case State::kGaveUp: return "gave up";
  }
  return "?";
}

void ChiefRecovery::Move(State to, const char* event) {
  WEFT_LOG(DEBUG) << "recovery: " << StateName(state_) << " --" << event << "--> " << StateName(to);
  state_ = to;
}

void ChiefRecovery::GiveUp(const Status& status, const char* event) {
  error_ = Status(Code::kUnavailable, StrCat(why_.message(), "; then ", status.message(), "; gave up after ",
                                             timeout_s_, " s (recovery_timeout_s)"));
  Move(State::kGaveUp, event);
}

void ChiefRecovery::TasksAnswered(const std::map<std::string, uint64_t>& now) {
  if (state_ == State::kWaitingForTasks) {
    restarted_.clear();
    for (const auto& [task, incarnation] : now) {
      const auto it = known_.find(task);
      const uint64_t known = it == known_.end() ? 0 : it->second;
      if (known != incarnation) {
        restarted_.push_back(StrCat(task, " (incarnation ", dist::FormatIncarnation(known), " -> ",
                                    dist::FormatIncarnation(incarnation), ")"));
      }
    }
    before_restore_ = now;
    Move(restarted_.empty() && !always_ ? State::kNothingToRestore : State::kRestoring, "tasks answered");
  } else if (state_ == State::kCheckingRestore) {
    // Whole only if no ps task was restarted during the restore.
    if (now == before_restore_) {
      known_ = now;
      Move(State::kRecovered, "tasks answered, none restarted meanwhile");
    } else {
      Move(State::kWaitingForTasks, "tasks answered, one restarted meanwhile");
    }
  }
}

void ChiefRecovery::TasksSilent(const Status& status) {
  if (state_ != State::kWaitingForTasks && state_ != State::kCheckingRestore) return;
  GiveUp(status, "tasks silent");
}

void ChiefRecovery::NoCheckpoint(const std::string& dir) {
  if (state_ != State::kRestoring) return;
  error_ =
      FailedPreconditionError(why_.message(), "; and no checkpoint in ", dir, " opens to restore the ps tasks from");
  Move(State::kFailed, "no checkpoint");
}

void ChiefRecovery::Restored() {
  if (state_ == State::kRestoring) Move(State::kCheckingRestore, "restored");
}

void ChiefRecovery::RestoreFailed(const Status& status, bool recoverable, bool past_deadline) {
  if (state_ != State::kRestoring) return;
  if (!recoverable) {
    error_ = status;
    Move(State::kFailed, "restore failed");
  } else if (past_deadline) {
    GiveUp(status, "restore failed past the deadline");
  } else {
    Move(State::kWaitingForTasks, "restore failed, another fault meanwhile");
  }
}

const char* WorkerRecovery::StateName(State s) {
  switch (s) {
    case State::kWaiting: return "waiting";
    case State::kBack: return "back";
    case State::kFailed: return "failed";
    case State::kGaveUp: return "gave up";
  }
  return "?";
}

void WorkerRecovery::Ready(std::size_t set, std::size_t total) {
  if (state_ == State::kWaiting && set == total) state_ = State::kBack;
}

void WorkerRecovery::AskFailed(const Status& status, bool recoverable) {
  if (state_ != State::kWaiting || recoverable) return;
  error_ = status;
  state_ = State::kFailed;
}

void WorkerRecovery::TimedOut() {
  if (state_ != State::kWaiting) return;
  error_ = Status(Code::kUnavailable, StrCat(why_.message(), "; the variables did not come back within ", timeout_s_,
                                             " s; gave up (recovery_timeout_s)"));
  state_ = State::kGaveUp;
}

}  // namespace weft::train::internal
