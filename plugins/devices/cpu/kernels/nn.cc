// Normalisation, softmax and the cross-entropy losses: FusedBatchNorm,
// LayerNorm, Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits and
// SparseSoftmaxCrossEntropyWithLogits, for f32 and f64. Convolution,
// pooling and BiasAdd are in nn_conv.cc.
//
// Means, variances and sums of exponentials accumulate in double, means
// and variances in two passes (the mean, then the squared deviations from
// it). Softmax subtracts the maximum before exponentiating, so no finite
// input overflows. The f32 Softmax and LayerNorm rows run vectorised loops
// (ExpShifted in vector_math.cc, and the row loops below), compiled per
// instruction set.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "../kernel_framework.h"
#include "kernel_util.h"
#include "vector_math.h"

namespace weft::cpu {

void RegisterNnConvKernels(KernelRegistry& r);
void RegisterRnnKernels(KernelRegistry& r);  // rnn.cc

namespace {

// --- FusedBatchNorm --------------------------------------------------------------

template <class T>
class FusedBatchNormKernel {
 public:
  explicit FusedBatchNormKernel(const InitContext& init) : attrs_(sdk::ReadBatchNormAttrs(init)) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    // x as [outer, channels, inner].
    const sdk::ChannelLayout layout = sdk::BatchNormLayout(x, "x", attrs_.nchw);
    const int64_t channels = layout.channels, outer = layout.outer, inner = layout.inner;
    Tensor params[4];  // scale, offset, mean, variance
    for (int i = 1; i < 5; ++i) {
      params[i - 1] = ctx.input(i);
      sdk::RequireChannelInput(params[i - 1], Str("input ", i), channels);
    }
    const T* scale = params[0].as<T>();
    const T* offset = params[1].as<T>();
    Tensor y = ctx.allocate_output(0, x.dims);
    T* batch_mean = ctx.allocate_output(1, {channels}).as<T>();
    T* batch_variance = ctx.allocate_output(2, {channels}).as<T>();
    const auto c_size = static_cast<std::size_t>(channels);
    std::vector<double> mean(c_size), variance(c_size);
    const T* in = x.as<T>();
    if (attrs_.training) {
      // Biased moments over every axis but the channel's; the unbiased
      // variance out (NaN for a single element per channel, as NumPy's ddof=1).
      const auto count = static_cast<double>(outer * inner);
      ChannelMoments(in, outer, channels, inner, &mean, &variance);
      for (std::size_t c = 0; c < c_size; ++c) {
        batch_mean[c] = static_cast<T>(mean[c]);
        batch_variance[c] = static_cast<T>(variance[c] * count / (count - 1));
      }
    } else {
      const T* mean_in = params[2].as<T>();
      const T* variance_in = params[3].as<T>();
      for (std::size_t c = 0; c < c_size; ++c) {
        mean[c] = static_cast<double>(mean_in[c]);
        variance[c] = static_cast<double>(variance_in[c]);
        batch_mean[c] = mean_in[c];
        batch_variance[c] = variance_in[c];
      }
    }
    // y = (x - mean) * factor + offset, factor = scale / sqrt(variance + epsilon).
    std::vector<double> factor(c_size);
    for (std::size_t c = 0; c < c_size; ++c) {
      factor[c] = static_cast<double>(scale[c]) / std::sqrt(variance[c] + attrs_.epsilon);
    }
    T* out = y.as<T>();
    ParallelFor(outer * channels, inner * 2, [&](int64_t begin, int64_t end) {
      auto c = static_cast<std::size_t>(begin % channels);
      for (int64_t t = begin; t < end; ++t) {
        const double m = mean[c], f = factor[c], b = static_cast<double>(offset[c]);
        for (int64_t i = t * inner; i < (t + 1) * inner; ++i) {
          out[i] = static_cast<T>((static_cast<double>(in[i]) - m) * f + b);
        }
        if (++c == c_size) c = 0;
      }
    });
  }

 private:
  sdk::BatchNormAttrs attrs_;
};

// --- Vectorised loops for f32 ------------------------------------------------------

// y[i] *= scale, through double as the scalar loop did.
WEFT_CPU_CLONES void ScaleInDouble(float* y, double scale, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<double>(y[i]) * scale);
}

