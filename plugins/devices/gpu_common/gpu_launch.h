// Launchers of the device kernels shared by the cuda and hip plugins: plain
// C++ declarations, so host code compiled by the C++ compiler can call
// them. They are defined in device_kernels.inc, which cuda/kernels.cu
// (nvcc) and hip/kernels.hip (hipcc) include. Each enqueues its work on
// |stream| and returns the launch error (success when nothing to do).
// All tensors are f32, dense, row-major.
#ifndef WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_LAUNCH_H_
#define WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_LAUNCH_H_

#include <cstdint>

#include "gpu_runtime.h"

namespace weft::gpu::launch {

enum class UnaryOp { kNeg, kExp, kLog, kSqrt, kRelu, kTanh, kSigmoid };
enum class BinaryOp { kAdd, kSub, kMul, kDiv };

// y[i] = op(x[i]) for i < n.
gpuError_t Unary(UnaryOp op, const float* x, float* y, int64_t n, gpuStream_t stream);

// y[i] = a[i % na] op b[i % nb] for i < n, where na and nb are n or 1
// (same shape, or a scalar broadcast on either side).
gpuError_t Binary(BinaryOp op, const float* a, int64_t na, const float* b, int64_t nb, float* y,
                  int64_t n, gpuStream_t stream);

// y[i] = features[i] > 0 ? gradients[i] : 0.
gpuError_t ReluGrad(const float* gradients, const float* features, float* y, int64_t n,
                    gpuStream_t stream);

// y[o, c, i] = x[o, c, i] + bias[c] over [outer, channels, inner] (NHWC is
// inner = 1, NCHW is inner = H * W).
gpuError_t BiasAdd(const float* x, const float* bias, float* y, int64_t outer, int64_t channels,
                   int64_t inner, gpuStream_t stream);

// y[o, i] = sum over r of x[o, r, i], viewing x as [outer, reduce, inner].
// reduce may be 0 (y is all zeros).
gpuError_t Sum(const float* x, float* y, int64_t outer, int64_t reduce, int64_t inner,
               gpuStream_t stream);

// c[m, n] = op(a) op(b), row-major, op a transpose when asked: a is [m, k]
// ([k, m] transposed), b is [k, n] ([n, k] transposed). A tiled kernel for
// devices without a BLAS library here (the hip plugin).
gpuError_t MatMul(const float* a, const float* b, float* c, int64_t m, int64_t k, int64_t n,
                  bool transpose_a, bool transpose_b, gpuStream_t stream);

// Per row r of logits [batch, classes] with label l = labels[r]:
// loss[r] = logsumexp(logits[r]) - logits[r, l],
// backprop[r, j] = softmax(logits[r])[j] - (j == l). A label outside
// [0, classes) gives NaN in the row's loss and backprop and sets
// *bad_row (device memory, initialised to -1 by the caller) to the row.
gpuError_t SparseXent(const float* logits, const void* labels, bool labels_i64, float* loss,
                      float* backprop, int64_t batch, int64_t classes, int64_t* bad_row,
                      gpuStream_t stream);

}  // namespace weft::gpu::launch

#endif  // WEFT_PLUGINS_DEVICES_GPU_COMMON_GPU_LAUNCH_H_
