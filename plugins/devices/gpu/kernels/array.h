// Data-movement and construction kernels for the cuda and hip plugins:
// Fill, ZerosLike, OnesLike, BroadcastTo, Transpose, Select, ClipByValue
// and AddN, and the launchers of gpu/launchers.h. Kernels that only move
// elements work on their bytes (1, 2, 4 or 8 per element), so one
// instantiation serves every dtype of that size.
//
// Device code: included by plugins/devices/cuda/array.cu and
// plugins/devices/hip/array.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_ARRAY_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_ARRAY_H_

#include <cstring>
#include <type_traits>

#include "gpu/device_compat.h"
#include "gpu/launchers.h"

namespace weft::gpu {
namespace {

// --- Byte-level kernels ------------------------------------------------------------

template <class E>
__global__ void FillFromDevice(E* out, const E* value, int64_t n) {
  const E v = *value;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = v;
}

template <class E>
__global__ void FillWithValue(E* out, E value, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = value;
}

// dst[dst_base + sum(c * dst strides)] = src[src_base + sum(c * src
// strides)] for every coordinate c of |plan|'s dims (strides[0] for dst,
// strides[1] for src).
template <class E>
__global__ void StridedCopy(const E* src, int64_t src_base, E* dst, int64_t dst_base, int64_t n,
                            BroadcastPlan<2> plan) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    int64_t off[2];
    BroadcastOffsets(plan, i, off);
    dst[dst_base + off[0]] = src[src_base + off[1]];
  }
}

template <class F>
void BySize(std::size_t element_size, F&& f) {
  switch (element_size) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint64_t{}); return;
    default: Fail("elements of ", element_size, " bytes cannot be copied on the device");
  }
}

std::vector<int64_t> DenseStrides(const Dims& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// A plan over |dims| with the given destination and source strides.
BroadcastPlan<2> CopyPlan(const Dims& dims, const std::vector<int64_t>& dst_strides,
                          const std::vector<int64_t>& src_strides) {
  if (dims.size() > static_cast<std::size_t>(kMaxDims)) Fail("rank ", dims.size(), " is above ", kMaxDims);
  BroadcastPlan<2> plan;
  plan.rank = dims.empty() ? 1 : static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    plan.dims[i] = dims[i];
    plan.strides[0][i] = dst_strides[i];
    plan.strides[1][i] = src_strides[i];
  }
  return plan;
}

void EnqueueStridedCopy(rt::Stream stream, const void* src, int64_t src_base, void* dst, int64_t dst_base,
                        const Dims& dims, const std::vector<int64_t>& dst_strides,
                        const std::vector<int64_t>& src_strides, std::size_t element_size, const char* what) {
  const int64_t n = Product(dims, 0, static_cast<int>(dims.size()));
  if (n == 0) return;
  const BroadcastPlan<2> plan = CopyPlan(dims, dst_strides, src_strides);
  BySize(element_size, [&](auto e) {
    using E = decltype(e);
    StridedCopy<E><<<GridFor(n), kBlock, 0, stream>>>(static_cast<const E*>(src), src_base, static_cast<E*>(dst),
                                                      dst_base, n, plan);
  });
  CheckLaunch(what);
}

// --- Fill, ZerosLike, OnesLike -----------------------------------------------------

class FillKernel {
 public:
  void Compute(Context& ctx) {
    const Dims dims = ctx.ReadShape(ctx.input(0), "dims");
    const Tensor value = ctx.input(1);
    if (value.num_elements != 1) Fail("value must be a scalar, got shape ", DimsString(value.dims));
    const Tensor out = ctx.allocate_output(0, dims);
    if (out.num_elements == 0) return;
    BySize(weft_dtype_size(out.dtype), [&](auto e) {
      using E = decltype(e);
      if (value.host != nullptr) {
        E v;
        std::memcpy(&v, value.host, sizeof v);
        FillWithValue<E><<<GridFor(out.num_elements), kBlock, 0, ctx.stream()>>>(out.as<E>(), v, out.num_elements);
      } else {
        FillFromDevice<E><<<GridFor(out.num_elements), kBlock, 0, ctx.stream()>>>(out.as<E>(), value.as<const E>(),
                                                                                  out.num_elements);
      }
    });
    CheckLaunch("Fill");
  }
};

class ZerosLikeKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    if (y.byte_size == 0) return;
    Check(rt::Memset(y.ptr, 0, y.byte_size, ctx.stream()), "ZerosLike: clearing the output");
  }
};

template <class T>
class OnesLikeKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.allocate_output(0, x.dims);
    if (y.num_elements == 0) return;
    FillWithValue<T><<<GridFor(y.num_elements), kBlock, 0, ctx.stream()>>>(y.as<T>(), T(1), y.num_elements);
    CheckLaunch("OnesLike");
  }
};

// --- BroadcastTo, Transpose ---------------------------------------------------------

class BroadcastToKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Dims target = ctx.ReadShape(ctx.input(1), "shape");
    if (x.dims.size() > target.size()) {
      Fail("cannot broadcast ", DimsString(x.dims), " to ", DimsString(target), ": it has more dimensions");
    }
    // Element strides of x aligned to the target's last dimensions, 0
    // where x has size 1 (or no dimension).
    const std::size_t lead = target.size() - x.dims.size();
    std::vector<int64_t> src_strides(target.size(), 0);
    int64_t stride = 1;
    for (std::size_t i = target.size(); i-- > lead;) {
      const int64_t d = x.dims[i - lead];
      if (d != target[i] && d != 1) {
        Fail("cannot broadcast ", DimsString(x.dims), " to ", DimsString(target), ": dimension ", i - lead, " is ", d,
             ", not 1 or ", target[i]);
      }
      src_strides[i] = d == 1 ? 0 : stride;
      stride *= d;
    }
    const Tensor y = ctx.allocate_output(0, target);
    EnqueueStridedCopy(ctx.stream(), x.ptr, 0, y.ptr, 0, target, DenseStrides(target), src_strides,
                       weft_dtype_size(x.dtype), "BroadcastTo");
  }
};

// The permutation |perm| asks for a tensor of |rank| (empty: reversed
// axes), checked.
std::vector<int> CheckedPerm(const std::vector<int64_t>& perm, int rank) {
  std::vector<int> out(static_cast<std::size_t>(rank));
  if (perm.empty()) {
    for (int i = 0; i < rank; ++i) out[static_cast<std::size_t>(i)] = rank - 1 - i;
    return out;
  }
  if (static_cast<int>(perm.size()) != rank) {
    Fail("perm ", DimsString(perm), " has ", perm.size(), " entries for a tensor of rank ", rank);
  }
  std::vector<bool> seen(static_cast<std::size_t>(rank), false);
  for (std::size_t i = 0; i < perm.size(); ++i) {
    int64_t axis = perm[i] < 0 ? perm[i] + rank : perm[i];
    if (axis < 0 || axis >= rank) Fail("perm ", DimsString(perm), " has ", perm[i], ", out of range for rank ", rank);
    if (seen[static_cast<std::size_t>(axis)]) Fail("perm ", DimsString(perm), " repeats ", perm[i]);
    seen[static_cast<std::size_t>(axis)] = true;
    out[i] = static_cast<int>(axis);
  }
  return out;
}

class TransposeKernel {
 public:
  explicit TransposeKernel(const InitContext& init) : perm_(init.Ints("perm")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<int> perm = CheckedPerm(perm_, x.rank());
    Dims out_dims(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) out_dims[i] = x.dims[static_cast<std::size_t>(perm[i])];
    const Tensor y = ctx.allocate_output(0, out_dims);
    EnqueueTranspose(ctx.stream(), x.ptr, x.dims, perm, weft_dtype_size(x.dtype), y.ptr);
  }

 private:
  std::vector<int64_t> perm_;
};

// --- Select, ClipByValue, AddN -----------------------------------------------------

template <class T>
__global__ void SelectLoop(const bool* cond, const T* t, const T* e, T* out, int64_t n, BroadcastPlan<3> plan) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    int64_t off[3];
    BroadcastOffsets(plan, i, off);
    out[i] = cond[off[0]] ? t[off[1]] : e[off[2]];
  }
}

template <class T>
__global__ void ClipLoop(const T* t, const T* lo, const T* hi, T* out, int64_t n, BroadcastPlan<3> plan) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    int64_t off[3];
    BroadcastOffsets(plan, i, off);
    const T v = t[off[0]];
    const T l = lo[off[1]], h = hi[off[2]];
    const T r = v < l ? l : v;  // NaN compares false: it stays NaN
    out[i] = r > h ? h : r;
  }
}

// One launch per three-operand op: the output is the broadcast of all
// three shapes.
template <class T, bool kSelect>
class TernaryKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1), c = ctx.input(2);
    const Dims dims = BroadcastDims(BroadcastDims(a.dims, b.dims), c.dims);
    const Tensor out = ctx.allocate_output(0, dims);
    if (out.num_elements == 0) return;
    const BroadcastPlan<3> plan = PlanBroadcast3(dims, a.dims, b.dims, c.dims);
    if constexpr (kSelect) {
      SelectLoop<T><<<GridFor(out.num_elements), kBlock, 0, ctx.stream()>>>(
          a.as<const bool>(), b.as<const T>(), c.as<const T>(), out.as<T>(), out.num_elements, plan);
    } else {
      ClipLoop<T><<<GridFor(out.num_elements), kBlock, 0, ctx.stream()>>>(
          a.as<const T>(), b.as<const T>(), c.as<const T>(), out.as<T>(), out.num_elements, plan);
    }
    CheckLaunch(kSelect ? "Select" : "ClipByValue");
  }
};

constexpr int kAddNPerLaunch = 8;

