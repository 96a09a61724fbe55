#include "core/data/pipeline.h"

#include <chrono>
#include <cstring>
#include <numeric>
#include <random>

#include "core/base/seeded_random.h"

namespace weft::data {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// |requested| with a -1 resolved so that it holds |elements|, or an error.
Expected<Shape> ResolveExampleShape(const Shape& requested, const Shape& stored) {
  if (requested.unknown_rank() || requested.rank() == 0) return stored;
  const int64_t elements = stored.num_elements();
  const std::string requested_text = ListString(requested.dims());
  std::vector<int64_t> dims = requested.dims();
  int infer = -1;
  std::vector<int64_t> known_dims;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) return InvalidArgumentError("example_shape ", requested_text, " has more than one -1");
      infer = static_cast<int>(i);
    } else if (dims[i] < 0) {
      return InvalidArgumentError("example_shape ", requested_text, " has a negative dimension");
    } else {
      known_dims.push_back(dims[i]);
    }
  }
  auto product = CheckedNumElements(known_dims);
  if (!product.ok()) return InvalidArgumentError("example_shape ", requested_text, " is too large");
  const int64_t known = *product;
  if (infer >= 0) {
    if (known == 0 || elements % known != 0) {
      return InvalidArgumentError("example_shape ", requested_text, " cannot hold the ", elements,
                                  " elements of an example (", stored.ToString(), ")");
    }
    dims[static_cast<std::size_t>(infer)] = elements / known;
  } else if (known != elements) {
    return InvalidArgumentError("example_shape ", requested_text, " has ", known, " elements but each example has ",
                                elements, " (", stored.ToString(), ")");
  }
  return Shape(dims);
}

}  // namespace

