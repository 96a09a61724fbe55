#include "core/tensor/dtype.h"

namespace weft {

std::size_t DTypeSize(DType dtype) { return weft_dtype_size(static_cast<weft_dtype_t>(dtype)); }

std::string_view DTypeName(DType dtype) {
  const char* name = weft_dtype_name(static_cast<weft_dtype_t>(dtype));
  return name != nullptr ? name : "invalid";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (DType d : AllDTypes()) {
    if (DTypeName(d) == name) return d;
  }
  struct Alias {
    std::string_view name;
    DType dtype;
  };
  static constexpr Alias kAliases[] = {
      {"float32", DType::kF32}, {"float", DType::kF32}, {"float64", DType::kF64},   {"double", DType::kF64},
      {"float16", DType::kF16}, {"half", DType::kF16},  {"bfloat16", DType::kBF16}, {"int8", DType::kI8},
      {"int16", DType::kI16},   {"int32", DType::kI32}, {"int64", DType::kI64},     {"uint8", DType::kU8},
  };
  for (const Alias& alias : kAliases) {
    if (alias.name == name) return alias.dtype;
  }
  return std::nullopt;
}

bool IsFloating(DType d) { return d == DType::kF32 || d == DType::kF64 || d == DType::kF16 || d == DType::kBF16; }
bool IsSignedInteger(DType d) { return d == DType::kI8 || d == DType::kI16 || d == DType::kI32 || d == DType::kI64; }
bool IsInteger(DType d) { return IsSignedInteger(d) || d == DType::kU8; }
bool IsNumeric(DType d) { return IsFloating(d) || IsInteger(d); }

const std::vector<DType>& AllDTypes() {
  static const std::vector<DType> all = {DType::kF32,  DType::kF64,  DType::kI32,    DType::kU8,
                                         DType::kI16,  DType::kI8,   DType::kString, DType::kI64,
                                         DType::kBool, DType::kBF16, DType::kF16,    DType::kResource};
  return all;
}

}  // namespace weft
