// Convolution, pooling and BiasAdd kernels, with TensorFlow's semantics:
// NHWC or NCHW data, strides/dilations/ksize in data_format order, SAME
// padding split with the odd element after, AvgPool over the in-bounds
// elements only.
//
// f32 Conv2D, MaxPool and AvgPool go to oneDNN with the data in its own
// layout (nhwc or nchw tags, so src and dst need no reorder), primitives
// cached per input shape in the kernel. Conv2D lets oneDNN pick the
// weights' layout (plain HWIO weights would send it to a gemm-based
// implementation two to three times slower) and keeps the reordered filter
// for as long as the filter's bytes do not change. f64, DepthwiseConv2D
// and any shape oneDNN declines use direct loops over NHWC, NCHW data
// being transposed around them (or, for pooling, viewed as [N*C, H, W, 1]).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

#include "../kernel_framework.h"
#include "dnnl_util.h"
#include "kernel_util.h"
#include "window.h"

namespace weft::cpu {
namespace {

// --- Convolution -----------------------------------------------------------------------

// An f32 oneDNN convolution for one geometry, created once. oneDNN picks
// the weights' layout; the HWIO filter reordered into it is kept with a
// copy of the bytes it came from and reused while the filter's bytes are
// unchanged (a comparison costs less than a reorder, which is a parallel
// region of its own).
class DnnlConv {
 public:
  DnnlConv(const Geometry& g, bool nchw) {
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::dims weights_dims = {g.out_channels, g.channels, g.window_h, g.window_w};
    src_md_ = DataDesc(g.batch, g.channels, g.in_h, g.in_w, nchw);
    dst_md_ = DataDesc(g.batch, g.out_channels, g.out_h, g.out_w, nchw);
    filter_md_ = dnnl::memory::desc(weights_dims, dnnl::memory::data_type::f32, tag::hwio);
    const dnnl::memory::desc any_weights(weights_dims, dnnl::memory::data_type::f32, tag::any);
    auto desc = dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                                src_md_, any_weights, dst_md_, {g.stride_h, g.stride_w},
                                                {g.dilation_h - 1, g.dilation_w - 1}, {g.pad_top, g.pad_left},
                                                {g.pad_bottom, g.pad_right});
    dnnl::convolution_forward::primitive_desc pd(desc, Engine());
    weights_md_ = pd.weights_desc();
    primitive_ = dnnl::convolution_forward(pd);
    if (weights_md_ != filter_md_) {
      reorder_ = dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), filter_md_, Engine(), weights_md_));
    }
  }

  void Run(const void* input, const void* filter, void* output) {
    UseIntraOpThreads();
    dnnl::stream& stream = Stream();
    dnnl::memory src(src_md_, Engine(), const_cast<void*>(input));
    dnnl::memory dst(dst_md_, Engine(), output);
    if (weights_md_ == filter_md_) {
      dnnl::memory weights(filter_md_, Engine(), const_cast<void*>(filter));
      primitive_.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    } else {
      const std::shared_ptr<const Reordered> weights = Weights(filter, stream);
      primitive_.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights->weights}, {DNNL_ARG_DST, dst}});
    }
    stream.wait();
  }

 private:
  struct Reordered {
    std::vector<unsigned char> filter;  // the HWIO bytes |weights| came from
    dnnl::memory weights;
  };

  // The reordered weights of |filter|, from the last call when its bytes
  // have not changed. Shared so a concurrent call may replace them while
  // this one still runs with them.
  std::shared_ptr<const Reordered> Weights(const void* filter, dnnl::stream& stream) {
    const auto* bytes = static_cast<const unsigned char*>(filter);
    const std::size_t size = filter_md_.get_size();
    std::lock_guard<std::mutex> lock(mutex_);
    if (reordered_ == nullptr || std::memcmp(reordered_->filter.data(), bytes, size) != 0) {
      auto fresh = std::make_shared<Reordered>();
      fresh->filter.assign(bytes, bytes + size);
      fresh->weights = dnnl::memory(weights_md_, Engine());
      dnnl::memory user(filter_md_, Engine(), fresh->filter.data());
      reorder_.execute(stream, user, fresh->weights);
      stream.wait();
      reordered_ = std::move(fresh);
    }
    return reordered_;
  }

  dnnl::memory::desc src_md_, dst_md_, filter_md_, weights_md_;
  dnnl::convolution_forward primitive_;
  dnnl::reorder reorder_;
  std::mutex mutex_;
  std::shared_ptr<const Reordered> reordered_;
};

