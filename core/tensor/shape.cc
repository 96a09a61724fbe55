#include "core/tensor/shape.h"

namespace weft {

bool Shape::IsFullyDefined() const {
  if (unknown_rank_) return false;
  for (int64_t d : dims_) {
    if (d < 0) return false;
  }
  return true;
}

int64_t Shape::num_elements() const {
  if (!IsFullyDefined()) return -1;
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool Shape::IsCompatibleWith(const Shape& other) const {
  if (unknown_rank_ || other.unknown_rank_) return true;
  if (dims_.size() != other.dims_.size()) return false;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] >= 0 && other.dims_[i] >= 0 && dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

Expected<Shape> Shape::Merge(const Shape& other) const {
  if (unknown_rank_) return other;
  if (other.unknown_rank_) return *this;
  if (!IsCompatibleWith(other)) {
    return InvalidArgumentError("shapes ", ToString(), " and ", other.ToString(), " are incompatible");
  }
  Shape merged = *this;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (merged.dims_[i] < 0) merged.dims_[i] = other.dims_[i];
  }
  return merged;
}

std::string Shape::ToString() const {
  if (unknown_rank_) return "<unknown>";
  std::string out = "[";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i > 0) out += ",";
    out += dims_[i] < 0 ? std::string("?") : StrCat(dims_[i]);
  }
  return out + "]";
}

Expected<int64_t> CheckedNumElements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgumentError("negative dimension ", d);
    if (d != 0 && n > INT64_MAX / d) {
      return InvalidArgumentError("shape ", Shape(dims).ToString(), " has more than 2^63 elements");
    }
    n *= d;
  }
  return n;
}

}  // namespace weft
