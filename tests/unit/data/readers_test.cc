// The data readers (core/data/readers.h): IDX, gzip, .npy and CSV, on
// files written here byte by byte (expected values derived by hand) and on
// Debian's Fashion-MNIST (expected values from Python's gzip and struct
// modules), and every malformed-input error with its message.
#include "core/data/readers.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/tensor/npy.h"
#include "tests/support/tensor_values.h"

namespace weft::data {
namespace {

const char kFashion[] = "/usr/share/datasets/fashion-mnist/";

// A directory for the files the tests write, removed when the program ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = StrCat(::testing::TempDir(), "weft_readers_XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string TempPath(const std::string& name) {
  static const ScratchDir dir;
  return StrCat(dir.path(), "/", name);
}

std::string WriteFile(const std::string& name, std::string_view bytes) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// gzip-compresses |bytes| with zlib's deflate (a writer independent of the
// reader under test, which inflates).
std::string Gzip(std::string_view bytes) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(bytes.size())) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

using testing::Values;

std::string ErrorOf(const Status& s) { return s.ok() ? "OK" : s.message(); }
template <class T>
std::string ErrorOf(const Expected<T>& e) {
  return ErrorOf(e.status());
}

// --- IDX ----------------------------------------------------------------------------

TEST(Idx, ReadsEveryDtypeBigEndian) {
  // u8 [2,3]: 0 1 2 / 253 254 255.
  auto u8 = ParseIdx(Bytes({0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 1, 2, 253, 254, 255}), "u8.idx");
  ASSERT_TRUE(u8.ok()) << ErrorOf(u8);
  EXPECT_EQ(u8->TypeString(), "u8[2,3]");
  EXPECT_EQ(Values<uint8_t>(*u8), (std::vector<uint8_t>{0, 1, 2, 253, 254, 255}));
  // i8: 0xff = -1, 0x80 = -128.
  auto i8 = ParseIdx(Bytes({0, 0, 0x09, 1, 0, 0, 0, 2, 0xff, 0x80}), "i8.idx");
  ASSERT_TRUE(i8.ok()) << ErrorOf(i8);
  EXPECT_EQ(Values<int8_t>(*i8), (std::vector<int8_t>{-1, -128}));
  // i16: 0xfffe = -2, 0x0102 = 258.
  auto i16 = ParseIdx(Bytes({0, 0, 0x0B, 1, 0, 0, 0, 2, 0xff, 0xfe, 0x01, 0x02}), "i16.idx");
  ASSERT_TRUE(i16.ok()) << ErrorOf(i16);
  EXPECT_EQ(Values<int16_t>(*i16), (std::vector<int16_t>{-2, 258}));
  // i32: 0x01020304 = 16909060, 0xffffffff = -1.
  auto i32 = ParseIdx(Bytes({0, 0, 0x0C, 1, 0, 0, 0, 2, 1, 2, 3, 4, 0xff, 0xff, 0xff, 0xff}), "i32.idx");
  ASSERT_TRUE(i32.ok()) << ErrorOf(i32);
  EXPECT_EQ(Values<int32_t>(*i32), (std::vector<int32_t>{16909060, -1}));
  // f32: 0x3fc00000 = 1.5, 0xc0200000 = -2.5.
  auto f32 = ParseIdx(Bytes({0, 0, 0x0D, 1, 0, 0, 0, 2, 0x3f, 0xc0, 0, 0, 0xc0, 0x20, 0, 0}), "f32.idx");
  ASSERT_TRUE(f32.ok()) << ErrorOf(f32);
  EXPECT_EQ(Values<float>(*f32), (std::vector<float>{1.5f, -2.5f}));
  // f64: 0xc002000000000000 = -2.25.
  auto f64 = ParseIdx(Bytes({0, 0, 0x0E, 1, 0, 0, 0, 1, 0xc0, 0x02, 0, 0, 0, 0, 0, 0}), "f64.idx");
  ASSERT_TRUE(f64.ok()) << ErrorOf(f64);
  EXPECT_EQ(Values<double>(*f64), (std::vector<double>{-2.25}));
  // A dimension of 0: no data.
  auto empty = ParseIdx(Bytes({0, 0, 0x08, 2, 0, 0, 0, 0, 0, 0, 0, 5}), "empty.idx");
  ASSERT_TRUE(empty.ok()) << ErrorOf(empty);
  EXPECT_EQ(empty->TypeString(), "u8[0,5]");
}

