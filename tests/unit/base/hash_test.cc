#include "core/base/hash.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

// The published FNV-1a 64-bit test vectors (Fowler, Noll and Vo's
// reference list): the empty string is the offset basis.
TEST(Fnv1a, MatchesThePublishedVectors) {
  EXPECT_EQ(Fnv1aHash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1aHash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1aHash("foobar"), 0x85944171f73967e8ull);
}

TEST(Fnv1a, FieldsAreSeparated) {
  Fnv1a ab_c, a_bc;
  ab_c.AddField("ab");
  ab_c.AddField("c");
  a_bc.AddField("a");
  a_bc.AddField("bc");
  EXPECT_NE(ab_c.value(), a_bc.value());
  Fnv1a bytes;
  bytes.Add("ab", 2);
  EXPECT_EQ(bytes.value(), Fnv1aHash("ab"));
}

}  // namespace
}  // namespace weft
