// Checkpoint bundles on a real file system: the bytes written (against a
// layout and checksums derived independently in Python), round trips of
// every dtype, and every error a damaged bundle or a bad call produces.
#include "core/checkpoint/bundle.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <filesystem>

#include "core/base/strings.h"
#include "tests/support/status_printer.h"
#include "tests/support/test_dir.h"

namespace weft::checkpoint {
namespace {

namespace fs = std::filesystem;

using testing::ReadFile;
using testing::WriteFile;

class Bundle : public ::testing::Test {
 protected:
  std::string Prefix(const std::string& name) const { return dir_.File(name); }
  // Every file of the directory, sorted.
  std::vector<std::string> Files() const { return dir_.Files(); }

  testing::TestDir dir_{"weft_bundle_test"};
};

void FlipByte(const std::string& path, std::size_t at) {
  std::string bytes = ReadFile(path);
  ASSERT_LT(at, bytes.size());
  bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);
  WriteFile(path, bytes);
}

std::string FromHex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

Tensor Half(const std::vector<uint16_t>& bits, DType dtype) {
  Tensor t = *Tensor::Allocate(dtype, Shape{static_cast<int64_t>(bits.size())});
  std::memcpy(t.raw_data(), bits.data(), bits.size() * 2);
  return t;
}

std::vector<std::pair<std::string, Tensor>> Small() {
  return {{"x", Tensor::FromVector<float>({1, 2, 3})}, {"a", Tensor::Strings({"hi", ""}, Shape{2})}};
}

TEST_F(Bundle, WritesTheDocumentedBytes) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {{"step", "7"}}).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"b.data-00000-of-00001", "b.index"}));
  // By hand and with a bit-at-a-time CRC32C in Python: "a" = u64 2, "hi",
  // u64 0; "x" = three little-endian binary32 values; names sorted.
  EXPECT_EQ(ReadFile(Prefix("b") + ".data-00000-of-00001"),
            FromHex("0200000000000000686900000000000000000000803f0000004000004040"));
  EXPECT_EQ(ReadFile(Prefix("b") + ".index"), FromHex("57454654434b505401000000000000007b00000000000000010000001e"
                                                      "0000000000000001000000040000007374"
                                                      "6570010000003702000000010000006107000000010000000200000000"
                                                      "000000000000000000000000000000120000"
                                                      "000000000052751a920100000078010000000100000003000000000000"
                                                      "000000000012000000000000000c00000000"
                                                      "000000735b8971b7e43a51"));
  auto reader = BundleReader::Open(Prefix("b"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ((*reader)->entries().size(), 2u);
  // Unmasked CRC32C of each tensor's bytes, from the Python model.
  EXPECT_EQ((*reader)->entries()[0].crc32c, 0xc53d77cbu);
  EXPECT_EQ((*reader)->entries()[1].crc32c, 0x384de783u);
  EXPECT_EQ((*reader)->entries()[1], (TensorEntry{"x", DType::kF32, Shape{3}, 0, 18, 12, 0x384de783u}));
  EXPECT_EQ((*reader)->total_bytes(), 30u);
  EXPECT_EQ((*reader)->num_shards(), 1);
}

TEST_F(Bundle, RoundTripsEveryDtypeAndShape) {
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"f32", Tensor::FromVector<float>({1.5f, -0.0f, 3e38f, 1e-45f}, Shape{2, 2})},
      {"f64", Tensor::FromVector<double>({3.141592653589793, -2e-308})},
      {"f16", Half({0x3c00, 0xfc00, 0x7e00}, DType::kF16)},
      {"bf16", Half({0x3f80, 0x0001}, DType::kBF16)},
      {"i8", Tensor::FromVector<int8_t>({-128, 127, 0})},
      {"i16", Tensor::FromVector<int16_t>({-32768, 1234})},
      {"i32", Tensor::FromVector<int32_t>({-7, 1 << 30}, Shape{1, 2, 1})},
      {"i64", Tensor::Scalar<int64_t>(int64_t{1} << 62)},
      {"u8", Tensor::FromVector<uint8_t>({0, 255})},
      {"bool", Tensor::FromVector<bool>({true, false, true})},
      {"empty", *Tensor::Zeros(DType::kF32, Shape{0, 3})},
      {"strings", Tensor::Strings({"", std::string("a\0b", 3), std::string(70000, 'z')}, Shape{3, 1})},
      {"dense/w", *Tensor::Zeros(DType::kF64, Shape{64, 33})},
  };
  const std::map<std::string, std::string> metadata = {{"seed", "42"}, {"fingerprint", std::string("\x01\xff", 2)}};
  ASSERT_TRUE(WriteBundle(Prefix("all"), tensors, metadata).ok());
  auto reader = BundleReader::Open(Prefix("all"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->metadata(), metadata);
  ASSERT_EQ((*reader)->entries().size(), tensors.size());
  for (std::size_t i = 1; i < (*reader)->entries().size(); ++i) {
    EXPECT_LT((*reader)->entries()[i - 1].name, (*reader)->entries()[i].name);
  }
  for (const auto& [name, t] : tensors) {
    auto read = (*reader)->Read(name);
    ASSERT_TRUE(read.ok()) << name << ": " << read.status().ToString();
    EXPECT_TRUE(read->BitwiseEquals(t)) << name << ": " << read->DebugString() << " vs " << t.DebugString();
  }
  EXPECT_TRUE((*reader)->VerifyAll().ok());
}

