// Strided copies for the CPU kernels that only move elements: a view of a
// source buffer (a length and a step per dimension, and an offset) written
// densely in row-major order, with unit dimensions dropped, neighbours that
// walk the source as one merged, contiguous rows copied with memcpy and
// transposes tiled. Slice, StridedSlice, Reverse, Tile and Transpose
// (array.cc) and DynamicSlice and DynamicTile (dynamic_shape.cc) are all one
// such copy: Reverse's steps are negative, Tile's repeats have step 0.
//
//   StridedView view{x.dims, Strides(x.dims), 0};   // all of x, in order
//   view.offset += start * view.steps[axis];       // ... then narrowed
//   WriteView(ctx, x, view.lens, view);             // output 0, or x forwarded
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_STRIDED_COPY_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_STRIDED_COPY_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {

// A view of a source buffer: element (i0, ..., in-1) of the view is source
// element offset + sum ik * steps[k].
struct StridedView {
  Dims lens;
  std::vector<int64_t> steps;
  int64_t offset = 0;
};

// The same view with unit dimensions dropped and neighbours that walk the
// source as one dimension merged.
inline StridedView Simplify(const StridedView& view) {
  StridedView out;
  out.offset = view.offset;
  for (std::size_t k = 0; k < view.lens.size(); ++k) {
    if (view.lens[k] == 1) continue;
    if (!out.lens.empty() && out.steps.back() == view.lens[k] * view.steps[k]) {
      out.lens.back() *= view.lens[k];
      out.steps.back() = view.steps[k];
    } else {
      out.lens.push_back(view.lens[k]);
      out.steps.push_back(view.steps[k]);
    }
  }
  return out;
}

// Whether |view| (not empty) reads its whole source in order.
inline bool IsInOrder(const StridedView& view) {
  const StridedView v = Simplify(view);
  return v.offset == 0 && (v.lens.empty() || (v.lens.size() == 1 && v.steps[0] == 1));
}

// Copies |v| in tiles of two dimensions: k, along which the source is
// contiguous, and the innermost, along which the output is; both the reads
// and the writes of a tile then stay in cache (a transpose, for one).
// Output element [o..., a, m..., b] (a along k, b innermost) is at
// ((o * rows + a) * middle + m) * cols + b.
template <class W>
void CopyTiled(const W* src, W* dst, const StridedView& v, std::size_t k) {
  constexpr int64_t kTile = 32;
  const std::size_t n = v.lens.size();
  const int64_t rows = v.lens[k], cols = v.lens[n - 1], col_step = v.steps[n - 1];
  const int64_t middle = Product(v.lens, k + 1, n - 1);
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  // One unit of work: one tile row (kTile values of a) for one (o, m).
  Dims lens;
  std::vector<int64_t> steps;
  for (std::size_t d = 0; d + 1 < n; ++d) {
    if (d == k) continue;
    lens.push_back(v.lens[d]);
    steps.push_back(v.steps[d]);
  }
  lens.push_back(row_tiles);
  steps.push_back(kTile * v.steps[k]);
  ForEachRow(lens, steps, v.offset, kTile * cols, [&](int64_t unit, int64_t offset) {
    const int64_t group = unit / row_tiles;
    const int64_t a0 = (unit % row_tiles) * kTile;
    const int64_t height = std::min(kTile, rows - a0);
    const W* in = src + offset;  // source of [o, a0, m, 0]
    W* out = dst + (((group / middle) * rows + a0) * middle + group % middle) * cols;
    const int64_t out_row = middle * cols;
    for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
      const int64_t b1 = std::min(b0 + kTile, cols);
      for (int64_t a = 0; a < height; ++a) {
        for (int64_t b = b0; b < b1; ++b) out[a * out_row + b] = in[a + b * col_step];
      }
    }
  });
}

// Writes |view| of |src| densely, in row-major order, to |dst|.
inline void CopyStrided(const void* src, void* dst, std::size_t element_size, const StridedView& view) {
  for (int64_t len : view.lens) {
    if (len == 0) return;
  }
  const StridedView v = Simplify(view);
  const auto* in = static_cast<const char*>(src);
  auto* out = static_cast<char*>(dst);
  if (v.lens.empty()) {
    std::memcpy(out, in + ToSize(v.offset) * element_size, element_size);
    return;
  }
  const std::size_t n = v.lens.size();
  const int64_t inner = v.lens.back(), step = v.steps.back();
  const Dims outer_lens(v.lens.begin(), v.lens.end() - 1);
  const std::vector<int64_t> outer_steps(v.steps.begin(), v.steps.end() - 1);
  if (step == 1) {  // contiguous rows
    const std::size_t row_bytes = ToSize(inner) * element_size;
    ForEachRow(outer_lens, outer_steps, v.offset, CopyCost(row_bytes), [&](int64_t row, int64_t offset) {
      std::memcpy(out + ToSize(row) * row_bytes, in + ToSize(offset) * element_size, row_bytes);
    });
    return;
  }
  DispatchBySize(element_size, [&]<class W>() {
    const W* s = reinterpret_cast<const W*>(in);
    W* d = reinterpret_cast<W*>(out);
    // With a dimension the source is contiguous along, other than the
    // innermost, tile it against the innermost (unless that one repeats an
    // element, as Tile's repeats do).
    for (std::size_t k = n - 1; k-- > 0;) {
      if (v.steps[k] == 1 && step != 0) {
        CopyTiled<W>(s, d, v, k);
        return;
      }
    }
    ForEachRow(outer_lens, outer_steps, v.offset, inner, [&](int64_t row, int64_t offset) {
      W* o = d + row * inner;
      const W* p = s + offset;
      for (int64_t i = 0; i < inner; ++i) o[i] = p[i * step];
    });
  });
}

// Sets output 0 of |out_dims| to |view| of |in|, forwarding |in| itself when
// the view is all of it in order.
inline void WriteView(Context& ctx, const Tensor& in, const Dims& out_dims, const StridedView& view) {
  if (out_dims == in.dims && (in.num_elements == 0 || IsInOrder(view))) {
    ctx.forward(0, 0);
    return;
  }
  Tensor out = ctx.allocate_output(0, out_dims);
  CopyStrided(in.data, out.data, ElementSize(in.dtype), view);
}

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_STRIDED_COPY_H_
