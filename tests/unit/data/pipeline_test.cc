// The input pipeline (core/data/pipeline.h): the per-epoch order against
// an independent implementation (shuffle_reference.py), resuming from a
// position, normalisation, reshaping, remainders, the end of the data,
// shutdown, and every option error.
#include "core/data/pipeline.h"
#include "tests/support/tensor_values.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::data {
namespace {

using testing::Values;

// |n| examples of shape [2,3]; element j of example i is 100 i + j, and
// its label is i.
std::shared_ptr<const Examples> Numbered(int64_t n) {
  auto ex = std::make_shared<Examples>();
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < 6; ++j) x.push_back(static_cast<float>(100 * i + j));
    y.push_back(i);
  }
  ex->features = Tensor::FromVector<float>(x, Shape{n, 2, 3});
  ex->labels = Tensor::FromVector<int64_t>(y);
  return ex;
}

std::unique_ptr<Pipeline> Make(std::shared_ptr<const Examples> ex, const PipelineOptions& o, Position start = {}) {
  auto p = Pipeline::Create(std::move(ex), o, start);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(*p) : nullptr;
}

std::string ErrorOf(const Expected<std::unique_ptr<Pipeline>>& p) { return p.ok() ? "OK" : p.status().message(); }

TEST(ShuffledOrder, MatchesTheIndependentReference) {
  // tests/unit/data/shuffle_reference.py
  EXPECT_EQ(ShuffledOrder(10, 42, 0), (std::vector<int64_t>{2, 0, 4, 7, 8, 3, 5, 1, 9, 6}));
  EXPECT_EQ(ShuffledOrder(10, 42, 1), (std::vector<int64_t>{2, 8, 7, 3, 6, 4, 0, 9, 5, 1}));
  EXPECT_EQ(ShuffledOrder(7, 0, 3), (std::vector<int64_t>{1, 4, 0, 2, 6, 3, 5}));
  EXPECT_EQ(ShuffledOrder(10, 7, 0), (std::vector<int64_t>{5, 6, 2, 8, 4, 9, 7, 3, 1, 0}));
  EXPECT_EQ(ShuffledOrder(1, 7, 0), (std::vector<int64_t>{0}));
  EXPECT_TRUE(ShuffledOrder(0, 7, 0).empty());
}

TEST(Pipeline, BatchesFollowTheEpochOrder) {
  PipelineOptions o;
  o.batch_size = 4;
  o.seed = 7;
  o.prefetch = 0;
  auto p = Make(Numbered(10), o);
  // Epoch 0 of seed 7 is [5,6,2,8,4,9,7,3,1,0]: batches [5,6,2,8], [4,9,7,3];
  // the remainder [1,0] is dropped. Epoch 1 is [4,5,2,8,3,7,1,6,0,9].
  auto b0 = p->Next();
  ASSERT_TRUE(b0.ok()) << b0.status().ToString();
  EXPECT_EQ(Values<int64_t>(b0->labels), (std::vector<int64_t>{5, 6, 2, 8}));
  EXPECT_EQ(b0->features.TypeString(), "f32[4,2,3]");
  EXPECT_EQ(std::vector<float>(b0->features.data<float>(), b0->features.data<float>() + 6),
            (std::vector<float>{500, 501, 502, 503, 504, 505}));
  EXPECT_EQ(b0->start, (Position{0, 0}));
  EXPECT_EQ(p->position(), (Position{0, 4}));
  auto b1 = p->Next();
  EXPECT_EQ(Values<int64_t>(b1->labels), (std::vector<int64_t>{4, 9, 7, 3}));
  EXPECT_EQ(p->position(), (Position{1, 0}));
  auto b2 = p->Next();
  EXPECT_EQ(Values<int64_t>(b2->labels), (std::vector<int64_t>{4, 5, 2, 8}));
  EXPECT_EQ(b2->start, (Position{1, 0}));
  EXPECT_EQ(p->batches_per_epoch(), 2);
}