// The sum of y[0, n) in double, four partial sums in flight.
double SumInDouble(const float* y, int64_t n) {
  double s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) s[j] += static_cast<double>(y[i + j]);
  }
  for (; i < n; ++i) s[0] += static_cast<double>(y[i]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// The sum of squared deviations from |mean| of y[0, n), in double.
double SquaresInDouble(const float* y, int64_t n, double mean) {
  double s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) {
      const double d = static_cast<double>(y[i + j]) - mean;
      s[j] += d * d;
    }
  }
  for (; i < n; ++i) {
    const double d = static_cast<double>(y[i]) - mean;
    s[0] += d * d;
  }
  return (s[0] + s[1]) + (s[2] + s[3]);
}

// One row of LayerNorm in double, as the generic loop computes it.
WEFT_CPU_CLONES void NormalizeRow(const float* x, const float* g, const float* b, float* y, int64_t n, double mean,
                                  double inv_std) {
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>((static_cast<double>(x[i]) - mean) * inv_std * static_cast<double>(g[i]) +
                              static_cast<double>(b[i]));
  }
}

// The maximum of x[0, n) (NaN if any element is NaN, -inf if n == 0), in
// eight lanes the compiler vectorises.
WEFT_CPU_CLONES float RowMaxF(const float* x, int64_t n) {
  float m[8];
  bool nan[8];
  for (int j = 0; j < 8; ++j) {
    m[j] = -std::numeric_limits<float>::infinity();
    nan[j] = false;
  }
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const float v = x[i + j];
      m[j] = v > m[j] ? v : m[j];
      nan[j] = nan[j] | (v != v);
    }
  }
  float max = -std::numeric_limits<float>::infinity();
  bool any_nan = false;
  for (int j = 0; j < 8; ++j) {
    max = m[j] > max ? m[j] : max;
    any_nan = any_nan || nan[j];
  }
  for (; i < n; ++i) {
    max = x[i] > max ? x[i] : max;
    any_nan = any_nan || std::isnan(x[i]);
  }
  return any_nan ? std::numeric_limits<float>::quiet_NaN() : max;
}

// --- LayerNorm -------------------------------------------------------------------

template <class T>
class LayerNormKernel {
 public:
  explicit LayerNormKernel(const InitContext& init)
      : epsilon_(init.Float("epsilon")), begin_norm_axis_(init.Int("begin_norm_axis")) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), gamma = ctx.input(1), beta = ctx.input(2);
    const int begin = NormalizeAxis(begin_norm_axis_, x.rank(), "begin_norm_axis");
    const Dims normalized(x.dims.begin() + begin, x.dims.end());
    if (gamma.dims != normalized) {
      Fail("gamma has shape ", DimsString(gamma.dims), ", expected the normalized dimensions ", DimsString(normalized));
    }
    if (beta.dims != normalized) {
      Fail("beta has shape ", DimsString(beta.dims), ", expected the normalized dimensions ", DimsString(normalized));
    }
    Tensor y = ctx.allocate_output(0, x.dims);
    const int64_t n = Product(normalized, 0, static_cast<int>(normalized.size()));
    if (y.num_elements == 0) return;
    const int64_t rows = x.num_elements / n;
    const T* in = x.as<T>();
    const T* g = gamma.as<T>();
    const T* b = beta.as<T>();
    T* out = y.as<T>();
    ParallelFor(rows, n * 4, [&](int64_t row_begin, int64_t row_end) {
      for (int64_t r = row_begin; r < row_end; ++r) {
        const T* xs = in + r * n;
        T* ys = out + r * n;
        if constexpr (std::is_same_v<T, float>) {
          const double mean = SumInDouble(xs, n) / static_cast<double>(n);
          const double inv_std = 1 / std::sqrt(SquaresInDouble(xs, n, mean) / static_cast<double>(n) + epsilon_);
          NormalizeRow(xs, g, b, ys, n, mean, inv_std);
          continue;
        }
        const auto [mean, inv_std] = MomentsOfRow(xs, n, epsilon_);
        for (int64_t i = 0; i < n; ++i) {
          ys[i] = static_cast<T>((static_cast<double>(xs[i]) - mean) * inv_std * static_cast<double>(g[i]) +
                                 static_cast<double>(b[i]));
        }
      }
    });
  }

 private:
  double epsilon_;
  int64_t begin_norm_axis_;
};

