// Device code shared by the cuda and hip plugins: what a kernel source
// under gpu/kernels/ needs, the same under nvcc and hipcc. Both compilers
// accept __global__/__device__, the <<<grid, block, shared, stream>>>
// launch and the C math library in device code; what differs (the runtime
// header, overloads of the math functions for float and double) is settled
// here.
//
// Include only from a .cu or .hip translation unit.
#ifndef WEFT_PLUGINS_DEVICES_GPU_DEVICE_COMPAT_H_
#define WEFT_PLUGINS_DEVICES_GPU_DEVICE_COMPAT_H_

#if !defined(__CUDACC__) && !defined(__HIPCC__)
#error "gpu/device_compat.h is device code: include it from a .cu or .hip file"
#endif

#if defined(WEFT_GPU_HIP)
#include <hip/hip_runtime.h>
#else
#include <cuda_runtime.h>
#endif

#include <cstdint>
#include <type_traits>

#include "gpu/kernel_framework.h"

namespace weft::gpu {

// Threads per block for the one-dimensional kernels; a multiple of both
// warp sizes (32 on NVIDIA, 64 on AMD).
inline constexpr int kBlock = 256;

// Blocks for |n| elements with one thread each, capped so that huge
// tensors use a grid-stride loop instead of an enormous grid.
inline unsigned GridFor(int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 ? 65535 : blocks));
}

// The global thread index and the grid's total thread count.
__device__ inline int64_t GlobalIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t GlobalStride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }

// The element offsets of each of N operands for output element |i|.
template <int N>
__device__ inline void BroadcastOffsets(const BroadcastPlan<N>& plan, int64_t i, int64_t* offsets) {
  for (int k = 0; k < N; ++k) offsets[k] = 0;
  for (int d = plan.rank - 1; d >= 0; --d) {
    const int64_t coord = i % plan.dims[d];
    i /= plan.dims[d];
    for (int k = 0; k < N; ++k) offsets[k] += coord * plan.strides[k][d];
  }
}

// An offset from |dims| and |strides| for the row-major index |i| over
// |dims| (one side of a ReducePlan).
__device__ inline int64_t StridedOffset(int rank, const int64_t* dims, const int64_t* strides, int64_t i) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (i % dims[d]) * strides[d];
    i /= dims[d];
  }
  return offset;
}

// Combines every thread's |v| with |op| and returns the result to all
// threads of a block of kBlock threads; |shared| holds kBlock values. Every
// thread of the block must call it.
template <class T, class Op>
__device__ inline T BlockCombine(T v, T* shared, Op op) {
  const int tid = static_cast<int>(threadIdx.x);
  shared[tid] = v;
  __syncthreads();
  for (int s = kBlock / 2; s > 0; s /= 2) {
    if (tid < s) shared[tid] = op(shared[tid], shared[tid + s]);
    __syncthreads();
  }
  const T result = shared[0];
  __syncthreads();  // shared is reused by the caller's next combine
  return result;
}

struct MaxOf {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return b > a ? b : a;
  }
};
struct SumOf {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// Math with one name for float and double.
namespace dm {
__device__ inline float Exp(float x) { return expf(x); }
__device__ inline double Exp(double x) { return exp(x); }
__device__ inline float Expm1(float x) { return expm1f(x); }
__device__ inline double Expm1(double x) { return expm1(x); }
__device__ inline float Log(float x) { return logf(x); }
__device__ inline double Log(double x) { return log(x); }
__device__ inline float Log1p(float x) { return log1pf(x); }
__device__ inline double Log1p(double x) { return log1p(x); }
__device__ inline float Sqrt(float x) { return sqrtf(x); }
__device__ inline double Sqrt(double x) { return sqrt(x); }
__device__ inline float Sin(float x) { return sinf(x); }
__device__ inline double Sin(double x) { return sin(x); }
__device__ inline float Cos(float x) { return cosf(x); }
__device__ inline double Cos(double x) { return cos(x); }
__device__ inline float Tan(float x) { return tanf(x); }
__device__ inline double Tan(double x) { return tan(x); }
__device__ inline float Asin(float x) { return asinf(x); }
__device__ inline double Asin(double x) { return asin(x); }
__device__ inline float Acos(float x) { return acosf(x); }
__device__ inline double Acos(double x) { return acos(x); }
__device__ inline float Atan(float x) { return atanf(x); }
__device__ inline double Atan(double x) { return atan(x); }
__device__ inline float Sinh(float x) { return sinhf(x); }
__device__ inline double Sinh(double x) { return sinh(x); }
__device__ inline float Cosh(float x) { return coshf(x); }
__device__ inline double Cosh(double x) { return cosh(x); }
__device__ inline float Tanh(float x) { return tanhf(x); }
__device__ inline double Tanh(double x) { return tanh(x); }
__device__ inline float Asinh(float x) { return asinhf(x); }
__device__ inline double Asinh(double x) { return asinh(x); }
__device__ inline float Acosh(float x) { return acoshf(x); }
__device__ inline double Acosh(double x) { return acosh(x); }
__device__ inline float Atanh(float x) { return atanhf(x); }
__device__ inline double Atanh(double x) { return atanh(x); }
__device__ inline float Erf(float x) { return erff(x); }
__device__ inline double Erf(double x) { return erf(x); }
__device__ inline float Floor(float x) { return floorf(x); }
__device__ inline double Floor(double x) { return floor(x); }
__device__ inline float Ceil(float x) { return ceilf(x); }
__device__ inline double Ceil(double x) { return ceil(x); }
// Round half to even (the default rounding mode), as NumPy's round.
__device__ inline float Rint(float x) { return rintf(x); }
__device__ inline double Rint(double x) { return rint(x); }
__device__ inline float Abs(float x) { return fabsf(x); }
__device__ inline double Abs(double x) { return fabs(x); }
__device__ inline float Fmod(float x, float y) { return fmodf(x, y); }
__device__ inline double Fmod(double x, double y) { return fmod(x, y); }
__device__ inline float Pow(float x, float y) { return powf(x, y); }
__device__ inline double Pow(double x, double y) { return pow(x, y); }
__device__ inline float CopySign(float x, float y) { return copysignf(x, y); }
__device__ inline double CopySign(double x, double y) { return copysign(x, y); }
template <class T>
__device__ inline bool IsNan(T x) {
  return x != x;
}
__device__ inline bool IsInf(float x) { return isinf(x); }
__device__ inline bool IsInf(double x) { return isinf(x); }
template <class T>
__device__ inline T Nan();
template <>
__device__ inline float Nan<float>() {
  return nanf("");
}
template <>
__device__ inline double Nan<double>() {
  return nan("");
}
template <class T>
__device__ inline T Infinity();
template <>
__device__ inline float Infinity<float>() {
  return HUGE_VALF;
}
template <>
__device__ inline double Infinity<double>() {
  return HUGE_VAL;
}
}  // namespace dm

// Integer arithmetic that wraps around (two's complement), as the ops
// document, without the undefined behaviour of signed overflow.
template <class T>
struct Unsigned;
template <>
struct Unsigned<int32_t> {
  using type = uint32_t;
};
template <>
struct Unsigned<int64_t> {
  using type = uint64_t;
};

template <class T>
__device__ inline T WrapAdd(T a, T b) {
  using U = typename Unsigned<T>::type;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
__device__ inline T WrapSub(T a, T b) {
  using U = typename Unsigned<T>::type;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T>
__device__ inline T WrapMul(T a, T b) {
  using U = typename Unsigned<T>::type;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_DEVICE_COMPAT_H_
