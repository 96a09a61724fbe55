#include "core/base/json.h"

#include <utility>

namespace weft {

std::string DumpJson(const Json& value, int indent) {
  // NaN and infinities dump as null; replace: invalid UTF-8 bytes become
  // U+FFFD instead of throwing.
  return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

void JsonWriter::Add(Json value) {
  if (open_.empty()) {
    out_ << DumpJson(value) << '\n';
    return;
  }
  Json& parent = open_.back();
  if (parent.is_object()) {
    parent[keys_.back()] = std::move(value);
  } else {
    parent.push_back(std::move(value));
  }
}

void JsonWriter::BeginObject() {
  open_.push_back(Json::object());
  keys_.emplace_back();
}

void JsonWriter::BeginArray() {
  open_.push_back(Json::array());
  keys_.emplace_back();
}

void JsonWriter::Close() {
  Json done = std::move(open_.back());
  open_.pop_back();
  keys_.pop_back();
  Add(std::move(done));
}

void JsonWriter::EndObject() { Close(); }
void JsonWriter::EndArray() { Close(); }
void JsonWriter::Key(std::string_view key) { keys_.back() = std::string(key); }
void JsonWriter::String(std::string_view value) { Add(Json(std::string(value))); }
void JsonWriter::Number(double value) { Add(Json(value)); }
void JsonWriter::Int(long long value) { Add(Json(value)); }
void JsonWriter::Bool(bool value) { Add(Json(value)); }
void JsonWriter::Null() { Add(Json(nullptr)); }

}  // namespace weft
