// Weft SDK for C++ plugins: the inputs of kernels that update variables in
// place, locked and checked alike on every device (the CPU, OpenCL, CUDA
// and HIP devices use it): AssignAdd and AssignSub (core/ops/state_ops.cc)
// and the fused optimizer updates (ResourceApply*, core/ops/training_ops.cc).
//
//   template <bool kSubtract>
//   class AssignUpdateF32 {
//    public:
//     void Compute(weft::sdk::KernelContext& ctx) {
//       const weft::sdk::AssignUpdate<weft::sdk::Tensor> in =
//           weft::sdk::LockAssignUpdate(ctx, WEFT_DTYPE_F32, kSubtract);  // var locked exclusively
//       float* var = in.var.as<float>();
//       const float* delta = in.delta.as<float>();
//       for (int64_t i = 0; i < in.var.num_elements; ++i) var[i] = kSubtract ? var[i] - delta[i] : var[i] + delta[i];
//     }
//   };
//
// The graph does not carry a handle's dtype, so a kernel's dtype attr may
// disagree with the variable it is given: reading it as another type would
// run past its memory, so every kernel checks it. The checks throw
// weft::sdk::Error (INVALID_ARGUMENT) through Fail; a variable stays
// untouched when one fails. |Context| is a BasicKernelContext of any tensor
// type with dims, dtype and rank().
#ifndef WEFT_SDK_VARIABLES_H_
#define WEFT_SDK_VARIABLES_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "weft/sdk/kernel.h"

namespace weft::sdk {

// Throws unless |var|, the variable behind resource input |input|, holds
// |dtype|.
template <class Context, class TensorT>
void RequireVariableDtype(const Context& ctx, const TensorT& var, weft_dtype_t dtype, int input = 0) {
  if (var.dtype != dtype) {
    Fail("variable '", ctx.variable_name(input), "' holds ", DtypeName(var.dtype), ", not ", DtypeName(dtype));
  }
}

// The operands of AssignAdd or AssignSub: the variable, locked exclusively,
// and the value added to or subtracted from it.
template <class TensorT>
struct AssignUpdate {
  TensorT var;
  TensorT delta;
};

// Locks the variable of AssignAdd (AssignSub when |subtract|) and checks
// that it holds |dtype| and has the value's shape.
template <class Context>
auto LockAssignUpdate(Context& ctx, weft_dtype_t dtype, bool subtract) {
  auto delta = ctx.input(1);
  auto var = ctx.lock_variable(0, /*exclusive=*/true);
  RequireVariableDtype(ctx, var, dtype);
  if (var.dims != delta.dims) {
    Fail(subtract ? "AssignSub" : "AssignAdd", " to variable '", ctx.variable_name(0), "' of shape ",
         DimsString(var.dims), " with a value of shape ", DimsString(delta.dims));
  }
  return AssignUpdate<decltype(var)>{var, delta};
}

// The most variables ('var' and its slots) and scalar hyper-parameters a
// fused optimizer update has.
inline constexpr int kMaxApplyVariables = 4;
inline constexpr int kMaxApplyScalars = 6;

// The variables of a fused optimizer update: 'var' and its slots, in input
// order, locked exclusively.
template <class TensorT>
struct ApplyVariables {
  TensorT vars[kMaxApplyVariables];
  int count = 0;
};

// Locks and checks the inputs of a fused optimizer update. |kinds| has one
// letter per input: 'r' a variable (the first is 'var', the rest its slots;
// at most kMaxApplyVariables), 's' a scalar hyper-parameter, 'n' the i64
// step, 'g' the gradient; |names| are the op's input names, for messages.
//
// Every variable is locked before anything is read, in input order, the
// order every apply kernel on every device uses; each must hold |dtype| and
// have var's shape. Then, input by input: the gradient must have var's
// shape, a scalar or the step rank 0, and each is handed to
// visit(kind, index, tensor) once it has passed (a device reads scalars
// there, with checks of its own).
template <class Context, class Visit>
auto LockApplyInputs(Context& ctx, weft_dtype_t dtype, std::string_view kinds, const char* const* names,
                     Visit&& visit) {
  using TensorT = decltype(ctx.input(0));
  ApplyVariables<TensorT> v;
  int var_inputs[kMaxApplyVariables] = {};
  for (int i = 0; i < static_cast<int>(kinds.size()); ++i) {
    if (kinds[static_cast<std::size_t>(i)] != 'r') continue;
    var_inputs[v.count] = i;
    v.vars[v.count++] = ctx.lock_variable(i, /*exclusive=*/true);
  }
  const auto describe = [&](int k) {
    return Str("variable '", ctx.variable_name(var_inputs[k]), "' (input '", names[var_inputs[k]], "')");
  };
  for (int k = 0; k < v.count; ++k) {
    if (v.vars[k].dtype != dtype) Fail(describe(k), " holds ", DtypeName(v.vars[k].dtype), ", not ", DtypeName(dtype));
  }
  for (int k = 1; k < v.count; ++k) {
    if (v.vars[k].dims != v.vars[0].dims) {
      Fail(describe(k), " has shape ", DimsString(v.vars[k].dims), " but ", describe(0), " has shape ",
           DimsString(v.vars[0].dims));
    }
  }
  for (int i = 0; i < static_cast<int>(kinds.size()); ++i) {
    const char kind = kinds[static_cast<std::size_t>(i)];
    if (kind == 'r') continue;
    const TensorT t = ctx.input(i);
    if (kind == 'g') {
      if (t.dims != v.vars[0].dims) {
        Fail("'", names[i], "' has shape ", DimsString(t.dims), " but ", describe(0), " has shape ",
             DimsString(v.vars[0].dims));
      }
    } else if (t.rank() != 0) {
      Fail("'", names[i], "' must be a scalar, got shape ", DimsString(t.dims));
    }
    visit(kind, i, t);
  }
  return v;
}

// What an update of elements of T needs once its inputs are checked: the
// variable and its slots (in input order), the gradient, the scalar
// hyper-parameters (in input order) and the step, and the element count.
template <class T>
struct ApplyArgs {
  T* vars[kMaxApplyVariables] = {};
  const T* grad = nullptr;
  T scalars[kMaxApplyScalars] = {};
  int64_t step = 0;
  int64_t size = 0;
};

// LockApplyInputs for a device whose tensors give their elements with
// as<T>(); read(kind, index, tensor, dst) stores the scalar or step input
// |index| at |dst| (a T*, or an int64_t* for the step).
template <class T, class Context, class Read>
ApplyArgs<T> LockApplyArgs(Context& ctx, weft_dtype_t dtype, std::string_view kinds, const char* const* names,
                           Read&& read) {
  ApplyArgs<T> args;
  int num_scalars = 0;
  const auto v = LockApplyInputs(ctx, dtype, kinds, names, [&](char kind, int i, const auto& t) {
    if (kind == 'g') {
      args.grad = t.template as<const T>();
    } else if (kind == 'n') {
      read(kind, i, t, &args.step);
    } else {
      read(kind, i, t, &args.scalars[num_scalars++]);
    }
  });
  for (int k = 0; k < v.count; ++k) args.vars[k] = v.vars[k].template as<T>();
  args.size = v.vars[0].num_elements;
  return args;
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_VARIABLES_H_
