// Elementwise unary kernels (core/ops/math_ops.cc) and the activation
// derivatives that take two tensors of one shape (grad_support_ops.cc),
// for the cuda and hip plugins: one device functor per op, one map kernel
// for all of them.
//
// Device code: included by plugins/devices/cuda/unary.cu and
// plugins/devices/hip/unary.hip, each of which compiles it once.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_UNARY_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_UNARY_H_

#include <type_traits>

#include "gpu/device_compat.h"

namespace weft::gpu {
namespace {

// Selu's constants (Klambauer et al. 2017), as the op documents them.
constexpr double kSeluAlpha = 1.6732632423543772;
constexpr double kSeluScale = 1.0507009873554805;

template <class T>
__device__ inline T StableSigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + dm::Exp(-x));
  const T e = dm::Exp(x);
  return e / (T(1) + e);
}

// --- Functors: y = op(x) ---------------------------------------------------------

struct NegOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return WrapSub(T(0), x);
    } else {
      return -x;
    }
  }
};
struct AbsOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return x < 0 ? WrapSub(T(0), x) : x;
    } else {
      return dm::Abs(x);
    }
  }
};
struct SignOp {
  template <class T>
  __device__ T operator()(T x) const {
    if (dm::IsNan(x)) return x;
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
  }
};
struct SquareOp {
  template <class T>
  __device__ T operator()(T x) const {
    if constexpr (std::is_integral_v<T>) {
      return WrapMul(x, x);
    } else {
      return x * x;
    }
  }
};
// NaN compares false, so it stays NaN.
struct ReluOp {
  template <class T>
  __device__ T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};
struct Relu6Op {
  template <class T>
  __device__ T operator()(T x) const {
    return x < T(0) ? T(0) : (x > T(6) ? T(6) : x);
  }
};

#define WEFT_GPU_FLOAT_UNARY(Name, expr) \
  struct Name {                          \
    template <class T>                   \
    __device__ T operator()(T x) const { \
      return expr;                       \
    }                                    \
  };

WEFT_GPU_FLOAT_UNARY(ExpOp, dm::Exp(x))
WEFT_GPU_FLOAT_UNARY(Expm1Op, dm::Expm1(x))
WEFT_GPU_FLOAT_UNARY(LogOp, dm::Log(x))
WEFT_GPU_FLOAT_UNARY(Log1pOp, dm::Log1p(x))
WEFT_GPU_FLOAT_UNARY(SqrtOp, dm::Sqrt(x))
WEFT_GPU_FLOAT_UNARY(RsqrtOp, T(1) / dm::Sqrt(x))
WEFT_GPU_FLOAT_UNARY(ReciprocalOp, T(1) / x)
WEFT_GPU_FLOAT_UNARY(SinOp, dm::Sin(x))
WEFT_GPU_FLOAT_UNARY(CosOp, dm::Cos(x))
WEFT_GPU_FLOAT_UNARY(TanOp, dm::Tan(x))
WEFT_GPU_FLOAT_UNARY(AsinOp, dm::Asin(x))
WEFT_GPU_FLOAT_UNARY(AcosOp, dm::Acos(x))
WEFT_GPU_FLOAT_UNARY(AtanOp, dm::Atan(x))
WEFT_GPU_FLOAT_UNARY(SinhOp, dm::Sinh(x))
WEFT_GPU_FLOAT_UNARY(CoshOp, dm::Cosh(x))
WEFT_GPU_FLOAT_UNARY(TanhOp, dm::Tanh(x))
WEFT_GPU_FLOAT_UNARY(AsinhOp, dm::Asinh(x))
WEFT_GPU_FLOAT_UNARY(AcoshOp, dm::Acosh(x))
WEFT_GPU_FLOAT_UNARY(AtanhOp, dm::Atanh(x))
WEFT_GPU_FLOAT_UNARY(SigmoidOp, StableSigmoid(x))
WEFT_GPU_FLOAT_UNARY(EluOp, x > T(0) ? x : dm::Expm1(x))
WEFT_GPU_FLOAT_UNARY(SeluOp, T(kSeluScale) * (x > T(0) ? x : T(kSeluAlpha) * dm::Expm1(x)))
WEFT_GPU_FLOAT_UNARY(SoftplusOp, x > T(0) ? x + dm::Log1p(dm::Exp(-x)) : dm::Log1p(dm::Exp(x)))
WEFT_GPU_FLOAT_UNARY(ErfOp, dm::Erf(x))
WEFT_GPU_FLOAT_UNARY(FloorOp, dm::Floor(x))
WEFT_GPU_FLOAT_UNARY(CeilOp, dm::Ceil(x))
WEFT_GPU_FLOAT_UNARY(RoundOp, dm::Rint(x))
#undef WEFT_GPU_FLOAT_UNARY

