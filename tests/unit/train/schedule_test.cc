// train::LearningRateAt against torch.optim.lr_scheduler (StepLR,
// ExponentialLR, CosineAnnealingLR, LambdaLR for warm-up), from
// tests/data/optimizer_reference/schedules.toml (written by
// tests/integration/make_optimizer_reference.py), plus the edges derived
// by hand. ClipByGlobalNorm runs graphs and is tested in optimizer_test.
#include "core/train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <set>
#include <string>

#include "tests/integration/optimizer_reference.h"

namespace weft {
namespace {

using testing::Close;
using testing::Numbers;

TEST(LearningRateAt, MatchesTorchSchedulers) {
  const toml::table reference = testing::ReadReference("schedules.toml");
  const toml::array* cases = reference["schedule"].as_array();
  ASSERT_NE(cases, nullptr);
  std::set<std::string> names;
  for (const toml::node& node : *cases) {
    const toml::table& c = *node.as_table();
    const std::string name = c["name"].value_or(std::string());
    names.insert(name);
    SCOPED_TRACE(name);
    SCOPED_TRACE(c["torch"].value_or(std::string()));
    const config::ScheduleConfig schedule = testing::ScheduleFrom(c["config"].as_table());
    const double base = c["base_lr"].value_or(0.0);
    const int64_t run_steps = c["run_steps"].value_or(int64_t{0});
    const std::vector<double> want = Numbers(c["lr"]);
    ASSERT_GE(want.size(), 17u);
    for (std::size_t s = 0; s < want.size(); ++s) {
      // torch applies its factors one step at a time (lr *= gamma); the
      // closed form differs from that by rounding only.
      EXPECT_TRUE(Close(train::LearningRateAt(schedule, base, static_cast<int64_t>(s), run_steps), want[s], 1e-12))
          << "step " << s;
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"constant", "constant_warmup", "step", "step_warmup", "exponential",
                                          "exponential_smooth", "exponential_staircase", "cosine_run",
                                          "cosine_total_steps", "cosine_warmup"}));
}

config::ScheduleConfig Cosine(int64_t total_steps, double min_lr) {
  config::ScheduleConfig s;
  s.kind = "cosine";
  s.total_steps = total_steps;
  s.min_learning_rate = min_lr;
  return s;
}

TEST(LearningRateAt, CosineHoldsItsFloorAfterThePeriod) {
  // By hand: at step T the cosine factor is (1 + cos(pi)) / 2 = 0.
  const config::ScheduleConfig s = Cosine(10, 0.01);
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 0.1, 10, 100), 0.01);
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 0.1, 11, 100), 0.01);
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 0.1, 1000, 100), 0.01);
  // Half way: (1 + cos(pi / 2)) / 2 = 1/2.
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 0.1, 5, 100), 0.01 + 0.09 / 2);
}

TEST(LearningRateAt, CosineTakesTheRunsLengthWhenTotalStepsIsZero) {
  const config::ScheduleConfig s = Cosine(0, 0);
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 0.2, 25, 100), 0.2 * (1 + std::cos(std::numbers::pi / 4)) / 2);
  // No length known at all: no decay.
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 0.2, 25, 0), 0.2);
}

TEST(LearningRateAt, NegativeStepCountsAsTheFirst) {
  config::ScheduleConfig s;
  s.kind = "exponential";
  s.decay_steps = 1;
  s.decay_rate = 0.5;
  s.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 1.0, -3, 10), 0.25);
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 1.0, 0, 10), 0.25);
  // Step 3: warm-up done (4 / 4), decay 0.5^3.
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 1.0, 3, 10), 0.125);
}

TEST(LearningRateAt, StepDecaysAtEachMultipleOfStepSize) {
  config::ScheduleConfig s;
  s.kind = "step";
  s.step_size = 3;
  s.gamma = 0.1;
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 1.0, 2, 10), 1.0);
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 1.0, 3, 10), 0.1);
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 1.0, 6, 10), 0.1 * 0.1);
  // A warm-up of one step changes nothing.
  s.warmup_steps = 1;
  EXPECT_DOUBLE_EQ(train::LearningRateAt(s, 1.0, 0, 10), 1.0);
}

}  // namespace
}  // namespace weft
