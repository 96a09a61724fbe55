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
#include "gpu/kernels/matmul.h"

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

// The products of MatMul and BatchMatMul (matmul.h); the kernel writes
// zeros for k == 0 itself.
struct TiledBackend {
  static bool Empty(Context&, const Tensor& out, int64_t) { return out.num_elements == 0; }

  template <class T>
  static void Run(Context& ctx, const Gemm& g, const T* a, const T* b, T* c) {
    EnqueueTiledMatMul<T>(ctx.stream(), a, b, c, g.m, g.n, g.k, g.ta, g.tb, g.batch, g.stride_a, g.stride_b,
                          g.stride_c);
  }
};

}  // namespace

void RegisterTiledMatMulKernels(KernelRegistry& r) { AddMatMulKernels<TiledBackend>(r); }

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_MATMUL_TILED_H_
