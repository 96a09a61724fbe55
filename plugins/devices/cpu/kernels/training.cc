// The fused optimizer updates of core/ops/training_ops.cc: gradient
// descent, momentum, Adam, AdamW, RMSprop (plain and centered) and Adagrad,
// each for f32 and f64, with torch.optim's update rules.
//
// A kernel locks the variable and its slots exclusively, checks every input
// and only then updates them in place, so an error leaves them untouched.
// The element-wise arithmetic is done in T, in the order PyTorch's CPU
// kernels do it (mul_ then add_, addcmul as s + (c * a) * b, addcdiv as
// s + (c * a) / b); the scalar factors PyTorch computes in Python floats
// (Adam's bias corrections, AdamW's decay) are computed in double and
// rounded to T, as PyTorch rounds them when it passes them to its kernels.
#include <cmath>
#include <iterator>
#include <string_view>

#include "../kernel_framework.h"
#include "weft/sdk/variables.h"

namespace weft::cpu {
namespace {

using sdk::ApplyArgs;

// Locks and checks the inputs of an apply op (weft/sdk/variables.h has
// |kinds| and |names|) and reads its scalars.
template <class T>
ApplyArgs<T> LockAndCheck(Context& ctx, std::string_view kinds, const char* const* names) {
  return sdk::LockApplyArgs<T>(ctx, DtypeOf<T>(), kinds, names,
                               []<class V>(char, int, const Tensor& t, V* dst) { *dst = *t.as<V>(); });
}

void CheckStep(int64_t step) {
  if (step < 1) Fail("'step' must be at least 1 (updates are counted from 1), got ", step);
}

// Adam's scalar factors, computed in double as PyTorch does and rounded to T.
template <class T>
struct AdamFactors {
  T step_size;  // lr / (1 - beta1^step)
  T bc2_sqrt;   // sqrt(1 - beta2^step)
};

template <class T>
AdamFactors<T> AdamFactorsFor(T lr, T beta1, T beta2, int64_t step) {
  CheckStep(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  return {static_cast<T>(static_cast<double>(lr) / bc1), static_cast<T>(std::sqrt(bc2))};
}

// Each rule: its op, the op's input kinds and names (see LockAndCheck),
// and Apply, with a rough cost per element in nanoseconds for ParallelFor.

struct GradientDescent {
  static constexpr const char* kOp = "ResourceApplyGradientDescent";
  static constexpr std::string_view kKinds = "rsg";
  static constexpr const char* kNames[] = {"var", "lr", "grad"};
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    const T lr = a.scalars[0];
    ParallelFor(a.size, 1, [&a, lr](int64_t b, int64_t e) {
      T* __restrict var = a.vars[0];
      const T* __restrict g = a.grad;
      for (int64_t i = b; i < e; ++i) var[i] = var[i] - lr * g[i];
    });
  }
};

struct Momentum {
  static constexpr const char* kOp = "ResourceApplyMomentum";
  static constexpr std::string_view kKinds = "rrsgs";
  static constexpr const char* kNames[] = {"var", "accum", "lr", "grad", "momentum"};
  explicit Momentum(const InitContext& init) : nesterov_(init.Bool("use_nesterov")) {}
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    const T lr = a.scalars[0], momentum = a.scalars[1];
    ParallelFor(a.size, 2, [&a, lr, momentum, nesterov = nesterov_](int64_t b, int64_t e) {
      T* __restrict var = a.vars[0];
      T* __restrict accum = a.vars[1];
      const T* __restrict g = a.grad;
      if (nesterov) {
        for (int64_t i = b; i < e; ++i) {
          accum[i] = momentum * accum[i] + g[i];
          var[i] = var[i] - lr * (g[i] + momentum * accum[i]);
        }
      } else {
        for (int64_t i = b; i < e; ++i) {
          accum[i] = momentum * accum[i] + g[i];
          var[i] = var[i] - lr * accum[i];
        }
      }
    });
  }

 private:
  bool nesterov_;
};

// Adam; AdamW first scales var by |decay| (1 for Adam, which changes
// nothing: x * 1 == x).
template <class T>
void AdamUpdate(const ApplyArgs<T>& a, T lr, T beta1, T beta2, T epsilon, T decay) {
  const AdamFactors<T> f = AdamFactorsFor(lr, beta1, beta2, a.step);
  const T one_minus_beta1 = T(1) - beta1, one_minus_beta2 = T(1) - beta2;
  const T step_size = f.step_size, bc2_sqrt = f.bc2_sqrt;
  ParallelFor(
      a.size, 10,
      [&a, beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, bc2_sqrt, epsilon, decay](int64_t b, int64_t e) {
        T* __restrict var = a.vars[0];
        T* __restrict m = a.vars[1];
        T* __restrict v = a.vars[2];
        const T* __restrict g = a.grad;
        for (int64_t i = b; i < e; ++i) {
          var[i] = var[i] * decay;
          m[i] = beta1 * m[i] + one_minus_beta1 * g[i];
          v[i] = beta2 * v[i] + one_minus_beta2 * g[i] * g[i];
          const T denom = std::sqrt(v[i]) / bc2_sqrt + epsilon;
          var[i] = var[i] - step_size * m[i] / denom;
        }
      });
}

struct Adam {
  static constexpr const char* kOp = "ResourceApplyAdam";
  static constexpr std::string_view kKinds = "rrrssssng";
  static constexpr const char* kNames[] = {"var", "m", "v", "lr", "beta1", "beta2", "epsilon", "step", "grad"};
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    AdamUpdate(a, a.scalars[0], a.scalars[1], a.scalars[2], a.scalars[3], T(1));
  }
};

