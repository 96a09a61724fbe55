#include "gpu/kernel_framework.h"

#include <algorithm>
#include <cstring>

namespace weft::gpu {
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
  if (v.buffer != nullptr) {
    t.ptr = static_cast<char*>(reinterpret_cast<Buffer*>(v.buffer)->ptr) + v.offset;
  } else {
    t.host = v.data;
  }
  return t;
}

weft_tensor_t EmptyView() {
  weft_tensor_t v{};
  v.struct_size = sizeof v;
  return v;
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

const char* DtypeName(weft_dtype_t dtype) {
  const char* name = weft_dtype_name(dtype);
  return name != nullptr ? name : "?";
}

void CheckLaunch(const char* what) {
  const rt::Error error = rt::GetLastError();
  if (error != rt::kSuccess) ThrowRuntimeError(error, Str("launching the ", what, " kernel"));
}

int64_t Product(const Dims& dims, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= dims[static_cast<std::size_t>(i)];
  return p;
}

// --- InitContext -------------------------------------------------------------------

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

// --- Context -----------------------------------------------------------------------

Context::Context(Device* device, weft_kernel_context_t* ctx)
    : device_(device), stream_(reinterpret_cast<Stream*>(Api()->stream(ctx))), ctx_(ctx) {
  if (stream_ == nullptr) throw sdk::Error(WEFT_INTERNAL, "the host gave the kernel no stream");
}

int Context::num_inputs() const { return Api()->num_inputs(ctx_); }

Tensor Context::input(int i) const {
  weft_tensor_t v = EmptyView();
  sdk::ThrowIfError(Api()->input(ctx_, i, &v));
  return FromView(v);
}

Tensor Context::allocate_output(int i, const Dims& dims) {
  weft_tensor_t v = EmptyView();
  sdk::ThrowIfError(Api()->allocate_output(ctx_, i, static_cast<int32_t>(dims.size()), dims.data(), &v));
  return FromView(v);
}

void Context::forward(int input, int output) { sdk::ThrowIfError(Api()->forward_input(ctx_, input, output)); }

Tensor Context::allocate_temp(weft_dtype_t dtype, const Dims& dims) {
  weft_tensor_t v = EmptyView();
  sdk::ThrowIfError(Api()->allocate_temp(ctx_, dtype, static_cast<int32_t>(dims.size()), dims.data(), &v));
  return FromView(v);
}

Tensor Context::lock_variable(int i, bool exclusive) {
  weft_tensor_t v = EmptyView();
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
  Check(rt::CopyDeviceToHost(dst, t.ptr, t.byte_size, stream()), "reading a value to the host");
  Check(rt::StreamSynchronize(stream()), "waiting for a value read to the host");
}

std::vector<int64_t> Context::ReadInts(const Tensor& t) {
  const auto n = static_cast<std::size_t>(t.num_elements);
  std::vector<int64_t> out(n);
  if (t.dtype == WEFT_DTYPE_I64) {
    Read(t, out.data());
  } else if (t.dtype == WEFT_DTYPE_I32) {
    std::vector<int32_t> narrow(n);
    Read(t, narrow.data());
    std::copy(narrow.begin(), narrow.end(), out.begin());
  } else {
    Fail("expected an i32 or i64 tensor, got ", DtypeName(t.dtype));
  }
  return out;
}

Dims Context::ReadShape(const Tensor& t, const char* what) {
  if (t.rank() != 1) Fail(what, " must be 1-D, got shape ", DimsString(t.dims));
  if (t.num_elements > kMaxDims) Fail(what, " has ", t.num_elements, " entries; the largest rank is ", kMaxDims);
  Dims dims = ReadInts(t);
  for (int64_t d : dims) {
    if (d < 0) Fail(what, " ", DimsString(dims), " has a negative dimension");
  }
  return dims;
}

double Context::ReadFloat(const Tensor& t) {
  if (t.num_elements != 1) Fail("expected a scalar, got shape ", DimsString(t.dims));
  if (t.dtype == WEFT_DTYPE_F32) {
    float v = 0;
    Read(t, &v);
    return v;
  }
  if (t.dtype == WEFT_DTYPE_F64) {
    double v = 0;
    Read(t, &v);
    return v;
  }
  Fail("expected an f32 or f64 scalar, got ", DtypeName(t.dtype));
}

// --- KernelRegistry ----------------------------------------------------------------

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
  defs_.push_back(def);
}

