// The random ops on the CPU device: the Philox4x32-10 block function
// against the Random123 reference vectors, the documented stream layout
// (kernels/random.cc), determinism (seeds, runs, sessions, thread counts),
// the distributions' moments, RandomShuffle, and shape errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>
#include <numeric>
#include <string_view>
#include <vector>

#include "plugins/devices/cpu/kernels/philox.h"
#include "tests/support/runtime_env.h"
#include "tests/support/tensor_values.h"
#include "weft/sdk/half.h"

namespace weft {
namespace {

using testing::RuntimeEnv;
namespace philox = cpu::philox;

// --- Helpers -----------------------------------------------------------------------

// A random op of |shape| with the given seeds, shape fed as an i64 constant.
Output RandomOp(GraphBuilder& b, std::string_view op, DType dtype, const std::vector<int64_t>& shape, int64_t seed,
                int64_t seed2, std::string_view name) {
  return b.Op(op, {b.Const(Tensor::FromVector<int64_t>(shape))},
              {{"dtype", AttrValue(dtype)}, {"seed", AttrValue(seed)}, {"seed2", AttrValue(seed2)}}, name);
}

// Fetches |fetch| |runs| times from one new session over |b|.
std::vector<Tensor> RunRepeatedly(RuntimeEnv& env, const GraphBuilder& b, const std::string& fetch, int runs,
                                  const runtime::SessionOptions& options = {}) {
  auto session = env.Session(b, options);
  std::vector<Tensor> results;
  for (int i = 0; i < runs; ++i) {
    std::vector<Tensor> out;
    Status s = session->Run({}, {fetch}, {}, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    results.push_back(out[0]);
  }
  return results;
}

// The one output of one run of |fetch| on a new session.
Tensor RunOnce(RuntimeEnv& env, const GraphBuilder& b, const std::string& fetch,
               const runtime::SessionOptions& options = {}) {
  auto results = RunRepeatedly(env, b, fetch, 1, options);
  return results.empty() ? Tensor() : results[0];
}

using testing::Values;

// The elements of a f16 or bf16 tensor, widened.
std::vector<float> Widened(const Tensor& t) {
  std::vector<float> out;
  for (uint16_t bits : Values<uint16_t>(t)) {
    out.push_back(t.dtype() == DType::kF16 ? sdk::HalfToFloat(bits) : sdk::Bfloat16ToFloat(bits));
  }
  return out;
}

struct Moments {
  double mean = 0;
  double variance = 0;
};

template <class T>
Moments MomentsOf(const std::vector<T>& values) {
  Moments m;
  for (T v : values) m.mean += static_cast<double>(v);
  m.mean /= static_cast<double>(values.size());
  for (T v : values) m.variance += (static_cast<double>(v) - m.mean) * (static_cast<double>(v) - m.mean);
  m.variance /= static_cast<double>(values.size());
  return m;
}

// --- Philox4x32-10 ---------------------------------------------------------------

TEST(Philox, MatchesTheRandom123KnownAnswers) {
  // Random123's kat_vectors for philox4x32_10.
  EXPECT_EQ(philox::Philox4x32({0, 0, 0, 0}, {0, 0}),
            (philox::Block{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox::Philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (philox::Block{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox::Philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (philox::Block{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

// --- The documented stream ---------------------------------------------------------
//
// An independent reading of the layout documented in kernels/random.cc.

uint64_t Fnv1a(const std::vector<unsigned char>& bytes) {
  uint64_t hash = 0xcbf29ce484222325u;
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3u;
  return hash;
}

philox::Key KeyOf(uint64_t hash) { return {static_cast<uint32_t>(hash), static_cast<uint32_t>(hash >> 32)}; }

philox::Key SeedKey(int64_t seed, int64_t seed2) {
  std::vector<unsigned char> bytes;
  for (uint64_t v : {static_cast<uint64_t>(seed), static_cast<uint64_t>(seed2)}) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  }
  return KeyOf(Fnv1a(bytes));
}

philox::Key NameKey(std::string_view name) {
  return KeyOf(Fnv1a(std::vector<unsigned char>(name.begin(), name.end())));
}

philox::Block Words(const philox::Key& key, uint32_t block, uint32_t run) {
  return philox::Philox4x32({block, run, 0, 0}, key);
}

float ExpectedUniformF32(const philox::Key& key, uint32_t run, uint32_t i) {
  const uint32_t w = Words(key, i / 4, run)[i % 4];
  return std::bit_cast<float>((w >> 9) | 0x3f800000u) - 1.0f;
}

double ExpectedUniformF64(const philox::Key& key, uint32_t run, uint32_t i) {
  const philox::Block w = Words(key, i / 2, run);
  const uint64_t bits = (static_cast<uint64_t>(w[2 * (i % 2)]) << 32 | w[2 * (i % 2) + 1]) >> 12;
  return std::bit_cast<double>(bits | 0x3ff0000000000000u) - 1.0;
}

TEST(RandomStream, UniformIsTheDocumentedPhiloxStream) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, "RandomUniform", DType::kF32, {3, 7}, 7, 11, "f32");
  RandomOp(b, "RandomUniform", DType::kF64, {9}, -5, 0, "f64");
  RandomOp(b, "RandomUniform", DType::kF32, {6}, 0, 0, "noise");
  const auto f32 = RunRepeatedly(env, b, "f32", 3);
  const auto f64 = RunRepeatedly(env, b, "f64", 2);
  const auto noise = RunRepeatedly(env, b, "noise", 2);
  ASSERT_EQ(f32.size(), 3u);
  ASSERT_EQ(f64.size(), 2u);
  ASSERT_EQ(noise.size(), 2u);
  for (uint32_t run = 0; run < 3; ++run) {
    const auto values = Values<float>(f32[run]);
    for (uint32_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(values[i], ExpectedUniformF32(SeedKey(7, 11), run, i)) << "run " << run << " element " << i;
    }
  }
  for (uint32_t run = 0; run < 2; ++run) {
    const auto values = Values<double>(f64[run]);
    for (uint32_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(values[i], ExpectedUniformF64(SeedKey(-5, 0), run, i)) << "run " << run << " element " << i;
    }
    const auto unseeded = Values<float>(noise[run]);
    for (uint32_t i = 0; i < unseeded.size(); ++i) {
      EXPECT_EQ(unseeded[i], ExpectedUniformF32(NameKey("noise"), run, i)) << "run " << run << " element " << i;
    }
  }
}

TEST(RandomStream, NormalIsBoxMullerOnTheStream) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, "RandomNormal", DType::kF32, {10}, 3, 4, "n");
  const auto values = Values<float>(RunOnce(env, b, "n"));
  ASSERT_EQ(values.size(), 10u);
  const philox::Key key = SeedKey(3, 4);
  for (uint32_t i = 0; i < 10; ++i) {
    const uint32_t pair = (i % 4) / 2 * 2;  // the block's words (0, 1) or (2, 3)
    const philox::Block w = Words(key, i / 4, 0);
    const double u = std::bit_cast<float>((w[pair] >> 9) | 0x3f800000u) - 1.0f;
    const double v = std::bit_cast<float>((w[pair + 1] >> 9) | 0x3f800000u) - 1.0f;
    const double radius = std::sqrt(-2 * std::log(1 - u));
    const double angle = 2 * std::numbers::pi * v;
    const double expected = i % 2 == 0 ? radius * std::cos(angle) : radius * std::sin(angle);
    EXPECT_NEAR(values[i], expected, 1e-5 * (1 + std::fabs(expected))) << "element " << i;
  }
}

TEST(RandomStream, ShuffleIsFisherYatesOnTheStream) {
  RuntimeEnv env;
  GraphBuilder b;
  constexpr int kRows = 40;
  std::vector<int64_t> rows(kRows);
  std::iota(rows.begin(), rows.end(), int64_t{0});
  b.Op("RandomShuffle", {b.Const(Tensor::FromVector<int64_t>(rows))},
       {{"seed", AttrValue(int64_t{21})}, {"seed2", AttrValue(int64_t{22})}}, "s");
  const auto runs = RunRepeatedly(env, b, "s", 2);
  ASSERT_EQ(runs.size(), 2u);
  for (uint32_t run = 0; run < 2; ++run) {
    // Words in order from blocks 0, 1, ...; j by rejection below 2^32 mod (i + 1).
    std::vector<uint32_t> words;
    for (uint32_t block = 0; block < 64; ++block) {
      for (uint32_t w : Words(SeedKey(21, 22), block, run)) words.push_back(w);
    }
    std::size_t next = 0;
    std::vector<int64_t> expected = rows;
    for (uint32_t i = kRows - 1; i > 0; --i) {
      const uint32_t bound = i + 1;
      const uint32_t reject = (0u - bound) % bound;
      uint32_t r = words.at(next++);
      while (r < reject) r = words.at(next++);
      std::swap(expected[i], expected[r % bound]);
    }
    EXPECT_EQ(Values<int64_t>(runs[run]), expected) << "run " << run;
  }
}

// --- Determinism ----------------------------------------------------------------

class RandomOps : public ::testing::TestWithParam<const char*> {};

TEST_P(RandomOps, SameSeedsGiveTheSameNumbersInEverySessionAndThreadCount) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, GetParam(), DType::kF32, {250, 401}, 42, 7, "r");  // odd size: a partial last block
  runtime::SessionOptions one, two;
  one.intra_op_threads = 1;
  two.intra_op_threads = 2;
  const auto serial = RunRepeatedly(env, b, "r", 3, one);
  const auto parallel = RunRepeatedly(env, b, "r", 3, two);
  const auto again = RunRepeatedly(env, b, "r", 3);
  ASSERT_EQ(serial.size(), 3u);
  ASSERT_EQ(parallel.size(), 3u);
  ASSERT_EQ(again.size(), 3u);
  for (std::size_t run = 0; run < 3; ++run) {
    EXPECT_EQ(serial[run].shape(), (Shape{250, 401}));
    EXPECT_TRUE(serial[run].BitwiseEquals(parallel[run])) << "run " << run;
    EXPECT_TRUE(serial[run].BitwiseEquals(again[run])) << "run " << run;
  }
}

TEST_P(RandomOps, ConsecutiveRunsAndDifferentSeedsDiffer) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, GetParam(), DType::kF32, {1000}, 1, 2, "a");
  RandomOp(b, GetParam(), DType::kF32, {1000}, 1, 3, "b");
  RandomOp(b, GetParam(), DType::kF32, {1000}, 2, 2, "c");
  RandomOp(b, GetParam(), DType::kF32, {1000}, 2, 0, "d");
  const auto a = RunRepeatedly(env, b, "a", 2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_FALSE(a[0].BitwiseEquals(a[1]));
  for (const char* other : {"b", "c", "d"}) {
    EXPECT_FALSE(a[0].BitwiseEquals(RunOnce(env, b, other))) << other;
  }
  // Values within one output do not repeat either (f32 from 23 bits: a few
  // collisions among 1000 are possible, but not many).
  auto values = Values<float>(a[0]);
  std::sort(values.begin(), values.end());
  EXPECT_GT(std::unique(values.begin(), values.end()) - values.begin(), 990);
}

TEST_P(RandomOps, UnseededGraphsAreReproducibleAndKeyedByNodeName) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, GetParam(), DType::kF32, {1000}, 0, 0, "layer1/init");
  RandomOp(b, GetParam(), DType::kF32, {1000}, 0, 0, "layer2/init");
  const auto first = RunRepeatedly(env, b, "layer1/init", 2);
  const auto second = RunRepeatedly(env, b, "layer1/init", 2);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_TRUE(first[0].BitwiseEquals(second[0]));
  EXPECT_TRUE(first[1].BitwiseEquals(second[1]));
  EXPECT_FALSE(first[0].BitwiseEquals(first[1]));
  EXPECT_FALSE(first[0].BitwiseEquals(RunOnce(env, b, "layer2/init")));
}

TEST_P(RandomOps, ShapeMayBeI32OrI64) {
  RuntimeEnv env;
  GraphBuilder b;
  b.Op(GetParam(), {b.Const(Tensor::FromVector<int32_t>({4, 5}))},
       {{"dtype", AttrValue(DType::kF32)}, {"seed", AttrValue(int64_t{9})}}, "from_i32");
  const Tensor from_i32 = RunOnce(env, b, "from_i32");
  GraphBuilder b64;
  RandomOp(b64, GetParam(), DType::kF32, {4, 5}, 9, 0, "from_i64");
  const Tensor from_i64 = RunOnce(env, b64, "from_i64");
  EXPECT_EQ(from_i32.shape(), (Shape{4, 5}));
  EXPECT_TRUE(from_i32.BitwiseEquals(from_i64));
}

TEST_P(RandomOps, EmptyAndScalarShapes) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, GetParam(), DType::kF32, {3, 0}, 1, 1, "empty");
  RandomOp(b, GetParam(), DType::kF64, {}, 1, 1, "scalar");
  const Tensor empty = RunOnce(env, b, "empty");
  const Tensor scalar = RunOnce(env, b, "scalar");
  EXPECT_EQ(empty.shape(), (Shape{3, 0}));
  EXPECT_EQ(scalar.shape(), Shape{});
  EXPECT_TRUE(std::isfinite(scalar.scalar<double>()));
}

