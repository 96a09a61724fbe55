// The backward kernels of convolution and pooling: Conv2DBackpropInput,
// Conv2DBackpropFilter, their depthwise twins, MaxPoolGrad and AvgPoolGrad,
// for f32 and f64, with the forward kernels' geometry (window.h, shared
// with nn_conv.cc): NHWC or NCHW data, SAME padding split with the odd
// element after.
//
// f32 Conv2D backprop goes to oneDNN's convolution_backward_data and
// convolution_backward_weights, and f32 AvgPoolGrad to pooling_backward,
// primitives cached per shape in the kernel. oneDNN picks the weights'
// layout, as for the forward convolution; the HWIO filter is reordered
// into it (backprop to the input) or the gradient out of it (backprop to
// the filter) through a temp. f64, the depthwise ops and any shape oneDNN
// declines use the direct loops below over NHWC data, NCHW data being
// transposed around them (or, for pooling, viewed as [N*C, H, W, 1]).
// MaxPoolGrad always uses loops of its own (a faster one when the windows
// do not overlap): oneDNN's max-pooling backward needs the forward pass's
// workspace and does not promise which of several equal maxima gets the
// gradient, which the op defines (the first).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <tuple>
#include <type_traits>
#include <vector>

#include "../kernel_framework.h"
#include "dnnl_util.h"
#include "window.h"

namespace weft::cpu {
namespace {

// --- Inputs -------------------------------------------------------------------------

// The 4 dims a *_sizes input holds, checked.
template <class Index>
Dims ReadSizes(const Tensor& t, const char* what) {
  if (t.rank() != 1 || t.num_elements != 4) {
    Fail(what, " must be a 1-D tensor of 4 elements, got shape ", DimsString(t.dims));
  }
  const Index* v = t.as<Index>();
  Dims dims(v, v + 4);
  for (int64_t d : dims) {
    if (d < 0) Fail(what, " ", DimsString(dims), " has a negative entry");
  }
  return dims;
}

// Fails unless the gradient |what| has the forward output's shape.
void CheckGradShape(const char* what, const Tensor& t, const Dims& want, const std::string& because) {
  if (t.dims != want) {
    Fail(what, " has shape ", DimsString(t.dims), ", but ", because, " gives ", DimsString(want));
  }
}

// --- Convolution backprop, oneDNN --------------------------------------------------

// The descriptors both f32 convolution backward primitives start from: the
// data in data_format, the user's HWIO filter, the weights in a layout of
// oneDNN's choice, and the forward primitive oneDNN wants as a hint.
struct DnnlConvDescs {
  dnnl::memory::desc src, dst, filter, any_weights;
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
  dnnl::convolution_forward::primitive_desc forward;

  DnnlConvDescs(const Geometry& g, bool nchw) {
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::dims weights_dims = {g.out_channels, g.channels, g.window_h, g.window_w};
    src = DataDesc(g.batch, g.channels, g.in_h, g.in_w, nchw);
    dst = DataDesc(g.batch, g.out_channels, g.out_h, g.out_w, nchw);
    filter = dnnl::memory::desc(weights_dims, dnnl::memory::data_type::f32, tag::hwio);
    any_weights = dnnl::memory::desc(weights_dims, dnnl::memory::data_type::f32, tag::any);
    strides = {g.stride_h, g.stride_w};
    dilates = {g.dilation_h - 1, g.dilation_w - 1};
    pad_l = {g.pad_top, g.pad_left};
    pad_r = {g.pad_bottom, g.pad_right};
    forward = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src,
                                        any_weights, dst, strides, dilates, pad_l, pad_r),
        Engine());
  }
};

