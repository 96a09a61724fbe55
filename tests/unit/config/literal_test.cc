// ParseLiteral, the TOML-free reader of op and plugin defaults that the
// lite build uses (core/config/literal.h), against toml++ itself
// (ParseTomlValue): the same kind, value and text for every literal, and
// a refusal wherever TOML refuses.
#include "core/config/literal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/base/strings.h"

namespace weft::config {
namespace {

void ExpectSame(const Value& got, const Value& want, const std::string& text) {
  ASSERT_EQ(static_cast<int>(got.kind), static_cast<int>(want.kind)) << text;
  EXPECT_EQ(got.text, want.text) << text;
  switch (want.kind) {
    case Value::Kind::kBool: EXPECT_EQ(got.b, want.b) << text; break;
    case Value::Kind::kInt: EXPECT_EQ(got.i, want.i) << text; break;
    case Value::Kind::kFloat:
      if (std::isnan(want.f)) {
        EXPECT_TRUE(std::isnan(got.f)) << text;
      } else {
        EXPECT_EQ(got.f, want.f) << text;
      }
      break;
    case Value::Kind::kString: EXPECT_EQ(got.s, want.s) << text; break;
    case Value::Kind::kArray:
      ASSERT_EQ(got.elements.size(), want.elements.size()) << text;
      for (std::size_t i = 0; i < want.elements.size(); ++i) ExpectSame(got.elements[i], want.elements[i], text);
      break;
    default: FAIL() << text << ": unexpected kind";
  }
}

TEST(ParseLiteral, ReadsWhatTomlReads) {
  // The defaults ops and plugins declare, and the corners of each kind.
  for (const std::string text : {"-1",
                                 "0",
                                 "1",
                                 "42",
                                 "+5",
                                 "9223372036854775807",
                                 "-9223372036854775808",
                                 "1e-5",
                                 "1.5",
                                 "-0.25",
                                 "3.0e+2",
                                 "2E3",
                                 "0.0",
                                 "-0.0",
                                 "inf",
                                 "+inf",
                                 "-inf",
                                 "nan",
                                 "true",
                                 "false",
                                 "\"SAME\"",
                                 "'VALID'",
                                 "\"\"",
                                 "\"a\\\"b\\\\c\\n\"",
                                 "'C:\\path'",
                                 "[1, 1]",
                                 "[]",
                                 "[1,2,3]",
                                 "[ 1 , 2 ]",
                                 "[\"a\", 'b']",
                                 "[[1, 2], [3]]",
                                 "[1.5, -2.0]",
                                 "[true, false]",
                                 "  7  ",
                                 "[\"NHWC\", \"NCHW\"]"}) {
    auto toml = ParseTomlValue(text);
    ASSERT_TRUE(toml.ok()) << text << ": " << toml.status().ToString();
    auto literal = ParseLiteral(text);
    ASSERT_TRUE(literal.ok()) << text << ": " << literal.status().ToString();
    ExpectSame(*literal, *toml, text);
  }
}

TEST(ParseLiteral, RefusesWhatTomlRefuses) {
  for (const std::string text : {"", "01", "1.", ".5", "1e", "1e+", "[1,", "[1 2]", "\"open", "'open", "tru", "True",
                                 "1 2", "9223372036854775808", "\"\\q\"", "[1]]", "-", "+", "0x"}) {
    EXPECT_FALSE(ParseTomlValue(text).ok()) << text << " (toml++ took it)";
    auto literal = ParseLiteral(text);
    ASSERT_FALSE(literal.ok()) << text;
    EXPECT_EQ(literal.status().message(), "not a literal value: " + Quote(text)) << text;
  }
}

TEST(ParseLiteral, RefusesNestingDeeperThanSixteen) {
  const std::string deep = std::string(17, '[') + std::string(17, ']');
  EXPECT_FALSE(ParseLiteral(deep).ok());
  const std::string fine = std::string(16, '[') + std::string(16, ']');
  EXPECT_TRUE(ParseLiteral(fine).ok());
}

}  // namespace
}  // namespace weft::config
