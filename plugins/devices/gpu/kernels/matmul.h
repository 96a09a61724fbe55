// MatMul and BatchMatMul (core/ops/math_ops.cc) for the cuda and hip
// plugins, over the strided-batched product of each: cuBLAS's
// (cuda/blas.cc) and the tiled kernel's (matmul_tiled.h, for the hip
// plugin). The kernels check the shapes and broadcast the batches; a
// backend multiplies:
//
//   struct Backend {
//     // Nothing to multiply in |out| (empty, or k == 0 where the backend
//     // does not write zeros itself): returns true once out is written.
//     static bool Empty(Context& ctx, const Tensor& out, int64_t k);
//     template <class T>
//     static void Run(Context& ctx, const Gemm& g, const T* a, const T* b, T* c);
//   };
//
// Host code: included by plugins/devices/cuda/blas.cc and matmul_tiled.h.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_MATMUL_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_MATMUL_H_

#include <cstdint>

#include "gpu/kernel_framework.h"

namespace weft::gpu {

// Row-major products of |batch| pairs: c = op(a) op(b) with op(a) [m, k]
// and op(b) [k, n]; operands |stride_*| elements apart (0 repeats one
// matrix).
struct Gemm {
  Gemm(const sdk::MatMulShape& s, bool transpose_a, bool transpose_b)
      : ta(transpose_a), tb(transpose_b), m(s.m), n(s.n), k(s.k) {}

  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

template <class T, class Backend>
class MatMulKernel {
 public:
  explicit MatMulKernel(const InitContext& init) : ta_(init.Bool("transpose_a")), tb_(init.Bool("transpose_b")) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    const Gemm g(sdk::CheckMatMul(a, b, ta_, tb_), ta_, tb_);
    const Tensor c = ctx.allocate_output(0, {g.m, g.n});
    if (Backend::Empty(ctx, c, g.k)) return;
    Backend::template Run<T>(ctx, g, a.as<const T>(), b.as<const T>(), c.as<T>());
  }

 private:
  bool ta_, tb_;
};

// Batches broadcast as in NumPy's matmul. Equal batch shapes, or one side
// a single matrix, are one strided-batched product; other broadcasts (say
// [2,1] against [1,3]) one product per output matrix.
template <class T, class Backend>
class BatchMatMulKernel {
 public:
  explicit BatchMatMulKernel(const InitContext& init) : adj_x_(init.Bool("adj_x")), adj_y_(init.Bool("adj_y")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), y = ctx.input(1);
    const sdk::BatchMatMulShape s = sdk::CheckBatchMatMul(x, y, adj_x_, adj_y_);
    Gemm g(s, adj_x_, adj_y_);
    const Tensor out = ctx.allocate_output(0, s.OutputDims());
    if (Backend::Empty(ctx, out, g.k)) return;
    const int64_t size_x = g.m * g.k, size_y = g.k * g.n, size_out = g.m * g.n;
    // An operand with as many matrices as the output broadcasts none of
    // them, so its matrices are in the output's order.
    if ((s.x_count == s.count || s.x_count == 1) && (s.y_count == s.count || s.y_count == 1)) {
      g.batch = s.count;
      g.stride_a = s.x_count == 1 ? 0 : size_x;
      g.stride_b = s.y_count == 1 ? 0 : size_y;
      g.stride_c = size_out;
      Backend::template Run<T>(ctx, g, x.as<const T>(), y.as<const T>(), out.as<T>());
      return;
    }
    s.ForEachMatrix([&](int64_t i, int64_t xi, int64_t yi) {
      Backend::template Run<T>(ctx, g, x.as<const T>() + xi * size_x, y.as<const T>() + yi * size_y,
                               out.as<T>() + i * size_out);
    });
  }

 private:
  bool adj_x_, adj_y_;
};

// MatMul and BatchMatMul on |Backend|, f32 and f64.
template <class Backend>
void AddMatMulKernels(KernelRegistry& r) {
  r.Add<MatMulKernel<float, Backend>>("MatMul", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<MatMulKernel<double, Backend>>("MatMul", {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
  r.Add<BatchMatMulKernel<float, Backend>>("BatchMatMul", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<BatchMatMulKernel<double, Backend>>("BatchMatMul", {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_MATMUL_H_
