// The literals ops and plugins declare their defaults in ("-1", "1e-5",
// "true", "\"SAME\"", "[1, 1]"), read without the TOML parser, so that the
// lite build (docs/lite.md), which has none, reads them as the full build
// does. The grammar is TOML's for these values: booleans, decimal integers,
// floats (with inf and nan), basic and literal strings, and arrays of
// them. config_test checks that every registered default reads the same
// as through ParseTomlValue.
#ifndef WEFT_CORE_CONFIG_LITERAL_H_
#define WEFT_CORE_CONFIG_LITERAL_H_

#include <string_view>

#include "core/base/status.h"
#include "core/config/value.h"

namespace weft::config {

// |text| as one Value (kind, value and text as ParseTomlValue gives them;
// no position). INVALID_ARGUMENT naming the text when it is not a literal.
Expected<Value> ParseLiteral(std::string_view text);

}  // namespace weft::config

#endif  // WEFT_CORE_CONFIG_LITERAL_H_
