// A device plugin for the plugin host's tests, compiled once per case with
// WEFT_TEST_CASE selecting how it misbehaves (see CMakeLists.txt). The
// device itself is a trivial host-memory device, enough to be loaded,
// listed and opened.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "weft/sdk/plugin.h"

#define CASE_OK 0
#define CASE_INIT_ERROR 1
#define CASE_INIT_THROWS 2
#define CASE_UNAVAILABLE_INIT 3
#define CASE_UNAVAILABLE_COUNT 4
#define CASE_SMALL_TABLE 5
#define CASE_ABI_MAJOR_FIELD 6
#define CASE_UNGUARDED_THROW 7
#define CASE_MISSING_MEMBER 8
#define CASE_BAD_OPTION_DEFAULT 9
#define CASE_CONFIGURE_ERROR 10
#define CASE_PROPERTIES_INTERNAL 11

#ifndef WEFT_TEST_CASE
#error "WEFT_TEST_CASE must be defined"
#endif
#ifndef WEFT_TEST_NAME
#error "WEFT_TEST_NAME must be defined"
#endif
#ifndef WEFT_TEST_DEVICE_TYPE
#define WEFT_TEST_DEVICE_TYPE "TESTDEV"
#endif

namespace {

int64_t g_count = 1;

struct Buffer {
  void* data;
  uint64_t size;
};

weft_status_t DeviceCount(int32_t* out) {
#if WEFT_TEST_CASE == CASE_UNAVAILABLE_COUNT
  (void)out;
  return weft::sdk::MakeStatus(WEFT_UNAVAILABLE, "no frobnicator found on this machine");
#else
  *out = static_cast<int32_t>(g_count);
  return nullptr;
#endif
}
weft_status_t DeviceOpen(int32_t ordinal, weft_device_t* out) {
  *out = reinterpret_cast<weft_device_t>(static_cast<intptr_t>(ordinal + 1));
  return nullptr;
}
void DeviceClose(weft_device_t) {}
weft_status_t DeviceProperties(weft_device_t, weft_device_properties_t* out) {
#if WEFT_TEST_CASE == CASE_PROPERTIES_INTERNAL
  // A plugin bug, as the host sees one.
  (void)out;
  return weft::sdk::MakeStatus(WEFT_INTERNAL, "device table corrupted (test)");
#endif
  auto props = weft::sdk::Make<weft_device_properties_t>();
  props.model = "test device";
  props.alignment = 64;
  props.host_visible = 1;
  props.compute_units = 1;
  weft::sdk::FillOut(out, props);
  return nullptr;
}
weft_status_t BufferAlloc(weft_device_t, uint64_t size, weft_buffer_t* out) {
  return weft::sdk::Guard([&] {
    void* data = std::malloc(size == 0 ? 1 : size);
    if (data == nullptr) throw std::bad_alloc();
    *out = reinterpret_cast<weft_buffer_t>(new Buffer{data, size});
  });
}
void BufferFree(weft_device_t, weft_buffer_t buffer) {
  if (buffer == nullptr) return;
  std::free(reinterpret_cast<Buffer*>(buffer)->data);
  delete reinterpret_cast<Buffer*>(buffer);
}
void* HostPointer(weft_device_t, weft_buffer_t buffer) { return reinterpret_cast<Buffer*>(buffer)->data; }
weft_status_t StreamCreate(weft_device_t, weft_stream_t* out) {
  *out = reinterpret_cast<weft_stream_t>(static_cast<intptr_t>(1));
  return nullptr;
}
void StreamDestroy(weft_device_t, weft_stream_t) {}
weft_status_t StreamSync(weft_device_t, weft_stream_t) { return nullptr; }
weft_status_t EventCreate(weft_device_t, weft_event_t* out) {
  *out = reinterpret_cast<weft_event_t>(static_cast<intptr_t>(1));
  return nullptr;
}
void EventDestroy(weft_device_t, weft_event_t) {}
weft_status_t EventRecord(weft_device_t, weft_event_t, weft_stream_t) { return nullptr; }
weft_status_t StreamWait(weft_device_t, weft_stream_t, weft_event_t) { return nullptr; }
weft_status_t EventSync(weft_device_t, weft_event_t) { return nullptr; }
weft_status_t EventOnReady(weft_device_t, weft_event_t, weft_done_fn done, void* user) {
  done(user, nullptr);
  return nullptr;
}
weft_status_t H2D(weft_device_t, weft_stream_t, const void* src, weft_buffer_t dst, uint64_t off, uint64_t size) {
  std::memcpy(static_cast<char*>(reinterpret_cast<Buffer*>(dst)->data) + off, src, size);
  return nullptr;
}
weft_status_t D2H(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t off, void* dst, uint64_t size) {
  std::memcpy(dst, static_cast<const char*>(reinterpret_cast<Buffer*>(src)->data) + off, size);
  return nullptr;
}
[[maybe_unused]] weft_status_t D2D(weft_device_t, weft_stream_t, weft_buffer_t src, uint64_t soff, weft_buffer_t dst,
                                   uint64_t doff, uint64_t size) {
  std::memmove(static_cast<char*>(reinterpret_cast<Buffer*>(dst)->data) + doff,
               static_cast<const char*>(reinterpret_cast<Buffer*>(src)->data) + soff, size);
  return nullptr;
}

// Asynchronous kernels, for the executor's callback path: Neg (f32)
// finishes on another thread a millisecond later; Relu (f32) fails there.
void AsyncNeg(void*, weft_kernel_context_t* ctx, weft_done_fn done, void* user) {
  std::thread([ctx, done, user] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const weft_kernel_api_t* k = weft::sdk::host()->kernel;
    weft_tensor_t x{};
    x.struct_size = sizeof x;
    weft_status_t status = k->input(ctx, 0, &x);
    if (status == nullptr) {
      weft_tensor_t y{};
      y.struct_size = sizeof y;
      status = k->allocate_output(ctx, 0, x.rank, x.dims, &y);
      for (int64_t i = 0; status == nullptr && i < x.num_elements; ++i) {
        static_cast<float*>(y.data)[i] = -static_cast<const float*>(x.data)[i];
      }
    }
    done(user, status);
  }).detach();
}

