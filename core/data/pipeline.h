// The input pipeline: batches of examples, shuffled per epoch, normalised
// and reshaped, prepared ahead of the training loop on a background thread.
//
//   auto examples = std::make_shared<const Examples>(std::move(train));
//   PipelineOptions o;
//   o.batch_size = 64;
//   o.seed = 7;
//   o.scale = 1.0 / 255;            // pixels 0..255 -> 0..1
//   o.example_shape = Shape{784};   // [28,28] -> [784]
//   WEFT_ASSIGN_OR_RETURN(auto pipeline, Pipeline::Create(examples, o, checkpoint_position));
//   while (true) {
//     Expected<Batch> batch = pipeline->Next();
//     if (batch.status().code() == Code::kOutOfRange) break;   // every epoch done
//     WEFT_RETURN_IF_ERROR(batch.status());
//     ... train on batch->features, batch->labels; save pipeline->position() with a checkpoint ...
//   }
//
// Sharded (PipelineOptions::num_shards), shard i of step k is slice i of
// the global batch k that one process with num_shards times the batch
// would see.
//
// Determinism: the order of epoch e is ShuffledOrder(n, seed, e), a
// function of (seed, e) alone, specified below to the bit, so a run
// resumed from a saved Position sees exactly the batches the uninterrupted
// run would have seen, whatever the prefetch setting, machine or standard
// library. Batches never span two epochs: an epoch of n examples gives
// n / batch_size full batches, and, without drop_remainder, one smaller
// last batch.
#ifndef WEFT_CORE_DATA_PIPELINE_H_
#define WEFT_CORE_DATA_PIPELINE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/data/readers.h"

namespace weft::data {

struct PipelineOptions {
  // Examples per batch (>= 1).
  int64_t batch_size = 64;
  // Shuffle each epoch (otherwise the stored order).
  bool shuffle = true;
  uint64_t seed = 0;
  // Every feature x becomes x * scale + shift, computed in double and
  // rounded to f32 once.
  double scale = 1, shift = 0;
  // The shape of one example in a batch, e.g. [784] or [28,28,1]: the same
  // element count as the stored example, with at most one -1 (inferred).
  // Rank 0 or unknown rank keeps the stored shape.
  Shape example_shape;
  // Batches prepared ahead on a background thread; 0 prepares each batch
  // in Next() on the caller's thread.
  int64_t prefetch = 4;
  // Skip an epoch's last batch when it would be smaller than batch_size.
  bool drop_remainder = true;
  // Epochs to run; -1 runs forever.
  int64_t epochs = -1;
  // Sharding for synchronous training (docs/design/sync-training.md): each
  // step takes a global batch of batch_size * num_shards examples from the
  // epoch's order, and shard |shard_index| gets its slice number
  // shard_index, so that num_shards workers together see exactly the
  // batches one process with batch_size * num_shards would. Positions count
  // global examples, the same on every shard. Needs drop_remainder.
  int64_t num_shards = 1;
  int64_t shard_index = 0;
};

// Where a pipeline stands: the next example is number |index| of epoch
// |epoch|'s order. What a checkpoint saves.
struct Position {
  int64_t epoch = 0;
  int64_t index = 0;
  friend bool operator==(const Position& a, const Position& b) { return a.epoch == b.epoch && a.index == b.index; }
};

struct Batch {
  Tensor features;  // f32 [batch, example_shape...], normalised
  Tensor labels;    // i64 [batch]
  Position start;   // of the batch's first example
};

// The order of the |n| examples in epoch |epoch| with |seed|: the identity
// permutation shuffled by Fisher-Yates (for i = n-1 down to 1, swap a[i]
// with a[UniformBelow(gen, i + 1)]) driven by
// std::mt19937_64 gen(MixSeed(seed, epoch)) (core/base/seeded_random.h).
std::vector<int64_t> ShuffledOrder(int64_t n, uint64_t seed, int64_t epoch);

class Pipeline {
 public:
  // A pipeline over |examples| (see readers.h; shared, never modified)
  // starting at |start| (a position() saved earlier, or the beginning).
  // Errors name the bad option: batch_size < 1, a batch larger than the
  // data with drop_remainder, an example_shape of another element count,
  // prefetch < 0, epochs < -1, a start outside the data.
  static Expected<std::unique_ptr<Pipeline>> Create(std::shared_ptr<const Examples> examples, PipelineOptions options,
                                                    Position start = {});
  // Stops and joins the background thread, even while it waits for room.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The next batch, or OUT_OF_RANGE once the last epoch is done (and on
  // every call after that). Call from one thread at a time.
  Expected<Batch> Next();
  // Where the batch the next Next() returns starts (after the last epoch:
  // {epochs, 0}). Safe from any thread.
  Position position() const;
  // Seconds Next() has spent waiting for a batch to be ready (with
  // prefetch 0: preparing it), in total: the training loop's input stall.
  // Safe from any thread.
  double wait_seconds() const;
  // Batches in one epoch (global batches, when sharded).
  int64_t batches_per_epoch() const;
  // Where the |step|-th batch from the beginning starts (step >= 0).
  Position PositionOfStep(int64_t step) const;
  // Moves to |to|: the next Next() returns the batch a pipeline created at
  // |to| would (batches prepared ahead are dropped; a finished pipeline
  // runs again). A synchronous worker whose step jumped ahead uses it.
  // INVALID_ARGUMENT, changing nothing, for a position outside the data.
  // Call from the thread that calls Next().
  Status Seek(Position to);

 private:
  Pipeline(std::shared_ptr<const Examples> examples, PipelineOptions options, Shape batch_shape);
  // |pos| moved past an epoch's end (or a remainder that is dropped); the
  // end marker {epochs, 0} once every epoch is done.
  Position Normalize(Position pos) const;
  bool AtEnd(const Position& pos) const { return options_.epochs >= 0 && pos.epoch >= options_.epochs; }
  // The batch at |pos| (normalised, not at the end).
  Expected<Batch> Build(const Position& pos);
  Position After(const Batch& batch) const;
  Status EndStatus() const;
  void Produce(Position pos);

  std::shared_ptr<const Examples> examples_;
  PipelineOptions options_;
  Shape example_shape_;
  int64_t n_ = 0;
  int64_t example_size_ = 0;
  // The order of |order_epoch_|, used by Build (one thread at a time).
  int64_t order_epoch_ = -1;
  std::vector<int64_t> order_;

  mutable std::mutex mutex_;
  std::condition_variable not_empty_, not_full_;
  std::deque<Expected<Batch>> ready_;
  bool stop_ = false;
  // The status Next() returns forever once the data ran out or failed.
  Status final_;
  bool finished_ = false;
  Position next_;
  double wait_seconds_ = 0;
  std::thread producer_;
};

}  // namespace weft::data

#endif  // WEFT_CORE_DATA_PIPELINE_H_
