// Reading what a program or a status printed: rows of a table, lines
// with given parts, a text containing another.
#ifndef WEFT_TESTS_SUPPORT_OUTPUT_TEXT_H_
#define WEFT_TESTS_SUPPORT_OUTPUT_TEXT_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace weft::testing {

// Whether some line of |out|, split at runs of spaces, begins with |words|
// (the cells of a table row such as `weft plugins` prints).
bool HasRow(const std::string& out, const std::vector<std::string>& words);

// Whether a line of |out| has all of |parts|, in that order.
bool HasLineWith(const std::string& out, const std::vector<std::string>& parts);

// Whether |text| contains |part|; the failure prints both.
::testing::AssertionResult Contains(const std::string& text, const std::string& part);

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_OUTPUT_TEXT_H_