TEST(Idx, MalformedFilesAreErrorsNamingFileAndPlace) {
  EXPECT_EQ(ErrorOf(ParseIdx(Bytes({0, 0}), "a.idx")),
            "a.idx: not an IDX file: truncated at byte 2 of the 4-byte magic number");
  EXPECT_EQ(ErrorOf(ParseIdx(Bytes({0x50, 0x4b, 3, 4, 0, 0}), "a.idx")),
            "a.idx: not an IDX file: bad magic 0x504b0304 (an IDX file starts with two zero bytes, a type code and "
            "the rank)");
  EXPECT_EQ(ErrorOf(ParseIdx(Bytes({0, 0, 0x07, 1, 0, 0, 0, 0}), "a.idx")),
            "a.idx: not an IDX file: bad magic 0x00000701: unknown type code 0x07 (expected 0x08 u8, 0x09 i8, "
            "0x0b i16, 0x0c i32, 0x0d f32 or 0x0e f64)");
  EXPECT_EQ(ErrorOf(ParseIdx(Bytes({0, 0, 0x08, 9}), "a.idx")), "a.idx: IDX rank 9 is above the maximum of 8");
  EXPECT_EQ(ErrorOf(ParseIdx(Bytes({0, 0, 0x08, 3, 0, 0, 0, 1, 0, 0}), "a.idx")),
            "a.idx: truncated at byte 10: the header of a rank-3 IDX file is 16 bytes");
  // [2,3] of i16 need 12 bytes; 5 are there.
  EXPECT_EQ(ErrorOf(ParseIdx(Bytes({0, 0, 0x0B, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5}), "a.idx")),
            "a.idx: truncated at byte 17: dimensions [2,3] of i16 need 12 bytes of data after the 12-byte header, "
            "the file has 5");
  EXPECT_EQ(ErrorOf(ParseIdx(Bytes({0, 0, 0x08, 1, 0, 0, 0, 2, 1, 2, 3, 4}), "a.idx")),
            "a.idx: dimensions [2] of u8 account for 2 bytes of data after the 8-byte header, but the file has 4 "
            "(2 bytes too many): the dimensions do not match the data");
  // 0xffffffff^3 overflows int64.
  EXPECT_EQ(
      ErrorOf(ParseIdx(
          Bytes({0, 0, 0x08, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 7}), "a.idx")),
      "a.idx: IDX dimensions [4294967295,4294967295,4294967295] are too large (the file has 1 bytes of data)");
}

TEST(Idx, ReadsPlainAndGzipFiles) {
  const std::string idx = Bytes({0, 0, 0x08, 1, 0, 0, 0, 3, 7, 8, 9});
  const std::string plain = WriteFile("plain.idx", idx);
  const std::string gz = WriteFile("packed.idx.gz", Gzip(idx));
  for (const std::string& path : {plain, gz}) {
    auto t = ReadIdx(path);
    ASSERT_TRUE(t.ok()) << ErrorOf(t);
    EXPECT_EQ(Values<uint8_t>(*t), (std::vector<uint8_t>{7, 8, 9})) << path;
  }
  EXPECT_EQ(ReadIdx(TempPath("missing.idx")).status().code(), Code::kNotFound);
  EXPECT_EQ(ErrorOf(ReadIdx(TempPath("missing.idx"))),
            StrCat("cannot read \"", TempPath("missing.idx"), "\": No such file or directory"));
}

// --- gzip -----------------------------------------------------------------------------

TEST(Gunzip, ConcatenatedMembersAreOneStream) {
  auto out = Gunzip(Gzip("hello, ") + Gzip("world"), "two.gz");
  ASSERT_TRUE(out.ok()) << ErrorOf(out);
  EXPECT_EQ(*out, "hello, world");
  auto empty = Gunzip(Gzip(""), "empty.gz");
  ASSERT_TRUE(empty.ok()) << ErrorOf(empty);
  EXPECT_EQ(*empty, "");
}