// dx from the filter and dy, for one geometry.
class DnnlConvBackwardData {
 public:
  DnnlConvBackwardData(const Geometry& g, bool nchw) : d_(g, nchw) {
    dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, d_.src, d_.any_weights, d_.dst,
                                              d_.strides, d_.dilates, d_.pad_l, d_.pad_r),
        WithUserScratchpad(), Engine(), d_.forward);
    weights_md_ = pd.weights_desc();
    primitive_ = dnnl::convolution_backward_data(pd);
    if (weights_md_ != d_.filter) {
      reorder_ = MakeReorder(d_.filter, weights_md_);
    }
  }

  void Run(Context& ctx, const void* filter, const void* dy, void* dx) const {
    UseIntraOpThreads();
    dnnl::memory user(d_.filter, Engine(), const_cast<void*>(filter));
    dnnl::memory weights = user;
    if (weights_md_ != d_.filter) {
      weights = TempMemory(ctx, weights_md_);
      Execute(reorder_, user, weights);
    }
    dnnl::memory diff_dst(d_.dst, Engine(), const_cast<void*>(dy));
    dnnl::memory diff_src(d_.src, Engine(), dx);
    Execute(primitive_, {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DIFF_SRC, diff_src}});
  }

 private:
  DnnlConvDescs d_;
  dnnl::memory::desc weights_md_;
  dnnl::convolution_backward_data primitive_;
  dnnl::reorder reorder_;
};

// dfilter from x and dy, for one geometry.
class DnnlConvBackwardWeights {
 public:
  DnnlConvBackwardWeights(const Geometry& g, bool nchw) : d_(g, nchw) {
    dnnl::convolution_backward_weights::primitive_desc pd(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, d_.src, d_.any_weights, d_.dst,
                                                 d_.strides, d_.dilates, d_.pad_l, d_.pad_r),
        WithUserScratchpad(), Engine(), d_.forward);
    weights_md_ = pd.diff_weights_desc();
    primitive_ = dnnl::convolution_backward_weights(pd);
    if (weights_md_ != d_.filter) {
      reorder_ = MakeReorder(weights_md_, d_.filter);
    }
  }

  void Run(Context& ctx, const void* x, const void* dy, void* dfilter) const {
    UseIntraOpThreads();
    dnnl::memory user(d_.filter, Engine(), dfilter);
    dnnl::memory diff_weights = weights_md_ != d_.filter ? TempMemory(ctx, weights_md_) : user;
    dnnl::memory src(d_.src, Engine(), const_cast<void*>(x));
    dnnl::memory diff_dst(d_.dst, Engine(), const_cast<void*>(dy));
    Execute(primitive_, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, diff_weights}});
    if (weights_md_ != d_.filter) Execute(reorder_, diff_weights, user);
  }

 private:
  DnnlConvDescs d_;
  dnnl::memory::desc weights_md_;
  dnnl::convolution_backward_weights primitive_;
  dnnl::reorder reorder_;
};

// --- Convolution backprop, direct loops ------------------------------------------------

// The output position (oh) whose window reads input position |in| with tap
// |k|, or -1 when none does: in = oh * stride - pad + k * dilation.
inline int64_t SourceOf(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation, int64_t out_size) {
  const int64_t t = in + pad - k * dilation;
  if (t < 0 || t % stride != 0) return -1;
  const int64_t o = t / stride;
  return o < out_size ? o : -1;
}

