#include "kernel_framework.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

namespace weft::cpu {
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
  t.data = v.data;
  return t;
}

#if defined(WEFT_PARALLEL_FOR_ON_HOST_POOL)
// The tsan build's ParallelFor: the host's pool runs the blocks; a loop
// inside a block runs inline, and the first exception is kept for the
// caller (none may cross the C ABI).
thread_local bool t_in_parallel = false;

struct HostLoop {
  const std::function<void(int64_t, int64_t)>* fn;
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::exception_ptr error;
};

void RunHostBlock(void* user, int64_t begin, int64_t end) {
  auto* loop = static_cast<HostLoop*>(user);
  if (loop->failed.load(std::memory_order_relaxed)) return;
  const bool outer = t_in_parallel;
  t_in_parallel = true;
  try {
    (*loop->fn)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(loop->mutex);
    if (loop->error == nullptr) loop->error = std::current_exception();
    loop->failed.store(true, std::memory_order_relaxed);
  }
  t_in_parallel = outer;
}

bool InParallel() { return t_in_parallel; }
#else
bool InParallel() { return omp_in_parallel() != 0; }
#endif

}  // namespace

std::string DimsString(const Dims& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.append(std::to_string(dims[i]));
  }
  return out + "]";
}

const char* InitContext::node_name() const { return Api()->init_node_name(init_); }

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

void ParallelFor(int64_t n, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t total = n * std::max<int64_t>(cost_per_unit, 1);
  // Small loops (a scalar's) are the common case in loops: decided here,
  // without asking the host for its thread count.
  if (n <= 1 || total < kInlineCost) {
    fn(0, n);
    return;
  }
  const int64_t shards = std::min<int64_t>({sdk::host()->intra_op_threads(), n, total / kMinShardCost});
  if (shards <= 1 || InParallel()) {
    fn(0, n);
    return;
  }
#if defined(WEFT_PARALLEL_FOR_ON_HOST_POOL)
  HostLoop loop;
  loop.fn = &fn;
  sdk::host()->parallel_for(n, std::max<int64_t>(cost_per_unit, 1), RunHostBlock, &loop);
  if (loop.error != nullptr) std::rethrow_exception(loop.error);
  return;
#endif
  // The loops run on the calling thread's OpenMP team, the one oneDNN uses,
  // not on the host's intra-op pool: OpenMP workers spin for a while after
  // a parallel region ends, so with two sets of threads a oneDNN kernel
  // followed by a loop would put three busy threads on two cores. A few
  // blocks per shard, claimed in turn, let a thread that the machine's
  // other load slows take fewer; which thread runs a block never changes
  // what the block computes, so results do not depend on the schedule.
  const int64_t blocks = std::min(n, shards * 4);
  const int64_t block = (n + blocks - 1) / blocks;
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(static_cast<int>(shards))
  {
    while (true) {
      const int64_t begin = next.fetch_add(block, std::memory_order_relaxed);
      if (begin >= n) break;
      try {
        fn(begin, std::min(n, begin + block));
      } catch (...) {
        // An exception may not leave an OpenMP region: the first one is
        // rethrown on the calling thread, and the other blocks are skipped.
        std::lock_guard<std::mutex> lock(error_mutex);
        if (error == nullptr) error = std::current_exception();
        next.store(n, std::memory_order_relaxed);
      }
    }
  }
  if (error != nullptr) std::rethrow_exception(error);
}

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

}  // namespace weft::cpu