template <class T>
struct AddNInputs {
  const T* p[kAddNPerLaunch];
};

template <class T>
__global__ void AddNLoop(AddNInputs<T> in, int count, bool accumulate, T* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    T sum = accumulate ? out[i] : T(0);
    for (int k = 0; k < count; ++k) {
      if constexpr (std::is_integral_v<T>) {
        sum = WrapAdd(sum, in.p[k][i]);
      } else {
        sum += in.p[k][i];
      }
    }
    out[i] = sum;
  }
}

template <class T>
class AddNKernel {
 public:
  void Compute(Context& ctx) {
    const int n = ctx.num_inputs();
    std::vector<Tensor> inputs;
    for (int i = 0; i < n; ++i) {
      inputs.push_back(ctx.input(i));
      if (inputs.back().dims != inputs.front().dims) {
        Fail("AddN inputs must have one shape: input ", i, " has ", DimsString(inputs.back().dims), ", input 0 has ",
             DimsString(inputs.front().dims));
      }
    }
    const Tensor out = ctx.allocate_output(0, inputs.front().dims);
    if (out.num_elements == 0) return;
    for (int begin = 0; begin < n; begin += kAddNPerLaunch) {
      AddNInputs<T> batch{};
      const int count = n - begin < kAddNPerLaunch ? n - begin : kAddNPerLaunch;
      for (int k = 0; k < count; ++k) batch.p[k] = inputs[static_cast<std::size_t>(begin + k)].as<const T>();
      AddNLoop<T><<<GridFor(out.num_elements), kBlock, 0, ctx.stream()>>>(batch, count, begin > 0, out.as<T>(),
                                                                          out.num_elements);
      CheckLaunch("AddN");
    }
  }
};

// --- Registration ------------------------------------------------------------------

constexpr weft_dtype_t kMovable[] = {WEFT_DTYPE_F32, WEFT_DTYPE_F64,  WEFT_DTYPE_I32, WEFT_DTYPE_I64, WEFT_DTYPE_BOOL,
                                     WEFT_DTYPE_F16, WEFT_DTYPE_BF16, WEFT_DTYPE_I8,  WEFT_DTYPE_U8,  WEFT_DTYPE_I16};

template <class T>
void AddTyped(KernelRegistry& r) {
  const weft_dtype_t t = DtypeOf<T>();
  r.Add<OnesLikeKernel<T>>("OnesLike", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<TernaryKernel<T, true>>("Select", {{"T", t}}, WEFT_KERNEL_INLINE);
  if constexpr (!std::is_same_v<T, bool>) {
    r.Add<TernaryKernel<T, false>>("ClipByValue", {{"T", t}}, WEFT_KERNEL_INLINE);
    r.Add<AddNKernel<T>>("AddN", {{"T", t}}, WEFT_KERNEL_INLINE);
  }
}

}  // namespace

void EnqueueTranspose(rt::Stream stream, const void* in, const Dims& in_dims, const std::vector<int>& perm,
                      std::size_t element_size, void* out) {
  const std::vector<int64_t> in_strides = DenseStrides(in_dims);
  Dims out_dims(perm.size());
  std::vector<int64_t> src_strides(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) {
    out_dims[i] = in_dims[static_cast<std::size_t>(perm[i])];
    src_strides[i] = in_strides[static_cast<std::size_t>(perm[i])];
  }
  EnqueueStridedCopy(stream, in, 0, out, 0, out_dims, DenseStrides(out_dims), src_strides, element_size, "transpose");
}

void EnqueueCopyBox(rt::Stream stream, const void* src, const Dims& src_dims, const Dims& src_start, void* dst,
                    const Dims& dst_dims, const Dims& dst_start, const Dims& box, std::size_t element_size) {
  const std::vector<int64_t> src_strides = DenseStrides(src_dims), dst_strides = DenseStrides(dst_dims);
  int64_t src_base = 0, dst_base = 0;
  for (std::size_t i = 0; i < box.size(); ++i) {
    src_base += src_start[i] * src_strides[i];
    dst_base += dst_start[i] * dst_strides[i];
  }
  EnqueueStridedCopy(stream, src, src_base, dst, dst_base, box, dst_strides, src_strides, element_size, "copy box");
}

void RegisterArrayKernels(KernelRegistry& r) {
  for (weft_dtype_t t : kMovable) {
    r.Add<FillKernel>("Fill", {{"T", t}}, 0, {"dims"});
    r.Add<ZerosLikeKernel>("ZerosLike", {{"T", t}}, WEFT_KERNEL_INLINE);
    r.Add<BroadcastToKernel>("BroadcastTo", {{"T", t}}, 0, {"shape"});
    r.Add<TransposeKernel>("Transpose", {{"T", t}}, WEFT_KERNEL_INLINE);
  }
  ForEachType<float, double, int32_t, int64_t, bool>([&](auto t) { AddTyped<decltype(t)>(r); });
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_ARRAY_H_
