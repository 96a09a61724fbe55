// Reductions for the cuda and hip plugins: Sum, Mean, Max, Min, Prod, All,
// Any over attr axes (core/ops/math_ops.cc), ArgMax and ArgMin, SumToShape
// (the adjoint of broadcasting) and BiasAddGrad.
//
// One kernel walks the reduced elements of each output through a
// ReducePlan: a block per output, summing in a tree in shared memory, when
// there are many elements per output and few outputs; otherwise a thread
// per output. Floats accumulate in their own type (the tree keeps the
// error of long sums small); integers in 64-bit unsigned arithmetic, so
// they wrap as the ops say.
//
// Device code: included by plugins/devices/cuda/reduction.cu and
// plugins/devices/hip/reduction.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_REDUCTION_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_REDUCTION_H_

#include <algorithm>
#include <type_traits>

#include "gpu/device_compat.h"

namespace weft::gpu {
namespace {

template <class T>
using SumAcc = std::conditional_t<std::is_integral_v<T>, uint64_t, T>;

template <class T>
struct SumR {
  using Acc = SumAcc<T>;
  __device__ Acc Init() const { return Acc(0); }
  __device__ Acc Load(T v) const { return static_cast<Acc>(v); }
  __device__ Acc Combine(Acc a, Acc b) const { return a + b; }
  __device__ T Finish(Acc a, int64_t) const { return static_cast<T>(a); }
};

// Floats only; the mean of an empty set is 0 / 0, NaN.
template <class T>
struct MeanR {
  using Acc = T;
  __device__ Acc Init() const { return T(0); }
  __device__ Acc Load(T v) const { return v; }
  __device__ Acc Combine(Acc a, Acc b) const { return a + b; }
  __device__ T Finish(Acc a, int64_t n) const { return a / static_cast<T>(n); }
};

template <class T>
struct ProdR {
  using Acc = SumAcc<T>;
  __device__ Acc Init() const { return Acc(1); }
  __device__ Acc Load(T v) const { return static_cast<Acc>(v); }
  __device__ Acc Combine(Acc a, Acc b) const { return a * b; }
  __device__ T Finish(Acc a, int64_t) const { return static_cast<T>(a); }
};

template <class T>
__device__ inline T Lowest() {
  if constexpr (std::is_same_v<T, int32_t>) {
    return -2147483647 - 1;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return -9223372036854775807LL - 1;
  } else {
    return -dm::Infinity<T>();
  }
}
template <class T>
__device__ inline T Highest() {
  if constexpr (std::is_same_v<T, int32_t>) {
    return 2147483647;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return 9223372036854775807LL;
  } else {
    return dm::Infinity<T>();
  }
}

// NaN wins, as the ops say.
template <class T, bool kMax>
struct ExtremeR {
  using Acc = T;
  __device__ Acc Init() const { return kMax ? Lowest<T>() : Highest<T>(); }
  __device__ Acc Load(T v) const { return v; }
  __device__ Acc Combine(Acc a, Acc b) const {
    if constexpr (!std::is_integral_v<T>) {
      if (dm::IsNan(a)) return a;
      if (dm::IsNan(b)) return b;
    }
    return kMax ? (b > a ? b : a) : (b < a ? b : a);
  }
  __device__ T Finish(Acc a, int64_t) const { return a; }
};

template <bool kAll>
struct LogicalR {
  using Acc = bool;
  __device__ Acc Init() const { return kAll; }
  __device__ Acc Load(bool v) const { return v; }
  __device__ Acc Combine(Acc a, Acc b) const { return kAll ? (a && b) : (a || b); }
  __device__ bool Finish(Acc a, int64_t) const { return a; }
};

template <class T, class R>
__global__ void ReducePerThread(const T* in, T* out, ReducePlan plan, R r) {
  for (int64_t o = GlobalIndex(); o < plan.num_out; o += GlobalStride()) {
    const int64_t base = StridedOffset(plan.kept_rank, plan.kept_dims, plan.kept_strides, o);
    typename R::Acc acc = r.Init();
    for (int64_t j = 0; j < plan.num_reduced; ++j) {
      acc = r.Combine(acc, r.Load(in[base + StridedOffset(plan.red_rank, plan.red_dims, plan.red_strides, j)]));
    }
    out[o] = r.Finish(acc, plan.num_reduced);
  }
}

template <class T, class R>
__global__ void ReducePerBlock(const T* in, T* out, ReducePlan plan, R r) {
  __shared__ typename R::Acc partial[kBlock];
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t o = blockIdx.x; o < plan.num_out; o += gridDim.x) {
    const int64_t base = StridedOffset(plan.kept_rank, plan.kept_dims, plan.kept_strides, o);
    typename R::Acc acc = r.Init();
    for (int64_t j = tid; j < plan.num_reduced; j += blockDim.x) {
      acc = r.Combine(acc, r.Load(in[base + StridedOffset(plan.red_rank, plan.red_dims, plan.red_strides, j)]));
    }
    partial[tid] = acc;
    __syncthreads();
    for (int s = kBlock / 2; s > 0; s /= 2) {
      if (tid < s) partial[tid] = r.Combine(partial[tid], partial[tid + s]);
      __syncthreads();
    }
    if (tid == 0) out[o] = r.Finish(partial[0], plan.num_reduced);
    __syncthreads();  // partial is reused by the next output
  }
}

template <class T, class R>
void EnqueueReduce(rt::Stream stream, const T* in, T* out, const ReducePlan& plan, const char* what) {
  if (plan.num_out == 0) return;
  if (plan.num_reduced >= 128 && plan.num_out <= 16384) {
    const auto blocks = static_cast<unsigned>(std::min<int64_t>(plan.num_out, 65535));
    ReducePerBlock<T, R><<<blocks, kBlock, 0, stream>>>(in, out, plan, R());
  } else {
    ReducePerThread<T, R><<<GridFor(plan.num_out), kBlock, 0, stream>>>(in, out, plan, R());
  }
  CheckLaunch(what);
}

// Which dimensions of a rank-|rank| input the 'axis' attr reduces (every
// one when it is empty).
std::vector<bool> ReducedAxes(const std::vector<int64_t>& axis, int rank) {
  std::vector<bool> reduce(static_cast<std::size_t>(rank), axis.empty());
  std::vector<bool> seen(static_cast<std::size_t>(rank), false);
  for (int64_t a : axis) {
    const int64_t i = a < 0 ? a + rank : a;
    if (i < 0 || i >= rank) {
      Fail("axis ", a, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
    }
    if (seen[static_cast<std::size_t>(i)]) Fail("axis ", a, " is repeated in ", DimsString(axis));
    seen[static_cast<std::size_t>(i)] = true;
    reduce[static_cast<std::size_t>(i)] = true;
  }
  return reduce;
}

template <class T, class R>
class ReduceKernel {
 public:
  explicit ReduceKernel(const InitContext& init)
      : name_(init.op()), axis_(init.Ints("axis")), keep_dims_(init.Bool("keep_dims")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<bool> reduce = ReducedAxes(axis_, x.rank());
    Dims out_dims;
    for (int i = 0; i < x.rank(); ++i) {
      if (!reduce[static_cast<std::size_t>(i)]) {
        out_dims.push_back(x.dim(i));
      } else if (keep_dims_) {
        out_dims.push_back(1);
      }
    }
    const ReducePlan plan = PlanReduce(x.dims, reduce);
    if ((name_ == "Max" || name_ == "Min") && plan.num_reduced == 0 && plan.num_out > 0) {
      Fail(name_, " of an empty set has no identity: input shape ", DimsString(x.dims), ", axis ", DimsString(axis_));
    }
    const Tensor y = ctx.allocate_output(0, out_dims);
    EnqueueReduce<T, R>(ctx.stream(), x.as<const T>(), y.as<T>(), plan, name_.c_str());
  }

 private:
  std::string name_;
  std::vector<int64_t> axis_;
  bool keep_dims_;
};

// --- ArgMax, ArgMin ----------------------------------------------------------------

// The first extreme along the axis, and the first NaN if there is one.
template <class T, class I, bool kMax>
__global__ void ArgLoop(const T* in, I* out, int64_t outer, int64_t n, int64_t inner) {
  for (int64_t o = GlobalIndex(); o < outer * inner; o += GlobalStride()) {
    const T* row = in + (o / inner) * n * inner + (o % inner);
    int64_t best = 0;
    T best_value = row[0];
    if (!dm::IsNan(best_value)) {
      for (int64_t k = 1; k < n; ++k) {
        const T v = row[k * inner];
        if (dm::IsNan(v)) {
          best = k;
          break;
        }
        if (kMax ? v > best_value : v < best_value) {
          best = k;
          best_value = v;
        }
      }
    }
    out[o] = static_cast<I>(best);
  }
}

template <class T, class I, bool kMax>
class ArgKernel {
 public:
  explicit ArgKernel(const InitContext& init) : axis_(init.Int("axis")) {}
  void Compute(Context& ctx) {
    const char* name = kMax ? "ArgMax" : "ArgMin";
    const Tensor x = ctx.input(0);
    const int rank = x.rank();
    if (rank == 0) Fail(name, " needs a tensor of rank >= 1, got a scalar");
    const int a = sdk::NormalizeAxis(axis_, rank);
    const int64_t n = x.dim(a);
    if (n == 0) Fail(name, " of an empty axis: input shape ", DimsString(x.dims), ", axis ", axis_);
    if (std::is_same_v<I, int32_t> && n > 2147483647) {
      Fail(name, ": axis ", axis_, " of ", DimsString(x.dims), " has more indices than output_type holds");
    }
    Dims out_dims;
    for (int i = 0; i < rank; ++i) {
      if (i != a) out_dims.push_back(x.dim(i));
    }
    const Tensor y = ctx.allocate_output(0, out_dims);
    if (y.num_elements == 0) return;
    const int64_t outer = Product(x.dims, 0, a), inner = Product(x.dims, a + 1, rank);
    ArgLoop<T, I, kMax>
        <<<GridFor(y.num_elements), kBlock, 0, ctx.stream()>>>(x.as<const T>(), y.as<I>(), outer, n, inner);
    CheckLaunch(name);
  }

 private:
  int64_t axis_;
};

// --- SumToShape, BiasAddGrad -------------------------------------------------------

template <class T>
class SumToShapeKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Dims target = ctx.ReadShape(ctx.input(1), "shape");
    const int rank = x.rank();
    const int lead = rank - static_cast<int>(target.size());
    const auto not_broadcast = [&] {
      Fail("input ", DimsString(x.dims), " is not a broadcast of shape ", DimsString(target));
    };
    if (lead < 0) not_broadcast();
    std::vector<bool> reduce(static_cast<std::size_t>(rank), false);
    for (int i = 0; i < rank; ++i) {
      if (i < lead) {
        reduce[static_cast<std::size_t>(i)] = true;
        continue;
      }
      const int64_t want = target[static_cast<std::size_t>(i - lead)];
      if (want == x.dim(i)) continue;
      if (want != 1) not_broadcast();
      reduce[static_cast<std::size_t>(i)] = true;
    }
    const Tensor y = ctx.allocate_output(0, target);
    EnqueueReduce<T, SumR<T>>(ctx.stream(), x.as<const T>(), y.as<T>(), PlanReduce(x.dims, reduce), "SumToShape");
  }
};

