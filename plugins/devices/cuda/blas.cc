// MatMul and BatchMatMul (core/ops/math_ops.cc) on cuBLAS, f32 and f64.
//
// cuBLAS is column-major and Weft row-major. A row-major matrix read as
// column-major is its transpose, so the row-major product C = op(A) op(B)
// is computed as the column-major C^T = op(B)^T op(A)^T: B is passed
// first, and each operand keeps its own transpose flag. cuBLAS's default
// math mode is used, which for f32 does not round to TF32, so results
// match the CPU's to f32 accuracy.
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda_libraries.h"
#include "gpu/kernel_framework.h"
#include "gpu/kernels/matmul.h"

namespace weft::gpu {
namespace {

int AsInt(int64_t v, const char* what) {
  if (v > std::numeric_limits<int>::max()) Fail(what, " of ", v, " is above cuBLAS's limit of 2^31 - 1");
  return static_cast<int>(v);
}

template <class T>
void RunGemm(cublasHandle_t handle, const Gemm& g, const T* a, const T* b, T* c) {
  const int m = AsInt(g.m, "a dimension"), n = AsInt(g.n, "a dimension"), k = AsInt(g.k, "a dimension");
  const int batch = AsInt(g.batch, "the batch");
  const cublasOperation_t op_a = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  // Leading dimensions: a row-major matrix's column count.
  const int lda = g.ta ? m : k, ldb = g.tb ? k : n, ldc = n;
  const T one = T(1), zero = T(0);
  if constexpr (std::is_same_v<T, float>) {
    if (batch == 1) {
      CheckBlas(cublasSgemm(handle, op_b, op_a, n, m, k, &one, b, ldb, a, lda, &zero, c, ldc), "cublasSgemm");
    } else {
      CheckBlas(cublasSgemmStridedBatched(handle, op_b, op_a, n, m, k, &one, b, ldb, g.stride_b, a, lda, g.stride_a,
                                          &zero, c, ldc, g.stride_c, batch),
                "cublasSgemmStridedBatched");
    }
  } else {
    if (batch == 1) {
      CheckBlas(cublasDgemm(handle, op_b, op_a, n, m, k, &one, b, ldb, a, lda, &zero, c, ldc), "cublasDgemm");
    } else {
      CheckBlas(cublasDgemmStridedBatched(handle, op_b, op_a, n, m, k, &one, b, ldb, g.stride_b, a, lda, g.stride_a,
                                          &zero, c, ldc, g.stride_c, batch),
                "cublasDgemmStridedBatched");
    }
  }
}

// MatMul's and BatchMatMul's products (gpu/kernels/matmul.h).
struct CublasBackend {
  // An empty inner dimension gives zeros, which cuBLAS (k = 0 is allowed,
  // but not m or n = 0) would also give; m or n of 0 gives nothing to do.
  static bool Empty(Context& ctx, const Tensor& out, int64_t k) {
    if (out.num_elements == 0) return true;
    if (k > 0) return false;
    Check(rt::Memset(out.ptr, 0, out.byte_size, ctx.stream()), "clearing an empty product");
    return true;
  }

  template <class T>
  static void Run(Context& ctx, const Gemm& g, const T* a, const T* b, T* c) {
    RunGemm<T>(BlasHandle(ctx.stream_object()), g, a, b, c);
  }
};

}  // namespace

void RegisterBlasKernels(KernelRegistry& r) { AddMatMulKernels<CublasBackend>(r); }

}  // namespace weft::gpu