// dx[n, ih, iw, c] = sum over the taps (kh, kw) reading it from an output
// position (oh, ow) of sum_o dy[n, oh, ow, o] * filter[kh, kw, c, o] (or,
// depthwise with multiplier M, sum_m dy[n, oh, ow, c * M + m] *
// filter[kh, kw, c, m]). NHWC data, HWIO filter; one input row per task,
// accumulated in double.
template <class T, bool kDepthwise>
void DirectConvBackpropInput(const Geometry& g, const T* filter, const T* dy, T* dx) {
  const int64_t row_size = g.in_w * g.channels;
  const int64_t inner = kDepthwise ? g.out_channels / std::max<int64_t>(g.channels, 1) : g.out_channels;
  const int64_t cost = std::max<int64_t>(row_size * g.window_h * g.window_w * inner / g.stride_h / g.stride_w, 1);
  ParallelFor(g.batch * g.in_h, cost, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<std::size_t>(row_size));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.in_h, ih = row % g.in_h;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t kh = 0; kh < g.window_h; ++kh) {
        const int64_t oh = SourceOf(ih, kh, g.stride_h, g.pad_top, g.dilation_h, g.out_h);
        if (oh < 0) continue;
        const T* dy_row = dy + (n * g.out_h + oh) * g.out_w * g.out_channels;
        for (int64_t iw = 0; iw < g.in_w; ++iw) {
          double* a = acc.data() + iw * g.channels;
          for (int64_t kw = 0; kw < g.window_w; ++kw) {
            const int64_t ow = SourceOf(iw, kw, g.stride_w, g.pad_left, g.dilation_w, g.out_w);
            if (ow < 0) continue;
            const T* grad = dy_row + ow * g.out_channels;
            const T* taps = filter + (kh * g.window_w + kw) * g.channels * inner;
            for (int64_t c = 0; c < g.channels; ++c) {
              const T* f = taps + c * inner;
              const T* gc = kDepthwise ? grad + c * inner : grad;
              double sum = 0;
              for (int64_t o = 0; o < inner; ++o) sum += static_cast<double>(gc[o]) * static_cast<double>(f[o]);
              a[c] += sum;
            }
          }
        }
      }
      T* out = dx + row * row_size;
      for (int64_t i = 0; i < row_size; ++i) out[i] = static_cast<T>(acc[static_cast<std::size_t>(i)]);
    }
  });
}

// dfilter[kh, kw, c, o] = sum over n, oh, ow of x[n, ih, iw, c] *
// dy[n, oh, ow, o] with ih = oh * stride - pad + kh * dilation (likewise
// iw); depthwise, dfilter[kh, kw, c, m] takes dy[..., c * M + m]. NHWC
// data, HWIO filter; one (tap, input channel) per task, accumulated in
// double.
template <class T, bool kDepthwise>
void DirectConvBackpropFilter(const Geometry& g, const T* x, const T* dy, T* dfilter) {
  const int64_t inner = kDepthwise ? g.out_channels / std::max<int64_t>(g.channels, 1) : g.out_channels;
  const int64_t units = g.window_h * g.window_w * g.channels;
  const int64_t cost = std::max<int64_t>(g.batch * g.out_h * g.out_w * inner, 1);
  ParallelFor(units, cost, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<std::size_t>(inner));
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t c = unit % g.channels, tap = unit / g.channels;
      const int64_t kh = tap / g.window_w, kw = tap % g.window_w;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t oh = 0; oh < g.out_h; ++oh) {
          const int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
          if (ih < 0 || ih >= g.in_h) continue;
          const T* x_row = x + (n * g.in_h + ih) * g.in_w * g.channels + c;
          const T* dy_row = dy + (n * g.out_h + oh) * g.out_w * g.out_channels + (kDepthwise ? c * inner : 0);
          for (int64_t ow = 0; ow < g.out_w; ++ow) {
            const int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
            if (iw < 0 || iw >= g.in_w) continue;
            const double v = static_cast<double>(x_row[iw * g.channels]);
            const T* grad = dy_row + ow * g.out_channels;
            for (int64_t o = 0; o < inner; ++o) acc[static_cast<std::size_t>(o)] += v * static_cast<double>(grad[o]);
          }
        }
      }
      T* out = dfilter + unit * inner;
      for (int64_t o = 0; o < inner; ++o) out[o] = static_cast<T>(acc[static_cast<std::size_t>(o)]);
    }
  });
}

const char* ForwardName(bool depthwise) { return depthwise ? "DepthwiseConv2D" : "Conv2D"; }

