// Configuration values as the user wrote them, with where they wrote them.
//
// The TOML parser (toml++) stays inside core/config; everything outside sees
// these neutral types. A Value keeps its source position so that any later
// check (a plugin's options, validated once the plugin is loaded) can still
// report `file:line:col: key: what is wrong`.
#ifndef WEFT_CORE_CONFIG_VALUE_H_
#define WEFT_CORE_CONFIG_VALUE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/status.h"

namespace weft::config {

// A position in a configuration source: "configs/local.toml:3:20".
struct SourcePos {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based; 0 when unknown

  std::string ToString() const;
};

// One value of a TOML document, reduced to what configuration needs.
struct Value {
  enum class Kind { kBool, kInt, kFloat, kString, kArray, kTable, kDateTime };

  Kind kind = Kind::kString;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  // For kArray: the elements.
  std::vector<Value> elements;
  // How the value reads in an error message: "\"two\"", "3", "an array".
  std::string text;
  // Where the value starts, and where its key starts.
  SourcePos pos;
  SourcePos key_pos;
};

// A configuration problem, printed as "<pos>: <path>: <message>".
struct ConfigError {
  SourcePos pos;
  std::string path;  // "runtime.inter_op_threads"
  std::string message;

  std::string ToString() const;
};

// The errors joined one per line, as an INVALID_ARGUMENT status (OK when
// |errors| is empty).
Status ErrorsToStatus(const std::vector<ConfigError>& errors);

// Parses |text| as a single TOML value ("1", "0.5", "true", "\"auto\"").
// Used for the defaults plugins declare as text.
Expected<Value> ParseTomlValue(std::string_view text);

}  // namespace weft::config

#endif  // WEFT_CORE_CONFIG_VALUE_H_
