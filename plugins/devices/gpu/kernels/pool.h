// MaxPool, AvgPool and their gradients (core/ops/nn_ops.cc,
// nn_grad_ops.cc) for the cuda and hip plugins.
//
// These are direct kernels rather than cuDNN's: TensorFlow's SAME padding
// is asymmetric when the total is odd (cuDNN pads both sides alike), and
// MaxPoolGrad must send each window's gradient to the first maximum in
// row-major order, a tie rule cuDNN does not promise; ties are common after
// a ReLU. The gradients gather (a thread per input element sums over the
// windows that cover it), so no atomics are needed and the results do not
// depend on scheduling.
//
// Device code: included by plugins/devices/cuda/pool.cu and
// plugins/devices/hip/pool.hip.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_POOL_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_POOL_H_

#include "gpu/device_compat.h"
#include "gpu/window.h"

namespace weft::gpu {
namespace {

// What a kernel needs of a Geometry, with the layout.
struct PoolShape {
  int64_t batch, in_h, in_w, channels, out_h, out_w;
  int64_t window_h, window_w, stride_h, stride_w, pad_top, pad_left;
  bool nchw;
};

PoolShape ShapeOf(const Geometry& g, bool nchw) {
  return PoolShape{g.batch,    g.in_h,     g.in_w,     g.channels, g.out_h,    g.out_w, g.window_h,
                   g.window_w, g.stride_h, g.stride_w, g.pad_top,  g.pad_left, nchw};
}

__device__ inline int64_t At(const PoolShape& s, int64_t n, int64_t h, int64_t w, int64_t c, int64_t height,
                             int64_t width) {
  return s.nchw ? ((n * s.channels + c) * height + h) * width + w : ((n * height + h) * width + w) * s.channels + c;
}

// Splits a linear index over (n, h, w, c) in the layout into coordinates.
__device__ inline void Coordinates(const PoolShape& s, int64_t i, int64_t height, int64_t width, int64_t* n, int64_t* h,
                                   int64_t* w, int64_t* c) {
  if (s.nchw) {
    *w = i % width;
    i /= width;
    *h = i % height;
    i /= height;
    *c = i % s.channels;
    *n = i / s.channels;
  } else {
    *c = i % s.channels;
    i /= s.channels;
    *w = i % width;
    i /= width;
    *h = i % height;
    *n = i / height;
  }
}

// The window of output (oh, ow), clipped to the input: rows [h0, h1),
// columns [w0, w1).
struct Box {
  int64_t h0, h1, w0, w1;
};
__device__ inline Box WindowOf(const PoolShape& s, int64_t oh, int64_t ow) {
  const int64_t top = oh * s.stride_h - s.pad_top, left = ow * s.stride_w - s.pad_left;
  Box b;
  b.h0 = top < 0 ? 0 : top;
  b.w0 = left < 0 ? 0 : left;
  b.h1 = top + s.window_h < s.in_h ? top + s.window_h : s.in_h;
  b.w1 = left + s.window_w < s.in_w ? left + s.window_w : s.in_w;
  return b;
}

// The position (h * in_w + w) of the first maximum of a window, in
// row-major order, padding excluded.
template <class T>
__device__ inline int64_t ArgMaxOf(const PoolShape& s, const T* in, int64_t n, int64_t c, const Box& b) {
  int64_t best = b.h0 * s.in_w + b.w0;
  T best_value = in[At(s, n, b.h0, b.w0, c, s.in_h, s.in_w)];
  for (int64_t h = b.h0; h < b.h1; ++h) {
    for (int64_t w = b.w0; w < b.w1; ++w) {
      const T v = in[At(s, n, h, w, c, s.in_h, s.in_w)];
      if (v > best_value) {
        best_value = v;
        best = h * s.in_w + w;
      }
    }
  }
  return best;
}

template <class T, bool kMax>
__global__ void PoolForward(const T* in, T* out, PoolShape s, int64_t total) {
  for (int64_t i = GlobalIndex(); i < total; i += GlobalStride()) {
    int64_t n, oh, ow, c;
    Coordinates(s, i, s.out_h, s.out_w, &n, &oh, &ow, &c);
    const Box b = WindowOf(s, oh, ow);
    T acc = kMax ? in[At(s, n, b.h0, b.w0, c, s.in_h, s.in_w)] : T(0);
    for (int64_t h = b.h0; h < b.h1; ++h) {
      for (int64_t w = b.w0; w < b.w1; ++w) {
        const T v = in[At(s, n, h, w, c, s.in_h, s.in_w)];
        if (kMax) {
          acc = v > acc ? v : acc;
        } else {
          acc += v;
        }
      }
    }
    out[i] = kMax ? acc : acc / static_cast<T>((b.h1 - b.h0) * (b.w1 - b.w0));
  }
}

// The outputs whose windows cover input row |h|: [*first, *last].
__device__ inline void Covering(int64_t h, int64_t pad, int64_t window, int64_t stride, int64_t outs, int64_t* first,
                                int64_t* last) {
  // Output o covers rows [o * stride - pad, o * stride - pad + window).
  const int64_t hp = h + pad;
  const int64_t lo = hp - window + 1;
  *first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  *last = hp / stride < outs - 1 ? hp / stride : outs - 1;
}

template <class T, bool kMax>
__global__ void PoolBackward(const T* orig_in, const T* grad, T* out, PoolShape s, int64_t total) {
  for (int64_t i = GlobalIndex(); i < total; i += GlobalStride()) {
    int64_t n, h, w, c;
    Coordinates(s, i, s.in_h, s.in_w, &n, &h, &w, &c);
    int64_t oh0, oh1, ow0, ow1;
    Covering(h, s.pad_top, s.window_h, s.stride_h, s.out_h, &oh0, &oh1);
    Covering(w, s.pad_left, s.window_w, s.stride_w, s.out_w, &ow0, &ow1);
    T sum = T(0);
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const Box b = WindowOf(s, oh, ow);
        const T g = grad[At(s, n, oh, ow, c, s.out_h, s.out_w)];
        if (kMax) {
          if (ArgMaxOf(s, orig_in, n, c, b) == h * s.in_w + w) sum += g;
        } else {
          sum += g / static_cast<T>((b.h1 - b.h0) * (b.w1 - b.w0));
        }
      }
    }
    out[i] = sum;
  }
}

