// The matrix product of matmul.cl, for the kernels that are matrix
// products in disguise (MatMul, BatchMatMul, and Conv2D and its gradients
// through im2col).
#ifndef WEFT_PLUGINS_DEVICES_OPENCL_KERNELS_MATMUL_H_
#define WEFT_PLUGINS_DEVICES_OPENCL_KERNELS_MATMUL_H_

#include "../kernel_framework.h"

namespace weft::opencl {

// Enqueues C = op(A) x op(B) for |batches| matrices, op transposing when
// |ta| / |tb|: A is [m, k] ([k, m] when ta), B is [k, n] ([n, k] when tb)
// and C [m, n], each batch at the element offsets |batch| gives (see
// matmul.cl). |program| is the "matmul" program of their dtype. Throws
// when a side exceeds 2^31 - 1.
void Multiply(Context& ctx, Program& program, const Tensor& a, const Tensor& b, const Tensor& c, int64_t m, int64_t n,
              int64_t k, bool ta, bool tb, const BroadcastPlan<2>& batch, int64_t batches);

}  // namespace weft::opencl

#endif  // WEFT_PLUGINS_DEVICES_OPENCL_KERNELS_MATMUL_H_