TEST_P(RandomOps, NegativeDimensionsAreNamed) {
  RuntimeEnv env;
  {
    // A constant shape fails when the graph is built. (The shape function
    // prints the negative dimension as '?': "shape [2,?] has a negative
    // dimension".)
    GraphBuilder b;
    RandomOp(b, GetParam(), DType::kF32, {2, -3}, 1, 1, "r");
    EXPECT_EQ(b.status().code(), Code::kInvalidArgument);
    EXPECT_NE(b.status().message().find("has a negative dimension"), std::string::npos) << b.status().ToString();
  }
  GraphBuilder b;
  Output shape = b.Placeholder(DType::kI32, Shape{-1}, "shape");
  b.Op(GetParam(), {shape}, {{"dtype", AttrValue(DType::kF32)}}, "r");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  const std::string where = std::string("node 'r' (") + GetParam() + ") on /device:CPU:0: ";
  EXPECT_EQ(session->Run({{"shape", Tensor::FromVector<int32_t>({2, -3})}}, {"r"}, {}, &out).message(),
            where + "shape [2,-3] has a negative dimension: dim 1 is -3");
  EXPECT_EQ(session->Run({{"shape", Tensor::FromVector<int32_t>({-1, 4, -2})}}, {"r"}, {}, &out).message(),
            where + "shape [-1,4,-2] has negative dimensions: dim 0 is -1, dim 2 is -2");
  Status ok = session->Run({{"shape", Tensor::FromVector<int32_t>({2, 3})}}, {"r"}, {}, &out);
  ASSERT_TRUE(ok.ok()) << ok.ToString();
  EXPECT_EQ(out[0].shape(), (Shape{2, 3}));
}

