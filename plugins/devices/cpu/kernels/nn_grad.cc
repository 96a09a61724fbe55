// The backward kernels of the neural-network family: BiasAddGrad (every
// numeric type), FusedBatchNormGrad and LayerNormGrad (f32, f64).
// Convolution and pooling backprop are in nn_conv_grad.cc.
//
// Sums over many elements accumulate in double (integers in 64-bit
// unsigned arithmetic, so they wrap as the op says), in a fixed order that
// does not depend on the thread count. The normalisation gradients
// recompute the statistics as the forward kernels do (nn.cc): in double,
// the mean first, then the squared deviations from it.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {

void RegisterNnConvGradKernels(KernelRegistry& r);

namespace {

// --- BiasAddGrad -------------------------------------------------------------------

// Integers sum in uint64 (wrapping, then truncated to T: the same bits as
// a wrapping sum in T); floats in double.
template <class T>
using BiasAcc = std::conditional_t<std::is_integral_v<T>, uint64_t, double>;

template <class T>
class BiasAddGradKernel {
 public:
  explicit BiasAddGradKernel(const InitContext& init) : nchw_(sdk::IsNchw(init)) {}

  void Compute(Context& ctx) {
    const Tensor dy = ctx.input(0);
    const sdk::ChannelLayout layout = sdk::CheckBiasAddGrad(dy, nchw_);
    const int64_t outer = layout.outer, channels = layout.channels, inner = layout.inner;
    T* out = ctx.allocate_output(0, {channels}).as<T>();
    const T* in = dy.as<T>();
    const std::vector<BiasAcc<T>> sums = ChannelSums<BiasAcc<T>>(outer, channels, inner, [in](int64_t, int64_t i) {
      if constexpr (std::is_integral_v<T>) {
        return static_cast<uint64_t>(static_cast<int64_t>(in[i]));
      } else {
        return static_cast<double>(Load(in[i]));
      }
    });
    for (int64_t c = 0; c < channels; ++c) {
      const BiasAcc<T> s = sums[static_cast<std::size_t>(c)];
      if constexpr (std::is_integral_v<T>) {
        out[c] = static_cast<T>(s);
      } else {
        out[c] = StoreAs<T>(static_cast<typename ComputeType<T>::type>(s));
      }
    }
  }

 private:
  bool nchw_;
};

// --- FusedBatchNormGrad --------------------------------------------------------------

// With xhat = (x - mean) * inv, inv = 1 / sqrt(variance + epsilon), per
// channel over the count elements of its channel:
//   offset_backprop = sum(dy), scale_backprop = sum(dy * xhat),
//   x_backprop = scale * inv * (dy - [sum(dy) + xhat * sum(dy * xhat)] / count)
// in training, where mean and variance depend on x, and
//   x_backprop = scale * inv * dy
// in inference, where they are constants.
template <class T>
class FusedBatchNormGradKernel {
 public:
  explicit FusedBatchNormGradKernel(const InitContext& init) : attrs_(sdk::ReadBatchNormAttrs(init)) {}