TEST_F(Bundle, AnEmptyBundleIsValid) {
  ASSERT_TRUE(WriteBundle(Prefix("none"), {}, {}).ok());
  auto reader = BundleReader::Open(Prefix("none"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE((*reader)->entries().empty());
  EXPECT_EQ((*reader)->Read("x").status(),
            NotFoundError("checkpoint ", Prefix("none"), " has no tensor \"x\" (it holds no tensors)"));
}

TEST_F(Bundle, ReplacingABundleLeavesOnlyTheNewOne) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), {{"x", Tensor::FromVector<float>({1, 2})}}, {}).ok());
  ASSERT_TRUE(WriteBundle(Prefix("b"), {{"y", Tensor::FromVector<int32_t>({5, 6, 7})}}, {{"k", "v"}}).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"b.data-00000-of-00001", "b.index"}));
  auto reader = BundleReader::Open(Prefix("b"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->Find("x"), nullptr);
  EXPECT_TRUE((*reader)->Read("y")->BitwiseEquals(Tensor::FromVector<int32_t>({5, 6, 7})));
}

TEST_F(Bundle, ReaderOutlivesDeletionOfItsFiles) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {}).ok());
  auto reader = BundleReader::Open(Prefix("b"));
  ASSERT_TRUE(reader.ok());
  fs::remove(Prefix("b") + ".index");
  fs::remove(Prefix("b") + ".data-00000-of-00001");
  EXPECT_TRUE((*reader)->Read("x")->BitwiseEquals(Tensor::FromVector<float>({1, 2, 3})));
}

TEST_F(Bundle, ReportsTheStagesInOrder) {
  std::vector<std::string> stages;
  WriteOptions options;
  options.observer = [&](WriteStage s) { stages.emplace_back(WriteStageName(s)); };
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {}, options).ok());
  EXPECT_EQ(stages, (std::vector<std::string>{"tensor-written", "tensor-written", "shards-synced", "shards-renamed",
                                              "index-synced", "index-renamed"}));
}

// --- Errors of WriteBundle
// --------------------------------------------------------

