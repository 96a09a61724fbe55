// A tensor's elements as a vector, for comparing with expected values.
#ifndef WEFT_TESTS_SUPPORT_TENSOR_VALUES_H_
#define WEFT_TESTS_SUPPORT_TENSOR_VALUES_H_

#include <vector>

#include "core/tensor/tensor.h"

namespace weft::testing {

// The elements of |t|, which must hold Ts.
template <class T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.num_elements());
}

inline std::vector<float> Floats(const Tensor& t) { return Values<float>(t); }
inline std::vector<double> Doubles(const Tensor& t) { return Values<double>(t); }

}  // namespace weft::testing

#endif  // WEFT_TESTS_SUPPORT_TENSOR_VALUES_H_
