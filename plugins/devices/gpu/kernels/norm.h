// FusedBatchNorm and FusedBatchNormGrad (core/ops/nn_ops.cc,
// nn_grad_ops.cc), f32 and f64, for the cuda and hip plugins.
//
// x is seen as [outer, channels, inner] (the channel axis is the last one,
// or axis 1 of NCHW data). Per-channel statistics take a block per
// channel: the mean first, then the squared deviations from it, summed in
// double in a tree, as the CPU kernels compute them in double; the
// per-element arithmetic is done in double too and rounded to T.
//
// Device code: included by plugins/devices/cuda/norm.cu and
// plugins/devices/hip/norm.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_NORM_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_NORM_H_

#include <algorithm>

#include "gpu/device_compat.h"

namespace weft::gpu {
namespace {

// The layout of x as [outer, channels, inner].
struct ChannelShape {
  int64_t outer = 1, channels = 0, inner = 1;
  __host__ __device__ int64_t count() const { return outer * inner; }
};

__device__ inline int64_t ChannelElement(const ChannelShape& s, int64_t c, int64_t j) {
  return (j / s.inner) * s.channels * s.inner + c * s.inner + j % s.inner;
}

unsigned ChannelBlocks(int64_t channels) { return static_cast<unsigned>(std::min<int64_t>(channels, 65535)); }

// The biased moments of each channel: mean[c] and variance[c].
template <class T>
__global__ void ChannelMoments(const T* x, ChannelShape s, double* mean, double* variance) {
  __shared__ double shared[kBlock];
  const int64_t n = s.count();
  for (int64_t c = blockIdx.x; c < s.channels; c += gridDim.x) {
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) sum += static_cast<double>(x[ChannelElement(s, c, j)]);
    const double m = BlockCombine(sum, shared, SumOf()) / static_cast<double>(n);
    double squares = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const double d = static_cast<double>(x[ChannelElement(s, c, j)]) - m;
      squares += d * d;
    }
    const double v = BlockCombine(squares, shared, SumOf()) / static_cast<double>(n);
    if (threadIdx.x == 0) {
      mean[c] = m;
      variance[c] = v;
    }
  }
}

// The forward op's per-channel outputs and factor = scale / sqrt(v + eps).
// In training, mean and variance are the batch's (biased) moments and
// batch_variance the unbiased one (NaN for one element per channel, as
// NumPy's ddof=1); in inference they are the inputs, passed through.
template <class T>
__global__ void BatchNormFinish(const T* scale, const T* mean_in, const T* variance_in, double* mean, double* variance,
                                T* batch_mean, T* batch_variance, double* factor, int64_t channels, double count,
                                double epsilon, bool training) {
  for (int64_t c = GlobalIndex(); c < channels; c += GlobalStride()) {
    if (training) {
      batch_mean[c] = static_cast<T>(mean[c]);
      batch_variance[c] = static_cast<T>(variance[c] * count / (count - 1));
    } else {
      mean[c] = static_cast<double>(mean_in[c]);
      variance[c] = static_cast<double>(variance_in[c]);
      batch_mean[c] = mean_in[c];
      batch_variance[c] = variance_in[c];
    }
    factor[c] = static_cast<double>(scale[c]) / sqrt(variance[c] + epsilon);
  }
}

template <class T>
__global__ void BatchNormApply(const T* x, const T* offset, const double* mean, const double* factor, T* y,
                               ChannelShape s, int64_t total) {
  for (int64_t i = GlobalIndex(); i < total; i += GlobalStride()) {
    const int64_t c = (i / s.inner) % s.channels;
    y[i] = static_cast<T>((static_cast<double>(x[i]) - mean[c]) * factor[c] + static_cast<double>(offset[c]));
  }
}

ChannelShape ShapeOf(const sdk::ChannelLayout& c) {
  ChannelShape s;
  s.outer = c.outer;
  s.channels = c.channels;
  s.inner = c.inner;
  return s;
}