TEST_F(Bundle, RejectsBadTensorsAndNames) {
  const std::string p = Prefix("b");
  EXPECT_EQ(WriteBundle(p, {{"x", Tensor::Scalar<float>(1)}, {"x", Tensor::Scalar<float>(2)}}, {}),
            InvalidArgumentError("cannot save checkpoint ", p, ": tensor name \"x\" is used twice"));
  EXPECT_EQ(WriteBundle(p, {{"", Tensor::Scalar<float>(1)}}, {}),
            InvalidArgumentError("cannot save checkpoint ", p, ": a tensor has an empty name"));
  EXPECT_EQ(WriteBundle(p, {{"v", Tensor()}}, {}),
            InvalidArgumentError("cannot save checkpoint ", p, ": tensor \"v\" is an empty (invalid) tensor"));
  EXPECT_EQ(WriteBundle(p, {{"h", *Tensor::Allocate(DType::kResource, Shape{})}}, {}),
            InvalidArgumentError("cannot save checkpoint ", p,
                                 ": tensor \"h\" is a resource handle; save the "
                                 "variable's value instead"));
  const std::string missing = (dir_ / "no" / "such" / "b").string();
  EXPECT_EQ(WriteBundle(missing, Small(), {}), NotFoundError("cannot save checkpoint ", missing, ": directory ",
                                                             (dir_ / "no" / "such").string(), " does not exist"));
  EXPECT_TRUE(Files().empty());
}

TEST_F(Bundle, AFailedWriteLeavesNoTemporaryFiles) {
  // An index path that cannot be replaced (a non-empty directory) fails the
  // save after the data is written, even for root.
  fs::create_directories(Prefix("b") + ".index/inside");
  Status s = WriteBundle(Prefix("b"), Small(), {});
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_TRUE(s.message().starts_with(
      StrCat("cannot save checkpoint ", Prefix("b"), ": removing the old ", Prefix("b"), ".index: ")))
      << s.ToString();
  EXPECT_EQ(Files(), (std::vector<std::string>{"b.index"}));
}

// --- Errors of BundleReader
// -------------------------------------------------------

TEST_F(Bundle, MissingIndexIsNotFoundWithAHint) {
  ASSERT_TRUE(WriteBundle(Prefix("ckpt-100"), Small(), {}).ok());
  EXPECT_EQ(BundleReader::Open(Prefix("ckpt-10O")).status(),
            NotFoundError("checkpoint ", Prefix("ckpt-10O"), " not found: ", Prefix("ckpt-10O"),
                          ".index does not exist; did you mean ", Prefix("ckpt-100"), "?"));
  EXPECT_EQ(BundleReader::Open(Prefix("other")).status(),
            NotFoundError("checkpoint ", Prefix("other"), " not found: ", Prefix("other"), ".index does not exist"));
  EXPECT_EQ(BundleReader::Open(dir_.path().string()).status(),
            NotFoundError("checkpoint ", dir_.path().string(),
                          " not found: it is a directory, not a bundle prefix (list its ",
                          "checkpoints with `weft ckpt ls ", dir_.path().string(), "`)"));
  const std::string nowhere = (dir_ / "gone" / "b").string();
  EXPECT_EQ(BundleReader::Open(nowhere).status(), NotFoundError("checkpoint ", nowhere, " not found: directory ",
                                                                (dir_ / "gone").string(), " does not exist"));
}

TEST_F(Bundle, TruncatedIndexSaysSo) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {{"step", "7"}}).ok());
  const std::string index = Prefix("b") + ".index";
  const std::string bytes = ReadFile(index);
  ASSERT_EQ(bytes.size(), 151u);
  const std::string what = StrCat("checkpoint ", index, " is truncated: ");
  const std::pair<std::size_t, std::string> cases[] = {
      {0, "it has 0 bytes, fewer than the 24-byte header"},
      {5, "it has 5 bytes, fewer than the 24-byte header"},
      {20, "it has 20 bytes, fewer than the 24-byte header"},
      {24, "its header promises 151 bytes, the file has 24"},
      {100, "its header promises 151 bytes, the file has 100"},
      {150, "its header promises 151 bytes, the file has 150"},
  };
  for (const auto& [size, message] : cases) {
    WriteFile(index, bytes.substr(0, size));
    EXPECT_EQ(BundleReader::Open(Prefix("b")).status(), DataLossError(what, message)) << size;
  }
}

