// Output helpers for the CLI: aligned text tables and a small JSON writer.
#ifndef WEFT_TOOLS_WEFT_OUTPUT_H_
#define WEFT_TOOLS_WEFT_OUTPUT_H_

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace weft::cli {

// Columns padded to their widest cell; the last column is not padded.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  void Print(std::ostream& out) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Writes one JSON value, with the caller doing the structure:
//   JsonWriter j(out); j.BeginObject(); j.Key("name"); j.String("cpu"); ...
class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view value);
  void Number(double value);
  void Int(long long value);
  void Bool(bool value);
  void Null();

 private:
  void Separate();
  std::ostream& out_;
  // Per open container: whether it already has an element.
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace weft::cli

#endif  // WEFT_TOOLS_WEFT_OUTPUT_H_
