// Small string helpers the core uses everywhere: StrCat, StrJoin, Quote.
//
//   StrCat("node '", name, "' has ", n, " inputs")  // integers, floats,
//                                                    // strings, chars
#ifndef WEFT_CORE_BASE_STRINGS_H_
#define WEFT_CORE_BASE_STRINGS_H_

#include <charconv>
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft {
namespace internal {

inline void AppendPiece(std::string& out, std::string_view piece) { out.append(piece); }
inline void AppendPiece(std::string& out, const char* piece) { out.append(piece != nullptr ? piece : "(null)"); }
inline void AppendPiece(std::string& out, const std::string& piece) { out.append(piece); }
inline void AppendPiece(std::string& out, char c) { out.push_back(c); }
inline void AppendPiece(std::string& out, bool b) { out.append(b ? "true" : "false"); }
template <std::integral T>
requires(!std::same_as<T, char> && !std::same_as<T, bool>) void AppendPiece(std::string& out, T value) {
  char buffer[24];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, end);
}
template <std::floating_point T>
void AppendPiece(std::string& out, T value) {
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, end);
}

}  // namespace internal

// Concatenates the text of |args|: strings, characters, booleans ("true"),
// integers and floating-point numbers (shortest round-trip form).
template <class... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (internal::AppendPiece(out, args), ...);
  return out;
}

// Joins |parts| with |separator|.
template <class Range>
std::string StrJoin(const Range& parts, std::string_view separator) {
  std::string out;
  bool first = true;
  for (const auto& part : parts) {
    if (!first) out.append(separator);
    first = false;
    internal::AppendPiece(out, part);
  }
  return out;
}

// |text| in double quotes, with quotes, backslashes and control characters
// escaped as in TOML and JSON: Quote("a\"b") == "\"a\\\"b\"".
std::string Quote(std::string_view text);

// A list of integers as "[1,-2,3]" (unlike Shape::ToString, which prints
// -1 as "?").
template <class Int>
std::string ListString(const std::vector<Int>& values) {
  return StrCat("[", StrJoin(values, ","), "]");
}

// Splits |text| at every |separator|; empty pieces are kept.
std::vector<std::string> StrSplit(std::string_view text, char separator);

// The candidate closest to |word| by edit distance (optimal string
// alignment) when it is close enough to be a likely typo, else empty: the
// "did you mean" hints of config keys, op names and node names.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// A byte count for people: "512 B", "1.5 KiB", "23.4 GiB".
std::string HumanBytes(uint64_t bytes);

}  // namespace weft

#endif  // WEFT_CORE_BASE_STRINGS_H_