struct AdamW {
  static constexpr const char* kOp = "ResourceApplyAdamW";
  static constexpr std::string_view kKinds = "rrrsssssng";
  static constexpr const char* kNames[] = {"var",          "m",    "v",   "lr", "beta1", "beta2", "epsilon",
                                           "weight_decay", "step", "grad"};
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    const T lr = a.scalars[0], weight_decay = a.scalars[4];
    const T decay = static_cast<T>(1.0 - static_cast<double>(lr) * static_cast<double>(weight_decay));
    AdamUpdate(a, lr, a.scalars[1], a.scalars[2], a.scalars[3], decay);
  }
};

// RMSprop; the centered variant also averages the gradient (mg, the first
// slot) and divides by the root of the variance estimate ms - mg^2 instead
// of ms. The slots are (mg,) ms, mom; the scalars lr, rho, momentum,
// epsilon.
template <bool kCentered>
struct RMSPropRule {
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    const T lr = a.scalars[0], rho = a.scalars[1], momentum = a.scalars[2], epsilon = a.scalars[3];
    const T one_minus_rho = T(1) - rho;
    constexpr int kMs = kCentered ? 2 : 1;
    ParallelFor(a.size, kCentered ? 10 : 8, [&a, lr, rho, momentum, epsilon, one_minus_rho](int64_t b, int64_t e) {
      T* __restrict var = a.vars[0];
      T* __restrict mg = kCentered ? a.vars[1] : nullptr;
      T* __restrict ms = a.vars[kMs];
      T* __restrict mom = a.vars[kMs + 1];
      const T* __restrict g = a.grad;
      for (int64_t i = b; i < e; ++i) {
        if constexpr (kCentered) mg[i] = rho * mg[i] + one_minus_rho * g[i];
        ms[i] = rho * ms[i] + one_minus_rho * g[i] * g[i];
        const T avg = std::sqrt(kCentered ? ms[i] - mg[i] * mg[i] : ms[i]) + epsilon;
        mom[i] = momentum * mom[i] + g[i] / avg;
        var[i] = var[i] - lr * mom[i];
      }
    });
  }
};

struct RMSProp : RMSPropRule</*kCentered=*/false> {
  static constexpr const char* kOp = "ResourceApplyRMSProp";
  static constexpr std::string_view kKinds = "rrrssssg";
  static constexpr const char* kNames[] = {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"};
};

struct CenteredRMSProp : RMSPropRule</*kCentered=*/true> {
  static constexpr const char* kOp = "ResourceApplyCenteredRMSProp";
  static constexpr std::string_view kKinds = "rrrrssssg";
  static constexpr const char* kNames[] = {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"};
};

struct Adagrad {
  static constexpr const char* kOp = "ResourceApplyAdagrad";
  static constexpr std::string_view kKinds = "rrssg";
  static constexpr const char* kNames[] = {"var", "accum", "lr", "epsilon", "grad"};
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    const T lr = a.scalars[0], epsilon = a.scalars[1];
    ParallelFor(a.size, 6, [&a, lr, epsilon](int64_t b, int64_t e) {
      T* __restrict var = a.vars[0];
      T* __restrict accum = a.vars[1];
      const T* __restrict g = a.grad;
      for (int64_t i = b; i < e; ++i) {
        accum[i] = accum[i] + g[i] * g[i];
        var[i] = var[i] - lr * g[i] / (std::sqrt(accum[i]) + epsilon);
      }
    });
  }
};

template <class T, class Rule>
class ApplyKernel {
 public:
  static_assert(std::size(Rule::kNames) == Rule::kKinds.size());
  explicit ApplyKernel(const InitContext& init) : rule_(sdk::MakeFromInit<Rule>(init)) {}
  void Compute(Context& ctx) { rule_.template Apply<T>(LockAndCheck<T>(ctx, Rule::kKinds, Rule::kNames)); }

 private:
  Rule rule_;
};

template <class T, class... Rules>
void AddApplyKernels(KernelRegistry& r) {
  (r.Add<ApplyKernel<T, Rules>>(Rules::kOp, {{"T", DtypeOf<T>()}}), ...);
}

}  // namespace

void RegisterTrainingKernels(KernelRegistry& r) {
  auto add = [&r]<class T>() {
    AddApplyKernels<T, GradientDescent, Momentum, Adam, AdamW, RMSProp, CenteredRMSProp, Adagrad>(r);
  };
  add.template operator()<float>();
  add.template operator()<double>();
}

}  // namespace weft::cpu
