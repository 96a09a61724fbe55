// Not API: short constructors of OptionSpec for the core's sections, and
// how their file paths are resolved (config.cc, serving_config.cc).
#ifndef WEFT_CORE_CONFIG_INTERNAL_SPECS_H_
#define WEFT_CORE_CONFIG_INTERNAL_SPECS_H_

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "core/base/strings.h"
#include "core/config/options.h"
#include "core/config/value.h"

namespace weft::config::internal {

// |path| as written in a config file, relative ones taken against
// |base_dir| (the file's directory); empty stays empty.
inline std::string ResolvePath(const std::string& path, std::string_view base_dir) {
  if (path.empty() || base_dir.empty()) return path;
  std::filesystem::path p(path);
  if (p.is_absolute()) return path;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

inline OptionSpec Spec(std::string key, OptionType type, std::string doc) {
  OptionSpec spec;
  spec.key = std::move(key);
  spec.type = type;
  spec.doc = std::move(doc);
  return spec;
}

inline Value Default(std::string_view toml_text) {
  auto value = ParseTomlValue(toml_text);
  return value.ok() ? *value : Value{};
}

inline OptionSpec Str(std::string key, std::string default_text, std::string doc) {
  OptionSpec spec = Spec(std::move(key), OptionType::kString, std::move(doc));
  spec.default_value = Default(StrCat("\"", default_text, "\""));
  return spec;
}

inline OptionSpec Int(std::string key, int64_t default_value, double min, std::string doc) {
  OptionSpec spec = Spec(std::move(key), OptionType::kInt, std::move(doc));
  spec.default_value = Default(std::to_string(default_value));
  spec.min = min;
  return spec;
}

inline OptionSpec Float(std::string key, std::string default_text, std::optional<double> min, std::string doc) {
  OptionSpec spec = Spec(std::move(key), OptionType::kFloat, std::move(doc));
  spec.default_value = Default(default_text);
  spec.min = min;
  return spec;
}

inline OptionSpec Bool(std::string key, bool default_value, std::string doc) {
  OptionSpec spec = Spec(std::move(key), OptionType::kBool, std::move(doc));
  spec.default_value = Default(default_value ? "true" : "false");
  return spec;
}

}  // namespace weft::config::internal

#endif  // WEFT_CORE_CONFIG_INTERNAL_SPECS_H_
