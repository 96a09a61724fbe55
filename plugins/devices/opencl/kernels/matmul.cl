// Matrix products C[m, n] = sum_k A[m, k] B[k, n], A and B each optionally
// transposed, for a batch of matrices (MatMul is a batch of one), built once
// per element type T. Integer products wrap (unsigned arithmetic).
//
// Two kernels, chosen by the host (matmul.cc):
//  - matmul: each work-group computes a 64x64 tile of C with 16x16
//    work-items, each work-item a 4x4 block of it; the inner dimension is
//    walked 16 at a time through tiles of A and B in local memory. For
//    devices with dedicated local memory (GPUs).
//  - matmul_blocked: no local memory and no barriers; each work-item
//    computes 4 rows by 8 columns of C in vector registers, reading B's
//    rows as 8-wide vectors, and the caches do the tiling. For devices
//    whose local memory is ordinary memory (CPU devices such as PoCL's),
//    where barriers cost more than local memory saves: on PoCL it is about
//    five times faster. It takes B untransposed (the host transposes it
//    first when asked to).
// Products may fuse into FMAs, as oneDNN's do on the CPU.
#pragma OPENCL FP_CONTRACT ON
#ifdef WEFT_F64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define TS 64   // the C tile of a work-group
#define TK 16   // the depth of one step through K
#define WG 16   // work-items per tile side
#define WPT 4   // C elements per work-item per side (TS / WG)

#if defined(WEFT_INT)
#define ACC_TYPE UT
#define STORE(v) AS_T(v)
#else
#define ACC_TYPE T
#define STORE(v) (v)
#endif
typedef ACC_TYPE ACC;

inline ulong plan_offset(ulong i, int rank, long8 dims, long8 strides) {
  if (rank == 1) return i * (ulong)strides.s0;
  const long d[8] = {dims.s0, dims.s1, dims.s2, dims.s3, dims.s4, dims.s5, dims.s6, dims.s7};
  const long s[8] = {strides.s0, strides.s1, strides.s2, strides.s3, strides.s4, strides.s5, strides.s6, strides.s7};
  ulong offset = 0;
  for (int k = rank - 1; k >= 0; --k) {
    const ulong n = (ulong)d[k];
    offset += (i % n) * (ulong)s[k];
    i /= n;
  }
  return offset;
}

