// Vectorised f32 loops of the CPU plugin's kernels: exp, for Softmax, the
// exact (erf) GELU, for the Gelu op and the fused ops' epilogue, the
// clamp of that epilogue's Relu, Relu6 and Clip, and the scans MaxPool
// makes around oneDNN's pooling. Each
// is a plain loop the compiler vectorises (no libm call inside), compiled
// once per x86 instruction set and picked when the plugin loads
// (WEFT_CPU_CLONES). Accuracy is stated per function and checked by the
// conformance cases against NumPy (tests/conformance/cases).
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_VECTOR_MATH_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_VECTOR_MATH_H_

#include <cstdint>

// GCC compiles a loop marked WEFT_CPU_CLONES once per instruction set and
// picks one when the plugin loads (the build has no -march: oneDNN
// dispatches the same way).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WEFT_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WEFT_CPU_CLONES
#endif

namespace weft::cpu {

// y[i] = exp(x[i] - shift) for i in [0, n), within 2 ulp of expf; results
// down to the smallest subnormal are right. NaN stays NaN, -inf gives 0,
// +inf gives +inf.
void ExpShifted(const float* x, float shift, float* y, int64_t n);

// y[i] = 0.5 x (1 + erf(x / sqrt(2))) for i in [0, n), the Gelu op's exact
// form evaluated as it is written, with an erf within 1.5 ulp of the true
// value (glibc's erff is within 1). Gelu(+inf) = +inf, Gelu(-inf) = 0, NaN
// stays NaN. |y| may be |x|.
void GeluErf(const float* x, float* y, int64_t n);

// data[i] = clamp(data[i], low, high) in place for i in [0, n), as Relu6
// and Clip compute it: NaN stays NaN (comparisons with it are false).
// Relu is low = 0, high = +inf.
void ClampInPlace(float* data, int64_t n, float low, float high);

// Whether x[0, n) holds a NaN.
bool AnyNan(const float* x, int64_t n);

// Whether x[0, n) holds the value |v| (not NaN).
bool AnyEqual(const float* x, int64_t n, float v);

// Whether x[0, n) holds an infinity or a NaN.
bool AnyNonFinite(const float* x, int64_t n);

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_VECTOR_MATH_H_
