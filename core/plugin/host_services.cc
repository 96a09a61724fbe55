#include "core/plugin/host_services.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>

#include "core/base/logging.h"
#include "core/base/thread_pool.h"
#include "core/base/version.h"

// The definition behind the ABI's opaque status handle.
struct weft_status_s {
  weft_code_t code;
  std::string message;
};

namespace weft::plugin {
namespace {

// --- Statuses ---------------------------------------------------------------

weft_status_t StatusNew(weft_code_t code, const char* message) {
  if (code == WEFT_OK) return nullptr;
  try {
    return new weft_status_s{code, message != nullptr ? message : ""};
  } catch (...) {
    // Out of memory while reporting an error: keep the code at least. A
    // static fallback would be shared, so allocate without throwing.
    auto* status = new (std::nothrow) weft_status_s{code, std::string()};
    return status;
  }
}

weft_code_t StatusCode(weft_status_t status) { return status == nullptr ? WEFT_OK : status->code; }

const char* StatusMessage(weft_status_t status) { return status == nullptr ? "" : status->message.c_str(); }

void StatusFree(weft_status_t status) { delete status; }

// --- Logging ----------------------------------------------------------------

LogLevel ToLevel(weft_log_level_t level) {
  switch (level) {
    case WEFT_LOG_TRACE: return LogLevel::kTrace;
    case WEFT_LOG_DEBUG: return LogLevel::kDebug;
    case WEFT_LOG_INFO: return LogLevel::kInfo;
    case WEFT_LOG_WARNING: return LogLevel::kWarning;
    default: return LogLevel::kError;
  }
}

void HostLog(weft_log_level_t level, const char* plugin, const char* file, int32_t line, const char* message) {
  Log(LogRecord{ToLevel(level), plugin != nullptr ? plugin : "plugin", file != nullptr ? file : "", line,
                message != nullptr ? message : ""});
}

weft_bool_t HostLogEnabled(weft_log_level_t level) { return LogEnabled(ToLevel(level)) ? 1 : 0; }

// --- Memory -----------------------------------------------------------------

void* HostAlloc(uint64_t size, uint64_t alignment) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return nullptr;
  void* ptr = nullptr;
  if (posix_memalign(&ptr, alignment, size == 0 ? 1 : size) != 0) return nullptr;
  return ptr;
}

void HostFree(void* ptr) { std::free(ptr); }

// --- Threads ----------------------------------------------------------------

}  // namespace

class IntraOpPool {
 public:
  explicit IntraOpPool(int threads) : threads_(threads), pool_(threads - 1, "intra_op") {}
  int threads() const { return threads_; }
  ThreadPool& pool() const { return pool_; }

 private:
  int threads_;
  mutable ThreadPool pool_;
};

int Threads(const IntraOpPool& pool) { return pool.threads(); }