// sqrt(2 / pi) and 1 / sqrt(2).
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kSqrtHalf = 0.70710678118654752440;

struct GeluOp {
  template <class T>
  __device__ T operator()(T x) const {
    return T(0.5) * x * (T(1) + dm::Erf(x * T(kSqrtHalf)));
  }
};
struct GeluTanhOp {
  template <class T>
  __device__ T operator()(T x) const {
    return T(0.5) * x * (T(1) + dm::Tanh(T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x)));
  }
};

struct IsNanOp {
  template <class T>
  __device__ bool operator()(T x) const {
    return dm::IsNan(x);
  }
};
struct IsInfOp {
  template <class T>
  __device__ bool operator()(T x) const {
    return dm::IsInf(x);
  }
};
struct LogicalNotOp {
  __device__ bool operator()(bool x) const { return !x; }
};

// --- Functors: z = op(a, b), a and b of one shape --------------------------------

// (gradients, features)
struct ReluGradOp {
  template <class T>
  __device__ T operator()(T g, T f) const {
    return f > T(0) ? g : T(0);
  }
};
struct Relu6GradOp {
  template <class T>
  __device__ T operator()(T g, T f) const {
    return f > T(0) && f < T(6) ? g : T(0);
  }
};
// (gradients, outputs)
struct EluGradOp {
  template <class T>
  __device__ T operator()(T g, T y) const {
    return y > T(0) ? g : g * (y + T(1));
  }
};
struct SeluGradOp {
  template <class T>
  __device__ T operator()(T g, T y) const {
    return y > T(0) ? g * T(kSeluScale) : g * (y + T(kSeluScale * kSeluAlpha));
  }
};
// (gradients, features)
struct SoftplusGradOp {
  template <class T>
  __device__ T operator()(T g, T f) const {
    return g * StableSigmoid(f);
  }
};
// (y, dy)
struct SigmoidGradOp {
  template <class T>
  __device__ T operator()(T y, T dy) const {
    return dy * y * (T(1) - y);
  }
};
struct TanhGradOp {
  template <class T>
  __device__ T operator()(T y, T dy) const {
    return dy * (T(1) - y * y);
  }
};
struct SqrtGradOp {
  template <class T>
  __device__ T operator()(T y, T dy) const {
    return dy * T(0.5) / y;
  }
};
struct RsqrtGradOp {
  template <class T>
  __device__ T operator()(T y, T dy) const {
    return dy * T(-0.5) * (y * y * y);
  }
};
struct ReciprocalGradOp {
  template <class T>
  __device__ T operator()(T y, T dy) const {
    return dy * -(y * y);
  }
};
// (gradients, features): d/dx of x * Phi(x) is Phi(x) + x * phi(x).
struct GeluGradOp {
  template <class T>
  __device__ T operator()(T g, T x) const {
    const T cdf = T(0.5) * (T(1) + dm::Erf(x * T(kSqrtHalf)));
    const T pdf = dm::Exp(T(-0.5) * x * x) * T(kSqrt2OverPi * 0.5);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhGradOp {
  template <class T>
  __device__ T operator()(T g, T x) const {
    const T u = T(kSqrt2OverPi) * (x + T(0.044715) * x * x * x);
    const T t = dm::Tanh(u);
    const T du = T(kSqrt2OverPi) * (T(1) + T(3 * 0.044715) * x * x);
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
  }
};

// --- Kernels ---------------------------------------------------------------------

template <class In, class Out, class Op>
__global__ void MapKernel(const In* x, Out* y, int64_t n, Op op) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) y[i] = op(x[i]);
}

template <class In, class Out, class Op>
__global__ void ZipSameShapeKernel(const In* a, const In* b, Out* y, int64_t n, Op op) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) y[i] = op(a[i], b[i]);
}

