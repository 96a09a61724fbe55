#include "core/config/literal.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "core/base/strings.h"

namespace weft::config {
namespace {

class LiteralReader {
 public:
  explicit LiteralReader(std::string_view text) : text_(text) {}

  bool Read(Value& out) {
    SkipSpace();
    if (!ReadValue(out, 0)) return false;
    SkipSpace();
    return at_ == text_.size();
  }

 private:
  static constexpr int kMaxDepth = 16;

  void SkipSpace() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t')) ++at_;
  }
  bool Peek(char c) const { return at_ < text_.size() && text_[at_] == c; }
  bool Word(std::string_view w) {
    if (text_.substr(at_, w.size()) != w) return false;
    at_ += w.size();
    return true;
  }

  bool ReadValue(Value& v, int depth) {
    if (at_ >= text_.size()) return false;
    const char c = text_[at_];
    if (c == '[') return ReadArray(v, depth);
    if (c == '"' || c == '\'') return ReadString(v);
    const bool is_true = Word("true");
    if (is_true || Word("false")) {
      v.kind = Value::Kind::kBool;
      v.b = is_true;
      v.text = is_true ? "true" : "false";
      return true;
    }
    return ReadNumber(v);
  }

  bool ReadArray(Value& v, int depth) {
    if (depth >= kMaxDepth) return false;
    ++at_;  // '['
    v.kind = Value::Kind::kArray;
    std::vector<std::string> texts;
    SkipSpace();
    while (!Peek(']')) {
      Value element;
      if (!ReadValue(element, depth + 1)) return false;
      texts.push_back(element.text);
      v.elements.push_back(std::move(element));
      SkipSpace();
      if (Peek(',')) {
        ++at_;
        SkipSpace();
      } else if (!Peek(']')) {
        return false;
      }
    }
    ++at_;  // ']'
    v.text = StrCat("[", StrJoin(texts, ", "), "]");
    if (v.text.size() > 60) {
      // Appended piece by piece: GCC 12's -Wrestrict misreads StrCat of a
      // size here.
      v.text = "an array of ";
      v.text += std::to_string(texts.size());
      v.text += " values";
    }
    return true;
  }

  bool ReadString(Value& v) {
    const char quote = text_[at_++];
    std::string s;
    while (at_ < text_.size() && text_[at_] != quote) {
      char c = text_[at_++];
      if (c == '\\' && quote == '"') {
        if (at_ >= text_.size()) return false;
        switch (text_[at_++]) {
          case '"': c = '"'; break;
          case '\\': c = '\\'; break;
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          default: return false;
        }
      } else if (c == '\n') {
        return false;
      }
      s += c;
    }
    if (at_ >= text_.size()) return false;  // unterminated
    ++at_;
    v.kind = Value::Kind::kString;
    v.s = std::move(s);
    v.text = Quote(v.s);
    return true;
  }

  bool ReadNumber(Value& v) {
    const std::size_t start = at_;
    if (Peek('+') || Peek('-')) ++at_;
    const bool negative = text_[start] == '-';
    if (Word("inf") || Word("nan")) {
      v.kind = Value::Kind::kFloat;
      v.f = text_[at_ - 1] == 'f' ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
      if (negative) v.f = -v.f;
      v.text = StrCat(v.f);
      return true;
    }
    const std::size_t digits = at_;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
    if (at_ == digits) return false;
    // TOML forbids leading zeros ("01").
    if (text_[digits] == '0' && at_ - digits > 1) return false;
    bool is_float = false;
    if (Peek('.')) {
      is_float = true;
      ++at_;
      const std::size_t fraction = at_;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
      if (at_ == fraction) return false;
    }
    if (Peek('e') || Peek('E')) {
      is_float = true;
      ++at_;
      if (Peek('+') || Peek('-')) ++at_;
      const std::size_t exponent = at_;
      while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) ++at_;
      if (at_ == exponent) return false;
    }
    // from_chars takes no leading '+'.
    const char* begin = text_.data() + start + (text_[start] == '+' ? 1 : 0);
    const char* end = text_.data() + at_;
    if (is_float) {
      v.kind = Value::Kind::kFloat;
      const auto [ptr, ec] = std::from_chars(begin, end, v.f);
      if (ec != std::errc() || ptr != end) return false;
      v.text = StrCat(v.f);
      return true;
    }
    v.kind = Value::Kind::kInt;
    const auto [ptr, ec] = std::from_chars(begin, end, v.i);
    if (ec != std::errc() || ptr != end) return false;  // out of int64's range, as in TOML
    v.f = static_cast<double>(v.i);
    v.text = StrCat(v.i);
    return true;
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace

Expected<Value> ParseLiteral(std::string_view text) {
  Value v;
  LiteralReader reader(text);
  if (!reader.Read(v)) return InvalidArgumentError("not a literal value: ", Quote(text));
  return v;
}

}  // namespace weft::config
