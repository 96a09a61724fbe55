// ONNX's element types, tensors and value infos as Weft's: the
// conversions between ONNX's and Weft's dtypes, TensorProto reading (raw or
// typed fields, or external data files beside the model) and the small
// tensor helpers the converters share (core/onnx/importer.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/base/strings.h"
#include "core/onnx/importer.h"
#include "weft/sdk/half.h"

namespace weft::onnx_io {

// --- Types and tensors ---------------------------------------------------------------

Expected<DType> DTypeFromOnnx(int32_t t) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DType::kF32;
    case onnx::TensorProto::DOUBLE: return DType::kF64;
    case onnx::TensorProto::FLOAT16: return DType::kF16;
    case onnx::TensorProto::BFLOAT16: return DType::kBF16;
    case onnx::TensorProto::INT8: return DType::kI8;
    case onnx::TensorProto::INT16: return DType::kI16;
    case onnx::TensorProto::INT32: return DType::kI32;
    case onnx::TensorProto::INT64: return DType::kI64;
    case onnx::TensorProto::UINT8: return DType::kU8;
    case onnx::TensorProto::BOOL: return DType::kBool;
    case onnx::TensorProto::STRING: return DType::kString;
    default: break;
  }
  const std::string name =
      onnx::TensorProto_DataType_IsValid(t) ? onnx::TensorProto_DataType_Name(t) : StrCat("number ", t);
  return UnimplementedError(
      "element type ", name,
      " has no Weft equivalent (Weft has f16, bf16, f32, f64, i8, i16, i32, i64, u8, bool, string)");
}

int32_t DTypeToOnnx(DType dtype) {
  switch (dtype) {
    case DType::kF32: return onnx::TensorProto::FLOAT;
    case DType::kF64: return onnx::TensorProto::DOUBLE;
    case DType::kF16: return onnx::TensorProto::FLOAT16;
    case DType::kBF16: return onnx::TensorProto::BFLOAT16;
    case DType::kI8: return onnx::TensorProto::INT8;
    case DType::kI16: return onnx::TensorProto::INT16;
    case DType::kI32: return onnx::TensorProto::INT32;
    case DType::kI64: return onnx::TensorProto::INT64;
    case DType::kU8: return onnx::TensorProto::UINT8;
    case DType::kBool: return onnx::TensorProto::BOOL;
    case DType::kString: return onnx::TensorProto::STRING;
    default: return onnx::TensorProto::UNDEFINED;
  }
}

namespace {

// Reads |length| bytes at |offset| of the external data file |location|
// (relative to |base_dir|, inside it).
Expected<std::string> ReadExternal(const std::string& tensor, const std::string& location, uint64_t offset,
                                   std::optional<uint64_t> length, const std::string& base_dir) {
  const std::filesystem::path rel(location);
  if (location.empty() || rel.is_absolute() ||
      std::any_of(rel.begin(), rel.end(), [](const std::filesystem::path& p) { return p == ".."; })) {
    return InvalidArgumentError("initializer ", Quote(tensor), ": external data location ", Quote(location),
                                " must be a relative path inside the model's folder");
  }
  const std::filesystem::path path = std::filesystem::path(base_dir.empty() ? "." : base_dir) / rel;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) {
    return NotFoundError("initializer ", Quote(tensor), ": its data is in the external file ", Quote(location),
                         ", which cannot be read at ", Quote(path.string()), " (", ec.message(),
                         "); keep the data files beside the .onnx file");
  }
  const uint64_t want = length.value_or(size >= offset ? size - offset : 0);
  if (offset > size || want > size - offset) {
    return InvalidArgumentError("initializer ", Quote(tensor), ": external file ", Quote(location), " has ", size,
                                " bytes, fewer than offset ", offset, " + length ", want);
  }
  std::ifstream in(path, std::ios::binary);
  std::string data(want, '\0');
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(data.data(), static_cast<std::streamsize>(want));
  if (!in) return DataLossError("initializer ", Quote(tensor), ": reading ", Quote(path.string()), " failed");
  return data;
}

template <class T, class Field>
void CopyField(const Field& field, Tensor& t) {
  T* out = t.data<T>();
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<T>(field.Get(i));
}

}  // namespace

