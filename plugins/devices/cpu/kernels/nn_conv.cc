// Convolution, pooling and BiasAdd kernels, with TensorFlow's semantics:
// NHWC or NCHW data, strides/dilations/ksize in data_format order, SAME
// padding split with the odd element after, AvgPool over the in-bounds
// elements only.
//
// f32 Conv2D, DepthwiseConv2D (a grouped convolution), MaxPool and AvgPool
// go to oneDNN with the data in its own layout (nhwc or nchw tags, so src
// and dst need no reorder), primitives cached per input shape in the
// kernel; the convolutions let oneDNN pick the weights' layout
// (conv_util.h). f64 and any shape oneDNN declines use direct loops over
// NHWC, NCHW data being transposed around them (or, for pooling, viewed as
// [N*C, H, W, 1]).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <type_traits>

#include "../kernel_framework.h"
#include "conv_util.h"
#include "dnnl_util.h"
#include "kernel_util.h"
#include "vector_math.h"
#include "window.h"

namespace weft::cpu {
namespace {

// --- Convolution -----------------------------------------------------------------------

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
      if (DnnlConvolution* conv = cache_.Get(key, g, attrs_.nchw, /*depthwise=*/false, Epilogue{})) {
        conv->Run(ctx, input.data, filter.data, nullptr, nullptr, output.data, output.num_elements,
                  /*constant_filter=*/false);
        return;
      }
    }
    const T* in = ReadNhwc<T>(ctx, input, attrs_.nchw);
    WriteNhwc<T>(ctx, output, attrs_.nchw, [&](T* out) { DirectConv<T, false>(g, in, filter.as<T>(), out); });
  }

 private:
  WindowAttrs attrs_;
  PrimitiveCache<DnnlConvolution> cache_;
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
    if constexpr (std::is_same_v<T, float>) {
      Dims key = input.dims;
      key.insert(key.end(), filter.dims.begin(), filter.dims.end());
      DnnlConvolution* conv =
          g.channels > 0 ? cache_.Get(key, g, attrs_.nchw, /*depthwise=*/true, Epilogue{}) : nullptr;
      if (conv != nullptr) {
        conv->Run(ctx, input.data, filter.data, nullptr, nullptr, output.data, output.num_elements,
                  /*constant_filter=*/false);
        return;
      }
    }
    const T* in = ReadNhwc<T>(ctx, input, attrs_.nchw);
    WriteNhwc<T>(ctx, output, attrs_.nchw, [&](T* out) { DirectConv<T, true>(g, in, filter.as<T>(), out); });
  }

 private:
  WindowAttrs attrs_;
  PrimitiveCache<DnnlConvolution> cache_;
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
      const bool has_nan = kMax && usual && Any(input, [](const float* x, int64_t n) { return AnyNan(x, n); });
      if (const DnnlPool<kMax>* pool = usual && !has_nan ? cache_.Get(input.dims, g, attrs_.nchw) : nullptr) {
        pool->Run(input.data, output.data);
        // oneDNN's max starts from the lowest finite float, so a window of
        // -inf comes out as -3.4e38; such outputs (rare) are redone by the
        // direct loops, which start from -inf.
        constexpr float kLowest = std::numeric_limits<float>::lowest();
        if (!kMax || !Any(output, [](const float* x, int64_t n) { return AnyEqual(x, n, kLowest); })) return;
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
  explicit BiasAddKernel(const InitContext& init) : nchw_(sdk::IsNchw(init)) {}

  void Compute(Context& ctx) {
    const Tensor value = ctx.input(0), bias = ctx.input(1);
    // value is [outer, channels, inner].
    const sdk::ChannelLayout layout = sdk::CheckBiasAdd(value, bias, nchw_);
    const int64_t outer = layout.outer, channels = layout.channels, inner = layout.inner;
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
