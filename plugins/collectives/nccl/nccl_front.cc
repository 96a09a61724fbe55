// The front of the nccl collectives plugin: what the host loads as
// weft_collectives_nccl.so.
//
// The implementation (nccl_plugin.cc) links libnccl.so.2, 218 MB that the
// dynamic loader maps as soon as the library is loaded, GPU or not. The
// front links only the CUDA runtime, asks it for the device count, and:
//  - with a device, loads the implementation (<plugins>/nccl/
//    weft_collectives_nccl_impl.so, not on the search path) and hands the
//    host the implementation's own description: from then on the host
//    talks to the implementation alone;
//  - without one, describes the plugin itself (same name, version, backend,
//    device types and dtypes) and answers UNAVAILABLE with the runtime's
//    words, loading nothing more.
// The same split as the cuda device plugin (plugins/devices/gpu/
// gpu_front.cc); docs/design/sync-training.md, 3.b.5.
//
// Without a device the UNAVAILABLE comes from configure, which the host
// treats like one from init (weft_plugin.h) but only after it has read the
// description, so that `weft plugins` still shows the plugin's kind, ABI
// and version next to the reason. Every member of the table answers the
// same reason, should anything call it.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <string>

#include "weft/sdk/plugin.h"

namespace {

using weft::sdk::Error;

std::string g_reason;  // why no device is usable; set once, before the host reads the table

weft_status_t Unavailable() { return weft::sdk::MakeStatus(WEFT_UNAVAILABLE, g_reason.c_str()); }

constexpr const char* kDeviceTypes[] = {"CUDA"};
constexpr weft_dtype_t kDtypes[] = {WEFT_DTYPE_F16, WEFT_DTYPE_BF16, WEFT_DTYPE_F32, WEFT_DTYPE_F64,
                                    WEFT_DTYPE_I32, WEFT_DTYPE_I64,  WEFT_DTYPE_I8,  WEFT_DTYPE_U8};

// Every required member of the table; the host never registers it, since
// configure answers UNAVAILABLE first.
const weft_collectives_plugin_t& UnavailableTable() {
  static const weft_collectives_plugin_t table = [] {
    auto t = weft::sdk::Make<weft_collectives_plugin_t>();
    t.backend = "nccl";
    t.device_types = kDeviceTypes;
    t.num_device_types = sizeof(kDeviceTypes) / sizeof(kDeviceTypes[0]);
    t.dtypes = kDtypes;
    t.num_dtypes = sizeof(kDtypes) / sizeof(kDtypes[0]);
    t.comm_create = [](const weft_comm_args_t*, weft_communicator_t* out) {
      if (out != nullptr) *out = nullptr;
      return Unavailable();
    };
    t.comm_destroy = [](weft_communicator_t) {};
    t.comm_abort = [](weft_communicator_t, const char*) {};
    t.all_reduce = [](weft_communicator_t, const weft_comm_op_t*, const weft_comm_buffer_t*, const weft_comm_buffer_t*,
                      weft_reduction_t, weft_done_fn, void*) { return Unavailable(); };
    t.all_gather = [](weft_communicator_t, const weft_comm_op_t*, const weft_comm_buffer_t*, const weft_comm_buffer_t*,
                      weft_done_fn, void*) { return Unavailable(); };
    t.broadcast = [](weft_communicator_t, const weft_comm_op_t*, const weft_comm_buffer_t*, int32_t, weft_done_fn,
                     void*) { return Unavailable(); };
    return t;
  }();
  return table;
}

const weft_plugin_t* UnavailablePlugin() {
  static const weft_plugin_t plugin = [] {
    weft_plugin_t p = weft::sdk::DescribePlugin("nccl", WEFT_NCCL_PLUGIN_VERSION, WEFT_NCCL_PLUGIN_DESCRIPTION,
                                                WEFT_PLUGIN_COLLECTIVES);
    p.collectives = &UnavailableTable();
    p.configure = [](const weft_options_t*) { return Unavailable(); };
    return p;
  }();
  return &plugin;
}

// <the folder of this file>/nccl/weft_collectives_nccl_impl.so
std::string ImplementationPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ImplementationPath), &info) == 0 || info.dli_fname == nullptr) {
    throw Error(WEFT_INTERNAL, "cannot find where the plugin was loaded from (dladdr failed)");
  }
  std::string dir = info.dli_fname;
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  return dir + "nccl/weft_collectives_nccl_impl.so";
}

const weft_plugin_t* Describe() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();  // the runtime keeps the last error per thread
    g_reason = error != cudaSuccess ? std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(error)
                                    : std::string("no CUDA device: cudaGetDeviceCount found 0");
    return UnavailablePlugin();
  }
  const std::string path = ImplementationPath();
  // Loaded for the life of the process, as the host keeps plugins.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    throw Error(WEFT_UNAVAILABLE, "CUDA found " + std::to_string(count) +
                                      " device(s), but the plugin's implementation " + path +
                                      " does not load: " + (why != nullptr ? why : "unknown error"));
  }
  using InitFn = weft_status_t (*)(const weft_host_t*, const weft_plugin_t**);
  auto init = reinterpret_cast<InitFn>(dlsym(library, WEFT_PLUGIN_ENTRY_SYMBOL));
  if (init == nullptr) {
    throw Error(WEFT_INTERNAL, path + " has no " WEFT_PLUGIN_ENTRY_SYMBOL ": it is not the plugin's implementation");
  }
  const weft_plugin_t* plugin = nullptr;
  weft::sdk::ThrowIfError(init(weft::sdk::host(), &plugin));
  return plugin;
}

}  // namespace

WEFT_SDK_DEFINE_PLUGIN(Describe)