template <class T, bool kMax>
class PoolKernel {
 public:
  explicit PoolKernel(const InitContext& init) : attrs_(ReadWindowAttrs(init, /*dilations=*/false, /*ksize=*/true)) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Geometry g = PoolGeometry(attrs_, x.dims);
    const Tensor y = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
    if (y.num_elements == 0) return;
    PoolForward<T, kMax><<<GridFor(y.num_elements), kBlock, 0, ctx.stream()>>>(x.as<const T>(), y.as<T>(),
                                                                               ShapeOf(g, attrs_.nchw), y.num_elements);
    CheckLaunch(kMax ? "MaxPool" : "AvgPool");
  }

 private:
  WindowAttrs attrs_;
};

template <class T>
class MaxPoolGradKernel {
 public:
  explicit MaxPoolGradKernel(const InitContext& init)
      : attrs_(ReadWindowAttrs(init, /*dilations=*/false, /*ksize=*/true)) {}
  void Compute(Context& ctx) {
    const Tensor orig_in = ctx.input(0), orig_out = ctx.input(1), grad = ctx.input(2);
    const Geometry g = PoolGeometry(attrs_, orig_in.dims);
    const Dims forward = g.OutputDims(attrs_.nchw);
    if (orig_out.dims != forward) {
      Fail("orig_output has shape ", DimsString(orig_out.dims), ", but MaxPool of orig_input ",
           DimsString(orig_in.dims), " gives ", DimsString(forward));
    }
    if (grad.dims != forward) {
      Fail("grad has shape ", DimsString(grad.dims), ", but MaxPool of orig_input ", DimsString(orig_in.dims),
           " gives ", DimsString(forward));
    }
    const Tensor dx = ctx.allocate_output(0, orig_in.dims);
    if (dx.num_elements == 0) return;
    PoolBackward<T, true><<<GridFor(dx.num_elements), kBlock, 0, ctx.stream()>>>(
        orig_in.as<const T>(), grad.as<const T>(), dx.as<T>(), ShapeOf(g, attrs_.nchw), dx.num_elements);
    CheckLaunch("MaxPoolGrad");
  }

 private:
  WindowAttrs attrs_;
};

template <class T>
class AvgPoolGradKernel {
 public:
  explicit AvgPoolGradKernel(const InitContext& init)
      : attrs_(ReadWindowAttrs(init, /*dilations=*/false, /*ksize=*/true)) {}
  void Compute(Context& ctx) {
    const Dims in_dims = ctx.ReadShape(ctx.input(0), "orig_input_shape");
    const Tensor grad = ctx.input(1);
    const Geometry g = PoolGeometry(attrs_, in_dims);
    const Dims forward = g.OutputDims(attrs_.nchw);
    if (grad.dims != forward) {
      Fail("grad has shape ", DimsString(grad.dims), ", but AvgPool of an input ", DimsString(in_dims), " gives ",
           DimsString(forward));
    }
    const Tensor dx = ctx.allocate_output(0, in_dims);
    if (dx.num_elements == 0) return;
    PoolBackward<T, false><<<GridFor(dx.num_elements), kBlock, 0, ctx.stream()>>>(
        nullptr, grad.as<const T>(), dx.as<T>(), ShapeOf(g, attrs_.nchw), dx.num_elements);
    CheckLaunch("AvgPoolGrad");
  }

 private:
  WindowAttrs attrs_;
};

template <class T>
void AddPools(KernelRegistry& r) {
  const weft_dtype_t t = DtypeOf<T>();
  r.Add<PoolKernel<T, true>>("MaxPool", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<PoolKernel<T, false>>("AvgPool", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<MaxPoolGradKernel<T>>("MaxPoolGrad", {{"T", t}}, WEFT_KERNEL_INLINE);
  r.Add<AvgPoolGradKernel<T>>("AvgPoolGrad", {{"T", t}}, 0, {"orig_input_shape"});
}

}  // namespace

void RegisterPoolKernels(KernelRegistry& r) {
  ForEachType<float, double>([&](auto t) { AddPools<decltype(t)>(r); });
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_POOL_H_
