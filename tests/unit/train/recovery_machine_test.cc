// recovery = "auto" as state machines (core/train/recovery_machine.h):
// every transition, fed the events a run would see, with no process.
#include "core/train/recovery_machine.h"

#include <gtest/gtest.h>

namespace weft::train::internal {
namespace {

using State = ChiefRecovery::State;
using Incarnations = std::map<std::string, uint64_t>;

const Incarnations kKnown = {{"/job:ps/task:0", 0x10}, {"/job:ps/task:1", 0x20}};

ChiefRecovery Machine(bool always = false) {
  return ChiefRecovery(UnavailableError("training step 7: the ps task is gone"), kKnown, always, 30);
}

TEST(ChiefStart, ResumeFlagWinsThenCheckpointThenWhatThePsTasksKept) {
  EXPECT_EQ(DecideChiefStart(true, false, false), ChiefStart::kResume);
  EXPECT_EQ(DecideChiefStart(true, true, true), ChiefStart::kResume);
  EXPECT_EQ(DecideChiefStart(false, false, true), ChiefStart::kFresh);
  EXPECT_EQ(DecideChiefStart(false, true, true), ChiefStart::kKeep);
  EXPECT_EQ(DecideChiefStart(false, true, false), ChiefStart::kResumeByRecovery);
  EXPECT_STREQ(ChiefStartName(ChiefStart::kResumeByRecovery), "resume by recovery");
}

TEST(ChiefRecovery, NoTaskRestartedMeansNothingToRestore) {
  ChiefRecovery m = Machine();
  EXPECT_EQ(m.state(), State::kWaitingForTasks);
  EXPECT_FALSE(m.done());
  m.TasksAnswered(kKnown);
  EXPECT_EQ(m.state(), State::kNothingToRestore);
  EXPECT_TRUE(m.done());
  EXPECT_TRUE(m.restarted().empty());
}

TEST(ChiefRecovery, SyncModeRestoresEvenWhenNoTaskRestarted) {
  ChiefRecovery m = Machine(/*always=*/true);
  m.TasksAnswered(kKnown);
  EXPECT_EQ(m.state(), State::kRestoring);
  m.Restored();
  EXPECT_EQ(m.state(), State::kCheckingRestore);
  m.TasksAnswered(kKnown);
  EXPECT_EQ(m.state(), State::kRecovered);
  EXPECT_TRUE(m.restarted().empty());
}

TEST(ChiefRecovery, ARestartedTaskIsRestoredAndItsIncarnationKept) {
  ChiefRecovery m = Machine();
  const Incarnations now = {{"/job:ps/task:0", 0x10}, {"/job:ps/task:1", 0x21}};
  m.TasksAnswered(now);
  EXPECT_EQ(m.state(), State::kRestoring);
  ASSERT_EQ(m.restarted().size(), 1u);
  EXPECT_NE(m.restarted()[0].find("/job:ps/task:1 (incarnation "), std::string::npos) << m.restarted()[0];
  m.Restored();
  m.TasksAnswered(now);
  EXPECT_EQ(m.state(), State::kRecovered);
  EXPECT_EQ(m.incarnations(), now);
}

TEST(ChiefRecovery, ARestartDuringTheRestoreStartsOver) {
  ChiefRecovery m = Machine();
  const Incarnations first = {{"/job:ps/task:0", 0x11}, {"/job:ps/task:1", 0x20}};
  const Incarnations second = {{"/job:ps/task:0", 0x11}, {"/job:ps/task:1", 0x22}};
  m.TasksAnswered(first);
  m.Restored();
  m.TasksAnswered(second);  // task 1 restarted while the chief restored
  EXPECT_EQ(m.state(), State::kWaitingForTasks);
  m.TasksAnswered(second);
  EXPECT_EQ(m.state(), State::kRestoring);
  EXPECT_EQ(m.restarted().size(), 2u);  // both differ from what the chief set last
  m.Restored();
  m.TasksAnswered(second);
  EXPECT_EQ(m.state(), State::kRecovered);
  EXPECT_EQ(m.incarnations(), second);
}

TEST(ChiefRecovery, AnUnknownTaskCountsAsRestarted) {
  ChiefRecovery m = Machine();
  Incarnations now = kKnown;
  now["/job:ps/task:2"] = 0x30;
  m.TasksAnswered(now);
  EXPECT_EQ(m.state(), State::kRestoring);
  ASSERT_EQ(m.restarted().size(), 1u);
  EXPECT_EQ(m.restarted()[0].rfind("/job:ps/task:2 (incarnation ", 0), 0u) << m.restarted()[0];
}

TEST(ChiefRecovery, SilentTasksGiveUpNamingTheCauseAndTheTimeout) {
  ChiefRecovery m = Machine();
  m.TasksSilent(UnavailableError("not every ps task answers: /job:ps/task:1 refused"));
  EXPECT_EQ(m.state(), State::kGaveUp);
  EXPECT_EQ(m.error().code(), Code::kUnavailable);
  EXPECT_EQ(m.error().message(),
            "training step 7: the ps task is gone; then not every ps task answers: /job:ps/task:1 refused; gave up "
            "after 30 s (recovery_timeout_s)");
}

TEST(ChiefRecovery, SilentTasksAfterTheRestoreGiveUpToo) {
  ChiefRecovery m = Machine(/*always=*/true);
  m.TasksAnswered(kKnown);
  m.Restored();
  m.TasksSilent(UnavailableError("no answer"));
  EXPECT_EQ(m.state(), State::kGaveUp);
}

TEST(ChiefRecovery, NoCheckpointFailsNamingTheDirectory) {
  ChiefRecovery m = Machine(/*always=*/true);
  m.TasksAnswered(kKnown);
  m.NoCheckpoint("/tmp/ckpt");
  EXPECT_EQ(m.state(), State::kFailed);
  EXPECT_EQ(m.error().code(), Code::kFailedPrecondition);
  EXPECT_EQ(m.error().message(),
            "training step 7: the ps task is gone; and no checkpoint in /tmp/ckpt opens to restore the ps tasks "
            "from");
}

TEST(ChiefRecovery, ARecoverableRestoreFailureWaitsForTheTasksAgain) {
  ChiefRecovery m = Machine(/*always=*/true);
  m.TasksAnswered(kKnown);
  m.RestoreFailed(UnavailableError("ps 1 lost"), /*recoverable=*/true, /*past_deadline=*/false);
  EXPECT_EQ(m.state(), State::kWaitingForTasks);
  EXPECT_FALSE(m.done());
}

TEST(ChiefRecovery, ARecoverableRestoreFailurePastTheDeadlineGivesUp) {
  ChiefRecovery m = Machine(/*always=*/true);
  m.TasksAnswered(kKnown);
  m.RestoreFailed(UnavailableError("ps 1 lost"), /*recoverable=*/true, /*past_deadline=*/true);
  EXPECT_EQ(m.state(), State::kGaveUp);
  EXPECT_EQ(m.error().message(),
            "training step 7: the ps task is gone; then ps 1 lost; gave up after 30 s (recovery_timeout_s)");
}

TEST(ChiefRecovery, AnUnrecoverableRestoreFailureIsTheError) {
  ChiefRecovery m = Machine(/*always=*/true);
  m.TasksAnswered(kKnown);
  m.RestoreFailed(InvalidArgumentError("the checkpoint's shape differs"), /*recoverable=*/false, false);
  EXPECT_EQ(m.state(), State::kFailed);
  EXPECT_EQ(m.error().code(), Code::kInvalidArgument);
  EXPECT_EQ(m.error().message(), "the checkpoint's shape differs");
}

TEST(ChiefRecovery, EventsOutOfTurnChangeNothing) {
  ChiefRecovery m = Machine();
  m.Restored();
  m.NoCheckpoint("/tmp/ckpt");
  m.RestoreFailed(UnavailableError("x"), true, true);
  EXPECT_EQ(m.state(), State::kWaitingForTasks);
  m.TasksAnswered(kKnown);
  ASSERT_EQ(m.state(), State::kNothingToRestore);
  m.TasksSilent(UnavailableError("late"));
  m.TasksAnswered({});
  EXPECT_EQ(m.state(), State::kNothingToRestore);
  EXPECT_STREQ(ChiefRecovery::StateName(m.state()), "nothing to restore");
}

TEST(WorkerRecovery, WaitsUntilEveryVariableIsBack) {
  WorkerRecovery m(UnavailableError("step 9 failed"), 60);
  m.Ready(2, 5);
  EXPECT_EQ(m.state(), WorkerRecovery::State::kWaiting);
  m.AskFailed(UnavailableError("ps 0 restarting"), /*recoverable=*/true);
  EXPECT_EQ(m.state(), WorkerRecovery::State::kWaiting);
  m.Ready(5, 5);
  EXPECT_EQ(m.state(), WorkerRecovery::State::kBack);
  EXPECT_TRUE(m.done());
  m.TimedOut();  // too late to matter
  EXPECT_EQ(m.state(), WorkerRecovery::State::kBack);
}

TEST(WorkerRecovery, AnUnrecoverableAnswerIsTheError) {
  WorkerRecovery m(UnavailableError("step 9 failed"), 60);
  m.AskFailed(InvalidArgumentError("no such variable"), /*recoverable=*/false);
  EXPECT_EQ(m.state(), WorkerRecovery::State::kFailed);
  EXPECT_EQ(m.error().message(), "no such variable");
}

TEST(WorkerRecovery, GivesUpAtTheTimeoutNamingIt) {
  WorkerRecovery m(UnavailableError("step 9 failed"), 60);
  m.TimedOut();
  EXPECT_EQ(m.state(), WorkerRecovery::State::kGaveUp);
  EXPECT_EQ(m.error().code(), Code::kUnavailable);
  EXPECT_EQ(m.error().message(),
            "step 9 failed; the variables did not come back within 60 s; gave up (recovery_timeout_s)");
  EXPECT_STREQ(WorkerRecovery::StateName(m.state()), "gave up");
}

}  // namespace
}  // namespace weft::train::internal
