#include "core/tensor/npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace weft {
namespace {

const std::string kDir = WEFT_SOURCE_DIR "/tests/fixtures/npy/";

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Tensor Read(const std::string& name) {
  auto t = ReadNpy(kDir + name);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : Tensor();
}

TEST(Npy, ReadsEveryDtypeNumPyWrites) {
  Tensor f = Read("f32_2x3.npy");
  EXPECT_EQ(f.DebugString(), "f32[2,3] {0, 0.5, 1, 1.5, 2, 2.5}");
  EXPECT_EQ(Read("f64_scalar.npy").DebugString(), "f64[] {-1.25}");
  EXPECT_EQ(Read("f16_vec.npy").DebugString(), "f16[3] {0.5, -2, 65504}");
  EXPECT_EQ(Read("i8_vec.npy").DebugString(), "i8[3] {-128, 0, 127}");
  EXPECT_EQ(Read("i16_vec.npy").DebugString(), "i16[3] {-32768, 7, 32767}");
  EXPECT_EQ(Read("i32_2x2.npy").DebugString(), "i32[2,2] {1, -2, 3, -4}");
  EXPECT_EQ(Read("i64_vec.npy").DebugString(), "i64[2] {1099511627776, -5}");
  EXPECT_EQ(Read("u8_vec.npy").DebugString(), "u8[3] {0, 200, 255}");
  EXPECT_EQ(Read("bool_vec.npy").DebugString(), "bool[3] {true, false, true}");
  EXPECT_EQ(Read("empty_0x4.npy").TypeString(), "f32[0,4]");
  Tensor r6 = Read("rank6.npy");
  EXPECT_EQ(r6.TypeString(), "i32[2,2,2,2,2,2]");
  EXPECT_EQ(r6.data<int32_t>()[63], 63);
  EXPECT_EQ(Read("f32_big_endian.npy").DebugString(), "f32[2] {1.5, -3}");
  EXPECT_EQ(Read("f32_version2.npy").DebugString(), "f32[2] {7, 8}");
}

TEST(Npy, WritesTheBytesNumPyWrites) {
  // Our writer's header layout matches NumPy's, byte for byte.
  for (const char* name :
       {"f32_2x3.npy", "f64_scalar.npy", "i64_vec.npy", "bool_vec.npy", "empty_0x4.npy", "rank6.npy"}) {
    Tensor t = Read(name);
    auto bytes = SerializeNpy(t);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(*bytes, Bytes(kDir + name)) << name;
  }
}

TEST(Npy, RoundTripsThroughAFile) {
  const std::string path = "/tmp/weft_npy_test_" + std::to_string(getpid()) + ".npy";
  Tensor t = Tensor::FromVector<int16_t>({1, -2, 3}, Shape{3, 1});
  ASSERT_TRUE(WriteNpy(path, t).ok());
  Tensor back = *ReadNpy(path);
  EXPECT_TRUE(back.BitwiseEquals(t));
  std::remove(path.c_str());
}

TEST(Npy, WriteFailuresAreIoErrorsNamingThePath) {
  const std::string path = "/tmp/weft_npy_test_missing_" + std::to_string(getpid()) + "/x.npy";
  Status s = WriteNpy(path, Tensor::Scalar<float>(1));
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_EQ(s.message().rfind("writing " + path + ": creating " + path + ".tmp-", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(": No such file or directory"), std::string::npos) << s.message();
}

TEST(Npy, RefusesWhatItCannotRepresent) {
  EXPECT_EQ(ReadNpy(kDir + "f32_fortran.npy").status().message(),
            kDir +
                "f32_fortran.npy: Fortran-order arrays are not supported; save it in C order "
                "(numpy.ascontiguousarray) and try again");
  EXPECT_EQ(ReadNpy(kDir + "complex64.npy").status().message(),
            kDir + "complex64.npy: dtype '<c8' is not supported (use float16/32/64, int8/16/32/64, uint8 or bool)");
  EXPECT_EQ(ReadNpy(kDir + "object.npy").status().message(),
            kDir + "object.npy: not a valid .npy file: unsupported dtype descr '|O'");
  EXPECT_EQ(ReadNpy(kDir + "u16_vec.npy").status().message(),
            kDir + "u16_vec.npy: dtype '<u2' is not supported (use float16/32/64, int8/16/32/64, uint8 or bool)");
  EXPECT_EQ(SerializeNpy(*Tensor::Zeros(DType::kBF16, Shape{2})).status().message(),
            "a bf16 tensor cannot be saved as .npy: NumPy has no such dtype (cast it to f32 first)");
  EXPECT_EQ(ReadNpy("/nonexistent.npy").status().message(),
            "cannot read \"/nonexistent.npy\": No such file or directory");
}

TEST(Npy, MalformedFilesAreClearErrors) {
  const std::string good = Bytes(kDir + "f32_2x3.npy");
  EXPECT_EQ(ParseNpy("hello", "x.npy").status().message(),
            "x.npy: not a valid .npy file: it does not start with the magic \"\\x93NUMPY\"");
  EXPECT_EQ(ParseNpy(good.substr(0, 20), "x.npy").status().message(), "x.npy: not a valid .npy file: truncated header");
  EXPECT_EQ(ParseNpy(good.substr(0, good.size() - 4), "x.npy").status().message(),
            "x.npy: truncated: shape [2,3] of <f4 needs 24 bytes of data, the file has 20");
  EXPECT_EQ(ParseNpy(good + "xx", "x.npy").status().message(), "x.npy: 2 bytes of trailing data after the array");
  std::string bad_version = good;
  bad_version[6] = 9;
  EXPECT_EQ(ParseNpy(bad_version, "x.npy").status().message(),
            "x.npy: not a valid .npy file: unsupported format version 9.0");
  std::string huge = good;
  const auto pos = huge.find("(2, 3)");
  huge.replace(pos, 6, "(99999999999, 99999999999)");
  // The header grew; fix its length field so only the shape is wrong.
  const std::size_t header_len = huge.find('\n', 10) - 10 + 1;
  huge[8] = static_cast<char>(header_len & 0xff);
  huge[9] = static_cast<char>(header_len >> 8);
  EXPECT_EQ(ParseNpy(huge, "x.npy").status().message(),
            "x.npy: not a valid .npy file: shape [99999999999,99999999999] has more than 2^63 elements");
  std::string bad_bool = Bytes(kDir + "bool_vec.npy");
  bad_bool.back() = 7;
  EXPECT_EQ(ParseNpy(bad_bool, "b.npy").status().message(),
            "b.npy: not a valid .npy file: bool element 2 is 7, not 0 or 1");
  std::string no_shape = good;
  no_shape.replace(no_shape.find("'shape'"), 7, "'shope'");
  EXPECT_EQ(ParseNpy(no_shape, "x.npy").status().message(),
            "x.npy: not a valid .npy file: unexpected key 'shope' in the header");
}

}  // namespace
}  // namespace weft
