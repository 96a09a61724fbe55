// Softmax and LogSoftmax (core/ops/nn_ops.cc) for the cuda and hip plugins:
// the kernel checks the axis and sees x as [outer, n, inner] around it; a
// backend normalises over n, cuDNN's in the cuda plugin (cuda/dnn.cc), the
// direct kernel of nn.h in the hip plugin:
//
//   struct Backend {
//     template <class T, bool kLog>
//     static void Run(Context& ctx, const Tensor& x, const Tensor& y, const sdk::ChannelLayout& c);
//   };
//
// Host code: included by plugins/devices/cuda/dnn.cc and nn.h.
#ifndef WEFT_PLUGINS_DEVICES_GPU_KERNELS_SOFTMAX_H_
#define WEFT_PLUGINS_DEVICES_GPU_KERNELS_SOFTMAX_H_

#include <cstdint>

#include "gpu/kernel_framework.h"

namespace weft::gpu {

template <class T, bool kLog, class Backend>
class SoftmaxKernel {
 public:
  explicit SoftmaxKernel(const InitContext& init) : axis_(init.Int("axis")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const sdk::ChannelLayout c = sdk::ChannelLayoutOf(x, sdk::SoftmaxAxis(x, axis_));
    const Tensor y = ctx.allocate_output(0, x.dims);
    if (y.num_elements == 0) return;
    Backend::template Run<T, kLog>(ctx, x, y, c);
  }

 private:
  int64_t axis_;
};

}  // namespace weft::gpu

#endif  // WEFT_PLUGINS_DEVICES_GPU_KERNELS_SOFTMAX_H_
