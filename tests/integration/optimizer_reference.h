// Reading the PyTorch reference values that
// tests/integration/make_optimizer_reference.py writes to
// tests/data/optimizer_reference/*.toml, for optimizer_test and
// schedule_test.
#ifndef WEFT_TESTS_INTEGRATION_OPTIMIZER_REFERENCE_H_
#define WEFT_TESTS_INTEGRATION_OPTIMIZER_REFERENCE_H_

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/config/config.h"

namespace weft::testing {

inline std::string ReferencePath(std::string_view file) {
  return std::string(WEFT_SOURCE_DIR) + "/tests/data/optimizer_reference/" + std::string(file);
}

// The parsed file, or an empty table after failing the test.
inline toml::table ReadReference(std::string_view file) {
  try {
    return toml::parse_file(ReferencePath(file));
  } catch (const toml::parse_error& e) {
    ADD_FAILURE() << "cannot read " << ReferencePath(file) << ": " << e.description() << " at " << e.source().begin.line
                  << ":" << e.source().begin.column;
    return {};
  }
}

// The numbers of an array (empty when |node| is not one).
inline std::vector<double> Numbers(const toml::node* node) {
  std::vector<double> out;
  if (node == nullptr || !node->is_array()) return out;
  for (const toml::node& e : *node->as_array()) out.push_back(e.value<double>().value_or(std::nan("")));
  return out;
}

template <class View>
std::vector<double> Numbers(const View& view) {
  return Numbers(static_cast<const toml::node*>(view.node()));
}

// An array of arrays of numbers.
template <class View>
std::vector<std::vector<double>> NumberRows(const View& view) {
  std::vector<std::vector<double>> rows;
  if (const auto* a = view.as_array()) {
    for (const toml::node& row : *a) rows.push_back(Numbers(&row));
  }
  return rows;
}

// An inline table of scalars as "key = value" lines, for
// config::ParseConfig: floats with every digit, so they read back exactly.
inline std::string TomlLines(const toml::table* table) {
  std::string text;
  if (table == nullptr) return text;
  for (const auto& [key, value] : *table) {
    text += std::string(key.str()) + " = ";
    if (auto b = value.value_exact<bool>()) {
      text += *b ? "true" : "false";
    } else if (auto i = value.value_exact<int64_t>()) {
      text += std::to_string(*i);
    } else if (auto f = value.value_exact<double>()) {
      char digits[40];
      std::snprintf(digits, sizeof digits, "%.17g", *f);
      text += digits;
    } else if (auto s = value.value_exact<std::string>()) {
      text += "\"" + *s + "\"";
    } else {
      ADD_FAILURE() << "unexpected value for '" << key.str() << "' in the reference";
    }
    text += "\n";
  }
  return text;
}

inline std::string SectionText(std::string_view header, const toml::table* table) {
  std::string text = "[";
  text += header;
  text += "]\n";
  text += TomlLines(table);
  return text;
}

// The [schedule] section the reference describes, read through the real
// config parser (so its validation applies too).
inline config::ScheduleConfig ScheduleFrom(const toml::table* table) {
  auto parsed = config::ParseConfig(SectionText("schedule", table), "reference.toml", "/");
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? parsed->schedule : config::ScheduleConfig{};
}

// |got - want| <= rtol * |want| + atol.
inline ::testing::AssertionResult Close(double got, double want, double rtol, double atol = 0) {
  const double err = std::fabs(got - want);
  if (err <= rtol * std::fabs(want) + atol) return ::testing::AssertionSuccess();
  char text[200];
  std::snprintf(text, sizeof text, "got %.17g, want %.17g (error %.3g, relative %.3g; allowed %.3g relative + %.3g)",
                got, want, err, err / std::fabs(want), rtol, atol);
  return ::testing::AssertionFailure() << text;
}

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_OPTIMIZER_REFERENCE_H_
