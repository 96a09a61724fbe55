// The index parser on malformed input whose checksum is right, so that
// every check behind the checksum is reached: what a buggy or hostile
// writer could produce.
#include "core/checkpoint/index.h"

#include <gtest/gtest.h>

#include "core/base/crc32c.h"
#include "tests/support/status_printer.h"

namespace weft::checkpoint {
namespace {

constexpr std::string_view kPath = "run/ckpt-1.index";

void U32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void U64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void Str(std::string& out, std::string_view s) {
  U32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

// |body| framed as an index: header, body, masked checksum.
std::string Frame(const std::string& body) {
  std::string out = "WEFTCKPT";
  U32(out, 1);
  U32(out, 0);
  U64(out, body.size());
  out += body;
  U32(out, Crc32cMask(Crc32c(out)));
  return out;
}

// A body with one shard of |shard_size| bytes and no metadata, ready for
// the tensor count and entries.
std::string Start(uint64_t shard_size) {
  std::string b;
  U32(b, 1);
  U64(b, shard_size);
  U32(b, 0);
  return b;
}

void Entry(std::string& b, std::string_view name, uint32_t dtype, const std::vector<int64_t>& dims, uint32_t shard,
           uint64_t offset, uint64_t bytes) {
  Str(b, name);
  U32(b, dtype);
  U32(b, static_cast<uint32_t>(dims.size()));
  for (int64_t d : dims) U64(b, static_cast<uint64_t>(d));
  U32(b, shard);
  U64(b, offset);
  U64(b, bytes);
  U32(b, 0);
}

Status Parse(const std::string& body) { return ParseIndex(Frame(body), kPath).status(); }

Status Malformed(const std::string& why) { return DataLossError("checkpoint run/ckpt-1.index is malformed: ", why); }

// One tensor entry in a one-shard body.
std::string One(std::string_view name, uint32_t dtype, const std::vector<int64_t>& dims, uint32_t shard,
                uint64_t offset, uint64_t bytes, uint64_t shard_size) {
  std::string b = Start(shard_size);
  U32(b, 1);
  Entry(b, name, dtype, dims, shard, offset, bytes);
  return b;
}

TEST(Index, RoundTrips) {
  BundleIndex index;
  index.shard_sizes = {40, 9};
  index.metadata = {{"a", ""}, {"step", "12"}};
  index.entries = {{"m", DType::kI64, Shape{2, 2}, 0, 8, 32, 0xdeadbeef},
                   {"s", DType::kString, Shape{}, 1, 0, 9, 1},
                   {"z", DType::kBool, Shape{0}, 0, 40, 0, 0}};
  auto parsed = ParseIndex(SerializeIndex(index), kPath);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->version, 1u);
  EXPECT_EQ(parsed->shard_sizes, index.shard_sizes);
  EXPECT_EQ(parsed->metadata, index.metadata);
  EXPECT_EQ(parsed->entries, index.entries);
}

TEST(Index, RejectsInconsistentEntries) {
  EXPECT_EQ(Parse(One("x", 1, {3}, 0, 0, 8, 100)),
            Malformed("tensor #0 \"x\": f32[3] takes 12 bytes, but the entry says 8"));
  EXPECT_EQ(Parse(One("x", 1, {3}, 2, 0, 12, 100)),
            Malformed("tensor #0 \"x\": shard 2 does not exist (the bundle has 1)"));
  EXPECT_EQ(Parse(One("x", 1, {3}, 0, 10, 12, 20)),
            Malformed("tensor #0 \"x\": bytes [10, +12) lie outside shard 0 (20 bytes)"));
  EXPECT_EQ(Parse(One("x", 1, {3}, 0, UINT64_MAX, 12, 20)),
            Malformed("tensor #0 \"x\": bytes [18446744073709551615, +12) lie outside shard 0 (20 bytes)"));
  EXPECT_EQ(Parse(One("", 1, {3}, 0, 0, 12, 20)), Malformed("tensor #0: the name is empty"));
  EXPECT_EQ(Parse(One("x", 99, {}, 0, 0, 0, 20)),
            Malformed("tensor #0 \"x\": dtype 99 is not one a checkpoint can hold"));
  EXPECT_EQ(Parse(One("x", 20, {}, 0, 0, 0, 20)),
            Malformed("tensor #0 \"x\": dtype 20 is not one a checkpoint can hold"));
  EXPECT_EQ(Parse(One("x", 1, {1, 1, 1, 1, 1, 1, 1, 1, 1}, 0, 0, 4, 20)),
            Malformed("tensor #0 \"x\": rank 9 is over the maximum of 8"));
  EXPECT_EQ(Parse(One("x", 1, {-1}, 0, 0, 4, 20)), Malformed("tensor #0 \"x\": shape [-1]: negative dimension -1"));
  EXPECT_EQ(Parse(One("x", 7, {5}, 0, 0, 16, 20)), Malformed("tensor #0 \"x\": 5 strings cannot fit in 16 bytes"));
  // 2^62 elements of 8 bytes overflow 64 bits.
  EXPECT_EQ(Parse(One("x", 9, {int64_t{1} << 62}, 0, 0, 0, 20)),
            Malformed("tensor #0 \"x\": i64[4611686018427387904] takes more than 2^64 bytes, but the entry says 0"));
}

TEST(Index, RejectsUnsortedOrRepeatedNames) {
  std::string b = Start(100);
  U32(b, 2);
  Entry(b, "b", 1, {}, 0, 0, 4);
  Entry(b, "a", 1, {}, 0, 4, 4);
  EXPECT_EQ(Parse(b), Malformed("tensor #1 \"a\": the name is out of order or repeated (after \"b\")"));
  b = Start(100);
  U32(b, 2);
  Entry(b, "a", 1, {}, 0, 0, 4);
  Entry(b, "a", 1, {}, 0, 4, 4);
  EXPECT_EQ(Parse(b), Malformed("tensor #1 \"a\": the name is out of order or repeated (after \"a\")"));

  std::string m;
  U32(m, 1);
  U64(m, 0);
  U32(m, 2);
  Str(m, "step");
  Str(m, "1");
  Str(m, "seed");
  Str(m, "2");
  U32(m, 0);
  EXPECT_EQ(Parse(m), Malformed("metadata entry #1: key \"seed\" is out of order or repeated"));
}

TEST(Index, RejectsCountsAndFieldsPastTheEnd) {
  std::string b;
  U32(b, 0);
  EXPECT_EQ(Parse(b), Malformed("the shard count is 0"));
  b.clear();
  U32(b, 0xffffffffu);
  EXPECT_EQ(Parse(b), Malformed("the shard count 4294967295 cannot fit in the 0 bytes left"));
  b = Start(0);
  U32(b, 0x10000000u);
  EXPECT_EQ(Parse(b), Malformed("the tensor count 268435456 cannot fit in the 0 bytes left"));
  b.clear();
  U32(b, 1);
  U64(b, 0);
  U32(b, 5000);
  EXPECT_EQ(Parse(b), Malformed("the metadata count 5000 cannot fit in the 0 bytes left"));
  // A name whose length runs past the end: the shard count and size, the
  // two counts and the length take 4+8+4+4+4 = 24 bytes of the body, so the
  // name starts at byte 24 + 24 = 48 of the file.
  b = Start(0);
  U32(b, 1);
  U32(b, 1000);
  b += std::string(44, 'n');
  EXPECT_EQ(Parse(b),
            Malformed("tensor #0: the name (1000 bytes at byte 48) runs past the end of the body (44 bytes left)"));
  b = Start(0);
  EXPECT_EQ(Parse(b), Malformed("the tensor count (4 bytes at byte 40) runs past the end of the body (0 bytes left)"));
  b = One("x", 1, {}, 0, 0, 4, 4);
  b += "abc";
  EXPECT_EQ(Parse(b), Malformed("3 unexpected bytes follow the last tensor"));
}

TEST(Index, HeaderProblemsComeBeforeTheBody) {
  // An overflowing body size is truncation, not a crash.
  std::string bytes = Frame(Start(0) + std::string(4, '\0'));
  for (int i = 16; i < 24; ++i) bytes[static_cast<std::size_t>(i)] = '\xff';
  EXPECT_EQ(ParseIndex(bytes, kPath).status(),
            DataLossError("checkpoint run/ckpt-1.index is truncated: its header promises more than 2^64 bytes, the "
                          "file has ",
                          bytes.size()));
  EXPECT_EQ(ParseIndex("WEFT", kPath).status(),
            DataLossError("checkpoint run/ckpt-1.index is truncated: it has 4 bytes, fewer than the 24-byte header"));
  EXPECT_EQ(ParseIndex("WEFX", kPath).status(),
            DataLossError("checkpoint run/ckpt-1.index is not a weft checkpoint index: it does not start with "
                          "\"WEFTCKPT\""));
}

}  // namespace
}  // namespace weft::checkpoint
