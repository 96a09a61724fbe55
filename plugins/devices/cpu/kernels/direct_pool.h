// Pooling over NHWC data by direct loops: the CPU's MaxPool and AvgPool
// for what oneDNN declines (nn_conv.cc), and for everything in the lite
// build (xnn_kernels.cc).
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_DIRECT_POOL_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_DIRECT_POOL_H_

#include <algorithm>
#include <cstdint>
#include <limits>

#include "../kernel_framework.h"
#include "window.h"

namespace weft::cpu {

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

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_DIRECT_POOL_H_
