#include "core/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace weft {
namespace {

// Every index in [0, n) is visited exactly once.
void ExpectCoversOnce(ThreadPool& pool, int64_t n, int64_t cost) {
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  pool.ParallelFor(n, cost, [&](int64_t begin, int64_t end) {
    ASSERT_LE(0, begin);
    ASSERT_LE(begin, end);
    ASSERT_LE(end, n);
    for (int64_t i = begin; i < end; ++i) hits[static_cast<std::size_t>(i)]++;
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)], 1) << "index " << i;
}

TEST(ThreadPool, ParallelForCoversRangeOnce) {
  ThreadPool pool(3, "test");
  ExpectCoversOnce(pool, 1, 1);
  ExpectCoversOnce(pool, 7, 1'000'000);
  ExpectCoversOnce(pool, 100'003, 100);
  ExpectCoversOnce(pool, 1000, 1);  // too cheap to split: runs inline
}

TEST(ThreadPool, EmptyRangeDoesNothing) {
  ThreadPool pool(2, "test");
  bool called = false;
  pool.ParallelFor(0, 100, [&](int64_t, int64_t) { called = true; });
  pool.ParallelFor(-5, 100, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(ThreadPool, ZeroThreadsRunsInline) {
  ThreadPool pool(0, "inline");
  EXPECT_EQ(pool.num_threads(), 0);
  ExpectCoversOnce(pool, 10'000, 1'000'000);
  int ran = 0;
  pool.Schedule([&] { ++ran; });
  EXPECT_EQ(ran, 1);
}

TEST(ThreadPool, NestedParallelForDoesNotDeadlock) {
  ThreadPool pool(2, "test");
  std::atomic<int64_t> total{0};
  pool.ParallelFor(8, 10'000'000, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      pool.ParallelFor(1000, 100'000, [&](int64_t b, int64_t e) { total += e - b; });
    }
  });
  EXPECT_EQ(total.load(), 8 * 1000);
}

TEST(ThreadPool, ScheduledWorkFinishesBeforeDestruction) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(2, "test");
    for (int i = 0; i < 100; ++i) pool.Schedule([&] { ran++; });
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(ThreadPool, AvailableCoresIsPositive) { EXPECT_GE(AvailableCores(), 1); }

}  // namespace
}  // namespace weft