template <class T>
class BiasAddGradKernel {
 public:
  explicit BiasAddGradKernel(const InitContext& init) : nchw_(sdk::IsNchw(init)) {}
  void Compute(Context& ctx) {
    const Tensor dy = ctx.input(0);
    const sdk::ChannelLayout c = sdk::CheckBiasAddGrad(dy, nchw_);
    std::vector<bool> reduce(static_cast<std::size_t>(dy.rank()), true);
    reduce[static_cast<std::size_t>(c.axis)] = false;
    const Tensor y = ctx.allocate_output(0, {c.channels});
    EnqueueReduce<T, SumR<T>>(ctx.stream(), dy.as<const T>(), y.as<T>(), PlanReduce(dy.dims, reduce), "BiasAddGrad");
  }

 private:
  bool nchw_;
};

// --- Registration ------------------------------------------------------------------

template <class T>
void AddNumeric(KernelRegistry& r) {
  const weft_dtype_t t = DtypeOf<T>();
  r.Add<ReduceKernel<T, SumR<T>>>("Sum", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<ReduceKernel<T, ProdR<T>>>("Prod", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<ReduceKernel<T, ExtremeR<T, true>>>("Max", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<ReduceKernel<T, ExtremeR<T, false>>>("Min", {{"T", t}}, WEFT_KERNEL_INLINE);
  if constexpr (!std::is_integral_v<T>) r.Add<ReduceKernel<T, MeanR<T>>>("Mean", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<ArgKernel<T, int32_t, true>>("ArgMax", {{"T", t}, {"output_type", WEFT_DTYPE_I32}}, WEFT_KERNEL_INLINE);
  r.Add<ArgKernel<T, int64_t, true>>("ArgMax", {{"T", t}, {"output_type", WEFT_DTYPE_I64}}, WEFT_KERNEL_INLINE);
  r.Add<ArgKernel<T, int32_t, false>>("ArgMin", {{"T", t}, {"output_type", WEFT_DTYPE_I32}}, WEFT_KERNEL_INLINE);
  r.Add<ArgKernel<T, int64_t, false>>("ArgMin", {{"T", t}, {"output_type", WEFT_DTYPE_I64}}, WEFT_KERNEL_INLINE);
  r.Add<SumToShapeKernel<T>>("SumToShape", {{"T", t}}, 0, {"shape"});
  r.Add<BiasAddGradKernel<T>>("BiasAddGrad", {{"T", t}}, WEFT_KERNEL_INLINE);
}

}  // namespace

void RegisterReductionKernels(KernelRegistry& r) {
  ForEachType<float, double, int32_t, int64_t>([&](auto t) { AddNumeric<decltype(t)>(r); });
  r.Add<ReduceKernel<bool, LogicalR<true>>>("All", {}, WEFT_KERNEL_INLINE);
  r.Add<ReduceKernel<bool, LogicalR<false>>>("Any", {}, WEFT_KERNEL_INLINE);
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_REDUCTION_H_
