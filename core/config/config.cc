#include "core/config/config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config/internal/toml_convert.h"

namespace weft::config {
namespace {

constexpr const char* kEmbeddedSource = "<embedded configs/local.toml>";

// The kinds of plugin section, in the order the docs list them.
constexpr std::string_view kPluginKinds[] = {"devices", "transports", "optimizers"};

OptionSpec Spec(std::string key, OptionType type, std::string doc) {
  OptionSpec spec;
  spec.key = std::move(key);
  spec.type = type;
  spec.doc = std::move(doc);
  return spec;
}

Value Default(std::string_view toml_text) {
  auto value = ParseTomlValue(toml_text);
  return value.ok() ? *value : Value{};
}

std::vector<OptionSpec> RuntimeSpecs() {
  OptionSpec inter = Spec("inter_op_threads", OptionType::kInt,
                          "Threads that run independent graph nodes concurrently. "
                          "Unset: derived from the number of cores.");
  inter.min = 1;
  OptionSpec intra = Spec("intra_op_threads", OptionType::kInt,
                          "Threads one kernel may use (oneDNN, parallel loops). "
                          "Unset: derived from the number of cores.");
  intra.min = 1;
  return {inter, intra};
}

std::vector<OptionSpec> PluginsSpecs() {
  OptionSpec paths = Spec("paths", OptionType::kStringList,
                          "Plugin directories or files, searched before WEFT_PLUGIN_PATH and "
                          "the built-in folder. Relative to this file's directory.");
  paths.default_value = Default("[]");
  OptionSpec disable = Spec("disable", OptionType::kStringList, "Names of plugins not to load.");
  disable.default_value = Default("[]");
  OptionSpec strict = Spec("strict", OptionType::kBool,
                           "Stop when a plugin is refused, instead of logging it and going on.");
  strict.default_value = Default("false");
  return {paths, disable, strict};
}

std::vector<OptionSpec> LoggingSpecs() {
  OptionSpec level = Spec("level", OptionType::kString, "The least severe level written.");
  level.choices = {"trace", "debug", "info", "warning", "error", "off"};
  level.default_value = Default("\"info\"");
  OptionSpec format = Spec("format", OptionType::kString,
                           "\"text\" for people, \"json\" for one JSON object per line.");
  format.choices = {"text", "json"};
  format.default_value = Default("\"text\"");
  OptionSpec file = Spec("file", OptionType::kString,
                         "Append to this file instead of writing to stderr. Empty: stderr.");
  file.default_value = Default("\"\"");
  return {level, format, file};
}

struct CoreSection {
  std::string_view name;
  std::vector<OptionSpec> (*specs)();
};

constexpr CoreSection kCoreSections[] = {
    {"runtime", RuntimeSpecs},
    {"plugins", PluginsSpecs},
    {"logging", LoggingSpecs},
};

// Reads the scalar keys of |table| into a Section.
Section ToSection(const toml::table& table, std::string path, const SourcePos& pos,
                  std::string_view file) {
  Section section;
  section.path = std::move(path);
  section.pos = pos;
  for (const auto& [key, node] : table) {
    const SourcePos key_pos = internal::PosOf(key.source(), file);
    section.values[std::string(key.str())] = internal::ConvertNode(node, file, key_pos);
  }
  return section;
}

std::string ResolvePath(const std::string& path, std::string_view base_dir) {
  if (path.empty() || base_dir.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

// Fills the typed sections from validated values. Only called once
// validation passed, so the getters cannot fail.
void ApplyRuntime(const OptionValues& values, RuntimeConfig& out) {
  if (auto v = values.GetInt("inter_op_threads"); v.ok()) out.inter_op_threads = *v;
  if (auto v = values.GetInt("intra_op_threads"); v.ok()) out.intra_op_threads = *v;
}

void ApplyPlugins(const OptionValues& values, std::string_view base_dir, PluginsConfig& out) {
  out.paths.clear();
  if (auto v = values.GetStringList("paths"); v.ok()) {
    for (const std::string& path : *v) out.paths.push_back(ResolvePath(path, base_dir));
  }
  if (auto v = values.GetStringList("disable"); v.ok()) out.disable = *v;
  if (auto v = values.GetBool("strict"); v.ok()) out.strict = *v;
}

void ApplyLogging(const OptionValues& values, LoggingConfig& out) {
  if (auto v = values.GetString("level"); v.ok()) {
    out.level = ParseLogLevel(**v).value_or(LogLevel::kInfo);
  }
  if (auto v = values.GetString("format"); v.ok()) {
    out.format = **v == "json" ? LogFormat::kJson : LogFormat::kText;
  }
  if (auto v = values.GetString("file"); v.ok()) out.file = **v;
}

bool IsPluginName(std::string_view name) {
  if (name.empty() || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// Collects the errors of one core section, appending them to |errors|.
void CheckCoreSection(const CoreSection& core, const toml::node& node, std::string_view file,
                      const SourcePos& key_pos, std::vector<ConfigError>& errors) {
  if (!node.is_table()) {
    errors.push_back({internal::PosOf(node.source(), file), std::string(core.name),
                      StrCat("expected a table [", core.name, "], got ",
                             internal::ConvertNode(node, file, key_pos).text)});
    return;
  }
  const Section section = ToSection(*node.as_table(), std::string(core.name),
                                    internal::PosOf(node.source(), file), file);
  for (ConfigError& error : CheckOptions(&section, core.name, core.specs(), nullptr)) {
    errors.push_back(std::move(error));
  }
}

void CheckPluginKind(std::string_view kind, const toml::node& node, std::string_view file,
                     const SourcePos& key_pos, Config& config,
                     std::vector<ConfigError>& errors) {
  if (!node.is_table()) {
    errors.push_back({internal::PosOf(node.source(), file), std::string(kind),
                      StrCat("expected tables [", kind, ".<plugin name>], got ",
                             internal::ConvertNode(node, file, key_pos).text)});
    return;
  }
  for (const auto& [name, child] : *node.as_table()) {
    const std::string path = StrCat(kind, ".", name.str());
    const SourcePos name_pos = internal::PosOf(name.source(), file);
    if (!IsPluginName(name.str())) {
      errors.push_back({name_pos, path,
                        "plugin names are lower_snake_case (letters, digits and '_', "
                        "starting with a letter)"});
      continue;
    }
    if (!child.is_table()) {
      errors.push_back({internal::PosOf(child.source(), file), path,
                        StrCat("expected a table [", path, "], got ",
                               internal::ConvertNode(child, file, name_pos).text)});
      continue;
    }
    config.plugin_sections[path] =
        ToSection(*child.as_table(), path, internal::PosOf(child.source(), file), file);
  }
}

}  // namespace

const Section* Config::PluginSection(std::string_view kind, std::string_view name) const {
  auto it = plugin_sections.find(StrCat(kind, ".", name));
  return it == plugin_sections.end() ? nullptr : &it->second;
}

Expected<Config> ParseConfig(std::string_view text, std::string_view source_name,
                             std::string_view base_dir) {
  WEFT_ASSIGN_OR_RETURN(toml::table document, internal::ParseDocument(text, source_name));

  Config config;
  config.source = std::string(source_name);
  std::vector<ConfigError> errors;

  std::vector<std::string> known;
  for (const CoreSection& core : kCoreSections) known.emplace_back(core.name);
  for (std::string_view kind : kPluginKinds) known.emplace_back(kind);

  for (const auto& [key, node] : document) {
    const SourcePos key_pos = internal::PosOf(key.source(), source_name);
    const std::string_view name = key.str();
    bool handled = false;
    for (const CoreSection& core : kCoreSections) {
      if (core.name == name) {
        CheckCoreSection(core, node, source_name, key_pos, errors);
        handled = true;
      }
    }
    for (std::string_view kind : kPluginKinds) {
      if (kind == name) {
        CheckPluginKind(kind, node, source_name, key_pos, config, errors);
        handled = true;
      }
    }
    if (!handled) {
      std::string message = "unknown section";
      const std::string hint = ClosestMatch(name, known);
      message += hint.empty() ? StrCat("; known sections: ", StrJoin(known, ", "))
                              : StrCat("; did you mean '", hint, "'?");
      errors.push_back({key_pos, std::string(name), message});
    }
  }
  WEFT_RETURN_IF_ERROR(ErrorsToStatus(errors));

  // Validation passed: fill the typed model, defaults included.
  for (const CoreSection& core : kCoreSections) {
    std::optional<Section> section;
    if (const toml::table* table = document[core.name].as_table()) {
      section = ToSection(*table, std::string(core.name), SourcePos{}, source_name);
    }
    WEFT_ASSIGN_OR_RETURN(OptionValues values,
                          ValidateOptions(section ? &*section : nullptr, core.name, core.specs()));
    if (core.name == "runtime") ApplyRuntime(values, config.runtime);
    if (core.name == "plugins") ApplyPlugins(values, base_dir, config.plugins);
    if (core.name == "logging") ApplyLogging(values, config.logging);
  }
  return config;
}

Expected<Config> LoadConfigFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgumentError("config file ", Quote(path), " is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFoundError("cannot read config file ", Quote(path), ": ", std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  return ParseConfig(text.str(), path, base_dir.empty() ? "." : base_dir);
}

Expected<Config> DefaultConfig() { return ParseConfig(EmbeddedDefaultText(), kEmbeddedSource, ""); }

std::vector<std::pair<std::string, OptionSpec>> CoreKeys() {
  std::vector<std::pair<std::string, OptionSpec>> keys;
  for (const CoreSection& core : kCoreSections) {
    for (OptionSpec& spec : core.specs()) {
      keys.emplace_back(StrCat(core.name, ".", spec.key), std::move(spec));
    }
  }
  return keys;
}

}  // namespace weft::config