TEST(Gunzip, CorruptAndTruncatedDataAreErrors) {
  const std::string text(5000, 'x');
  const std::string gz = Gzip(text + "the end");
  // Cut in the middle of the deflate data.
  EXPECT_EQ(
      ErrorOf(Gunzip(gz.substr(0, gz.size() / 2), "cut.gz")),
      StrCat("cut.gz: gzip data is truncated: the compressed stream stops at byte ", gz.size() / 2, " before its end"));
  // The CRC-32 in the trailer (bytes size-8..size-5) no longer matches.
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 8] = static_cast<char>(bad_crc[bad_crc.size() - 8] ^ 0x01);
  EXPECT_EQ(ErrorOf(Gunzip(bad_crc, "crc.gz")),
            StrCat("crc.gz: gzip data is corrupt near compressed byte ", gz.size() - 4, ": incorrect data check"));
  // Byte 2 is the compression method; 8 (deflate) is the only one.
  std::string bad_method = gz;
  bad_method[2] = 7;
  EXPECT_EQ(ErrorOf(Gunzip(bad_method, "method.gz")),
            "method.gz: gzip data is corrupt near compressed byte 4: unknown compression method");
  EXPECT_EQ(ErrorOf(Gunzip(gz + "junk", "junk.gz")),
            StrCat("junk.gz: 4 bytes of trailing garbage after the gzip data ends at byte ", gz.size()));
  // Through a file: the path names the file.
  const std::string path = WriteFile("cut.idx.gz", gz.substr(0, 30));
  EXPECT_EQ(ErrorOf(ReadIdx(path)),
            StrCat(path, ": gzip data is truncated: the compressed stream stops at byte 30 before its end"));
}

// --- Fashion-MNIST --------------------------------------------------------------------

// Reference values from Python:
//   b = gzip.open(path).read(); dims = struct.unpack('>III', b[4:16]); pixels = b[16:]
TEST(FashionMnist, LoadsTrainAndTestSplits) {
  auto train = LoadExamples("idx", StrCat(kFashion, "train-images-idx3-ubyte.gz"),
                            StrCat(kFashion, "train-labels-idx1-ubyte.gz"), -1);
  ASSERT_TRUE(train.ok()) << ErrorOf(train);
  EXPECT_EQ(train->features.TypeString(), "f32[60000,28,28]");
  EXPECT_EQ(train->labels.TypeString(), "i64[60000]");
  const float* x = train->features.data<float>();
  const int64_t* y = train->labels.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(y, y + 10), (std::vector<int64_t>{9, 0, 0, 3, 0, 2, 7, 2, 5, 5}));
  EXPECT_EQ(y[59999], 5);
  std::vector<int64_t> counts(10, 0);
  for (int64_t i = 0; i < 60000; ++i) {
    ASSERT_TRUE(y[i] >= 0 && y[i] <= 9) << i;
    ++counts[static_cast<std::size_t>(y[i])];
  }
  EXPECT_EQ(counts, std::vector<int64_t>(10, 6000));
  // Row 14 of image 0.
  const std::vector<float> row14 = {0,   0,   1,   4,   6,   7,   2,   0,   0,   0,   0,   0,   237, 226,
                                    217, 223, 222, 219, 222, 221, 216, 223, 229, 215, 218, 255, 77,  0};
  EXPECT_EQ(std::vector<float>(x + 14 * 28, x + 15 * 28), row14);
  double sum0 = 0, sum12345 = 0, total = 0;
  for (int i = 0; i < 784; ++i) sum0 += x[i];
  for (int i = 0; i < 784; ++i) sum12345 += x[12345 * 784 + i];
  for (int64_t i = 0; i < train->features.num_elements(); ++i) total += x[i];
  EXPECT_EQ(sum0, 76247);
  EXPECT_EQ(sum12345, 97611);
  EXPECT_EQ(total, 3431114169.0);

  auto test = LoadExamples("idx", StrCat(kFashion, "t10k-images-idx3-ubyte.gz"),
                           StrCat(kFashion, "t10k-labels-idx1-ubyte.gz"), -1);
  ASSERT_TRUE(test.ok()) << ErrorOf(test);
  EXPECT_EQ(test->features.TypeString(), "f32[10000,28,28]");
  EXPECT_EQ(test->labels.TypeString(), "i64[10000]");
  const int64_t* ty = test->labels.data<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(ty, ty + 10), (std::vector<int64_t>{9, 2, 1, 1, 6, 1, 4, 6, 5, 7}));
  std::vector<int64_t> test_counts(10, 0);
  for (int64_t i = 0; i < 10000; ++i) {
    ASSERT_TRUE(ty[i] >= 0 && ty[i] <= 9) << i;
    ++test_counts[static_cast<std::size_t>(ty[i])];
  }
  EXPECT_EQ(test_counts, std::vector<int64_t>(10, 1000));
  const float* tx = test->features.data<float>();
  double test_total = 0;
  for (int64_t i = 0; i < test->features.num_elements(); ++i) test_total += tx[i];
  EXPECT_EQ(test_total, 573469082.0);
  EXPECT_EQ(tx[14 * 28 + 12], 98.0f);
}

