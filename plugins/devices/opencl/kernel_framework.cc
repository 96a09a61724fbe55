#include "kernel_framework.h"

#include <algorithm>
#include <cstring>

namespace weft::opencl {
namespace {

const weft_kernel_api_t* Api() {
  const weft_kernel_api_t* api = sdk::host()->kernel;
  if (api == nullptr) throw sdk::Error(WEFT_FAILED_PRECONDITION, "the host offers no kernel services");
  return api;
}

Tensor FromView(const weft_tensor_t& v) {
  Tensor t;
  t.dtype = v.dtype;
  t.dims.assign(v.dims, v.dims + v.rank);
  t.num_elements = v.num_elements;
  t.byte_size = v.byte_size;
  t.mem = v.buffer != nullptr ? reinterpret_cast<const Buffer*>(v.buffer)->mem : nullptr;
  t.offset = v.offset;
  t.host = v.data;
  if (t.byte_size == 0) t.mem = nullptr;
  return t;
}

// f64 kernels need cl_khr_fp64; every other kernel runs anywhere.
weft_status_t QueryFp64(weft_device_t device, const weft_kernel_init_t* init, weft_kernel_query_t* out) {
  return sdk::Guard([&] {
    const Device* d = reinterpret_cast<const Device*>(device);
    if (d->has_fp64()) return;
    const weft_kernel_api_t* api = Api();
    bool uses_f64 = false;
    for (int32_t i = 0; i < api->init_num_inputs(init); ++i) uses_f64 |= api->init_input_dtype(init, i) == WEFT_DTYPE_F64;
    for (int32_t i = 0; i < api->init_num_outputs(init); ++i) uses_f64 |= api->init_output_dtype(init, i) == WEFT_DTYPE_F64;
    if (uses_f64) {
      out->unsupported = 1;
      out->reason = "the OpenCL device has no cl_khr_fp64 (double precision)";
    }
  });
}

// Merges adjacent (dim, stride) pairs that walk memory as one dimension,
// and drops dimensions of size 1.
void Collapse(std::vector<std::pair<int64_t, int64_t>>& dims) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [d, s] : dims) {
    if (d == 1) continue;
    if (!out.empty() && out.back().second == s * d) {
      out.back().first *= d;
      out.back().second = s;
    } else {
      out.emplace_back(d, s);
    }
  }
  if (out.empty()) out.emplace_back(1, 0);
  dims = std::move(out);
}

void Pack(const std::vector<std::pair<int64_t, int64_t>>& dims, cl_int* rank, cl_long8* d, cl_long8* s) {
  if (dims.size() > 8) throw sdk::Error(WEFT_INTERNAL, "more than 8 dimensions after collapsing");
  *rank = static_cast<cl_int>(dims.size());
  for (int k = 0; k < 8; ++k) {
    d->s[k] = 1;
    s->s[k] = 0;
  }
  for (std::size_t k = 0; k < dims.size(); ++k) {
    d->s[k] = dims[k].first;
    s->s[k] = dims[k].second;
  }
}

