// Variable updates in place (training.cl): AssignAdd and AssignSub (f32,
// f64, i32, i64) and the fused optimizer updates of
// core/ops/training_ops.cc (f32, f64): gradient descent, momentum, Adam,
// AdamW, RMSprop (plain and centered) and Adagrad, with the CPU kernels'
// checks, messages and order of arithmetic.
//
// A kernel locks the variable and its slots exclusively, checks every input
// and only then enqueues the update, so an error leaves them untouched. The
// scalar hyper-parameters are read to the host (a few bytes), where Adam's
// bias corrections are computed in double as PyTorch does.
#include <cmath>
#include <string_view>

#include "../kernel_framework.h"
#include "weft/sdk/variables.h"

namespace weft::opencl {
namespace {

class AssignUpdateKernel {
 public:
  explicit AssignUpdateKernel(const InitContext& init)
      : subtract_(std::string_view(init.op()) == "AssignSub"),
        dtype_(init.Type("dtype")),
        program_(&ProgramFor(init.device(), "training", dtype_)) {}
  void Compute(Context& ctx) {
    const sdk::AssignUpdate<Tensor> in = sdk::LockAssignUpdate(ctx, dtype_, subtract_);
    Launch(ctx, *program_, "assign_update")
        .Buf(in.var)
        .Buf(in.delta)
        .Val<cl_ulong>(in.var.num_elements)
        .Val<cl_int>(subtract_ ? 1 : 0)
        .Run(in.var.num_elements);
  }

