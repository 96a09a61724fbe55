#include "kernel_framework.h"

#include <algorithm>
#include <cstring>

namespace weft::opencl {
namespace {

// Up to 8 (dim, stride) pairs as a kernel's cl_long8 arguments; unused
// entries are dimension 1, stride 0.
void Pack(const Dims& dims, const Dims& strides, cl_int* rank, cl_long8* d, cl_long8* s) {
  if (dims.size() > 8) throw sdk::Error(WEFT_INTERNAL, "more than 8 dimensions after collapsing");
  *rank = static_cast<cl_int>(dims.size());
  for (int k = 0; k < 8; ++k) {
    d->s[k] = 1;
    s->s[k] = 0;
  }
  for (std::size_t k = 0; k < dims.size(); ++k) {
    d->s[k] = dims[k];
    s->s[k] = strides[k];
  }
}

template <std::size_t N>
BroadcastPlan<N> Plan(const Dims& out, const std::vector<const Dims*>& operands) {
  const sdk::BroadcastLayout layout = sdk::PlanBroadcast(out, operands);
  BroadcastPlan<N> plan;
  for (std::size_t k = 0; k < N; ++k) Pack(layout.dims, layout.strides[k], &plan.rank, &plan.dims, &plan.strides[k]);
  return plan;
}

}  // namespace

Tensor::Tensor(const weft_tensor_t& v)
    : dtype(v.dtype),
      dims(v.dims, v.dims + v.rank),
      num_elements(v.num_elements),
      byte_size(v.byte_size),
      mem(v.buffer != nullptr && v.byte_size != 0 ? reinterpret_cast<const Buffer*>(v.buffer)->mem : nullptr),
      offset(v.offset),
      host(v.data) {}

weft_status_t QueryFp64(weft_device_t device, const weft_kernel_init_t* init, weft_kernel_query_t* out) {
  return sdk::Guard([&] {
    const Device* d = reinterpret_cast<const Device*>(device);
    if (d->has_fp64()) return;
    const sdk::KernelInit node(device, init);
    bool uses_f64 = false;
    for (int i = 0; i < node.num_inputs(); ++i) uses_f64 |= node.input_dtype(i) == WEFT_DTYPE_F64;
    for (int i = 0; i < node.num_outputs(); ++i) uses_f64 |= node.output_dtype(i) == WEFT_DTYPE_F64;
    if (uses_f64) {
      out->unsupported = 1;
      out->reason = "the OpenCL device has no cl_khr_fp64 (double precision)";
    }
  });
}

// --- Context ----------------------------------------------------------------------

void Context::Read(const Tensor& t, void* dst) {
  if (t.byte_size == 0) return;
  if (t.host != nullptr) {
    std::memcpy(dst, t.host, t.byte_size);
    return;
  }
  // Blocking: the in-order stream runs everything enqueued before first.
  device().Check(clEnqueueReadBuffer(queue(), t.mem, CL_TRUE, t.offset, t.byte_size, dst, 0, nullptr, nullptr),
                 "clEnqueueReadBuffer");
}

std::vector<int64_t> Context::ReadInts(const Tensor& t) {
  std::vector<int64_t> out(static_cast<std::size_t>(t.num_elements));
  if (t.dtype == WEFT_DTYPE_I64) {
    Read(t, out.data());
  } else if (t.dtype == WEFT_DTYPE_I32) {
    std::vector<int32_t> narrow(out.size());
    Read(t, narrow.data());
    std::copy(narrow.begin(), narrow.end(), out.begin());
  } else {
    Fail("expected an i32 or i64 tensor, got ", sdk::DtypeName(t.dtype));
  }
  return out;
}

double Context::ReadFloat(const Tensor& t) {
  if (t.num_elements != 1) Fail("expected a scalar, got shape ", DimsString(t.dims));
  if (t.dtype == WEFT_DTYPE_F64) {
    double v = 0;
    Read(t, &v);
    return v;
  }
  float v = 0;
  Read(t, &v);
  return v;
}

Dims Context::ReadShape(const Tensor& t, const char* what) {
  if (t.rank() != 1) Fail(what, " must be 1-D, got shape ", DimsString(t.dims));
  Dims dims = ReadInts(t);
  for (int64_t d : dims) {
    if (d < 0) Fail(what, " ", DimsString(dims), " has a negative dimension");
  }
  return dims;
}

// --- Launch ----------------------------------------------------------------------

Launch::Launch(Context& ctx, Program& program, const char* kernel)
    : ctx_(ctx), program_(program), name_(kernel), kernel_(program.Take(name_)) {}

Launch::~Launch() {
  program_.Give(name_, kernel_);
  // Enqueued commands keep what they use alive.
  for (cl_mem m : owned_) clReleaseMemObject(m);
}

void Launch::SetArg(size_t size, const void* value) {
  const cl_int err = clSetKernelArg(kernel_, next_, size, value);
  if (err != CL_SUCCESS) {
    throw sdk::Error(WEFT_INTERNAL, Str("clSetKernelArg(", name_, ", argument ", next_, ") of program ",
                                        program_.name(), " on ", ctx_.device().where(), ": ", ClErrorText(err)));
  }
  ++next_;
}

Launch& Launch::Buf(const Tensor& t) {
  cl_mem mem = t.mem;
  Device& device = ctx_.device();
  cl_int err = CL_SUCCESS;
  if (t.byte_size == 0) {
    mem = nullptr;
  } else if (mem == nullptr) {
    // A tensor in host memory: the kernel reads a copy.
    mem = clCreateBuffer(device.context(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, t.byte_size,
                         const_cast<void*>(t.host), &err);
    device.Check(err, "clCreateBuffer");
    owned_.push_back(mem);
  } else if (t.offset != 0) {
    if (t.offset % device.base_align_bytes() == 0) {
      cl_buffer_region region{t.offset, t.byte_size};
      mem = clCreateSubBuffer(t.mem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &region, &err);
      device.Check(err, "clCreateSubBuffer");
      owned_.push_back(mem);
    } else {
      // Sub-buffers must start on the device's alignment: read a copy.
      mem = clCreateBuffer(device.context(), CL_MEM_READ_WRITE, t.byte_size, nullptr, &err);
      device.Check(err, "clCreateBuffer");
      owned_.push_back(mem);
      device.Check(clEnqueueCopyBuffer(ctx_.queue(), t.mem, mem, t.offset, 0, t.byte_size, 0, nullptr, nullptr),
                   "clEnqueueCopyBuffer");
    }
  }
  SetArg(sizeof(cl_mem), &mem);
  return *this;
}

Launch& Launch::Local(size_t bytes) {
  SetArg(bytes, nullptr);
  return *this;
}

void Launch::Run(uint64_t global, size_t local) { RunN(1, &global, &local); }

void Launch::Run2(uint64_t global_x, uint64_t global_y, size_t local_x, size_t local_y) {
  const uint64_t global[2] = {global_x, global_y};
  const size_t local[2] = {local_x, local_y};
  RunN(2, global, local);
}

void Launch::RunN(cl_uint dims, const uint64_t* global, const size_t* local) {
  size_t g[3] = {1, 1, 1};
  for (cl_uint i = 0; i < dims; ++i) {
    if (global[i] == 0) return;
    g[i] = static_cast<size_t>((global[i] + local[i] - 1) / local[i] * local[i]);
  }
  const cl_int err = clEnqueueNDRangeKernel(ctx_.queue(), kernel_, dims, nullptr, g, local, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) {
    throw sdk::Error(ClErrorCode(err), Str("clEnqueueNDRangeKernel(", name_, ") of program ", program_.name(), " on ",
                                           ctx_.device().where(), ": ", ClErrorText(err)));
  }
}

// --- Types -----------------------------------------------------------------------

const char* ClTypeName(weft_dtype_t dtype) {
  switch (dtype) {
    case WEFT_DTYPE_F32: return "float";
    case WEFT_DTYPE_F64: return "double";
    case WEFT_DTYPE_I32: return "int";
    case WEFT_DTYPE_I64: return "long";
    case WEFT_DTYPE_BOOL: return "uchar";
    default:
      throw sdk::Error(WEFT_UNIMPLEMENTED, Str("the opencl plugin has no kernels for dtype ",
                                               weft_dtype_name(dtype) ? weft_dtype_name(dtype) : "?"));
  }
}

std::string TypeDefines(weft_dtype_t dtype) {
  switch (dtype) {
    case WEFT_DTYPE_F32: return "-DT=float -DUT=uint -DWEFT_FLOAT=1";
    case WEFT_DTYPE_F64: return "-DT=double -DUT=ulong -DWEFT_FLOAT=1 -DWEFT_F64=1";
    case WEFT_DTYPE_I32: return "-DT=int -DUT=uint -DAS_T=as_int -DWEFT_INT=1";
    case WEFT_DTYPE_I64: return "-DT=long -DUT=ulong -DAS_T=as_long -DWEFT_INT=1";
    case WEFT_DTYPE_BOOL: return "-DT=uchar -DUT=uchar -DWEFT_BOOL=1";
    default: return std::string("-DT=") + ClTypeName(dtype);
  }
}

void RequireFp64(Device& device, weft_dtype_t dtype) {
  if (dtype == WEFT_DTYPE_F64 && !device.has_fp64()) {
    throw sdk::Error(WEFT_UNIMPLEMENTED, "f64 kernels need cl_khr_fp64, which " + device.where() + " does not have");
  }
}

Program& ProgramFor(Device& device, const char* name, weft_dtype_t dtype) {
  RequireFp64(device, dtype);
  return device.GetProgram(name, TypeDefines(dtype));
}

// --- Plans -----------------------------------------------------------------------

BroadcastPlan<1> PlanBroadcast1(const Dims& out, const Dims& in) { return Plan<1>(out, {&in}); }
BroadcastPlan<2> PlanBroadcast2(const Dims& out, const Dims& a, const Dims& b) { return Plan<2>(out, {&a, &b}); }
BroadcastPlan<3> PlanBroadcast3(const Dims& out, const Dims& a, const Dims& b, const Dims& c) {
  return Plan<3>(out, {&a, &b, &c});
}

ReducePlan PlanReduce(const Dims& in, const std::vector<bool>& reduce) {
  const sdk::ReduceLayout layout = sdk::PlanReduce(in, reduce);
  ReducePlan plan;
  Pack(layout.kept_dims, layout.kept_strides, &plan.kept_rank, &plan.kept_dims, &plan.kept_strides);
  Pack(layout.reduced_dims, layout.reduced_strides, &plan.red_rank, &plan.red_dims, &plan.red_strides);
  plan.num_out = layout.num_out;
  plan.num_reduced = layout.num_reduced;
  return plan;
}

}  // namespace weft::opencl