// --- Index plans -------------------------------------------------------------------

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

namespace {

// Element strides of |in| aligned to the last |rank| dims of an output,
// 0 where |in| has size 1 (or is missing) and the output does not.
std::vector<int64_t> AlignedStrides(const Dims& out, const Dims& in) {
  const std::size_t rank = out.size();
  if (in.size() > rank) Fail("shape ", DimsString(in), " has more dimensions than ", DimsString(out));
  std::vector<int64_t> strides(rank, 0);
  int64_t stride = 1;
  for (std::size_t k = 0; k < in.size(); ++k) {
    const std::size_t i = rank - 1 - k;
    const int64_t d = in[in.size() - 1 - k];
    if (d != out[i] && d != 1) Fail("shape ", DimsString(in), " does not broadcast to ", DimsString(out));
    strides[i] = d == 1 ? 0 : stride;
    stride *= d;
  }
  return strides;
}

template <int N>
BroadcastPlan<N> PlanBroadcast(const Dims& out, const std::vector<const Dims*>& inputs) {
  std::vector<std::vector<int64_t>> strides;
  for (const Dims* in : inputs) strides.push_back(AlignedStrides(out, *in));
  // Merge dimension i into i+1 when every operand walks both as one run;
  // dimensions of size 1 are dropped.
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> merged(N);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 1) continue;
    bool mergeable = !dims.empty();
    for (int k = 0; k < N && mergeable; ++k) {
      mergeable = merged[static_cast<std::size_t>(k)].back() == strides[static_cast<std::size_t>(k)][i] * out[i];
    }
    if (mergeable) {
      dims.back() *= out[i];
      for (int k = 0; k < N; ++k) {
        merged[static_cast<std::size_t>(k)].back() = strides[static_cast<std::size_t>(k)][i];
      }
    } else {
      dims.push_back(out[i]);
      for (int k = 0; k < N; ++k) merged[static_cast<std::size_t>(k)].push_back(strides[static_cast<std::size_t>(k)][i]);
    }
  }
  BroadcastPlan<N> plan;
  if (dims.empty()) return plan;  // a single element
  if (dims.size() > static_cast<std::size_t>(kMaxDims)) Fail("rank ", dims.size(), " is above ", kMaxDims);
  plan.rank = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    plan.dims[i] = dims[i];
    for (int k = 0; k < N; ++k) plan.strides[k][i] = merged[static_cast<std::size_t>(k)][i];
  }
  return plan;
}

}  // namespace

BroadcastPlan<1> PlanBroadcast1(const Dims& out, const Dims& a) { return PlanBroadcast<1>(out, {&a}); }
BroadcastPlan<2> PlanBroadcast2(const Dims& out, const Dims& a, const Dims& b) {
  return PlanBroadcast<2>(out, {&a, &b});
}
BroadcastPlan<3> PlanBroadcast3(const Dims& out, const Dims& a, const Dims& b, const Dims& c) {
  return PlanBroadcast<3>(out, {&a, &b, &c});
}

ReducePlan PlanReduce(const Dims& in, const std::vector<bool>& reduce) {
  ReducePlan plan;
  std::vector<int64_t> strides(in.size(), 1);
  for (std::size_t i = in.size(); i-- > 1;) strides[i - 1] = strides[i] * in[i];
  int kept = 0, red = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (reduce[i]) {
      plan.red_dims[red] = in[i];
      plan.red_strides[red] = strides[i];
      plan.num_reduced *= in[i];
      ++red;
    } else {
      plan.kept_dims[kept] = in[i];
      plan.kept_strides[kept] = strides[i];
      plan.num_out *= in[i];
      ++kept;
    }
  }
  // A side with no dimensions is one element: rank 1 of size 1, as the
  // plan's defaults already say.
  plan.kept_rank = std::max(kept, 1);
  plan.red_rank = std::max(red, 1);
  return plan;
}

}  // namespace weft::gpu