TEST_F(Bundle, CorruptIndexIsDataLoss) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {{"step", "7"}}).ok());
  const std::string index = Prefix("b") + ".index";
  const std::string bytes = ReadFile(index);
  // Byte 52 is the "7" of the metadata (after the 24-byte header, the shard
  // count and size, the metadata count, and "step" with its length).
  ASSERT_EQ(bytes[52], '7');
  FlipByte(index, 52);
  Status s = BundleReader::Open(Prefix("b")).status();
  EXPECT_EQ(s.code(), Code::kDataLoss);
  EXPECT_TRUE(s.message().starts_with(StrCat("checkpoint ", index, " is corrupt: its checksum says 0x")))
      << s.ToString();
  EXPECT_NE(s.message().find(" but its contents hash to 0x"), std::string::npos) << s.ToString();

  WriteFile(index, bytes + "xyz");
  EXPECT_EQ(BundleReader::Open(Prefix("b")).status(),
            DataLossError("checkpoint ", index,
                          " is corrupt: 3 unexpected bytes follow the checksum "
                          "(the file has 154 bytes, its header says "
                          "151)"));

  WriteFile(index, "PK\x03\x04 this is a zip file, not an index");
  EXPECT_EQ(BundleReader::Open(Prefix("b")).status(),
            DataLossError("checkpoint ", index,
                          " is not a weft checkpoint index: it does not start "
                          "with \"WEFTCKPT\""));
}

TEST_F(Bundle, NewerFormatVersionAsksForAnUpgrade) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {}).ok());
  const std::string index = Prefix("b") + ".index";
  std::string bytes = ReadFile(index);
  bytes[8] = 2;  // the version, little-endian, after the 8-byte magic
  WriteFile(index, bytes);
  EXPECT_EQ(BundleReader::Open(Prefix("b")).status(),
            FailedPreconditionError("checkpoint ", index,
                                    " has format version 2, newer than this "
                                    "weft reads (1): it was written by a newer "
                                    "weft; upgrade weft to read it"));
  bytes[8] = 0;
  WriteFile(index, bytes);
  EXPECT_EQ(BundleReader::Open(Prefix("b")).status(),
            DataLossError("checkpoint ", index, " is corrupt: it has format version 0, which no weft writes"));
}

TEST_F(Bundle, MissingOrShortShardIsDataLoss) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {}).ok());
  const std::string shard = Prefix("b") + ".data-00000-of-00001";
  const std::string data = ReadFile(shard);
  fs::remove(shard);
  EXPECT_EQ(BundleReader::Open(Prefix("b")).status(),
            DataLossError("checkpoint ", Prefix("b"), " is incomplete: its data shard ", shard, " is missing"));
  WriteFile(shard, data.substr(0, 29));
  EXPECT_EQ(BundleReader::Open(Prefix("b")).status(),
            DataLossError("checkpoint ", Prefix("b"), ": data shard ", shard,
                          " has 29 bytes but the index says 30 (the shard is truncated)"));
  WriteFile(shard, data + "!");
  EXPECT_EQ(BundleReader::Open(Prefix("b")).status(),
            DataLossError("checkpoint ", Prefix("b"), ": data shard ", shard,
                          " has 31 bytes but the index says 30 (the shard does "
                          "not match its index)"));
}

