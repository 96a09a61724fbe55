// The CPU plugin's kernel framework: C++ kernels over the SDK's C kernel
// ABI. A kernel is a class constructed once per node from its attrs and
// called once per step:
//
//   template <class T>
//   class NegKernel {
//    public:
//     explicit NegKernel(const InitContext&) {}
//     void Compute(Context& ctx) {
//       Tensor x = ctx.input(0);
//       Tensor y = ctx.allocate_output(0, x.dims);
//       ParallelFor(x.num_elements, 1, [&](int64_t b, int64_t e) { ... });
//     }
//   };
//   registry.Add<NegKernel<float>>("Neg", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
//
// Everything throws weft::sdk::Error on failure; the registry runs every
// entry point inside the SDK's guard, so errors reach the host as statuses.
// This header sees the SDK only.
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNEL_FRAMEWORK_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNEL_FRAMEWORK_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "weft/sdk/guard.h"
#include "weft/sdk/half.h"
#include "weft/sdk/host.h"
#include "weft/sdk/status.h"
#include "weft/weft_plugin.h"

namespace weft::cpu {

using Dims = std::vector<int64_t>;

// Formats its arguments with operator<< (for error messages).
template <class... Args>
std::string Str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

std::string DimsString(const Dims& dims);

// Throws an INVALID_ARGUMENT error made of |args|.
template <class... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw sdk::Error(WEFT_INVALID_ARGUMENT, Str(args...));
}

