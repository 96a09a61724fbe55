// The typed configuration of a Weft process, loaded from TOML.
//
// One file configures a process: which threads to use, where plugins are,
// how to log, and each plugin's own section. Everything is validated when
// the file is loaded, and every problem is reported at once with its
// position:
//
//   local.toml:3:20: runtime.inter_op_threads: expected an integer >= 1, got "two"
//
// The sections the core owns are typed here; plugin sections
// ([devices.<name>], [transports.<name>], [optimizers.<name>]) are kept as
// written and checked against the plugin's declared options once it is
// loaded (see options.h and core/plugin). The model grows by adding a
// section struct and its specs in config.cc; later issues add [cluster],
// [training] and [checkpoint].
//
// configs/local.toml is the embedded default: a process started without a
// config file behaves as if it had been given that file.
#ifndef WEFT_CORE_CONFIG_CONFIG_H_
#define WEFT_CORE_CONFIG_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/logging.h"
#include "core/base/status.h"
#include "core/config/options.h"
#include "core/config/value.h"

namespace weft::config {

// [runtime]: threads. Unset means "derived from the core count".
struct RuntimeConfig {
  std::optional<int64_t> inter_op_threads;
  std::optional<int64_t> intra_op_threads;
};

// [plugins]: where plugins come from.
struct PluginsConfig {
  // Directories or plugin files, searched before WEFT_PLUGIN_PATH and the
  // built-in folder. Relative paths are resolved against the directory of
  // the config file.
  std::vector<std::string> paths;
  // Plugin names not to load (matched against the file name
  // weft_<kind>_<name>.so before loading, and the name after init).
  std::vector<std::string> disable;
  // When true, a plugin that is refused stops the process instead of being
  // logged and skipped.
  bool strict = false;
};

// [logging]
struct LoggingConfig {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
  std::string file;  // empty: stderr
};

struct Config {
  // The file it came from, or "<embedded configs/local.toml>".
  std::string source;
  RuntimeConfig runtime;
  PluginsConfig plugins;
  LoggingConfig logging;
  // Plugin sections by path ("devices.cpu").
  std::map<std::string, Section> plugin_sections;

  // The section for plugin |name| of |kind| ("devices", "transports",
  // "optimizers"), or nullptr.
  const Section* PluginSection(std::string_view kind, std::string_view name) const;
};

// Parses |text|, reporting positions against |source_name|. Relative
// plugin paths are resolved against |base_dir| (the file's directory).
Expected<Config> ParseConfig(std::string_view text, std::string_view source_name,
                             std::string_view base_dir);

// Reads and parses the file at |path|. A missing or unreadable file is an
// error naming it.
Expected<Config> LoadConfigFile(const std::string& path);

// The text of configs/local.toml, compiled into the library.
std::string_view EmbeddedDefaultText();

// The embedded default, parsed.
Expected<Config> DefaultConfig();

// The documented keys of the core's sections, for `weft config keys` and
// the docs: "runtime.inter_op_threads" -> its spec.
std::vector<std::pair<std::string, OptionSpec>> CoreKeys();

}  // namespace weft::config

#endif  // WEFT_CORE_CONFIG_CONFIG_H_