TEST_F(Bundle, FlippedDataByteNamesTheTensorAndTheShard) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {}).ok());
  const std::string shard = Prefix("b") + ".data-00000-of-00001";
  FlipByte(shard, 20);  // inside "x" (bytes 18..30)
  auto reader = BundleReader::Open(Prefix("b"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  // The corrupt bytes' CRC, from the Python model: bytes 18..30 with byte 20
  // xor 0x5a.
  const Status expected =
      DataLossError("checkpoint ", Prefix("b"), ": tensor \"x\" is corrupt: its 12 bytes at offset 18 of ", shard,
                    " have CRC32C 0x5d6deeb8 but the index says 0x384de783");
  EXPECT_EQ((*reader)->Read("x").status(), expected);
  EXPECT_EQ((*reader)->Verify(*(*reader)->Find("x")), expected);
  EXPECT_EQ((*reader)->VerifyAll(), expected);
  // The other tensor is intact.
  EXPECT_TRUE((*reader)->Read("a")->BitwiseEquals(Tensor::Strings({"hi", ""}, Shape{2})));

  FlipByte(shard, 9);  // inside "a" too
  EXPECT_EQ((*reader)->VerifyAll().code(), Code::kDataLoss);
  const Status all = (*reader)->VerifyAll();
  EXPECT_TRUE(all.message().starts_with(
      StrCat("checkpoint ", Prefix("b"), ": tensor \"a\" is corrupt: its 18 bytes at offset 0 of ")));
  EXPECT_TRUE(all.message().ends_with(" (2 tensors fail in all)"));
}

TEST_F(Bundle, UnknownTensorSuggestsTheClosestName) {
  ASSERT_TRUE(
      WriteBundle(Prefix("b"), {{"dense/w", Tensor::Scalar<float>(1)}, {"dense/b", Tensor::Scalar<float>(2)}}, {})
          .ok());
  auto reader = BundleReader::Open(Prefix("b"));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->Find("dense/ww"), nullptr);
  EXPECT_EQ((*reader)->Read("dense/ww").status(),
            NotFoundError("checkpoint ", Prefix("b"), " has no tensor \"dense/ww\"; did you mean \"dense/w\"?"));
  EXPECT_EQ(
      (*reader)->Read("conv1/kernel").status(),
      NotFoundError("checkpoint ", Prefix("b"), " has no tensor \"conv1/kernel\" (it has \"dense/b\", \"dense/w\")"));
}

TEST_F(Bundle, ShardTruncatedAfterOpenIsDataLoss) {
  ASSERT_TRUE(WriteBundle(Prefix("b"), Small(), {}).ok());
  auto reader = BundleReader::Open(Prefix("b"));
  ASSERT_TRUE(reader.ok());
  const std::string shard = Prefix("b") + ".data-00000-of-00001";
  ASSERT_EQ(::truncate(shard.c_str(), 20), 0);
  EXPECT_EQ((*reader)->Read("x").status(), DataLossError("checkpoint ", Prefix("b"), ": tensor \"x\": ", shard,
                                                         " ends at byte 20, before byte 30 (the file was "
                                                         "truncated after it was opened)"));
}

}  // namespace
}  // namespace weft::checkpoint

// --- Sharded bundles (the ps tasks of a cluster write, the chief commits)
// ------

