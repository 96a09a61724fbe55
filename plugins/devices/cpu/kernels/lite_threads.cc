// ParallelFor in the lite build (docs/lite.md), in place of
// kernel_framework.cc's OpenMP one: the blocks run on the pthreadpool that
// also runs XNNPACK's operators. One set of threads, as the full build's
// loops share OpenMP's team with oneDNN: pthreadpool's workers spin a
// while after a region ends, so a second set would put twice as many busy
// threads as cores between two XNNPACK operators.
#include "lite_threads.h"

#include <algorithm>

#include "../kernel_framework.h"
#include "weft/sdk/host.h"

namespace weft::cpu {
namespace {

thread_local bool t_in_parallel = false;

struct Loop {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n = 0, block = 1;
  FirstError error;  // none may leave a pthreadpool task
};

// Block |i| of the loop.
void RunBlock(void* context, size_t i) {
  auto* loop = static_cast<Loop*>(context);
  const int64_t begin = static_cast<int64_t>(i) * loop->block;
  const int64_t end = std::min(loop->n, begin + loop->block);
  const bool outer = t_in_parallel;
  t_in_parallel = true;
  loop->error.Run([&] { (*loop->fn)(begin, end); });
  t_in_parallel = outer;
}

}  // namespace

pthreadpool_t LitePool() {
  static const pthreadpool_t pool =
      pthreadpool_create(static_cast<size_t>(std::max<int64_t>(1, sdk::host()->intra_op_threads())));
  return pool;
}

void ParallelFor(int64_t n, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t shards = ShardsFor(n, cost_per_unit);
  if (shards <= 1 || t_in_parallel) {
    fn(0, n);
    return;
  }
  // A few blocks per thread, claimed in turn, as kernel_framework.cc does.
  Loop loop;
  loop.fn = &fn;
  loop.n = n;
  const int64_t blocks = std::min(n, shards * 4);
  loop.block = (n + blocks - 1) / blocks;
  pthreadpool_parallelize_1d(LitePool(), RunBlock, &loop, static_cast<size_t>((n + loop.block - 1) / loop.block), 0);
  loop.error.Rethrow();
}

}  // namespace weft::cpu
