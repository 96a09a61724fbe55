// Weft SDK for C++ plugins: the entry point.
//
// A C++ plugin writes one function that describes it, and lets the macro
// write the exported entry point around it:
//
//   #include "weft/sdk/plugin.h"
//
//   extern const weft_device_plugin_t kDevice;  // the device table, defined below
//
//   static const weft_plugin_t* Describe() {
//     static const weft_plugin_t plugin = [] {
//       auto p = weft::sdk::Make<weft_plugin_t>();
//       p.abi_major = WEFT_ABI_VERSION_MAJOR;
//       p.abi_minor = WEFT_ABI_VERSION_MINOR;
//       p.name = "mydev";
//       p.version = "1.0.0";
//       p.kind = WEFT_PLUGIN_DEVICE;
//       p.device = &kDevice;  // the device table
//       return p;
//     }();
//     return &plugin;
//   }
//   WEFT_SDK_DEFINE_PLUGIN(Describe)
//
// Describe runs inside the guard: it may throw weft::sdk::Error with
// WEFT_UNAVAILABLE to say the plugin cannot serve on this machine.
#ifndef WEFT_SDK_PLUGIN_H_
#define WEFT_SDK_PLUGIN_H_

#include "weft/sdk/guard.h"
#include "weft/sdk/host.h"
#include "weft/sdk/log.h"
#include "weft/sdk/options.h"
#include "weft/sdk/status.h"
#include "weft/sdk/struct.h"
#include "weft/weft_plugin.h"

namespace weft::sdk::internal {

template <class Describe>
weft_status_t RunInit(const weft_host_t* host_table, const weft_plugin_t** out_plugin, Describe describe) noexcept {
  if (out_plugin == nullptr) return nullptr;
  *out_plugin = nullptr;
  // Without a host there is no way to make a status; the host then sees no
  // description and reports that.
  if (host_table == nullptr) return nullptr;
  if (!WEFT_STRUCT_HAS(host_table, weft_host_t, status_new)) return nullptr;
  g_host = host_table;
  if (host_table->struct_size < WEFT_HOST_SIZE_V1_0) {
    return host_table->status_new(WEFT_FAILED_PRECONDITION, "the host's services table is smaller than ABI 1.0");
  }
  return Guard([&]() -> weft_status_t {
    const weft_plugin_t* plugin = describe();
    if (plugin == nullptr) {
      return host_table->status_new(WEFT_INTERNAL, "the plugin's describe function returned null");
    }
    if (plugin->name != nullptr) g_plugin_name = plugin->name;
    *out_plugin = plugin;
    return nullptr;
  });
}

}  // namespace weft::sdk::internal

#define WEFT_SDK_DEFINE_PLUGIN(describe_fn)                                                           \
  extern "C" WEFT_PLUGIN_EXPORT weft_status_t weft_plugin_init_v1(const weft_host_t* host,            \
                                                                  const weft_plugin_t** out_plugin) { \
    return ::weft::sdk::internal::RunInit(host, out_plugin, describe_fn);                             \
  }

#endif  // WEFT_SDK_PLUGIN_H_
