#include "core/plugin/plugin_host.h"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/base/logging.h"
#include "core/config/literal.h"
#include "core/plugin/host_services.h"
#include "core/plugin/linked_plugins.h"

namespace weft::plugin {
namespace fs = std::filesystem;

std::string_view KindName(PluginKind kind) {
  switch (kind) {
    case PluginKind::kDevice: return "device";
    case PluginKind::kTransport: return "transport";
    case PluginKind::kOptimizer: return "optimizer";
    case PluginKind::kCollectives: return "collectives";
  }
  return "plugin";
}

std::string_view SectionKind(PluginKind kind) {
  switch (kind) {
    case PluginKind::kDevice: return "devices";
    case PluginKind::kTransport: return "transports";
    case PluginKind::kOptimizer: return "optimizers";
    case PluginKind::kCollectives: return "collectives";
  }
  return "plugins";
}

std::string_view StateName(PluginState state) {
  switch (state) {
    case PluginState::kLoaded: return "loaded";
    case PluginState::kUnavailable: return "unavailable";
    case PluginState::kRefused: return "refused";
    case PluginState::kDisabled: return "disabled";
  }
  return "unknown";
}

namespace {

constexpr const char* kLogSource = "plugins";

// What init produced for one library, shared by every host in the process:
// init runs once per library (again only after shutdown).
struct LibraryEntry {
  const weft_plugin_t* plugin = nullptr;
  Status init_status;
  int users = 0;  // hosts that configured the plugin and owe it shutdown
};

struct LibraryCache {
  std::mutex mutex;
  std::map<std::string, LibraryEntry> entries;
  // Libraries are never unloaded: a plugin's code and static data must
  // outlive every pointer the host holds into it.
  std::vector<boost::dll::shared_library> keep_loaded;
  // Plugins linked into the program, by name (linked_plugins.h).
  std::map<std::string, LinkedPluginInit> linked;
};

LibraryCache& Cache() {
  static auto* cache = new LibraryCache();  // leaked on purpose, see keep_loaded
  return *cache;
}

bool IsSnakeName(const char* name) {
  if (name == nullptr || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  for (const char* c = name; *c != '\0'; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  }
  return true;
}

bool IsScheme(const char* scheme) {
  if (scheme == nullptr || !(scheme[0] >= 'a' && scheme[0] <= 'z')) return false;
  for (const char* c = scheme; *c != '\0'; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '+' || *c == '-' || *c == '.')) {
      return false;
    }
  }
  return true;
}

// The loader's own explanation of why |path| does not load; Boost.DLL
// reports only a generic error code.
std::string DlopenReason(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    dlclose(handle);
    return "the dynamic loader refused it";
  }
  const char* reason = dlerror();
  std::string text = reason != nullptr ? reason : "unknown reason";
  // dlerror repeats the path first; the caller already names the file.
  const std::string prefix = path + ": ";
  if (text.starts_with(prefix)) text = text.substr(prefix.size());
  return text;
}

// The kind and name a file announces by following the weft_<kind>_<name>.so
// convention ("device", "cpu" for weft_device_cpu.so); nothing otherwise.
// Used before the plugin itself can say (to skip disabled plugins, and to
// describe one that is unavailable from init).
struct FileNameInfo {
  std::optional<PluginKind> kind;
  std::string name;
};

FileNameInfo InfoFromFileName(const std::string& path) {
  const std::string stem = fs::path(path).stem().string();
  for (PluginKind kind :
       {PluginKind::kDevice, PluginKind::kTransport, PluginKind::kOptimizer, PluginKind::kCollectives}) {
    const std::string prefix = StrCat("weft_", KindName(kind), "_");
    if (stem.starts_with(prefix)) return {kind, stem.substr(prefix.size())};
  }
  return {};
}

bool IsPluginFileName(const fs::path& path) {
  const std::string name = path.filename().string();
  return name.starts_with("weft_") && name.ends_with(".so");
}

