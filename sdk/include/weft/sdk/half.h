// Weft SDK for C++ plugins: IEEE binary16 (f16) and bfloat16 (bf16)
// conversions, bit-exact and header-only, for kernels and the core alike.
//
//   uint16_t h = weft::sdk::FloatToHalf(1.5f);     // round to nearest even
//   float f = weft::sdk::HalfToFloat(h);
//   uint16_t b = weft::sdk::FloatToBfloat16(f);    // round to nearest even
//   uint16_t d = weft::sdk::DoubleToHalf(0.1);     // one rounding, from the double
//
// Narrowing a double or a 64-bit integer to f16 or bf16 through float would
// round twice (to float, then to 16 bits), and a value just past a halfway
// point of the 16-bit type can land on it after the first rounding and go
// the wrong way. The Double*/Int64* conversions round once: to float "to
// odd" first (inexact results keep a sticky low bit), which float's 13 or
// 16 extra bits make exact for the second rounding.
#ifndef WEFT_SDK_HALF_H_
#define WEFT_SDK_HALF_H_

#include <cstdint>
#include <cstring>

namespace weft::sdk {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    if (mantissa == 0) return BitsToFloat(sign);
    // Subnormal: normalise it.
    int shift = 0;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      ++shift;
    }
    mantissa &= 0x3ffu;
    return BitsToFloat(sign | (static_cast<uint32_t>(127 - 15 - shift + 1) << 23) | (mantissa << 13));
  }
  if (exponent == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));  // inf, nan
  return BitsToFloat(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

inline uint16_t FloatToHalf(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan (keep nan quiet and non-zero)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal or zero in binary16: scale by adding a magic number so the
    // FPU does the round-to-nearest-even for us.
    const float magic = BitsToFloat(0x3f000000u);  // 0.5
    const float value = BitsToFloat(abs) + magic;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(FloatBits(value) - FloatBits(magic)));
  }
  const uint32_t mantissa_odd = (abs >> 13) & 1u;
  const uint32_t rounded = abs + 0xc8000fffu + mantissa_odd;  // rebias (-112 << 23) and round
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float Bfloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBfloat16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet nan
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

// |d| rounded to float "to odd": exact values stay, inexact ones are
// truncated toward zero with the lowest mantissa bit set. Rounding that to
// nearest-even at 16 bits equals rounding |d| once.
inline float DoubleToFloatRoundToOdd(double d) {
  const float f = static_cast<float>(d);
  if (d != d || static_cast<double>(f) == d) return f;  // NaN or exact
  uint32_t bits = FloatBits(f);
  if ((bits & 0x7fffffffu) != 0 && (f > 0 ? static_cast<double>(f) > d : static_cast<double>(f) < d)) {
    --bits;  // rounded away from zero: step back toward it
  }
  return BitsToFloat(bits | 1u);
}

// |v| rounded to float "to odd", from its exact integer value.
inline float Int64ToFloatRoundToOdd(int64_t v) {
  const bool negative = v < 0;
  uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  if (magnitude >= (uint64_t{1} << 24)) {
    int shift = 0;
    while ((magnitude >> shift) >= (uint64_t{1} << 24)) ++shift;
    const uint64_t kept = magnitude >> shift;
    const bool sticky = (magnitude & ((uint64_t{1} << shift) - 1)) != 0;
    magnitude = (kept | (sticky ? 1u : 0u)) << shift;  // 24 significant bits: exact in float
  }
  const float f = static_cast<float>(magnitude);
  return negative ? -f : f;
}

inline uint16_t DoubleToHalf(double d) { return FloatToHalf(DoubleToFloatRoundToOdd(d)); }
inline uint16_t DoubleToBfloat16(double d) { return FloatToBfloat16(DoubleToFloatRoundToOdd(d)); }
inline uint16_t Int64ToHalf(int64_t v) { return FloatToHalf(Int64ToFloatRoundToOdd(v)); }
inline uint16_t Int64ToBfloat16(int64_t v) { return FloatToBfloat16(Int64ToFloatRoundToOdd(v)); }

}  // namespace weft::sdk

#endif  // WEFT_SDK_HALF_H_