TEST(FashionMnist, MismatchedFilesAreErrors) {
  // Images of the test split with labels of the training split.
  const std::string images = StrCat(kFashion, "t10k-images-idx3-ubyte.gz");
  const std::string labels = StrCat(kFashion, "train-labels-idx1-ubyte.gz");
  EXPECT_EQ(ErrorOf(LoadExamples("idx", images, labels, -1)),
            StrCat(labels, ": has 60000 labels but ", images, " has 10000 examples"));
  // Images given as labels.
  EXPECT_EQ(ErrorOf(LoadExamples("idx", images, images, -1)),
            StrCat(images, ": labels must be a vector [n], one per example; got u8[10000,28,28]"));
}

// --- Labels and .npy ------------------------------------------------------------------

TEST(Npy, ConvertsFeaturesAndLabels) {
  const std::string features = TempPath("x.npy");
  const std::string labels = TempPath("y.npy");
  ASSERT_TRUE(WriteNpy(features, Tensor::FromVector<double>({0.5, -1, 2, 3.25, 4, 5}, Shape{3, 2})).ok());
  ASSERT_TRUE(WriteNpy(labels, Tensor::FromVector<int32_t>({2, 0, 7})).ok());
  auto ex = LoadExamples("npy", features, labels, -1);
  ASSERT_TRUE(ex.ok()) << ErrorOf(ex);
  EXPECT_EQ(ex->features.TypeString(), "f32[3,2]");
  EXPECT_EQ(Values<float>(ex->features), (std::vector<float>{0.5f, -1, 2, 3.25f, 4, 5}));
  EXPECT_EQ(Values<int64_t>(ex->labels), (std::vector<int64_t>{2, 0, 7}));
  // Whole-number float labels are fine; a gzip-compressed .npy too.
  auto npy = SerializeNpy(Tensor::FromVector<float>({1, 4, 0}));
  ASSERT_TRUE(npy.ok());
  const std::string float_labels = WriteFile("yf.npy.gz", Gzip(*npy));
  auto ex2 = LoadExamples("npy", features, float_labels, -1);
  ASSERT_TRUE(ex2.ok()) << ErrorOf(ex2);
  EXPECT_EQ(Values<int64_t>(ex2->labels), (std::vector<int64_t>{1, 4, 0}));
}

