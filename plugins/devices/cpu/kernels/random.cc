// Random kernels: RandomUniform, RandomNormal and TruncatedNormal (f16,
// bf16, f32, f64; the shape input i32 or i64) and RandomShuffle (every
// fixed-size dtype).
//
// THE STREAM. Which numbers a node draws is part of Weft's reproducibility
// promise (core/ops/random_ops.cc): the n-th run of a random op gives the
// same numbers on every machine and every thread count. Changing anything
// below changes every seeded program's numbers.
//
//   Key      a 64-bit K given to Philox4x32-10 (philox.h) as
//            {K & 0xffffffff, K >> 32}. K is the 64-bit FNV-1a hash of the
//            16 bytes of seed then seed2, each a little-endian int64; or,
//            when seed = seed2 = 0, of the node's name.
//   Counter  {block, run & 0xffffffff, run >> 32, draw}, that is
//            (run << 32 | block) in the low 64 bits, where
//              block  the index of a 4-word block within this output;
//              run    how many times this kernel object ran before
//                     (0, 1, 2, ...);
//              draw   0, except for TruncatedNormal's redraws (below).
//
// Element i of an output with P elements per block comes from position
// i % P of block i / P, so it depends only on (key, run, i): blocks are
// generated in parallel in any order. From the block's words w0..w3:
//
//   RandomUniform   f32, f16, bf16: P = 4; value j is the float with
//                   mantissa w_j >> 9 in [1, 2), minus 1. f16 and bf16 round
//                   it to nearest even; a value that rounds up to 1 becomes
//                   the largest value below 1 (0x3bff, 0x3f7f).
//                   f64: P = 2; value j is the double with mantissa
//                   (w_2j << 32 | w_2j+1) >> 12 in [1, 2), minus 1.
//   RandomNormal    Box-Muller on pairs of those uniforms (u, v):
//                   sqrt(-2 log(1 - u)) * (cos 2 pi v, sin 2 pi v), in float
//                   for f32/f16/bf16 (P = 4: pairs (u0, u1) and (u2, u3)),
//                   in double for f64 (P = 2).
//   TruncatedNormal RandomNormal's value, unless its magnitude (after
//                   rounding to the dtype) exceeds 2: then the value at the
//                   same position of draw 1, else draw 2, and so on.
//   RandomShuffle   The words of blocks 0, 1, 2, ... (draw 0) in order form
//                   one stream. Fisher-Yates over the n rows: for i = n-1
//                   down to 1, swap rows i and j, j uniform in [0, i]:
//                   j = r % (i + 1) for the first word r (or, when
//                   i + 1 > 2^32, the first word pair hi, lo as
//                   hi << 32 | lo) that is not below 2^32 mod (i + 1)
//                   (2^64 mod (i + 1)), so j is unbiased.
//
// Uniforms and shuffles are integer and exact float arithmetic, the same
// bits everywhere; normals also go through the C library's log, sqrt, cos
// and sin, so they match wherever those round alike.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "../kernel_framework.h"
#include "philox.h"

