// Weft SDK for C++ plugins: struct_size helpers.
//
//   int CountExtras(const weft_device_properties_t* out, const weft_kernel_def_t* defs, std::size_t n) {
//     auto props = weft::sdk::Make<weft_device_properties_t>();  // zeroed, struct_size set
//     int count = WEFT_STRUCT_HAS(out, weft_device_properties_t, num_extra) ? 1 : 0;
//     for (const weft_kernel_def_t& k : weft::sdk::StructArray(defs, n)) count += k.num_constraints > 0;
//     return count + static_cast<int>(props.struct_size > 0);
//   }
#ifndef WEFT_SDK_STRUCT_H_
#define WEFT_SDK_STRUCT_H_

#include <cstddef>
#include <cstring>
#include <iterator>
#include <type_traits>

#include "weft/weft_abi.h"

namespace weft::sdk {

// A value-initialised T with struct_size set to sizeof(T).
template <class T>
T Make() noexcept {
  T value{};
  value.struct_size = sizeof(T);
  return value;
}

// Copies |from| into the caller-provided out-struct |to|, writing no more
// than to->struct_size bytes and keeping the caller's struct_size. This is
// how a plugin fills an out-struct that may be older (smaller) than its own.
template <class T>
void FillOut(T* to, const T& from) noexcept {
  static_assert(std::is_trivially_copyable_v<T>, "ABI structs are trivially copyable");
  const std::size_t size = to->struct_size < sizeof(T) ? to->struct_size : sizeof(T);
  const std::size_t keep = to->struct_size;
  std::memcpy(static_cast<void*>(to), &from, size);
  to->struct_size = keep;
}

// A read-only view of an array of ABI structs walked with the stride of its
// first element's struct_size (rule 5 of weft_plugin.h). The caller checks
// that the stride is at least the struct's 1.0 size (valid()) before
// reading members; members added later must still be checked per element
// with WEFT_STRUCT_HAS.
template <class T>
class StructArray {
 public:
  class iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;
    iterator() = default;
    iterator(const char* at, std::size_t stride) : at_(at), stride_(stride) {}
    const T& operator*() const { return *reinterpret_cast<const T*>(at_); }
    const T* operator->() const { return reinterpret_cast<const T*>(at_); }
    iterator& operator++() {
      at_ += stride_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      at_ += stride_;
      return old;
    }
    bool operator==(const iterator& other) const { return at_ == other.at_; }
    bool operator!=(const iterator& other) const { return at_ != other.at_; }

   private:
    const char* at_ = nullptr;
    std::size_t stride_ = 0;
  };

  // An array of |count| elements at |base|. A NULL |base|, or a first
  // element whose struct_size is not a positive multiple of T's alignment,
  // gives an empty view.
  StructArray(const T* base, std::size_t count) noexcept
      : base_(reinterpret_cast<const char*>(base)),
        count_(base == nullptr || count == 0 || base->struct_size == 0 || base->struct_size % alignof(T) != 0 ? 0
                                                                                                              : count),
        stride_(count_ == 0 ? 0 : base->struct_size) {}

  // Whether every element is at least |min_size| bytes (the struct's
  // *_SIZE_V1_0); an empty array is valid.
  bool valid(std::size_t min_size) const noexcept { return count_ == 0 || stride_ >= min_size; }

  std::size_t size() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  std::size_t stride() const noexcept { return stride_; }
  const T& operator[](std::size_t i) const { return *reinterpret_cast<const T*>(base_ + i * stride_); }
  iterator begin() const { return iterator(base_, stride_); }
  iterator end() const { return iterator(base_ + count_ * stride_, stride_); }

 private:
  const char* base_;
  std::size_t count_;
  std::size_t stride_;
};

template <class T>
StructArray(const T*, std::size_t) -> StructArray<T>;

}  // namespace weft::sdk

#endif  // WEFT_SDK_STRUCT_H_
