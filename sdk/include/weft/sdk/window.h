// Weft SDK for C++ plugins: the window geometry of convolutions and
// poolings, with TensorFlow's semantics, for every device plugin (the CPU,
// OpenCL, CUDA and HIP devices use it; docs/plugins.md, "Window ops").
//
// NHWC or NCHW data; strides, dilations and ksize given as 4 entries in
// data_format order; SAME padding giving ceil(in / stride) outputs, with
// any odd padding element after; VALID needing the (dilated) window to fit.
// The checks repeat the shape functions' (core/ops/nn_ops.cc,
// nn_grad_ops.cc) with their messages, and throw weft::sdk::Error
// (INVALID_ARGUMENT) through Fail:
//
//   class Conv2DF32 {
//    public:
//     explicit Conv2DF32(const weft::sdk::KernelInit& init)
//         : attrs_(weft::sdk::ReadWindowAttrs(init, /*dilations=*/true)) {}
//     void Compute(weft::sdk::KernelContext& ctx) {
//       const weft::sdk::Tensor input = ctx.input(0), filter = ctx.input(1);
//       const weft::sdk::Geometry g = weft::sdk::ConvGeometry(attrs_, input.dims, filter.dims);
//       const weft::sdk::Tensor out = ctx.allocate_output(0, g.OutputDims(attrs_.nchw));
//       (void)out;  // the loops run over g.out_h, g.out_w from g.pad_top, g.pad_left
//     }
//
//    private:
//     weft::sdk::WindowAttrs attrs_;
//   };
//
// Every size is computed with checked arithmetic (weft/sdk/size.h): a
// huge window or dilation is an error, never a wrapped dimension.
#ifndef WEFT_SDK_WINDOW_H_
#define WEFT_SDK_WINDOW_H_

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "weft/sdk/kernel.h"
#include "weft/sdk/size.h"

