// The window geometry of the pooling kernels (gpu/kernels/pool.h) and the
// cuDNN convolutions (cuda/dnn.cc): the SDK's (weft/sdk/window.h), shared
// by every device plugin, with TensorFlow's semantics.
//
//   const WindowAttrs a = ReadWindowAttrs(init, /*dilations=*/true);
//   const Geometry g = ConvGeometry(a, input.dims, filter.dims);
//   const Tensor out = ctx.allocate_output(0, g.OutputDims(a.nchw));
#ifndef WEFT_PLUGINS_DEVICES_GPU_WINDOW_H_
#define WEFT_PLUGINS_DEVICES_GPU_WINDOW_H_

#include "gpu/kernel_framework.h"
#include "weft/sdk/window.h"

namespace weft::gpu {

using sdk::CheckForwardOutput;
using sdk::ConvGeometry;
using sdk::Geometry;
using sdk::PoolGeometry;
using sdk::ReadWindowAttrs;
using sdk::WindowAttrs;

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_WINDOW_H_