template <class T, class Index, bool kDepthwise>
class ConvBackpropInputKernel {
 public:
  explicit ConvBackpropInputKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/true)) {}

  void Compute(Context& ctx) {
    const Tensor sizes = ctx.input(0), filter = ctx.input(1), dy = ctx.input(2);
    const Dims in_dims = ReadSizes<Index>(sizes, "input_sizes");
    const Geometry g = ConvGeometry(attrs_, in_dims, filter.dims, kDepthwise);
    CheckGradShape(
        "out_backprop", dy, g.OutputDims(attrs_.nchw),
        Str(ForwardName(kDepthwise), " of an input ", DimsString(in_dims), " with a filter ", DimsString(filter.dims)));
    Tensor dx = ctx.allocate_output(0, in_dims);
    if (dx.num_elements == 0) return;
    if (dy.num_elements == 0) {  // no output channels: nothing flows back
      std::fill(dx.as<T>(), dx.as<T>() + dx.num_elements, T(0));
      return;
    }
    if constexpr (std::is_same_v<T, float> && !kDepthwise) {
      Dims key = in_dims;
      key.insert(key.end(), filter.dims.begin(), filter.dims.end());
      if (const DnnlConvBackwardData* conv = cache_.Get(key, g, attrs_.nchw)) {
        conv->Run(ctx, filter.data, dy.data, dx.data);
        return;
      }
    }
    const T* grad = ReadNhwc<T>(ctx, dy, attrs_.nchw);
    WriteNhwc<T>(ctx, dx, attrs_.nchw,
                 [&](T* out) { DirectConvBackpropInput<T, kDepthwise>(g, filter.as<T>(), grad, out); });
  }

 private:
  WindowAttrs attrs_;
  PrimitiveCache<DnnlConvBackwardData> cache_;
};

template <class T, class Index, bool kDepthwise>
class ConvBackpropFilterKernel {
 public:
  explicit ConvBackpropFilterKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/true)) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), sizes = ctx.input(1), dy = ctx.input(2);
    const Dims filter_dims = ReadSizes<Index>(sizes, "filter_sizes");
    const Geometry g = ConvGeometry(attrs_, x.dims, filter_dims, kDepthwise);
    CheckGradShape(
        "out_backprop", dy, g.OutputDims(attrs_.nchw),
        Str(ForwardName(kDepthwise), " of an input ", DimsString(x.dims), " with a filter ", DimsString(filter_dims)));
    Tensor df = ctx.allocate_output(0, filter_dims);
    if (df.num_elements == 0) return;
    if (dy.num_elements == 0) {  // an empty batch (or input): an empty sum
      std::fill(df.as<T>(), df.as<T>() + df.num_elements, T(0));
      return;
    }
    if constexpr (std::is_same_v<T, float> && !kDepthwise) {
      Dims key = x.dims;
      key.insert(key.end(), filter_dims.begin(), filter_dims.end());
      if (const DnnlConvBackwardWeights* conv = cache_.Get(key, g, attrs_.nchw)) {
        conv->Run(ctx, x.data, dy.data, df.data);
        return;
      }
    }
    const T* in = ReadNhwc<T>(ctx, x, attrs_.nchw);
    const T* grad = ReadNhwc<T>(ctx, dy, attrs_.nchw);
    DirectConvBackpropFilter<T, kDepthwise>(g, in, grad, df.as<T>());
  }

 private:
  WindowAttrs attrs_;
  PrimitiveCache<DnnlConvBackwardWeights> cache_;
};

// --- Pooling ---------------------------------------------------------------------------

// f32 AvgPoolGrad through oneDNN, for one geometry.
class DnnlAvgPoolBackward {
 public:
  DnnlAvgPoolBackward(const Geometry& g, bool nchw) {
    src_md_ = DataDesc(g.batch, g.channels, g.in_h, g.in_w, nchw);
    dst_md_ = DataDesc(g.batch, g.channels, g.out_h, g.out_w, nchw);
    const dnnl::memory::dims strides = {g.stride_h, g.stride_w}, kernel = {g.window_h, g.window_w};
    const dnnl::memory::dims pad_l = {g.pad_top, g.pad_left}, pad_r = {g.pad_bottom, g.pad_right};
    const auto algorithm = dnnl::algorithm::pooling_avg_exclude_padding;
    dnnl::pooling_forward::primitive_desc forward(
        dnnl::pooling_forward::desc(dnnl::prop_kind::forward_training, algorithm, src_md_, dst_md_, strides, kernel,
                                    pad_l, pad_r),
        Engine());
    primitive_ = dnnl::pooling_backward(dnnl::pooling_backward::primitive_desc(
        dnnl::pooling_backward::desc(algorithm, src_md_, dst_md_, strides, kernel, pad_l, pad_r), WithUserScratchpad(),
        Engine(), forward));
  }

