// Dynamic batching for one model version (docs/serving.md, "Batching"):
// requests wait in a bounded queue; batch threads take every queued
// request of compatible shapes (up to max_batch_size rows), stack them
// along dimension 0, run them once and split the answers back.
//
// By default nothing waits on purpose: a batch thread that comes free takes
// what is queued, so at low load a request runs alone at once, and under
// load batches grow by themselves to the rate requests arrive at; the
// largest batch is where the servable's measured cost per row stops
// falling. TensorFlow Serving's keys (max_batch_size, batch_timeout_us,
// max_enqueued_batches, num_batch_threads) override it.
#ifndef WEFT_CORE_SERVING_BATCHER_H_
#define WEFT_CORE_SERVING_BATCHER_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/serving/metrics.h"
#include "core/serving/servable.h"

namespace weft::serving {

using Clock = std::chrono::steady_clock;

struct BatchTiming {
  double queue_seconds = 0;    // enqueue to the start of its run
  double compute_seconds = 0;  // the run
  int64_t batch_rows = 0;      // rows of the run it was part of
};

// Called once per task, on a batch thread: the outputs in signature
// order, or why not (DEADLINE_EXCEEDED: its deadline passed in the queue).
using BatchDone = std::function<void(Status, std::vector<Tensor>, const BatchTiming&)>;

struct BatchTask {
  std::vector<Tensor> inputs;  // signature order
  int64_t rows = 1;
  Clock::time_point enqueued;
  Clock::time_point deadline;
  BatchDone done;
};

struct BatchPolicy {
  bool enabled = true;
  int64_t max_batch_size = 64;
  int64_t batch_timeout_us = 0;  // 0: run when a thread is free
  int64_t max_enqueued_rows = 4096;
  int num_threads = 1;
  // The servable has a narrow session: a batch that starts while another
  // runs, or with more requests waiting, runs on it, so that under load
  // the cores go to batches in parallel (one thread each) and at low load
  // to one batch's kernels.
  bool share_cores = false;
};

// The policy for |servable| from its config.toml, filling unset keys
// from measurements (WarmUp must have run for them to exist); |cores| is
// the kernels' thread budget.
BatchPolicy ChoosePolicy(const Servable& servable, const config::ModelServingConfig& config, int cores);

struct BatcherMetrics {
  Histogram* batch_size = nullptr;
  Gauge* queue_depth = nullptr;
};

class Batcher {
 public:
  Batcher(std::shared_ptr<Servable> servable, BatchPolicy policy, BatcherMetrics metrics);
  // Answers what is queued, then joins the threads.
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues |task|, or refuses it at once with RESOURCE_EXHAUSTED when the
  // queue is full (the caller answers 429), or UNAVAILABLE once stopping.
  // A task of more rows than max_batch_size runs in several batches.
  Status Enqueue(BatchTask task);

  const BatchPolicy& policy() const { return policy_; }
  const Servable& servable() const { return *servable_; }
  int64_t queued_rows() const;

 private:
  void Loop();
  // Under |mutex_|: the next batch (empty when stopping with nothing
  // queued), and the expired tasks to answer 504.
  void Take(std::unique_lock<std::mutex>& lock, std::vector<BatchTask>& batch, std::vector<BatchTask>& expired);
  void RunBatch(std::vector<BatchTask>& batch, bool narrow);
  Status EnqueueSplit(BatchTask task);

  std::shared_ptr<Servable> servable_;
  BatchPolicy policy_;
  BatcherMetrics metrics_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<BatchTask> queue_;
  int64_t queued_rows_ = 0;
  int running_ = 0;  // batches being run
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Stacks |parts| (same dtype, same dimensions past the first) along
// dimension 0; and the rows [begin, begin + rows) of |t| as a tensor
// sharing its buffer.
Expected<Tensor> StackRows(const std::vector<const Tensor*>& parts);
Tensor SliceRows(const Tensor& t, int64_t begin, int64_t rows);

}  // namespace weft::serving

#endif  // WEFT_CORE_SERVING_BATCHER_H_