// --- Softmax, LogSoftmax ---------------------------------------------------------

// The larger of a and b, or NaN when either is (a NaN in a stays).
template <class T>
T MaxOrNan(T a, T b) {
  return std::isnan(a) || b <= a ? a : b;
}

// The maximum of x[0, n), NaN if any element is NaN, -inf if n == 0.
template <class T>
T RowMax(const T* x, int64_t n) {
  T max = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) max = MaxOrNan(max, x[i]);
  return max;
}

// (Log)softmax of the contiguous vector x[0, n).
template <class T, bool kLog>
void SoftmaxRow(const T* x, T* y, int64_t n) {
  T max;
  if constexpr (std::is_same_v<T, float>) {
    max = RowMaxF(x, n);
  } else {
    max = RowMax(x, n);
  }
  if constexpr (std::is_same_v<T, float> && !kLog) {
    // A NaN max makes every exp NaN, as the scalar loop gives.
    ExpShifted(x, max, y, n);
    ScaleInDouble(y, 1 / SumInDouble(y, n), n);
    return;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T e = std::exp(x[i] - max);
    if constexpr (!kLog) y[i] = e;
    sum += static_cast<double>(e);
  }
  if constexpr (kLog) {
    const double log_sum = std::log(sum);
    for (int64_t i = 0; i < n; ++i) {
      y[i] = static_cast<T>(static_cast<double>(x[i]) - static_cast<double>(max) - log_sum);
    }
  } else {
    const double inv_sum = 1 / sum;
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<T>(static_cast<double>(y[i]) * inv_sum);
  }
}

// Columns one task handles when the softmax axis is not the last.
constexpr int64_t kColumnBlock = 256;

// (Log)softmax of |width| adjacent vectors of |n| elements, element r of
// vector j at x[r * stride + j].
template <class T, bool kLog>
void SoftmaxColumns(const T* x, T* y, int64_t n, int64_t stride, int64_t width) {
  T max[kColumnBlock];
  double sum[kColumnBlock];
  std::fill(max, max + width, -std::numeric_limits<T>::infinity());
  std::fill(sum, sum + width, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    const T* row = x + r * stride;
    for (int64_t j = 0; j < width; ++j) max[j] = MaxOrNan(max[j], row[j]);
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* row = x + r * stride;
    T* out = y + r * stride;
    for (int64_t j = 0; j < width; ++j) {
      const T e = std::exp(row[j] - max[j]);
      if constexpr (!kLog) out[j] = e;
      sum[j] += static_cast<double>(e);
    }
  }
  // From here on sum[j] is log(sum) for LogSoftmax, 1 / sum for Softmax.
  for (int64_t j = 0; j < width; ++j) sum[j] = kLog ? std::log(sum[j]) : 1 / sum[j];
  for (int64_t r = 0; r < n; ++r) {
    const T* row = x + r * stride;
    T* out = y + r * stride;
    for (int64_t j = 0; j < width; ++j) {
      if constexpr (kLog) {
        out[j] = static_cast<T>(static_cast<double>(row[j]) - static_cast<double>(max[j]) - sum[j]);
      } else {
        out[j] = static_cast<T>(static_cast<double>(out[j]) * sum[j]);
      }
    }
  }
}

template <class T, bool kLog>
class SoftmaxKernel {
 public:
  explicit SoftmaxKernel(const InitContext& init) : axis_(init.Int("axis")) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int axis = sdk::SoftmaxAxis(x, axis_);
    const int64_t outer = Product(x.dims, 0, axis), n = x.dim(axis), inner = Product(x.dims, axis + 1, x.rank());
    Tensor y = ctx.allocate_output(0, x.dims);
    if (y.num_elements == 0) return;
    const T* in = x.as<T>();
    T* out = y.as<T>();
    if (inner == 1) {
      ParallelFor(outer, n * 10, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) SoftmaxRow<T, kLog>(in + r * n, out + r * n, n);
      });
      return;
    }
    const int64_t blocks = CeilDiv(inner, kColumnBlock);
    ParallelFor(outer * blocks, n * std::min(inner, kColumnBlock) * 10, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / blocks, j0 = (t % blocks) * kColumnBlock;
        const int64_t offset = o * n * inner + j0;
        SoftmaxColumns<T, kLog>(in + offset, out + offset, n, inner, std::min(kColumnBlock, inner - j0));
      }
    });
  }

 private:
  int64_t axis_;
};

