#include "core/serving/batcher.h"

#include <algorithm>
#include <cstring>

#include "core/base/logging.h"
#include "core/base/strings.h"

namespace weft::serving {
namespace {

double SecondsBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Whether two tasks' inputs agree past dimension 0 (they can share a run).
bool Compatible(const BatchTask& a, const BatchTask& b) {
  for (std::size_t i = 0; i < a.inputs.size(); ++i) {
    const auto& x = a.inputs[i].shape().dims();
    const auto& y = b.inputs[i].shape().dims();
    if (x.size() != y.size() || !std::equal(x.begin() + 1, x.end(), y.begin() + 1)) return false;
  }
  return true;
}

// The answers of a task split into batch-sized parts, joined when the
// last part is done.
struct Join {
  std::mutex mutex;
  std::size_t remaining = 0;
  std::vector<std::vector<Tensor>> parts;
  Status status;
  BatchTiming timing;
  BatchDone done;
};

}  // namespace

Expected<Tensor> StackRows(const std::vector<const Tensor*>& parts) {
  if (parts.size() == 1) return *parts[0];
  Shape shape = parts[0]->shape();
  int64_t rows = 0;
  for (const Tensor* t : parts) rows += t->dim(0);
  shape.set_dim(0, rows);
  WEFT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(parts[0]->dtype(), shape));
  char* at = static_cast<char*>(out.raw_data());
  for (const Tensor* t : parts) {
    if (t->byte_size() > 0) std::memcpy(at, t->raw_data(), t->byte_size());
    at += t->byte_size();
  }
  return out;
}

Tensor SliceRows(const Tensor& t, int64_t begin, int64_t rows) {
  Shape shape = t.shape();
  const uint64_t row_bytes = t.dim(0) == 0 ? 0 : t.byte_size() / static_cast<uint64_t>(t.dim(0));
  shape.set_dim(0, rows);
  return Tensor(t.dtype(), shape, t.buffer(), t.offset() + static_cast<uint64_t>(begin) * row_bytes);
}

BatchPolicy ChoosePolicy(const Servable& servable, const config::ModelServingConfig& config, int cores) {
  BatchPolicy p;
  p.enabled = config.batching && servable.signature().batched;
  p.share_cores = servable.has_narrow() && !config.num_batch_threads.has_value();
  p.num_threads = p.share_cores ? std::max(1, cores) : static_cast<int>(config.num_batch_threads.value_or(1));
  if (!p.enabled) {
    p.max_batch_size = 1;
  } else if (config.max_batch_size.has_value()) {
    p.max_batch_size = *config.max_batch_size;
  } else {
    p.max_batch_size = servable.warmed_up() ? servable.EfficientBatchSize(64) : 32;
  }
  p.batch_timeout_us = config.batch_timeout_us.value_or(0);
  p.max_enqueued_rows = config.max_enqueued_batches.has_value() ? *config.max_enqueued_batches * p.max_batch_size
                                                                : std::max<int64_t>(4 * p.max_batch_size, 64);
  return p;
}

