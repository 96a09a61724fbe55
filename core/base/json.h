// The one JSON writer: every JSON Weft emits (CLI output, training
// metrics, traces, JSON log lines) is built here on nlohmann::json (Debian's
// nlohmann-json3-dev), so the rules hold everywhere:
//  - a string that is not valid UTF-8 (a node name read from a damaged
//    file, a path) is written with each invalid byte replaced by U+FFFD;
//  - NaN and the infinities, which JSON cannot represent, are written as
//    null;
//  - keys keep the order they were added in.
//
//   Json j = {{"step", 12}, {"loss", loss}};   // loss may be NaN: null
//   out << DumpJson(j) << '\n';
//
// JsonWriter builds a value with the caller doing the structure, for code
// that emits as it walks:
//
//   JsonWriter w(std::cout);  // writes the value and '\n' when it closes
//   w.BeginObject(); w.Key("name"); w.String("cpu"); w.EndObject();
#ifndef WEFT_CORE_BASE_JSON_H_
#define WEFT_CORE_BASE_JSON_H_

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

using Json = nlohmann::ordered_json;

// |value| as JSON text: compact when |indent| is negative, else indented
// by that many spaces. Never throws for strings or numbers (see above).
std::string DumpJson(const Json& value, int indent = -1);

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // The key of the next value, inside an object.
  void Key(std::string_view key);
  void String(std::string_view value);
  void Number(double value);
  void Int(long long value);
  void Bool(bool value);
  void Null();
  // A member of the current object: its key, then its value.
  void String(std::string_view key, std::string_view value) {
    Key(key);
    String(value);
  }
  void Number(std::string_view key, double value) {
    Key(key);
    Number(value);
  }
  void Int(std::string_view key, long long value) {
    Key(key);
    Int(value);
  }
  void Bool(std::string_view key, bool value) {
    Key(key);
    Bool(value);
  }

 private:
  void Add(Json value);
  void Close();

  std::ostream& out_;
  std::vector<Json> open_;         // the containers being built, innermost last
  std::vector<std::string> keys_;  // per open object: the key of its next value
};

}  // namespace weft

#endif  // WEFT_CORE_BASE_JSON_H_