INSTANTIATE_TEST_SUITE_P(Generators, RandomOps, ::testing::Values("RandomUniform", "RandomNormal", "TruncatedNormal"),
                         [](const auto& test) { return std::string(test.param); });

// --- Distributions ----------------------------------------------------------------
//
// Fixed seeds, so these are deterministic; the bounds are still many
// standard errors wide (n = 200000: the mean's standard error is 0.00065
// for the uniform and 0.0022 for the normal; the sample variance's is about
// sqrt(2 / n) = 0.0032 for the normal).

constexpr int64_t kSamples = 200000;

// kSamples f32 values of the generator |op|, seeds 1234 and 5678, in the
// node |name|.
std::vector<float> SamplesF32(std::string_view op, const std::string& name) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, op, DType::kF32, {kSamples}, 1234, 5678, name);
  return Values<float>(RunOnce(env, b, name));
}

TEST(RandomDistributions, UniformF32) {
  const std::vector<float> values = SamplesF32("RandomUniform", "u");
  ASSERT_EQ(values.size(), static_cast<std::size_t>(kSamples));
  for (float v : values) ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
  const Moments m = MomentsOf(values);
  EXPECT_NEAR(m.mean, 0.5, 0.005);
  EXPECT_NEAR(m.variance, 1.0 / 12, 0.002);
}