  void Run(const void* dy, void* dx) const {
    UseIntraOpThreads();
    Execute(primitive_, {{DNNL_ARG_DIFF_DST, dnnl::memory(dst_md_, Engine(), const_cast<void*>(dy))},
                         {DNNL_ARG_DIFF_SRC, dnnl::memory(src_md_, Engine(), dx)}});
  }

 private:
  dnnl::memory::desc src_md_, dst_md_;
  dnnl::pooling_backward primitive_;
};

// Channels one pooling task handles, so that a batch of one still spreads
// over the threads.
constexpr int64_t kPoolChannelBlock = 16;

// The pooling gradient over NHWC data: for each window, kMax adds its
// gradient to the first position (row-major, in-bounds only) holding the
// window's largest x; otherwise it spreads it evenly over the window's
// in-bounds positions. One (image, block of channels) per task, so no two
// tasks write the same element.
template <class T, bool kMax>
void DirectPoolGrad(const Geometry& g, const T* x, const T* dy, T* dx) {
  const int64_t blocks = (g.channels + kPoolChannelBlock - 1) / kPoolChannelBlock;
  const int64_t cost =
      std::max<int64_t>(g.out_h * g.out_w * g.window_h * g.window_w * std::min(g.channels, kPoolChannelBlock), 1);
  ParallelFor(g.batch * blocks, cost, [&](int64_t begin, int64_t end) {
    T best[kPoolChannelBlock] = {};
    int64_t where[kPoolChannelBlock] = {};
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t n = unit / blocks, c0 = (unit % blocks) * kPoolChannelBlock;
      const int64_t width = std::min(kPoolChannelBlock, g.channels - c0);
      const T* image = x == nullptr ? nullptr : x + n * g.in_h * g.in_w * g.channels + c0;
      T* out = dx + n * g.in_h * g.in_w * g.channels + c0;
      for (int64_t p = 0; p < g.in_h * g.in_w; ++p) std::fill(out + p * g.channels, out + p * g.channels + width, T(0));
      for (int64_t oh = 0; oh < g.out_h; ++oh) {
        const int64_t h0 = oh * g.stride_h - g.pad_top;
        const int64_t h_begin = std::max<int64_t>(h0, 0), h_end = std::min(h0 + g.window_h, g.in_h);
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          const int64_t w0 = ow * g.stride_w - g.pad_left;
          const int64_t w_begin = std::max<int64_t>(w0, 0), w_end = std::min(w0 + g.window_w, g.in_w);
          const T* grad = dy + ((n * g.out_h + oh) * g.out_w + ow) * g.channels + c0;
          if constexpr (kMax) {
            std::fill(where, where + width, int64_t{-1});
            for (int64_t ih = h_begin; ih < h_end; ++ih) {
              for (int64_t iw = w_begin; iw < w_end; ++iw) {
                const int64_t p = ih * g.in_w + iw;
                const T* pixel = image + p * g.channels;
                for (int64_t c = 0; c < width; ++c) {
                  if (where[c] < 0 || pixel[c] > best[c]) {
                    best[c] = pixel[c];
                    where[c] = p;
                  }
                }
              }
            }
            for (int64_t c = 0; c < width; ++c) {
              if (where[c] >= 0) out[where[c] * g.channels + c] += grad[c];
            }
          } else {
            const T count = static_cast<T>((h_end - h_begin) * (w_end - w_begin));
            for (int64_t ih = h_begin; ih < h_end; ++ih) {
              for (int64_t iw = w_begin; iw < w_end; ++iw) {
                T* target = out + (ih * g.in_w + iw) * g.channels;
                for (int64_t c = 0; c < width; ++c) target[c] += grad[c] / count;
              }
            }
          }
        }
      }
    }
  });
}

