// Random choices that must be the same on every machine and with every
// standard library: the input pipeline's per-epoch shuffle and the
// random-shuffle queue. std::mt19937_64 is specified bit for bit by the C++
// standard, but std::uniform_int_distribution and std::shuffle are not
// (libstdc++ and libc++ give different sequences), so the bounded draws
// and the seeding are written out here.
//
//   std::mt19937_64 gen(MixSeed(seed, epoch));
//   const uint64_t k = UniformBelow(gen, n);  // in [0, n)
#ifndef WEFT_CORE_BASE_SEEDED_RANDOM_H_
#define WEFT_CORE_BASE_SEEDED_RANDOM_H_

#include <cstdint>
#include <random>

namespace weft {

// One step of SplitMix64 (Steele, Lea and Flood 2014) from state |x|: a
// bijective mix that spreads nearby seeds far apart.
inline uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The generator seed for stream |stream| (an epoch, a second seed) of
// |seed|: SplitMix64(SplitMix64(seed) ^ stream).
inline uint64_t MixSeed(uint64_t seed, uint64_t stream) { return SplitMix64(SplitMix64(seed) ^ stream); }

// A uniform draw in [0, |bound|) (|bound| >= 1) by rejection: a draw is
// kept when it is at least 2^64 mod |bound|, which leaves a whole multiple
// of |bound| equally likely values, and reduced modulo |bound|.
inline uint64_t UniformBelow(std::mt19937_64& gen, uint64_t bound) {
  // 2^64 mod bound, computed without 128-bit arithmetic.
  const uint64_t excess = (0 - bound) % bound;
  while (true) {
    const uint64_t draw = gen();
    if (draw >= excess) return draw % bound;
  }
}

}  // namespace weft

#endif  // WEFT_CORE_BASE_SEEDED_RANDOM_H_
