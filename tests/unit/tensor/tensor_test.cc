#include "core/tensor/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "weft/sdk/half.h"

namespace weft {
namespace {

TEST(DType, NamesRoundTripAndAliasesParse) {
  for (DType d : AllDTypes()) EXPECT_EQ(ParseDType(DTypeName(d)), d) << DTypeName(d);
  EXPECT_EQ(ParseDType("float32"), DType::kF32);
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(ParseDType("complex64"), std::nullopt);
  EXPECT_EQ(DTypeName(static_cast<DType>(8)), "invalid");
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_TRUE(IsFloating(DType::kBF16));
  EXPECT_FALSE(IsFloating(DType::kI32));
  EXPECT_TRUE(IsSignedInteger(DType::kI8));
  EXPECT_FALSE(IsSignedInteger(DType::kU8));
  EXPECT_TRUE(IsNumeric(DType::kU8));
  EXPECT_FALSE(IsNumeric(DType::kBool));
}

TEST(Shape, PartialShapes) {
  Shape s{-1, 784};
  EXPECT_EQ(s.ToString(), "[?,784]");
  EXPECT_FALSE(s.IsFullyDefined());
  EXPECT_EQ(s.num_elements(), -1);
  EXPECT_TRUE(s.IsCompatibleWith(Shape{32, 784}));
  EXPECT_FALSE(s.IsCompatibleWith(Shape{32, 10}));
  EXPECT_FALSE(s.IsCompatibleWith(Shape{784}));
  EXPECT_TRUE(Shape::UnknownRank().IsCompatibleWith(Shape{1, 2, 3}));
  EXPECT_EQ(Shape::UnknownRank().ToString(), "<unknown>");
  EXPECT_EQ(Shape{}.ToString(), "[]");
  EXPECT_EQ(Shape{}.num_elements(), 1);
  EXPECT_EQ(*s.Merge(Shape{8, -1}), (Shape{8, 784}));
  EXPECT_EQ(s.Merge(Shape{8, 5}).status().message(), "shapes [?,784] and [8,5] are incompatible");
}

TEST(Shape, CheckedNumElementsCatchesOverflow) {
  EXPECT_EQ(*CheckedNumElements({2, 3, 0}), 0);
  EXPECT_EQ(*CheckedNumElements({}), 1);
  EXPECT_EQ(CheckedNumElements({1LL << 32, 1LL << 32}).status().message(),
            "shape [4294967296,4294967296] has more than 2^63 elements");
  EXPECT_EQ(CheckedNumElements({3, -2}).status().message(), "negative dimension -2");
}

TEST(Tensor, AllocateScalarsAndVectors) {
  Tensor s = Tensor::Scalar<double>(2.5);
  EXPECT_EQ(s.dtype(), DType::kF64);
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.num_elements(), 1);
  EXPECT_EQ(s.scalar<double>(), 2.5);
  Tensor v = Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  EXPECT_EQ(v.TypeString(), "i32[2,3]");
  EXPECT_EQ(v.byte_size(), 24u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.raw_data()) % HostBuffer::kAlignment, 0u);
  EXPECT_EQ(v.DebugString(), "i32[2,3] {1, 2, 3, 4, 5, 6}");
  EXPECT_EQ(v.DebugString(2), "i32[2,3] {1, 2, ... (6 in all)}");
  Tensor b = Tensor::FromVector<bool>({true, false});
  EXPECT_EQ(b.DebugString(), "bool[2] {true, false}");
}

TEST(Tensor, ReshapeSharesAndDeepCopyDoesNot) {
  Tensor v = Tensor::FromVector<float>({1, 2, 3, 4});
  Tensor r = *v.Reshaped(Shape{2, 2});
  EXPECT_EQ(r.raw_data(), v.raw_data());
  EXPECT_EQ(v.Reshaped(Shape{3}).status().message(), "cannot reshape f32[4] (4 elements) to [3]");
  Tensor c = *v.DeepCopy();
  EXPECT_NE(c.raw_data(), v.raw_data());
  EXPECT_TRUE(c.BitwiseEquals(v));
  c.data<float>()[0] = 9;
  EXPECT_FALSE(c.BitwiseEquals(v));
  EXPECT_FALSE(r.BitwiseEquals(v));  // same bytes, other shape
}

TEST(Tensor, StringsAndEmptyTensors) {
  Tensor s = Tensor::Strings({"a", "bc", ""}, Shape{3});
  EXPECT_EQ(s.string_at(1), "bc");
  EXPECT_EQ(s.DebugString(), "string[3] {\"a\", \"bc\", \"\"}");
  EXPECT_TRUE((*s.DeepCopy()).BitwiseEquals(s));
  Tensor e = *Tensor::Zeros(DType::kF32, Shape{0, 4});
  EXPECT_EQ(e.num_elements(), 0);
  EXPECT_EQ(e.byte_size(), 0u);
  EXPECT_TRUE(e.BitwiseEquals(*Tensor::Zeros(DType::kF32, Shape{0, 4})));
  EXPECT_EQ(Tensor::Allocate(DType::kF32, Shape{-1, 2}).status().message(),
            "cannot allocate a tensor of partial shape [?,2]");
}

TEST(Half, KnownBitPatterns) {
  // IEEE 754 binary16 by hand: sign | 5-bit exponent (bias 15) | 10-bit fraction.
  EXPECT_EQ(sdk::FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(sdk::FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(sdk::FloatToHalf(65504.0f), 0x7bff);                // largest finite
  EXPECT_EQ(sdk::FloatToHalf(65520.0f), 0x7c00);                // rounds to inf
  EXPECT_EQ(sdk::FloatToHalf(5.9604644775390625e-8f), 0x0001);  // smallest subnormal, 2^-24
  EXPECT_EQ(sdk::FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);      // tie, rounds to even
  EXPECT_EQ(sdk::FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);      // tie, rounds to even
  EXPECT_EQ(sdk::HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isnan(sdk::HalfToFloat(sdk::FloatToHalf(std::nanf("")))));
  // bfloat16: the top half of binary32, rounded to nearest even.
  EXPECT_EQ(sdk::FloatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(sdk::FloatToBfloat16(sdk::BitsToFloat(0x3f808000u)), 0x3f80);  // tie, even
  EXPECT_EQ(sdk::FloatToBfloat16(sdk::BitsToFloat(0x3f818000u)), 0x3f82);  // tie, even
  EXPECT_EQ(sdk::Bfloat16ToFloat(0xc040), -3.0f);
}

}  // namespace
}  // namespace weft