void AsyncFail(void*, weft_kernel_context_t*, weft_done_fn done, void* user) {
  std::thread([done, user] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    done(user, weft::sdk::MakeStatus(WEFT_ABORTED, "the frobnicator hung up (test)"));
  }).detach();
}

const char* const kT[] = {"T"};
const weft_dtype_t kF32[] = {WEFT_DTYPE_F32};
weft_kernel_def_t AsyncF32Kernel(const char* op, void (*fn)(void*, weft_kernel_context_t*, weft_done_fn, void*)) {
  auto k = weft::sdk::Make<weft_kernel_def_t>();
  k.op = op;
  k.constraint_attrs = kT;
  k.constraint_dtypes = kF32;
  k.num_constraints = 1;
  k.flags = WEFT_KERNEL_ASYNC;
  k.compute_async = fn;
  return k;
}

// Neg's shape-aware query: inputs of rank 3 or more are refused, and a
// cost proportional to the known element count is reported.
weft_status_t NegQuery(weft_device_t, const weft_kernel_init_t* init, weft_kernel_query_t* out) {
  int32_t rank = -1;
  const int64_t* dims = nullptr;
  weft_status_t s = weft::sdk::host()->kernel->init_input_shape(init, 0, &rank, &dims);
  if (s != nullptr) return s;
  if (rank >= 3) {
    out->unsupported = 1;
    out->reason = "the test device negates vectors and matrices only";
    return nullptr;
  }
  double elements = 1;
  for (int32_t i = 0; i < rank; ++i) elements *= dims[i] > 0 ? static_cast<double>(dims[i]) : 1.0;
  out->cost_ns = elements;
  return nullptr;
}

weft_kernel_def_t WithQuery(weft_kernel_def_t k,
                            weft_status_t (*query)(weft_device_t, const weft_kernel_init_t*, weft_kernel_query_t*)) {
  k.query = query;
  return k;
}

// Sign (f32) on the test device is not a sign: it fills its output with
// the intra-op thread count the host reports to the running kernel, so a
// test can see which session's setting a kernel gets.
weft_status_t IntraOpThreadsKernel(void*, weft_kernel_context_t* ctx) {
  const weft_kernel_api_t* k = weft::sdk::host()->kernel;
  weft_tensor_t x{};
  x.struct_size = sizeof x;
  weft_status_t status = k->input(ctx, 0, &x);
  if (status != nullptr) return status;
  weft_tensor_t y{};
  y.struct_size = sizeof y;
  status = k->allocate_output(ctx, 0, x.rank, x.dims, &y);
  const float threads = static_cast<float>(weft::sdk::host()->intra_op_threads());
  for (int64_t i = 0; status == nullptr && i < y.num_elements; ++i) static_cast<float*>(y.data)[i] = threads;
  return status;
}

weft_kernel_def_t SyncF32Kernel(const char* op, weft_status_t (*fn)(void*, weft_kernel_context_t*)) {
  auto k = weft::sdk::Make<weft_kernel_def_t>();
  k.op = op;
  k.constraint_attrs = kT;
  k.constraint_dtypes = kF32;
  k.num_constraints = 1;
  k.compute = fn;
  return k;
}

