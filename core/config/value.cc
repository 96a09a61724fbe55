#include "core/config/value.h"

#include <algorithm>
#include <tuple>

#include "core/config/internal/toml_convert.h"

namespace weft::config {

std::string SourcePos::ToString() const {
  if (line <= 0) return file;
  return StrCat(file, ":", line, ":", column);
}

std::string ConfigError::ToString() const {
  std::string out = pos.ToString();
  if (!path.empty()) out += StrCat(out.empty() ? "" : ": ", path);
  out += StrCat(out.empty() ? "" : ": ", message);
  return out;
}

Status ErrorsToStatus(const std::vector<ConfigError>& errors) {
  if (errors.empty()) return Status();
  // In the order of the file, whatever order the checks ran in.
  std::vector<const ConfigError*> sorted;
  for (const ConfigError& error : errors) sorted.push_back(&error);
  std::stable_sort(sorted.begin(), sorted.end(), [](const ConfigError* a, const ConfigError* b) {
    return std::tie(a->pos.line, a->pos.column) < std::tie(b->pos.line, b->pos.column);
  });
  std::vector<std::string> lines;
  lines.reserve(errors.size());
  for (const ConfigError* error : sorted) lines.push_back(error->ToString());
  return Status(Code::kInvalidArgument, StrJoin(lines, "\n"));
}

Expected<Value> ParseTomlValue(std::string_view text) {
  const std::string document = StrCat("value = ", text, "\n");
  auto table = internal::ParseDocument(document, "<value>");
  if (!table.ok()) {
    return InvalidArgumentError("not a TOML value: ", Quote(text));
  }
  const toml::node* node = table->get("value");
  if (node == nullptr) return InvalidArgumentError("not a TOML value: ", Quote(text));
  return internal::ConvertNode(*node, "<value>", SourcePos{});
}

namespace internal {

SourcePos PosOf(const toml::source_region& region, std::string_view file) {
  return SourcePos{std::string(file), static_cast<int>(region.begin.line), static_cast<int>(region.begin.column)};
}

Value ConvertNode(const toml::node& node, std::string_view file, const SourcePos& key_pos) {
  Value value;
  value.pos = PosOf(node.source(), file);
  value.key_pos = key_pos;
  switch (node.type()) {
    case toml::node_type::boolean:
      value.kind = Value::Kind::kBool;
      value.b = node.as_boolean()->get();
      value.text = value.b ? "true" : "false";
      break;
    case toml::node_type::integer:
      value.kind = Value::Kind::kInt;
      value.i = node.as_integer()->get();
      value.f = static_cast<double>(value.i);
      value.text = StrCat(value.i);
      break;
    case toml::node_type::floating_point:
      value.kind = Value::Kind::kFloat;
      value.f = node.as_floating_point()->get();
      value.text = StrCat(value.f);
      break;
    case toml::node_type::string:
      value.kind = Value::Kind::kString;
      value.s = node.as_string()->get();
      value.text = Quote(value.s);
      break;
    case toml::node_type::array: {
      value.kind = Value::Kind::kArray;
      std::vector<std::string> texts;
      for (const toml::node& element : *node.as_array()) {
        value.elements.push_back(ConvertNode(element, file, key_pos));
        texts.push_back(value.elements.back().text);
      }
      value.text = StrCat("[", StrJoin(texts, ", "), "]");
      // Long arrays are named, not spelled out, in messages.
      if (value.text.size() > 60) value.text = StrCat("an array of ", texts.size(), " values");
      break;
    }
    case toml::node_type::table:
      value.kind = Value::Kind::kTable;
      value.text = "a table";
      break;
    default:
      value.kind = Value::Kind::kDateTime;
      value.text = "a date or time";
      break;
  }
  return value;
}

Expected<toml::table> ParseDocument(std::string_view text, std::string_view file) {
  try {
    return toml::parse(text, file);
  } catch (const toml::parse_error& error) {
    const SourcePos pos = PosOf(error.source(), file);
    return Status(Code::kInvalidArgument, StrCat(pos.ToString(), ": invalid TOML: ", error.description()));
  }
}

}  // namespace internal
}  // namespace weft::config