TEST(RandomDistributions, NormalF32) {
  const std::vector<float> values = SamplesF32("RandomNormal", "n");
  ASSERT_EQ(values.size(), static_cast<std::size_t>(kSamples));
  for (float v : values) ASSERT_TRUE(std::isfinite(v)) << v;
  const Moments m = MomentsOf(values);
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(m.variance, 1.0, 0.02);
  // About 4.55% of a standard normal lies beyond 2.
  const auto beyond = std::count_if(values.begin(), values.end(), [](float v) { return std::fabs(v) > 2; });
  EXPECT_NEAR(static_cast<double>(beyond) / kSamples, 0.0455, 0.003);
}

TEST(RandomDistributions, TruncatedNormalF32) {
  // Var(X | |X| <= a) = 1 - 2 a phi(a) / (2 Phi(a) - 1) for a standard
  // normal X. At a = 2: phi(2) = exp(-2) / sqrt(2 pi) = 0.05399097 and
  // 2 Phi(2) - 1 = erf(sqrt 2) = 0.95449974, so the variance is
  // 1 - 4 * 0.05399097 / 0.95449974 = 1 - 0.22625864 = 0.77374136.
  const double phi2 = std::exp(-2.0) / std::sqrt(2 * std::numbers::pi);
  const double theoretical = 1 - 2 * 2 * phi2 / std::erf(2 / std::sqrt(2.0));
  EXPECT_NEAR(theoretical, 0.7737413, 1e-6);

  const std::vector<float> values = SamplesF32("TruncatedNormal", "t");
  ASSERT_EQ(values.size(), static_cast<std::size_t>(kSamples));
  for (float v : values) ASSERT_LE(std::fabs(v), 2.0f) << v;
  const Moments m = MomentsOf(values);
  EXPECT_NEAR(m.mean, 0.0, 0.01);
  EXPECT_NEAR(m.variance, theoretical, 0.02);
}

