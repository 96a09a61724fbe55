// Elementwise binary kernels with NumPy broadcasting (core/ops/math_ops.cc):
// arithmetic, comparisons and logical ops, for the cuda and hip plugins.
// Same-shape operands take a flat loop; anything else a strided one driven
// by a BroadcastPlan.
//
// Device code: included by plugins/devices/cuda/binary.cu and
// plugins/devices/hip/binary.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_BINARY_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_BINARY_H_

#include <type_traits>

#include "gpu/device_compat.h"

namespace weft::gpu {
namespace {

// --- Functors ----------------------------------------------------------------------

struct AddOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      return WrapAdd(x, y);
    } else {
      return x + y;
    }
  }
};
struct SubOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      return WrapSub(x, y);
    } else {
      return x - y;
    }
  }
};
struct MulOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      return WrapMul(x, y);
    } else {
      return x * y;
    }
  }
};
// Floats only: integer division by zero must be an error, which a kernel
// cannot report, so integer Div stays on the CPU.
struct DivOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    return x / y;
  }
};
// Python's float floor division through divmod, as the CPU kernel: exact
// where floor(x / y) is off by one, NaN for an infinite dividend.
struct FloorDivOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    const T mod = dm::Fmod(x, y);
    T div = (x - mod) / y;
    if (mod != T(0) && ((y < T(0)) != (mod < T(0)))) div -= T(1);
    if (div != T(0)) {
      T floordiv = dm::Floor(div);
      if (div - floordiv > T(0.5)) floordiv += T(1);
      return floordiv;
    }
    return dm::CopySign(T(0), x / y);
  }
};
// The remainder with the sign of y (Python's %).
struct FloorModOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    const T mod = dm::Fmod(x, y);
    return mod != T(0) && ((mod < T(0)) != (y < T(0))) ? mod + y : mod;
  }
};
struct PowOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    return dm::Pow(x, y);
  }
};
// NaN if either is NaN, as NumPy's maximum and minimum.
struct MaximumOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    if constexpr (!std::is_integral_v<T>) {
      if (dm::IsNan(x) || dm::IsNan(y)) return dm::Nan<T>();
    }
    return x > y ? x : y;
  }
};
struct MinimumOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    if constexpr (!std::is_integral_v<T>) {
      if (dm::IsNan(x) || dm::IsNan(y)) return dm::Nan<T>();
    }
    return x < y ? x : y;
  }
};
struct SquaredDifferenceOp {
  template <class T>
  __device__ T operator()(T x, T y) const {
    if constexpr (std::is_integral_v<T>) {
      const T d = WrapSub(x, y);
      return WrapMul(d, d);
    } else {
      return (x - y) * (x - y);
    }
  }
};

#define WEFT_GPU_COMPARE(Name, expr)             \
  struct Name {                                  \
    template <class T>                           \
    __device__ bool operator()(T x, T y) const { \
      return expr;                               \
    }                                            \
  };
WEFT_GPU_COMPARE(EqualOp, x == y)
WEFT_GPU_COMPARE(NotEqualOp, x != y)
WEFT_GPU_COMPARE(LessOp, x < y)
WEFT_GPU_COMPARE(LessEqualOp, x <= y)
WEFT_GPU_COMPARE(GreaterOp, x > y)
WEFT_GPU_COMPARE(GreaterEqualOp, x >= y)
WEFT_GPU_COMPARE(LogicalAndOp, x&& y)
WEFT_GPU_COMPARE(LogicalOrOp, x || y)
#undef WEFT_GPU_COMPARE

// --- Kernels -----------------------------------------------------------------------

template <class In, class Out, class Op>
__global__ void ZipKernel(const In* a, const In* b, Out* z, int64_t n, Op op) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) z[i] = op(a[i], b[i]);
}

template <class In, class Out, class Op>
__global__ void BroadcastZipKernel(const In* a, const In* b, Out* z, int64_t n, BroadcastPlan<2> plan, Op op) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    int64_t off[2];
    BroadcastOffsets(plan, i, off);
    z[i] = op(a[off[0]], b[off[1]]);
  }
}

