// runtime/step_profile.h: the busy and waiting time summed from trace
// events, and the table a profile prints. Expected figures are worked out
// by hand from the intervals below.
#include "core/runtime/step_profile.h"

#include <gtest/gtest.h>

namespace weft::runtime {
namespace {

TraceRecorder::Event Op(const std::string& op, int64_t start_us, int64_t duration_us) {
  return {"n", op, "/device:CPU:0", 1, 1, start_us, duration_us, {}};
}

TEST(SummarizeBusy, OverlappingKernelsCountOnceAndAReceiveOnlyWhereNothingRan) {
  // Kernels on [0,10), [5,15), [20,25) and a _Send on [40,41): busy 10 + 5 + 5 + 1 = 21.
  // A _Recv on [10,30) waits where nothing ran: [15,20) and [25,30) = 10;
  // one on [50,60) alone: 10 more; one inside a kernel ([1,4)): nothing.
  const BusyTime busy = SummarizeBusy({Op("MatMul", 0, 10), Op("Relu", 5, 10), Op("_Recv", 10, 20), Op("Add", 20, 5),
                                       Op("_Send", 40, 1), Op("_Recv", 50, 10), Op("_Recv", 1, 3)});
  EXPECT_EQ(busy.compute_us, 21);
  EXPECT_EQ(busy.wait_us, 20);
}

TEST(SummarizeBusy, NothingRecordedIsNothingBusy) {
  const BusyTime busy = SummarizeBusy({});
  EXPECT_EQ(busy.compute_us, 0);
  EXPECT_EQ(busy.wait_us, 0);
  // A negative duration (a clock stepping back) counts as none.
  EXPECT_EQ(SummarizeBusy({Op("Add", 10, -5)}).compute_us, 0);
}

TEST(StepProfile, EmptyFormatsAsNothing) {
  StepProfile profile;
  EXPECT_TRUE(profile.empty());
  EXPECT_EQ(profile.Format(), "");
}

TEST(StepProfile, TheTableHoldsEachTasksMeansAndNamesWhatComputedLongest) {
  StepProfile profile;
  // Two steps: the ps computes 6 and 8 ms (mean 7), the worker 2 and 2.
  profile.Add({1, 10, {{"/job:worker/task:0", 9, 8, 2, 5.5, 0.25, 0.05}, {"/job:ps/task:0", 8, 7.5, 6, 1, 0.2, 0.1}}});
  profile.Add(
      {2, 12, {{"/job:worker/task:0", 11, 10, 2, 7.5, 0.25, 0.05}, {"/job:ps/task:0", 9, 8.5, 8, 0, 0.2, 0.1}}});
  EXPECT_FALSE(profile.empty());
  EXPECT_EQ(profile.steps().size(), 2u);
  const std::string table = profile.Format();
  EXPECT_NE(table.find("where the time of 2 steps went (means, ms per step"), std::string::npos) << table;
  EXPECT_NE(table.find("  step 11.00 ms\n"), std::string::npos) << table;
  // worker: round trip 10, on task 9, compute 2, waiting 6.5, serialize
  // 0.25, queued 0.05, other 9 - 2 - 6.5 - 0.25 - 0.05 = 0.2.
  EXPECT_NE(table.find("/job:worker/task:0         10.00        9.00        2.00        6.50        0.25        0.05"
                       "        0.20\n"),
            std::string::npos)
      << table;
  // ps: 8.5, 8, 7, 0.5, 0.2, 0.1, other 8 - 7 - 0.5 - 0.2 - 0.1 = 0.2.
  EXPECT_NE(table.find("/job:ps/task:0              8.50        8.00        7.00        0.50        0.20        0.10"
                       "        0.20\n"),
            std::string::npos)
      << table;
  // The worker answered last (10 ms round trip, 9 on the task: 1 ms to be
  // asked and answered); the caller's own time is 11 - 10 = 1 ms.
  EXPECT_NE(table.find("/job:ps/task:0 computed longest: 7.00 of the step's 11.00 ms; the last task to answer, "
                       "/job:worker/task:0, took 1.00 ms beyond its own part to be asked and answered, and the caller "
                       "1.00 ms of its own around the calls"),
            std::string::npos)
      << table;
  // The worker is listed first: tasks keep the order they first came in.
  EXPECT_LT(table.find("/job:worker/task:0"), table.find("/job:ps/task:0"));
}

TEST(StepProfile, ASessionInThisProcessIsOneRowWithoutCalls) {
  StepProfile profile;
  profile.Add({7, 5, {{"", 0, 5, 4, 0, 0, 0}}});
  const std::string table = profile.Format();
  EXPECT_NE(table.find("where the time of 1 step went"), std::string::npos) << table;
  EXPECT_NE(table.find("this process"), std::string::npos) << table;
  EXPECT_NE(table.find("this process computed longest: 4.00 of the step's 5.00 ms\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("asked and answered"), std::string::npos) << table;
}

}  // namespace
}  // namespace weft::runtime
