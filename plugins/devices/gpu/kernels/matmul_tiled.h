// MatMul and BatchMatMul (core/ops/math_ops.cc) as a tiled kernel, f32 and
// f64, for a plugin without a BLAS library (the hip plugin: Debian has no
// hipBLAS or rocBLAS). Each block computes a 16x16 tile of the product,
// staging 16x16 tiles of both operands in shared memory; the transposes
// are folded into how the tiles are read.
//
// Device code: included by plugins/devices/hip/matmul.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_MATMUL_TILED_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_MATMUL_TILED_H_

#include <algorithm>

#include "gpu/device_compat.h"

namespace weft::gpu {

void RegisterTiledMatMulKernels(KernelRegistry& r);

namespace {

constexpr int kTile = 16;

// Row-major products of |batch| (blockIdx.z) pairs: c = op(a) op(b) with
// op(a) [m, k] and op(b) [k, n]; operands |stride_*| elements apart (0
// repeats one matrix).
template <class T>
__global__ void TiledMatMul(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
                            int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  __shared__ T tile_a[kTile][kTile];
  __shared__ T tile_b[kTile][kTile + 1];  // +1: no bank conflicts on the column reads
  a += blockIdx.z * stride_a;
  b += blockIdx.z * stride_b;
  c += blockIdx.z * stride_c;
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + ty;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  T sum = T(0);
  for (int64_t k0 = 0; k0 < k; k0 += kTile) {
    // op(a)[row, k0 + tx] and op(b)[k0 + ty, col], zero outside.
    const int64_t ka = k0 + tx, kb = k0 + ty;
    tile_a[ty][tx] = row < m && ka < k ? (ta ? a[ka * m + row] : a[row * k + ka]) : T(0);
    tile_b[ty][tx] = kb < k && col < n ? (tb ? b[col * k + kb] : b[kb * n + col]) : T(0);
    __syncthreads();
    for (int i = 0; i < kTile; ++i) sum += tile_a[ty][i] * tile_b[i][tx];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = sum;
}

template <class T>
void EnqueueTiledMatMul(rt::Stream stream, const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool ta,
                        bool tb, int64_t batch, int64_t stride_a, int64_t stride_b, int64_t stride_c) {
  const int64_t tiles_x = (n + kTile - 1) / kTile, tiles_y = (m + kTile - 1) / kTile;
  if (tiles_y > 65535) Fail("a product of ", m, " rows is above the tiled kernel's limit of ", 65535 * kTile);
  // The grid's z extent is at most 65535: larger batches go in chunks.
  for (int64_t first = 0; first < batch; first += 65535) {
    const int64_t count = std::min<int64_t>(batch - first, 65535);
    const dim3 grid(static_cast<unsigned>(tiles_x), static_cast<unsigned>(tiles_y), static_cast<unsigned>(count));
    TiledMatMul<T><<<grid, dim3(kTile, kTile), 0, stream>>>(a + first * stride_a, b + first * stride_b,
                                                            c + first * stride_c, m, n, k, ta, tb, stride_a, stride_b,
                                                            stride_c);
    CheckLaunch("MatMul");
  }
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
    const int64_t m = a.dim(ta_ ? 1 : 0), k = a.dim(ta_ ? 0 : 1);
    const int64_t kb = b.dim(tb_ ? 1 : 0), n = b.dim(tb_ ? 0 : 1);
    if (k != kb) {
      Fail("inner dimensions differ: ", DimsString(a.dims), ta_ ? "^T" : "", " x ", DimsString(b.dims), tb_ ? "^T" : "",
           " (", k, " vs ", kb, ")");
    }
    const Tensor c = ctx.allocate_output(0, {m, n});
    if (c.num_elements == 0) return;
    EnqueueTiledMatMul<T>(ctx.stream(), a.as<const T>(), b.as<const T>(), c.as<T>(), m, n, k, ta_, tb_, 1, 0, 0, 0);
  }

 private:
  bool ta_, tb_;
};

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
    const int64_t m = x.dim(rx - (adj_x_ ? 1 : 2)), k = x.dim(rx - (adj_x_ ? 2 : 1));
    const int64_t ky = y.dim(ry - (adj_y_ ? 1 : 2)), n = y.dim(ry - (adj_y_ ? 2 : 1));
    if (k != ky)
      Fail("inner dimensions differ: ", DimsString(x.dims), " x ", DimsString(y.dims), " (", k, " vs ", ky, ")");
    const Dims bx(x.dims.begin(), x.dims.end() - 2), by(y.dims.begin(), y.dims.end() - 2);
    const Dims batch = BroadcastDims(bx, by);
    Dims out_dims = batch;
    out_dims.push_back(m);
    out_dims.push_back(n);
    const Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    const int64_t nb = Product(batch, 0, static_cast<int>(batch.size()));
    const int64_t nx = Product(bx, 0, static_cast<int>(bx.size())), ny = Product(by, 0, static_cast<int>(by.size()));
    const int64_t size_x = m * k, size_y = k * n, size_out = m * n;
    // An operand with as many matrices as the output broadcasts none of
    // them, so its matrices are in the output's order.
    if ((nx == nb || nx == 1) && (ny == nb || ny == 1)) {
      EnqueueTiledMatMul<T>(ctx.stream(), x.as<const T>(), y.as<const T>(), out.as<T>(), m, n, k, adj_x_, adj_y_, nb,
                            nx == 1 ? 0 : size_x, ny == 1 ? 0 : size_y, size_out);
      return;
    }
    const BroadcastPlan<2> plan = PlanBroadcast2(batch, bx, by);
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rest = i, ox = 0, oy = 0;
      for (int d = plan.rank - 1; d >= 0; --d) {
        const int64_t coord = rest % plan.dims[d];
        rest /= plan.dims[d];
        ox += coord * plan.strides[0][d];
        oy += coord * plan.strides[1][d];
      }
      EnqueueTiledMatMul<T>(ctx.stream(), x.as<const T>() + ox * size_x, y.as<const T>() + oy * size_y,
                            out.as<T>() + i * size_out, m, n, k, adj_x_, adj_y_, 1, 0, 0, 0);
    }
  }

 private:
  bool adj_x_, adj_y_;
};

}  // namespace

void RegisterTiledMatMulKernels(KernelRegistry& r) {
  r.Add<MatMulKernel<float>>("MatMul", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<MatMulKernel<double>>("MatMul", {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
  r.Add<BatchMatMulKernel<float>>("BatchMatMul", {{"T", WEFT_DTYPE_F32}}, WEFT_KERNEL_INLINE);
  r.Add<BatchMatMulKernel<double>>("BatchMatMul", {{"T", WEFT_DTYPE_F64}}, WEFT_KERNEL_INLINE);
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_MATMUL_TILED_H_
