// Weft SDK for C++ plugins: the host table, kept once per plugin.
//
// WEFT_SDK_DEFINE_PLUGIN (plugin.h) stores the host's services table here
// before anything else of the plugin runs; every helper of the SDK reaches
// the host through weft::sdk::host(). The variables are per plugin: plugins
// are built with hidden visibility and -fno-gnu-unique (weft_add_plugin),
// so two plugins in one process never share them.
#ifndef WEFT_SDK_HOST_H_
#define WEFT_SDK_HOST_H_

#include "weft/weft_plugin.h"

namespace weft::sdk {
namespace internal {
// Hidden even when the plugin is not built with -fvisibility=hidden, so that
// the dynamic linker never merges these between two plugins.
#if defined(__GNUC__)
#define WEFT_SDK_HIDDEN __attribute__((visibility("hidden")))
#else
#define WEFT_SDK_HIDDEN
#endif
WEFT_SDK_HIDDEN inline const weft_host_t* g_host = nullptr;
WEFT_SDK_HIDDEN inline const char* g_plugin_name = "plugin";
}  // namespace internal

// The host's services table. Valid once the entry point has started; never
// null inside any function the host calls.
inline const weft_host_t* host() noexcept { return internal::g_host; }

// The plugin's name as given in its description, for log attribution.
inline const char* plugin_name() noexcept { return internal::g_plugin_name; }

}  // namespace weft::sdk

#endif  // WEFT_SDK_HOST_H_