// out[n, oh, ow, o] = sum over (kh, kw, c) of in[n, ih, iw, c] * filter[kh, kw, c, o]
// with ih = oh * stride - pad + kh * dilation (likewise iw), for NHWC data and
// an HWIO filter; depthwise with multiplier M, out[n, oh, ow, c * M + m] =
// sum over (kh, kw) of in[n, ih, iw, c] * filter[kh, kw, c, m]. One output
// row per task; the innermost loop runs along the contiguous output
// channels.
template <class T, bool kDepthwise>
void DirectConv(const Geometry& g, const T* input, const T* filter, T* output) {
  const int64_t row_size = g.out_w * g.out_channels;
  const int64_t multiplier = kDepthwise ? g.out_channels / std::max<int64_t>(g.channels, 1) : 0;
  const int64_t tap_size = kDepthwise ? g.out_channels : g.channels * g.out_channels;  // filter elements per tap
  const int64_t cost = std::max<int64_t>(row_size * g.window_h * g.window_w * (kDepthwise ? 1 : g.channels) / 4, 1);
  ParallelFor(g.batch * g.out_h, cost, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.out_h, oh = row % g.out_h;
      T* out_row = output + row * row_size;
      std::fill(out_row, out_row + row_size, T(0));
      for (int64_t kh = 0; kh < g.window_h; ++kh) {
        const int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dilation_h;
        if (ih < 0 || ih >= g.in_h) continue;
        const T* in_row = input + (n * g.in_h + ih) * g.in_w * g.channels;
        for (int64_t ow = 0; ow < g.out_w; ++ow) {
          T* acc = out_row + ow * g.out_channels;
          for (int64_t kw = 0; kw < g.window_w; ++kw) {
            const int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dilation_w;
            if (iw < 0 || iw >= g.in_w) continue;
            const T* pixel = in_row + iw * g.channels;
            const T* taps = filter + (kh * g.window_w + kw) * tap_size;
            if constexpr (!kDepthwise) {
              for (int64_t c = 0; c < g.channels; ++c) {
                const T x = pixel[c];
                const T* f = taps + c * g.out_channels;
                for (int64_t o = 0; o < g.out_channels; ++o) acc[o] += x * f[o];
              }
            } else if (multiplier == 1) {
              for (int64_t c = 0; c < g.channels; ++c) acc[c] += pixel[c] * taps[c];
            } else {
              for (int64_t c = 0; c < g.channels; ++c) {
                const T x = pixel[c];
                for (int64_t m = 0; m < multiplier; ++m) acc[c * multiplier + m] += x * taps[c * multiplier + m];
              }
            }
          }
        }
      }
    }
  });
}

template <class T>
class Conv2DKernel {
 public:
  explicit Conv2DKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/true)) {}

  void Compute(Context& ctx) {
    const Tensor input = ctx.input(0), filter = ctx.input(1);
    const Geometry g = ConvGeometry(attrs_, input.dims, filter.dims, /*depthwise=*/false);
    Tensor output = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    if (output.num_elements == 0) return;
    if (g.channels == 0) {  // an empty sum
      std::fill(output.as<T>(), output.as<T>() + output.num_elements, T(0));
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      Dims key = input.dims;
      key.insert(key.end(), filter.dims.begin(), filter.dims.end());
      if (DnnlConv* conv = cache_.Get(key, g, attrs_.nchw)) {
        conv->Run(input.data, filter.data, output.data);
        return;
      }
    }
    const T* in = ReadNhwc<T>(ctx, input, attrs_.nchw);
    WriteNhwc<T>(ctx, output, attrs_.nchw, [&](T* out) { DirectConv<T, false>(g, in, filter.as<T>(), out); });
  }

 private:
  WindowAttrs attrs_;
  PrimitiveCache<DnnlConv> cache_;
};

template <class T>
class DepthwiseConv2DKernel {
 public:
  explicit DepthwiseConv2DKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/true)) {}

  void Compute(Context& ctx) {
    const Tensor input = ctx.input(0), filter = ctx.input(1);
    const Geometry g = ConvGeometry(attrs_, input.dims, filter.dims, /*depthwise=*/true);
    Tensor output = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    if (output.num_elements == 0) return;
    const T* in = ReadNhwc<T>(ctx, input, attrs_.nchw);
    WriteNhwc<T>(ctx, output, attrs_.nchw, [&](T* out) { DirectConv<T, true>(g, in, filter.as<T>(), out); });
  }

 private:
  WindowAttrs attrs_;
};