Batcher::Batcher(std::shared_ptr<Servable> servable, BatchPolicy policy, BatcherMetrics metrics)
    : servable_(std::move(servable)), policy_(policy), metrics_(metrics) {
  for (int i = 0; i < std::max(1, policy_.num_threads); ++i) threads_.emplace_back([this] { Loop(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int64_t Batcher::queued_rows() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_rows_;
}

Status Batcher::Enqueue(BatchTask task) {
  if (!policy_.enabled) task.rows = 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return UnavailableError("the model version is being unloaded");
    if (queued_rows_ > 0 && queued_rows_ + task.rows > policy_.max_enqueued_rows) {
      return ResourceExhaustedError("the queue of ", servable_->model(), " version ", servable_->version(),
                                    " is full (", queued_rows_, " rows waiting); retry later");
    }
    if (task.rows <= policy_.max_batch_size || !policy_.enabled) {
      queued_rows_ += task.rows;
      queue_.push_back(std::move(task));
      if (metrics_.queue_depth != nullptr) metrics_.queue_depth->Set(static_cast<double>(queued_rows_));
      ready_.notify_one();
      return Status();
    }
  }
  return EnqueueSplit(std::move(task));
}

Status Batcher::EnqueueSplit(BatchTask task) {
  auto join = std::make_shared<Join>();
  join->done = std::move(task.done);
  const int64_t step = policy_.max_batch_size;
  const std::size_t count = static_cast<std::size_t>((task.rows + step - 1) / step);
  join->remaining = count;
  join->parts.resize(count);
  std::vector<BatchTask> parts;
  for (std::size_t k = 0; k < count; ++k) {
    BatchTask part;
    const int64_t begin = static_cast<int64_t>(k) * step;
    part.rows = std::min(step, task.rows - begin);
    for (const Tensor& t : task.inputs) part.inputs.push_back(SliceRows(t, begin, part.rows));
    part.enqueued = task.enqueued;
    part.deadline = task.deadline;
    part.done = [join, k](Status status, std::vector<Tensor> outputs, const BatchTiming& timing) {
      std::unique_lock<std::mutex> lock(join->mutex);
      if (!status.ok() && join->status.ok()) join->status = status;
      join->parts[k] = std::move(outputs);
      join->timing.queue_seconds = std::max(join->timing.queue_seconds, timing.queue_seconds);
      join->timing.compute_seconds += timing.compute_seconds;
      join->timing.batch_rows = std::max(join->timing.batch_rows, timing.batch_rows);
      if (--join->remaining > 0) return;
      lock.unlock();
      std::vector<Tensor> joined;
      if (join->status.ok()) {
        for (std::size_t o = 0; o < join->parts[0].size() && join->status.ok(); ++o) {
          std::vector<const Tensor*> pieces;
          for (const auto& answers : join->parts) pieces.push_back(&answers[o]);
          auto stacked = StackRows(pieces);
          if (stacked.ok()) {
            joined.push_back(std::move(*stacked));
          } else {
            join->status = stacked.status();
          }
        }
      }
      join->done(join->status, std::move(joined), join->timing);
    };
    parts.push_back(std::move(part));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return UnavailableError("the model version is being unloaded");
  for (BatchTask& part : parts) {
    queued_rows_ += part.rows;
    queue_.push_back(std::move(part));
  }
  if (metrics_.queue_depth != nullptr) metrics_.queue_depth->Set(static_cast<double>(queued_rows_));
  ready_.notify_all();
  return Status();
}

void Batcher::Take(std::unique_lock<std::mutex>& lock, std::vector<BatchTask>& batch, std::vector<BatchTask>& expired) {
  ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
  if (queue_.empty()) return;
  if (policy_.batch_timeout_us > 0 && !stopping_) {
    // Wait for a full batch, or until the oldest request waited long enough.
    const auto until = queue_.front().enqueued + std::chrono::microseconds(policy_.batch_timeout_us);
    ready_.wait_until(lock, until, [this] { return stopping_ || queued_rows_ >= policy_.max_batch_size; });
    if (queue_.empty()) return;
  }
  const Clock::time_point now = Clock::now();
  int64_t rows = 0;
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->deadline <= now) {
      queued_rows_ -= it->rows;
      expired.push_back(std::move(*it));
      it = queue_.erase(it);
      continue;
    }
    const bool fits = batch.empty() || (rows + it->rows <= policy_.max_batch_size && Compatible(batch[0], *it));
    if (fits) {
      rows += it->rows;
      queued_rows_ -= it->rows;
      batch.push_back(std::move(*it));
      it = queue_.erase(it);
      if (rows >= policy_.max_batch_size || !policy_.enabled) break;
    } else {
      ++it;
    }
  }
  if (metrics_.queue_depth != nullptr) metrics_.queue_depth->Set(static_cast<double>(queued_rows_));
}

void Batcher::Loop() {
  for (;;) {
    std::vector<BatchTask> batch;
    std::vector<BatchTask> expired;
    bool narrow = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      Take(lock, batch, expired);
      if (batch.empty() && expired.empty() && stopping_ && queue_.empty()) return;
      // Alone with nothing waiting: every core for this batch's kernels.
      narrow = policy_.share_cores && (running_ > 0 || !queue_.empty());
      if (!batch.empty()) ++running_;
    }
    for (BatchTask& task : expired) {
      BatchTiming timing;
      timing.queue_seconds = SecondsBetween(task.enqueued, Clock::now());
      task.done(Status(Code::kDeadlineExceeded,
                       StrCat("the request's deadline passed after ", static_cast<int64_t>(timing.queue_seconds * 1000),
                              " ms in the queue; it was not run")),
                {}, timing);
    }
    if (batch.empty()) continue;
    RunBatch(batch, narrow);
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
  }
}

void Batcher::RunBatch(std::vector<BatchTask>& batch, bool narrow) {
  const Clock::time_point start = Clock::now();
  int64_t rows = 0;
  for (const BatchTask& t : batch) rows += t.rows;
  Status status;
  std::vector<Tensor> inputs;
  for (std::size_t i = 0; i < batch[0].inputs.size() && status.ok(); ++i) {
    std::vector<const Tensor*> parts;
    for (const BatchTask& t : batch) parts.push_back(&t.inputs[i]);
    auto stacked = StackRows(parts);
    if (stacked.ok()) {
      inputs.push_back(std::move(*stacked));
    } else {
      status = stacked.status();
    }
  }
  std::vector<Tensor> outputs;
  if (status.ok()) status = servable_->Run(inputs, &outputs, narrow);
  const Clock::time_point end = Clock::now();
  const double compute = SecondsBetween(start, end);
  if (status.ok() && policy_.enabled) {
    if (!narrow) servable_->RecordCost(rows, compute);
    for (const Tensor& out : outputs) {
      if (out.rank() < 1 || out.dim(0) != rows) {
        status = InternalError("output of shape ", out.shape().ToString(), " does not have the batch's ", rows,
                               " rows: the model mixes rows; set [batching] enabled = false in its config.toml");
        break;
      }
    }
  }
  if (metrics_.batch_size != nullptr) metrics_.batch_size->Observe(static_cast<double>(rows));
  int64_t begin = 0;
  for (BatchTask& task : batch) {
    BatchTiming timing{SecondsBetween(task.enqueued, start), compute, rows};
    std::vector<Tensor> mine;
    if (status.ok()) {
      for (const Tensor& out : outputs) mine.push_back(batch.size() == 1 ? out : SliceRows(out, begin, task.rows));
    }
    begin += task.rows;
    task.done(status, std::move(mine), timing);
  }
}

}  // namespace weft::serving