template <class In, class Out, class Op>
void LaunchMap(Context& ctx, const Tensor& x, const Tensor& y, const char* name) {
  if (y.num_elements == 0) return;
  MapKernel<In, Out, Op>
      <<<GridFor(y.num_elements), kBlock, 0, ctx.stream()>>>(x.as<const In>(), y.as<Out>(), y.num_elements, Op());
  CheckLaunch(name);
}

template <class In, class Out, class Op>
class UnaryKernel {
 public:
  explicit UnaryKernel(const InitContext& init) : name_(init.op()) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    LaunchMap<In, Out, Op>(ctx, x, y, name_.c_str());
  }

 private:
  std::string name_;
};

template <class T>
class GeluKernel {
 public:
  explicit GeluKernel(const InitContext& init) : approximate_(init.Bool("approximate")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    if (approximate_) {
      LaunchMap<T, T, GeluTanhOp>(ctx, x, y, "Gelu");
    } else {
      LaunchMap<T, T, GeluOp>(ctx, x, y, "Gelu");
    }
  }

 private:
  bool approximate_;
};

// The derivative ops: both inputs must have one shape (no broadcasting).
template <class T, class Op>
void LaunchSameShape(Context& ctx, const char* name, const char* first, const char* second) {
  const Tensor a = ctx.input(0), b = ctx.input(1);
  if (a.dims != b.dims) {
    Fail(first, " has shape ", DimsString(a.dims), " but ", second, " has shape ", DimsString(b.dims),
         "; they must have one shape");
  }
  const Tensor z = ctx.allocate_output(0, a.dims);
  if (z.num_elements == 0) return;
  ZipSameShapeKernel<T, T, Op><<<GridFor(z.num_elements), kBlock, 0, ctx.stream()>>>(a.as<const T>(), b.as<const T>(),
                                                                                     z.as<T>(), z.num_elements, Op());
  CheckLaunch(name);
}

template <class T, class Op>
class GradKernel {
 public:
  explicit GradKernel(const InitContext& init) : name_(init.op()) {
    // The input names of the op, for messages (grad_support_ops.cc).
    const bool from_output = name_ == "SigmoidGrad" || name_ == "TanhGrad" || name_ == "SqrtGrad" ||
                             name_ == "RsqrtGrad" || name_ == "ReciprocalGrad";
    first_ = from_output ? "y" : "gradients";
    second_ = from_output ? "dy" : (name_ == "EluGrad" || name_ == "SeluGrad" ? "outputs" : "features");
  }
  void Compute(Context& ctx) { LaunchSameShape<T, Op>(ctx, name_.c_str(), first_, second_); }

 private:
  std::string name_;
  const char* first_;
  const char* second_;
};

template <class T>
class GeluGradKernel {
 public:
  explicit GeluGradKernel(const InitContext& init) : approximate_(init.Bool("approximate")) {}
  void Compute(Context& ctx) {
    if (approximate_) {
      LaunchSameShape<T, GeluTanhGradOp>(ctx, "GeluGrad", "gradients", "features");
    } else {
      LaunchSameShape<T, GeluGradOp>(ctx, "GeluGrad", "gradients", "features");
    }
  }

 private:
  bool approximate_;
};

// --- Registration ----------------------------------------------------------------