// --- Pooling ---------------------------------------------------------------------------

// An f32 oneDNN pooling for one geometry, created once.
template <bool kMax>
class DnnlPool {
 public:
  DnnlPool(const Geometry& g, bool nchw) {
    src_md_ = DataDesc(g.batch, g.channels, g.in_h, g.in_w, nchw);
    dst_md_ = DataDesc(g.batch, g.channels, g.out_h, g.out_w, nchw);
    auto desc = dnnl::pooling_forward::desc(
        dnnl::prop_kind::forward_inference,
        kMax ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding, src_md_, dst_md_,
        {g.stride_h, g.stride_w}, {g.window_h, g.window_w}, {g.pad_top, g.pad_left}, {g.pad_bottom, g.pad_right});
    primitive_ = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(desc, Engine()));
  }

  void Run(const void* input, void* output) const {
    UseIntraOpThreads();
    dnnl::stream& stream = Stream();
    dnnl::memory src(src_md_, Engine(), const_cast<void*>(input));
    dnnl::memory dst(dst_md_, Engine(), output);
    primitive_.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    stream.wait();
  }

 private:
  dnnl::memory::desc src_md_, dst_md_;
  dnnl::pooling_forward primitive_;
};

// Max or average over each window of NHWC data; the average is over the
// window's in-bounds elements (SAME windows always hold at least one).
template <class T, bool kMax>
void DirectPool(const Geometry& g, const T* input, T* output) {
  const int64_t row_size = g.out_w * g.channels;
  // Windows are clipped to the input, so a window never costs more than it.
  const int64_t cost = std::max<int64_t>(row_size * std::min(g.window_h, g.in_h) * std::min(g.window_w, g.in_w) / 4, 1);
  // The end of a window starting at |start|, clipped to |in| (a window may
  // be far larger than the input; start + window could overflow).
  auto clipped_end = [](int64_t start, int64_t window, int64_t in) {
    return window >= in - start ? in : start + window;
  };
  ParallelFor(g.batch * g.out_h, cost, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / g.out_h, oh = row % g.out_h;
      const int64_t h0 = oh * g.stride_h - g.pad_top;
      const int64_t h_begin = std::max<int64_t>(h0, 0), h_end = clipped_end(h0, g.window_h, g.in_h);
      for (int64_t ow = 0; ow < g.out_w; ++ow) {
        const int64_t w0 = ow * g.stride_w - g.pad_left;
        const int64_t w_begin = std::max<int64_t>(w0, 0), w_end = clipped_end(w0, g.window_w, g.in_w);
        T* acc = output + row * row_size + ow * g.channels;
        std::fill(acc, acc + g.channels, kMax ? -std::numeric_limits<T>::infinity() : T(0));
        for (int64_t ih = h_begin; ih < h_end; ++ih) {
          for (int64_t iw = w_begin; iw < w_end; ++iw) {
            const T* pixel = input + ((n * g.in_h + ih) * g.in_w + iw) * g.channels;
            for (int64_t c = 0; c < g.channels; ++c) {
              if constexpr (kMax) {
                // NaN wins, as NumPy's max: once acc is NaN no comparison replaces it.
                if (pixel[c] > acc[c] || pixel[c] != pixel[c]) acc[c] = pixel[c];
              } else {
                acc[c] += pixel[c];
              }
            }
          }
        }
        if constexpr (!kMax) {
          const T count = static_cast<T>((h_end - h_begin) * (w_end - w_begin));
          for (int64_t c = 0; c < g.channels; ++c) acc[c] /= count;
        }
      }
    }
  });
}