// MaxPoolGrad when no two windows share an input element (stride >= window
// in both dimensions, as in the usual 2x2 pooling with stride 2), with the
// same result as DirectPoolGrad: each output row owns a band of input rows
// (its windows' rows and any rows no window reaches before the next one),
// which one task zeroes and then fills window by window, so no element is
// written by two tasks and the tasks are as many as the output rows. Per
// window, a block of channels finds its first maximum in one pass over the
// window's positions and writes the gradient in a second, both along the
// contiguous channels.
template <class T>
void MaxPoolGradDisjoint(const Geometry& g, const T* x, const T* dy, T* dx) {
  constexpr int64_t kBlock = 64;
  const int64_t row_size = g.in_w * g.channels;
  const int64_t cost = std::max<int64_t>(g.stride_h * row_size * 2, 1);
  ParallelFor(g.batch * g.out_h, cost, [&](int64_t begin, int64_t end) {
    T best[kBlock], rest[kBlock];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / g.out_h, oh = task % g.out_h;
      const int64_t h0 = oh * g.stride_h - g.pad_top;
      const int64_t band_begin = oh == 0 ? 0 : std::clamp<int64_t>(h0, 0, g.in_h);
      const int64_t band_end = oh + 1 == g.out_h ? g.in_h : std::clamp<int64_t>(h0 + g.stride_h, 0, g.in_h);
      const T* image = x + n * g.in_h * row_size;
      T* out = dx + n * g.in_h * row_size;
      std::fill(out + band_begin * row_size, out + band_end * row_size, T(0));
      const int64_t h_begin = std::max<int64_t>(h0, 0), h_end = std::min(h0 + g.window_h, g.in_h);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const int64_t w0 = ow * g.stride_w - g.pad_left;
        const int64_t w_begin = std::max<int64_t>(w0, 0), w_end = std::min(w0 + g.window_w, g.in_w);
        if (h_begin >= h_end || w_begin >= w_end) continue;
        const T* grad = dy + ((n * g.out_h + oh) * g.out_w + ow) * g.channels;
        for (int64_t c0 = 0; c0 < g.channels; c0 += kBlock) {
          const int64_t width = std::min(kBlock, g.channels - c0);
          // The first maximum in row-major order, as DirectPoolGrad finds
          // it (a later element replaces it only when larger), in two
          // branch-free passes: the maximum (a later element replaces it
          // only when larger, so a NaN stays only when it comes first),
          // then the first
          // element equal to it, or the first element when that is a NaN.
          // |rest| holds the gradient until an element has taken it.
          const T* first = image + (h_begin * g.in_w + w_begin) * g.channels + c0;
          for (int64_t c = 0; c < width; ++c) best[c] = first[c];
          for (int64_t ih = h_begin; ih < h_end; ++ih) {
            for (int64_t iw = w_begin; iw < w_end; ++iw) {
              const T* pixel = image + (ih * g.in_w + iw) * g.channels + c0;
              for (int64_t c = 0; c < width; ++c) {
                const T b = best[c], v = pixel[c];
                best[c] = b < v ? v : b;
              }
            }
          }
          for (int64_t c = 0; c < width; ++c) rest[c] = grad[c0 + c];
          for (int64_t ih = h_begin; ih < h_end; ++ih) {
            for (int64_t iw = w_begin; iw < w_end; ++iw) {
              const int64_t offset = (ih * g.in_w + iw) * g.channels + c0;
              const T* pixel = image + offset;
              T* target = out + offset;
              const bool at_first = pixel == first;
              for (int64_t c = 0; c < width; ++c) {
                const T v = pixel[c], r = rest[c];
                const bool hit = (v == best[c]) | (at_first & (v != v));
                target[c] += hit ? r : T(0);
                rest[c] = hit ? T(0) : r;
              }
            }
          }
        }
      }
    }
  });
}