// A fresh pipeline's batches, and its position before each.
struct Collected {
  std::vector<Batch> batches;
  std::vector<Position> positions;
};

Collected Collect(Pipeline& p, int count) {
  Collected run;
  for (int i = 0; i < count; ++i) {
    run.positions.push_back(p.position());
    auto b = p.Next();
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    if (!b.ok()) break;
    run.batches.push_back(std::move(*b));
  }
  return run;
}

TEST(Pipeline, ResumingFromAPositionGivesTheSameBatches) {
  for (bool drop : {true, false}) {
    for (int64_t prefetch : {0, 1, 3}) {
      PipelineOptions o;
      o.batch_size = 3;
      o.seed = 42;
      o.drop_remainder = drop;
      o.prefetch = prefetch;
      o.scale = 0.5;
      auto fresh = Make(Numbered(10), o);
      // 8 batches span 2.7 (drop) or 2 (no drop) epochs: several boundaries.
      const Collected reference = Collect(*fresh, 8);
      ASSERT_EQ(reference.batches.size(), 8u);
      for (int k = 1; k < 8; ++k) {
        for (int64_t resumed_prefetch : {int64_t{0}, int64_t{2}}) {
          PipelineOptions r = o;
          r.prefetch = resumed_prefetch;
          auto resumed = Make(Numbered(10), r, reference.positions[static_cast<std::size_t>(k)]);
          const Collected rest = Collect(*resumed, 8 - k);
          ASSERT_EQ(rest.batches.size(), static_cast<std::size_t>(8 - k));
          for (int i = 0; i < 8 - k; ++i) {
            const Batch& want = reference.batches[static_cast<std::size_t>(k + i)];
            const Batch& got = rest.batches[static_cast<std::size_t>(i)];
            EXPECT_TRUE(got.features.BitwiseEquals(want.features)) << "drop " << drop << " k " << k << " i " << i;
            EXPECT_TRUE(got.labels.BitwiseEquals(want.labels)) << "drop " << drop << " k " << k << " i " << i;
            EXPECT_EQ(got.start, want.start);
          }
        }
      }
    }
  }
}

TEST(Pipeline, PositionsAcrossEpochBoundaries) {
  // 10 examples in batches of 3: with drop_remainder the 10th is skipped,
  // so epoch 1 starts after 3 batches; without, a batch of 1 ends each epoch.
  PipelineOptions o;
  o.batch_size = 3;
  o.prefetch = 2;
  o.shuffle = false;
  auto dropped = Make(Numbered(10), o);
  const Collected d = Collect(*dropped, 4);
  EXPECT_EQ(d.positions, (std::vector<Position>{{0, 0}, {0, 3}, {0, 6}, {1, 0}}));
  EXPECT_EQ(Values<int64_t>(d.batches[3].labels), (std::vector<int64_t>{0, 1, 2}));
  o.drop_remainder = false;
  auto kept = Make(Numbered(10), o);
  const Collected k = Collect(*kept, 5);
  EXPECT_EQ(k.positions, (std::vector<Position>{{0, 0}, {0, 3}, {0, 6}, {0, 9}, {1, 0}}));
  EXPECT_EQ(k.batches[3].labels.TypeString(), "i64[1]");
  EXPECT_EQ(Values<int64_t>(k.batches[3].labels), (std::vector<int64_t>{9}));
  EXPECT_EQ(k.batches[3].features.TypeString(), "f32[1,2,3]");
  EXPECT_EQ(kept->batches_per_epoch(), 4);
  // A start inside the dropped remainder moves to the next epoch.
  auto late = Make(
      Numbered(10),
      [] {
        PipelineOptions p;
        p.batch_size = 3;
        return p;
      }(),
      Position{2, 9});
  EXPECT_EQ(late->position(), (Position{3, 0}));
}

