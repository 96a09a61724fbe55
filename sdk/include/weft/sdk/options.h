// Weft SDK for C++ plugins: typed option getters that throw.
//
//   int64_t Count(const weft_options_t* options) { return weft::sdk::GetInt(options, "count"); }
//
// The host has already validated the section against the plugin's
// declaration, so these only fail for a key the plugin did not declare.
#ifndef WEFT_SDK_OPTIONS_H_
#define WEFT_SDK_OPTIONS_H_

#include <cstdint>
#include <string>

#include "weft/sdk/host.h"
#include "weft/sdk/status.h"

namespace weft::sdk {

inline bool GetBool(const weft_options_t* options, const char* key) {
  weft_bool_t value = 0;
  ThrowIfError(host()->option_get_bool(options, key, &value));
  return value != 0;
}

inline int64_t GetInt(const weft_options_t* options, const char* key) {
  int64_t value = 0;
  ThrowIfError(host()->option_get_int(options, key, &value));
  return value;
}

inline double GetFloat(const weft_options_t* options, const char* key) {
  double value = 0;
  ThrowIfError(host()->option_get_float(options, key, &value));
  return value;
}

inline std::string GetString(const weft_options_t* options, const char* key) {
  const char* value = nullptr;
  ThrowIfError(host()->option_get_string(options, key, &value));
  return value;
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_OPTIONS_H_