TEST(Npy, BadLabelsAreErrors) {
  const std::string features = TempPath("bx.npy");
  ASSERT_TRUE(WriteNpy(features, Tensor::FromVector<float>({1, 2, 3}, Shape{3, 1})).ok());
  auto write = [](const std::string& name, const Tensor& t) {
    const std::string path = TempPath(name);
    EXPECT_TRUE(WriteNpy(path, t).ok());
    return path;
  };
  const std::string fractional = write("frac.npy", Tensor::FromVector<double>({1, 2.5, 3}));
  EXPECT_EQ(ErrorOf(LoadExamples("npy", features, fractional, -1)),
            StrCat(fractional, ": label 2.5 of example 1 is not an integer"));
  const std::string negative = write("neg.npy", Tensor::FromVector<int64_t>({1, 2, -3}));
  EXPECT_EQ(ErrorOf(LoadExamples("npy", features, negative, -1)),
            StrCat(negative, ": label -3 of example 2 is negative"));
  const std::string nan = write("nan.npy", Tensor::FromVector<float>({1, NAN, 3}));
  EXPECT_EQ(ErrorOf(LoadExamples("npy", features, nan, -1)), StrCat(nan, ": label nan of example 1 is not an integer"));
  const std::string flags = write("bool.npy", Tensor::FromVector<bool>({true, false, true}));
  EXPECT_EQ(ErrorOf(LoadExamples("npy", features, flags, -1)),
            StrCat(flags, ": labels of dtype bool are not supported; store class indices as integers"));
  const std::string few = write("few.npy", Tensor::FromVector<int64_t>({1, 2}));
  EXPECT_EQ(ErrorOf(LoadExamples("npy", features, few, -1)),
            StrCat(few, ": has 2 labels but ", features, " has 3 examples"));
  const std::string scalar = write("scalar.npy", Tensor::Scalar<float>(1));
  EXPECT_EQ(ErrorOf(LoadExamples("npy", scalar, few, -1)),
            StrCat(scalar, ": features must have a leading dimension of examples; got f32[]"));
  const std::string none = write("none.npy", *Tensor::Zeros(DType::kF32, Shape{0, 4}));
  EXPECT_EQ(ErrorOf(LoadExamples("npy", none, few, -1)), StrCat(none, ": holds no examples (its shape is [0,4])"));
  const std::string garbage = WriteFile("garbage.npy", "not numpy at all");
  EXPECT_EQ(ErrorOf(LoadExamples("npy", garbage, few, -1)),
            StrCat(garbage, ": not a valid .npy file: it does not start with the magic \"\\x93NUMPY\""));
}

TEST(LoadExamples, BadArgumentsAreErrors) {
  EXPECT_EQ(ErrorOf(LoadExamples("tfrecord", "a", "b", -1)),
            "unknown data format \"tfrecord\"; expected \"idx\", \"npy\" or \"csv\"");
  EXPECT_EQ(ErrorOf(LoadExamples("idx", "a.idx", "", -1)), "data format \"idx\" needs a labels file beside \"a.idx\"");
  EXPECT_EQ(LoadExamples("csv", TempPath("nope.csv"), "", -1).status().code(), Code::kNotFound);
}

// --- CSV ------------------------------------------------------------------------------

TEST(Csv, ParsesHeaderLabelColumnsAndLineEndings) {
  // A header, CRLF line ends, blank lines, spaces around fields, '+' and
  // exponents.
  const std::string text = "a, b, label\r\n1, 2.5, 3\r\n\r\n-4,+5e-1 , 0\n  \n7,8,1";
  auto last = ParseCsv(text, "d.csv", -1);
  ASSERT_TRUE(last.ok()) << ErrorOf(last);
  EXPECT_EQ(last->features.TypeString(), "f32[3,2]");
  EXPECT_EQ(Values<float>(last->features), (std::vector<float>{1, 2.5f, -4, 0.5f, 7, 8}));
  EXPECT_EQ(Values<int64_t>(last->labels), (std::vector<int64_t>{3, 0, 1}));
  // Label first, no header.
  auto first = ParseCsv("2,10,11\n0,12,13\n", "d.csv", 0);
  ASSERT_TRUE(first.ok()) << ErrorOf(first);
  EXPECT_EQ(Values<float>(first->features), (std::vector<float>{10, 11, 12, 13}));
  EXPECT_EQ(Values<int64_t>(first->labels), (std::vector<int64_t>{2, 0}));
  // Label in the middle.
  auto middle = ParseCsv("10,2,11\n", "d.csv", 1);
  ASSERT_TRUE(middle.ok()) << ErrorOf(middle);
  EXPECT_EQ(Values<float>(middle->features), (std::vector<float>{10, 11}));
  EXPECT_EQ(Values<int64_t>(middle->labels), (std::vector<int64_t>{2}));
  // Through LoadExamples, from a file.
  const std::string path = WriteFile("d.csv", "x,y\n0.25,4\n");
  auto loaded = LoadExamples("csv", path, "", -1);
  ASSERT_TRUE(loaded.ok()) << ErrorOf(loaded);
  EXPECT_EQ(Values<float>(loaded->features), (std::vector<float>{0.25f}));
  EXPECT_EQ(Values<int64_t>(loaded->labels), (std::vector<int64_t>{4}));
}

