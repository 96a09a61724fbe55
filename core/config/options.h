// Validation of a plugin's configuration section against its declared
// options.
//
// A plugin declares the keys of its section ([devices.cpu]) with their
// type, default, bounds and choices (weft_option_def_t in the SDK; the
// plugin host converts them to OptionSpec). ValidateOptions checks the
// user's section against the declaration, reporting every problem with its
// position, and returns the values with defaults filled in. The host's
// option getters read from the result.
#ifndef WEFT_CORE_CONFIG_OPTIONS_H_
#define WEFT_CORE_CONFIG_OPTIONS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"
#include "core/config/value.h"

namespace weft::config {

// kStringList and kIntList are for the core's own sections (plugins.paths,
// a served model's pinned versions); plugins
// declare scalar options only.
enum class OptionType { kBool, kInt, kFloat, kString, kStringList, kIntList };

std::string_view OptionTypeName(OptionType type);  // "a boolean", "an integer", ...

struct OptionSpec {
  std::string key;
  OptionType type = OptionType::kString;
  std::optional<Value> default_value;
  std::string doc;
  std::optional<double> min;
  std::optional<double> max;
  std::vector<std::string> choices;  // for kString; empty means any
};

// A plugin's section: the keys the user set, in the order of the file.
struct Section {
  std::string path;  // "devices.cpu"
  SourcePos pos;     // of the section header
  std::map<std::string, Value> values;
};

// Validated option values (defaults included), thread-safe to read.
class OptionValues {
 public:
  OptionValues() = default;
  OptionValues(std::string section_path, std::map<std::string, Value> values)
      : section_path_(std::move(section_path)), values_(std::move(values)) {}

  const std::string& section_path() const { return section_path_; }
  bool Has(std::string_view key) const { return values_.count(std::string(key)) != 0; }
  // NOT_FOUND for a key neither set nor defaulted; INVALID_ARGUMENT for a
  // key of another type. Ints read as floats are converted.
  Expected<bool> GetBool(std::string_view key) const;
  Expected<int64_t> GetInt(std::string_view key) const;
  Expected<double> GetFloat(std::string_view key) const;
  // The string lives as long as this object.
  Expected<const std::string*> GetString(std::string_view key) const;
  Expected<std::vector<std::string>> GetStringList(std::string_view key) const;
  Expected<std::vector<int64_t>> GetIntList(std::string_view key) const;
  // Where the user set |key|, or nullptr when it is a default.
  const SourcePos* PositionOf(std::string_view key) const;

  const std::map<std::string, Value>& values() const { return values_; }

 private:
  Expected<const Value*> Find(std::string_view key, OptionType type) const;

  std::string section_path_;
  std::map<std::string, Value> values_;
};

// Checks |section| (NULL when the user did not write one) against |specs|:
// unknown keys (with a "did you mean" hint), wrong types, values out of
// bounds or not among the choices. Returns every problem; when there is
// none and |out| is not null, fills it with the values and defaults.
std::vector<ConfigError> CheckOptions(const Section* section, std::string_view section_path,
                                      const std::vector<OptionSpec>& specs, OptionValues* out);

// CheckOptions, with the problems as one INVALID_ARGUMENT status (one line
// each, in file order).
Expected<OptionValues> ValidateOptions(const Section* section, std::string_view section_path,
                                       const std::vector<OptionSpec>& specs);

// Whether |value| has |spec|'s type and lies within its bounds or choices.
bool ValueFits(const Value& value, const OptionSpec& spec);

// Describes the accepted values of |spec| for messages: "an integer >= 1",
// "one of \"text\", \"json\"".
std::string DescribeExpected(const OptionSpec& spec);

}  // namespace weft::config

#endif  // WEFT_CORE_CONFIG_OPTIONS_H_