namespace weft::checkpoint {
namespace {

TEST_F(Bundle, ShardsWrittenApartReadAsOneBundle) {
  const std::string p = Prefix("s");
  auto part1 = WriteDataShard(p, 1, 2, {{"b", Tensor::FromVector<float>({4, 5})}});
  ASSERT_TRUE(part1.ok()) << part1.status().ToString();
  auto part0 = WriteDataShard(p, 0, 2, Small());
  ASSERT_TRUE(part0.ok()) << part0.status().ToString();
  // No index yet: the bundle does not exist until it is committed.
  EXPECT_EQ(BundleReader::Open(p).status().code(), Code::kNotFound);
  // The parts travel as text.
  auto decoded = DecodeIndexPart(EncodeIndexPart(*part1), "ps task 1");
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_TRUE(CommitShardedBundle(p, {*decoded, *part0}, {{"step", "7"}}).ok());
  EXPECT_EQ(Files(), (std::vector<std::string>{"s.data-00000-of-00002", "s.data-00001-of-00002", "s.index"}));
  auto reader = BundleReader::Open(p);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->num_shards(), 2);
  EXPECT_EQ((*reader)->metadata().at("step"), "7");
  auto b = (*reader)->Read("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data<float>()[1], 5.0f);
  EXPECT_EQ((*reader)->Read("a")->string_at(0), "hi");
  EXPECT_TRUE((*reader)->VerifyAll().ok());
}

TEST_F(Bundle, ACommitChecksItsParts) {
  const std::string p = Prefix("c");
  auto part0 = WriteDataShard(p, 0, 2, {{"x", Tensor::FromVector<float>({1})}});
  auto part1 = WriteDataShard(p, 1, 2, {{"x", Tensor::FromVector<float>({2})}});
  ASSERT_TRUE(part0.ok() && part1.ok());
  const std::string context = "cannot commit checkpoint " + p;
  EXPECT_EQ(CommitShardedBundle(p, {}, {}), InvalidArgumentError(context, ": no shards"));
  EXPECT_EQ(CommitShardedBundle(p, {*part0}, {}),
            InvalidArgumentError(context, ": a part says it is shard 0 of 2, but 1 parts were given"));
  EXPECT_EQ(CommitShardedBundle(p, {*part0, *part0}, {}), InvalidArgumentError(context, ": shard 0 is given twice"));
  EXPECT_EQ(CommitShardedBundle(p, {*part0, *part1}, {}),
            InvalidArgumentError(context, ": tensor \"x\" is in two shards"));
  auto part1b = WriteDataShard(p, 1, 2, {{"y", Tensor::FromVector<float>({2, 3})}});
  ASSERT_TRUE(part1b.ok());
  // A shard whose file is gone, or not the size its writer reported.
  const std::string shard1 = ShardPath(p, 1, 2);
  const std::string bytes = ReadFile(shard1);
  fs::remove(shard1);
  EXPECT_EQ(CommitShardedBundle(p, {*part0, *part1b}, {}),
            DataLossError(context, ": its data shard ", shard1, " is missing"));
  WriteFile(shard1, bytes + "x");
  EXPECT_EQ(CommitShardedBundle(p, {*part0, *part1b}, {}),
            DataLossError(context, ": its data shard ", shard1, " has 9 bytes, its writer reported 8"));
  EXPECT_EQ(BundleReader::Open(p).status().code(),
            Code::kNotFound);  // nothing committed
}

TEST_F(Bundle, ShardWritesAndPartsRefuseBadInput) {
  const std::string p = Prefix("w");
  EXPECT_EQ(WriteDataShard(p, 2, 2, Small()).status(),
            InvalidArgumentError("cannot save checkpoint ", p, ": shard 2 of 2 is out of range"));
  const std::string missing = (dir_ / "nope" / "w").string();
  EXPECT_EQ(
      WriteDataShard(missing, 0, 1, Small()).status(),
      NotFoundError("cannot save checkpoint ", missing, ": directory ", (dir_ / "nope").string(), " does not exist"));
  EXPECT_EQ(DecodeIndexPart("abc", "ps task 3").status(),
            DataLossError("ps task 3: a checkpoint shard's index part has odd length"));
  EXPECT_EQ(DecodeIndexPart("zz", "ps task 3").status(),
            DataLossError("ps task 3: a checkpoint shard's index part is not hex"));
  EXPECT_EQ(DecodeIndexPart("00ff", "ps task 3").status().code(), Code::kDataLoss);
  // Writing a shard removes a stale index of the same prefix first.
  ASSERT_TRUE(WriteBundle(p, Small(), {}).ok());
  ASSERT_TRUE(WriteDataShard(p, 0, 1, Small()).ok());
  EXPECT_EQ(BundleReader::Open(p).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace weft::checkpoint
