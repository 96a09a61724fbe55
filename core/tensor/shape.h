// Shapes: fully known ([2, 3]), partly known ([?, 784]) or of unknown rank.
// Shape inference works with partial shapes; a tensor's shape is always
// fully known.
#ifndef WEFT_CORE_TENSOR_SHAPE_H_
#define WEFT_CORE_TENSOR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/base/status.h"

namespace weft {

class Shape {
 public:
  static constexpr int64_t kUnknownDim = -1;

  // A scalar (rank 0).
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  // A shape of unknown rank.
  static Shape UnknownRank() {
    Shape s;
    s.unknown_rank_ = true;
    return s;
  }
  // Rank |rank| with every dimension unknown.
  static Shape UnknownDims(int rank) { return Shape(std::vector<int64_t>(rank, kUnknownDim)); }

  bool unknown_rank() const { return unknown_rank_; }
  // -1 when the rank is unknown.
  int rank() const { return unknown_rank_ ? -1 : static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[static_cast<std::size_t>(i)]; }
  void set_dim(int i, int64_t d) { dims_[static_cast<std::size_t>(i)] = d; }
  const std::vector<int64_t>& dims() const { return dims_; }
  void AddDim(int64_t d) { dims_.push_back(d); }

  // Known rank and every dimension known.
  bool IsFullyDefined() const;
  // The product of the dimensions (1 for a scalar); -1 unless fully defined.
  int64_t num_elements() const;

  // Whether a tensor of shape |other| (fully defined) fits this partial shape.
  bool IsCompatibleWith(const Shape& other) const;
  // The most specific shape compatible with both, or an error naming both.
  Expected<Shape> Merge(const Shape& other) const;

  // "[2,3]", "[?,784]", "<unknown>", "[]" for a scalar.
  std::string ToString() const;

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.unknown_rank_ == b.unknown_rank_ && a.dims_ == b.dims_;
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::vector<int64_t> dims_;
  bool unknown_rank_ = false;
};

// The product of |dims|, or an error when it overflows int64 or a
// dimension is negative.
Expected<int64_t> CheckedNumElements(const std::vector<int64_t>& dims);

}  // namespace weft

#endif  // WEFT_CORE_TENSOR_SHAPE_H_