template <class Op>
void AddFloatUnary(KernelRegistry& r, const char* op) {
  r.Add<UnaryKernel<float, float, Op>>(op, {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<UnaryKernel<double, double, Op>>(op, {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
}

template <class Op>
void AddSignedUnary(KernelRegistry& r, const char* op) {
  AddFloatUnary<Op>(r, op);
  r.Add<UnaryKernel<int32_t, int32_t, Op>>(op, {{"T", WEFT_DTYPE_I32}}, WEFT_KERNEL_INLINE);
  r.Add<UnaryKernel<int64_t, int64_t, Op>>(op, {{"T", WEFT_DTYPE_I64}}, WEFT_KERNEL_INLINE);
}

template <class Op>
void AddFloatGrad(KernelRegistry& r, const char* op) {
  r.Add<GradKernel<float, Op>>(op, {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<GradKernel<double, Op>>(op, {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
}

template <class Op>
void AddSignedGrad(KernelRegistry& r, const char* op) {
  AddFloatGrad<Op>(r, op);
  r.Add<GradKernel<int32_t, Op>>(op, {{"T", WEFT_DTYPE_I32}}, WEFT_KERNEL_INLINE);
  r.Add<GradKernel<int64_t, Op>>(op, {{"T", WEFT_DTYPE_I64}}, WEFT_KERNEL_INLINE);
}

}  // namespace

// Kernels only enqueue work, so every one of them is cheap to run inline
// (WEFT_KERNEL_INLINE): the executor need not hand them to another thread.
void RegisterUnaryKernels(KernelRegistry& r) {
  AddSignedUnary<NegOp>(r, "Neg");
  AddSignedUnary<AbsOp>(r, "Abs");
  AddSignedUnary<SignOp>(r, "Sign");
  AddSignedUnary<SquareOp>(r, "Square");
  AddSignedUnary<ReluOp>(r, "Relu");
  AddSignedUnary<Relu6Op>(r, "Relu6");
  AddFloatUnary<ExpOp>(r, "Exp");
  AddFloatUnary<Expm1Op>(r, "Expm1");
  AddFloatUnary<LogOp>(r, "Log");
  AddFloatUnary<Log1pOp>(r, "Log1p");
  AddFloatUnary<SqrtOp>(r, "Sqrt");
  AddFloatUnary<RsqrtOp>(r, "Rsqrt");
  AddFloatUnary<ReciprocalOp>(r, "Reciprocal");
  AddFloatUnary<SinOp>(r, "Sin");
  AddFloatUnary<CosOp>(r, "Cos");
  AddFloatUnary<TanOp>(r, "Tan");
  AddFloatUnary<AsinOp>(r, "Asin");
  AddFloatUnary<AcosOp>(r, "Acos");
  AddFloatUnary<AtanOp>(r, "Atan");
  AddFloatUnary<SinhOp>(r, "Sinh");
  AddFloatUnary<CoshOp>(r, "Cosh");
  AddFloatUnary<TanhOp>(r, "Tanh");
  AddFloatUnary<AsinhOp>(r, "Asinh");
  AddFloatUnary<AcoshOp>(r, "Acosh");
  AddFloatUnary<AtanhOp>(r, "Atanh");
  AddFloatUnary<SigmoidOp>(r, "Sigmoid");
  AddFloatUnary<EluOp>(r, "Elu");
  AddFloatUnary<SeluOp>(r, "Selu");
  AddFloatUnary<SoftplusOp>(r, "Softplus");
  AddFloatUnary<ErfOp>(r, "Erf");
  AddFloatUnary<FloorOp>(r, "Floor");
  AddFloatUnary<CeilOp>(r, "Ceil");
  AddFloatUnary<RoundOp>(r, "Round");
  AddForTypes<GeluKernel, float, double>(r, "Gelu");
  r.Add<UnaryKernel<float, bool, IsNanOp>>("IsNan", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<UnaryKernel<double, bool, IsNanOp>>("IsNan", {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
  r.Add<UnaryKernel<float, bool, IsInfOp>>("IsInf", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<UnaryKernel<double, bool, IsInfOp>>("IsInf", {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
  r.Add<UnaryKernel<bool, bool, LogicalNotOp>>("LogicalNot", {}, WEFT_KERNEL_INLINE);

  AddSignedGrad<ReluGradOp>(r, "ReluGrad");
  AddSignedGrad<Relu6GradOp>(r, "Relu6Grad");
  AddFloatGrad<EluGradOp>(r, "EluGrad");
  AddFloatGrad<SeluGradOp>(r, "SeluGrad");
  AddFloatGrad<SoftplusGradOp>(r, "SoftplusGrad");
  AddFloatGrad<SigmoidGradOp>(r, "SigmoidGrad");
  AddFloatGrad<TanhGradOp>(r, "TanhGrad");
  AddFloatGrad<SqrtGradOp>(r, "SqrtGrad");
  AddFloatGrad<RsqrtGradOp>(r, "RsqrtGrad");
  AddFloatGrad<ReciprocalGradOp>(r, "ReciprocalGrad");
  AddForTypes<GeluGradKernel, float, double>(r, "GeluGrad");
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_UNARY_H_
