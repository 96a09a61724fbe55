// Philox4x32-10, the counter-based random number generator of Salmon,
// Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3"
// (SC'11), as in the Random123 library: a keyed bijection of a 128-bit
// counter, so any block of the stream can be computed on its own.
//
//   philox::Block bits = philox::Philox4x32({block, run_lo, run_hi, draw}, {k0, k1});
//
// Plain C++ without the SDK, so tests can check it against the reference
// vectors directly.
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_PHILOX_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_PHILOX_H_

#include <array>
#include <cstdint>

namespace weft::cpu::philox {

using Counter = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;
using Block = std::array<uint32_t, 4>;

// The round multipliers and the Weyl key increments (golden ratio and
// sqrt(3) - 1).
inline constexpr uint32_t kM0 = 0xD2511F53u;
inline constexpr uint32_t kM1 = 0xCD9E8D57u;
inline constexpr uint32_t kW0 = 0x9E3779B9u;
inline constexpr uint32_t kW1 = 0xBB67AE85u;
inline constexpr int kRounds = 10;

// One round: two 32x32->64 multiplications, their halves mixed with the
// other two words and the round key.
constexpr Counter Round(const Counter& c, const Key& k) {
  const uint64_t p0 = uint64_t{kM0} * c[0];
  const uint64_t p1 = uint64_t{kM1} * c[2];
  const auto hi = [](uint64_t p) { return static_cast<uint32_t>(p >> 32); };
  const auto lo = [](uint64_t p) { return static_cast<uint32_t>(p); };
  return {hi(p1) ^ c[1] ^ k[0], lo(p1), hi(p0) ^ c[3] ^ k[1], lo(p0)};
}

// The 128 random bits of |counter| under |key|.
constexpr Block Philox4x32(Counter counter, Key key) {
  for (int round = 0; round < kRounds; ++round) {
    if (round > 0) key = {key[0] + kW0, key[1] + kW1};
    counter = Round(counter, key);
  }
  return counter;
}

}  // namespace weft::cpu::philox

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_PHILOX_H_