 private:
  bool subtract_;
  weft_dtype_t dtype_;
  Program* program_;
};

constexpr int kMaxScalars = 6;

// The inputs of an apply op once locked and checked.
struct ApplyArgs {
  Tensor vars[sdk::kMaxApplyVariables];
  Tensor grad;
  double scalars[kMaxScalars] = {};
  int64_t step = 0;
};

// Locks and checks the inputs of an apply op (weft/sdk/variables.h has
// |kinds| and |names|) and reads its scalars to the host.
ApplyArgs LockAndCheck(Context& ctx, weft_dtype_t dtype, std::string_view kinds, const char* const* names) {
  ApplyArgs args;
  int num_scalars = 0;
  const sdk::ApplyVariables<Tensor> v =
      sdk::LockApplyInputs(ctx, dtype, kinds, names, [&](char kind, int, const Tensor& t) {
        if (kind == 'g') {
          args.grad = t;
        } else if (kind == 'n') {
          args.step = ctx.ReadInts(t)[0];
        } else {
          args.scalars[num_scalars++] = ctx.ReadFloat(t);
        }
      });
  for (int k = 0; k < v.count; ++k) args.vars[k] = v.vars[k];
  return args;
}

// A scalar kernel argument of T (float or double), rounded from |v|.
void ValT(Launch& launch, weft_dtype_t dtype, double v) {
  if (dtype == WEFT_DTYPE_F64) {
    launch.Val<cl_double>(v);
  } else {
    launch.Val<cl_float>(static_cast<float>(v));
  }
}

// What T would round |v| to, as a double (the CPU kernels read scalars as
// T and compute in T).
double AsT(weft_dtype_t dtype, double v) { return dtype == WEFT_DTYPE_F64 ? v : static_cast<float>(v); }

struct Rule {
  const char* op;
  std::string_view kinds;
  std::vector<const char*> names;
};

const Rule kRules[] = {
    {"ResourceApplyGradientDescent", "rsg", {"var", "lr", "grad"}},
    {"ResourceApplyMomentum", "rrsgs", {"var", "accum", "lr", "grad", "momentum"}},
    {"ResourceApplyAdam", "rrrssssng", {"var", "m", "v", "lr", "beta1", "beta2", "epsilon", "step", "grad"}},
    {"ResourceApplyAdamW",
     "rrrsssssng",
     {"var", "m", "v", "lr", "beta1", "beta2", "epsilon", "weight_decay", "step", "grad"}},
    {"ResourceApplyRMSProp", "rrrssssg", {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}},
    {"ResourceApplyCenteredRMSProp",
     "rrrrssssg",
     {"var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}},
    {"ResourceApplyAdagrad", "rrssg", {"var", "accum", "lr", "epsilon", "grad"}},
};

class ApplyKernel {
 public:
  explicit ApplyKernel(const InitContext& init)
      : op_(init.op()),
        dtype_(init.Type("T")),
        nesterov_(op_ == "ResourceApplyMomentum" && init.Bool("use_nesterov")),
        program_(&ProgramFor(init.device(), "training", dtype_)) {
    for (const Rule& rule : kRules) {
      if (op_ == rule.op) rule_ = &rule;
    }
    if (rule_ == nullptr) throw sdk::Error(WEFT_INTERNAL, "no OpenCL update rule for " + op_);
  }

  void Compute(Context& ctx) {
    const ApplyArgs a = LockAndCheck(ctx, dtype_, rule_->kinds, rule_->names.data());
    const int64_t n = a.vars[0].num_elements;
    const double* s = a.scalars;
    if (op_ == "ResourceApplyGradientDescent") {
      Launch launch(ctx, *program_, "apply_gradient_descent");
      launch.Buf(a.vars[0]).Buf(a.grad);
      ValT(launch, dtype_, s[0]);
      launch.Val<cl_ulong>(n).Run(n);
    } else if (op_ == "ResourceApplyMomentum") {
      Launch launch(ctx, *program_, "apply_momentum");
      launch.Buf(a.vars[0]).Buf(a.vars[1]).Buf(a.grad);
      ValT(launch, dtype_, s[0]);
      ValT(launch, dtype_, s[1]);
      launch.Val<cl_int>(nesterov_ ? 1 : 0).Val<cl_ulong>(n).Run(n);
    } else if (op_ == "ResourceApplyAdam" || op_ == "ResourceApplyAdamW") {
      const bool w = op_ == "ResourceApplyAdamW";
      const double lr = AsT(dtype_, s[0]), beta1 = AsT(dtype_, s[1]), beta2 = AsT(dtype_, s[2]);
      if (a.step < 1) Fail("'step' must be at least 1 (updates are counted from 1), got ", a.step);
      const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(a.step));
      const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(a.step));
      const double decay = w ? 1.0 - lr * AsT(dtype_, s[4]) : 1.0;
      Launch launch(ctx, *program_, "apply_adam");
      launch.Buf(a.vars[0]).Buf(a.vars[1]).Buf(a.vars[2]).Buf(a.grad);
      ValT(launch, dtype_, lr / bc1);
      ValT(launch, dtype_, std::sqrt(bc2));
      ValT(launch, dtype_, beta1);
      ValT(launch, dtype_, beta2);
      // 1 - beta in T, as the CPU kernel computes it.
      ValT(launch, dtype_, dtype_ == WEFT_DTYPE_F64 ? 1.0 - beta1 : 1.0f - static_cast<float>(beta1));
      ValT(launch, dtype_, dtype_ == WEFT_DTYPE_F64 ? 1.0 - beta2 : 1.0f - static_cast<float>(beta2));
      ValT(launch, dtype_, s[3]);
      ValT(launch, dtype_, decay);
      launch.Val<cl_ulong>(n).Run(n);
    } else if (op_ == "ResourceApplyRMSProp" || op_ == "ResourceApplyCenteredRMSProp") {
      const bool centered = op_ == "ResourceApplyCenteredRMSProp";
      const int ms = centered ? 2 : 1;
      const double rho = AsT(dtype_, s[1]);
      Launch launch(ctx, *program_, "apply_rmsprop");
      launch.Buf(a.vars[0]).Buf(centered ? a.vars[1] : Tensor()).Buf(a.vars[ms]).Buf(a.vars[ms + 1]).Buf(a.grad);
      ValT(launch, dtype_, s[0]);
      ValT(launch, dtype_, rho);
      ValT(launch, dtype_, dtype_ == WEFT_DTYPE_F64 ? 1.0 - rho : 1.0f - static_cast<float>(rho));
      ValT(launch, dtype_, s[2]);
      ValT(launch, dtype_, s[3]);
      launch.Val<cl_int>(centered ? 1 : 0).Val<cl_ulong>(n).Run(n);
    } else {  // Adagrad
      Launch launch(ctx, *program_, "apply_adagrad");
      launch.Buf(a.vars[0]).Buf(a.vars[1]).Buf(a.grad);
      ValT(launch, dtype_, s[0]);
      ValT(launch, dtype_, s[1]);
      launch.Val<cl_ulong>(n).Run(n);
    }
  }

 private:
  std::string op_;
  weft_dtype_t dtype_;
  bool nesterov_;
  Program* program_;
  const Rule* rule_ = nullptr;
};

}  // namespace

void RegisterTrainingKernels(KernelRegistry& r) {
  for (weft_dtype_t t : {WEFT_DTYPE_F32, WEFT_DTYPE_F64, WEFT_DTYPE_I32, WEFT_DTYPE_I64}) {
    r.Add<AssignUpdateKernel>("AssignAdd", {{"dtype", t}});
    r.Add<AssignUpdateKernel>("AssignSub", {{"dtype", t}});
  }
  for (weft_dtype_t t : {WEFT_DTYPE_F32, WEFT_DTYPE_F64}) {
    for (const Rule& rule : kRules) r.Add<ApplyKernel>(rule.op, {{"T", t}});
  }
}

}  // namespace weft::opencl