Status ValidateTransportTable(const weft_transport_plugin_t* t) {
  if (t->struct_size < WEFT_TRANSPORT_PLUGIN_SIZE_V1_0) {
    return InvalidArgumentError("weft_transport_plugin_t.struct_size is ", t->struct_size, " bytes, smaller than the ",
                                WEFT_TRANSPORT_PLUGIN_SIZE_V1_0,
                                " bytes of ABI 1.0; rebuild the plugin against the Weft SDK");
  }
  if (!IsScheme(t->scheme)) {
    return InvalidArgumentError("scheme ", Quote(t->scheme ? t->scheme : "(null)"),
                                " must be a lower-case URL scheme (\"tcp\", \"zmq+tcp\")");
  }
#define WEFT_REQUIRE_MEMBER(member)                                                             \
  if (t->member == nullptr) {                                                                   \
    return InvalidArgumentError("required member weft_transport_plugin_t." #member " is NULL"); \
  }
  WEFT_REQUIRE_MEMBER(endpoint_open)
  WEFT_REQUIRE_MEMBER(endpoint_close)
  WEFT_REQUIRE_MEMBER(endpoint_address)
  WEFT_REQUIRE_MEMBER(connection_open)
  WEFT_REQUIRE_MEMBER(connection_close)
  WEFT_REQUIRE_MEMBER(send)
#undef WEFT_REQUIRE_MEMBER
  if ((t->memory_register == nullptr) != (t->memory_unregister == nullptr)) {
    return InvalidArgumentError(
        "memory_register and memory_unregister must both be set or both "
        "be NULL");
  }
  return Status();
}

Expected<std::vector<config::OptionSpec>> ValidateOptimizerTable(const weft_optimizer_plugin_t* t) {
  if (t->struct_size < WEFT_OPTIMIZER_PLUGIN_SIZE_V1_0) {
    return InvalidArgumentError("weft_optimizer_plugin_t.struct_size is ", t->struct_size, " bytes, smaller than the ",
                                WEFT_OPTIMIZER_PLUGIN_SIZE_V1_0,
                                " bytes of ABI 1.0; rebuild the plugin against the Weft SDK");
  }
  if (!IsSnakeName(t->name)) {
    return InvalidArgumentError("optimizer name ", Quote(t->name ? t->name : "(null)"), " must be lower_snake_case");
  }
#define WEFT_REQUIRE_MEMBER(member)                                                             \
  if (t->member == nullptr) {                                                                   \
    return InvalidArgumentError("required member weft_optimizer_plugin_t." #member " is NULL"); \
  }
  WEFT_REQUIRE_MEMBER(create)
  WEFT_REQUIRE_MEMBER(destroy)
  WEFT_REQUIRE_MEMBER(slots)
  WEFT_REQUIRE_MEMBER(build_update)
#undef WEFT_REQUIRE_MEMBER
  auto specs = ConvertOptionDefs(t->hyperparameters, t->num_hyperparameters);
  if (!specs.ok()) return specs.status().WithContext("hyperparameters");
  return specs;
}

Status ValidateCollectivesTable(const weft_collectives_plugin_t* t, CollectivesPlugin* out) {
  if (t->struct_size < WEFT_COLLECTIVES_PLUGIN_SIZE_V1_2) {
    return InvalidArgumentError("weft_collectives_plugin_t.struct_size is ", t->struct_size,
                                " bytes, smaller than the ", WEFT_COLLECTIVES_PLUGIN_SIZE_V1_2,
                                " bytes of ABI 1.2; rebuild the plugin against the Weft SDK");
  }
  if (!IsSnakeName(t->backend)) {
    return InvalidArgumentError("collectives backend ", Quote(t->backend ? t->backend : "(null)"),
                                " must be lower_snake_case (\"gloo\")");
  }
#define WEFT_REQUIRE_MEMBER(member)                                                               \
  if (t->member == nullptr) {                                                                     \
    return InvalidArgumentError("required member weft_collectives_plugin_t." #member " is NULL"); \
  }
  WEFT_REQUIRE_MEMBER(device_types)
  WEFT_REQUIRE_MEMBER(dtypes)
  WEFT_REQUIRE_MEMBER(comm_create)
  WEFT_REQUIRE_MEMBER(comm_destroy)
  WEFT_REQUIRE_MEMBER(all_reduce)
  WEFT_REQUIRE_MEMBER(all_gather)
  WEFT_REQUIRE_MEMBER(broadcast)
#undef WEFT_REQUIRE_MEMBER
  if (t->num_device_types == 0) return InvalidArgumentError("num_device_types is 0: it serves no memory");
  if (t->num_dtypes == 0) return InvalidArgumentError("num_dtypes is 0: it serves no element type");
  for (std::size_t i = 0; i < t->num_device_types; ++i) {
    if (t->device_types[i] == nullptr || t->device_types[i][0] == '\0') {
      return InvalidArgumentError("device_types[", i, "] is empty");
    }
    out->device_types.emplace_back(t->device_types[i]);
  }
  for (std::size_t i = 0; i < t->num_dtypes; ++i) {
    const char* name = weft_dtype_name(t->dtypes[i]);
    if (name == nullptr || t->dtypes[i] == WEFT_DTYPE_STRING || t->dtypes[i] == WEFT_DTYPE_RESOURCE) {
      return InvalidArgumentError("dtypes[", i, "] is ", t->dtypes[i], ", not a numeric element type");
    }
    out->dtypes.push_back(t->dtypes[i]);
  }
  out->table = t;
  return Status();
}

}  // namespace

bool CollectivesPlugin::Serves(std::string_view device_type) const {
  return std::find(device_types.begin(), device_types.end(), device_type) != device_types.end();
}

bool CollectivesPlugin::Serves(std::string_view device_type, weft_dtype_t dtype) const {
  return Serves(device_type) && std::find(dtypes.begin(), dtypes.end(), dtype) != dtypes.end();
}

Expected<std::vector<config::OptionSpec>> ConvertOptionDefs(const weft_option_def_t* defs, size_t count) {
  std::vector<config::OptionSpec> specs;
  if (count == 0) return specs;
  if (defs == nullptr) return InvalidArgumentError("num_options is ", count, " but options is NULL");
  const std::size_t stride = defs->struct_size;
  if (stride < WEFT_OPTION_DEF_SIZE_V1_0 || stride % alignof(weft_option_def_t) != 0) {
    return InvalidArgumentError("weft_option_def_t.struct_size is ", stride,
                                " bytes, not a valid size for ABI 1.0 (at least ", WEFT_OPTION_DEF_SIZE_V1_0,
                                "); rebuild the plugin against the "
                                "Weft SDK");
  }
  for (std::size_t i = 0; i < count; ++i) {
    const weft_option_def_t* d = WEFT_ARRAY_AT(weft_option_def_t, defs, i);
    if (d->struct_size != stride) {
      return InvalidArgumentError("option #", i, ": struct_size ", d->struct_size, " differs from the first option's ",
                                  stride);
    }
    if (!IsSnakeName(d->key)) {
      return InvalidArgumentError("option #", i, ": key ", Quote(d->key ? d->key : "(null)"),
                                  " must be lower_snake_case");
    }
    config::OptionSpec spec;
    spec.key = d->key;
    switch (d->type) {
      case WEFT_OPTION_BOOL: spec.type = config::OptionType::kBool; break;
      case WEFT_OPTION_INT: spec.type = config::OptionType::kInt; break;
      case WEFT_OPTION_FLOAT: spec.type = config::OptionType::kFloat; break;
      case WEFT_OPTION_STRING: spec.type = config::OptionType::kString; break;
      default: return InvalidArgumentError("option '", spec.key, "': unknown type ", d->type);
    }
    if (d->doc != nullptr) spec.doc = d->doc;
    if (d->has_min) spec.min = d->min_value;
    if (d->has_max) spec.max = d->max_value;
    if (d->num_choices > 0) {
      if (d->choices == nullptr) {
        return InvalidArgumentError("option '", spec.key, "': num_choices is ", d->num_choices, " but choices is NULL");
      }
      for (std::size_t c = 0; c < d->num_choices; ++c) {
        if (d->choices[c] == nullptr) {
          return InvalidArgumentError("option '", spec.key, "': choice #", c, " is NULL");
        }
        spec.choices.emplace_back(d->choices[c]);
      }
    }
    if (d->default_value != nullptr) {
      auto value = config::ParseLiteral(d->default_value);
      if (!value.ok() || !config::ValueFits(*value, spec)) {
        return InvalidArgumentError("option '", spec.key, "': default ", Quote(d->default_value), " is not ",
                                    config::DescribeExpected(spec));
      }
      spec.default_value = *value;
    }
    for (const config::OptionSpec& earlier : specs) {
      if (earlier.key == spec.key) {
        return InvalidArgumentError("option '", spec.key, "' is declared twice");
      }
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::string DefaultPluginDir() {
  std::error_code ec;
  const auto self = boost::dll::this_line_location(ec);
  if (ec) return "";
  return (fs::path(self.string()).parent_path() / "weft" / "plugins").string();
}

PluginHost::PluginHost(config::Config config, PluginHostOptions options)
    : config_(std::move(config)), options_(std::move(options)) {}

PluginHost::~PluginHost() {
  LibraryCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  for (auto it = configured_.rbegin(); it != configured_.rend(); ++it) {
    auto entry = cache.entries.find(*it);
    if (entry == cache.entries.end() || --entry->second.users > 0) continue;
    const weft_plugin_t* plugin = entry->second.plugin;
    cache.entries.erase(entry);
    if (plugin != nullptr && plugin->shutdown != nullptr) {
      try {
        plugin->shutdown();
      } catch (...) {
        WEFT_LOG_FROM(ERROR, kLogSource) << "plugin " << *it << ": shutdown let a C++ exception escape";
      }
    }
  }
}

std::vector<std::string> PluginHost::SearchPath() const {
  std::vector<std::string> path = config_.plugins.paths;
  if (options_.use_environment) {
    if (const char* env = std::getenv("WEFT_PLUGIN_PATH"); env != nullptr) {
      for (const std::string& entry : StrSplit(env, ':')) {
        if (!entry.empty()) path.push_back(entry);
      }
    }
  }
  if (options_.use_builtin_folder) {
    const std::string builtin = options_.builtin_folder.empty() ? DefaultPluginDir() : options_.builtin_folder;
    if (!builtin.empty()) path.push_back(builtin);
  }
  return path;
}

const PluginInfo* PluginHost::FindPlugin(std::string_view name) const {
  for (const PluginInfo& info : plugins_) {
    if (!info.name.empty() && info.name == name) return &info;
  }
  return nullptr;
}

Status PluginHost::LoadAll() {
  const std::size_t num_config_paths = config_.plugins.paths.size();
  const std::vector<std::string> search = SearchPath();
  for (std::size_t i = 0; i < search.size(); ++i) {
    const std::string& entry = search[i];
    std::error_code ec;
    const bool is_builtin = options_.use_builtin_folder && i + 1 == search.size();
    if (!fs::exists(entry, ec)) {
      if (i < num_config_paths) {
        WEFT_LOG_FROM(WARNING, kLogSource)
            << config_.source << ": plugins.paths: " << Quote(entry) << " does not exist";
      } else if (!is_builtin) {
        WEFT_LOG_FROM(WARNING, kLogSource) << "WEFT_PLUGIN_PATH: " << Quote(entry) << " does not exist";
      } else {
        WEFT_LOG_FROM(DEBUG, kLogSource) << "built-in plugin folder " << Quote(entry) << " does not exist";
      }
      continue;
    }
    std::vector<std::string> files;
    if (fs::is_directory(entry, ec)) {
      for (const fs::directory_entry& file : fs::directory_iterator(entry, ec)) {
        if (IsPluginFileName(file.path())) files.push_back(file.path().string());
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(entry);
    }
    for (const std::string& file : files) {
      Outcome outcome = LoadOne(file);
      if (outcome.status.ok()) continue;
      if (outcome.config_error || config_.plugins.strict) return outcome.status;
      WEFT_LOG_FROM(WARNING, kLogSource) << outcome.status.message();
    }
  }
  return Status();
}

Status PluginHost::Load(const std::string& path) { return LoadOne(path).status; }

PluginHost::Outcome PluginHost::Refuse(PluginInfo&& info, std::string reason) {
  info.state = PluginState::kRefused;
  info.reason = std::move(reason);
  Status status(Code::kFailedPrecondition, StrCat("plugin ", info.path, " refused: ", info.reason));
  plugins_.push_back(std::move(info));
  return Outcome{status, false};
}

namespace {

// A refusal's reason, as an error InitLibrary and InitLinked return.
Status Refusal(std::string reason) { return Status(Code::kFailedPrecondition, std::move(reason)); }

// Runs |init| once for the library cached as |key|, and records what it
// gave (the caller holds the cache's lock).
Expected<LibraryEntry> RunInit(LibraryCache& cache, const std::string& key, LinkedPluginInit init) {
  LibraryEntry entry;
  const weft_plugin_t* plugin = nullptr;
  try {
    entry.init_status = TakeStatus(init(HostTable(), &plugin));
  } catch (const std::exception& e) {
    return Refusal(StrCat("init let a C++ exception escape (", e.what(),
                          "); plugins must run entry points inside weft::sdk::Guard"));
  } catch (...) {
    return Refusal("init let a C++ exception escape; plugins must run entry points inside weft::sdk::Guard");
  }
  entry.plugin = entry.init_status.ok() ? plugin : nullptr;
  return cache.entries.emplace(key, std::move(entry)).first->second;
}

// The plugin library at |canonical|: loaded and its init run once per
// process, or why it is refused.
Expected<LibraryEntry> InitLibrary(const std::string& canonical) {
  LibraryCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (auto cached = cache.entries.find(canonical); cached != cache.entries.end()) return cached->second;
  boost::dll::shared_library library;
  std::error_code load_error;
  library.load(canonical, boost::dll::load_mode::rtld_local | boost::dll::load_mode::rtld_now, load_error);
  if (load_error) return Refusal(StrCat("not a loadable shared library: ", DlopenReason(canonical)));
  if (!library.has(WEFT_PLUGIN_ENTRY_SYMBOL)) {
    for (int major = 0; major < 100; ++major) {
      if (major == WEFT_ABI_VERSION_MAJOR) continue;
      if (library.has(StrCat("weft_plugin_init_v", major))) {
        return Refusal(StrCat("built for plugin ABI v", major, " (it exports weft_plugin_init_v", major,
                              "), but this weft speaks ABI v", WEFT_ABI_VERSION_MAJOR, ".", WEFT_ABI_VERSION_MINOR,
                              "; rebuild the plugin against a matching Weft SDK"));
      }
    }
    return Refusal(StrCat("no entry symbol ", WEFT_PLUGIN_ENTRY_SYMBOL,
                          "; it is not a Weft plugin, or was built without WEFT_PLUGIN_EXPORT"));
  }
  auto init = library.get<weft_status_t(const weft_host_t*, const weft_plugin_t**)>(WEFT_PLUGIN_ENTRY_SYMBOL);
  cache.keep_loaded.push_back(library);
  return RunInit(cache, canonical, init);
}

// The plugin linked in as |path| ("linked:cpu"), its init run once per
// process (linked_plugins.h).
Expected<LibraryEntry> InitLinked(const std::string& path) {
  LibraryCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (auto cached = cache.entries.find(path); cached != cache.entries.end()) return cached->second;
  const std::string name = path.substr(kLinkedPrefix.size());
  auto linked = cache.linked.find(name);
  if (linked == cache.linked.end()) {
    std::vector<std::string> names;
    for (const auto& [n, init] : cache.linked) names.push_back(n);
    return Refusal(StrCat("no plugin '", name, "' is linked into this program (linked in: ",
                          names.empty() ? std::string("none") : StrJoin(names, ", "), ")"));
  }
  return RunInit(cache, path, linked->second);
}

}  // namespace

void RegisterLinkedPlugin(const std::string& name, LinkedPluginInit init) {
  LibraryCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.linked[name] = init;
}

LinkedPluginInit FindLinkedPlugin(std::string_view name) {
  LibraryCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.linked.find(std::string(name));
  return it == cache.linked.end() ? nullptr : it->second;
}

PluginHost::Outcome PluginHost::LoadOne(const std::string& path) {
  PluginInfo info;
  FileNameInfo from_file;
  Expected<LibraryEntry> loaded = LibraryEntry();
  if (path.starts_with(kLinkedPrefix)) {
    info.path = path;
    if (!seen_paths_.insert(path).second) return Outcome{};
    loaded = InitLinked(path);
  } else {
    info.path = fs::absolute(path).lexically_normal().string();
#if defined(WEFT_LITE)
    // The lite build (docs/lite.md) links its plugins in and opens no file.
    return Refuse(std::move(info), "the lite build loads no plugin files, only the plugins linked into it");
#endif
    std::error_code ec;
    const fs::path canonical = fs::canonical(path, ec);
    if (ec) return Refuse(std::move(info), StrCat("cannot open it: ", ec.message()));
    if (!seen_paths_.insert(canonical.string()).second) return Outcome{};
    if (!fs::is_regular_file(canonical, ec)) return Refuse(std::move(info), "not a regular file");

    from_file = InfoFromFileName(info.path);
    const auto& disabled = config_.plugins.disable;
    if (!from_file.name.empty() && std::find(disabled.begin(), disabled.end(), from_file.name) != disabled.end()) {
      info.name = from_file.name;
      info.kind = from_file.kind;
      info.state = PluginState::kDisabled;
      info.reason = StrCat("disabled by plugins.disable in ", config_.source);
      plugins_.push_back(std::move(info));
      return Outcome{};
    }
    if (from_file.kind && std::find(options_.skip_kinds.begin(), options_.skip_kinds.end(), *from_file.kind) !=
                              options_.skip_kinds.end()) {
      return Outcome{};
    }
    loaded = InitLibrary(canonical.string());
  }
  if (!loaded.ok()) return Refuse(std::move(info), loaded.status().message());
  const LibraryEntry entry = *loaded;

  if (entry.init_status.code() == Code::kUnavailable) {
    info.state = PluginState::kUnavailable;
    info.reason = entry.init_status.message();
    info.name = from_file.name;
    info.kind = from_file.kind;
    WEFT_LOG_FROM(DEBUG, kLogSource) << "plugin " << info.path << " is unavailable: " << info.reason;
    plugins_.push_back(std::move(info));
    return Outcome{};
  }
  if (!entry.init_status.ok()) {
    return Refuse(std::move(info), StrCat("init failed: ", entry.init_status.ToString()));
  }
  if (entry.plugin == nullptr) {
    return Refuse(std::move(info), "init returned OK but no plugin description");
  }
  Outcome outcome = Register(info, entry.plugin);
  if (!outcome.status.ok() || info.state == PluginState::kRefused) return outcome;
  plugins_.push_back(std::move(info));
  return outcome;
}

PluginHost::Outcome PluginHost::Register(PluginInfo& info, const weft_plugin_t* plugin) {
  if (plugin->struct_size < WEFT_PLUGIN_SIZE_V1_0) {
    return Refuse(std::move(info),
                  StrCat("weft_plugin_t.struct_size is ", plugin->struct_size, " bytes, smaller than the ",
                         WEFT_PLUGIN_SIZE_V1_0, " bytes of ABI 1.0; rebuild the plugin against the Weft SDK"));
  }
  info.abi_major = plugin->abi_major;
  info.abi_minor = plugin->abi_minor;
  if (plugin->abi_major != WEFT_ABI_VERSION_MAJOR) {
    return Refuse(std::move(info), StrCat("built for plugin ABI v", plugin->abi_major, ".", plugin->abi_minor,
                                          ", but this weft speaks ABI v", WEFT_ABI_VERSION_MAJOR, ".",
                                          WEFT_ABI_VERSION_MINOR, "; rebuild the plugin against a matching Weft SDK"));
  }
  if (!IsSnakeName(plugin->name)) {
    return Refuse(std::move(info),
                  StrCat("plugin name ", Quote(plugin->name ? plugin->name : "(null)"), " must be lower_snake_case"));
  }
  info.name = plugin->name;
  if (plugin->version == nullptr || plugin->version[0] == '\0') {
    return Refuse(std::move(info), "version is empty");
  }
  info.version = plugin->version;
  if (plugin->description != nullptr) info.description = plugin->description;

  for (const PluginInfo& other : plugins_) {
    if (other.name == info.name && (other.state == PluginState::kLoaded || other.state == PluginState::kUnavailable)) {
      return Refuse(std::move(info), StrCat("name '", info.name, "' is already taken by ", other.path));
    }
  }
  const auto& disabled = config_.plugins.disable;
  if (std::find(disabled.begin(), disabled.end(), info.name) != disabled.end()) {
    info.state = PluginState::kDisabled;
    info.reason = StrCat("disabled by plugins.disable in ", config_.source);
    return Outcome{};
  }

  // The kind and its table.
  std::vector<config::OptionSpec> hyperparameters;
  CollectivesPlugin collectives;
  Status table_status;
  switch (plugin->kind) {
    case WEFT_PLUGIN_DEVICE:
      info.kind = PluginKind::kDevice;
      table_status = plugin->device == nullptr ? InvalidArgumentError("kind is device but the device table is NULL")
                                               : ValidateDeviceTable(plugin->device);
      break;
    case WEFT_PLUGIN_TRANSPORT:
      info.kind = PluginKind::kTransport;
      table_status = plugin->transport == nullptr
                         ? InvalidArgumentError("kind is transport but the transport table is NULL")
                         : ValidateTransportTable(plugin->transport);
      break;
    case WEFT_PLUGIN_OPTIMIZER: {
      info.kind = PluginKind::kOptimizer;
      if (plugin->optimizer == nullptr) {
        table_status = InvalidArgumentError("kind is optimizer but the optimizer table is NULL");
        break;
      }
      auto specs = ValidateOptimizerTable(plugin->optimizer);
      if (specs.ok()) {
        hyperparameters = std::move(*specs);
      } else {
        table_status = specs.status();
      }
      break;
    }
    case WEFT_PLUGIN_COLLECTIVES:
      info.kind = PluginKind::kCollectives;
      if (!WEFT_STRUCT_HAS(plugin, weft_plugin_t, collectives)) {
        table_status = InvalidArgumentError(
            "kind is collectives but its description predates ABI 1.2 (no collectives member); rebuild the plugin "
            "against the Weft SDK");
      } else if (plugin->collectives == nullptr) {
        table_status = InvalidArgumentError("kind is collectives but the collectives table is NULL");
      } else {
        table_status = ValidateCollectivesTable(plugin->collectives, &collectives);
      }
      break;
    default:
      table_status = InvalidArgumentError("unknown kind ", plugin->kind,
                                          " (expected 1 device, 2 transport, 3 optimizer or 4 collectives)");
  }
  if (!table_status.ok()) return Refuse(std::move(info), table_status.message());

  auto specs = ConvertOptionDefs(plugin->options, plugin->num_options);
  if (!specs.ok()) return Refuse(std::move(info), specs.status().message());
  info.options = *specs;

  // The plugin's section of the config.
  const std::string section_path = StrCat(SectionKind(*info.kind), ".", info.name);
  const config::Section* section = config_.PluginSection(SectionKind(*info.kind), info.name);
  auto values = config::ValidateOptions(section, section_path, info.options);
  if (!values.ok()) {
    info.state = PluginState::kRefused;
    info.reason = StrCat("invalid [", section_path, "] section in ", config_.source);
    plugins_.push_back(info);
    return Outcome{values.status(), true};
  }
  option_values_.push_back(std::make_unique<config::OptionValues>(std::move(*values)));
  const config::OptionValues* options = option_values_.back().get();

  // From here on the plugin is configured and owes a shutdown call.
  {
    LibraryCache& cache = Cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    // A linked plugin's cache key is its label (it has no file).
    std::error_code ec;
    std::string canonical = fs::canonical(info.path, ec).string();
    if (ec) canonical = info.path;
    auto entry = cache.entries.find(canonical);
    if (entry != cache.entries.end()) {
      ++entry->second.users;
      configured_.push_back(canonical);
    }
  }
  if (plugin->configure != nullptr) {
    Status status;
    try {
      status = TakeStatus(plugin->configure(AsOptionsHandle(options)));
    } catch (...) {
      status = InternalError("configure let a C++ exception escape");
    }
    if (status.code() == Code::kUnavailable) {
      info.state = PluginState::kUnavailable;
      info.reason = status.message();
      WEFT_LOG_FROM(DEBUG, kLogSource) << "plugin '" << info.name << "' (" << info.path
                                       << ") is unavailable: " << info.reason;
      return Outcome{};
    }
    if (!status.ok()) return Refuse(std::move(info), StrCat("configure failed: ", status.ToString()));
  }

  const std::string owner = StrCat("plugin '", info.name, "' (", info.path, ")");
  Status registered;
  switch (*info.kind) {
    case PluginKind::kDevice: {
      auto device_plugin = std::make_unique<DevicePlugin>(info.name, plugin->device);
      if (options_.defer_device_count) {
        registered = devices_.Add(plugin->device->device_type, std::move(device_plugin), owner);
        break;
      }
      auto count = device_plugin->DeviceCount();
      if (count.status().code() == Code::kUnavailable || (count.ok() && *count == 0)) {
        info.state = PluginState::kUnavailable;
        info.reason = count.ok() ? std::string("it found no devices") : count.status().message();
        WEFT_LOG_FROM(DEBUG, kLogSource) << "plugin '" << info.name << "' (" << info.path
                                         << ") is unavailable: " << info.reason;
        return Outcome{};
      }
      if (!count.ok()) {
        return Refuse(std::move(info), StrCat("device_count failed: ", count.status().ToString()));
      }
      registered = devices_.Add(plugin->device->device_type, std::move(device_plugin), owner);
      break;
    }
    case PluginKind::kTransport:
      registered =
          transports_.Add(plugin->transport->scheme,
                          std::make_unique<TransportPlugin>(TransportPlugin{info.name, plugin->transport}), owner);
      break;
    case PluginKind::kOptimizer:
      registered = optimizers_.Add(
          plugin->optimizer->name,
          std::make_unique<OptimizerPlugin>(OptimizerPlugin{info.name, plugin->optimizer, std::move(hyperparameters)}),
          owner);
      break;
    case PluginKind::kCollectives:
      collectives.plugin_name = info.name;
      registered = collectives_.Add(plugin->collectives->backend,
                                    std::make_unique<CollectivesPlugin>(std::move(collectives)), owner);
      break;
  }
  if (!registered.ok()) return Refuse(std::move(info), registered.message());
  info.state = PluginState::kLoaded;
  WEFT_LOG_FROM(DEBUG, kLogSource) << "loaded " << KindName(*info.kind) << " plugin '" << info.name << "' "
                                   << info.version << " from " << info.path;
  return Outcome{};
}

std::vector<config::ConfigError> PluginHost::UnusedSections() const {
  std::vector<config::ConfigError> warnings;
  for (const auto& [path, section] : config_.plugin_sections) {
    bool used = false;
    for (PluginKind kind : options_.skip_kinds) used = used || path.starts_with(StrCat(SectionKind(kind), "."));
    for (const PluginInfo& info : plugins_) {
      if (info.kind && info.state != PluginState::kRefused && StrCat(SectionKind(*info.kind), ".", info.name) == path) {
        used = true;
      }
    }
    if (!used) {
      const std::string name = path.substr(path.find('.') + 1);
      warnings.push_back({section.pos, path, StrCat("no plugin named '", name, "' is loaded; section ignored")});
    }
  }
  return warnings;
}

}  // namespace weft::plugin
