// The window geometry of the pooling kernels (gpu/kernels/pool.h) and the
// cuDNN convolutions (cuda/dnn.cc), with TensorFlow's semantics: NHWC or
// NCHW data, window attrs in data_format order, SAME padding giving
// ceil(in / stride) outputs with any odd padding element after. The checks
// repeat the shape functions' (core/ops/nn_ops.cc), with their messages.
//
//   const WindowAttrs a = ReadWindowAttrs(init, /*dilations=*/true);
//   const Geometry g = ConvGeometry(a, input.dims, filter.dims);
//   const Tensor out = ctx.allocate_output(0, g.OutputDims(a.nchw));
#ifndef WEFT_PLUGINS_DEVICES_GPU_WINDOW_H_
#define WEFT_PLUGINS_DEVICES_GPU_WINDOW_H_

#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu/kernel_framework.h"

namespace weft::gpu {

struct WindowAttrs {
  bool nchw = false;
  bool same = false;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t window_h = 1, window_w = 1;  // ksize, for the poolings
};

// The (height, width) entries of the 4-entry attr |name|.
inline std::pair<int64_t, int64_t> SpatialAttr(const InitContext& init, const char* name, bool nchw) {
  const std::vector<int64_t> v = init.Ints(name);
  if (v.size() != 4) Fail("attr '", name, "' must have 4 entries, got ", v.size());
  for (int64_t x : v) {
    if (x < 1) Fail("attr '", name, "' entries must be >= 1, got ", DimsString(v));
  }
  if (v[0] != 1 || v[nchw ? 1 : 3] != 1) {
    Fail("attr '", name, "' must be 1 in the batch and channel dimensions, got ", DimsString(v));
  }
  return nchw ? std::make_pair(v[2], v[3]) : std::make_pair(v[1], v[2]);
}

// data_format, padding and strides, and dilations (convolutions) or ksize
// (poolings).
inline WindowAttrs ReadWindowAttrs(const InitContext& init, bool convolution) {
  WindowAttrs a;
  a.nchw = init.String("data_format") == "NCHW";
  a.same = init.String("padding") == "SAME";
  std::tie(a.stride_h, a.stride_w) = SpatialAttr(init, "strides", a.nchw);
  if (convolution) {
    std::tie(a.dilation_h, a.dilation_w) = SpatialAttr(init, "dilations", a.nchw);
  } else {
    std::tie(a.window_h, a.window_w) = SpatialAttr(init, "ksize", a.nchw);
  }
  return a;
}

// One spatial dimension: the output size and the padding before and after.
struct Span {
  int64_t out = 0, pad_before = 0, pad_after = 0;
};

inline Span WindowSpan(int64_t in, int64_t window, int64_t stride, int64_t dilation, bool same, const char* what) {
  const int64_t effective = (window - 1) * dilation + 1;
  Span s;
  if (!same) {
    if (in < effective) {
      Fail(what, ": the window (", effective, " with dilation) is larger than the input (", in, ")");
    }
    s.out = (in - effective) / stride + 1;
    return s;
  }
  s.out = (in + stride - 1) / stride;
  const int64_t needed = (s.out - 1) * stride + effective - in;
  const int64_t total = needed > 0 ? needed : 0;
  s.pad_before = total / 2;
  s.pad_after = total - s.pad_before;
  return s;
}

// Everything about one window op's shapes in layout-free terms.
struct Geometry {
  int64_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  int64_t window_h = 1, window_w = 1;
  int64_t out_h = 0, out_w = 0, out_channels = 0;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  Span h, w;

  Dims OutputDims(bool nchw) const {
    return nchw ? Dims{batch, out_channels, out_h, out_w} : Dims{batch, out_h, out_w, out_channels};
  }
  Dims InputDims(bool nchw) const {
    return nchw ? Dims{batch, channels, in_h, in_w} : Dims{batch, in_h, in_w, channels};
  }
  bool symmetric() const { return h.pad_before == h.pad_after && w.pad_before == w.pad_after; }
};

inline void SetInput(Geometry* g, const Dims& in, bool nchw, const char* what) {
  if (in.size() != 4) Fail(what, " must have rank 4, got ", DimsString(in));
  g->batch = in[0];
  g->channels = nchw ? in[1] : in[3];
  g->in_h = nchw ? in[2] : in[1];
  g->in_w = nchw ? in[3] : in[2];
}

inline void SetSpans(Geometry* g, const WindowAttrs& a) {
  g->stride_h = a.stride_h;
  g->stride_w = a.stride_w;
  g->dilation_h = a.dilation_h;
  g->dilation_w = a.dilation_w;
  g->h = WindowSpan(g->in_h, g->window_h, a.stride_h, a.dilation_h, a.same, "height");
  g->w = WindowSpan(g->in_w, g->window_w, a.stride_w, a.dilation_w, a.same, "width");
  g->out_h = g->h.out;
  g->out_w = g->w.out;
}

// A pooling of |in| (rank 4, in data_format).
inline Geometry PoolGeometry(const WindowAttrs& a, const Dims& in) {
  Geometry g;
  SetInput(&g, in, a.nchw, "the input");
  g.window_h = a.window_h;
  g.window_w = a.window_w;
  g.out_channels = g.channels;
  SetSpans(&g, a);
  return g;
}

// A convolution of |in| with the HWIO |filter|.
inline Geometry ConvGeometry(const WindowAttrs& a, const Dims& in, const Dims& filter) {
  Geometry g;
  SetInput(&g, in, a.nchw, "the input");
  if (filter.size() != 4) Fail("the filter must have rank 4, got ", DimsString(filter));
  if (filter[0] == 0 || filter[1] == 0) {
    Fail("the filter window ", DimsString(filter), " is empty; it must be at least 1x1");
  }
  if (filter[2] != g.channels) {
    Fail("the input has ", g.channels, " channels (", a.nchw ? "NCHW " : "NHWC ", DimsString(in),
         ") but the filter expects ", filter[2], " (HWIO ", DimsString(filter), ")");
  }
  g.window_h = filter[0];
  g.window_w = filter[1];
  g.out_channels = filter[3];
  SetSpans(&g, a);
  return g;
}

// Throws unless |got| (out_backprop, a forward output's gradient) has the
// shape the forward op gives.
inline void CheckForwardOutput(const Geometry& g, bool nchw, const Dims& got, const char* forward) {
  const Dims want = g.OutputDims(nchw);
  if (got != want) {
    Fail("out_backprop has shape ", DimsString(got), ", but ", forward, " of an input ", DimsString(g.InputDims(nchw)),
         " gives ", DimsString(want));
  }
}

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_WINDOW_H_
