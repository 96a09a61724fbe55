// Output helpers for the CLI: aligned text tables, and the JSON writer.
#ifndef WEFT_TOOLS_WEFT_OUTPUT_H_
#define WEFT_TOOLS_WEFT_OUTPUT_H_

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/json.h"

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

// JSON output goes through the one JSON writer (core/base/json.h).
using weft::JsonWriter;

}  // namespace weft::cli

#endif  // WEFT_TOOLS_WEFT_OUTPUT_H_
