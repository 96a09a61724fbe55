// The CPU plugin's kernels: C++ classes over the SDK's kernel layer. A
// kernel is a class constructed once per node from its attrs (a kernel
// without attrs has no constructor) and called once per step:
//
//   template <class T>
//   class NegKernel {
//    public:
//     void Compute(Context& ctx) {
//       Tensor x = ctx.input(0);
//       Tensor y = ctx.allocate_output(0, x.dims);
//       ParallelFor(x.num_elements, 1, [&](int64_t b, int64_t e) { ... });
//     }
//   };
//   registry.Add<NegKernel<float>>("Neg", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
//
// The registry, contexts and tensors are the SDK's (weft/sdk/kernel.h);
// this header adds what only the CPU's kernels need: ParallelFor on the
// OpenMP team oneDNN uses, and element types with their arithmetic.
// Everything throws weft::sdk::Error on failure; the registry runs every
// entry point inside the SDK's guard, so errors reach the host as statuses.
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNEL_FRAMEWORK_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNEL_FRAMEWORK_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <tuple>
#include <type_traits>

#include "weft/sdk/half.h"
#include "weft/sdk/host.h"
#include "weft/sdk/kernel.h"

namespace weft::cpu {

// The SDK's kernel layer (weft/sdk/kernel.h): the CPU's memory is
// host-visible, so a Tensor's |data| is the address of its first element.
using Dims = sdk::Dims;
using InitContext = sdk::KernelInit;
using Context = sdk::KernelContext;
using KernelRegistry = sdk::KernelRegistry;
using sdk::DimsString;
using sdk::Fail;
using sdk::Str;
using sdk::Tensor;

// Runs fn(begin, end) over disjoint ranges covering [0, n) on the host's
// intra-op thread count, as OpenMP threads (those oneDNN runs on), and
// returns when all have run; the first exception fn throws is rethrown
// here. |cost_per_unit| is a rough count of nanoseconds per index; small
// loops, and loops inside another ParallelFor, run inline.
//
// Below kMinShardCost nanoseconds of work a shard is not worth waking a
// thread for; a loop of less than kInlineCost runs on the caller's thread
// (a kernel may test this itself, to avoid making a std::function).
constexpr int64_t kMinShardCost = 20000;
constexpr int64_t kInlineCost = 2 * kMinShardCost;
void ParallelFor(int64_t n, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& fn);

// How many threads ParallelFor spreads a loop of |n| units of
// |cost_per_unit| over (its implementations share it): 1 or less runs it
// inline. Small loops (a scalar's) are the common case: decided without
// asking the host for its thread count.
inline int64_t ShardsFor(int64_t n, int64_t cost_per_unit) {
  const int64_t total = n * std::max<int64_t>(cost_per_unit, 1);
  if (n <= 1 || total < kInlineCost) return 1;
  return std::min<int64_t>({sdk::host()->intra_op_threads(), n, total / kMinShardCost});
}

// The first exception a parallel loop's blocks throw, kept for the calling
// thread to rethrow (none may leave an OpenMP region or a pool's task);
// once one is kept, the blocks still to run are skipped. Thread-safe.
class FirstError {
 public:
  // Runs fn() unless a block already failed, keeping what it throws.
  template <class Fn>
  void Run(Fn&& fn) {
    if (failed_.load(std::memory_order_relaxed)) return;
    try {
      fn();
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error_ == nullptr) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  void Rethrow() const {
    if (error_ != nullptr) std::rethrow_exception(error_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr error_;
};

// Element types: C++ type <-> dtype, and f16/bf16 through float.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// The element types of the kernels, and their dtypes in the same order.
using ElementTypes = std::tuple<float, double, Half, BFloat16, int8_t, int16_t, int32_t, int64_t, uint8_t, bool>;
inline constexpr weft_dtype_t kElementDtypes[] = {WEFT_DTYPE_F32, WEFT_DTYPE_F64, WEFT_DTYPE_F16, WEFT_DTYPE_BF16,
                                                  WEFT_DTYPE_I8,  WEFT_DTYPE_I16, WEFT_DTYPE_I32, WEFT_DTYPE_I64,
                                                  WEFT_DTYPE_U8,  WEFT_DTYPE_BOOL};

// The dtype of element type T (|I| is where the search is).
template <class T, std::size_t I = 0>
constexpr weft_dtype_t DtypeOf() {
  if constexpr (I == std::tuple_size_v<ElementTypes>) {
    static_assert(I < std::tuple_size_v<ElementTypes>, "not an element type of the CPU kernels");
    return WEFT_DTYPE_INVALID;
  } else if constexpr (std::is_same_v<T, std::tuple_element_t<I, ElementTypes>>) {
    return kElementDtypes[I];
  } else {
    return DtypeOf<T, I + 1>();
  }
}

// The type arithmetic is done in: float for the 16-bit floats.
template <class T>
struct ComputeType {
  using type = T;
};
template <>
struct ComputeType<Half> {
  using type = float;
};
template <>
struct ComputeType<BFloat16> {
  using type = float;
};

template <class T>
inline typename ComputeType<T>::type Load(const T& v) {
  return v;
}
template <>
inline float Load<Half>(const Half& v) {
  return sdk::HalfToFloat(v.bits);
}
template <>
inline float Load<BFloat16>(const BFloat16& v) {
  return sdk::Bfloat16ToFloat(v.bits);
}

template <class T>
inline T StoreAs(typename ComputeType<T>::type v) {
  return static_cast<T>(v);
}
template <>
inline Half StoreAs<Half>(float v) {
  return Half{sdk::FloatToHalf(v)};
}
template <>
inline BFloat16 StoreAs<BFloat16>(float v) {
  return BFloat16{sdk::FloatToBfloat16(v)};
}

// Byte size of one element of |dtype|.
inline std::size_t ElementSize(weft_dtype_t dtype) { return weft_dtype_size(dtype); }

// --- Selective registration (docs/lite.md) ---------------------------------------------
//
// A lite build made for given models compiles only the kernels their ops
// need, as TensorFlow Lite's and ONNX Runtime's reduced builds do: lite/
// generates weft_lite_kernels.h (WEFT_LITE_KERNELS defined) listing each
// op with every dtype its attrs take in those models, and each
// registration asks KeepsKernel at compile time, so a kernel no model
// needs is never instantiated. Every other build keeps them all.
//
//   AddKernel<"Softmax", SoftmaxKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
//   if constexpr (KeepsKernel(Op::kOp, DtypeOf<T>())) r.Add<...>(Op::kOp, ...);
//
// The dtype is the one the kernel's code depends on (any of its type
// attrs); WEFT_DTYPE_INVALID (the default) selects on the op alone, for a
// kernel class shared by all dtypes.
struct LiteKernel {
  const char* op;
  weft_dtype_t dtype;  // WEFT_DTYPE_INVALID: the op takes no dtype attr
};

}  // namespace weft::cpu

#if defined(WEFT_LITE_KERNELS)
#include "weft_lite_kernels.h"  // kLiteKernels, generated (lite/CMakeLists.txt)
#endif

namespace weft::cpu {

constexpr bool SameText(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

constexpr bool KeepsKernel(const char* op, weft_dtype_t dtype = WEFT_DTYPE_INVALID) {
#if defined(WEFT_LITE_KERNELS)
  for (const LiteKernel& k : kLiteKernels) {
    if (SameText(k.op, op) && (dtype == WEFT_DTYPE_INVALID || k.dtype == WEFT_DTYPE_INVALID || k.dtype == dtype)) {
      return true;
    }
  }
  return false;
#else
  (void)op;
  (void)dtype;
  return true;
#endif
}

// An op name as a template argument.
template <std::size_t N>
struct OpName {
  constexpr OpName(const char (&name)[N]) {  // NOLINT: implicit, for AddKernel<"Op", ...>
    for (std::size_t i = 0; i < N; ++i) text[i] = name[i];
  }
  char text[N];
};

// r.Add<K>(kOp, ...) when the build keeps kOp's kernel for |kDtype|.
template <OpName kOp, class K, weft_dtype_t kDtype = WEFT_DTYPE_INVALID>
void AddKernel(KernelRegistry& r, KernelRegistry::Constraints constraints, uint32_t flags = 0,
               std::initializer_list<const char*> host_memory_args = {}) {
  if constexpr (KeepsKernel(kOp.text, kDtype)) r.Add<K>(kOp.text, constraints, flags, host_memory_args);
}

// The kernel families, each in kernels/<family>.cc.
void RegisterElementwiseKernels(KernelRegistry& r);
void RegisterMatMulKernels(KernelRegistry& r);
void RegisterReductionKernels(KernelRegistry& r);
void RegisterArrayKernels(KernelRegistry& r);
void RegisterIndexingKernels(KernelRegistry& r);
void RegisterNnKernels(KernelRegistry& r);
void RegisterNnGradKernels(KernelRegistry& r);
void RegisterFusedKernels(KernelRegistry& r);  // the graph optimizer's fused ops
void RegisterRandomKernels(KernelRegistry& r);
void RegisterStateKernels(KernelRegistry& r);
void RegisterTrainingKernels(KernelRegistry& r);
void RegisterGradSupportKernels(KernelRegistry& r);
void RegisterSparseKernels(KernelRegistry& r);
void RegisterDynamicShapeKernels(KernelRegistry& r);  // ops with run-time shape inputs (ONNX)
void RegisterResizeKernels(KernelRegistry& r);        // ONNX's Resize
void RegisterDetectionKernels(KernelRegistry& r);     // ONNX's NonMaxSuppression
void RegisterUniqueKernels(KernelRegistry& r);        // ONNX's Unique (OnnxUnique)
void RegisterBiasAddKernels(KernelRegistry& r);       // bias_add.cc, from RegisterNnConvKernels

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNEL_FRAMEWORK_H_
