// Variable updates for the cuda and hip plugins: AssignAdd, AssignSub
// (core/ops/state_ops.cc) and the seven fused optimizer updates of
// core/ops/training_ops.cc, with torch.optim's rules in the order the CPU
// kernels apply them.
//
// A kernel locks the variable and its slots exclusively and checks every
// input before it enqueues the update, so an error leaves them untouched.
// The scalar hyper-parameters are read to the host (one wait for the
// stream per update): Adam's bias corrections are computed from them in
// double, as PyTorch does, and a step below 1 must be an error.
//
// Device code: included by plugins/devices/cuda/training.cu and
// plugins/devices/hip/training.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_TRAINING_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_TRAINING_H_

#include <cmath>
#include <type_traits>

#include "gpu/device_compat.h"
#include "weft/sdk/variables.h"

namespace weft::gpu {
namespace {

// --- AssignAdd, AssignSub ------------------------------------------------------------

template <class T, bool kSubtract>
__global__ void AssignUpdateLoop(T* var, const T* delta, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    if constexpr (std::is_integral_v<T>) {
      var[i] = kSubtract ? WrapSub(var[i], delta[i]) : WrapAdd(var[i], delta[i]);
    } else {
      var[i] = kSubtract ? var[i] - delta[i] : var[i] + delta[i];
    }
  }
}

template <class T, bool kSubtract>
class AssignUpdateKernel {
 public:
  void Compute(Context& ctx) {
    const char* name = kSubtract ? "AssignSub" : "AssignAdd";
    const sdk::AssignUpdate<Tensor> in = sdk::LockAssignUpdate(ctx, DtypeOf<T>(), kSubtract);
    const Tensor& var = in.var;
    const Tensor& delta = in.delta;
    if (var.num_elements == 0) return;
    AssignUpdateLoop<T, kSubtract>
        <<<GridFor(var.num_elements), kBlock, 0, ctx.stream()>>>(var.as<T>(), delta.as<const T>(), var.num_elements);
    CheckLaunch(name);
  }
};

// --- Fused optimizer updates -----------------------------------------------------------

// What an update needs once its inputs are checked (weft/sdk/variables.h),
// and factors the rule computes from its scalars on the host.
template <class T>
struct ApplyArgs : sdk::ApplyArgs<T> {
  T factors[2] = {};
};

// Locks and checks the inputs of an apply op (weft/sdk/variables.h has
// |kinds| and |names|) and reads its scalars to the host.
template <class T>
ApplyArgs<T> LockAndCheck(Context& ctx, const char* kinds, const char* const* names) {
  ApplyArgs<T> args;
  static_cast<sdk::ApplyArgs<T>&>(args) =
      sdk::LockApplyArgs<T>(ctx, DtypeOf<T>(), kinds, names, [&](char kind, int i, const Tensor& t, auto* dst) {
        const weft_dtype_t want = kind == 'n' ? WEFT_DTYPE_I64 : DtypeOf<T>();
        if (t.dtype != want) Fail("'", names[i], "' is ", DtypeName(t.dtype), ", not ", DtypeName(want));
        ctx.Read(t, dst);
      });
  return args;
}

// Each rule: its op, the op's input kinds and names, Prepare (host: factors from
// the scalars) and the update of element i (device).

struct GradientDescent {
  static constexpr const char* kOp = "ResourceApplyGradientDescent";
  static constexpr const char* kKinds = "rsg";
  static constexpr const char* kNames[] = {"var", "lr", "grad"};
  template <class T>
  void Prepare(ApplyArgs<T>&) const {}
  template <class T>
  __device__ void operator()(const ApplyArgs<T>& a, int64_t i) const {
    a.vars[0][i] = a.vars[0][i] - a.scalars[0] * a.grad[i];
  }
};

struct Momentum {
  static constexpr const char* kOp = "ResourceApplyMomentum";
  static constexpr const char* kKinds = "rrsgs";
  static constexpr const char* kNames[] = {"var", "accum", "lr", "grad", "momentum"};
  explicit Momentum(const InitContext& init) : nesterov(init.Bool("use_nesterov")) {}
  template <class T>
  void Prepare(ApplyArgs<T>&) const {}
  template <class T>
  __device__ void operator()(const ApplyArgs<T>& a, int64_t i) const {
    const T lr = a.scalars[0], momentum = a.scalars[1];
    T* var = a.vars[0];
    T* accum = a.vars[1];
    const T g = a.grad[i];
    accum[i] = momentum * accum[i] + g;
    var[i] = nesterov ? var[i] - lr * (g + momentum * accum[i]) : var[i] - lr * accum[i];
  }
  bool nesterov;
};

// Adam's factors, computed in double as PyTorch does and rounded to T:
// factors[0] = lr / (1 - beta1^step), factors[1] = sqrt(1 - beta2^step).
template <class T>
void AdamFactors(ApplyArgs<T>& a, T lr, T beta1, T beta2) {
  if (a.step < 1) Fail("'step' must be at least 1 (updates are counted from 1), got ", a.step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(a.step));
  a.factors[0] = static_cast<T>(static_cast<double>(lr) / bc1);
  a.factors[1] = static_cast<T>(std::sqrt(bc2));
}

// Adam after var = var * decay (1 for Adam, which changes nothing).
template <class T>
__device__ inline void AdamElement(const ApplyArgs<T>& a, int64_t i, T beta1, T beta2, T epsilon, T decay) {
  T* var = a.vars[0];
  T* m = a.vars[1];
  T* v = a.vars[2];
  const T g = a.grad[i];
  var[i] = var[i] * decay;
  m[i] = beta1 * m[i] + (T(1) - beta1) * g;
  v[i] = beta2 * v[i] + (T(1) - beta2) * g * g;
  const T denom = dm::Sqrt(v[i]) / a.factors[1] + epsilon;
  var[i] = var[i] - a.factors[0] * m[i] / denom;
}

struct Adam {
  static constexpr const char* kOp = "ResourceApplyAdam";
  static constexpr const char* kKinds = "rrrssssng";
  static constexpr const char* kNames[] = {"var", "m", "v", "lr", "beta1", "beta2", "epsilon", "step", "grad"};
  template <class T>
  void Prepare(ApplyArgs<T>& a) const {
    AdamFactors(a, a.scalars[0], a.scalars[1], a.scalars[2]);
  }
  template <class T>
  __device__ void operator()(const ApplyArgs<T>& a, int64_t i) const {
    AdamElement(a, i, a.scalars[1], a.scalars[2], a.scalars[3], T(1));
  }
};

// The decay factor 1 - lr * weight_decay, in double and rounded to T, is
// kept in scalars[5] (AdamW has five scalars before it).
struct AdamW {
  static constexpr const char* kOp = "ResourceApplyAdamW";
  static constexpr const char* kKinds = "rrrsssssng";
  static constexpr const char* kNames[] = {"var",          "m",    "v",   "lr", "beta1", "beta2", "epsilon",
                                           "weight_decay", "step", "grad"};
  template <class T>
  void Prepare(ApplyArgs<T>& a) const {
    AdamFactors(a, a.scalars[0], a.scalars[1], a.scalars[2]);
    a.scalars[5] = static_cast<T>(1.0 - static_cast<double>(a.scalars[0]) * static_cast<double>(a.scalars[4]));
  }
  template <class T>
  __device__ void operator()(const ApplyArgs<T>& a, int64_t i) const {
    AdamElement(a, i, a.scalars[1], a.scalars[2], a.scalars[3], a.scalars[5]);
  }
};

// RMSprop; the centered variant also averages the gradient (mg, the first
// slot) and divides by the root of ms - mg^2. Scalars: lr, rho, momentum,
// epsilon.
template <bool kCentered>
struct RMSPropRule {
  static constexpr const char* kKinds = kCentered ? "rrrrssssg" : "rrrssssg";
  template <class T>
  void Prepare(ApplyArgs<T>&) const {}
  template <class T>
  __device__ void operator()(const ApplyArgs<T>& a, int64_t i) const {
    const T lr = a.scalars[0], rho = a.scalars[1], momentum = a.scalars[2], epsilon = a.scalars[3];
    constexpr int kMs = kCentered ? 2 : 1;
    T* var = a.vars[0];
    T* ms = a.vars[kMs];
    T* mom = a.vars[kMs + 1];
    const T g = a.grad[i];
    T mean_sq = T(0);
    if constexpr (kCentered) {
      T* mg = a.vars[1];
      mg[i] = rho * mg[i] + (T(1) - rho) * g;
      mean_sq = mg[i] * mg[i];
    }
    ms[i] = rho * ms[i] + (T(1) - rho) * g * g;
    const T avg = dm::Sqrt(ms[i] - mean_sq) + epsilon;
    mom[i] = momentum * mom[i] + g / avg;
    var[i] = var[i] - lr * mom[i];
  }
};
struct RMSProp : RMSPropRule<false> {
  static constexpr const char* kOp = "ResourceApplyRMSProp";
  static constexpr const char* kNames[] = {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"};
};
struct CenteredRMSProp : RMSPropRule<true> {
  static constexpr const char* kOp = "ResourceApplyCenteredRMSProp";
  static constexpr const char* kNames[] = {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"};
};

struct Adagrad {
  static constexpr const char* kOp = "ResourceApplyAdagrad";
  static constexpr const char* kKinds = "rrssg";
  static constexpr const char* kNames[] = {"var", "accum", "lr", "epsilon", "grad"};
  template <class T>
  void Prepare(ApplyArgs<T>&) const {}
  template <class T>
  __device__ void operator()(const ApplyArgs<T>& a, int64_t i) const {
    T* var = a.vars[0];
    T* accum = a.vars[1];
    const T g = a.grad[i];
    accum[i] = accum[i] + g * g;
    var[i] = var[i] - a.scalars[0] * g / (dm::Sqrt(accum[i]) + a.scalars[1]);
  }
};

template <class T, class Rule>
__global__ void ApplyLoop(ApplyArgs<T> args, Rule rule) {
  for (int64_t i = GlobalIndex(); i < args.size; i += GlobalStride()) rule(args, i);
}

template <class T, class Rule>
class ApplyKernel {
 public:
  explicit ApplyKernel(const InitContext& init) : rule_(sdk::MakeFromInit<Rule>(init)) {}
  void Compute(Context& ctx) {
    ApplyArgs<T> args = LockAndCheck<T>(ctx, Rule::kKinds, Rule::kNames);
    rule_.Prepare(args);
    if (args.size == 0) return;
    ApplyLoop<T, Rule><<<GridFor(args.size), kBlock, 0, ctx.stream()>>>(args, rule_);
    CheckLaunch("the optimizer update");
  }

 private:
  Rule rule_;
};

template <class T, class... Rules>
void AddApplyKernels(KernelRegistry& r) {
  (r.Add<ApplyKernel<T, Rules>>(Rules::kOp, {{"T", DtypeOf<T>()}}), ...);
}

template <class T>
void AddUpdates(KernelRegistry& r) {
  AddApplyKernels<T, GradientDescent, Momentum, Adam, AdamW, RMSProp, CenteredRMSProp, Adagrad>(r);
}

template <class T>
void AddAssignUpdates(KernelRegistry& r) {
  const weft_dtype_t t = DtypeOf<T>();
  r.Add<AssignUpdateKernel<T, false>>("AssignAdd", {{"dtype", t}}, WEFT_KERNEL_INLINE);
  r.Add<AssignUpdateKernel<T, true>>("AssignSub", {{"dtype", t}}, WEFT_KERNEL_INLINE);
}

}  // namespace

void RegisterTrainingKernels(KernelRegistry& r) {
  ForEachType<float, double>([&](auto t) { AddUpdates<decltype(t)>(r); });
  ForEachType<float, double, int32_t, int64_t>([&](auto t) { AddAssignUpdates<decltype(t)>(r); });
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_TRAINING_H_
