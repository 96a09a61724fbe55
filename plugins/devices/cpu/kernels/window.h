// The window geometry of the convolution and pooling kernels (nn_conv.cc)
// and of their gradients (nn_conv_grad.cc): the SDK's (weft/sdk/window.h),
// with TensorFlow's semantics. Also the NCHW <-> NHWC copies the direct
// loops (which run on NHWC data) go through.
//
//   WindowAttrs a = ReadWindowAttrs(init, /*dilations=*/true);   // in the constructor
//   Geometry g = ConvGeometry(a, input.dims, filter.dims, /*depthwise=*/false);
//   Tensor out = ctx.allocate_output(0, g.OutputDims(a.nchw));
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_WINDOW_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_WINDOW_H_

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "../kernel_framework.h"
#include "weft/sdk/window.h"

namespace weft::cpu {

// The geometry itself is the SDK's (weft/sdk/window.h), shared by every
// device plugin.
using sdk::CheckForwardOutput;
using sdk::ConvGeometry;
using sdk::Geometry;
using sdk::MakeGeometry;
using sdk::PoolGeometry;
using sdk::ReadWindowAttrs;
using sdk::SpatialAttr;
using sdk::WindowAttrs;

// --- Layout changes ------------------------------------------------------------------

// [n, rows, cols] -> [n, cols, rows]: NCHW to NHWC with rows = C and
// cols = H*W, NHWC to NCHW with rows = H*W and cols = C. One output row
// per task, gathered with stride |cols|.
template <class T>
void BatchedTranspose(const T* in, T* out, int64_t n, int64_t rows, int64_t cols) {
  ParallelFor(n * cols, rows, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const T* src = in + (i / cols) * rows * cols + i % cols;
      T* dst = out + i * rows;
      for (int64_t k = 0; k < rows; ++k) dst[k] = src[k * cols];
    }
  });
}

// The NHWC data of the 4-D tensor |t| in data_format: its own for NHWC, a
// transposed temp copy for NCHW.
template <class T>
const T* ReadNhwc(Context& ctx, const Tensor& t, bool nchw) {
  if (!nchw) return t.as<T>();
  Tensor copy = ctx.allocate_temp(DtypeOf<T>(), {t.dim(0), t.dim(2), t.dim(3), t.dim(1)});
  BatchedTranspose(t.as<T>(), copy.as<T>(), t.dim(0), t.dim(1), t.dim(2) * t.dim(3));
  return copy.as<T>();
}

// Runs fn(nhwc_output) to fill the 4-D |output| in data_format, through an
// NHWC temp when the data is NCHW.
template <class T, class Fn>
void WriteNhwc(Context& ctx, Tensor& output, bool nchw, Fn&& fn) {
  if (!nchw) {
    fn(output.as<T>());
    return;
  }
  const Dims& d = output.dims;
  Tensor temp = ctx.allocate_temp(DtypeOf<T>(), {d[0], d[2], d[3], d[1]});
  fn(temp.as<T>());
  BatchedTranspose(temp.as<T>(), output.as<T>(), d[0], d[2] * d[3], d[1]);
}

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_WINDOW_H_