Expected<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir) {
  const std::string& name = proto.name();
  auto dtype = DTypeFromOnnx(proto.data_type());
  if (!dtype.ok()) return dtype.status().WithContext(StrCat("tensor ", Quote(name)));
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgumentError("tensor ", Quote(name), ": negative dimension in ", ListString(dims));
    if (d != 0 && count > std::numeric_limits<int64_t>::max() / d) {
      return InvalidArgumentError("tensor ", Quote(name), ": shape ", ListString(dims), " has too many elements");
    }
    count *= d;
  }
  const Shape shape(dims);
  if (*dtype == DType::kString) {
    if (proto.string_data_size() != count) {
      return InvalidArgumentError("tensor ", Quote(name), ": ", proto.string_data_size(), " strings for shape ",
                                  shape.ToString());
    }
    std::vector<std::string> strings(proto.string_data().begin(), proto.string_data().end());
    return Tensor::Strings(strings, shape);
  }
  const uint64_t elem = DTypeSize(*dtype);
  const bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  std::string external_bytes;
  const std::string* raw = proto.has_raw_data() ? &proto.raw_data() : nullptr;
  if (external) {
    std::string location;
    uint64_t offset = 0;
    std::optional<uint64_t> length;
    for (const auto& kv : proto.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoull(kv.value());
        if (kv.key() == "length") length = std::stoull(kv.value());
      } catch (const std::exception&) {
        return InvalidArgumentError("tensor ", Quote(name), ": external data ", kv.key(), " ", Quote(kv.value()),
                                    " is not a number");
      }
    }
    WEFT_ASSIGN_OR_RETURN(external_bytes, ReadExternal(name, location, offset, length, base_dir));
    raw = &external_bytes;
  }
  if (raw != nullptr) {
    if (static_cast<uint64_t>(count) > raw->size() / std::max<uint64_t>(elem, 1) ||
        raw->size() != static_cast<uint64_t>(count) * elem) {
      return InvalidArgumentError("tensor ", Quote(name), ": ", raw->size(), " bytes of data for ", DTypeName(*dtype),
                                  shape.ToString(), ", which needs ", static_cast<uint64_t>(count) * elem);
    }
    WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(*dtype, shape));
    if (count > 0) std::memcpy(t.raw_data(), raw->data(), raw->size());
    return t;
  }
  int64_t have = 0;
  switch (*dtype) {
    case DType::kF32: have = proto.float_data_size(); break;
    case DType::kF64: have = proto.double_data_size(); break;
    case DType::kI64: have = proto.int64_data_size(); break;
    default: have = proto.int32_data_size(); break;
  }
  if (have != count) {
    return InvalidArgumentError("tensor ", Quote(name), ": ", have, " values for ", DTypeName(*dtype), shape.ToString(),
                                ", which has ", count);
  }
  WEFT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(*dtype, shape));
  switch (*dtype) {
    case DType::kF32: CopyField<float>(proto.float_data(), t); break;
    case DType::kF64: CopyField<double>(proto.double_data(), t); break;
    case DType::kI64: CopyField<int64_t>(proto.int64_data(), t); break;
    case DType::kI32: CopyField<int32_t>(proto.int32_data(), t); break;
    case DType::kI16: CopyField<int16_t>(proto.int32_data(), t); break;
    case DType::kI8: CopyField<int8_t>(proto.int32_data(), t); break;
    case DType::kU8: CopyField<uint8_t>(proto.int32_data(), t); break;
    case DType::kBool: CopyField<bool>(proto.int32_data(), t); break;
    case DType::kF16:
    case DType::kBF16: CopyField<uint16_t>(proto.int32_data(), t); break;  // the bits
    default: return InternalError("tensor ", Quote(name), ": unhandled dtype");
  }
  return t;
}

Tensor Int64s(const std::vector<int64_t>& values) { return Tensor::FromVector<int64_t>(values); }
Tensor Int64s(const std::vector<int64_t>& values, const Shape& shape) {
  return Tensor::FromVector<int64_t>(values, shape);
}

