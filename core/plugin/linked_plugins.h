// Plugins linked into the program instead of loaded from files (the lite
// build, docs/lite.md): registered here by name before a PluginHost is
// made, and loaded like a file by the path "linked:<name>".
//
//   RegisterLinkedPlugin("cpu", weft_linked_plugin_init_cpu);
//   host.Load("linked:cpu");
//
// The entry point is what WEFT_SDK_DEFINE_PLUGIN defines as
// weft_linked_plugin_init_<name> when the plugin is compiled with
// WEFT_SDK_LINKED_PLUGIN=<name> (weft/sdk/plugin.h).
#ifndef WEFT_CORE_PLUGIN_LINKED_PLUGINS_H_
#define WEFT_CORE_PLUGIN_LINKED_PLUGINS_H_

#include <string>
#include <string_view>

#include "weft/weft_plugin.h"

namespace weft::plugin {

using LinkedPluginInit = weft_status_t (*)(const weft_host_t*, const weft_plugin_t**);

// The prefix of a linked plugin's path: "linked:cpu".
inline constexpr std::string_view kLinkedPrefix = "linked:";

// Makes |init| loadable as "linked:<name>"; a later call for the same name
// replaces it. Thread-safe.
void RegisterLinkedPlugin(const std::string& name, LinkedPluginInit init);

// The entry point registered for |name|, or nullptr.
LinkedPluginInit FindLinkedPlugin(std::string_view name);

}  // namespace weft::plugin

#endif  // WEFT_CORE_PLUGIN_LINKED_PLUGINS_H_
