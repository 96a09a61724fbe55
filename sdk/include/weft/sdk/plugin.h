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
//       weft_plugin_t p = weft::sdk::DescribePlugin("mydev", "1.0.0", "My device", WEFT_PLUGIN_DEVICE);
//       p.device = &kDevice;  // the device table
//       return p;
//     }();
//     return &plugin;
//   }
//   WEFT_SDK_DEFINE_PLUGIN(Describe)
//
// A plugin with options lists them and reads them in its configure
// function (weft/sdk/options.h); WithOptions sets the three members:
//
//   const weft_option_def_t kOptions[] = {
//       {sizeof(weft_option_def_t), "count", WEFT_OPTION_INT, "1", "How many devices.", 1, 1, 1, 64, nullptr, 0},
//   };
//   int g_count = 1;
//   weft_status_t Configure(const weft_options_t* options) {
//     return weft::sdk::Guard([&] { g_count = static_cast<int>(weft::sdk::GetInt(options, "count")); });
//   }
//   weft_plugin_t Described() {
//     weft_plugin_t p = weft::sdk::DescribePlugin("mydev", "1.0.0", "My device", WEFT_PLUGIN_DEVICE);
//     weft::sdk::WithOptions(p, kOptions, Configure);
//     return p;
//   }
//
// Describe runs inside the guard: it may throw weft::sdk::Error with
// WEFT_UNAVAILABLE to say the plugin cannot serve on this machine.
#ifndef WEFT_SDK_PLUGIN_H_
#define WEFT_SDK_PLUGIN_H_

#include <cstddef>

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

namespace weft::sdk {

// A plugin's description for this ABI version: its name, version, one-line
// description and kind. The caller adds its table (device, transport,
// optimizer or collectives) and, with WithOptions, its options.
inline weft_plugin_t DescribePlugin(const char* name, const char* version, const char* description,
                                    weft_plugin_kind_t kind) {
  auto p = Make<weft_plugin_t>();
  p.abi_major = WEFT_ABI_VERSION_MAJOR;
  p.abi_minor = WEFT_ABI_VERSION_MINOR;
  p.name = name;
  p.version = version;
  p.description = description;
  p.kind = kind;
  return p;
}

// The description of a device plugin (kind DEVICE) with its |table|, and
// of a transport plugin (kind TRANSPORT); the tables must outlive it.
inline weft_plugin_t DescribePlugin(const char* name, const char* version, const char* description,
                                    const weft_device_plugin_t* table) {
  weft_plugin_t p = DescribePlugin(name, version, description, WEFT_PLUGIN_DEVICE);
  p.device = table;
  return p;
}
inline weft_plugin_t DescribePlugin(const char* name, const char* version, const char* description,
                                    const weft_transport_plugin_t* table) {
  weft_plugin_t p = DescribePlugin(name, version, description, WEFT_PLUGIN_TRANSPORT);
  p.transport = table;
  return p;
}

// Sets |p|'s options (a static array, which the host reads for the
// plugin's lifetime) and the function that receives their values.
template <std::size_t N>
void WithOptions(weft_plugin_t& p, const weft_option_def_t (&options)[N],
                 weft_status_t (*configure)(const weft_options_t*)) {
  p.options = options;
  p.num_options = N;
  p.configure = configure;
}

// The description of a device or transport plugin with its |table|, its
// options and the function that receives their values, in one call.
template <class Table, std::size_t N>
weft_plugin_t DescribePlugin(const char* name, const char* version, const char* description, const Table* table,
                             const weft_option_def_t (&options)[N], weft_status_t (*configure)(const weft_options_t*)) {
  weft_plugin_t p = DescribePlugin(name, version, description, table);
  WithOptions(p, options, configure);
  return p;
}

}  // namespace weft::sdk

// A plugin compiled with WEFT_SDK_LINKED_PLUGIN=<name> is linked into the
// program instead of loaded (the lite build, docs/lite.md): its entry point
// is weft_linked_plugin_init_<name>, not exported, which the host registers
// by address (PluginHost::LoadLinked).
#if defined(WEFT_SDK_LINKED_PLUGIN)
#define WEFT_SDK_LINKED_ENTRY_(name) weft_linked_plugin_init_##name
#define WEFT_SDK_LINKED_ENTRY(name) WEFT_SDK_LINKED_ENTRY_(name)
#define WEFT_SDK_DEFINE_PLUGIN(describe_fn)                                                                  \
  extern "C" weft_status_t WEFT_SDK_LINKED_ENTRY(WEFT_SDK_LINKED_PLUGIN)(const weft_host_t* host,            \
                                                                         const weft_plugin_t** out_plugin) { \
    return ::weft::sdk::internal::RunInit(host, out_plugin, describe_fn);                                    \
  }
#else
#define WEFT_SDK_DEFINE_PLUGIN(describe_fn)                                                           \
  extern "C" WEFT_PLUGIN_EXPORT weft_status_t weft_plugin_init_v1(const weft_host_t* host,            \
                                                                  const weft_plugin_t** out_plugin) { \
    return ::weft::sdk::internal::RunInit(host, out_plugin, describe_fn);                             \
  }
#endif

#endif  // WEFT_SDK_PLUGIN_H_
