// Element types. The numbers are those of the ABI (weft/weft_tensor.h),
// which are TensorFlow's, and never change.
#ifndef WEFT_CORE_TENSOR_DTYPE_H_
#define WEFT_CORE_TENSOR_DTYPE_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "weft/weft_tensor.h"

namespace weft {

enum class DType : int32_t {
  kInvalid = WEFT_DTYPE_INVALID,
  kF32 = WEFT_DTYPE_F32,
  kF64 = WEFT_DTYPE_F64,
  kI32 = WEFT_DTYPE_I32,
  kU8 = WEFT_DTYPE_U8,
  kI16 = WEFT_DTYPE_I16,
  kI8 = WEFT_DTYPE_I8,
  kString = WEFT_DTYPE_STRING,
  kI64 = WEFT_DTYPE_I64,
  kBool = WEFT_DTYPE_BOOL,
  kBF16 = WEFT_DTYPE_BF16,
  kF16 = WEFT_DTYPE_F16,
  kResource = WEFT_DTYPE_RESOURCE,
};

// Bytes per element; 0 for kInvalid.
std::size_t DTypeSize(DType dtype);
// "f32", "resource"; "invalid" for kInvalid or an unknown number.
std::string_view DTypeName(DType dtype);
// The inverse of DTypeName (also accepts "float32", "float", "int64", ...).
std::optional<DType> ParseDType(std::string_view name);

bool IsFloating(DType dtype);  // f16 bf16 f32 f64
bool IsInteger(DType dtype);   // i8 i16 i32 i64 u8
bool IsSignedInteger(DType dtype);
bool IsNumeric(DType dtype);  // floating or integer
// Every dtype a tensor can hold, in ABI number order.
const std::vector<DType>& AllDTypes();

// The C++ type of a dtype's element, for code that switches on dtype:
//   WEFT_SWITCH_DTYPE(t.dtype(), T, { Fill<T>(t); })
template <DType D>
struct DTypeTraits;
template <>
struct DTypeTraits<DType::kF32> {
  using T = float;
};
template <>
struct DTypeTraits<DType::kF64> {
  using T = double;
};
template <>
struct DTypeTraits<DType::kI8> {
  using T = int8_t;
};
template <>
struct DTypeTraits<DType::kI16> {
  using T = int16_t;
};
template <>
struct DTypeTraits<DType::kI32> {
  using T = int32_t;
};
template <>
struct DTypeTraits<DType::kI64> {
  using T = int64_t;
};
template <>
struct DTypeTraits<DType::kU8> {
  using T = uint8_t;
};
template <>
struct DTypeTraits<DType::kBool> {
  using T = bool;
};
template <>
struct DTypeTraits<DType::kF16> {
  using T = uint16_t;
};  // bits
template <>
struct DTypeTraits<DType::kBF16> {
  using T = uint16_t;
};  // bits

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_DTYPE_H_
