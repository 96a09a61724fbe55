#include "core/base/strings.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(StrCat, MixesTypes) {
  EXPECT_EQ(StrCat("a", 1, '-', 2.5, " ", true, std::string("x"), std::string_view("y")), "a1-2.5 truexy");
  EXPECT_EQ(StrCat(int64_t{-9007199254740993}), "-9007199254740993");
  EXPECT_EQ(StrCat(uint64_t{18446744073709551615u}), "18446744073709551615");
  EXPECT_EQ(StrCat(0.1), "0.1");  // shortest round-trip form
  EXPECT_EQ(StrCat(static_cast<const char*>(nullptr)), "(null)");
}

TEST(StrJoin, Separates) {
  EXPECT_EQ(StrJoin(std::vector<std::string>{"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(StrJoin(std::vector<int>{}, ","), "");
  EXPECT_EQ(StrJoin(std::vector<int>{1, 2}, "x"), "1x2");
}

TEST(Quote, EscapesLikeTomlAndJson) {
  EXPECT_EQ(Quote("two"), "\"two\"");
  EXPECT_EQ(Quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(Quote("line\nnext\t"), "\"line\\nnext\\t\"");
  EXPECT_EQ(Quote(std::string("\x01", 1)), "\"\\u0001\"");
}

TEST(StrSplit, KeepsEmptyPieces) {
  EXPECT_EQ(StrSplit("a::b", ':'), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(StrSplit("", ':'), (std::vector<std::string>{""}));
}

TEST(HumanBytes, UsesBinaryUnits) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(uint64_t{24} << 30), "24.0 GiB");
}

}  // namespace
}  // namespace weft