TEST(Pipeline, NormalisesInDoubleAndRoundsOnce) {
  auto ex = std::make_shared<Examples>();
  ex->features = Tensor::FromVector<float>({0, 127, 255, 1}, Shape{2, 2});
  ex->labels = Tensor::FromVector<int64_t>({0, 1});
  PipelineOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  o.scale = 1.0 / 255;
  o.shift = -0.5;
  auto p = Make(ex, o);
  auto b = p->Next();
  ASSERT_TRUE(b.ok());
  // NumPy: np.float32(np.float64([0, 127, 255, 1]) * (1 / 255) - 0.5)
  EXPECT_EQ(Values<float>(b->features), (std::vector<float>{-0.5f, -0.0019607844f, 0.5f, -0.49607843f}));
}

TEST(Pipeline, ReshapesExamples) {
  PipelineOptions o;
  o.batch_size = 2;
  o.shuffle = false;
  o.example_shape = Shape{6};
  auto flat = Make(Numbered(4), o);
  auto b = flat->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->features.TypeString(), "f32[2,6]");
  EXPECT_EQ(Values<float>(b->features), (std::vector<float>{0, 1, 2, 3, 4, 5, 100, 101, 102, 103, 104, 105}));
  o.example_shape = Shape{3, -1, 1};
  auto inferred = Make(Numbered(4), o);
  EXPECT_EQ(inferred->Next()->features.TypeString(), "f32[2,3,2,1]");
}

TEST(Pipeline, BadOptionsAreErrors) {
  auto ex = Numbered(4);
  PipelineOptions o;
  o.example_shape = Shape{5};
  o.batch_size = 2;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)),
            "input pipeline: example_shape [5] has 5 elements but each example has 6 ([2,3])");
  o.example_shape = Shape{-1, -1};
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)), "input pipeline: example_shape [-1,-1] has more than one -1");
  o.example_shape = Shape{4, -1};
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)),
            "input pipeline: example_shape [4,-1] cannot hold the 6 elements of an example ([2,3])");
  o.example_shape = Shape{-3, 2};
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)), "input pipeline: example_shape [-3,2] has a negative dimension");
  o.example_shape = Shape{};
  o.batch_size = 0;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)), "input pipeline: batch_size must be at least 1; got 0");
  o.batch_size = 5;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)),
            "input pipeline: batch_size 5 is larger than the 4 examples; with drop_remainder every epoch would be "
            "empty");
  o.batch_size = 2;
  o.prefetch = -1;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)),
            "input pipeline: prefetch must be >= 0 (0 = no background thread); got -1");
  o.prefetch = 1;
  o.epochs = -2;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)), "input pipeline: epochs must be >= 0, or -1 for no end; got -2");
  o.epochs = -1;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o, Position{0, 5})),
            "input pipeline: start position (epoch 0, index 5) is outside the data (epochs from 0, index 0..4)");
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o, Position{-1, 0})),
            "input pipeline: start position (epoch -1, index 0) is outside the data (epochs from 0, index 0..4)");
  EXPECT_EQ(ErrorOf(Pipeline::Create(nullptr, o)), "input pipeline: no examples");
  auto bad = std::make_shared<Examples>();
  bad->features = Tensor::FromVector<double>({1, 2});
  bad->labels = Tensor::FromVector<int64_t>({0, 1});
  EXPECT_EQ(ErrorOf(Pipeline::Create(bad, o)),
            "input pipeline: features must be host f32 [n, ...] with n >= 1; got f64[2]");
  bad->features = Tensor::FromVector<float>({1, 2});
  bad->labels = Tensor::FromVector<int64_t>({0, 1, 2});
  EXPECT_EQ(ErrorOf(Pipeline::Create(bad, o)), "input pipeline: labels must be host i64 [2]; got i64[3]");
}

