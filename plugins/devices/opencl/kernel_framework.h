// The opencl plugin's kernel framework: C++ kernel classes over the SDK's C
// kernel ABI whose work is OpenCL kernels enqueued on the node's stream.
//
//   class ReluKernel {
//    public:
//     explicit ReluKernel(const InitContext& init)
//         : program_(&ProgramFor(init.device(), "elementwise", init.input_dtype(0))) {}
//     void Compute(Context& ctx) {
//       const Tensor x = ctx.input(0);
//       const Tensor y = ctx.allocate_output(0, x.dims);
//       if (y.num_elements == 0) return;
//       Launch(ctx, *program_, "relu").Buf(x).Buf(y).Val<cl_ulong>(x.num_elements).Run(x.num_elements);
//     }
//    private:
//     Program* program_;
//   };
//   registry.Add<ReluKernel>("Relu", {{"T", WEFT_DTYPE_F32}});
//
// Programs are built when a kernel is created (graph preparation), so a
// source that does not compile fails there, naming the node. Everything
// throws weft::sdk::Error; the registry runs every entry point inside the
// SDK's guard. Tensors live in device memory: a kernel that needs a value
// on the host (a shape, a learning rate) reads it with Context::Read*,
// which waits for the stream.
#ifndef WEFT_PLUGINS_DEVICES_OPENCL_KERNEL_FRAMEWORK_H_
#define WEFT_PLUGINS_DEVICES_OPENCL_KERNEL_FRAMEWORK_H_

#include <array>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "opencl_device.h"
#include "weft/sdk/guard.h"
#include "weft/sdk/host.h"
#include "weft/sdk/status.h"
#include "weft/weft_plugin.h"

namespace weft::opencl {

using Dims = std::vector<int64_t>;

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

// A tensor lent by the host: dtype, shape, and where its elements are (a
// cl_mem and a byte offset; |host| for a tensor the host keeps in its own
// memory). |mem| is null for an empty tensor.
struct Tensor {
  weft_dtype_t dtype = WEFT_DTYPE_INVALID;
  Dims dims;
  int64_t num_elements = 0;
  uint64_t byte_size = 0;
  cl_mem mem = nullptr;
  uint64_t offset = 0;
  const void* host = nullptr;

  int rank() const { return static_cast<int>(dims.size()); }
  int64_t dim(int i) const { return dims[static_cast<std::size_t>(i)]; }
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
  Context(Device* device, weft_kernel_context_t* ctx) : device_(device), ctx_(ctx) {}
  Device& device() const { return *device_; }
  cl_command_queue queue() const;
  int num_inputs() const;
  Tensor input(int i) const;
  Tensor allocate_output(int i, const Dims& dims);
  void forward(int input, int output);
  Tensor allocate_temp(weft_dtype_t dtype, const Dims& dims);
  // The variable behind resource input |i|, locked (see weft_kernel.h).
  Tensor lock_variable(int i, bool exclusive);
  std::string variable_name(int i) const;
  const char* node_name() const;

  // Copies |t| into |dst| (t.byte_size bytes) once the stream's work so far
  // has run; for shapes and scalars the host needs.
  void Read(const Tensor& t, void* dst);
  // The elements of an i32 or i64 tensor.
  std::vector<int64_t> ReadInts(const Tensor& t);
  // The value of a scalar of f32 or f64, as a double.
  double ReadFloat(const Tensor& t);
  // A shape input named |what|: 1-D, without negative entries.
  Dims ReadShape(const Tensor& t, const char* what);

 private:
  Device* device_;
  weft_kernel_context_t* ctx_;
};

// One kernel launch: borrows a kernel object from |program|, takes its
// arguments in order and enqueues it on the context's stream.
class Launch {
 public:
  Launch(Context& ctx, Program& program, const char* kernel);
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  // A __global pointer to |t|'s first element. An empty tensor passes NULL.
  Launch& Buf(const Tensor& t);
  // A scalar or vector argument (cl_int, cl_ulong, cl_float, cl_long8...).
  template <class T>
  Launch& Val(const T& value) {
    SetArg(sizeof(T), &value);
    return *this;
  }
  // A __local array of |bytes|.
  Launch& Local(size_t bytes);
  // Enqueues |global| work-items in groups of |local| (|global| is rounded
  // up; kernels check their index). Nothing runs for |global| == 0.
  void Run(uint64_t global, size_t local = 64);
  void Run2(uint64_t global_x, uint64_t global_y, size_t local_x, size_t local_y);
  // |dims| (1 to 3) dimensions; global[i] is rounded up to local[i].
  void RunN(cl_uint dims, const uint64_t* global, const size_t* local);

 private:
  void SetArg(size_t size, const void* value);

  Context& ctx_;
  Program& program_;
  std::string name_;
  cl_kernel kernel_;
  cl_uint next_ = 0;
  std::vector<cl_mem> owned_;  // sub-buffers made for offset arguments
};

// Dtypes as OpenCL C types.
const char* ClTypeName(weft_dtype_t dtype);
// The -D flags a per-dtype program is built with: T (the element type), UT
// (its unsigned twin, for wrapping integer arithmetic) and WEFT_FLOAT or
// WEFT_INT.
std::string TypeDefines(weft_dtype_t dtype);
// The program |name| built for elements of |dtype|. Throws UNIMPLEMENTED
// for f64 on a device without cl_khr_fp64.
Program& ProgramFor(Device& device, const char* name, weft_dtype_t dtype);
void RequireFp64(Device& device, weft_dtype_t dtype);

// NumPy broadcasting of N operands onto |out|: up to 8 collapsed
// dimensions, each operand's element strides (0 where broadcast), packed
// for a kernel (see broadcast_index in the .cl sources).
template <std::size_t N>
struct BroadcastPlan {
  cl_int rank = 1;
  cl_long8 dims{};
  std::array<cl_long8, N> strides{};
};
Dims BroadcastDims(const Dims& a, const Dims& b);
BroadcastPlan<1> PlanBroadcast1(const Dims& out, const Dims& in);
BroadcastPlan<2> PlanBroadcast2(const Dims& out, const Dims& a, const Dims& b);
BroadcastPlan<3> PlanBroadcast3(const Dims& out, const Dims& a, const Dims& b, const Dims& c);

// A reduction of |in| over |reduce| (one flag per dimension), as two packed
// index spaces: the kept dimensions (the output, row-major) and the
// reduced ones, each with the input's element strides.
struct ReducePlan {
  cl_int kept_rank = 1;
  cl_long8 kept_dims{};
  cl_long8 kept_strides{};
  cl_int red_rank = 1;
  cl_long8 red_dims{};
  cl_long8 red_strides{};
  int64_t num_out = 1;
  int64_t num_reduced = 1;
};
ReducePlan PlanReduce(const Dims& in, const std::vector<bool>& reduce);

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

// The kernel families, each in kernels/<family>.cc with its .cl source.
void RegisterElementwiseKernels(KernelRegistry& r);
void RegisterReductionKernels(KernelRegistry& r);
void RegisterMatMulKernels(KernelRegistry& r);
void RegisterNnKernels(KernelRegistry& r);
void RegisterConvKernels(KernelRegistry& r);
void RegisterTrainingKernels(KernelRegistry& r);

}  // namespace weft::opencl

#endif  // WEFT_PLUGINS_DEVICES_OPENCL_KERNEL_FRAMEWORK_H_