template <class T>
class FusedBatchNormKernel {
 public:
  explicit FusedBatchNormKernel(const InitContext& init) : attrs_(sdk::ReadBatchNormAttrs(init)) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const ChannelShape s = ShapeOf(sdk::BatchNormLayout(x, "x", attrs_.nchw));
    for (int i = 1; i < 5; ++i) sdk::RequireChannelInput(ctx.input(i), Str("input ", i), s.channels);
    const Tensor scale = ctx.input(1), offset = ctx.input(2), mean_in = ctx.input(3), variance_in = ctx.input(4);
    const Tensor y = ctx.allocate_output(0, x.dims);
    const Tensor batch_mean = ctx.allocate_output(1, {s.channels});
    const Tensor batch_variance = ctx.allocate_output(2, {s.channels});
    if (s.channels == 0) return;
    double* mean = ctx.allocate_temp(WEFT_DTYPE_F64, {s.channels}).as<double>();
    double* variance = ctx.allocate_temp(WEFT_DTYPE_F64, {s.channels}).as<double>();
    double* factor = ctx.allocate_temp(WEFT_DTYPE_F64, {s.channels}).as<double>();
    if (attrs_.training) {
      ChannelMoments<T><<<ChannelBlocks(s.channels), kBlock, 0, ctx.stream()>>>(x.as<const T>(), s, mean, variance);
      CheckLaunch("FusedBatchNorm");
    }
    BatchNormFinish<T><<<GridFor(s.channels), kBlock, 0, ctx.stream()>>>(
        scale.as<const T>(), mean_in.as<const T>(), variance_in.as<const T>(), mean, variance, batch_mean.as<T>(),
        batch_variance.as<T>(), factor, s.channels, static_cast<double>(s.count()), attrs_.epsilon, attrs_.training);
    CheckLaunch("FusedBatchNorm");
    if (y.num_elements == 0) return;
    BatchNormApply<T><<<GridFor(y.num_elements), kBlock, 0, ctx.stream()>>>(x.as<const T>(), offset.as<const T>(), mean,
                                                                            factor, y.as<T>(), s, y.num_elements);
    CheckLaunch("FusedBatchNorm");
  }

 private:
  sdk::BatchNormAttrs attrs_;
};

// --- FusedBatchNormGrad ------------------------------------------------------------

// Per channel, with xhat = (x - mean) * inv, inv = 1 / sqrt(variance + eps):
// sum_dy = sum(dy), sum_dy_xhat = sum(dy * xhat); written as the offset and
// scale gradients, and kept in double for dx. Inference passes the given
// moments in (mean, variance already filled).
template <class T>
__global__ void BatchNormGradSums(const T* dy, const T* x, const double* mean, const double* variance, double epsilon,
                                  ChannelShape s, double* sum_dy, double* sum_dy_xhat, T* doffset, T* dscale) {
  __shared__ double shared[kBlock];
  const int64_t n = s.count();
  for (int64_t c = blockIdx.x; c < s.channels; c += gridDim.x) {
    const double inv = 1 / sqrt(variance[c] + epsilon);
    double a = 0, b = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const int64_t e = ChannelElement(s, c, j);
      const double g = static_cast<double>(dy[e]);
      a += g;
      b += g * (static_cast<double>(x[e]) - mean[c]) * inv;
    }
    a = BlockCombine(a, shared, SumOf());
    b = BlockCombine(b, shared, SumOf());
    if (threadIdx.x == 0) {
      sum_dy[c] = a;
      sum_dy_xhat[c] = b;
      doffset[c] = static_cast<T>(a);
      dscale[c] = static_cast<T>(b);
    }
  }
}