template <class T>
class MaxPoolGradKernel {
 public:
  explicit MaxPoolGradKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/false)) {
    std::tie(window_h_, window_w_) = SpatialAttr(init, "ksize", attrs_.nchw);
  }

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0), y = ctx.input(1), dy = ctx.input(2);
    const Geometry g = PoolGeometry(attrs_, x.dims, window_h_, window_w_);
    const std::string because = Str("MaxPool of orig_input ", DimsString(x.dims));
    CheckGradShape("orig_output", y, g.OutputDims(attrs_.nchw), because);
    CheckGradShape("grad", dy, g.OutputDims(attrs_.nchw), because);
    Tensor dx = ctx.allocate_output(0, x.dims);
    if (dx.num_elements == 0) return;
    const Geometry nhwc = attrs_.nchw ? g.PlanesAsImages() : g;
    if (g.stride_h >= g.window_h && g.stride_w >= g.window_w) {
      MaxPoolGradDisjoint<T>(nhwc, x.as<T>(), dy.as<T>(), dx.as<T>());
    } else {
      DirectPoolGrad<T, true>(nhwc, x.as<T>(), dy.as<T>(), dx.as<T>());
    }
  }

 private:
  WindowAttrs attrs_;
  int64_t window_h_ = 1, window_w_ = 1;
};

template <class T, class Index>
class AvgPoolGradKernel {
 public:
  explicit AvgPoolGradKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/false)) {
    std::tie(window_h_, window_w_) = SpatialAttr(init, "ksize", attrs_.nchw);
  }

  void Compute(Context& ctx) {
    const Tensor sizes = ctx.input(0), dy = ctx.input(1);
    const Dims in_dims = ReadSizes<Index>(sizes, "orig_input_shape");
    const Geometry g = PoolGeometry(attrs_, in_dims, window_h_, window_w_);
    CheckGradShape("grad", dy, g.OutputDims(attrs_.nchw), Str("AvgPool of an input ", DimsString(in_dims)));
    Tensor dx = ctx.allocate_output(0, in_dims);
    if (dx.num_elements == 0) return;
    if constexpr (std::is_same_v<T, float>) {
      if (const DnnlAvgPoolBackward* pool = cache_.Get(in_dims, g, attrs_.nchw)) {
        pool->Run(dy.data, dx.data);
        return;
      }
    }
    DirectPoolGrad<T, false>(attrs_.nchw ? g.PlanesAsImages() : g, nullptr, dy.as<T>(), dx.as<T>());
  }

 private:
  WindowAttrs attrs_;
  int64_t window_h_ = 1, window_w_ = 1;
  PrimitiveCache<DnnlAvgPoolBackward> cache_;
};

}  // namespace

void RegisterNnConvGradKernels(KernelRegistry& r) {
  auto add = [&r]<class T, class Index>() {
    const std::pair<const char*, weft_dtype_t> t = {"T", DtypeOf<T>()}, shape = {"Tshape", DtypeOf<Index>()};
    r.Add<ConvBackpropInputKernel<T, Index, false>>("Conv2DBackpropInput", {t, shape}, 0, {"input_sizes"});
    r.Add<ConvBackpropFilterKernel<T, Index, false>>("Conv2DBackpropFilter", {t, shape}, 0, {"filter_sizes"});
    r.Add<ConvBackpropInputKernel<T, Index, true>>("DepthwiseConv2DBackpropInput", {t, shape}, 0, {"input_sizes"});
    r.Add<ConvBackpropFilterKernel<T, Index, true>>("DepthwiseConv2DBackpropFilter", {t, shape}, 0, {"filter_sizes"});
    r.Add<AvgPoolGradKernel<T, Index>>("AvgPoolGrad", {t, shape}, 0, {"orig_input_shape"});
  };
  add.template operator()<float, int32_t>();
  add.template operator()<float, int64_t>();
  add.template operator()<double, int32_t>();
  add.template operator()<double, int64_t>();
  r.Add<MaxPoolGradKernel<float>>("MaxPoolGrad", {{"T", WEFT_DTYPE_F32}});
  r.Add<MaxPoolGradKernel<double>>("MaxPoolGrad", {{"T", WEFT_DTYPE_F64}});
}

}  // namespace weft::cpu