namespace weft::cpu {
namespace {

// --- Keys and counters ---------------------------------------------------------

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325u;
constexpr uint64_t kFnvPrime = 0x100000001b3u;

uint64_t Fnv1a(const unsigned char* bytes, std::size_t size) {
  uint64_t hash = kFnvOffset;
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= kFnvPrime;
  }
  return hash;
}

philox::Key KeyFor(const InitContext& init) {
  const int64_t seed = init.Int("seed");
  const int64_t seed2 = init.Int("seed2");
  uint64_t hash;
  if (seed == 0 && seed2 == 0) {
    const std::string name = init.node_name();
    hash = Fnv1a(reinterpret_cast<const unsigned char*>(name.data()), name.size());
  } else {
    unsigned char bytes[16];
    for (int i = 0; i < 8; ++i) {
      bytes[i] = static_cast<unsigned char>(static_cast<uint64_t>(seed) >> (8 * i));
      bytes[8 + i] = static_cast<unsigned char>(static_cast<uint64_t>(seed2) >> (8 * i));
    }
    hash = Fnv1a(bytes, sizeof bytes);
  }
  return {static_cast<uint32_t>(hash), static_cast<uint32_t>(hash >> 32)};
}

// The 4 words of |block| of run |run| (see the layout above).
philox::Block Bits(const philox::Key& key, uint32_t block, uint64_t run, uint32_t draw = 0) {
  return philox::Philox4x32({block, static_cast<uint32_t>(run), static_cast<uint32_t>(run >> 32), draw}, key);
}

// --- Distributions -------------------------------------------------------------
//
// Each turns one block into kPerBlock values of T: Generate(key, block, run,
// out). kCost is a rough count of nanoseconds per block.

// [0, 1) from the top 23 bits of a word.
float UnitFloat(uint32_t word) { return std::bit_cast<float>((word >> 9) | 0x3f800000u) - 1.0f; }

// [0, 1) from the top 52 bits of a 64-bit word.
double UnitDouble(uint64_t word) { return std::bit_cast<double>((word >> 12) | 0x3ff0000000000000u) - 1.0; }

uint64_t Word64(uint32_t hi, uint32_t lo) { return static_cast<uint64_t>(hi) << 32 | lo; }

template <class T>
constexpr int kPerBlock = std::is_same_v<T, double> ? 2 : 4;

// A uniform float in [0, 1) stored as T, kept below 1 when rounding to a
// 16-bit type would reach it.
template <class T>
T StoreUnit(float u) {
  if constexpr (std::is_same_v<T, float>) {
    return u;
  } else {
    // The largest value below 1: 1 - 2^-11 in f16, 1 - 2^-8 in bf16.
    constexpr uint16_t kBelowOne = std::is_same_v<T, Half> ? 0x3bff : 0x3f7f;
    const T v = StoreAs<T>(u);
    return Load(v) < 1.0f ? v : T{kBelowOne};
  }
}

template <class T>
struct Uniform {
  static constexpr int64_t kCost = 20;
  static void Generate(const philox::Key& key, uint32_t block, uint64_t run, T* out) {
    const philox::Block w = Bits(key, block, run);
    if constexpr (std::is_same_v<T, double>) {
      out[0] = UnitDouble(Word64(w[0], w[1]));
      out[1] = UnitDouble(Word64(w[2], w[3]));
    } else {
      for (int j = 0; j < 4; ++j) out[j] = StoreUnit<T>(UnitFloat(w[j]));
    }
  }
};

// Two independent standard normals from two independent uniforms in [0, 1).
template <class C>
void BoxMuller(C u, C v, C* out) {
  const C radius = std::sqrt(C(-2) * std::log(C(1) - u));  // 1 - u is in (0, 1]
  const C angle = C(2) * std::numbers::pi_v<C> * v;
  out[0] = radius * std::cos(angle);
  out[1] = radius * std::sin(angle);
}

template <class T>
struct Normal {
  static constexpr int64_t kCost = 60;
  static void Generate(const philox::Key& key, uint32_t block, uint64_t run, T* out) {
    FromBits(Bits(key, block, run), out);
  }
  static void FromBits(const philox::Block& w, T* out) {
    if constexpr (std::is_same_v<T, double>) {
      BoxMuller(UnitDouble(Word64(w[0], w[1])), UnitDouble(Word64(w[2], w[3])), out);
    } else {
      float values[4];
      BoxMuller(UnitFloat(w[0]), UnitFloat(w[1]), values);
      BoxMuller(UnitFloat(w[2]), UnitFloat(w[3]), values + 2);
      for (int j = 0; j < 4; ++j) out[j] = StoreAs<T>(values[j]);
    }
  }
};

template <class T>
struct TruncatedNormal {
  static constexpr int64_t kCost = 80;
  static bool Outside(T v) { return std::fabs(Load(v)) > 2; }
  static void Generate(const philox::Key& key, uint32_t block, uint64_t run, T* out) {
    constexpr int kN = kPerBlock<T>;
    Normal<T>::FromBits(Bits(key, block, run), out);
    // Each position redraws from its own place in draws 1, 2, ...; about
    // 4.6% of values need a redraw, so this ends after a few draws.
    for (uint32_t draw = 1; std::any_of(out, out + kN, Outside); ++draw) {
      T redraw[kN];
      Normal<T>::FromBits(Bits(key, block, run, draw), redraw);
      for (int j = 0; j < kN; ++j) {
        if (Outside(out[j])) out[j] = redraw[j];
      }
    }
  }
};

// --- Kernels -------------------------------------------------------------------

// The dims held by the 1-D i32 or i64 'shape' input, and their element
// count.
Dims OutputDims(const Tensor& shape, int64_t* num_elements) {
  if (shape.rank() != 1)
    Fail("'shape' must be a 1-D tensor of dimensions, not a tensor of shape ", DimsString(shape.dims));
  Dims dims(static_cast<std::size_t>(shape.num_elements));
  for (std::size_t i = 0; i < dims.size(); ++i) {
    dims[i] = shape.dtype == WEFT_DTYPE_I32 ? shape.as<int32_t>()[i] : shape.as<int64_t>()[i];
  }
  std::string negative;
  int negatives = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) negative += Str(negatives++ == 0 ? "" : ", ", "dim ", i, " is ", dims[i]);
  }
  if (negatives > 0) {
    Fail("shape ", DimsString(dims), " has ",
         negatives > 1 ? "negative dimensions: " : "a negative dimension: ", negative);
  }
  *num_elements = 1;
  for (int64_t d : dims) {
    if (d != 0 && *num_elements > std::numeric_limits<int64_t>::max() / d) {
      Fail("shape ", DimsString(dims), " has too many elements");
    }
    *num_elements *= d;
  }
  return dims;
}

