// The plugin host: finds plugin libraries, loads them with Boost.DLL
// (RTLD_LOCAL | RTLD_NOW, kept loaded for the life of the process), checks
// them against the ABI, configures them from their TOML section, and
// registers what they provide.
//
//   PluginHost host(config);
//   WEFT_RETURN_IF_ERROR(host.LoadAll());
//   for (const PluginInfo& p : host.plugins()) ...     // `weft plugins`
//   const DevicePlugin* cpu = host.devices().Find("CPU");
//
// Search order: [plugins] paths from the config, then the directories in
// $WEFT_PLUGIN_PATH (':'-separated), then the folder Weft was built or
// installed with (<dir of libweft>/weft/plugins). In a directory, files
// named weft_<kind>_<name>.so are plugins, taken in name order. A file
// reached twice is loaded once.
//
// A plugin that cannot be used is *refused* with a one-line reason naming
// the file: not a shared library, no entry symbol, another ABI major
// version, a table smaller than ABI 1.0, a duplicate name, an error or
// exception from init. Refusals are logged as warnings and recorded, and
// the process goes on ([plugins] strict = true makes them fatal). A plugin
// that answers UNAVAILABLE (no GPU here) is recorded as unavailable and
// logged at info level; that is never fatal. A mistake in a plugin's TOML
// section is a configuration error and always fatal.
//
// Not thread-safe while loading; the registries may be read concurrently
// once loading is done.
#ifndef WEFT_CORE_PLUGIN_PLUGIN_HOST_H_
#define WEFT_CORE_PLUGIN_PLUGIN_HOST_H_

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/config/config.h"
#include "core/config/options.h"
#include "core/plugin/device_plugin.h"
#include "core/plugin/registry.h"
#include "weft/weft_plugin.h"

namespace weft::plugin {

enum class PluginKind { kDevice, kTransport, kOptimizer, kCollectives };
enum class PluginState { kLoaded, kUnavailable, kRefused, kDisabled };

// "device", "transport", "optimizer", "collectives"
std::string_view KindName(PluginKind kind);
// The config section kind for plugins of |kind|: "devices", ...
std::string_view SectionKind(PluginKind kind);
// "loaded", "unavailable", "refused", "disabled"
std::string_view StateName(PluginState state);

// What `weft plugins` shows about one plugin file.
struct PluginInfo {
  std::string path;
  // Known once init succeeded; empty for a plugin refused earlier.
  std::string name;
  std::optional<PluginKind> kind;
  std::string version;
  std::string description;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  PluginState state = PluginState::kRefused;
  // Why it is unavailable, refused or disabled; empty when loaded.
  std::string reason;
  // The plugin's declared options (empty when refused before reading them).
  std::vector<config::OptionSpec> options;
};

// A transport or optimizer table, validated against ABI 1.0.
struct TransportPlugin {
  std::string plugin_name;
  const weft_transport_plugin_t* table;
};
struct OptimizerPlugin {
  std::string plugin_name;
  const weft_optimizer_plugin_t* table;
  std::vector<config::OptionSpec> hyperparameters;
};
// A collectives table (ABI 1.2), validated, with what it serves.
struct CollectivesPlugin {
  std::string plugin_name;
  const weft_collectives_plugin_t* table;
  std::vector<std::string> device_types;
  std::vector<weft_dtype_t> dtypes;
  bool Serves(std::string_view device_type) const;
  bool Serves(std::string_view device_type, weft_dtype_t dtype) const;
};

struct PluginHostOptions {
  // Read $WEFT_PLUGIN_PATH.
  bool use_environment = true;
  // Search the built-in folder.
  bool use_builtin_folder = true;
  // Overrides the built-in folder (tests); empty means DefaultPluginDir().
  std::string builtin_folder;
  // Leave counting each device plugin's devices to the first use
  // (runtime::DeviceSet opens a type when placement needs it): a plugin
  // with no device here is then registered, and found empty when used,
  // instead of being recorded as unavailable at load. Counting can cost
  // far more than loading (PoCL's platform query starts its compiler), so
  // commands that run a graph defer it; `weft plugins` and `weft devices`
  // count at load to report every plugin's state.
  bool defer_device_count = false;
  // Plugin files whose name declares one of these kinds
  // (weft_transport_*.so) are not loaded at all, nor their config
  // sections checked: a local `weft run` needs no transport or
  // collectives plugin, and loading them costs start-up time.
  std::vector<PluginKind> skip_kinds;
};

class PluginHost {
 public:
  explicit PluginHost(config::Config config, PluginHostOptions options = {});
  // Calls each loaded plugin's shutdown hook when no other host uses it.
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  // Loads every plugin on the search path. Returns an error for a mistake
  // in a plugin's config section, and (in strict mode) for the first
  // refused plugin; otherwise OK, with refusals logged and recorded.
  Status LoadAll();

  // Loads the plugin file at |path|. A refusal is recorded and returned as
  // an error whose message is the recorded reason; UNAVAILABLE and
  // "disabled" are recorded and return OK.
  Status Load(const std::string& path);

  // The search path in order: each entry a directory or a file.
  std::vector<std::string> SearchPath() const;

  // Every plugin file seen, in load order.
  const std::vector<PluginInfo>& plugins() const { return plugins_; }
  const PluginInfo* FindPlugin(std::string_view name) const;

  const Registry<DevicePlugin>& devices() const { return devices_; }
  const Registry<TransportPlugin>& transports() const { return transports_; }
  const Registry<OptimizerPlugin>& optimizers() const { return optimizers_; }
  // Keyed by backend ("gloo", "nccl").
  const Registry<CollectivesPlugin>& collectives() const { return collectives_; }

  // Config sections for plugins that are not loaded ("devices.cuda" on a
  // machine without the CUDA plugin), as warnings with their position.
  std::vector<config::ConfigError> UnusedSections() const;

  const config::Config& config() const { return config_; }

 private:
  // Outcome of one Load: OK, a refusal, or a configuration error.
  struct Outcome {
    Status status;
    bool config_error = false;
  };
  Outcome LoadOne(const std::string& path);
  // Takes |info| by reference so that |reason| may be built from it (an
  // argument moved from before the other is evaluated would read empty).
  Outcome Refuse(PluginInfo&& info, std::string reason);
  Outcome Register(PluginInfo& info, const weft_plugin_t* plugin);

  config::Config config_;
  PluginHostOptions options_;
  std::vector<PluginInfo> plugins_;
  std::set<std::string> seen_paths_;
  // Option values handed to plugins; they must outlive the plugins' use.
  std::vector<std::unique_ptr<config::OptionValues>> option_values_;
  // Libraries whose shutdown hook this host owes a call.
  std::vector<std::string> configured_;
  Registry<DevicePlugin> devices_{"device type"};
  Registry<TransportPlugin> transports_{"transport scheme"};
  Registry<OptimizerPlugin> optimizers_{"optimizer"};
  Registry<CollectivesPlugin> collectives_{"collectives backend"};
};

// The folder of the plugins built or installed with this libweft:
// <directory of libweft.so>/weft/plugins.
std::string DefaultPluginDir();

// Converts and checks a plugin's option declarations. The message names the
// option and what is wrong with it.
Expected<std::vector<config::OptionSpec>> ConvertOptionDefs(const weft_option_def_t* defs, size_t count);

}  // namespace weft::plugin

#endif  // WEFT_CORE_PLUGIN_PLUGIN_HOST_H_
