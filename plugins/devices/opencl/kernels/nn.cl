// Softmax, LogSoftmax, the two softmax cross-entropies and BiasAdd, built
// once per element type T. Float sums of exponentials accumulate in double
// where the device has cl_khr_fp64 (as the CPU kernels do), else in float.
#pragma OPENCL FP_CONTRACT OFF
#ifdef WEFT_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// value[i] + bias[channel of i]: the channel is (i / inner) % channels.
__kernel void bias_add(__global const T* xs, __global const T* bias, __global T* ys, const ulong n,
                       const ulong channels, const ulong inner) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
#if defined(WEFT_INT)
  ys[i] = AS_T((UT)xs[i] + (UT)bias[(i / inner) % channels]);
#else
  ys[i] = xs[i] + bias[(i / inner) % channels];
#endif
}

#if defined(WEFT_FLOAT)

#if defined(WEFT_HAS_FP64)
typedef double ACC;
#else
typedef T ACC;
#endif

// The larger of a and b; a NaN in a stays, one in b wins.
inline T max_or_nan(T a, T b) { return isnan(a) || b <= a ? a : b; }

// (Log)softmax along the middle axis of [outer, n, inner]: work-item g
// handles vector (g / inner, g % inner).
__kernel void softmax(__global const T* xs, __global T* ys, const ulong vectors, const ulong n, const ulong inner,
                      const int log_softmax) {
  const ulong g = get_global_id(0);
  if (g >= vectors) return;
  const ulong base = (g / inner) * n * inner + g % inner;
  T max = -INFINITY;
  for (ulong r = 0; r < n; ++r) max = max_or_nan(max, xs[base + r * inner]);
  ACC sum = 0;
  for (ulong r = 0; r < n; ++r) {
    const T e = exp(xs[base + r * inner] - max);
    if (!log_softmax) ys[base + r * inner] = e;
    sum += (ACC)e;
  }
  if (log_softmax) {
    const ACC log_sum = log(sum);
    for (ulong r = 0; r < n; ++r) ys[base + r * inner] = (T)((ACC)xs[base + r * inner] - (ACC)max - log_sum);
  } else {
    const ACC inv_sum = (ACC)1 / sum;
    for (ulong r = 0; r < n; ++r) ys[base + r * inner] = (T)((ACC)ys[base + r * inner] * inv_sum);
  }
}

// The row's maximum and log(sum(exp(row - max))).
inline ACC log_sum_exp(__global const T* row, ulong n, T* max_out) {
  T max = -INFINITY;
  for (ulong j = 0; j < n; ++j) max = max_or_nan(max, row[j]);
  ACC sum = 0;
  for (ulong j = 0; j < n; ++j) sum += (ACC)exp(row[j] - max);
  *max_out = max;
  return log(sum);
}

// One row of [batch, classes] per work-item: loss = -sum labels * log
// softmax, backprop = softmax - labels.
__kernel void softmax_xent(__global const T* features, __global const T* labels, __global T* loss,
                           __global T* backprop, const ulong batch, const ulong classes) {
  const ulong i = get_global_id(0);
  if (i >= batch) return;
  __global const T* row = features + i * classes;
  __global const T* label = labels + i * classes;
  T max;
  const ACC log_sum = log_sum_exp(row, classes, &max);
  ACC total = 0;
  for (ulong j = 0; j < classes; ++j) {
    const ACC shifted = (ACC)row[j] - (ACC)max;
    total += (ACC)label[j] * (log_sum - shifted);
    backprop[i * classes + j] = (T)(exp(shifted - log_sum) - (ACC)label[j]);
  }
  loss[i] = (T)total;
}

// As softmax_xent with one class index per row (checked by the host).
#define SPARSE_XENT(name, LABEL)                                                                          \
  __kernel void name(__global const T* features, __global const LABEL* labels, __global T* loss,         \
                     __global T* backprop, const ulong batch, const ulong classes) {                     \
    const ulong i = get_global_id(0);                                                                     \
    if (i >= batch) return;                                                                               \
    __global const T* row = features + i * classes;                                                       \
    const ulong label = (ulong)labels[i];                                                                 \
    T max;                                                                                                \
    const ACC log_sum = log_sum_exp(row, classes, &max);                                                  \
    for (ulong j = 0; j < classes; ++j) {                                                                 \
      const ACC shifted = (ACC)row[j] - (ACC)max;                                                         \
      backprop[i * classes + j] = (T)(exp(shifted - log_sum) - (j == label ? (ACC)1 : (ACC)0));           \
    }                                                                                                     \
    loss[i] = (T)(log_sum - ((ACC)row[label] - (ACC)max));                                                \
  }
SPARSE_XENT(sparse_softmax_xent_i32, int)
SPARSE_XENT(sparse_softmax_xent_i64, long)

#endif  // WEFT_FLOAT
