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

namespace weft::cpu {
namespace {

constexpr int kMaxVariables = 4;
constexpr int kMaxScalars = 6;

// What an update sees once its inputs are checked: the variable and its
// slots (in input order), the gradient, the scalar hyper-parameters (in
// input order) and the step, all of one element count.
template <class T>
struct ApplyArgs {
  T* vars[kMaxVariables] = {};
  const T* grad = nullptr;
  T scalars[kMaxScalars] = {};
  int64_t step = 0;
  int64_t size = 0;
};

// Locks and checks the inputs of an apply op. |kinds| has one letter per
// input: 'r' a variable (the first is 'var', the rest its slots), 's' a
// scalar of T, 'n' the i64 step, 'g' the gradient; |names| are the op's
// input names, for messages.
template <class T>
ApplyArgs<T> LockAndCheck(Context& ctx, std::string_view kinds, const char* const* names) {
  ApplyArgs<T> args;
  Tensor vars[kMaxVariables];
  int var_inputs[kMaxVariables] = {};
  int num_vars = 0;
  // Every variable is locked before anything is read, in input order (the
  // variable, then its slots), which is the order every apply kernel uses.
  for (int i = 0; i < static_cast<int>(kinds.size()); ++i) {
    if (kinds[static_cast<std::size_t>(i)] != 'r') continue;
    var_inputs[num_vars] = i;
    vars[num_vars++] = ctx.lock_variable(i, /*exclusive=*/true);
  }
  const auto describe = [&](int k) {
    return Str("variable '", ctx.variable_name(var_inputs[k]), "' (input '", names[var_inputs[k]], "')");
  };
  for (int k = 0; k < num_vars; ++k) {
    // The graph does not carry a handle's dtype: reading a variable as
    // another type would run past its memory.
    if (vars[k].dtype != DtypeOf<T>()) {
      Fail(describe(k), " holds ", weft_dtype_name(vars[k].dtype), ", not ", weft_dtype_name(DtypeOf<T>()));
    }
  }
  for (int k = 1; k < num_vars; ++k) {
    if (vars[k].dims != vars[0].dims) {
      Fail(describe(k), " has shape ", DimsString(vars[k].dims), " but ", describe(0), " has shape ",
           DimsString(vars[0].dims));
    }
  }
  int num_scalars = 0;
  for (int i = 0; i < static_cast<int>(kinds.size()); ++i) {
    const char kind = kinds[static_cast<std::size_t>(i)];
    if (kind == 'r') continue;
    const Tensor t = ctx.input(i);
    if (kind == 'g') {
      if (t.dims != vars[0].dims) {
        Fail("'", names[i], "' has shape ", DimsString(t.dims), " but ", describe(0), " has shape ",
             DimsString(vars[0].dims));
      }
      args.grad = t.as<T>();
      continue;
    }
    if (t.rank() != 0) Fail("'", names[i], "' must be a scalar, got shape ", DimsString(t.dims));
    if (kind == 'n') {
      args.step = *t.as<int64_t>();
    } else {
      args.scalars[num_scalars++] = *t.as<T>();
    }
  }
  for (int k = 0; k < num_vars; ++k) args.vars[k] = vars[k].as<T>();
  args.size = vars[0].num_elements;
  return args;
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

// Each rule: the op's input kinds and names (see LockAndCheck), a rough
// cost per element in nanoseconds for ParallelFor, and Apply.

struct GradientDescent {
  static constexpr std::string_view kKinds = "rsg";
  static constexpr const char* kNames[] = {"var", "lr", "grad"};
  explicit GradientDescent(const InitContext&) {}
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    const T lr = a.scalars[0];
    ParallelFor(a.size, 1, [&](int64_t b, int64_t e) {
      T* __restrict var = a.vars[0];
      const T* __restrict g = a.grad;
      for (int64_t i = b; i < e; ++i) var[i] = var[i] - lr * g[i];
    });
  }
};

struct Momentum {
  static constexpr std::string_view kKinds = "rrsgs";
  static constexpr const char* kNames[] = {"var", "accum", "lr", "grad", "momentum"};
  explicit Momentum(const InitContext& init) : nesterov_(init.Bool("use_nesterov")) {}
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    const T lr = a.scalars[0], momentum = a.scalars[1];
    ParallelFor(a.size, 2, [&](int64_t b, int64_t e) {
      T* __restrict var = a.vars[0];
      T* __restrict accum = a.vars[1];
      const T* __restrict g = a.grad;
      if (nesterov_) {
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
  ParallelFor(a.size, 10, [&](int64_t b, int64_t e) {
    T* __restrict var = a.vars[0];
    T* __restrict m = a.vars[1];
    T* __restrict v = a.vars[2];
    const T* __restrict g = a.grad;
    for (int64_t i = b; i < e; ++i) {
      var[i] = var[i] * decay;
      m[i] = beta1 * m[i] + one_minus_beta1 * g[i];
      v[i] = beta2 * v[i] + one_minus_beta2 * g[i] * g[i];
      const T denom = std::sqrt(v[i]) / f.bc2_sqrt + epsilon;
      var[i] = var[i] - f.step_size * m[i] / denom;
    }
  });
}

struct Adam {
  static constexpr std::string_view kKinds = "rrrssssng";
  static constexpr const char* kNames[] = {"var", "m", "v", "lr", "beta1", "beta2", "epsilon", "step", "grad"};
  explicit Adam(const InitContext&) {}
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    AdamUpdate(a, a.scalars[0], a.scalars[1], a.scalars[2], a.scalars[3], T(1));
  }
};

struct AdamW {
  static constexpr std::string_view kKinds = "rrrsssssng";
  static constexpr const char* kNames[] = {"var",          "m",    "v",   "lr", "beta1", "beta2", "epsilon",
                                           "weight_decay", "step", "grad"};
  explicit AdamW(const InitContext&) {}
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
template <bool kCentered, class T>
void RMSPropUpdate(const ApplyArgs<T>& a) {
  const T lr = a.scalars[0], rho = a.scalars[1], momentum = a.scalars[2], epsilon = a.scalars[3];
  const T one_minus_rho = T(1) - rho;
  constexpr int kMs = kCentered ? 2 : 1;
  ParallelFor(a.size, kCentered ? 10 : 8, [&](int64_t b, int64_t e) {
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

struct RMSProp {
  static constexpr std::string_view kKinds = "rrrssssg";
  static constexpr const char* kNames[] = {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"};
  explicit RMSProp(const InitContext&) {}
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    RMSPropUpdate</*kCentered=*/false>(a);
  }
};

struct CenteredRMSProp {
  static constexpr std::string_view kKinds = "rrrrssssg";
  static constexpr const char* kNames[] = {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"};
  explicit CenteredRMSProp(const InitContext&) {}
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    RMSPropUpdate</*kCentered=*/true>(a);
  }
};

struct Adagrad {
  static constexpr std::string_view kKinds = "rrssg";
  static constexpr const char* kNames[] = {"var", "accum", "lr", "epsilon", "grad"};
  explicit Adagrad(const InitContext&) {}
  template <class T>
  void Apply(const ApplyArgs<T>& a) const {
    const T lr = a.scalars[0], epsilon = a.scalars[1];
    ParallelFor(a.size, 6, [&](int64_t b, int64_t e) {
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
  explicit ApplyKernel(const InitContext& init) : rule_(init) {}
  void Compute(Context& ctx) { rule_.template Apply<T>(LockAndCheck<T>(ctx, Rule::kKinds, Rule::kNames)); }

 private:
  Rule rule_;
};

}  // namespace

void RegisterTrainingKernels(KernelRegistry& r) {
  auto add = [&r]<class T>() {
    const weft_dtype_t t = DtypeOf<T>();
    r.Add<ApplyKernel<T, GradientDescent>>("ResourceApplyGradientDescent", {{"T", t}});
    r.Add<ApplyKernel<T, Momentum>>("ResourceApplyMomentum", {{"T", t}});
    r.Add<ApplyKernel<T, Adam>>("ResourceApplyAdam", {{"T", t}});
    r.Add<ApplyKernel<T, AdamW>>("ResourceApplyAdamW", {{"T", t}});
    r.Add<ApplyKernel<T, RMSProp>>("ResourceApplyRMSProp", {{"T", t}});
    r.Add<ApplyKernel<T, CenteredRMSProp>>("ResourceApplyCenteredRMSProp", {{"T", t}});
    r.Add<ApplyKernel<T, Adagrad>>("ResourceApplyAdagrad", {{"T", t}});
  };
  add.template operator()<float>();
  add.template operator()<double>();
}

}  // namespace weft::cpu