template <class T, bool kMax>
class PoolKernel {
 public:
  explicit PoolKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/false)) {
    std::tie(window_h_, window_w_) = SpatialAttr(init, "ksize", attrs_.nchw);
  }

  void Compute(Context& ctx) {
    const Tensor input = ctx.input(0);
    const Geometry g = PoolGeometry(attrs_, input.dims, window_h_, window_w_);
    Tensor output = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    if (output.num_elements == 0) return;
    // oneDNN for the usual windows; one larger than the input (SAME) or a
    // stride past it goes to the direct loops, which clip each window.
    const bool usual = g.window_h <= g.in_h && g.window_w <= g.in_w && g.stride_h <= g.in_h && g.stride_w <= g.in_w;
    if constexpr (std::is_same_v<T, float>) {
      // oneDNN's max may drop a NaN; an input with one goes to the direct
      // loops, where NaN wins (a NaN average needs nothing: sums keep it).
      bool has_nan = false;
      if constexpr (kMax) {
        const float* in = input.as<float>();
        for (int64_t i = 0; i < input.num_elements; ++i) has_nan |= in[i] != in[i];
      }
      if (const DnnlPool<kMax>* pool = usual && !has_nan ? cache_.Get(input.dims, g, attrs_.nchw) : nullptr) {
        pool->Run(input.data, output.data);
        // oneDNN's max starts from the lowest finite float, so a window of
        // -inf comes out as -3.4e38; such outputs (rare) are redone by the
        // direct loops, which start from -inf.
        const float* out = output.as<float>();
        if (!kMax || std::find(out, out + output.num_elements, std::numeric_limits<float>::lowest()) ==
                         out + output.num_elements) {
          return;
        }
      }
    }
    DirectPool<T, kMax>(attrs_.nchw ? g.PlanesAsImages() : g, input.as<T>(), output.as<T>());
  }

 private:
  WindowAttrs attrs_;
  int64_t window_h_ = 1, window_w_ = 1;
  PrimitiveCache<DnnlPool<kMax>> cache_;
};

// --- BiasAdd ---------------------------------------------------------------------------

// a + b; integers wrap (through the unsigned type), 16-bit floats add in float.
template <class T>
T AddBias(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return StoreAs<T>(Load(a) + Load(b));
  }
}

template <class T>
class BiasAddKernel {
 public:
  explicit BiasAddKernel(const InitContext& init) : nchw_(init.String("data_format") == "NCHW") {}

  void Compute(Context& ctx) {
    const Tensor value = ctx.input(0), bias = ctx.input(1);
    if (value.rank() < 2) Fail("value must have rank >= 2, got ", DimsString(value.dims));
    if (bias.rank() != 1) Fail("bias must be 1-D, got ", DimsString(bias.dims));
    const int axis = nchw_ ? 1 : value.rank() - 1;
    const int64_t channels = value.dim(axis);
    if (bias.dim(0) != channels) {
      Fail("bias has ", bias.dim(0), " elements but value has ", channels, " channels (", DimsString(value.dims), ", ",
           nchw_ ? "NCHW" : "NHWC", ")");
    }
    // value is [outer, channels, inner].
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= value.dim(i);
    for (int i = axis + 1; i < value.rank(); ++i) inner *= value.dim(i);
    Tensor output = ctx.allocate_output(0, value.dims);
    const T* in = value.as<T>();
    const T* b = bias.as<T>();
    T* out = output.as<T>();
    if (inner == 1) {
      ParallelFor(outer, channels, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          for (int64_t c = 0; c < channels; ++c) out[i * channels + c] = AddBias(in[i * channels + c], b[c]);
        }
      });
    } else {
      ParallelFor(outer * channels, inner, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const T bc = b[row % channels];
          for (int64_t i = row * inner; i < (row + 1) * inner; ++i) out[i] = AddBias(in[i], bc);
        }
      });
    }
  }

 private:
  bool nchw_;
};

}  // namespace

void RegisterNnConvKernels(KernelRegistry& r) {
  auto add_float = [&r]<class T>() {
    r.Add<Conv2DKernel<T>>("Conv2D", {{"T", DtypeOf<T>()}});
    r.Add<DepthwiseConv2DKernel<T>>("DepthwiseConv2D", {{"T", DtypeOf<T>()}});
    r.Add<PoolKernel<T, true>>("MaxPool", {{"T", DtypeOf<T>()}});
    r.Add<PoolKernel<T, false>>("AvgPool", {{"T", DtypeOf<T>()}});
  };
  add_float.template operator()<float>();
  add_float.template operator()<double>();
  ForEachNumericType([&r]<class T>() { r.Add<BiasAddKernel<T>>("BiasAdd", {{"T", DtypeOf<T>()}}); });
}

}  // namespace weft::cpu