TEST(Csv, MalformedTextIsAnErrorWithLineAndColumn) {
  EXPECT_EQ(ErrorOf(ParseCsv("1,2,3\n4,x5,6\n", "d.csv", -1)), "d.csv:2:3: field 2 (\"x5\") is not a number");
  EXPECT_EQ(ErrorOf(ParseCsv("h1,h2\n1,2\n3,,4\n", "d.csv", -1)),
            "d.csv:3: ragged rows: this row has 3 fields, line 1 has 2");
  EXPECT_EQ(ErrorOf(ParseCsv("1,2\n3,\n", "d.csv", -1)), "d.csv:2:3: field 2 (\"\") is not a number");
  EXPECT_EQ(ErrorOf(ParseCsv("1,2\n3,1.5\n", "d.csv", -1)), "d.csv:2:3: label \"1.5\" is not an integer");
  EXPECT_EQ(ErrorOf(ParseCsv("1,2\n3,-1\n", "d.csv", -1)), "d.csv:2:3: label \"-1\" is negative");
  EXPECT_EQ(ErrorOf(ParseCsv("1,2\n", "d.csv", 2)),
            "d.csv: label column 2 is out of range for rows of 2 columns (use 0..1, or -1 for the last)");
  EXPECT_EQ(ErrorOf(ParseCsv("1,2\n", "d.csv", -2)),
            "d.csv: label column -2 is out of range for rows of 2 columns (use 0..1, or -1 for the last)");
  EXPECT_EQ(ErrorOf(ParseCsv("\n5\n6\n", "d.csv", -1)),
            "d.csv:2: a row has 1 column; it needs a label and at least one feature, separated by commas");
  EXPECT_EQ(ErrorOf(ParseCsv("a,b\n", "d.csv", -1)), "d.csv: no data rows");
  EXPECT_EQ(ErrorOf(ParseCsv("", "d.csv", -1)), "d.csv: no data rows");
}

// Lines become examples of byte values with their lengths as labels:
// blank lines are skipped, a line longer than the example is cut, a last
// piece of one byte is dropped (nothing to predict), the rest is padded.
TEST(Text, LinesBecomeExamplesWithTheirLengths) {
  auto e = ParseText("ab\n\n  \nhello world\nxyz", "t.txt", 5);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  // "ab\n" | "hello", " worl", "d\n" | "xyz"
  ASSERT_EQ(e->features.shape(), (Shape{5, 5}));
  const std::vector<int64_t> lengths(e->labels.data<int64_t>(), e->labels.data<int64_t>() + 5);
  EXPECT_EQ(lengths, (std::vector<int64_t>{3, 5, 5, 2, 3}));
  const float* f = e->features.data<float>();
  EXPECT_EQ(std::vector<float>(f, f + 5), (std::vector<float>{'a', 'b', '\n', 0, 0}));
  EXPECT_EQ(std::vector<float>(f + 15, f + 20), (std::vector<float>{'d', '\n', 0, 0, 0}));
  EXPECT_EQ(std::vector<float>(f + 20, f + 25), (std::vector<float>{'x', 'y', 'z', 0, 0}));
  // Bytes above 127 keep their value.
  auto high = ParseText("\xc3\xa9t\xc3\xa9\n", "u.txt", 8);
  ASSERT_TRUE(high.ok());
  EXPECT_EQ(high->features.data<float>()[0], 195.0f);
  EXPECT_EQ(high->labels.data<int64_t>()[0], 6);
}

TEST(Text, ErrorsNameTheFile) {
  auto blank = ParseText("\n \n\t\n", "blank.txt", 16);
  ASSERT_FALSE(blank.ok());
  EXPECT_EQ(blank.status().message(), "blank.txt: no line with text in it (5 bytes)");
  auto tiny = ParseText("abc\n", "tiny.txt", 1);
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().message(),
            "tiny.txt: text examples need a length of at least 2 bytes (an input and the next byte to predict); the "
            "model takes 1");
  auto missing = LoadText("/nonexistent/weft/notes.txt", 16);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/weft/notes.txt"), std::string::npos);
}

}  // namespace
}  // namespace weft::data