// How far the moments of a sample may be from the distribution's.
struct MomentTolerances {
  double uniform_mean, normal_mean, normal_variance, truncated_variance;
};

// Normal samples |n| are finite and truncated ones |t| within 2; the means
// of the uniform |u| (1/2) and of |n| (0), and the variances of |n| (1)
// and |t| (0.7737413, derived above), are within |tolerance|.
template <class T>
void ExpectNormalTruncatedAndMoments(const std::vector<T>& u, const std::vector<T>& n, const std::vector<T>& t,
                                     const MomentTolerances& tolerance) {
  for (T v : n) ASSERT_TRUE(std::isfinite(v)) << v;
  for (T v : t) ASSERT_LE(std::fabs(v), T{2}) << v;
  EXPECT_NEAR(MomentsOf(u).mean, 0.5, tolerance.uniform_mean);
  EXPECT_NEAR(MomentsOf(n).mean, 0.0, tolerance.normal_mean);
  EXPECT_NEAR(MomentsOf(n).variance, 1.0, tolerance.normal_variance);
  EXPECT_NEAR(MomentsOf(t).variance, 0.7737413, tolerance.truncated_variance);
}

TEST(RandomDistributions, F64) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, "RandomUniform", DType::kF64, {kSamples}, 8, 9, "u");
  RandomOp(b, "RandomNormal", DType::kF64, {kSamples}, 8, 9, "n");
  RandomOp(b, "TruncatedNormal", DType::kF64, {kSamples}, 8, 9, "t");
  const auto u = Values<double>(RunOnce(env, b, "u"));
  const auto n = Values<double>(RunOnce(env, b, "n"));
  const auto t = Values<double>(RunOnce(env, b, "t"));
  for (double v : u) ASSERT_TRUE(v >= 0.0 && v < 1.0) << v;
  ExpectNormalTruncatedAndMoments(u, n, t, {0.005, 0.01, 0.02, 0.02});
  // 52 random bits: the values are not all on a float grid.
  EXPECT_TRUE(
      std::any_of(u.begin(), u.end(), [](double v) { return static_cast<double>(static_cast<float>(v)) != v; }));
}