namespace {

struct PoolCache {
  std::mutex mutex;
  std::map<int, std::weak_ptr<const IntraOpPool>> pools;
};

PoolCache& Cache() {
  static auto* cache = new PoolCache();  // leaked: plugins may call in during exit
  return *cache;
}

// The pool used outside any session's scope: every core.
const IntraOpPool& DefaultPool() {
  static const auto* pool = new std::shared_ptr<const IntraOpPool>(IntraOpPoolFor(AvailableCores()));
  return **pool;
}

thread_local const IntraOpPool* t_pool = nullptr;

const IntraOpPool& CurrentPool() { return t_pool != nullptr ? *t_pool : DefaultPool(); }

void HostParallelFor(int64_t count, int64_t cost_per_unit_ns, void (*fn)(void* user, int64_t begin, int64_t end),
                     void* user) {
  if (fn == nullptr || count <= 0) return;
  CurrentPool().pool().ParallelFor(count, cost_per_unit_ns,
                                   [fn, user](int64_t begin, int64_t end) { fn(user, begin, end); });
}

int32_t HostIntraOpThreads() { return IntraOpThreads(); }

// --- Options ----------------------------------------------------------------

const config::OptionValues* AsValues(const weft_options_t* options) {
  return reinterpret_cast<const config::OptionValues*>(options);
}

weft_status_t NullOptions(const char* key) {
  return MakeStatus(InvalidArgumentError("option ", Quote(key != nullptr ? key : "(null)"),
                                         ": NULL options handle, key or output pointer"));
}

weft_status_t OptionGetBool(const weft_options_t* options, const char* key, weft_bool_t* out) {
  if (options == nullptr || key == nullptr || out == nullptr) return NullOptions(key);
  auto value = AsValues(options)->GetBool(key);
  if (!value.ok()) return MakeStatus(value.status());
  *out = *value ? 1 : 0;
  return nullptr;
}

weft_status_t OptionGetInt(const weft_options_t* options, const char* key, int64_t* out) {
  if (options == nullptr || key == nullptr || out == nullptr) return NullOptions(key);
  auto value = AsValues(options)->GetInt(key);
  if (!value.ok()) return MakeStatus(value.status());
  *out = *value;
  return nullptr;
}

weft_status_t OptionGetFloat(const weft_options_t* options, const char* key, double* out) {
  if (options == nullptr || key == nullptr || out == nullptr) return NullOptions(key);
  auto value = AsValues(options)->GetFloat(key);
  if (!value.ok()) return MakeStatus(value.status());
  *out = *value;
  return nullptr;
}

weft_status_t OptionGetString(const weft_options_t* options, const char* key, const char** out) {
  if (options == nullptr || key == nullptr || out == nullptr) return NullOptions(key);
  auto value = AsValues(options)->GetString(key);
  if (!value.ok()) return MakeStatus(value.status());
  *out = (*value)->c_str();
  return nullptr;
}

// --- Kernel and graph services -----------------------------------------------
//
// The table plugins hold never changes, so its kernel and graph members
// point at forwarding tables made here; each forwarder calls the runtime's
// (trainer's) table once it is offered. Plugins only reach them from a
// kernel or an optimizer the runtime (trainer) is running, so by then it is.

std::atomic<const weft_kernel_api_t*> g_kernel{nullptr};
std::atomic<const weft_graph_api_t*> g_graph{nullptr};

template <class Api>
const Api* Provided();
template <>
const weft_kernel_api_t* Provided() {
  return g_kernel.load(std::memory_order_acquire);
}
template <>
const weft_graph_api_t* Provided() {
  return g_graph.load(std::memory_order_acquire);
}

template <class Api, class Fn>
struct Forwarder;
template <class Api, class R, class... A>
struct Forwarder<Api, R (*)(A...)> {
  template <R (*Api::*Member)(A...)>
  static R Call(A... args) {
    const Api* api = Provided<Api>();
    if (api == nullptr) {
      // A plugin called a kernel (graph) service outside a kernel (update)
      // the runtime runs: a bug in the plugin, with no status to return.
      std::fprintf(stderr, "weft: a plugin used the host's %s services before the runtime offered them\n",
                   std::is_same_v<Api, weft_kernel_api_t> ? "kernel" : "graph");
      std::abort();
    }
    return (api->*Member)(args...);
  }
};

#define WEFT_FORWARD(Api, table, member) \
  table.member = &Forwarder<Api, decltype(Api::member)>::template Call<&Api::member>

const weft_kernel_api_t* ForwardingKernelApi() {
  static const weft_kernel_api_t table = [] {
    weft_kernel_api_t t{};
    t.struct_size = sizeof t;
    WEFT_FORWARD(weft_kernel_api_t, t, init_node_name);
    WEFT_FORWARD(weft_kernel_api_t, t, init_op);
    WEFT_FORWARD(weft_kernel_api_t, t, init_num_inputs);
    WEFT_FORWARD(weft_kernel_api_t, t, init_num_outputs);
    WEFT_FORWARD(weft_kernel_api_t, t, init_input_dtype);
    WEFT_FORWARD(weft_kernel_api_t, t, init_output_dtype);
    WEFT_FORWARD(weft_kernel_api_t, t, init_input_shape);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_int);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_float);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_bool);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_dtype);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_string);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_shape);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_int_list);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_float_list);
    WEFT_FORWARD(weft_kernel_api_t, t, attr_tensor);
    WEFT_FORWARD(weft_kernel_api_t, t, node_name);
    WEFT_FORWARD(weft_kernel_api_t, t, num_inputs);
    WEFT_FORWARD(weft_kernel_api_t, t, num_outputs);
    WEFT_FORWARD(weft_kernel_api_t, t, input);
    WEFT_FORWARD(weft_kernel_api_t, t, allocate_output);
    WEFT_FORWARD(weft_kernel_api_t, t, forward_input);
    WEFT_FORWARD(weft_kernel_api_t, t, forward_input_reshaped);
    WEFT_FORWARD(weft_kernel_api_t, t, allocate_temp);
    WEFT_FORWARD(weft_kernel_api_t, t, stream);
    WEFT_FORWARD(weft_kernel_api_t, t, step_id);
    WEFT_FORWARD(weft_kernel_api_t, t, is_cancelled);
    WEFT_FORWARD(weft_kernel_api_t, t, variable_lock);
    WEFT_FORWARD(weft_kernel_api_t, t, variable_name);
    return t;
  }();
  return &table;
}

