// Weft SDK for C++ plugins: declaring options (weft_plugin_t.options, the
// keys of the plugin's section of the config), one call a key instead of
// the eleven positional fields of weft_option_def_t:
//
//   const char* const kModes[] = {"fast", "exact"};
//   constexpr weft_option_def_t kOptions[] = {
//       weft::sdk::IntOption("count", "1", "How many devices to expose.", 1, 64),
//       weft::sdk::BoolOption("verbose", "false", "Log every kernel launch."),
//       weft::sdk::StringOption("mode", "\"fast\"", "Which kernels to run.", kModes),
//   };
//
// A default is a TOML value ("1", "0.9", "true", "\"auto\"") or NULL for
// none; a doc is one sentence for people (`weft plugins --options`). The
// values are read with weft/sdk/options.h.
#ifndef WEFT_SDK_OPTION_DEFS_H_
#define WEFT_SDK_OPTION_DEFS_H_

#include <cstddef>
#include <cstdint>

#include "weft/weft_options.h"

namespace weft::sdk {

// An INT option with an inclusive range.
constexpr weft_option_def_t IntOption(const char* key, const char* default_value, const char* doc, int64_t min,
                                      int64_t max) {
  return {sizeof(weft_option_def_t), key, WEFT_OPTION_INT,          default_value, doc, 1,
          static_cast<double>(min),  1,   static_cast<double>(max), nullptr,       0};
}

// An INT option with a lower bound only.
constexpr weft_option_def_t IntOption(const char* key, const char* default_value, const char* doc, int64_t min) {
  return {sizeof(weft_option_def_t),
          key,
          WEFT_OPTION_INT,
          default_value,
          doc,
          1,
          static_cast<double>(min),
          0,
          0,
          nullptr,
          0};
}

// A FLOAT option with an inclusive range.
constexpr weft_option_def_t FloatOption(const char* key, const char* default_value, const char* doc, double min,
                                        double max) {
  return {sizeof(weft_option_def_t), key, WEFT_OPTION_FLOAT, default_value, doc, 1, min, 1, max, nullptr, 0};
}

constexpr weft_option_def_t BoolOption(const char* key, const char* default_value, const char* doc) {
  return {sizeof(weft_option_def_t), key, WEFT_OPTION_BOOL, default_value, doc, 0, 0, 0, 0, nullptr, 0};
}

// A STRING option taking any string.
constexpr weft_option_def_t StringOption(const char* key, const char* default_value, const char* doc) {
  return {sizeof(weft_option_def_t), key, WEFT_OPTION_STRING, default_value, doc, 0, 0, 0, 0, nullptr, 0};
}

// A STRING option taking one of |choices| (a static array, which the host
// reads for the plugin's lifetime).
template <std::size_t N>
constexpr weft_option_def_t StringOption(const char* key, const char* default_value, const char* doc,
                                         const char* const (&choices)[N]) {
  return {sizeof(weft_option_def_t), key, WEFT_OPTION_STRING, default_value, doc, 0, 0, 0, 0, choices, N};
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_OPTION_DEFS_H_
