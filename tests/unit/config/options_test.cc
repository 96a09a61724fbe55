#include "core/config/options.h"

#include <gtest/gtest.h>

namespace weft::config {
namespace {

Value Parsed(std::string_view text, int line = 1, int column = 9) {
  auto value = ParseTomlValue(text);
  EXPECT_TRUE(value.ok()) << text;
  value->pos = SourcePos{"x.toml", line, column};
  value->key_pos = SourcePos{"x.toml", line, 1};
  return *value;
}

std::vector<OptionSpec> Specs() {
  OptionSpec count;
  count.key = "count";
  count.type = OptionType::kInt;
  count.min = 1;
  count.max = 64;
  count.default_value = Parsed("1");
  OptionSpec rate;
  rate.key = "rate";
  rate.type = OptionType::kFloat;
  rate.min = 0;
  OptionSpec mode;
  mode.key = "mode";
  mode.type = OptionType::kString;
  mode.choices = {"fast", "exact"};
  mode.default_value = Parsed("\"fast\"");
  OptionSpec verbose;
  verbose.key = "verbose";
  verbose.type = OptionType::kBool;
  return {count, rate, mode, verbose};
}

Section Make(std::initializer_list<std::pair<std::string, std::string>> values) {
  Section section;
  section.path = "devices.test";
  int line = 2;
  for (const auto& [key, text] : values) section.values[key] = Parsed(text, line++);
  return section;
}

TEST(Options, DefaultsFillUnsetKeys) {
  auto values = ValidateOptions(nullptr, "devices.test", Specs());
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_EQ(*values->GetInt("count"), 1);
  EXPECT_EQ(**values->GetString("mode"), "fast");
  EXPECT_EQ(values->PositionOf("count"), nullptr);
  auto missing = values->GetBool("verbose");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_EQ(missing.status().message(), "devices.test.verbose: not set and has no default");
}

TEST(Options, UserValuesWinAndKeepPositions) {
  Section section = Make({{"count", "4"}, {"rate", "3"}, {"mode", "\"exact\""}, {"verbose", "true"}});
  auto values = ValidateOptions(&section, "devices.test", Specs());
  ASSERT_TRUE(values.ok()) << values.status().ToString();
  EXPECT_EQ(*values->GetInt("count"), 4);
  EXPECT_EQ(*values->GetFloat("rate"), 3.0);  // an integer is a fine float
  EXPECT_EQ(**values->GetString("mode"), "exact");
  EXPECT_TRUE(*values->GetBool("verbose"));
  ASSERT_NE(values->PositionOf("count"), nullptr);
  EXPECT_EQ(values->PositionOf("count")->ToString(), "x.toml:2:9");
}

TEST(Options, WrongTypeAsked) {
  auto values = ValidateOptions(nullptr, "devices.test", Specs());
  ASSERT_TRUE(values.ok());
  auto wrong = values->GetBool("count");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(), "devices.test.count: holds 1, not a boolean");
}

TEST(Options, EveryProblemReported) {
  Section section = Make({{"count", "0"}, {"rate", "-0.5"}, {"mode", "\"slow\""}, {"verbose", "1"}, {"cuont", "2"}});
  auto values = ValidateOptions(&section, "devices.test", Specs());
  ASSERT_FALSE(values.ok());
  // Make() puts the keys on lines 2..6 in the order given; errors come
  // sorted by position, the order of the lines in the file.
  EXPECT_EQ(values.status().message(),
            "x.toml:2:9: devices.test.count: expected an integer in [1, 64], got 0\n"
            "x.toml:3:9: devices.test.rate: expected a number >= 0, got -0.5\n"
            "x.toml:4:9: devices.test.mode: expected one of \"fast\", \"exact\", got \"slow\"\n"
            "x.toml:5:9: devices.test.verbose: expected a boolean, got 1\n"
            "x.toml:6:1: devices.test.cuont: unknown key; did you mean 'count'?");
}

TEST(Options, SectionOfAPluginWithoutOptions) {
  Section section = Make({{"anything", "1"}});
  auto values = ValidateOptions(&section, "devices.bare", {});
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().message(), "x.toml:2:1: devices.bare.anything: unknown key; [devices.bare] takes no keys");
}

TEST(Options, NanIsOutOfAnyRange) {
  Section section = Make({{"rate", "nan"}});
  auto values = ValidateOptions(&section, "devices.test", Specs());
  ASSERT_FALSE(values.ok());
  EXPECT_EQ(values.status().message(), "x.toml:2:9: devices.test.rate: expected a number >= 0, got nan");
}

TEST(Options, DescribeExpected) {
  auto specs = Specs();
  EXPECT_EQ(DescribeExpected(specs[0]), "an integer in [1, 64]");
  EXPECT_EQ(DescribeExpected(specs[1]), "a number >= 0");
  EXPECT_EQ(DescribeExpected(specs[2]), "one of \"fast\", \"exact\"");
  EXPECT_EQ(DescribeExpected(specs[3]), "a boolean");
}

TEST(ParseTomlValue, ParsesScalarsAndRejectsGarbage) {
  EXPECT_EQ(ParseTomlValue("42")->i, 42);
  EXPECT_EQ(ParseTomlValue("0.25")->f, 0.25);
  EXPECT_TRUE(ParseTomlValue("true")->b);
  EXPECT_EQ(ParseTomlValue("\"auto\"")->s, "auto");
  EXPECT_EQ(ParseTomlValue("[1, 2]")->elements.size(), 2u);
  auto bad = ParseTomlValue("many");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "not a TOML value: \"many\"");
}

TEST(ClosestMatch, OnlySuggestsLikelyTypos) {
  const std::vector<std::string> keys = {"inter_op_threads", "intra_op_threads"};
  EXPECT_EQ(ClosestMatch("intra_op_thread", keys), "intra_op_threads");
  EXPECT_EQ(ClosestMatch("inter_op_thraeds", keys), "inter_op_threads");
  EXPECT_EQ(ClosestMatch("colour", keys), "");
  EXPECT_EQ(ClosestMatch("x", {}), "");
}

}  // namespace
}  // namespace weft::config
