#include "core/tensor/tensor.h"

#include <cstdlib>

#include "core/tensor/size.h"
#include "weft/sdk/half.h"

namespace weft {
namespace {

// Keeps the strings of a STRING tensor alive next to the weft_string_t
// array that points into them.
class StringBuffer : public Buffer {
 public:
  static std::shared_ptr<StringBuffer> Make(const std::vector<std::string>& values) {
    auto* storage = new std::vector<std::string>(values);
    auto* views = new std::vector<weft_string_t>(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      (*views)[i] = weft_string_t{(*storage)[i].data(), (*storage)[i].size()};
    }
    return std::shared_ptr<StringBuffer>(new StringBuffer(storage, views));
  }
  ~StringBuffer() override {
    delete views_;
    delete storage_;
  }

 private:
  StringBuffer(std::vector<std::string>* storage, std::vector<weft_string_t>* views)
      : Buffer(views->data(), views->size() * sizeof(weft_string_t), nullptr, nullptr),
        storage_(storage),
        views_(views) {}
  std::vector<std::string>* storage_;
  std::vector<weft_string_t>* views_;
};

}  // namespace

Expected<std::shared_ptr<HostBuffer>> HostBuffer::Allocate(uint64_t size) {
  void* data = nullptr;
  if (posix_memalign(&data, kAlignment, size == 0 ? kAlignment : size) != 0) {
    return ResourceExhaustedError("cannot allocate ", size, " bytes of host memory");
  }
  return std::shared_ptr<HostBuffer>(new HostBuffer(data, size));
}

HostBuffer::~HostBuffer() { std::free(data()); }

Tensor::Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, uint64_t offset)
    : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(offset) {
  num_elements_ = shape_.num_elements();
}

Expected<Tensor> Tensor::Allocate(DType dtype, const Shape& shape) {
  if (DTypeSize(dtype) == 0 && dtype != DType::kString) {
    return InvalidArgumentError("cannot allocate a tensor of dtype ", DTypeName(dtype));
  }
  WEFT_ASSIGN_OR_RETURN(uint64_t bytes, TensorBytes(dtype, shape));
  if (dtype == DType::kString) return Strings(std::vector<std::string>(shape.num_elements()), shape);
  WEFT_ASSIGN_OR_RETURN(auto buffer, HostBuffer::Allocate(bytes));
  return Tensor(dtype, shape, std::move(buffer));
}

Expected<Tensor> Tensor::Zeros(DType dtype, const Shape& shape) {
  WEFT_ASSIGN_OR_RETURN(Tensor t, Allocate(dtype, shape));
  if (dtype != DType::kString && t.byte_size() > 0) std::memset(t.raw_data(), 0, t.byte_size());
  return t;
}

Tensor Tensor::Strings(const std::vector<std::string>& values, const Shape& shape) {
  return Tensor(DType::kString, shape, StringBuffer::Make(values));
}

std::string_view Tensor::string_at(int64_t i) const {
  const weft_string_t& s = data<weft_string_t>()[i];
  return std::string_view(s.data, s.size);
}

Expected<Tensor> Tensor::Reshaped(const Shape& shape) const {
  if (!shape.IsFullyDefined() || shape.num_elements() != num_elements_) {
    return InvalidArgumentError("cannot reshape ", TypeString(), " (", num_elements_, " elements) to ",
                                shape.ToString());
  }
  return Tensor(dtype_, shape, buffer_, offset_);
}

Expected<Tensor> Tensor::DeepCopy() const {
  if (!host_visible()) return FailedPreconditionError("DeepCopy of a tensor not in host memory");
  if (dtype_ == DType::kString) {
    std::vector<std::string> values;
    for (int64_t i = 0; i < num_elements_; ++i) values.emplace_back(string_at(i));
    return Strings(values, shape_);
  }
  WEFT_ASSIGN_OR_RETURN(Tensor copy, Allocate(dtype_, shape_));
  if (byte_size() > 0) std::memcpy(copy.raw_data(), raw_data(), byte_size());
  return copy;
}

bool Tensor::BitwiseEquals(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  if (dtype_ == DType::kString) {
    for (int64_t i = 0; i < num_elements_; ++i) {
      if (string_at(i) != other.string_at(i)) return false;
    }
    return true;
  }
  if (byte_size() == 0) return true;
  return raw_data() != nullptr && other.raw_data() != nullptr &&
         std::memcmp(raw_data(), other.raw_data(), byte_size()) == 0;
}

std::string Tensor::TypeString() const { return StrCat(DTypeName(dtype_), shape_.ToString()); }

std::string Tensor::DebugString(int64_t max_elements) const {
  std::string out = TypeString();
  if (!valid()) return "<invalid tensor>";
  if (raw_data() == nullptr && num_elements_ > 0) return out + " <device memory>";
  out += " {";
  const int64_t shown = std::min(num_elements_, max_elements);
  for (int64_t i = 0; i < shown; ++i) {
    if (i > 0) out += ", ";
    switch (dtype_) {
      case DType::kF32: out += StrCat(data<float>()[i]); break;
      case DType::kF64: out += StrCat(data<double>()[i]); break;
      case DType::kF16: out += StrCat(sdk::HalfToFloat(data<uint16_t>()[i])); break;
      case DType::kBF16: out += StrCat(sdk::Bfloat16ToFloat(data<uint16_t>()[i])); break;
      case DType::kI8: out += StrCat(static_cast<int>(data<int8_t>()[i])); break;
      case DType::kI16: out += StrCat(data<int16_t>()[i]); break;
      case DType::kI32: out += StrCat(data<int32_t>()[i]); break;
      case DType::kI64: out += StrCat(data<int64_t>()[i]); break;
      case DType::kU8: out += StrCat(static_cast<int>(data<uint8_t>()[i])); break;
      case DType::kBool: out += data<bool>()[i] ? "true" : "false"; break;
      case DType::kString: out += Quote(string_at(i)); break;
      default: out += "?"; break;
    }
  }
  if (shown < num_elements_) out += StrCat(", ... (", num_elements_, " in all)");
  return out + "}";
}

}  // namespace weft