template <std::size_t N>
BroadcastPlan<N> Plan(const Dims& out, const std::array<const Dims*, N>& ins) {
  const std::size_t rank = out.size();
  std::array<std::vector<int64_t>, N> full;
  for (std::size_t k = 0; k < N; ++k) {
    full[k].assign(rank, 0);
    const Dims& in = *ins[k];
    int64_t stride = 1;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const std::size_t d = in.size() - 1 - i;
      const std::size_t o = rank - 1 - i;
      full[k][o] = in[d] == 1 && out[o] != 1 ? 0 : stride;
      stride *= in[d];
    }
  }
  // Collapse dimensions where every operand walks on in step.
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> strides;
  for (std::size_t o = 0; o < rank; ++o) {
    if (out[o] == 1) continue;
    bool merge = !dims.empty();
    for (std::size_t k = 0; k < N && merge; ++k) {
      const int64_t prev = strides[k].back();
      const int64_t cur = full[k][o];
      merge = (prev == 0 && cur == 0) || (cur != 0 && prev == cur * out[o]);
    }
    if (merge) {
      dims.back() *= out[o];
      for (std::size_t k = 0; k < N; ++k) strides[k].back() = full[k][o];
    } else {
      dims.push_back(out[o]);
      for (std::size_t k = 0; k < N; ++k) strides[k].push_back(full[k][o]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (std::size_t k = 0; k < N; ++k) strides[k].push_back(0);
  }
  BroadcastPlan<N> plan;
  plan.rank = static_cast<cl_int>(dims.size());
  for (int j = 0; j < 8; ++j) {
    plan.dims.s[j] = 1;
    for (std::size_t k = 0; k < N; ++k) plan.strides[k].s[j] = 0;
  }
  for (std::size_t j = 0; j < dims.size(); ++j) {
    plan.dims.s[j] = dims[j];
    for (std::size_t k = 0; k < N; ++k) plan.strides[k].s[j] = strides[k][j];
  }
  return plan;
}

}  // namespace

std::string DimsString(const Dims& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(std::to_string(dims[i]));
  }
  return out + "]";
}

// --- InitContext, Context ------------------------------------------------------------

const char* InitContext::node_name() const { return Api()->init_node_name(init_); }
const char* InitContext::op() const { return Api()->init_op(init_); }

int64_t InitContext::Int(const char* name) const {
  int64_t v = 0;
  sdk::ThrowIfError(Api()->attr_int(init_, name, &v));
  return v;
}
double InitContext::Float(const char* name) const {
  double v = 0;
  sdk::ThrowIfError(Api()->attr_float(init_, name, &v));
  return v;
}
bool InitContext::Bool(const char* name) const {
  weft_bool_t v = 0;
  sdk::ThrowIfError(Api()->attr_bool(init_, name, &v));
  return v != 0;
}
weft_dtype_t InitContext::Type(const char* name) const {
  weft_dtype_t v = 0;
  sdk::ThrowIfError(Api()->attr_dtype(init_, name, &v));
  return v;
}
std::string InitContext::String(const char* name) const {
  const char* data = nullptr;
  size_t size = 0;
  sdk::ThrowIfError(Api()->attr_string(init_, name, &data, &size));
  return std::string(data, size);
}
std::vector<int64_t> InitContext::Ints(const char* name) const {
  const int64_t* data = nullptr;
  size_t count = 0;
  sdk::ThrowIfError(Api()->attr_int_list(init_, name, &data, &count));
  return std::vector<int64_t>(data, data + count);
}
weft_dtype_t InitContext::input_dtype(int i) const { return Api()->init_input_dtype(init_, i); }
weft_dtype_t InitContext::output_dtype(int i) const { return Api()->init_output_dtype(init_, i); }

cl_command_queue Context::queue() const { return reinterpret_cast<Stream*>(Api()->stream(ctx_))->queue; }
int Context::num_inputs() const { return Api()->num_inputs(ctx_); }

Tensor Context::input(int i) const {
  weft_tensor_t v{};
  v.struct_size = sizeof v;
  sdk::ThrowIfError(Api()->input(ctx_, i, &v));
  return FromView(v);
}

Tensor Context::allocate_output(int i, const Dims& dims) {
  weft_tensor_t v{};
  v.struct_size = sizeof v;
  sdk::ThrowIfError(Api()->allocate_output(ctx_, i, static_cast<int32_t>(dims.size()), dims.data(), &v));
  return FromView(v);
}

void Context::forward(int input, int output) { sdk::ThrowIfError(Api()->forward_input(ctx_, input, output)); }

Tensor Context::allocate_temp(weft_dtype_t dtype, const Dims& dims) {
  weft_tensor_t v{};
  v.struct_size = sizeof v;
  sdk::ThrowIfError(Api()->allocate_temp(ctx_, dtype, static_cast<int32_t>(dims.size()), dims.data(), &v));
  return FromView(v);
}

