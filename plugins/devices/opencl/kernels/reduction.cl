// Reductions over a set of axes, built once per element type T (see
// elementwise.cl for the defines). The host splits the input's dimensions
// into kept ones (the output, row-major) and reduced ones, each collapsed
// to at most 8 with the input's element strides; work-item i reduces every
// element of output i, or, for a long reduction with few outputs, one
// chunk of it into a partial sum that a second kernel adds up in order.
//
// Float sums accumulate in double where the device has cl_khr_fp64 (as the
// CPU kernels do), else in float with Kahan compensation. Integer sums and
// products wrap (unsigned arithmetic).
#pragma OPENCL FP_CONTRACT OFF
#ifdef WEFT_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
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

#define PLAN_ARGS                                                                                 \
  const ulong n_out, const int kept_rank, const long8 kept_dims, const long8 kept_strides,         \
      const int red_rank, const long8 red_dims, const long8 red_strides, const ulong n_red

#if defined(WEFT_BOOL)

__kernel void reduce_all(__global const uchar* xs, __global uchar* ys, PLAN_ARGS) {
  const ulong i = get_global_id(0);
  if (i >= n_out) return;
  const ulong base = plan_offset(i, kept_rank, kept_dims, kept_strides);
  uchar acc = 1;
  for (ulong j = 0; j < n_red && acc; ++j) acc = xs[base + plan_offset(j, red_rank, red_dims, red_strides)] != 0;
  ys[i] = acc;
}

__kernel void reduce_any(__global const uchar* xs, __global uchar* ys, PLAN_ARGS) {
  const ulong i = get_global_id(0);
  if (i >= n_out) return;
  const ulong base = plan_offset(i, kept_rank, kept_dims, kept_strides);
  uchar acc = 0;
  for (ulong j = 0; j < n_red && !acc; ++j) acc = xs[base + plan_offset(j, red_rank, red_dims, red_strides)] != 0;
  ys[i] = acc;
}

#else

#if defined(WEFT_FLOAT)
#if defined(WEFT_HAS_FP64)
typedef double ACC;
#define KAHAN 0
#else
typedef float ACC;
#define KAHAN 1
#endif
#define IS_NAN(v) isnan(v)
#else
typedef UT ACC;
#define KAHAN 0
#define IS_NAN(v) 0
#endif

// Sums x[base + red offset j] for j in [begin, end).
inline ACC sum_range(__global const T* xs, ulong base, int red_rank, long8 red_dims, long8 red_strides, ulong begin,
                     ulong end) {
  ACC sum = 0;
#if KAHAN
  ACC c = 0;
  for (ulong j = begin; j < end; ++j) {
    const ACC y = (ACC)xs[base + plan_offset(j, red_rank, red_dims, red_strides)] - c;
    const ACC t = sum + y;
    c = (t - sum) - y;
    sum = t;
  }
#else
  for (ulong j = begin; j < end; ++j) sum += (ACC)xs[base + plan_offset(j, red_rank, red_dims, red_strides)];
#endif
  return sum;
}

// Sum, or Mean when |mean| (floats only: an empty mean is 0 / 0 = NaN).
__kernel void reduce_sum(__global const T* xs, __global T* ys, PLAN_ARGS, const int mean) {
  const ulong i = get_global_id(0);
  if (i >= n_out) return;
  const ulong base = plan_offset(i, kept_rank, kept_dims, kept_strides);
  const ACC sum = sum_range(xs, base, red_rank, red_dims, red_strides, 0, n_red);
#if defined(WEFT_FLOAT)
  ys[i] = mean ? (T)(sum / (ACC)n_red) : (T)sum;
#else
  ys[i] = (T)sum;
#endif
}

// Stage one of a long sum: parts[i * n_parts + p] sums chunk p of output i.
__kernel void reduce_sum_parts(__global const T* xs, __global ACC* parts, PLAN_ARGS, const ulong n_parts,
                               const ulong chunk) {
  const ulong g = get_global_id(0);
  if (g >= n_out * n_parts) return;
  const ulong i = g / n_parts, p = g % n_parts;
  const ulong base = plan_offset(i, kept_rank, kept_dims, kept_strides);
  const ulong begin = p * chunk;
  const ulong end = min(n_red, begin + chunk);
  parts[g] = sum_range(xs, base, red_rank, red_dims, red_strides, begin, end);
}

// Stage two: the parts of each output, added in order.
__kernel void reduce_sum_total(__global const ACC* parts, __global T* ys, const ulong n_out, const ulong n_parts,
                               const ulong n_red, const int mean) {
  const ulong i = get_global_id(0);
  if (i >= n_out) return;
  ACC sum = 0;
#if KAHAN
  ACC c = 0;
  for (ulong p = 0; p < n_parts; ++p) {
    const ACC y = parts[i * n_parts + p] - c;
    const ACC t = sum + y;
    c = (t - sum) - y;
    sum = t;
  }
#else
  for (ulong p = 0; p < n_parts; ++p) sum += parts[i * n_parts + p];
#endif
#if defined(WEFT_FLOAT)
  ys[i] = mean ? (T)(sum / (ACC)n_red) : (T)sum;
#else
  ys[i] = (T)sum;
#endif
}

__kernel void reduce_prod(__global const T* xs, __global T* ys, PLAN_ARGS) {
  const ulong i = get_global_id(0);
  if (i >= n_out) return;
  const ulong base = plan_offset(i, kept_rank, kept_dims, kept_strides);
  ACC acc = 1;
  for (ulong j = 0; j < n_red; ++j) acc *= (ACC)xs[base + plan_offset(j, red_rank, red_dims, red_strides)];
  ys[i] = (T)acc;
}

// Max (|want_max|) or Min of a non-empty set; NaN wins.
__kernel void reduce_extremum(__global const T* xs, __global T* ys, PLAN_ARGS, const int want_max) {
  const ulong i = get_global_id(0);
  if (i >= n_out) return;
  const ulong base = plan_offset(i, kept_rank, kept_dims, kept_strides);
  T acc = xs[base];
  for (ulong j = 1; j < n_red && !IS_NAN(acc); ++j) {
    const T v = xs[base + plan_offset(j, red_rank, red_dims, red_strides)];
    if (IS_NAN(v) || (want_max ? v > acc : v < acc)) acc = v;
  }
  ys[i] = acc;
}

// ArgMax (|want_max|) or ArgMin along the middle axis of [outer, n, inner]: the
// first extreme element, or the first NaN.
#define ARG_REDUCE(name, OUT)                                                                            \
  __kernel void name(__global const T* xs, __global OUT* ys, const ulong n_out, const ulong n,          \
                     const ulong inner, const int want_max) {                                                 \
    const ulong g = get_global_id(0);                                                                    \
    if (g >= n_out) return;                                                                              \
    const ulong base = (g / inner) * n * inner + g % inner;                                              \
    T best = xs[base];                                                                                   \
    ulong at = 0;                                                                                        \
    for (ulong j = 1; j < n && !IS_NAN(best); ++j) {                                                     \
      const T v = xs[base + j * inner];                                                                  \
      if (IS_NAN(v) || (want_max ? v > best : v < best)) {                                                 \
        best = v;                                                                                        \
        at = j;                                                                                          \
      }                                                                                                  \
    }                                                                                                    \
    ys[g] = (OUT)at;                                                                                     \
  }
ARG_REDUCE(arg_reduce_i32, int)
ARG_REDUCE(arg_reduce_i64, long)

#endif  // WEFT_BOOL