const weft_graph_api_t* ForwardingGraphApi() {
  static const weft_graph_api_t table = [] {
    weft_graph_api_t t{};
    t.struct_size = sizeof t;
    WEFT_FORWARD(weft_graph_api_t, t, node_begin);
    WEFT_FORWARD(weft_graph_api_t, t, node_add_input);
    WEFT_FORWARD(weft_graph_api_t, t, node_add_control_input);
    WEFT_FORWARD(weft_graph_api_t, t, node_set_attr_int);
    WEFT_FORWARD(weft_graph_api_t, t, node_set_attr_float);
    WEFT_FORWARD(weft_graph_api_t, t, node_set_attr_bool);
    WEFT_FORWARD(weft_graph_api_t, t, node_set_attr_dtype);
    WEFT_FORWARD(weft_graph_api_t, t, node_set_attr_string);
    WEFT_FORWARD(weft_graph_api_t, t, node_finish);
    WEFT_FORWARD(weft_graph_api_t, t, scalar);
    WEFT_FORWARD(weft_graph_api_t, t, has_kernel);
    return t;
  }();
  return &table;
}

#undef WEFT_FORWARD

weft_host_t BuildTable() {
  weft_host_t table{};
  table.struct_size = sizeof(weft_host_t);
  table.abi_major = WEFT_ABI_VERSION_MAJOR;
  table.abi_minor = WEFT_ABI_VERSION_MINOR;
  table.version = kVersion;
  table.status_new = StatusNew;
  table.status_code = StatusCode;
  table.status_message = StatusMessage;
  table.status_free = StatusFree;
  table.log = HostLog;
  table.log_enabled = HostLogEnabled;
  table.host_alloc = HostAlloc;
  table.host_free = HostFree;
  table.parallel_for = HostParallelFor;
  table.intra_op_threads = HostIntraOpThreads;
  table.option_get_bool = OptionGetBool;
  table.option_get_int = OptionGetInt;
  table.option_get_float = OptionGetFloat;
  table.option_get_string = OptionGetString;
  table.kernel = ForwardingKernelApi();
  table.graph = ForwardingGraphApi();
  return table;
}

}  // namespace

const weft_host_t* HostTable() {
  static const weft_host_t table = BuildTable();
  return &table;
}

void SetKernelServices(const weft_kernel_api_t* kernel) { g_kernel.store(kernel, std::memory_order_release); }

void SetGraphServices(const weft_graph_api_t* graph) { g_graph.store(graph, std::memory_order_release); }

std::shared_ptr<const IntraOpPool> IntraOpPoolFor(int threads) {
  threads = std::max(threads, 1);
  PoolCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  std::shared_ptr<const IntraOpPool> pool = cache.pools[threads].lock();
  if (pool == nullptr) {
    pool = std::make_shared<const IntraOpPool>(threads);
    cache.pools[threads] = pool;
  }
  return pool;
}

ScopedIntraOpPool::ScopedIntraOpPool(const IntraOpPool* pool) : previous_(t_pool) { t_pool = pool; }
ScopedIntraOpPool::~ScopedIntraOpPool() { t_pool = previous_; }

int IntraOpThreads() { return CurrentPool().threads(); }

Status TakeStatus(weft_status_t status) {
  if (status == nullptr) return Status();
  const weft_code_t code = status->code;
  Status out(code >= 1 && code <= WEFT_CODE_MAX ? static_cast<Code>(code) : Code::kUnknown,
             status->message.empty() ? StrCat("(no message, code ", code, ")") : status->message);
  StatusFree(status);
  return out;
}

weft_status_t MakeStatus(const Status& status) {
  if (status.ok()) return nullptr;
  return StatusNew(static_cast<weft_code_t>(status.code()), status.message().c_str());
}

}  // namespace weft::plugin
