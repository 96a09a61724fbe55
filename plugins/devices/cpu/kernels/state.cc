// Kernels that update variables in place, or read parts of them, through
// the host's variable locks: AssignAdd, AssignSub, ResourceGather and
// ResourceScatterAdd. (VarHandle, ReadVariable, Assign and
// VarIsInitialized only move memory and are the runtime's own.)
#include <atomic>
#include <cstring>
#include <type_traits>

#include "../kernel_framework.h"
#include "kernel_util.h"
#include "weft/sdk/variables.h"

namespace weft::cpu {
namespace {

template <class T>
T AddOne(T a, T b, bool subtract) {
  if constexpr (kIsFloat<T>) {
    return StoreAs<T>(subtract ? Load(a) - Load(b) : Load(a) + Load(b));
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(subtract ? static_cast<U>(a) - static_cast<U>(b) : static_cast<U>(a) + static_cast<U>(b));
  }
}

template <class T, bool kSubtract>
class AssignUpdateKernel {
 public:
  void Compute(Context& ctx) {
    const sdk::AssignUpdate<Tensor> in = sdk::LockAssignUpdate(ctx, DtypeOf<T>(), kSubtract);
    T* v = in.var.as<T>();
    const T* d = in.delta.as<T>();
    ParallelFor(in.var.num_elements, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) v[i] = AddOne<T>(v[i], d[i], kSubtract);
    });
  }
};

template <class Index>
int64_t CheckedIndex(const Index* indices, int64_t i, int64_t limit, const std::string& variable) {
  const int64_t index = static_cast<int64_t>(indices[i]);
  if (index < 0 || index >= limit) {
    Fail("index ", index, " (position ", i, ") is out of range for variable '", variable, "' with ", limit, " rows");
  }
  return index;
}

template <class Index>
class ResourceGatherKernel {
 public:
  explicit ResourceGatherKernel(const InitContext& init) : dtype_(init.output_dtype(0)) {}
  void Compute(Context& ctx) {
    const Tensor indices = ctx.input(1);
    Tensor var = ctx.lock_variable(0, /*exclusive=*/false);
    sdk::RequireVariableDtype(ctx, var, dtype_);
    if (var.rank() < 1) Fail("cannot gather rows of the scalar variable '", ctx.variable_name(0), "'");
    Dims out_dims = indices.dims;
    out_dims.insert(out_dims.end(), var.dims.begin() + 1, var.dims.end());
    Tensor out = ctx.allocate_output(0, out_dims);
    const int64_t row = var.dim(0) == 0 ? 0 : var.num_elements / var.dim(0);
    const std::size_t row_bytes = static_cast<std::size_t>(row) * ElementSize(var.dtype);
    const auto* src = static_cast<const char*>(var.data);
    auto* dst = static_cast<char*>(out.data);
    const Index* idx = indices.as<Index>();
    const std::string name = ctx.variable_name(0);
    for (int64_t i = 0; i < indices.num_elements; ++i) {
      const int64_t r = CheckedIndex(idx, i, var.dim(0), name);
      std::memcpy(dst + static_cast<std::size_t>(i) * row_bytes, src + static_cast<std::size_t>(r) * row_bytes,
                  row_bytes);
    }
  }

 private:
  weft_dtype_t dtype_;
};

template <class T, class Index>
class ResourceScatterAddKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor indices = ctx.input(1), updates = ctx.input(2);
    Tensor var = ctx.lock_variable(0, /*exclusive=*/true);
    sdk::RequireVariableDtype(ctx, var, DtypeOf<T>());
    if (var.rank() < 1) Fail("cannot scatter into the scalar variable '", ctx.variable_name(0), "'");
    Dims expect = indices.dims;
    expect.insert(expect.end(), var.dims.begin() + 1, var.dims.end());
    if (updates.dims != expect) {
      Fail("updates has shape ", DimsString(updates.dims), "; for indices ", DimsString(indices.dims),
           " and variable '", ctx.variable_name(0), "' ", DimsString(var.dims), " it must be ", DimsString(expect));
    }
    const int64_t row = var.dim(0) == 0 ? 0 : var.num_elements / var.dim(0);
    const Index* idx = indices.as<Index>();
    T* v = var.as<T>();
    const T* u = updates.as<T>();
    const std::string name = ctx.variable_name(0);
    // Check every index first, so a bad one leaves the variable untouched.
    for (int64_t i = 0; i < indices.num_elements; ++i) CheckedIndex(idx, i, var.dim(0), name);
    for (int64_t i = 0; i < indices.num_elements; ++i) {
      T* dst = v + static_cast<int64_t>(idx[i]) * row;
      const T* src = u + i * row;
      for (int64_t j = 0; j < row; ++j) dst[j] = AddOne<T>(dst[j], src[j], false);
    }
  }
};

}  // namespace

void RegisterStateKernels(KernelRegistry& r) {
  auto numeric = [&r]<class T>() {
    r.Add<AssignUpdateKernel<T, false>>("AssignAdd", {{"dtype", DtypeOf<T>()}});
    r.Add<AssignUpdateKernel<T, true>>("AssignSub", {{"dtype", DtypeOf<T>()}});
    r.Add<ResourceScatterAddKernel<T, int32_t>>("ResourceScatterAdd",
                                                {{"dtype", DtypeOf<T>()}, {"Tindices", WEFT_DTYPE_I32}});
    r.Add<ResourceScatterAddKernel<T, int64_t>>("ResourceScatterAdd",
                                                {{"dtype", DtypeOf<T>()}, {"Tindices", WEFT_DTYPE_I64}});
  };
  ForEachNumericType(numeric);
  // Gather copies bytes: one kernel per index type serves every dtype.
  r.Add<ResourceGatherKernel<int32_t>>("ResourceGather", {{"Tindices", WEFT_DTYPE_I32}});
  r.Add<ResourceGatherKernel<int64_t>>("ResourceGather", {{"Tindices", WEFT_DTYPE_I64}});
}

}  // namespace weft::cpu
