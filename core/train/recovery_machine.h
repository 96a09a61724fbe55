// recovery = "auto" (docs/distributed.md, "Recovery") as state machines:
// the decisions only, with no process, clock or RPC in them, so that each
// transition is unit-tested (tests/unit/train/recovery_machine_test.cc).
// recovery.cc and run.cc drive them: they ask the tasks, restore, sleep,
// and feed each answer in as an event.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace weft::train::internal {

// Where the chief of a run with recovery = "auto" starts (Run::Start).
enum class ChiefStart {
  kFresh,             // no checkpoint yet: initialise the variables
  kResume,            // --resume: restore the newest checkpoint
  kResumeByRecovery,  // started again, the ps tasks lost a variable: restore
  kKeep,              // started again, the ps tasks kept every variable
                      // (asynchronous): carry on at this worker's progress
};

// |resume|: --resume. |has_checkpoint|: the newest checkpoint opens.
// |all_variables_set|: every variable on the ps tasks has a value (asked
// in asynchronous mode only; a synchronous run always restores, since
// nothing says which update reached which ps task).
ChiefStart DecideChiefStart(bool resume, bool has_checkpoint, bool all_variables_set);
const char* ChiefStartName(ChiefStart s);

// The chief after a recoverable failure (Run::Recover): wait until every
// ps task answers, restore the newest checkpoint when one was restarted
// (or always, in synchronous mode), and check that none was restarted
// during the restore.
//
//   kWaitingForTasks --TasksAnswered, none restarted, not always--> kNothingToRestore
//   kWaitingForTasks --TasksAnswered, a task restarted or always--> kRestoring
//   kRestoring       --Restored-------------------------------------> kCheckingRestore
//   kRestoring       --RestoreFailed, recoverable, in time-----------> kWaitingForTasks
//   kRestoring       --RestoreFailed, not recoverable----------------> kFailed
//   kRestoring       --NoCheckpoint----------------------------------> kFailed
//   kCheckingRestore --TasksAnswered, the same incarnations----------> kRecovered
//   kCheckingRestore --TasksAnswered, another restart meanwhile------> kWaitingForTasks
//   any waiting state --TasksSilent (past the deadline)--------------> kGaveUp
//   kRestoring       --RestoreFailed, recoverable, past the deadline--> kGaveUp
//
// kNothingToRestore, kRecovered, kFailed and kGaveUp are final.
class ChiefRecovery {
 public:
  enum class State { kWaitingForTasks, kRestoring, kCheckingRestore, kNothingToRestore, kRecovered, kFailed, kGaveUp };

  // |why|: the failure recovered from. |known|: the incarnation of each ps
  // task whose variables the chief set last. |always|: restore even when
  // no ps task was restarted (synchronous mode). |timeout_s|: for messages.
  ChiefRecovery(Status why, std::map<std::string, uint64_t> known, bool always, int64_t timeout_s);

  State state() const { return state_; }
  bool done() const;

  // Every ps task answered with its incarnation.
  void TasksAnswered(const std::map<std::string, uint64_t>& now);
  // Not every ps task answered by the deadline: |status| says which.
  void TasksSilent(const Status& status);
  // No checkpoint opens to restore from.
  void NoCheckpoint(const std::string& dir);
  void Restored();
  // The restore failed with |status|; |recoverable| as IsRecoverable says;
  // |past_deadline|: the recovery's time is up.
  void RestoreFailed(const Status& status, bool recoverable, bool past_deadline);

  // The ps tasks seen restarted, "/job:ps/task:0 (incarnation a -> b)".
  const std::vector<std::string>& restarted() const { return restarted_; }
  // Once kRecovered: the incarnations the restored state belongs to.
  const std::map<std::string, uint64_t>& incarnations() const { return known_; }
  // Once kFailed or kGaveUp: what the run stops with.
  const Status& error() const { return error_; }

  static const char* StateName(State s);

 private:
  void Move(State to, const char* event);
  // kGaveUp, the error naming |why_|, what |status| says and the timeout.
  void GiveUp(const Status& status, const char* event);

  Status why_;
  std::map<std::string, uint64_t> known_;
  std::map<std::string, uint64_t> before_restore_;
  bool always_;
  int64_t timeout_s_;
  State state_ = State::kWaitingForTasks;
  std::vector<std::string> restarted_;
  Status error_;
};

// A worker other than the chief after a recoverable failure
// (Run::WaitForRecovery): it waits until every variable has a value again
// (the chief restores them).
//
//   kWaiting --Ready(all set)------------------> kBack
//   kWaiting --Ready(some unset) / AskFailed(recoverable)--> kWaiting
//   kWaiting --AskFailed(not recoverable)-------> kFailed
//   kWaiting --TimedOut------------------------> kGaveUp
class WorkerRecovery {
 public:
  enum class State { kWaiting, kBack, kFailed, kGaveUp };

  WorkerRecovery(Status why, int64_t timeout_s) : why_(std::move(why)), timeout_s_(timeout_s) {}

  State state() const { return state_; }
  bool done() const { return state_ != State::kWaiting; }
  // |set| of the |total| variables have a value.
  void Ready(std::size_t set, std::size_t total);
  void AskFailed(const Status& status, bool recoverable);
  void TimedOut();
  const Status& error() const { return error_; }

  static const char* StateName(State s);

 private:
  Status why_;
  int64_t timeout_s_;
  State state_ = State::kWaiting;
  Status error_;
};

}  // namespace weft::train::internal
