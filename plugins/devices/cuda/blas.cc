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

namespace weft::gpu {
namespace {

int AsInt(int64_t v, const char* what) {
  if (v > std::numeric_limits<int>::max()) Fail(what, " of ", v, " is above cuBLAS's limit of 2^31 - 1");
  return static_cast<int>(v);
}

// One (possibly strided-batched) product: rows-major [m,k] x [k,n] of
// |batch| pairs, |stride_*| elements apart (0 repeats one matrix).
struct Gemm {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

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

// An empty inner dimension gives zeros, which cuBLAS (k = 0 is allowed,
// but not m or n = 0) would also give; m or n of 0 gives nothing to do.
bool Trivial(Context& ctx, const Tensor& out, int64_t k) {
  if (out.num_elements == 0) return true;
  if (k > 0) return false;
  Check(rt::Memset(out.ptr, 0, out.byte_size, ctx.stream()), "clearing an empty product");
  return true;
}

template <class T>
class MatMulKernel {
 public:
  explicit MatMulKernel(const InitContext& init) : ta_(init.Bool("transpose_a")), tb_(init.Bool("transpose_b")) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    if (a.rank() != 2 || b.rank() != 2) {
      Fail("MatMul takes rank-2 tensors, got ", DimsString(a.dims), " and ", DimsString(b.dims));
    }
    Gemm g;
    g.ta = ta_;
    g.tb = tb_;
    g.m = a.dim(ta_ ? 1 : 0);
    g.k = a.dim(ta_ ? 0 : 1);
    const int64_t kb = b.dim(tb_ ? 1 : 0);
    g.n = b.dim(tb_ ? 0 : 1);
    if (g.k != kb) {
      Fail("inner dimensions differ: ", DimsString(a.dims), ta_ ? "^T" : "", " x ", DimsString(b.dims), tb_ ? "^T" : "",
           " (", g.k, " vs ", kb, ")");
    }
    const Tensor c = ctx.allocate_output(0, {g.m, g.n});
    if (Trivial(ctx, c, g.k)) return;
    RunGemm<T>(BlasHandle(ctx.stream_object()), g, a.as<const T>(), b.as<const T>(), c.as<T>());
  }

 private:
  bool ta_, tb_;
};

// Batches broadcast as in NumPy's matmul. Equal batch shapes, or one side
// a single matrix, are one strided-batched call; other broadcasts (say
// [2,1] against [1,3]) are one call per output matrix.
template <class T>
class BatchMatMulKernel {
 public:
  explicit BatchMatMulKernel(const InitContext& init) : adj_x_(init.Bool("adj_x")), adj_y_(init.Bool("adj_y")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), y = ctx.input(1);
    if (x.rank() < 2 || y.rank() < 2) {
      Fail("BatchMatMul takes rank >= 2, got ", DimsString(x.dims), " and ", DimsString(y.dims));
    }
    const int rx = x.rank(), ry = y.rank();
    Gemm g;
    g.ta = adj_x_;
    g.tb = adj_y_;
    g.m = x.dim(rx - (adj_x_ ? 1 : 2));
    g.k = x.dim(rx - (adj_x_ ? 2 : 1));
    const int64_t ky = y.dim(ry - (adj_y_ ? 1 : 2));
    g.n = y.dim(ry - (adj_y_ ? 2 : 1));
    if (g.k != ky) {
      Fail("inner dimensions differ: ", DimsString(x.dims), " x ", DimsString(y.dims), " (", g.k, " vs ", ky, ")");
    }
    const Dims bx(x.dims.begin(), x.dims.end() - 2), by(y.dims.begin(), y.dims.end() - 2);
    const Dims batch = BroadcastDims(bx, by);
    Dims out_dims = batch;
    out_dims.push_back(g.m);
    out_dims.push_back(g.n);
    const Tensor out = ctx.allocate_output(0, out_dims);
    if (Trivial(ctx, out, g.k)) return;
    const int64_t nb = Product(batch, 0, static_cast<int>(batch.size()));
    const int64_t nx = Product(bx, 0, static_cast<int>(bx.size())), ny = Product(by, 0, static_cast<int>(by.size()));
    const int64_t size_x = g.m * g.k, size_y = g.k * g.n, size_out = g.m * g.n;
    cublasHandle_t handle = BlasHandle(ctx.stream_object());
    g.stride_c = size_out;
    // An operand with as many matrices as the output broadcasts none of
    // them, so its matrices are in the output's order.
    if ((nx == nb || nx == 1) && (ny == nb || ny == 1)) {
      g.batch = nb;
      g.stride_a = nx == 1 ? 0 : size_x;
      g.stride_b = ny == 1 ? 0 : size_y;
      RunGemm<T>(handle, g, x.as<const T>(), y.as<const T>(), out.as<T>());
      return;
    }
    // General broadcast: the operands' matrix index for each output one.
    const BroadcastPlan<2> plan = PlanBroadcast2(batch, bx, by);
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rest = i, ox = 0, oy = 0;
      for (int d = plan.rank - 1; d >= 0; --d) {
        const int64_t coord = rest % plan.dims[d];
        rest /= plan.dims[d];
        ox += coord * plan.strides[0][d];
        oy += coord * plan.strides[1][d];
      }
      RunGemm<T>(handle, g, x.as<const T>() + ox * size_x, y.as<const T>() + oy * size_y, out.as<T>() + i * size_out);
    }
  }

 private:
  bool adj_x_, adj_y_;
};

}  // namespace

void RegisterBlasKernels(KernelRegistry& r) {
  r.Add<MatMulKernel<float>>("MatMul", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<MatMulKernel<double>>("MatMul", {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
  r.Add<BatchMatMulKernel<float>>("BatchMatMul", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<BatchMatMulKernel<double>>("BatchMatMul", {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
}

}  // namespace weft::gpu