template <template <class> class Dist, class T>
class RandomKernel {
 public:
  explicit RandomKernel(const InitContext& init) : key_(KeyFor(init)) {}

  void Compute(Context& ctx) {
    const uint64_t run = runs_.fetch_add(1, std::memory_order_relaxed);
    int64_t n = 0;
    const Dims dims = OutputDims(ctx.input(0), &n);
    constexpr int64_t kN = kPerBlock<T>;
    const int64_t blocks = n / kN + (n % kN != 0 ? 1 : 0);  // n + kN - 1 could overflow
    if (blocks > int64_t{1} << 32) {
      Fail("cannot draw ", n, " random values at once: the stream of one run holds 2^32 blocks of ", kN);
    }
    T* values = ctx.allocate_output(0, dims).template as<T>();
    ParallelFor(blocks, Dist<T>::kCost, [&](int64_t begin, int64_t end) {
      T block_values[kN];
      for (int64_t b = begin; b < end; ++b) {
        Dist<T>::Generate(key_, static_cast<uint32_t>(b), run, block_values);
        const int64_t first = b * kN;
        std::copy_n(block_values, std::min(kN, n - first), values + first);
      }
    });
  }

 private:
  const philox::Key key_;
  std::atomic<uint64_t> runs_{0};
};

// The words of one run's blocks 0, 1, 2, ... in order.
class WordStream {
 public:
  WordStream(const philox::Key& key, uint64_t run) : key_(key), run_(run) {}

  uint32_t Next() {
    if (used_ == 4) {
      if (block_ > std::numeric_limits<uint32_t>::max()) Fail("the random stream of one run is exhausted");
      words_ = Bits(key_, static_cast<uint32_t>(block_++), run_);
      used_ = 0;
    }
    return words_[static_cast<std::size_t>(used_++)];
  }

