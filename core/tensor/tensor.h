// Tensors: a dtype, a fully known shape, and a ref-counted Buffer made by
// the owning device's allocator (or host memory for tensors the core makes
// itself: constants, feeds read from .npy, fetched results).
//
//   Tensor t = *Tensor::Allocate(DType::kF32, Shape{2, 3});
//   float* p = t.data<float>();
//   Tensor s = Tensor::Scalar<int64_t>(7);
//
// Copying a Tensor shares its buffer; tensors are values, so code that
// mutates a buffer in place (variables, in-place kernels) owns the right to.
// Elements are dense and row-major.
#ifndef WEFT_CORE_TENSOR_TENSOR_H_
#define WEFT_CORE_TENSOR_TENSOR_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/base/status.h"
#include "core/tensor/dtype.h"
#include "core/tensor/shape.h"
#include "weft/weft_tensor.h"

namespace weft {

// Memory holding tensor elements. Host buffers have a host address; device
// buffers have a plugin buffer handle, and a host address too when the
// device's memory is host-visible.
class Buffer {
 public:
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // The host address of the first byte, or nullptr when not host-visible.
  void* data() const { return data_; }
  uint64_t size() const { return size_; }
  // The plugin's handle, or nullptr for host memory.
  weft_buffer_t device_buffer() const { return device_buffer_; }
  // Identifies the device owning the memory; nullptr for host memory.
  const void* owner() const { return owner_; }

 protected:
  Buffer(void* data, uint64_t size, weft_buffer_t device_buffer, const void* owner)
      : data_(data), size_(size), device_buffer_(device_buffer), owner_(owner) {}

 private:
  void* data_;
  uint64_t size_;
  weft_buffer_t device_buffer_;
  const void* owner_;
};

// Host memory, aligned to 64 bytes. Throws nothing; Allocate reports failure.
class HostBuffer : public Buffer {
 public:
  static constexpr uint64_t kAlignment = 64;
  static Expected<std::shared_ptr<HostBuffer>> Allocate(uint64_t size);
  ~HostBuffer() override;

 private:
  HostBuffer(void* data, uint64_t size) : Buffer(data, size, nullptr, nullptr) {}
};

class Tensor {
 public:
  // An empty, invalid tensor (dtype kInvalid).
  Tensor() = default;
  // A tensor over |buffer| starting at byte |offset|; the buffer must hold
  // the elements.
  Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, uint64_t offset = 0);

  // A host tensor of |dtype| and |shape| (fully defined), uninitialised.
  static Expected<Tensor> Allocate(DType dtype, const Shape& shape);
  // A host tensor of zeros.
  static Expected<Tensor> Zeros(DType dtype, const Shape& shape);

  template <class T>
  static Tensor Scalar(T value);
  template <class T>
  static Tensor FromVector(const std::vector<T>& values, const Shape& shape);
  template <class T>
  static Tensor FromVector(const std::vector<T>& values) {
    return FromVector(values, Shape{static_cast<int64_t>(values.size())});
  }
  // A STRING tensor (host memory).
  static Tensor Strings(const std::vector<std::string>& values, const Shape& shape);

  bool valid() const { return dtype_ != DType::kInvalid; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_.dim(i); }
  int64_t num_elements() const { return num_elements_; }
  uint64_t byte_size() const { return static_cast<uint64_t>(num_elements_) * DTypeSize(dtype_); }

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  uint64_t offset() const { return offset_; }
  // Whether the elements are addressable from the host.
  bool host_visible() const { return buffer_ == nullptr || buffer_->data() != nullptr; }
  // The host address of the first element (nullptr when not host-visible
  // or empty).
  void* raw_data() const {
    return buffer_ == nullptr || buffer_->data() == nullptr ? nullptr : static_cast<char*>(buffer_->data()) + offset_;
  }
  template <class T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }
  template <class T>
  T scalar() const {
    return *data<T>();
  }
  // Element |i| of a STRING tensor.
  std::string_view string_at(int64_t i) const;

  // The same buffer seen with another shape of the same element count.
  Expected<Tensor> Reshaped(const Shape& shape) const;
  // A host copy with its own buffer (the elements must be host-visible).
  Expected<Tensor> DeepCopy() const;
  // Same dtype, shape and bytes (NaNs with equal bits are equal).
  bool BitwiseEquals(const Tensor& other) const;

  // "f32[2,3] {1, 2, 3, 4, 5, 6}", eliding after |max_elements|.
  std::string DebugString(int64_t max_elements = 16) const;
  // "f32[2,3]"
  std::string TypeString() const;

 private:
  DType dtype_ = DType::kInvalid;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::shared_ptr<Buffer> buffer_;
  uint64_t offset_ = 0;
};

// The dtype of a C++ element type.
template <class T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, double>) return DType::kF64;
  if constexpr (std::is_same_v<T, int8_t>) return DType::kI8;
  if constexpr (std::is_same_v<T, int16_t>) return DType::kI16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kI64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kU8;
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  return DType::kInvalid;
}

template <class T>
Tensor Tensor::Scalar(T value) {
  Tensor t = *Allocate(DTypeOf<T>(), Shape{});
  *t.data<T>() = value;
  return t;
}

template <class T>
Tensor Tensor::FromVector(const std::vector<T>& values, const Shape& shape) {
  Tensor t = *Allocate(DTypeOf<T>(), shape);
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i];
  } else {
    if (!values.empty()) std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  }
  return t;
}

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_TENSOR_H_