// --- Cross entropy ---------------------------------------------------------------

// The row's maximum and log(sum(exp(row - max))).
template <class T>
std::pair<T, double> LogSumExp(const T* row, int64_t n) {
  const T max = RowMax(row, n);
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(std::exp(row[j] - max));
  return {max, std::log(sum)};
}

template <class T>
class SoftmaxXentKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor features = ctx.input(0), labels = ctx.input(1);
    // Named, not a structured binding: the lambda below captures them
    // (clang 14 cannot capture a binding).
    const sdk::XentShape shape = sdk::CheckXent(features, labels);
    const int64_t batch = shape.batch, classes = shape.classes;
    T* loss = ctx.allocate_output(0, {batch}).as<T>();
    T* backprop = ctx.allocate_output(1, features.dims).as<T>();
    const T* f = features.as<T>();
    const T* l = labels.as<T>();
    ParallelFor(batch, classes * 20, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T* row = f + i * classes;
        const T* label = l + i * classes;
        const auto [max, log_sum] = LogSumExp(row, classes);
        double total = 0;
        for (int64_t j = 0; j < classes; ++j) {
          // -log softmax = log_sum - (x - max)
          const double shifted = static_cast<double>(row[j]) - static_cast<double>(max);
          total += static_cast<double>(label[j]) * (log_sum - shifted);
          backprop[i * classes + j] = static_cast<T>(std::exp(shifted - log_sum) - static_cast<double>(label[j]));
        }
        loss[i] = static_cast<T>(total);
      }
    });
  }
};

template <class T, class Label>
class SparseSoftmaxXentKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor features = ctx.input(0), labels = ctx.input(1);
    const sdk::XentShape shape = sdk::CheckSparseXent(features, labels);
    const int64_t batch = shape.batch, classes = shape.classes;
    const Label* label = labels.as<Label>();
    for (int64_t i = 0; i < batch; ++i) sdk::CheckLabel(label[i], i, classes);
    T* loss = ctx.allocate_output(0, {batch}).as<T>();
    T* backprop = ctx.allocate_output(1, features.dims).as<T>();
    const T* f = features.as<T>();
    ParallelFor(batch, classes * 20, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const T* row = f + i * classes;
        const auto [max, log_sum] = LogSumExp(row, classes);
        for (int64_t j = 0; j < classes; ++j) {
          const double shifted = static_cast<double>(row[j]) - static_cast<double>(max);
          backprop[i * classes + j] = static_cast<T>(std::exp(shifted - log_sum) - (j == label[i] ? 1 : 0));
        }
        loss[i] = static_cast<T>(log_sum - (static_cast<double>(row[label[i]]) - static_cast<double>(max)));
      }
    });
  }
};

}  // namespace

void RegisterNnKernels(KernelRegistry& r) {
  auto add = [&r]<class T>() {
    constexpr weft_dtype_t t = DtypeOf<T>();
    AddKernel<"FusedBatchNorm", FusedBatchNormKernel<T>, t>(r, {{"T", t}});
    AddKernel<"LayerNorm", LayerNormKernel<T>, t>(r, {{"T", t}});
    AddKernel<"Softmax", SoftmaxKernel<T, false>, t>(r, {{"T", t}});
    AddKernel<"LogSoftmax", SoftmaxKernel<T, true>, t>(r, {{"T", t}});
    AddKernel<"SoftmaxCrossEntropyWithLogits", SoftmaxXentKernel<T>, t>(r, {{"T", t}});
    AddKernel<"SparseSoftmaxCrossEntropyWithLogits", SparseSoftmaxXentKernel<T, int32_t>, t>(
        r, {{"T", t}, {"Tlabels", WEFT_DTYPE_I32}});
    AddKernel<"SparseSoftmaxCrossEntropyWithLogits", SparseSoftmaxXentKernel<T, int64_t>, t>(
        r, {{"T", t}, {"Tlabels", WEFT_DTYPE_I64}});
  };
  add.template operator()<float>();
  add.template operator()<double>();
  RegisterNnConvKernels(r);
  RegisterRnnKernels(r);
}

}  // namespace weft::cpu
