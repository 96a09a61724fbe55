// The opencl plugin's kernels: C++ classes over the SDK's kernel layer
// (weft/sdk/kernel.h) whose work is OpenCL kernels enqueued on the node's
// stream.
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
// throws weft::sdk::Error; the SDK's registry runs every entry point inside
// its guard. Tensors live in device memory: a kernel that needs a value
// on the host (a shape, a learning rate) reads it with Context::Read*,
// which waits for the stream.
#ifndef WEFT_PLUGINS_DEVICES_OPENCL_KERNEL_FRAMEWORK_H_
#define WEFT_PLUGINS_DEVICES_OPENCL_KERNEL_FRAMEWORK_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "opencl_device.h"
#include "weft/sdk/kernel.h"
#include "weft/sdk/op_checks.h"

namespace weft::opencl {

using Dims = sdk::Dims;
using sdk::BroadcastDims;
using sdk::DimsString;
using sdk::Fail;
using sdk::Str;

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

  Tensor() = default;
  explicit Tensor(const weft_tensor_t& v);
  int rank() const { return static_cast<int>(dims.size()); }
  int64_t dim(int i) const { return dims[static_cast<std::size_t>(i)]; }
};

class InitContext : public sdk::KernelInit {
 public:
  using sdk::KernelInit::KernelInit;
  Device& device() const { return device_as<Device>(); }
};

// The SDK's compute context, with the stream's command queue and reads of
// small values (shapes, scalars) back to the host.
class Context : public sdk::BasicKernelContext<Tensor> {
 public:
  using sdk::BasicKernelContext<Tensor>::BasicKernelContext;
  Device& device() const { return device_as<Device>(); }
  cl_command_queue queue() const { return stream_as<Stream>().queue; }

  // Copies |t| into |dst| (t.byte_size bytes) once the stream's work so far
  // has run; for shapes and scalars the host needs.
  void Read(const Tensor& t, void* dst);
  // The elements of an i32 or i64 tensor.
  std::vector<int64_t> ReadInts(const Tensor& t);
  // The value of a scalar of f32 or f64, as a double.
  double ReadFloat(const Tensor& t);
  // A shape input named |what|: 1-D, without negative entries.
  Dims ReadShape(const Tensor& t, const char* what);
};

// Kernels that use f64 need cl_khr_fp64: the registry's query for every
// kernel, so the placer puts such nodes elsewhere on a device without it.
weft_status_t QueryFp64(weft_device_t device, const weft_kernel_init_t* init, weft_kernel_query_t* out);

using KernelRegistry = sdk::BasicKernelRegistry<InitContext, Context>;

// NumPy broadcasting of N operands onto |out|: up to 8 collapsed
// dimensions, each operand's element strides (0 where broadcast), packed
// for a kernel (see broadcast_index in the .cl sources).
template <std::size_t N>
struct BroadcastPlan {
  cl_int rank = 1;
  cl_long8 dims{};
  std::array<cl_long8, N> strides{};
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
  // |plan|'s rank, dims and each operand's strides, in that order.
  template <std::size_t N>
  Launch& Plan(const BroadcastPlan<N>& plan) {
    Val(plan.rank).Val(plan.dims);
    for (const cl_long8& strides : plan.strides) Val(strides);
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

// The kernel families, each in kernels/<family>.cc with its .cl source.
void RegisterElementwiseKernels(KernelRegistry& r);
void RegisterReductionKernels(KernelRegistry& r);
void RegisterMatMulKernels(KernelRegistry& r);
void RegisterNnKernels(KernelRegistry& r);
void RegisterConvKernels(KernelRegistry& r);
void RegisterTrainingKernels(KernelRegistry& r);

}  // namespace weft::opencl

#endif  // WEFT_PLUGINS_DEVICES_OPENCL_KERNEL_FRAMEWORK_H_