TEST(Pipeline, ShardsAreSlicesOfTheGlobalBatch) {
  // 3 shards of 4 against one pipeline of 12, over 23 examples: one global
  // batch per epoch plus a dropped remainder of 11, so every step crosses
  // an epoch boundary.
  for (int64_t prefetch : {0, 2}) {
    PipelineOptions whole;
    whole.batch_size = 12;
    whole.seed = 5;
    whole.prefetch = prefetch;
    auto reference = Make(Numbered(23), whole);
    const Collected want = Collect(*reference, 4);
    ASSERT_EQ(want.batches.size(), 4u);
    std::vector<Collected> shards;
    for (int64_t s = 0; s < 3; ++s) {
      PipelineOptions o = whole;
      o.batch_size = 4;
      o.num_shards = 3;
      o.shard_index = s;
      auto p = Make(Numbered(23), o);
      EXPECT_EQ(p->batches_per_epoch(), 1);
      shards.push_back(Collect(*p, 4));
      ASSERT_EQ(shards.back().batches.size(), 4u);
    }
    for (std::size_t k = 0; k < 4; ++k) {
      const std::vector<int64_t> all = Values<int64_t>(want.batches[k].labels);
      const std::vector<float> features = Values<float>(want.batches[k].features);
      for (std::size_t s = 0; s < 3; ++s) {
        const Batch& got = shards[s].batches[k];
        EXPECT_EQ(Values<int64_t>(got.labels), std::vector<int64_t>(all.begin() + 4 * s, all.begin() + 4 * s + 4))
            << "step " << k << " shard " << s;
        EXPECT_EQ(Values<float>(got.features),
                  std::vector<float>(features.begin() + 24 * s, features.begin() + 24 * s + 24));
        // Positions are global: the same on every shard as on the whole.
        EXPECT_EQ(got.start, want.batches[k].start);
        EXPECT_EQ(shards[s].positions[k], want.positions[k]);
      }
    }
  }
}

TEST(Pipeline, PositionOfStep) {
  PipelineOptions o;
  o.batch_size = 2;
  o.num_shards = 2;
  o.shard_index = 1;
  o.prefetch = 0;
  auto p = Make(Numbered(10), o);  // global batches of 4: 2 per epoch, 2 examples dropped
  EXPECT_EQ(p->PositionOfStep(0), (Position{0, 0}));
  EXPECT_EQ(p->PositionOfStep(1), (Position{0, 4}));
  EXPECT_EQ(p->PositionOfStep(2), (Position{1, 0}));
  EXPECT_EQ(p->PositionOfStep(5), (Position{2, 4}));
  // The same positions a run reaches.
  const Collected run = Collect(*p, 6);
  for (int k = 0; k < 6; ++k) EXPECT_EQ(run.positions[static_cast<std::size_t>(k)], p->PositionOfStep(k)) << k;
}

TEST(Pipeline, SeekGivesTheBatchesOfAPipelineStartedThere) {
  for (int64_t prefetch : {0, 2}) {
    PipelineOptions o;
    o.batch_size = 2;
    o.num_shards = 2;
    o.shard_index = 1;
    o.seed = 3;
    o.epochs = 3;
    o.prefetch = prefetch;
    auto p = Make(Numbered(10), o);
    // Forward past an epoch boundary, back to the start, and after the end.
    for (int64_t step : {3, 0, 5, 1}) {
      const Position at = p->PositionOfStep(step);
      ASSERT_TRUE(p->Seek(at).ok());
      EXPECT_EQ(p->position(), at);
      auto fresh = Make(Numbered(10), o, at);
      const Collected want = Collect(*fresh, static_cast<int>(6 - step));
      const Collected got = Collect(*p, static_cast<int>(6 - step));
      ASSERT_EQ(got.batches.size(), want.batches.size()) << "step " << step;
      for (std::size_t k = 0; k < got.batches.size(); ++k) {
        EXPECT_TRUE(got.batches[k].labels.BitwiseEquals(want.batches[k].labels)) << "step " << step << " k " << k;
        EXPECT_TRUE(got.batches[k].features.BitwiseEquals(want.batches[k].features));
        EXPECT_EQ(got.batches[k].start, want.batches[k].start);
      }
      // At the end of the 3 epochs; a seek runs it again.
      EXPECT_EQ(p->Next().status().code(), Code::kOutOfRange);
    }
    EXPECT_EQ(p->Seek(Position{0, 11}).message(),
              "input pipeline: seek position (epoch 0, index 11) is outside the data (epochs from 0, index 0..10)");
    // A refused seek changes nothing: still at the end.
    EXPECT_EQ(p->Next().status().code(), Code::kOutOfRange);
  }
}

