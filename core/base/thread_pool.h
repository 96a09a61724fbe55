// A fixed-size pool of worker threads, with a blocking ParallelFor.
//
//   ThreadPool pool(4, "intra_op");
//   pool.ParallelFor(n, /*cost_per_unit_ns=*/50, [&](int64_t begin, int64_t end) {
//     for (int64_t i = begin; i < end; ++i) y[i] = f(x[i]);
//   });
//
// ParallelFor runs work on the pool and on the calling thread, so a pool of
// N threads uses N+1 cores; it is safe to nest (an inner ParallelFor on a
// worker never waits for work that nobody is running). Loops too small to
// be worth splitting run inline on the caller.
#ifndef WEFT_CORE_BASE_THREAD_POOL_H_
#define WEFT_CORE_BASE_THREAD_POOL_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace weft {

class ThreadPool {
 public:
  // Starts |num_threads| workers (0 is allowed: everything runs inline).
  ThreadPool(int num_threads, std::string name);
  ~ThreadPool();  // Finishes queued work, then joins.
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()); }
  const std::string& name() const { return name_; }

  // Runs |fn| on some worker, or inline when the pool has none.
  void Schedule(std::function<void()> fn);

  // Calls |fn|(begin, end) over disjoint ranges covering [0, |count|) and
  // returns when all have run. |cost_per_unit_ns| is an estimate of the
  // work per index, used to decide how finely to split.
  void ParallelFor(int64_t count, int64_t cost_per_unit_ns, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();

  std::string name_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

// The number of cores this process may run on (its CPU affinity), >= 1.
int AvailableCores();

}  // namespace weft

#endif  // WEFT_CORE_BASE_THREAD_POOL_H_
