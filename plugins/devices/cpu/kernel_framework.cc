#include "kernel_framework.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

namespace weft::cpu {
namespace {

#if defined(WEFT_PARALLEL_FOR_ON_HOST_POOL)
// The tsan build's ParallelFor: the host's pool runs the blocks; a loop
// inside a block runs inline, and the first exception is kept for the
// caller (none may cross the C ABI).
thread_local bool t_in_parallel = false;

struct HostLoop {
  const std::function<void(int64_t, int64_t)>* fn;
  FirstError error;
};

void RunHostBlock(void* user, int64_t begin, int64_t end) {
  auto* loop = static_cast<HostLoop*>(user);
  const bool outer = t_in_parallel;
  t_in_parallel = true;
  loop->error.Run([&] { (*loop->fn)(begin, end); });
  t_in_parallel = outer;
}

bool InParallel() { return t_in_parallel; }
#else
bool InParallel() { return omp_in_parallel() != 0; }
#endif

}  // namespace

void ParallelFor(int64_t n, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t shards = ShardsFor(n, cost_per_unit);
  if (shards <= 1 || InParallel()) {
    fn(0, n);
    return;
  }
#if defined(WEFT_PARALLEL_FOR_ON_HOST_POOL)
  HostLoop loop;
  loop.fn = &fn;
  sdk::host()->parallel_for(n, std::max<int64_t>(cost_per_unit, 1), RunHostBlock, &loop);
  loop.error.Rethrow();
  return;
#endif
  // The loops run on the calling thread's OpenMP team, the one oneDNN uses,
  // not on the host's intra-op pool: OpenMP workers spin for a while after
  // a parallel region ends, so with two sets of threads a oneDNN kernel
  // followed by a loop would put three busy threads on two cores. A few
  // blocks per shard, claimed in turn, let a thread that the machine's
  // other load slows take fewer; which thread runs a block never changes
  // what the block computes, so results do not depend on the schedule.
  const int64_t blocks = std::min(n, shards * 4);
  const int64_t block = (n + blocks - 1) / blocks;
  std::atomic<int64_t> next{0};
  FirstError error;  // none may leave the OpenMP region
#pragma omp parallel num_threads(static_cast <int>(shards))
  {
    while (!error.failed()) {
      const int64_t begin = next.fetch_add(block, std::memory_order_relaxed);
      if (begin >= n) break;
      error.Run([&] { fn(begin, std::min(n, begin + block)); });
    }
  }
  error.Rethrow();
}

}  // namespace weft::cpu