class HalfDtypes : public ::testing::TestWithParam<DType> {};

TEST_P(HalfDtypes, ValuesAreInRange) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, "RandomUniform", GetParam(), {kSamples}, 5, 6, "u");
  RandomOp(b, "RandomNormal", GetParam(), {kSamples}, 5, 6, "n");
  RandomOp(b, "TruncatedNormal", GetParam(), {kSamples}, 5, 6, "t");
  const Tensor ut = RunOnce(env, b, "u");
  ASSERT_EQ(ut.dtype(), GetParam());
  const auto u = Widened(ut);
  const auto n = Widened(RunOnce(env, b, "n"));
  const auto t = Widened(RunOnce(env, b, "t"));
  // Rounding would take about 1 in 2^12 (f16) or 2^9 (bf16) of the f32
  // uniforms to 1; they must stay below it.
  for (float v : u) ASSERT_TRUE(v >= 0.0f && v < 1.0f) << v;
  const float below_one = GetParam() == DType::kF16 ? 1.0f - 1.0f / 2048 : 1.0f - 1.0f / 256;
  EXPECT_EQ(*std::max_element(u.begin(), u.end()), below_one);
  ExpectNormalTruncatedAndMoments(u, n, t, {0.01, 0.02, 0.03, 0.03});
}

INSTANTIATE_TEST_SUITE_P(Widths, HalfDtypes, ::testing::Values(DType::kF16, DType::kBF16),
                         [](const auto& test) { return std::string(DTypeName(test.param)); });

// --- RandomShuffle ------------------------------------------------------------------

Output Shuffle(GraphBuilder& b, const Tensor& value, int64_t seed, std::string_view name) {
  return b.Op("RandomShuffle", {b.Const(value)}, {{"seed", AttrValue(seed)}}, name);
}

// The rows of a tensor of T, as doubles (exact for the values used here),
// for comparing as multisets.
template <class T>
std::vector<std::vector<double>> Rows(const Tensor& t) {
  const auto values = Values<T>(t);
  const std::size_t rows = static_cast<std::size_t>(t.dim(0));
  const std::size_t width = rows == 0 ? 0 : values.size() / rows;
  std::vector<std::vector<double>> out(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < width; ++c) out[r].push_back(static_cast<double>(values[r * width + c]));
  }
  return out;
}

template <class T>
void ExpectPermutedRows(const Tensor& input, const Tensor& output) {
  ASSERT_EQ(output.dtype(), input.dtype());
  ASSERT_EQ(output.shape(), input.shape());
  auto in = Rows<T>(input), out = Rows<T>(output);
  EXPECT_NE(in, out) << "the rows were not moved";
  std::sort(in.begin(), in.end());
  std::sort(out.begin(), out.end());
  EXPECT_EQ(in, out) << "not a permutation of the rows";
}

TEST(RandomShuffle, PermutesRowsOfEveryWidth) {
  constexpr int kRows = 100;
  std::vector<float> f32;
  std::vector<int64_t> i64;
  std::vector<bool> flags;
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < 3; ++c) f32.push_back(static_cast<float>(r * 3 + c) + 0.5f);
    i64.push_back(int64_t{1} << 40 | r);
    flags.push_back(r % 3 == 0);
    flags.push_back(r % 5 == 0);
  }
  const Tensor f32_in = Tensor::FromVector<float>(f32, Shape{kRows, 3});
  const Tensor i64_in = Tensor::FromVector<int64_t>(i64);
  const Tensor bool_in = Tensor::FromVector<bool>(flags, Shape{kRows, 2});
  RuntimeEnv env;
  GraphBuilder b;
  Shuffle(b, f32_in, 1, "f32");
  Shuffle(b, i64_in, 1, "i64");
  Shuffle(b, bool_in, 1, "bool");
  auto session = env.Session(b);
  std::vector<Tensor> out, again;
  ASSERT_TRUE(session->Run({}, {"f32", "i64", "bool"}, {}, &out).ok());
  ExpectPermutedRows<float>(f32_in, out[0]);
  ExpectPermutedRows<int64_t>(i64_in, out[1]);
  ExpectPermutedRows<uint8_t>(bool_in, out[2]);
  // Each run shuffles afresh.
  ASSERT_TRUE(session->Run({}, {"f32", "i64", "bool"}, {}, &again).ok());
  ExpectPermutedRows<float>(f32_in, again[0]);
  EXPECT_FALSE(again[0].BitwiseEquals(out[0]));
}

