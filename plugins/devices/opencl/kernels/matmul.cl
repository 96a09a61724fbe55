// Matrix products C[m, n] = sum_k A[m, k] B[k, n], A and B each optionally
// transposed, for a batch of matrices (MatMul is a batch of one), built once
// per element type T.
//
// Each work-group computes a 64x64 tile of C with 16x16 work-items, each
// work-item a 4x4 block of it; the inner dimension is walked 16 at a time
// through tiles of A and B in local memory. Integer products wrap
// (unsigned arithmetic).
#pragma OPENCL FP_CONTRACT OFF
#ifdef WEFT_F64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define TS 64   // the C tile of a work-group
#define TK 16   // the depth of one step through K
#define WG 16   // work-items per tile side
#define WPT 4   // C elements per work-item per side (TS / WG)

#if defined(WEFT_INT)
typedef UT ACC;
#define STORE(v) AS_T(v)
#else
typedef T ACC;
#define STORE(v) (v)
#endif

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
