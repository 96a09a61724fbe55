// The kernel framework of the cuda and hip device plugins: C++ kernel
// classes over the SDK's C kernel ABI whose work is enqueued on the node's
// stream.
//
//   template <class T>
//   class ReluKernel {
//    public:
//     explicit ReluKernel(const InitContext&) {}
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
// waits for the stream. Everything throws weft::sdk::Error; the registry
// runs every entry point inside the SDK's guard.
//
// This header is host code, compiled by the C++ compiler and, for the
// files that launch kernels, by nvcc or hipcc; the index plans below are
// plain structs passed to kernels by value.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNEL_FRAMEWORK_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNEL_FRAMEWORK_H_

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gpu/gpu_device.h"
#include "gpu/gpu_runtime.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/host.h"
#include "weft/sdk/status.h"
#include "weft/weft_plugin.h"

namespace weft::gpu {

using Dims = std::vector<int64_t>;

template <class... Args>
std::string Str(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

std::string DimsString(const Dims& dims);
const char* DtypeName(weft_dtype_t dtype);

// Throws an INVALID_ARGUMENT error made of |args|.
template <class... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw sdk::Error(WEFT_INVALID_ARGUMENT, Str(args...));
}

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

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t dim(int i) const { return dims[static_cast<std::size_t>(i)]; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

class InitContext {
 public:
  InitContext(Device* device, const weft_kernel_init_t* init) : device_(device), init_(init) {}
  Device& device() const { return *device_; }
  const char* node_name() const;
  const char* op() const;
  int64_t Int(const char* name) const;
  double Float(const char* name) const;
  bool Bool(const char* name) const;
  weft_dtype_t Type(const char* name) const;
  std::string String(const char* name) const;
  std::vector<int64_t> Ints(const char* name) const;
  weft_dtype_t input_dtype(int i) const;
  weft_dtype_t output_dtype(int i) const;

 private:
  Device* device_;
  const weft_kernel_init_t* init_;
};

class Context {
 public:
  Context(Device* device, weft_kernel_context_t* ctx);
  Device& device() const { return *device_; }
  Stream& stream_object() const { return *stream_; }
  rt::Stream stream() const { return stream_->stream; }
  int num_inputs() const;
  Tensor input(int i) const;
  Tensor allocate_output(int i, const Dims& dims);
  void forward(int input, int output);
  Tensor allocate_temp(weft_dtype_t dtype, const Dims& dims);
  // The variable behind resource input |i|, locked (see weft_kernel.h).
  Tensor lock_variable(int i, bool exclusive);
  std::string variable_name(int i) const;
  const char* node_name() const;

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
  Device* device_;
  Stream* stream_;
  weft_kernel_context_t* ctx_;
};

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
  struct Holder {
    Device* device;
    K kernel;
  };
  template <class K>
  static weft_status_t Create(weft_device_t device, const weft_kernel_init_t* init, void** out) {
    return sdk::Guard([&] {
      Device* d = reinterpret_cast<Device*>(device);
      d->MakeCurrent();
      *out = new Holder<K>{d, K(InitContext(d, init))};
    });
  }
  template <class K>
  static void Destroy(void* state) {
    delete static_cast<Holder<K>*>(state);
  }
  template <class K>
  static weft_status_t Compute(void* state, weft_kernel_context_t* ctx) {
    return sdk::Guard([&] {
      auto* holder = static_cast<Holder<K>*>(state);
      holder->device->MakeCurrent();
      Context context(holder->device, ctx);
      holder->kernel.Compute(context);
    });
  }

  void AddRaw(const char* op, Constraints constraints, uint32_t flags, std::initializer_list<const char*> host_args,
              weft_status_t (*create)(weft_device_t, const weft_kernel_init_t*, void**), void (*destroy)(void*),
              weft_status_t (*compute)(void*, weft_kernel_context_t*));

  std::vector<weft_kernel_def_t> defs_;
  std::deque<std::vector<const char*>> names_;
  std::deque<std::vector<weft_dtype_t>> dtypes_;
};

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

// The NumPy broadcast of |a| and |b|; throws naming both.
Dims BroadcastDims(const Dims& a, const Dims& b);
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
