// Convolution and pooling kernels, with TensorFlow's semantics:
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
#include "direct_pool.h"
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
    primitive_ = dnnl::pooling_forward(dnnl::pooling_forward::primitive_desc(desc, WithUserScratchpad(), Engine()));
  }

  void Run(const void* input, void* output) const {
    UseIntraOpThreads();
    Execute(primitive_, {{DNNL_ARG_SRC, dnnl::memory(src_md_, Engine(), const_cast<void*>(input))},
                         {DNNL_ARG_DST, dnnl::memory(dst_md_, Engine(), output)}});
  }

 private:
  dnnl::memory::desc src_md_, dst_md_;
  dnnl::pooling_forward primitive_;
};

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
  RegisterBiasAddKernels(r);
}

}  // namespace weft::cpu
