#include "vector_math.h"

#include <bit>
#include <cmath>
#include <limits>

namespace weft::cpu {
namespace {

// exp(v): Cody-Waite range reduction to r in [-ln2/2, ln2/2] and Cephes'
// degree-6 polynomial for exp(r), scaled by 2^k in two steps so that
// results down to the smallest subnormal are right. Comparisons are false
// for NaN, which passes through.
[[gnu::always_inline]] inline float ExpCore(float v) {
  v = v < -104.0f ? -104.0f : v;                                           // exp(-104) rounds to 0
  v = v > 89.0f ? 89.0f : v;                                               // exp(89) overflows to +inf
  const float k = (v * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(v / ln 2)
  const float r = (v - k * 0.693359375f) + k * 2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  const int ki = static_cast<int>(k == k ? k : 0.0f);  // a NaN's p is NaN already; no cast of NaN
  const int k1 = ki / 2, k2 = ki - k1;
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(k1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(k2 + 127) << 23);
  return p * s1 * s2;
}

// erf(z), within 1.5 ulp, in two pieces that are both computed and one
// selected (so the loop has no branch):
// - |z| < 1: z + z (2/sqrt(pi) - 1 + z^2 Q(z^2)), Q of degree 6 fitted by
//   least squares to erf(z)/z on [0, 1] (the leading z is exact, so the
//   rounding of the rest weighs an eighth);
// - 1 <= |z| < 4: 1 - erfc(|z|), with erfc(a) = t exp(-a^2 + P(t)),
//   t = 1 / (1 + a/2), P of degree 6 fitted to log(erfc(a) / t) + a^2 on
//   [1, 4] (the form of Numerical Recipes' erfcc);
// - |z| >= 4: +-1 (erf(3.92) already rounds to 1 in f32).
// NaN fails |z| >= 1 and goes through the first piece, staying NaN.
[[gnu::always_inline]] inline float ErfCore(float z) {
  const float a = std::fabs(z);
  const float s = z * z;
  float q = -1.0224230459161314e-05f;
  q = q * s + 1.1454001245039606e-04f;
  q = q * s - 8.508803125909545e-04f;
  q = q * s + 5.222624741137026e-03f;
  q = q * s - 2.686594859653468e-02f;
  q = q * s + 1.128379030018355e-01f;
  q = q * s - 3.761263888944704e-01f;
  const float small = z + z * (0.12837916709551257f + s * q);
  const float t = 1.0f / (1.0f + 0.5f * a);
  float p = 0.11429220699394031f;
  p = p * t - 0.07449522172225184f;
  p = p * t - 0.4004465282823959f;
  p = p * t + 0.32642774805852043f;
  p = p * t + 0.2863729846014455f;
  p = p * t + 1.0161652221705835f;
  p = p * t - 1.2667033443101527f;
  const float erfc = t * ExpCore(p - a * a);
  const float large = std::copysign(a < 4.0f ? 1.0f - erfc : 1.0f, z);
  return a >= 1.0f ? large : small;
}

// Whether |holds| is true of some x[0, n): an OR of flags over the whole
// block with no early exit, a reduction the compiler vectorises (inlined
// into each caller's clone; callers scan in blocks that fit a cache).
template <class Pred>
[[gnu::always_inline]] inline bool AnyOf(const float* x, int64_t n, Pred holds) {
  int any = 0;
  for (int64_t i = 0; i < n; ++i) any |= holds(x[i]) ? 1 : 0;
  return any != 0;
}

}  // namespace

WEFT_CPU_CLONES void ExpShifted(const float* x, float shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ExpCore(x[i] - shift);
}

WEFT_CPU_CLONES void GeluErf(const float* x, float* y, int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float gelu = 0.5f * v * (1.0f + ErfCore(v * 0.7071067811865476f));
    // The limits at +-inf (the formula gives -inf * 0 = NaN at -inf).
    const float limit = v > 0 ? v : 0.0f;
    y[i] = std::fabs(v) == kInf ? limit : gelu;
  }
}

WEFT_CPU_CLONES void ClampInPlace(float* data, int64_t n, float low, float high) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = data[i];
    data[i] = x < low ? low : (x > high ? high : x);
  }
}

WEFT_CPU_CLONES bool AnyNan(const float* x, int64_t n) {
  return AnyOf(x, n, [](float v) { return v != v; });
}

WEFT_CPU_CLONES bool AnyEqual(const float* x, int64_t n, float v) {
  return AnyOf(x, n, [v](float e) { return e == v; });
}

WEFT_CPU_CLONES bool AnyNonFinite(const float* x, int64_t n) {
  return AnyOf(x, n, [](float v) {
    const float d = v - v;  // 0 for a finite value, NaN otherwise
    return d != d;
  });
}

}  // namespace weft::cpu