std::vector<int64_t> ToInts(const Tensor& t) {
  std::vector<int64_t> out(static_cast<std::size_t>(t.num_elements()));
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    int64_t v = 0;
    switch (t.dtype()) {
      case DType::kI64: v = t.data<int64_t>()[i]; break;
      case DType::kI32: v = t.data<int32_t>()[i]; break;
      case DType::kI16: v = t.data<int16_t>()[i]; break;
      case DType::kI8: v = t.data<int8_t>()[i]; break;
      case DType::kU8: v = t.data<uint8_t>()[i]; break;
      case DType::kBool: v = t.data<bool>()[i] ? 1 : 0; break;
      case DType::kF32: v = static_cast<int64_t>(t.data<float>()[i]); break;
      case DType::kF64: v = static_cast<int64_t>(t.data<double>()[i]); break;
      default: break;
    }
    out[static_cast<std::size_t>(i)] = v;
  }
  return out;
}

namespace {

// |v| converted to the integer type T, saturating at T's range (NaN is 0):
// a bound such as +inf or 255 must not wrap (a static_cast out of range is
// undefined, and gave int8 Clip the upper bound -1).
template <class T>
T Saturated(double v) {
  if (std::isnan(v)) return T(0);
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace

Expected<Tensor> ScalarOf(DType dtype, double value) {
  switch (dtype) {
    case DType::kF32: return Tensor::Scalar<float>(static_cast<float>(value));
    case DType::kF64: return Tensor::Scalar<double>(value);
    case DType::kF16: {
      Tensor t = *Tensor::Allocate(DType::kF16, Shape{});
      *t.data<uint16_t>() = sdk::FloatToHalf(static_cast<float>(value));
      return t;
    }
    case DType::kBF16: {
      Tensor t = *Tensor::Allocate(DType::kBF16, Shape{});
      *t.data<uint16_t>() = sdk::DoubleToBfloat16(value);
      return t;
    }
    case DType::kI64: return Tensor::Scalar<int64_t>(Saturated<int64_t>(value));
    case DType::kI32: return Tensor::Scalar<int32_t>(Saturated<int32_t>(value));
    case DType::kI16: return Tensor::Scalar<int16_t>(Saturated<int16_t>(value));
    case DType::kI8: return Tensor::Scalar<int8_t>(Saturated<int8_t>(value));
    case DType::kU8: return Tensor::Scalar<uint8_t>(Saturated<uint8_t>(value));
    case DType::kBool: return Tensor::Scalar<bool>(value != 0);
    default: return UnimplementedError("a scalar of ", DTypeName(dtype), " (only numbers and bool)");
  }
}

std::pair<double, double> DTypeRange(DType dtype) {
  switch (dtype) {
    case DType::kI64:
      return {static_cast<double>(std::numeric_limits<int64_t>::lowest()),
              static_cast<double>(std::numeric_limits<int64_t>::max())};
    case DType::kI32: return {std::numeric_limits<int32_t>::lowest(), std::numeric_limits<int32_t>::max()};
    case DType::kI16: return {std::numeric_limits<int16_t>::lowest(), std::numeric_limits<int16_t>::max()};
    case DType::kI8: return {std::numeric_limits<int8_t>::lowest(), std::numeric_limits<int8_t>::max()};
    case DType::kU8: return {0, std::numeric_limits<uint8_t>::max()};
    case DType::kBool: return {0, 1};
    default: return {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  }
}

Expected<std::pair<Shape, DType>> ValueInfoType(const onnx::ValueInfoProto& info) {
  if (!info.type().has_tensor_type()) {
    return UnimplementedError("value ", Quote(info.name()),
                              " is not a tensor (sequences, maps and optionals are not "
                              "supported)");
  }
  const auto& tt = info.type().tensor_type();
  WEFT_ASSIGN_OR_RETURN(DType dtype, DTypeFromOnnx(tt.elem_type()));
  if (!tt.has_shape()) return std::make_pair(Shape::UnknownRank(), dtype);
  std::vector<int64_t> dims;
  for (const auto& d : tt.shape().dim()) dims.push_back(d.has_dim_value() ? d.dim_value() : Shape::kUnknownDim);
  return std::make_pair(Shape(dims), dtype);
}

}  // namespace weft::onnx_io
