#include "tools/weft/output.h"

#include <algorithm>

#include "core/base/strings.h"

namespace weft::cli {

void Table::Print(std::ostream& out) const {
  std::vector<std::size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) {
      widths[i] = std::max(widths[i], row[i].size());
    }
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << '\n';
  };
  print(header_);
  for (const auto& row : rows_) print(row);
}

void JsonWriter::Separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ << ',';
    has_element_.back() = true;
  }
}

void JsonWriter::BeginObject() {
  Separate();
  out_ << '{';
  has_element_.push_back(false);
}

void JsonWriter::EndObject() {
  has_element_.pop_back();
  out_ << '}';
  if (has_element_.empty()) out_ << '\n';
}

void JsonWriter::BeginArray() {
  Separate();
  out_ << '[';
  has_element_.push_back(false);
}

void JsonWriter::EndArray() {
  has_element_.pop_back();
  out_ << ']';
  if (has_element_.empty()) out_ << '\n';
}

void JsonWriter::Key(std::string_view key) {
  Separate();
  out_ << Quote(key) << ':';
  after_key_ = true;
}

void JsonWriter::String(std::string_view value) {
  Separate();
  out_ << Quote(value);
}

void JsonWriter::Number(double value) {
  Separate();
  out_ << StrCat(value);
}

void JsonWriter::Int(long long value) {
  Separate();
  out_ << value;
}

void JsonWriter::Bool(bool value) {
  Separate();
  out_ << (value ? "true" : "false");
}

void JsonWriter::Null() {
  Separate();
  out_ << "null";
}

}  // namespace weft::cli
