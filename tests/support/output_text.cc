#include "tests/support/output_text.h"

#include <algorithm>
#include <sstream>

namespace weft::testing {

bool HasRow(const std::string& out, const std::vector<std::string>& words) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::vector<std::string> row;
    for (std::string cell; cells >> cell;) row.push_back(cell);
    if (row.size() >= words.size() && std::equal(words.begin(), words.end(), row.begin())) return true;
  }
  return false;
}

bool HasLineWith(const std::string& out, const std::vector<std::string>& parts) {
  std::size_t start = 0;
  while (start < out.size()) {
    std::size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    std::size_t at = 0;
    bool all = true;
    for (const std::string& part : parts) {
      at = line.find(part, at);
      if (at == std::string::npos) {
        all = false;
        break;
      }
      at += part.size();
    }
    if (all) return true;
    start = end + 1;
  }
  return false;
}

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\n  '" << text << "'\ndoes not contain\n  '" << part << "'";
}

}  // namespace weft::testing
