// The front of a GPU plugin: what the host loads as weft_device_cuda.so.
//
// The plugin's implementation (gpu_plugin.cc and the kernels) links the
// vendor's heavy libraries: cuBLAS alone maps and touches about 220 MiB
// when it is loaded, GPU or not. The front links only the runtime (about
// 1 MiB), asks it for the device count exactly as the implementation
// would, and:
//  - with a device, loads the implementation (<plugins>/<name>/
//    weft_device_<name>_impl.so, not on the search path) and hands the host
//    the implementation's own description: from then on the host talks to
//    the implementation alone;
//  - without one, describes the plugin itself (same name, version and
//    options) with a device table whose device_count answers UNAVAILABLE
//    with the runtime's words (UnavailableMessage), as the implementation
//    would, and loads nothing more.
// docs/architecture.md, "Plugins that cost nothing unused".
#include <dlfcn.h>

#include <string>

#include "gpu/gpu_runtime.h"
#include "gpu/plugin_options.h"
#include "gpu/vendor.h"
#include "weft/sdk/plugin.h"

namespace weft::gpu {
namespace {

std::string g_reason;  // why no device is usable; set once, before the host reads the table

weft_status_t Unavailable() { return sdk::MakeStatus(WEFT_UNAVAILABLE, g_reason.c_str()); }

// Every required member of the table; the host stops at device_count.
const weft_device_plugin_t& UnavailableTable() {
  static const weft_device_plugin_t table = [] {
    auto t = sdk::Make<weft_device_plugin_t>();
    t.device_type = Vendor().device_type;
    t.device_count = [](int32_t*) { return Unavailable(); };
    t.device_open = [](int32_t, weft_device_t*) { return Unavailable(); };
    t.device_close = [](weft_device_t) {};
    t.device_properties = [](weft_device_t, weft_device_properties_t*) { return Unavailable(); };
    t.buffer_alloc = [](weft_device_t, uint64_t, weft_buffer_t*) { return Unavailable(); };
    t.buffer_free = [](weft_device_t, weft_buffer_t) {};
    t.stream_create = [](weft_device_t, weft_stream_t*) { return Unavailable(); };
    t.stream_destroy = [](weft_device_t, weft_stream_t) {};
    t.stream_synchronize = [](weft_device_t, weft_stream_t) { return Unavailable(); };
    t.event_create = [](weft_device_t, weft_event_t*) { return Unavailable(); };
    t.event_destroy = [](weft_device_t, weft_event_t) {};
    t.event_record = [](weft_device_t, weft_event_t, weft_stream_t) { return Unavailable(); };
    t.stream_wait_event = [](weft_device_t, weft_stream_t, weft_event_t) { return Unavailable(); };
    t.event_synchronize = [](weft_device_t, weft_event_t) { return Unavailable(); };
    t.event_on_ready = [](weft_device_t, weft_event_t, weft_done_fn, void*) { return Unavailable(); };
    t.copy_host_to_device = [](weft_device_t, weft_stream_t, const void*, weft_buffer_t, uint64_t, uint64_t) {
      return Unavailable();
    };
    t.copy_device_to_host = [](weft_device_t, weft_stream_t, weft_buffer_t, uint64_t, void*, uint64_t) {
      return Unavailable();
    };
    t.copy_device_to_device = [](weft_device_t, weft_stream_t, weft_buffer_t, uint64_t, weft_buffer_t, uint64_t,
                                 uint64_t) { return Unavailable(); };
    return t;
  }();
  return table;
}

const weft_plugin_t* UnavailablePlugin() {
  static const weft_plugin_t plugin =
      Description(&UnavailableTable(), [](const weft_options_t*) -> weft_status_t { return nullptr; });
  return &plugin;
}

// <the folder of this file>/<name>/weft_device_<name>_impl.so
std::string ImplementationPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ImplementationPath), &info) == 0 || info.dli_fname == nullptr) {
    throw sdk::Error(WEFT_INTERNAL, "cannot find where the plugin was loaded from (dladdr failed)");
  }
  std::string dir = info.dli_fname;
  dir = dir.substr(0, dir.find_last_of('/') + 1);
  const std::string name = Vendor().plugin_name;
  return dir + name + "/weft_device_" + name + "_impl.so";
}

const weft_plugin_t* Describe() {
  int count = 0;
  const rt::Error error = rt::GetDeviceCount(&count);
  if (error != rt::kSuccess || count <= 0) {
    (void)rt::GetLastError();  // the runtime keeps the last error per thread
    g_reason = UnavailableMessage(error);
    return UnavailablePlugin();
  }
  const std::string path = ImplementationPath();
  // Loaded for the life of the process, as the host keeps plugins.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    throw sdk::Error(WEFT_UNAVAILABLE, std::string(Vendor().runtime_name) + " found " + std::to_string(count) +
                                           " device(s), but the plugin's implementation " + path +
                                           " does not load: " + (why != nullptr ? why : "unknown error"));
  }
  using InitFn = weft_status_t (*)(const weft_host_t*, const weft_plugin_t**);
  auto init = reinterpret_cast<InitFn>(dlsym(library, "weft_plugin_init_v1"));
  if (init == nullptr) {
    throw sdk::Error(WEFT_INTERNAL, path + " has no weft_plugin_init_v1: it is not the plugin's implementation");
  }
  const weft_plugin_t* plugin = nullptr;
  sdk::ThrowIfError(init(sdk::host(), &plugin));
  return plugin;
}

}  // namespace
}  // namespace weft::gpu

WEFT_SDK_DEFINE_PLUGIN(weft::gpu::Describe)