  void Compute(Context& ctx) {
    const Tensor dy = ctx.input(0), x = ctx.input(1);
    // x as [outer, channels, inner].
    const sdk::ChannelLayout layout = sdk::BatchNormGradLayout(dy, x, attrs_.nchw);
    const int64_t channels = layout.channels, outer = layout.outer, inner = layout.inner;
    static const char* const kNames[] = {"scale", "mean", "variance"};
    Tensor params[3];
    for (int i = 0; i < 3; ++i) {
      params[i] = ctx.input(i + 2);
      sdk::RequireChannelInput(params[i], kNames[i], channels);
    }
    const T* scale = params[0].as<T>();
    Tensor dx_tensor = ctx.allocate_output(0, x.dims);
    T* dscale = ctx.allocate_output(1, {channels}).as<T>();
    T* doffset = ctx.allocate_output(2, {channels}).as<T>();
    const auto c_size = static_cast<std::size_t>(channels);
    const T* in = x.as<T>();
    const T* grad = dy.as<T>();
    const auto count = static_cast<double>(outer * inner);
    std::vector<double> mean(c_size), inv(c_size);
    if (attrs_.training) {
      std::vector<double> variance;
      ChannelMoments(in, outer, channels, inner, &mean, &variance);
      for (std::size_t c = 0; c < c_size; ++c) inv[c] = 1 / std::sqrt(variance[c] + attrs_.epsilon);
    } else {
      const T* mean_in = params[1].as<T>();
      const T* variance_in = params[2].as<T>();
      for (std::size_t c = 0; c < c_size; ++c) {
        mean[c] = static_cast<double>(mean_in[c]);
        inv[c] = 1 / std::sqrt(static_cast<double>(variance_in[c]) + attrs_.epsilon);
      }
    }
    const std::vector<double> sum_dy = ChannelSums<double>(
        outer, channels, inner, [grad](int64_t, int64_t i) { return static_cast<double>(grad[i]); });
    const std::vector<double> sum_dy_xhat = ChannelSums<double>(outer, channels, inner, [&](int64_t c, int64_t i) {
      const auto k = static_cast<std::size_t>(c);
      return static_cast<double>(grad[i]) * (static_cast<double>(in[i]) - mean[k]) * inv[k];
    });
    for (std::size_t c = 0; c < c_size; ++c) {
      dscale[c] = static_cast<T>(sum_dy_xhat[c]);
      doffset[c] = static_cast<T>(sum_dy[c]);
    }
    if (dx_tensor.num_elements == 0) return;
    T* dx = dx_tensor.as<T>();
    ParallelFor(outer * channels, inner * 4, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const auto c = static_cast<std::size_t>(t % channels);
        const double factor = static_cast<double>(scale[c]) * inv[c];
        if (attrs_.training) {
          const double mean_dy = sum_dy[c] / count, mean_dy_xhat = sum_dy_xhat[c] / count;
          for (int64_t i = t * inner; i < (t + 1) * inner; ++i) {
            const double xhat = (static_cast<double>(in[i]) - mean[c]) * inv[c];
            dx[i] = static_cast<T>(factor * (static_cast<double>(grad[i]) - mean_dy - xhat * mean_dy_xhat));
          }
        } else {
          for (int64_t i = t * inner; i < (t + 1) * inner; ++i) {
            dx[i] = static_cast<T>(factor * static_cast<double>(grad[i]));
          }
        }
      }
    });
  }

 private:
  sdk::BatchNormAttrs attrs_;
};

// --- LayerNormGrad ---------------------------------------------------------------------

// Per row of n normalised elements, with xhat = (x - mean) * inv and
// g = dy * gamma:
//   dx = inv * (g - mean(g) - xhat * mean(g * xhat));
// dgamma = sum(dy * xhat) and dbeta = sum(dy) over the rows.
template <class T>
class LayerNormGradKernel {
 public:
  explicit LayerNormGradKernel(const InitContext& init)
      : epsilon_(init.Float("epsilon")), begin_norm_axis_(init.Int("begin_norm_axis")) {}

