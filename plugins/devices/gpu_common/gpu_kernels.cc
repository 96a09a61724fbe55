#include "gpu_kernels.h"

#include "weft/sdk/host.h"

namespace weft::gpu {
namespace {

const weft_kernel_api_t* Api() { return sdk::host()->kernel; }

Tensor FromView(const weft_tensor_t& v) {
  Tensor t;
  t.dtype = v.dtype;
  t.dims.assign(v.dims, v.dims + v.rank);
  t.num_elements = v.num_elements;
  if (v.byte_size > 0) {
    if (v.buffer == nullptr) {
      throw sdk::Error(WEFT_INTERNAL, "a tensor of " + std::to_string(v.byte_size) +
                                          " bytes has no device buffer");
    }
    t.ptr = static_cast<char*>(reinterpret_cast<Buffer*>(v.buffer)->ptr) + v.offset;
  }
  return t;
}

weft_tensor_t View() {
  weft_tensor_t v{};
  v.struct_size = sizeof v;
  return v;
}

}  // namespace

std::string DimsString(const Dims& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

const char* InitContext::node_name() const { return Api()->init_node_name(init_); }

bool InitContext::Bool(const char* name) const {
  weft_bool_t value = 0;
  sdk::ThrowIfError(Api()->attr_bool(init_, name, &value));
  return value != 0;
}

std::string InitContext::String(const char* name) const {
  const char* data = nullptr;
  size_t size = 0;
  sdk::ThrowIfError(Api()->attr_string(init_, name, &data, &size));
  return std::string(data, size);
}

std::vector<int64_t> InitContext::Ints(const char* name) const {
  const int64_t* values = nullptr;
  size_t count = 0;
  sdk::ThrowIfError(Api()->attr_int_list(init_, name, &values, &count));
  return std::vector<int64_t>(values, values + count);
}

weft_dtype_t InitContext::input_dtype(int i) const { return Api()->init_input_dtype(init_, i); }

bool KnownShape(const weft_kernel_init_t* init, int index, Dims* dims) {
  int32_t rank = -1;
  const int64_t* values = nullptr;
  weft_status_t status = Api()->init_input_shape(init, index, &rank, &values);
  if (status != nullptr) {
    sdk::host()->status_free(status);
    return false;
  }
  if (rank < 0) return false;
  dims->assign(values, values + rank);
  return true;
}

gpuStream_t Context::stream() const {
  weft_stream_t s = Api()->stream(ctx_);
  if (s == nullptr) throw sdk::Error(WEFT_INTERNAL, Str(node_name(), ": the host gave no stream"));
  return reinterpret_cast<Stream*>(s)->stream;
}

Tensor Context::input(int i) const {
  weft_tensor_t v = View();
  sdk::ThrowIfError(Api()->input(ctx_, i, &v));
  return FromView(v);
}

Tensor Context::allocate_output(int i, const Dims& dims) {
  weft_tensor_t v = View();
  sdk::ThrowIfError(
      Api()->allocate_output(ctx_, i, static_cast<int32_t>(dims.size()), dims.data(), &v));
  return FromView(v);
}

Tensor Context::allocate_temp(weft_dtype_t dtype, const Dims& dims) {
  weft_tensor_t v = View();
  sdk::ThrowIfError(
      Api()->allocate_temp(ctx_, dtype, static_cast<int32_t>(dims.size()), dims.data(), &v));
  return FromView(v);
}

const char* Context::node_name() const { return Api()->node_name(ctx_); }

void Context::Check(gpuError_t err, const char* what) const {
  if (err == gpuSuccess) return;
  (void)gpuGetLastError();
  throw sdk::Error(WEFT_INTERNAL, Str(what, " in ", node_name(), " on ", device_->where(), ": ",
                                      ErrorText(err)));
}

void KernelRegistry::AddRaw(const char* op, Constraints constraints, uint32_t flags,
                            weft_status_t (*create)(weft_device_t, const weft_kernel_init_t*, void**),
                            void (*destroy)(void*),
                            weft_status_t (*compute)(void*, weft_kernel_context_t*),
                            QueryFn query) {
  auto& names = names_.emplace_back();
  auto& dtypes = dtypes_.emplace_back();
  for (const auto& [attr, dtype] : constraints) {
    names.push_back(attr);
    dtypes.push_back(dtype);
  }
  weft_kernel_def_t def{};
  def.struct_size = sizeof def;
  def.op = op;
  def.constraint_attrs = names.empty() ? nullptr : names.data();
  def.constraint_dtypes = dtypes.empty() ? nullptr : dtypes.data();
  def.num_constraints = names.size();
  def.flags = flags;
  def.create = create;
  def.destroy = destroy;
  def.compute = compute;
  def.query = query;
  defs_.push_back(def);
}

}  // namespace weft::gpu