const weft_kernel_def_t kKernels[] = {
    WithQuery(AsyncF32Kernel("Neg", AsyncNeg), NegQuery),
    AsyncF32Kernel("Relu", AsyncFail),
    SyncF32Kernel("Sign", IntraOpThreadsKernel),
};

const weft_device_plugin_t kDevice = [] {
  auto t = weft::sdk::Make<weft_device_plugin_t>();
#if WEFT_TEST_CASE == CASE_SMALL_TABLE
  // As if built against a far older, smaller layout.
  t.struct_size = 16;
#endif
  t.device_type = WEFT_TEST_DEVICE_TYPE;
  t.device_count = DeviceCount;
  t.device_open = DeviceOpen;
  t.device_close = DeviceClose;
  t.device_properties = DeviceProperties;
  t.buffer_alloc = BufferAlloc;
  t.buffer_free = BufferFree;
  t.buffer_host_pointer = HostPointer;
  t.stream_create = StreamCreate;
  t.stream_destroy = StreamDestroy;
  t.stream_synchronize = StreamSync;
  t.event_create = EventCreate;
  t.event_destroy = EventDestroy;
  t.event_record = EventRecord;
  t.stream_wait_event = StreamWait;
  t.event_synchronize = EventSync;
  t.event_on_ready = EventOnReady;
  t.copy_host_to_device = H2D;
  t.copy_device_to_host = D2H;
#if WEFT_TEST_CASE != CASE_MISSING_MEMBER
  t.copy_device_to_device = D2D;
#endif
  t.kernels = kKernels;
  t.num_kernels = sizeof kKernels / sizeof kKernels[0];
  return t;
}();

#if WEFT_TEST_CASE == CASE_BAD_OPTION_DEFAULT
#define COUNT_DEFAULT "\"many\""
#else
#define COUNT_DEFAULT "1"
#endif
const char* const kModes[] = {"fast", "exact"};
const weft_option_def_t kOptions[] = {
    {sizeof(weft_option_def_t), "count", WEFT_OPTION_INT, COUNT_DEFAULT, "Devices to expose.", 1, 1, 1, 8, nullptr, 0},
    {sizeof(weft_option_def_t), "mode", WEFT_OPTION_STRING, "\"fast\"", "How to run.", 0, 0, 0, 0, kModes, 2},
};

weft_status_t Configure(const weft_options_t* options) {
  return weft::sdk::Guard([&] {
#if WEFT_TEST_CASE == CASE_CONFIGURE_ERROR
    (void)options;
    throw weft::sdk::Error(WEFT_INVALID_ARGUMENT, "the frobnicator rejects this configuration");
#else
    g_count = weft::sdk::GetInt(options, "count");
    if (weft::sdk::GetString(options, "mode") == "exact") g_count = 1;
#endif
  });
}

[[maybe_unused]] const weft_plugin_t* Describe() {
#if WEFT_TEST_CASE == CASE_INIT_THROWS
  throw std::runtime_error("frobnicator exploded");
#elif WEFT_TEST_CASE == CASE_UNAVAILABLE_INIT
  throw weft::sdk::Error(WEFT_UNAVAILABLE, "no frobnicator driver (libfrob.so.1 not found)");
#endif
  static const weft_plugin_t plugin = [] {
    auto p = weft::sdk::Make<weft_plugin_t>();
    p.abi_major = WEFT_ABI_VERSION_MAJOR;
#if WEFT_TEST_CASE == CASE_ABI_MAJOR_FIELD
    p.abi_major = 2;
#endif
    p.abi_minor = WEFT_ABI_VERSION_MINOR;
    p.name = WEFT_TEST_NAME;
    p.version = "9.8.7";
    p.description = "test device";
    p.kind = WEFT_PLUGIN_DEVICE;
    p.device = &kDevice;
    p.options = kOptions;
    p.num_options = 2;
    p.configure = Configure;
    return p;
  }();
  return &plugin;
}

}  // namespace

#if WEFT_TEST_CASE == CASE_INIT_ERROR
extern "C" WEFT_PLUGIN_EXPORT weft_status_t weft_plugin_init_v1(const weft_host_t* host, const weft_plugin_t** out) {
  *out = nullptr;
  return host->status_new(WEFT_INTERNAL, "cannot open /dev/frobnicator: permission denied");
}
#elif WEFT_TEST_CASE == CASE_UNGUARDED_THROW
// Deliberately wrong: no guard, so the exception leaves the entry point.
extern "C" WEFT_PLUGIN_EXPORT weft_status_t weft_plugin_init_v1(const weft_host_t*, const weft_plugin_t**) {
  throw std::runtime_error("boom");
}
#else
WEFT_SDK_DEFINE_PLUGIN(Describe)
#endif
