// The cuda plugin's kernel list: the shared families (gpu_common) and
// MatMul through cuBLAS.
#include <cublas_v2.h>

#include <map>
#include <mutex>
#include <vector>

#include "gpu_kernels.h"
#include "gpu_launch.h"

namespace weft::gpu {
namespace {

const char* CublasName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "an unknown cuBLAS status";
  }
}

// cuBLAS handles, one per concurrent use: a handle carries its stream, so
// two kernels computing at once on different streams must not share one.
// A handle belongs to the device that was current when it was made, hence
// a pool per device ordinal. Handles live as long as the process.
class HandlePool {
 public:
  cublasHandle_t Take(const Context& ctx) {
    const int ordinal = ctx.device().ordinal();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<cublasHandle_t>& idle = idle_[ordinal];
      if (!idle.empty()) {
        cublasHandle_t h = idle.back();
        idle.pop_back();
        return h;
      }
    }
    cublasHandle_t h = nullptr;
    const cublasStatus_t status = cublasCreate(&h);
    if (status != CUBLAS_STATUS_SUCCESS) {
      throw sdk::Error(WEFT_INTERNAL, Str(ctx.node_name(), ": cublasCreate on ",
                                          ctx.device().where(), " failed: ", CublasName(status)));
    }
    return h;
  }
  void Give(int ordinal, cublasHandle_t h) {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_[ordinal].push_back(h);
  }

 private:
  std::mutex mutex_;
  std::map<int, std::vector<cublasHandle_t>> idle_;
};

HandlePool& Pool() {
  static HandlePool* pool = new HandlePool;  // never destroyed: see HandlePool
  return *pool;
}

class MatMulKernel {
 public:
  explicit MatMulKernel(const InitContext& init)
      : ta_(init.Bool("transpose_a")), tb_(init.Bool("transpose_b")) {}

  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0);
    const Tensor b = ctx.input(1);
    if (a.rank() != 2 || b.rank() != 2) {
      Fail(ctx.node_name(), ": MatMul needs two matrices, got ", DimsString(a.dims), " and ",
           DimsString(b.dims));
    }
    const int64_t m = ta_ ? a.dim(1) : a.dim(0);
    const int64_t k = ta_ ? a.dim(0) : a.dim(1);
    const int64_t kb = tb_ ? b.dim(1) : b.dim(0);
    const int64_t n = tb_ ? b.dim(0) : b.dim(1);
    if (k != kb) {
      Fail(ctx.node_name(), ": inner dimensions differ: a ", DimsString(a.dims),
           ta_ ? " (transposed)" : "", " has ", k, ", b ", DimsString(b.dims),
           tb_ ? " (transposed)" : "", " has ", kb);
    }
    const Tensor c = ctx.allocate_output(0, {m, n});
    if (m == 0 || n == 0) return;
    const gpuStream_t stream = ctx.stream();
    if (k == 0) {
      ctx.Check(gpuMemsetAsync(c.ptr, 0, static_cast<size_t>(m * n) * sizeof(float), stream),
                "zeroing an empty product");
      return;
    }
    constexpr int64_t kMax = 0x7fffffff;
    if (m > kMax || n > kMax || k > kMax) {
      throw sdk::Error(WEFT_UNIMPLEMENTED, Str(ctx.node_name(), ": cuBLAS takes dimensions below 2^31, got m=",
                                               m, " k=", k, " n=", n));
    }
    // cuBLAS is column-major; a row-major matrix is its transpose there.
    // So C = op(A) op(B) row-major is C^T = op(B)^T op(A)^T column-major:
    // swap the operands and keep each one's transpose flag.
    cublasHandle_t h = Pool().Take(ctx);
    const float one = 1.0f;
    const float zero = 0.0f;
    cublasStatus_t status = cublasSetStream(h, stream);
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasSgemm(h, tb_ ? CUBLAS_OP_T : CUBLAS_OP_N, ta_ ? CUBLAS_OP_T : CUBLAS_OP_N,
                           static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &one,
                           b.f32(), static_cast<int>(b.dim(1)), a.f32(), static_cast<int>(a.dim(1)),
                           &zero, c.f32(), static_cast<int>(n));
    }
    Pool().Give(ctx.device().ordinal(), h);
    if (status != CUBLAS_STATUS_SUCCESS) {
      throw sdk::Error(WEFT_INTERNAL, Str(ctx.node_name(), ": cublasSgemm on ", ctx.device().where(),
                                          " failed: ", CublasName(status)));
    }
  }

 private:
  bool ta_;
  bool tb_;
};

}  // namespace

const KernelRegistry& Kernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    RegisterElementwiseKernels(r);
    RegisterReductionKernels(r);
    RegisterNnKernels(r);
    r.Add<MatMulKernel>("MatMul", {{"T", WEFT_DTYPE_F32}});
    return r;
  }();
  return registry;
}

}  // namespace weft::gpu
