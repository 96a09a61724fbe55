// Cast between f32, f64, i32, i64 and bool (core/ops/math_ops.cc) for the
// cuda and hip plugins, with the op's rules: floats to integers truncate
// toward zero and saturate, NaN gives 0; integers to narrower integers
// wrap; anything to bool is x != 0.
//
// Device code: included by plugins/devices/cuda/cast.cu and
// plugins/devices/hip/cast.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_CAST_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_CAST_H_

#include <type_traits>

#include "gpu/device_compat.h"

namespace weft::gpu {
namespace {

template <class T>
struct IntRange;
template <>
struct IntRange<int32_t> {
  static constexpr int32_t kMin = -2147483647 - 1;
  static constexpr int32_t kMax = 2147483647;
};
template <>
struct IntRange<int64_t> {
  static constexpr int64_t kMin = -9223372036854775807LL - 1;
  static constexpr int64_t kMax = 9223372036854775807LL;
};

template <class To, class From>
__device__ inline To CastOne(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_same_v<From, bool>) {
    return v ? To(1) : To(0);
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else if constexpr (std::is_floating_point_v<From>) {
    // Compared in double: every bound is exact there except INT64_MAX,
    // which rounds up to 2^63, where saturation starts anyway.
    const double x = static_cast<double>(v);
    if (x != x) return 0;
    if (x <= static_cast<double>(IntRange<To>::kMin)) return IntRange<To>::kMin;
    if (x >= static_cast<double>(IntRange<To>::kMax)) return IntRange<To>::kMax;
    return static_cast<To>(x);
  } else {
    // Integer to integer: keep the low bits (two's complement wrap).
    using U = typename Unsigned<To>::type;
    return static_cast<To>(static_cast<U>(v));
  }
}

template <class From, class To>
__global__ void CastLoop(const From* x, To* y, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) y[i] = CastOne<To, From>(x[i]);
}

template <class From, class To>
class CastKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    if (y.num_elements == 0) return;
    CastLoop<From, To>
        <<<GridFor(y.num_elements), kBlock, 0, ctx.stream()>>>(x.as<const From>(), y.as<To>(), y.num_elements);
    CheckLaunch("Cast");
  }
};

// Cast from From to each of Tos.
template <class From, class... Tos>
void AddCastsFrom(KernelRegistry& r) {
  (r.Add<CastKernel<From, Tos>>("Cast", {{"SrcT", DtypeOf<From>()}, {"DstT", DtypeOf<Tos>()}}, WEFT_KERNEL_INLINE),
   ...);
}

// Cast between any two of Ts.
template <class... Ts>
void AddCastsAmong(KernelRegistry& r) {
  (AddCastsFrom<Ts, Ts...>(r), ...);
}

}  // namespace

void RegisterCastKernels(KernelRegistry& r) { AddCastsAmong<float, double, int32_t, int64_t, bool>(r); }

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_CAST_H_