Tensor Context::lock_variable(int i, bool exclusive) {
  weft_tensor_t v{};
  v.struct_size = sizeof v;
  sdk::ThrowIfError(Api()->variable_lock(ctx_, i, exclusive ? 1 : 0, &v));
  return FromView(v);
}

std::string Context::variable_name(int i) const { return Api()->variable_name(ctx_, i); }
const char* Context::node_name() const { return Api()->node_name(ctx_); }

void Context::Read(const Tensor& t, void* dst) {
  if (t.byte_size == 0) return;
  if (t.host != nullptr) {
    std::memcpy(dst, t.host, t.byte_size);
    return;
  }
  // Blocking: the in-order stream runs everything enqueued before first.
  device_->Check(clEnqueueReadBuffer(queue(), t.mem, CL_TRUE, t.offset, t.byte_size, dst, 0, nullptr, nullptr),
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
    Fail("expected an i32 or i64 tensor, got ", weft_dtype_name(t.dtype) ? weft_dtype_name(t.dtype) : "?");
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
    throw sdk::Error(ClErrorCode(err), Str("clEnqueueNDRangeKernel(", name_, ") of program ", program_.name(),
                                           " on ", ctx_.device().where(), ": ", ClErrorText(err)));
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

Dims BroadcastDims(const Dims& a, const Dims& b) {
  const std::size_t rank = std::max(a.size(), b.size());
  Dims out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      Fail("shapes ", DimsString(a), " and ", DimsString(b), " cannot be broadcast together");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

BroadcastPlan<1> PlanBroadcast1(const Dims& out, const Dims& in) { return Plan<1>(out, {&in}); }
BroadcastPlan<2> PlanBroadcast2(const Dims& out, const Dims& a, const Dims& b) { return Plan<2>(out, {&a, &b}); }
BroadcastPlan<3> PlanBroadcast3(const Dims& out, const Dims& a, const Dims& b, const Dims& c) {
  return Plan<3>(out, {&a, &b, &c});
}

ReducePlan PlanReduce(const Dims& in, const std::vector<bool>& reduce) {
  std::vector<std::pair<int64_t, int64_t>> kept, reduced;
  int64_t stride = 1;
  std::vector<int64_t> strides(in.size());
  for (std::size_t i = in.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= in[i];
  }
  ReducePlan plan;
  for (std::size_t i = 0; i < in.size(); ++i) {
    (reduce[i] ? reduced : kept).emplace_back(in[i], strides[i]);
    (reduce[i] ? plan.num_reduced : plan.num_out) *= in[i];
  }
  Collapse(kept);
  Collapse(reduced);
  Pack(kept, &plan.kept_rank, &plan.kept_dims, &plan.kept_strides);
  Pack(reduced, &plan.red_rank, &plan.red_dims, &plan.red_strides);
  return plan;
}

// --- Registry --------------------------------------------------------------------

void KernelRegistry::AddRaw(const char* op, Constraints constraints, uint32_t flags,
                            std::initializer_list<const char*> host_args,
                            weft_status_t (*create)(weft_device_t, const weft_kernel_init_t*, void**),
                            void (*destroy)(void*), weft_status_t (*compute)(void*, weft_kernel_context_t*)) {
  auto& names = names_.emplace_back();
  auto& dtypes = dtypes_.emplace_back();
  for (const auto& [attr, dtype] : constraints) {
    names.push_back(attr);
    dtypes.push_back(dtype);
  }
  auto& hosts = names_.emplace_back(host_args);
  weft_kernel_def_t def{};
  def.struct_size = sizeof def;
  def.op = op;
  def.constraint_attrs = names.empty() ? nullptr : names.data();
  def.constraint_dtypes = dtypes.empty() ? nullptr : dtypes.data();
  def.num_constraints = names.size();
  def.host_memory_args = hosts.empty() ? nullptr : hosts.data();
  def.num_host_memory_args = hosts.size();
  def.flags = flags;
  def.create = create;
  def.destroy = destroy;
  def.compute = compute;
  def.query = QueryFp64;
  defs_.push_back(def);
}

}  // namespace weft::opencl
