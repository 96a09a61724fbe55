#include "core/base/thread_pool.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <memory>

namespace weft {
namespace {

// Below this much work a loop is not worth handing to other threads: waking
// a worker costs a few microseconds.
constexpr int64_t kMinShardCostNs = 20'000;

struct ForState {
  std::function<void(int64_t, int64_t)> fn;
  int64_t count = 0;
  int64_t block = 1;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> remaining{0};  // blocks not yet finished
  std::mutex mutex;
  std::condition_variable done;

  // Claims and runs blocks until none are left.
  void Drain() {
    while (true) {
      const int64_t begin = next.fetch_add(block);
      if (begin >= count) return;
      const int64_t end = std::min(count, begin + block);
      fn(begin, end);
      if (remaining.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(mutex);
        done.notify_all();
      }
    }
  }
};

}  // namespace

ThreadPool::ThreadPool(int num_threads, std::string name) : name_(std::move(name)) {
  workers_.reserve(static_cast<std::size_t>(std::max(0, num_threads)));
  for (int i = 0; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  if (workers_.empty()) {
    fn();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(fn));
  }
  wake_.notify_one();
}

void ThreadPool::WorkerLoop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ThreadPool::ParallelFor(int64_t count, int64_t cost_per_unit_ns, const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  const int64_t total_cost = count * std::max<int64_t>(cost_per_unit_ns, 1);
  const int64_t max_shards = static_cast<int64_t>(workers_.size()) + 1;
  const int64_t shards = std::min({max_shards, count, std::max<int64_t>(1, total_cost / kMinShardCostNs)});
  if (shards <= 1) {
    fn(0, count);
    return;
  }
  auto state = std::make_shared<ForState>();
  state->fn = fn;
  state->count = count;
  // A few blocks per shard lets faster threads take more of the work.
  const int64_t blocks = std::min(count, shards * 4);
  state->block = (count + blocks - 1) / blocks;
  state->remaining = (count + state->block - 1) / state->block;
  for (int64_t i = 0; i + 1 < shards; ++i) {
    Schedule([state] { state->Drain(); });
  }
  state->Drain();
  std::unique_lock<std::mutex> lock(state->mutex);
  state->done.wait(lock, [&] { return state->remaining.load() == 0; });
}

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

}  // namespace weft