namespace weft::sdk {

// The attrs the convolutions and poolings share, spatial entries only.
struct WindowAttrs {
  bool nchw = false;
  bool same = false;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t window_h = 1, window_w = 1;  // ksize, when read (poolings)
};

// The (height, width) entries of the 4-entry window attr |name|.
inline std::pair<int64_t, int64_t> SpatialAttr(const KernelInit& init, const char* name, bool nchw) {
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

// data_format, padding and strides; dilations (convolutions) and ksize
// (poolings whose window is an attr) when asked for.
inline WindowAttrs ReadWindowAttrs(const KernelInit& init, bool dilations, bool ksize = false) {
  WindowAttrs a;
  a.nchw = init.String("data_format") == "NCHW";
  a.same = init.String("padding") == "SAME";
  std::tie(a.stride_h, a.stride_w) = SpatialAttr(init, "strides", a.nchw);
  if (dilations) std::tie(a.dilation_h, a.dilation_w) = SpatialAttr(init, "dilations", a.nchw);
  if (ksize) std::tie(a.window_h, a.window_w) = SpatialAttr(init, "ksize", a.nchw);
  return a;
}

// Everything about one window op's shapes, in layout-free terms: the
// forward input (in_*), the window, and the forward output (out_*).
struct Geometry {
  int64_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  int64_t window_h = 1, window_w = 1;
  int64_t out_h = 0, out_w = 0, out_channels = 0;
  int64_t stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;

  Dims OutputDims(bool nchw) const {
    return nchw ? Dims{batch, out_channels, out_h, out_w} : Dims{batch, out_h, out_w, out_channels};
  }
  Dims InputDims(bool nchw) const {
    return nchw ? Dims{batch, channels, in_h, in_w} : Dims{batch, in_h, in_w, channels};
  }
  // Whether the padding is the same before and after in both dimensions
  // (libraries that take one padding per dimension need it).
  bool symmetric() const { return pad_top == pad_bottom && pad_left == pad_right; }

  // A pooling of NCHW data pools each channel plane alone, which is the
  // same pooling of N*C NHWC images of one channel, with no copy.
  Geometry PlanesAsImages() const {
    Geometry g = *this;
    g.batch *= g.channels;
    g.channels = g.out_channels = 1;
    return g;
  }
};

// Output size and padding of one spatial dimension |dim| ("height").
inline void SpatialWindow(const char* dim, int64_t in, int64_t window, int64_t stride, int64_t dilation, bool same,
                          int64_t& out, int64_t& pad_before, int64_t& pad_after) {
  const int64_t effective = AddSize(MulSize(window - 1, dilation, dim), 1, dim);
  if (!same) {
    if (in < effective) Fail(dim, ": the window (", effective, " with dilation) is larger than the input (", in, ")");
    out = (in - effective) / stride + 1;
    pad_before = pad_after = 0;
    return;
  }
  // ceil(in / stride), and the padding that lets the last window end at the
  // input's end, written so that no step can overflow: (out - 1) * stride
  // is below in.
  out = in / stride + (in % stride != 0 ? 1 : 0);
  const int64_t covered = in - (out - 1) * stride;  // in (0, stride] when in > 0
  const int64_t total = std::max<int64_t>(effective - covered, 0);
  pad_before = total / 2;
  pad_after = total - pad_before;
}

// The geometry of a window of |window_h| x |window_w| (at least 1x1) over
// a forward input of shape |input|; out_channels is left to the caller.
inline Geometry MakeGeometry(const WindowAttrs& a, const Dims& input, int64_t window_h, int64_t window_w) {
  if (input.size() != 4) Fail("the input must have rank 4, got ", DimsString(input));
  Geometry g;
  g.batch = input[0];
  g.channels = input[a.nchw ? 1 : 3];
  g.in_h = input[a.nchw ? 2 : 1];
  g.in_w = input[a.nchw ? 3 : 2];
  g.window_h = window_h;
  g.window_w = window_w;
  g.stride_h = a.stride_h;
  g.stride_w = a.stride_w;
  g.dilation_h = a.dilation_h;
  g.dilation_w = a.dilation_w;
  SpatialWindow("height", g.in_h, window_h, g.stride_h, g.dilation_h, a.same, g.out_h, g.pad_top, g.pad_bottom);
  SpatialWindow("width", g.in_w, window_w, g.stride_w, g.dilation_w, a.same, g.out_w, g.pad_left, g.pad_right);
  return g;
}

// A pooling's geometry: as many output channels as input channels.
inline Geometry PoolGeometry(const WindowAttrs& a, const Dims& input, int64_t window_h, int64_t window_w) {
  Geometry g = MakeGeometry(a, input, window_h, window_w);
  g.out_channels = g.channels;
  return g;
}

// A pooling whose window is the ksize attr (ReadWindowAttrs(..., true)).
inline Geometry PoolGeometry(const WindowAttrs& a, const Dims& input) {
  return PoolGeometry(a, input, a.window_h, a.window_w);
}

// The geometry of a (depthwise) convolution of an input |input| with an
// HWIO filter |filter| ([height, width, channels, multiplier] depthwise).
inline Geometry ConvGeometry(const WindowAttrs& a, const Dims& input, const Dims& filter, bool depthwise = false) {
  if (input.size() != 4 || filter.size() != 4) {
    Fail("input and filter must have rank 4, got ", DimsString(input), " and ", DimsString(filter));
  }
  if (filter[0] < 1 || filter[1] < 1) {
    Fail("the filter window ", DimsString(filter), " is empty; it must be at least 1x1");
  }
  const int64_t channels = input[a.nchw ? 1 : 3];
  if (channels != filter[2]) {
    Fail("the input has ", channels, " channels (", a.nchw ? "NCHW " : "NHWC ", DimsString(input),
         ") but the filter expects ", filter[2], " (HWIO ", DimsString(filter), ")");
  }
  Geometry g = MakeGeometry(a, input, filter[0], filter[1]);
  g.out_channels = depthwise ? MulSize(channels, filter[3], "output channels") : filter[3];
  return g;
}

// Throws unless |got| (out_backprop, a forward output's gradient) has the
// shape the forward op |forward| gives.
inline void CheckForwardOutput(const Geometry& g, bool nchw, const Dims& got, const char* forward) {
  const Dims want = g.OutputDims(nchw);
  if (got != want) {
    Fail("out_backprop has shape ", DimsString(got), ", but ", forward, " of an input ", DimsString(g.InputDims(nchw)),
         " gives ", DimsString(want));
  }
}

}  // namespace weft::sdk

#endif  // WEFT_SDK_WINDOW_H_
