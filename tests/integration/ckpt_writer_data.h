// What tests/integration/ckpt_writer saves at each step: a deterministic
// function of the step, so that a test can recompute the checkpoint a
// killed writer left and compare it byte for byte.
#ifndef WEFT_TESTS_INTEGRATION_CKPT_WRITER_DATA_H_
#define WEFT_TESTS_INTEGRATION_CKPT_WRITER_DATA_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/base/strings.h"
#include "core/tensor/tensor.h"

namespace weft::testing {

// About 2.6 MiB: a f32 [512, 1024] "kernel", a f64 [65536] "bias", the
// step as an i64 scalar, and three strings.
inline std::vector<std::pair<std::string, Tensor>> WriterTensors(int64_t step) {
  Tensor kernel = *Tensor::Allocate(DType::kF32, Shape{512, 1024});
  float* k = kernel.data<float>();
  for (int64_t i = 0; i < kernel.num_elements(); ++i) {
    const uint64_t h = (static_cast<uint64_t>(i) * 2654435761u + static_cast<uint64_t>(step) * 97u) % 1000003u;
    k[i] = static_cast<float>(h) / 7.0f;
  }
  Tensor bias = *Tensor::Allocate(DType::kF64, Shape{65536});
  double* b = bias.data<double>();
  for (int64_t i = 0; i < bias.num_elements(); ++i) b[i] = static_cast<double>(step) * 0.5 + static_cast<double>(i);
  return {{"dense/kernel", kernel},
          {"dense/bias", bias},
          {"global_step", Tensor::Scalar<int64_t>(step)},
          {"notes", Tensor::Strings({StrCat("step ", step), "", "fixed"}, Shape{3})}};
}

}  // namespace weft::testing

#endif  // WEFT_TESTS_INTEGRATION_CKPT_WRITER_DATA_H_