template <class In, class Out, class Op>
class BinaryKernel {
 public:
  explicit BinaryKernel(const InitContext& init) : name_(init.op()) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    const Dims dims = BroadcastDims(a.dims, b.dims);
    const Tensor z = ctx.allocate_output(0, dims);
    const int64_t n = z.num_elements;
    if (n == 0) return;
    if (a.dims == b.dims) {
      ZipKernel<In, Out, Op>
          <<<GridFor(n), kBlock, 0, ctx.stream()>>>(a.as<const In>(), b.as<const In>(), z.as<Out>(), n, Op());
    } else {
      const BroadcastPlan<2> plan = PlanBroadcast2(dims, a.dims, b.dims);
      BroadcastZipKernel<In, Out, Op>
          <<<GridFor(n), kBlock, 0, ctx.stream()>>>(a.as<const In>(), b.as<const In>(), z.as<Out>(), n, plan, Op());
    }
    CheckLaunch(name_.c_str());
  }

 private:
  std::string name_;
};

// --- Registration ------------------------------------------------------------------

// kIntegers: also for i32 and i64.
template <class Op, bool kIntegers>
void AddArithmetic(KernelRegistry& r, const char* op) {
  r.Add<BinaryKernel<float, float, Op>>(op, {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<BinaryKernel<double, double, Op>>(op, {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
  if constexpr (kIntegers) {
    r.Add<BinaryKernel<int32_t, int32_t, Op>>(op, {{"T", WEFT_DTYPE_I32}}, WEFT_KERNEL_INLINE);
    r.Add<BinaryKernel<int64_t, int64_t, Op>>(op, {{"T", WEFT_DTYPE_I64}}, WEFT_KERNEL_INLINE);
  }
}

// kBool: also for bool.
template <class Op, bool kBool>
void AddCompare(KernelRegistry& r, const char* op) {
  r.Add<BinaryKernel<float, bool, Op>>(op, {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<BinaryKernel<double, bool, Op>>(op, {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
  r.Add<BinaryKernel<int32_t, bool, Op>>(op, {{"T", WEFT_DTYPE_I32}}, WEFT_KERNEL_INLINE);
  r.Add<BinaryKernel<int64_t, bool, Op>>(op, {{"T", WEFT_DTYPE_I64}}, WEFT_KERNEL_INLINE);
  if constexpr (kBool) r.Add<BinaryKernel<bool, bool, Op>>(op, {{"T", WEFT_DTYPE_BOOL}}, WEFT_KERNEL_INLINE);
}

}  // namespace

void RegisterBinaryKernels(KernelRegistry& r) {
  AddArithmetic<AddOp, true>(r, "Add");
  AddArithmetic<SubOp, true>(r, "Sub");
  AddArithmetic<MulOp, true>(r, "Mul");
  AddArithmetic<MaximumOp, true>(r, "Maximum");
  AddArithmetic<MinimumOp, true>(r, "Minimum");
  AddArithmetic<SquaredDifferenceOp, true>(r, "SquaredDifference");
  AddArithmetic<DivOp, false>(r, "Div");
  AddArithmetic<DivOp, false>(r, "RealDiv");
  AddArithmetic<FloorDivOp, false>(r, "FloorDiv");
  AddArithmetic<FloorModOp, false>(r, "FloorMod");
  AddArithmetic<PowOp, false>(r, "Pow");
  AddCompare<EqualOp, true>(r, "Equal");
  AddCompare<NotEqualOp, true>(r, "NotEqual");
  AddCompare<LessOp, false>(r, "Less");
  AddCompare<LessEqualOp, false>(r, "LessEqual");
  AddCompare<GreaterOp, false>(r, "Greater");
  AddCompare<GreaterEqualOp, false>(r, "GreaterEqual");
  r.Add<BinaryKernel<bool, bool, LogicalAndOp>>("LogicalAnd", {}, WEFT_KERNEL_INLINE);
  r.Add<BinaryKernel<bool, bool, LogicalOrOp>>("LogicalOr", {}, WEFT_KERNEL_INLINE);
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_BINARY_H_