// KNOWN BUG (core): the session makes one executor, with its own kernel
// objects, per signature of Run, so a random op's run count restarts when it
// is fetched along with something else, and that run repeats the numbers
// of the op's first run. Kernels of stateful ops should be shared by a
// session's executors (as TensorFlow's OpSegment does). Enable once fixed.
TEST(RandomStream, RunCountIsSharedAcrossFetchSets) {
  RuntimeEnv env;
  GraphBuilder b;
  RandomOp(b, "RandomUniform", DType::kF32, {8}, 1, 2, "u");
  b.Op("Neg", {b.Scalar<float>(1)}, {}, "other");
  auto session = env.Session(b);
  std::vector<Tensor> first, second;
  ASSERT_TRUE(session->Run({}, {"u"}, {}, &first).ok());
  ASSERT_TRUE(session->Run({}, {"u", "other"}, {}, &second).ok());
  EXPECT_FALSE(first[0].BitwiseEquals(second[0])) << "the second run of 'u' repeated its first";
}

TEST(RandomShuffle, IsDeterministicAcrossSessionsAndThreadCounts) {
  std::vector<int32_t> values(3000 * 8);
  std::iota(values.begin(), values.end(), 0);
  GraphBuilder b;
  Shuffle(b, Tensor::FromVector<int32_t>(values, Shape{3000, 8}), 77, "s");
  RuntimeEnv env;
  runtime::SessionOptions one, two;
  one.intra_op_threads = 1;
  two.intra_op_threads = 2;
  const auto serial = RunRepeatedly(env, b, "s", 2, one);
  const auto parallel = RunRepeatedly(env, b, "s", 2, two);
  ASSERT_EQ(serial.size(), 2u);
  ASSERT_EQ(parallel.size(), 2u);
  EXPECT_TRUE(serial[0].BitwiseEquals(parallel[0]));
  EXPECT_TRUE(serial[1].BitwiseEquals(parallel[1]));
  EXPECT_FALSE(serial[0].BitwiseEquals(serial[1]));
}

TEST(RandomShuffle, ScalarsSingleRowsAndEmptyTensorsComeBackUnchanged) {
  RuntimeEnv env;
  GraphBuilder b;
  const Tensor scalar = Tensor::Scalar<double>(2.5);
  const Tensor one_row = Tensor::FromVector<int16_t>({1, 2, 3}, Shape{1, 3});
  const Tensor no_rows = Tensor::FromVector<float>({}, Shape{0, 4});
  const Tensor empty_rows = Tensor::FromVector<uint8_t>({}, Shape{5, 0});
  Shuffle(b, scalar, 3, "scalar");
  Shuffle(b, one_row, 3, "one_row");
  Shuffle(b, no_rows, 3, "no_rows");
  Shuffle(b, empty_rows, 3, "empty_rows");
  auto session = env.Session(b);
  std::vector<Tensor> out;
  Status s = session->Run({}, {"scalar", "one_row", "no_rows", "empty_rows"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(out[0].BitwiseEquals(scalar));
  EXPECT_TRUE(out[1].BitwiseEquals(one_row));
  EXPECT_TRUE(out[2].BitwiseEquals(no_rows));
  EXPECT_TRUE(out[3].BitwiseEquals(empty_rows));
}

}  // namespace
}  // namespace weft