std::vector<int64_t> ShuffledOrder(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<std::size_t>(std::max<int64_t>(n, 0)));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 gen(MixSeed(seed, static_cast<uint64_t>(epoch)));
  for (int64_t i = n - 1; i >= 1; --i) {
    const auto j = static_cast<int64_t>(UniformBelow(gen, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

Pipeline::Pipeline(std::shared_ptr<const Examples> examples, PipelineOptions options, Shape example_shape)
    : examples_(std::move(examples)), options_(std::move(options)), example_shape_(std::move(example_shape)) {
  n_ = examples_->features.dim(0);
  example_size_ = examples_->features.num_elements() / n_;
}

namespace {

Status CheckPosition(const Position& p, int64_t n, std::string_view what) {
  if (p.epoch < 0 || p.index < 0 || p.index > n) {
    return InvalidArgumentError("input pipeline: ", what, " position (epoch ", p.epoch, ", index ", p.index,
                                ") is outside the data (epochs from 0, index 0..", n, ")");
  }
  return Status();
}

}  // namespace

Expected<std::unique_ptr<Pipeline>> Pipeline::Create(std::shared_ptr<const Examples> examples, PipelineOptions options,
                                                     Position start) {
  if (examples == nullptr) return InvalidArgumentError("input pipeline: no examples");
  const Tensor& features = examples->features;
  const Tensor& labels = examples->labels;
  if (features.dtype() != DType::kF32 || features.rank() < 1 || features.dim(0) < 1 || !features.host_visible()) {
    return InvalidArgumentError("input pipeline: features must be host f32 [n, ...] with n >= 1; got ",
                                features.TypeString());
  }
  if (labels.dtype() != DType::kI64 || labels.rank() != 1 || labels.dim(0) != features.dim(0) ||
      !labels.host_visible()) {
    return InvalidArgumentError("input pipeline: labels must be host i64 [", features.dim(0), "]; got ",
                                labels.TypeString());
  }
  const int64_t n = features.dim(0);
  if (options.batch_size < 1) {
    return InvalidArgumentError("input pipeline: batch_size must be at least 1; got ", options.batch_size);
  }
  if (options.num_shards < 1 || options.shard_index < 0 || options.shard_index >= options.num_shards) {
    return InvalidArgumentError("input pipeline: shard_index ", options.shard_index, " of num_shards ",
                                options.num_shards, " (shards are 0..num_shards - 1, num_shards >= 1)");
  }
  if (options.num_shards > 1 && !options.drop_remainder) {
    return InvalidArgumentError("input pipeline: num_shards ", options.num_shards,
                                " needs drop_remainder (every shard takes a full slice of each global batch)");
  }
  if (options.num_shards > 1 && options.batch_size > n / options.num_shards) {
    return InvalidArgumentError("input pipeline: batch_size ", options.batch_size, " times num_shards ",
                                options.num_shards, " is larger than the ", n, " examples; every epoch would be empty");
  }
  if (options.drop_remainder && options.batch_size > n) {
    return InvalidArgumentError("input pipeline: batch_size ", options.batch_size, " is larger than the ", n,
                                " examples; with drop_remainder every epoch would be empty");
  }
  if (options.prefetch < 0) {
    return InvalidArgumentError("input pipeline: prefetch must be >= 0 (0 = no background thread); got ",
                                options.prefetch);
  }
  if (options.epochs < -1) {
    return InvalidArgumentError("input pipeline: epochs must be >= 0, or -1 for no end; got ", options.epochs);
  }
  if (Status inside = CheckPosition(start, n, "start"); !inside.ok()) return inside;
  std::vector<int64_t> stored(features.shape().dims().begin() + 1, features.shape().dims().end());
  auto example_shape = ResolveExampleShape(options.example_shape, Shape(stored));
  if (!example_shape.ok()) return example_shape.status().WithContext("input pipeline");

  std::unique_ptr<Pipeline> p(new Pipeline(std::move(examples), std::move(options), std::move(*example_shape)));
  p->next_ = p->Normalize(start);
  if (p->options_.prefetch > 0) {
    const Position first = p->next_;
    p->producer_ = std::thread([raw = p.get(), first] { raw->Produce(first); });
  }
  return p;
}

Pipeline::~Pipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  not_full_.notify_all();
  if (producer_.joinable()) producer_.join();
}

int64_t Pipeline::batches_per_epoch() const {
  const int64_t b = options_.batch_size * options_.num_shards;
  return options_.drop_remainder ? n_ / b : (n_ + b - 1) / b;
}

Position Pipeline::PositionOfStep(int64_t step) const {
  const int64_t per_epoch = batches_per_epoch();
  return Normalize({step / per_epoch, (step % per_epoch) * options_.batch_size * options_.num_shards});
}

Position Pipeline::Normalize(Position pos) const {
  const int64_t global = options_.batch_size * options_.num_shards;
  while (!AtEnd(pos)) {
    const int64_t remaining = n_ - pos.index;
    if (remaining > 0 && !(options_.drop_remainder && remaining < global)) return pos;
    pos = {pos.epoch + 1, 0};
  }
  return {options_.epochs, 0};
}

Position Pipeline::After(const Batch& batch) const {
  // A sharded step consumes the whole global batch (all full slices).
  const int64_t taken = options_.num_shards > 1 ? options_.batch_size * options_.num_shards : batch.labels.dim(0);
  return Normalize({batch.start.epoch, batch.start.index + taken});
}

Status Pipeline::EndStatus() const {
  return OutOfRangeError("the input pipeline has finished its ", options_.epochs,
                         options_.epochs == 1 ? " epoch" : " epochs");
}

Expected<Batch> Pipeline::Build(const Position& pos) {
  if (options_.shuffle && order_epoch_ != pos.epoch) {
    order_ = ShuffledOrder(n_, options_.seed, pos.epoch);
    order_epoch_ = pos.epoch;
  }
  // This shard's slice of the global batch at |pos|.
  const int64_t first = pos.index + options_.shard_index * options_.batch_size;
  const int64_t count = std::min(options_.batch_size, n_ - first);
  std::vector<int64_t> dims = {count};
  dims.insert(dims.end(), example_shape_.dims().begin(), example_shape_.dims().end());
  Batch batch;
  batch.start = pos;
  WEFT_ASSIGN_OR_RETURN(batch.features, Tensor::Allocate(DType::kF32, Shape(dims)));
  WEFT_ASSIGN_OR_RETURN(batch.labels, Tensor::Allocate(DType::kI64, Shape{count}));
  const float* src = examples_->features.data<float>();
  const int64_t* src_labels = examples_->labels.data<int64_t>();
  float* dst = batch.features.data<float>();
  int64_t* dst_labels = batch.labels.data<int64_t>();
  const bool identity = options_.scale == 1 && options_.shift == 0;
  const auto size = static_cast<std::size_t>(example_size_);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = first + k;
    const int64_t e = options_.shuffle ? order_[static_cast<std::size_t>(i)] : i;
    const float* from = src + e * example_size_;
    float* to = dst + k * example_size_;
    if (identity) {
      std::memcpy(to, from, size * sizeof(float));
    } else {
      for (std::size_t j = 0; j < size; ++j) {
        to[j] = static_cast<float>(static_cast<double>(from[j]) * options_.scale + options_.shift);
      }
    }
    dst_labels[k] = src_labels[e];
  }
  return batch;
}

void Pipeline::Produce(Position pos) {
  while (true) {
    Expected<Batch> item = AtEnd(pos) ? Expected<Batch>(EndStatus()) : Build(pos);
    const bool last = !item.ok();
    if (item.ok()) pos = After(*item);
    {
      std::unique_lock<std::mutex> lock(mutex_);
      not_full_.wait(lock, [&] { return stop_ || static_cast<int64_t>(ready_.size()) < options_.prefetch; });
      if (stop_) return;
      ready_.push_back(std::move(item));
    }
    not_empty_.notify_one();
    if (last) return;
  }
}

Expected<Batch> Pipeline::Next() {
  const auto start = std::chrono::steady_clock::now();
  if (options_.prefetch == 0) {
    Position pos;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return final_;
      pos = next_;
    }
    Expected<Batch> batch = AtEnd(pos) ? Expected<Batch>(EndStatus()) : Build(pos);
    std::lock_guard<std::mutex> lock(mutex_);
    wait_seconds_ += SecondsSince(start);
    if (!batch.ok()) {
      finished_ = true;
      final_ = batch.status();
      return final_;
    }
    next_ = After(*batch);
    return batch;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (finished_) return final_;
  if (ready_.empty()) {
    not_empty_.wait(lock, [&] { return !ready_.empty(); });
    wait_seconds_ += SecondsSince(start);
  }
  Expected<Batch> batch = std::move(ready_.front());
  ready_.pop_front();
  if (!batch.ok()) {
    // The producer has stopped after this one: answer it from now on.
    finished_ = true;
    final_ = batch.status();
    return final_;
  }
  next_ = After(*batch);
  lock.unlock();
  not_full_.notify_one();
  return batch;
}

Status Pipeline::Seek(Position to) {
  WEFT_RETURN_IF_ERROR(CheckPosition(to, n_, "seek"));
  // Stop the producer (it may be waiting for room) and drop what it made.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  not_full_.notify_all();
  if (producer_.joinable()) producer_.join();
  Position first;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ready_.clear();
    stop_ = false;
    finished_ = false;
    final_ = Status();
    next_ = Normalize(to);
    first = next_;
  }
  if (options_.prefetch > 0) producer_ = std::thread([this, first] { Produce(first); });
  return Status();
}

Position Pipeline::position() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_;
}

double Pipeline::wait_seconds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return wait_seconds_;
}

}  // namespace weft::data
