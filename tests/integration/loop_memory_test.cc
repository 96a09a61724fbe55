// A loop of 1,000,000 iterations with a scalar body runs in bounded
// memory: finished iterations are recycled, so the peak resident set after
// a million iterations is what it was after ten thousand, give or take
// allocator noise. (A leak of even 64 bytes per iteration would show as
// 64 MB.) Labelled slow (the ASan job leaves it out; it also skips itself
// under ASan, whose quarantine keeps freed memory resident).
#include <gtest/gtest.h>

#include <sys/resource.h>

#include "core/graph/builder.h"
#include "core/runtime/session.h"
#include "tests/support/loop_test_graphs.h"
#include "tests/support/runtime_env.h"

namespace weft {
namespace {

long PeakRssKb() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST(LoopMemory, AMillionIterationsRunInBoundedMemory) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan keeps freed blocks in a 256 MiB quarantine before reuse, so the
  // peak resident set measures the sanitizer, not the loop. The release
  // build runs this test.
  GTEST_SKIP() << "peak RSS is not meaningful under AddressSanitizer (quarantine)";
#endif
  testing::RuntimeEnv env;
  auto session = testing::SumLoopSession(env, 10);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"n", Tensor::Scalar<int64_t>(10000)}}, {"count", "sum"}, {}, &out).ok());
  const long before = PeakRssKb();
  constexpr int64_t kN = 1000000;
  Status status = session->Run({{"n", Tensor::Scalar<int64_t>(kN)}}, {"count", "sum"}, {}, &out);
  ASSERT_TRUE(status.ok()) << status.ToString();
  const long after = PeakRssKb();
  EXPECT_EQ(out[0].scalar<int64_t>(), kN);
  EXPECT_EQ(out[1].scalar<int64_t>(), kN * (kN - 1) / 2);
  EXPECT_LT(after - before, 16 * 1024) << "peak RSS grew from " << before << " KiB to " << after << " KiB";
  std::printf("peak RSS: %ld KiB after 10,000 iterations, %ld KiB after 1,000,000\n", before, after);
}

}  // namespace
}  // namespace weft