// dx = scale * inv * (dy - [sum_dy + xhat * sum_dy_xhat] / count) in
// training, where the moments depend on x; scale * inv * dy otherwise.
template <class T>
__global__ void BatchNormGradInput(const T* dy, const T* x, const T* scale, const double* mean, const double* variance,
                                   const double* sum_dy, const double* sum_dy_xhat, double epsilon, bool training,
                                   ChannelShape s, T* dx, int64_t total) {
  const double count = static_cast<double>(s.count());
  for (int64_t i = GlobalIndex(); i < total; i += GlobalStride()) {
    const int64_t c = (i / s.inner) % s.channels;
    const double inv = 1 / sqrt(variance[c] + epsilon);
    const double factor = static_cast<double>(scale[c]) * inv;
    const double g = static_cast<double>(dy[i]);
    if (training) {
      const double xhat = (static_cast<double>(x[i]) - mean[c]) * inv;
      dx[i] = static_cast<T>(factor * (g - (sum_dy[c] + xhat * sum_dy_xhat[c]) / count));
    } else {
      dx[i] = static_cast<T>(factor * g);
    }
  }
}

template <class T>
__global__ void WidenToDouble(const T* in, double* out, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) out[i] = static_cast<double>(in[i]);
}

template <class T>
class FusedBatchNormGradKernel {
 public:
  explicit FusedBatchNormGradKernel(const InitContext& init) : attrs_(sdk::ReadBatchNormAttrs(init)) {}

  void Compute(Context& ctx) {
    static const char* const kNames[] = {"scale", "mean", "variance"};
    const Tensor dy = ctx.input(0), x = ctx.input(1);
    const ChannelShape s = ShapeOf(sdk::BatchNormGradLayout(dy, x, attrs_.nchw));
    for (int i = 2; i < 5; ++i) sdk::RequireChannelInput(ctx.input(i), kNames[i - 2], s.channels);
    const Tensor scale = ctx.input(2), mean_in = ctx.input(3), variance_in = ctx.input(4);
    const Tensor dx = ctx.allocate_output(0, x.dims);
    const Tensor dscale = ctx.allocate_output(1, {s.channels});
    const Tensor doffset = ctx.allocate_output(2, {s.channels});
    if (s.channels == 0) return;
    double* mean = ctx.allocate_temp(WEFT_DTYPE_F64, {s.channels}).as<double>();
    double* variance = ctx.allocate_temp(WEFT_DTYPE_F64, {s.channels}).as<double>();
    double* sum_dy = ctx.allocate_temp(WEFT_DTYPE_F64, {s.channels}).as<double>();
    double* sum_dy_xhat = ctx.allocate_temp(WEFT_DTYPE_F64, {s.channels}).as<double>();
    const unsigned blocks = GridFor(s.channels);
    if (attrs_.training) {
      // The batch's moments, recomputed from x; the inputs are not read.
      ChannelMoments<T><<<ChannelBlocks(s.channels), kBlock, 0, ctx.stream()>>>(x.as<const T>(), s, mean, variance);
    } else {
      WidenToDouble<T><<<blocks, kBlock, 0, ctx.stream()>>>(mean_in.as<const T>(), mean, s.channels);
      WidenToDouble<T><<<blocks, kBlock, 0, ctx.stream()>>>(variance_in.as<const T>(), variance, s.channels);
    }
    CheckLaunch("FusedBatchNormGrad");
    BatchNormGradSums<T><<<ChannelBlocks(s.channels), kBlock, 0, ctx.stream()>>>(
        dy.as<const T>(), x.as<const T>(), mean, variance, attrs_.epsilon, s, sum_dy, sum_dy_xhat, doffset.as<T>(),
        dscale.as<T>());
    CheckLaunch("FusedBatchNormGrad");
    if (dx.num_elements == 0) return;
    BatchNormGradInput<T><<<GridFor(dx.num_elements), kBlock, 0, ctx.stream()>>>(
        dy.as<const T>(), x.as<const T>(), scale.as<const T>(), mean, variance, sum_dy, sum_dy_xhat, attrs_.epsilon,
        attrs_.training, s, dx.as<T>(), dx.num_elements);
    CheckLaunch("FusedBatchNormGrad");
  }

 private:
  sdk::BatchNormAttrs attrs_;
};

}  // namespace

void RegisterNormKernels(KernelRegistry& r) {
  AddForTypes<FusedBatchNormKernel, float, double>(r, "FusedBatchNorm");
  AddForTypes<FusedBatchNormGradKernel, float, double>(r, "FusedBatchNormGrad");
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_NORM_H_