// A tensor lent by the host: its dtype, shape and host address.
struct Tensor {
  weft_dtype_t dtype = WEFT_DTYPE_INVALID;
  Dims dims;
  int64_t num_elements = 0;
  void* data = nullptr;

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t dim(int i) const { return dims[static_cast<std::size_t>(i)]; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// Construction time: the node's name and attrs.
class InitContext {
 public:
  explicit InitContext(const weft_kernel_init_t* init) : init_(init) {}
  const char* node_name() const;
  int64_t Int(const char* name) const;
  double Float(const char* name) const;
  bool Bool(const char* name) const;
  weft_dtype_t Type(const char* name) const;
  std::string String(const char* name) const;
  std::vector<int64_t> Ints(const char* name) const;
  weft_dtype_t input_dtype(int i) const;
  weft_dtype_t output_dtype(int i) const;

 private:
  const weft_kernel_init_t* init_;
};

// One compute: inputs, outputs, variables.
class Context {
 public:
  explicit Context(weft_kernel_context_t* ctx) : ctx_(ctx) {}
  int num_inputs() const;
  Tensor input(int i) const;
  Tensor allocate_output(int i, const Dims& dims);
  void forward(int input, int output);
  Tensor allocate_temp(weft_dtype_t dtype, const Dims& dims);
  // The variable behind resource input |i|, locked (see weft_kernel.h).
  Tensor lock_variable(int i, bool exclusive);
  std::string variable_name(int i) const;
  const char* node_name() const;

 private:
  weft_kernel_context_t* ctx_;
};

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

// Kernel definitions handed to the host, with storage for their strings.
class KernelRegistry {
 public:
  using Constraints = std::initializer_list<std::pair<const char*, weft_dtype_t>>;

  template <class K>
  void Add(const char* op, Constraints constraints, uint32_t flags = 0,
           std::initializer_list<const char*> host_memory_args = {}) {
    AddRaw(op, constraints, flags, host_memory_args, &Create<K>, &Destroy<K>, &Compute<K>);
  }

  const weft_kernel_def_t* data() const { return defs_.data(); }
  std::size_t size() const { return defs_.size(); }

 private:
  template <class K>
  static weft_status_t Create(weft_device_t, const weft_kernel_init_t* init, void** out) {
    return sdk::Guard([&] { *out = new K(InitContext(init)); });
  }
  template <class K>
  static void Destroy(void* state) {
    delete static_cast<K*>(state);
  }
  template <class K>
  static weft_status_t Compute(void* state, weft_kernel_context_t* ctx) {
    return sdk::Guard([&] {
      Context context(ctx);
      static_cast<K*>(state)->Compute(context);
    });
  }

  void AddRaw(const char* op, Constraints constraints, uint32_t flags, std::initializer_list<const char*> host_args,
              weft_status_t (*create)(weft_device_t, const weft_kernel_init_t*, void**), void (*destroy)(void*),
              weft_status_t (*compute)(void*, weft_kernel_context_t*));

  std::vector<weft_kernel_def_t> defs_;
  std::deque<std::vector<const char*>> names_;
  std::deque<std::vector<weft_dtype_t>> dtypes_;
};

// Element types: C++ type <-> dtype, and f16/bf16 through float.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

template <class T>
constexpr weft_dtype_t DtypeOf();
template <> constexpr weft_dtype_t DtypeOf<float>() { return WEFT_DTYPE_F32; }
template <> constexpr weft_dtype_t DtypeOf<double>() { return WEFT_DTYPE_F64; }
template <> constexpr weft_dtype_t DtypeOf<int8_t>() { return WEFT_DTYPE_I8; }
template <> constexpr weft_dtype_t DtypeOf<int16_t>() { return WEFT_DTYPE_I16; }
template <> constexpr weft_dtype_t DtypeOf<int32_t>() { return WEFT_DTYPE_I32; }
template <> constexpr weft_dtype_t DtypeOf<int64_t>() { return WEFT_DTYPE_I64; }
template <> constexpr weft_dtype_t DtypeOf<uint8_t>() { return WEFT_DTYPE_U8; }
template <> constexpr weft_dtype_t DtypeOf<bool>() { return WEFT_DTYPE_BOOL; }
template <> constexpr weft_dtype_t DtypeOf<Half>() { return WEFT_DTYPE_F16; }
template <> constexpr weft_dtype_t DtypeOf<BFloat16>() { return WEFT_DTYPE_BF16; }

// The type arithmetic is done in: float for the 16-bit floats.
template <class T> struct ComputeType { using type = T; };
template <> struct ComputeType<Half> { using type = float; };
template <> struct ComputeType<BFloat16> { using type = float; };

template <class T>
inline typename ComputeType<T>::type Load(const T& v) { return v; }
template <> inline float Load<Half>(const Half& v) { return sdk::HalfToFloat(v.bits); }
template <> inline float Load<BFloat16>(const BFloat16& v) { return sdk::Bfloat16ToFloat(v.bits); }

template <class T>
inline T StoreAs(typename ComputeType<T>::type v) { return static_cast<T>(v); }
template <> inline Half StoreAs<Half>(float v) { return Half{sdk::FloatToHalf(v)}; }
template <> inline BFloat16 StoreAs<BFloat16>(float v) { return BFloat16{sdk::FloatToBfloat16(v)}; }

// Calls fn.template operator()<T>() for the C++ type of |dtype| among the
// numeric types; throws for others.
template <class Fn>
void DispatchNumeric(weft_dtype_t dtype, Fn&& fn) {
  switch (dtype) {
    case WEFT_DTYPE_F32: fn.template operator()<float>(); return;
    case WEFT_DTYPE_F64: fn.template operator()<double>(); return;
    case WEFT_DTYPE_F16: fn.template operator()<Half>(); return;
    case WEFT_DTYPE_BF16: fn.template operator()<BFloat16>(); return;
    case WEFT_DTYPE_I8: fn.template operator()<int8_t>(); return;
    case WEFT_DTYPE_I16: fn.template operator()<int16_t>(); return;
    case WEFT_DTYPE_I32: fn.template operator()<int32_t>(); return;
    case WEFT_DTYPE_I64: fn.template operator()<int64_t>(); return;
    case WEFT_DTYPE_U8: fn.template operator()<uint8_t>(); return;
    default: Fail("unsupported dtype ", weft_dtype_name(dtype) ? weft_dtype_name(dtype) : "?");
  }
}

// Byte size of one element of |dtype|.
inline std::size_t ElementSize(weft_dtype_t dtype) { return weft_dtype_size(dtype); }

// The kernel families, each in kernels/<family>.cc.
void RegisterElementwiseKernels(KernelRegistry& r);
void RegisterMatMulKernels(KernelRegistry& r);
void RegisterReductionKernels(KernelRegistry& r);
void RegisterArrayKernels(KernelRegistry& r);
void RegisterNnKernels(KernelRegistry& r);
void RegisterNnGradKernels(KernelRegistry& r);
void RegisterRandomKernels(KernelRegistry& r);
void RegisterStateKernels(KernelRegistry& r);
void RegisterTrainingKernels(KernelRegistry& r);
void RegisterGradSupportKernels(KernelRegistry& r);
void RegisterSparseKernels(KernelRegistry& r);

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNEL_FRAMEWORK_H_