// Batch b of C multiplies the A and B matrices at element offsets
// plan_offset(b, brank, bdims, sa) and (.., sb): NumPy's broadcasting of
// the batch dimensions.
__kernel __attribute__((reqd_work_group_size(WG, WG, 1))) void matmul(
    __global const T* a, __global const T* b, __global T* c, const int M, const int N, const int K, const int ta,
    const int tb, const int brank, const long8 bdims, const long8 sa, const long8 sb) {
  __local ACC as[TK][TS];  // as[k][m]
  __local ACC bs[TK][TS];  // bs[k][n]
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int lid = ty * WG + tx;
  const int col0 = get_group_id(0) * TS, row0 = get_group_id(1) * TS;
  const ulong batch = get_global_id(2);
  __global const T* pa = a + plan_offset(batch, brank, bdims, sa);
  __global const T* pb = b + plan_offset(batch, brank, bdims, sb);
  __global T* pc = c + batch * (ulong)M * (ulong)N;

  ACC acc[WPT][WPT];
  for (int i = 0; i < WPT; ++i)
    for (int j = 0; j < WPT; ++j) acc[i][j] = 0;

  for (int k0 = 0; k0 < K; k0 += TK) {
    for (int e = lid; e < TS * TK; e += WG * WG) {
      // A: element (row0 + e / TK, k0 + e % TK); B: (k0 + e / TS, col0 + e % TS).
      const int am = row0 + e / TK, ak = k0 + e % TK;
      ACC av = 0;
      if (am < M && ak < K) av = (ACC)(ta ? pa[(ulong)ak * M + am] : pa[(ulong)am * K + ak]);
      as[e % TK][e / TK] = av;
      const int bk = k0 + e / TS, bn = col0 + e % TS;
      ACC bv = 0;
      if (bk < K && bn < N) bv = (ACC)(tb ? pb[(ulong)bn * K + bk] : pb[(ulong)bk * N + bn]);
      bs[e / TS][e % TS] = bv;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TK; ++k) {
      ACC ar[WPT], br[WPT];
      for (int w = 0; w < WPT; ++w) {
        ar[w] = as[k][ty + w * WG];
        br[w] = bs[k][tx + w * WG];
      }
      for (int i = 0; i < WPT; ++i)
        for (int j = 0; j < WPT; ++j) acc[i][j] += ar[i] * br[j];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int i = 0; i < WPT; ++i) {
    const int m = row0 + ty + i * WG;
    if (m >= M) continue;
    for (int j = 0; j < WPT; ++j) {
      const int n = col0 + tx + j * WG;
      if (n < N) pc[(ulong)m * N + n] = STORE(acc[i][j]);
    }
  }
}

#define VEC8_(t) t##8
#define VEC8(t) VEC8_(t)
#define AS8_(t) as_##t##8
#define AS8(t) AS8_(t)
typedef VEC8(ACC_TYPE) ACC8;
#if defined(WEFT_INT)
#define LOAD8(p) AS8(UT)(vload8(0, p))
#else
#define LOAD8(p) vload8(0, p)
#endif

// Each of |count| matrices [rows, cols] of x, transposed into y.
__kernel void transpose(__global const T* x, __global T* y, const ulong rows, const ulong cols, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const ulong size = rows * cols, at = i % size;
  y[i - at + (at % cols) * rows + at / cols] = x[i];
}

// Work-item (x, y, batch) computes C[4y .. 4y+3, 8x .. 8x+7] of its batch.
__kernel void matmul_blocked(__global const T* a, __global const T* b, __global T* c, const int M, const int N,
                             const int K, const int ta, const int brank, const long8 bdims, const long8 sa,
                             const long8 sb) {
  const int c0 = get_global_id(0) * 8, r0 = get_global_id(1) * 4;
  if (r0 >= M || c0 >= N) return;
  const ulong batch = get_global_id(2);
  __global const T* pa = a + plan_offset(batch, brank, bdims, sa);
  __global const T* pb = b + plan_offset(batch, brank, bdims, sb);
  __global T* pc = c + batch * (ulong)M * (ulong)N;
  // Rows past M read row M - 1 and are not stored.
  const int m0 = r0, m1 = min(r0 + 1, M - 1), m2 = min(r0 + 2, M - 1), m3 = min(r0 + 3, M - 1);
  const bool full = c0 + 8 <= N;
  ACC8 acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
  for (int k = 0; k < K; ++k) {
    __global const T* brow = pb + (ulong)k * N + c0;
    ACC8 bv;
    if (full) {
      bv = LOAD8(brow);
    } else {
      ACC tail[8];
      for (int j = 0; j < 8; ++j) tail[j] = c0 + j < N ? (ACC)brow[j] : (ACC)0;
      bv = vload8(0, tail);
    }
    ACC a0, a1, a2, a3;
    if (ta) {
      a0 = (ACC)pa[(ulong)k * M + m0];
      a1 = (ACC)pa[(ulong)k * M + m1];
      a2 = (ACC)pa[(ulong)k * M + m2];
      a3 = (ACC)pa[(ulong)k * M + m3];
    } else {
      a0 = (ACC)pa[(ulong)m0 * K + k];
      a1 = (ACC)pa[(ulong)m1 * K + k];
      a2 = (ACC)pa[(ulong)m2 * K + k];
      a3 = (ACC)pa[(ulong)m3 * K + k];
    }
    acc0 += a0 * bv;
    acc1 += a1 * bv;
    acc2 += a2 * bv;
    acc3 += a3 * bv;
  }
  ACC out[4][8];
  vstore8(acc0, 0, out[0]);
  vstore8(acc1, 0, out[1]);
  vstore8(acc2, 0, out[2]);
  vstore8(acc3, 0, out[3]);
  for (int i = 0; i < 4 && r0 + i < M; ++i) {
    for (int j = 0; j < 8 && c0 + j < N; ++j) pc[(ulong)(r0 + i) * N + c0 + j] = STORE(out[i][j]);
  }
}