TEST(Pipeline, BadShardsAreErrors) {
  auto ex = Numbered(10);
  PipelineOptions o;
  o.batch_size = 2;
  o.num_shards = 0;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)),
            "input pipeline: shard_index 0 of num_shards 0 (shards are 0..num_shards - 1, num_shards >= 1)");
  o.num_shards = 2;
  o.shard_index = 2;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)),
            "input pipeline: shard_index 2 of num_shards 2 (shards are 0..num_shards - 1, num_shards >= 1)");
  o.shard_index = 1;
  o.drop_remainder = false;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)),
            "input pipeline: num_shards 2 needs drop_remainder (every shard takes a full slice of each global batch)");
  o.drop_remainder = true;
  o.batch_size = 6;
  EXPECT_EQ(ErrorOf(Pipeline::Create(ex, o)),
            "input pipeline: batch_size 6 times num_shards 2 is larger than the 10 examples; every epoch would be "
            "empty");
}

TEST(Pipeline, EndsWithOutOfRangeAfterTheLastEpoch) {
  for (int64_t prefetch : {0, 2}) {
    PipelineOptions o;
    o.batch_size = 2;
    o.epochs = 2;
    o.prefetch = prefetch;
    o.drop_remainder = false;
    auto p = Make(Numbered(3), o);
    // 2 batches per epoch (2 + 1 examples), 2 epochs.
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(p->Next().ok()) << i;
    for (int again = 0; again < 3; ++again) {
      auto end = p->Next();
      EXPECT_EQ(end.status().code(), Code::kOutOfRange);
      EXPECT_EQ(end.status().message(), "the input pipeline has finished its 2 epochs");
    }
    EXPECT_EQ(p->position(), (Position{2, 0}));
    EXPECT_GE(p->wait_seconds(), 0.0);
  }
  PipelineOptions none;
  none.epochs = 0;
  none.batch_size = 1;
  auto empty = Make(Numbered(3), none);
  EXPECT_EQ(empty->Next().status().message(), "the input pipeline has finished its 0 epochs");
  PipelineOptions one;
  one.epochs = 1;
  one.batch_size = 3;
  auto single = Make(Numbered(3), one, Position{1, 0});
  EXPECT_EQ(single->Next().status().message(), "the input pipeline has finished its 1 epoch");
}

TEST(Pipeline, DestructionStopsABlockedProducer) {
  // The producer fills its one slot and waits for room; destroying the
  // pipeline must wake and join it, whether it waits or is mid-batch.
  for (int taken : {0, 1, 5}) {
    PipelineOptions o;
    o.batch_size = 2;
    o.prefetch = 1;
    auto p = Make(Numbered(10), o);
    for (int i = 0; i < taken; ++i) ASSERT_TRUE(p->Next().ok());
    p.reset();
  }
}

TEST(Pipeline, OverFashionMnist) {
  auto loaded = LoadExamples("idx", "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz",
                             "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz", -1);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto ex = std::make_shared<const Examples>(std::move(*loaded));
  PipelineOptions o;
  o.batch_size = 64;
  o.shuffle = false;
  o.scale = 1.0 / 255;
  o.example_shape = Shape{28, 28, 1};
  auto p = Make(ex, o);
  auto b = p->Next();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->features.TypeString(), "f32[64,28,28,1]");
  // Python: labels[:10] of t10k; pixel (14, 12) of image 0 is 98.
  EXPECT_EQ(std::vector<int64_t>(b->labels.data<int64_t>(), b->labels.data<int64_t>() + 10),
            (std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  EXPECT_EQ(b->features.data<float>()[14 * 28 + 12], static_cast<float>(98.0 / 255));
  EXPECT_EQ(p->batches_per_epoch(), 156);  // 10000 / 64, remainder dropped
}

}  // namespace
}  // namespace weft::data