  // Uniform in [0, bound), bound >= 1, without modulo bias: values below
  // 2^k mod bound are rejected so the rest are a whole number of bound-sized
  // ranges.
  uint64_t Below(uint64_t bound) {
    if (bound <= std::numeric_limits<uint32_t>::max()) {
      const auto b = static_cast<uint32_t>(bound);
      const uint32_t reject = (0u - b) % b;
      for (;;) {
        const uint32_t r = Next();
        if (r >= reject) return r % b;
      }
    }
    const uint64_t reject = (uint64_t{0} - bound) % bound;
    for (;;) {
      const uint32_t hi = Next();
      const uint32_t lo = Next();
      const uint64_t r = Word64(hi, lo);
      if (r >= reject) return r % bound;
    }
  }

 private:
  philox::Key key_;
  uint64_t run_;
  uint64_t block_ = 0;
  philox::Block words_{};
  int used_ = 4;
};

// Rows are moved as bytes, so one kernel serves every fixed-size dtype.
class RandomShuffleKernel {
 public:
  explicit RandomShuffleKernel(const InitContext& init) : key_(KeyFor(init)) {}

  void Compute(Context& ctx) {
    const uint64_t run = runs_.fetch_add(1, std::memory_order_relaxed);
    const Tensor in = ctx.input(0);
    if (in.rank() == 0 || in.dim(0) <= 1) {
      ctx.forward(0, 0);
      return;
    }
    const int64_t rows = in.dim(0);
    // Fisher-Yates on row indices: swapping entries of |order| is swapping
    // rows, and output row i is then input row order[i].
    std::vector<int64_t> order(static_cast<std::size_t>(rows));
    std::iota(order.begin(), order.end(), int64_t{0});
    WordStream stream(key_, run);
    for (int64_t i = rows - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(stream.Below(static_cast<uint64_t>(i) + 1));
      std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
    }
    Tensor out = ctx.allocate_output(0, in.dims);
    const std::size_t row_bytes = static_cast<std::size_t>(in.num_elements / rows) * ElementSize(in.dtype);
    const auto* src = static_cast<const char*>(in.data);
    auto* dst = static_cast<char*>(out.data);
    const int64_t cost = 1 + static_cast<int64_t>(row_bytes / 16);
    ParallelFor(rows, cost, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        std::memcpy(dst + static_cast<std::size_t>(i) * row_bytes,
                    src + static_cast<std::size_t>(order[static_cast<std::size_t>(i)]) * row_bytes, row_bytes);
      }
    });
  }

 private:
  const philox::Key key_;
  std::atomic<uint64_t> runs_{0};
};

}  // namespace

void RegisterRandomKernels(KernelRegistry& r) {
  auto generators = [&r]<class T>() {
    for (weft_dtype_t index : {WEFT_DTYPE_I32, WEFT_DTYPE_I64}) {
      AddKernel<"RandomUniform", RandomKernel<Uniform, T>, DtypeOf<T>()>(r, {{"dtype", DtypeOf<T>()}, {"T", index}}, 0,
                                                                         {"shape"});
      AddKernel<"RandomNormal", RandomKernel<Normal, T>, DtypeOf<T>()>(r, {{"dtype", DtypeOf<T>()}, {"T", index}}, 0,
                                                                       {"shape"});
      AddKernel<"TruncatedNormal", RandomKernel<TruncatedNormal, T>, DtypeOf<T>()>(
          r, {{"dtype", DtypeOf<T>()}, {"T", index}}, 0, {"shape"});
    }
  };
  generators.template operator()<float>();
  generators.template operator()<double>();
  generators.template operator()<Half>();
  generators.template operator()<BFloat16>();
  // Strings are not fixed-size (their elements point into their owner).
  for (weft_dtype_t dtype : {WEFT_DTYPE_F16, WEFT_DTYPE_BF16, WEFT_DTYPE_F32, WEFT_DTYPE_F64, WEFT_DTYPE_I8,
                             WEFT_DTYPE_I16, WEFT_DTYPE_I32, WEFT_DTYPE_I64, WEFT_DTYPE_U8, WEFT_DTYPE_BOOL}) {
    AddKernel<"RandomShuffle", RandomShuffleKernel>(r, {{"T", dtype}});
  }
}

}  // namespace weft::cpu