  void Compute(Context& ctx) {
    const Tensor dy = ctx.input(0), x = ctx.input(1), gamma = ctx.input(2);
    if (x.dims != dy.dims) {
      Fail("dy has shape ", DimsString(dy.dims), ", but x has shape ", DimsString(x.dims), "; they must be equal");
    }
    const int begin = NormalizeAxis(begin_norm_axis_, x.rank(), "begin_norm_axis");
    const Dims normalized(x.dims.begin() + begin, x.dims.end());
    if (gamma.dims != normalized) {
      Fail("gamma has shape ", DimsString(gamma.dims), ", expected the normalized dimensions ", DimsString(normalized));
    }
    Tensor dx_tensor = ctx.allocate_output(0, x.dims);
    Tensor dgamma_tensor = ctx.allocate_output(1, normalized);
    Tensor dbeta_tensor = ctx.allocate_output(2, normalized);
    const int64_t n = Product(normalized, 0, static_cast<int>(normalized.size()));
    if (n == 0) return;
    const int64_t rows = x.num_elements / n;
    const T* in = x.as<T>();
    const T* grad = dy.as<T>();
    const T* g = gamma.as<T>();
    T* dx = dx_tensor.as<T>();
    // Pass 1, by rows: the statistics and dx.
    std::vector<double> row_mean(static_cast<std::size_t>(rows)), row_inv(static_cast<std::size_t>(rows));
    ParallelFor(rows, n * 8, [&](int64_t row_begin, int64_t row_end) {
      for (int64_t r = row_begin; r < row_end; ++r) {
        const T* xs = in + r * n;
        const T* dys = grad + r * n;
        const auto [mean, inv] = MomentsOfRow(xs, n, epsilon_);
        double sum_g = 0, sum_g_xhat = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double gi = static_cast<double>(dys[i]) * static_cast<double>(g[i]);
          sum_g += gi;
          sum_g_xhat += gi * (static_cast<double>(xs[i]) - mean) * inv;
        }
        const double mean_g = sum_g / static_cast<double>(n), mean_g_xhat = sum_g_xhat / static_cast<double>(n);
        T* out = dx + r * n;
        for (int64_t i = 0; i < n; ++i) {
          const double gi = static_cast<double>(dys[i]) * static_cast<double>(g[i]);
          const double xhat = (static_cast<double>(xs[i]) - mean) * inv;
          out[i] = static_cast<T>(inv * (gi - mean_g - xhat * mean_g_xhat));
        }
        row_mean[static_cast<std::size_t>(r)] = mean;
        row_inv[static_cast<std::size_t>(r)] = inv;
      }
    });
    // Pass 2, by blocks of columns: dgamma and dbeta, summed over the rows in order.
    constexpr int64_t kColumns = 64;
    T* dgamma = dgamma_tensor.as<T>();
    T* dbeta = dbeta_tensor.as<T>();
    const int64_t blocks = (n + kColumns - 1) / kColumns;
    ParallelFor(blocks, rows * std::min(n, kColumns) * 2, [&](int64_t block_begin, int64_t block_end) {
      double sum_dgamma[kColumns], sum_dbeta[kColumns];
      for (int64_t b = block_begin; b < block_end; ++b) {
        const int64_t j0 = b * kColumns, width = std::min(kColumns, n - j0);
        std::fill(sum_dgamma, sum_dgamma + width, 0.0);
        std::fill(sum_dbeta, sum_dbeta + width, 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          const double mean = row_mean[static_cast<std::size_t>(r)], inv = row_inv[static_cast<std::size_t>(r)];
          const T* xs = in + r * n + j0;
          const T* dys = grad + r * n + j0;
          for (int64_t j = 0; j < width; ++j) {
            const double d = static_cast<double>(dys[j]);
            sum_dgamma[j] += d * (static_cast<double>(xs[j]) - mean) * inv;
            sum_dbeta[j] += d;
          }
        }
        for (int64_t j = 0; j < width; ++j) {
          dgamma[j0 + j] = static_cast<T>(sum_dgamma[j]);
          dbeta[j0 + j] = static_cast<T>(sum_dbeta[j]);
        }
      }
    });
  }

 private:
  double epsilon_;
  int64_t begin_norm_axis_;
};

}  // namespace

void RegisterNnGradKernels(KernelRegistry& r) {
  auto add_float = [&r]<class T>() {
    r.Add<FusedBatchNormGradKernel<T>>("FusedBatchNormGrad", {{"T", DtypeOf<T>()}});
    r.Add<LayerNormGradKernel<T>>("LayerNormGrad", {{"T", DtypeOf<T>()}});
  };
  add_float.template operator()<float>();
  add_float.template operator()<double>();
  ForEachNumericType([&r]<class T>() { r.Add<BiasAddGradKernel<T>>("BiasAddGrad", {{"T", DtypeOf<T>()}}); });
  RegisterNnConvGradKernels(r);
}

}  // namespace weft::cpu
