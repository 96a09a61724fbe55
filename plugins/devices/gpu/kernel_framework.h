// The kernels of the cuda and hip device plugins: C++ classes over the
// SDK's kernel layer (weft/sdk/kernel.h) whose work is enqueued on the
// node's stream.
//
//   template <class T>
//   class ReluKernel {  // no attrs: no constructor (weft/sdk/kernel.h)
//    public:
//     void Compute(Context& ctx) {
//       const Tensor x = ctx.input(0);
//       const Tensor y = ctx.allocate_output(0, x.dims);
//       if (y.num_elements == 0) return;
//       ReluLoop<<<GridFor(y.num_elements), kBlock, 0, ctx.stream()>>>(x.as<T>(), y.as<T>(), y.num_elements);
//       CheckLaunch("Relu");
//     }
//   };
//   registry.Add<ReluKernel<float>>("Relu", {{"T", WEFT_DTYPE_F32}});
//
// Kernels only enqueue work: inputs, outputs and temporaries stay valid
// until the stream has run it (weft_kernel.h). A kernel that needs a value
// on the host (a shape, a step count) reads it with Context::Read*, which
// waits for the stream. Everything throws weft::sdk::Error; the SDK's
// registry runs every entry point inside its guard.
//
// This header is host code, compiled by the C++ compiler and, for the
// files that launch kernels, by nvcc or hipcc; the index plans below are
// plain structs passed to kernels by value.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNEL_FRAMEWORK_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNEL_FRAMEWORK_H_

#include <cstdint>
#include <type_traits>
#include <vector>

#include "gpu/gpu_device.h"
#include "gpu/gpu_runtime.h"
#include "weft/sdk/kernel.h"
#include "weft/sdk/op_checks.h"

namespace weft::gpu {

using Dims = sdk::Dims;
using sdk::BroadcastDims;
using sdk::DimsString;
using sdk::DtypeName;
using sdk::Fail;
using sdk::Str;

// Throws INTERNAL when the last kernel launch failed (a bad launch
// configuration, a kernel image that does not fit the device), naming
// |what|.
void CheckLaunch(const char* what);

// A tensor lent by the host: dtype, shape, and the device address of its
// first element (|host| instead, for a tensor the host keeps in its own
// memory). |ptr| is null for an empty tensor.
struct Tensor {
  weft_dtype_t dtype = WEFT_DTYPE_INVALID;
  Dims dims;
  int64_t num_elements = 0;
  uint64_t byte_size = 0;
  void* ptr = nullptr;
  const void* host = nullptr;

  Tensor() = default;
  explicit Tensor(const weft_tensor_t& v);
  int rank() const { return static_cast<int>(dims.size()); }
  int64_t dim(int i) const { return dims[static_cast<std::size_t>(i)]; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

// The SDK's creation context, with the device made current.
class InitContext : public sdk::KernelInit {
 public:
  InitContext(weft_device_t device, const weft_kernel_init_t* init) : sdk::KernelInit(device, init) {
    this->device().MakeCurrent();
  }
  Device& device() const { return device_as<Device>(); }
};

// The SDK's compute context, with the device made current, its stream,
// and reads of small values (shapes, scalars) back to the host.
class Context : public sdk::BasicKernelContext<Tensor> {
 public:
  Context(weft_device_t device, weft_kernel_context_t* ctx);
  Device& device() const { return device_as<Device>(); }
  Stream& stream_object() const { return *stream_; }
  rt::Stream stream() const { return stream_->stream; }

  // Copies |t| (t.byte_size bytes) into |dst| once the stream's work so
  // far has run, and waits for it.
  void Read(const Tensor& t, void* dst);
  // The elements of an i32 or i64 tensor.
  std::vector<int64_t> ReadInts(const Tensor& t);
  // A shape input named |what|: 1-D, without negative entries.
  Dims ReadShape(const Tensor& t, const char* what);
  // The value of a scalar of f32 or f64, as a double.
  double ReadFloat(const Tensor& t);

 private:
  Stream* stream_;
};

using KernelRegistry = sdk::BasicKernelRegistry<InitContext, Context>;

// --- Index plans -----------------------------------------------------------------

inline constexpr int kMaxDims = WEFT_MAX_RANK;

// NumPy broadcasting of N operands onto an output: its (collapsed) dims
// and each operand's element strides, 0 where the operand is broadcast.
template <int N>
struct BroadcastPlan {
  int rank = 1;
  int64_t dims[kMaxDims] = {1};
  int64_t strides[N][kMaxDims] = {};
};

// A plan for |inputs| broadcast onto |out|, with adjacent dimensions merged
// where every operand allows it. Each input must broadcast to |out|.
BroadcastPlan<1> PlanBroadcast1(const Dims& out, const Dims& a);
BroadcastPlan<2> PlanBroadcast2(const Dims& out, const Dims& a, const Dims& b);
BroadcastPlan<3> PlanBroadcast3(const Dims& out, const Dims& a, const Dims& b, const Dims& c);

// A reduction of a tensor over the dimensions flagged in |reduce|: the kept
// dimensions index the output (row-major), the reduced ones the elements
// summed into each output; both with the input's element strides.
struct ReducePlan {
  int kept_rank = 1;
  int64_t kept_dims[kMaxDims] = {1};
  int64_t kept_strides[kMaxDims] = {};
  int red_rank = 1;
  int64_t red_dims[kMaxDims] = {1};
  int64_t red_strides[kMaxDims] = {};
  int64_t num_out = 1;
  int64_t num_reduced = 1;
};
ReducePlan PlanReduce(const Dims& in, const std::vector<bool>& reduce);

// The product of dims[begin, end).
int64_t Product(const Dims& dims, int begin, int end);

// --- Registration ----------------------------------------------------------------

// The dtype of the element type |T| (one of the types the kernels use).
template <class T>
constexpr weft_dtype_t DtypeOf() {
  if constexpr (std::is_same_v<T, float>) {
    return WEFT_DTYPE_F32;
  } else if constexpr (std::is_same_v<T, double>) {
    return WEFT_DTYPE_F64;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    return WEFT_DTYPE_I32;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return WEFT_DTYPE_I64;
  } else {
    return WEFT_DTYPE_BOOL;
  }
}

// Registers K<T> for |op|, its attr "T" bound to each of Ts in turn.
template <template <class> class K, class... Ts>
void AddForTypes(KernelRegistry& r, const char* op, uint32_t flags = WEFT_KERNEL_INLINE) {
  (r.Add<K<Ts>>(op, {{"T", DtypeOf<Ts>()}}, flags), ...);
}

// Calls fn(T()) for each of Ts in turn; fn's parameter type names the type
// (a family's kernels, registered for each element type).
template <class... Ts, class F>
void ForEachType(F&& fn) {
  (fn(Ts()), ...);
}

// --- Kernel families -------------------------------------------------------------

// Shared by both plugins (gpu/kernels/*.h, compiled once per plugin from
// its own .cu or .hip file).
void RegisterUnaryKernels(KernelRegistry& r);
void RegisterBinaryKernels(KernelRegistry& r);
void RegisterCastKernels(KernelRegistry& r);
void RegisterArrayKernels(KernelRegistry& r);
void RegisterReductionKernels(KernelRegistry& r);
void RegisterNnKernels(KernelRegistry& r);
void RegisterNormKernels(KernelRegistry& r);
void RegisterPoolKernels(KernelRegistry& r);
void RegisterTrainingKernels(KernelRegistry& r);

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNEL_FRAMEWORK_H_
