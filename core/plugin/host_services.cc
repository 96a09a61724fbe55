#include "core/plugin/host_services.h"

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

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

const char* StatusMessage(weft_status_t status) {
  return status == nullptr ? "" : status->message.c_str();
}

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

void HostLog(weft_log_level_t level, const char* plugin, const char* file, int32_t line,
             const char* message) {
  Log(LogRecord{ToLevel(level), plugin != nullptr ? plugin : "plugin",
                file != nullptr ? file : "", line, message != nullptr ? message : ""});
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

struct PoolHolder {
  std::mutex mutex;
  std::shared_ptr<ThreadPool> pool;
  int threads = 0;
  // |threads| once the pool exists, read without the mutex by
  // IntraOpThreads (kernels ask for it on every run).
  std::atomic<int> published_threads{0};
};

PoolHolder& Pool() {
  static auto* holder = new PoolHolder();  // leaked: plugins may call it during exit
  return *holder;
}

std::shared_ptr<ThreadPool> CurrentPool() {
  PoolHolder& holder = Pool();
  std::lock_guard<std::mutex> lock(holder.mutex);
  if (!holder.pool) {
    holder.threads = AvailableCores();
    holder.pool = std::make_shared<ThreadPool>(holder.threads - 1, "intra_op");
    holder.published_threads.store(holder.threads, std::memory_order_release);
  }
  return holder.pool;
}

void HostParallelFor(int64_t count, int64_t cost_per_unit_ns,
                     void (*fn)(void* user, int64_t begin, int64_t end), void* user) {
  if (fn == nullptr || count <= 0) return;
  CurrentPool()->ParallelFor(count, cost_per_unit_ns,
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
  // Offered once the runtime (kernels) or the trainer (graph building) is
  // in use; a host that only lists plugins offers neither, as
  // weft_plugin.h allows.
  table.kernel = nullptr;
  table.graph = nullptr;
  return table;
}

weft_host_t& MutableTable() {
  static weft_host_t table = BuildTable();
  return table;
}

}  // namespace

const weft_host_t* HostTable() { return &MutableTable(); }

void SetKernelServices(const weft_kernel_api_t* kernel) {
  std::atomic_ref<const weft_kernel_api_t*>(MutableTable().kernel).store(kernel);
}

void SetGraphServices(const weft_graph_api_t* graph) {
  std::atomic_ref<const weft_graph_api_t*>(MutableTable().graph).store(graph);
}

void ConfigureHostServices(int intra_op_threads) {
  PoolHolder& holder = Pool();
  const int threads = intra_op_threads < 1 ? 1 : intra_op_threads;
  std::lock_guard<std::mutex> lock(holder.mutex);
  if (holder.pool && holder.threads == threads) return;
  // Work already running keeps the old pool alive through its shared_ptr.
  holder.pool = std::make_shared<ThreadPool>(threads - 1, "intra_op");
  holder.threads = threads;
  holder.published_threads.store(threads, std::memory_order_release);
}

int IntraOpThreads() {
  PoolHolder& holder = Pool();
  const int threads = holder.published_threads.load(std::memory_order_acquire);
  if (threads > 0) return threads;
  CurrentPool();
  return holder.published_threads.load(std::memory_order_acquire);
}

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
