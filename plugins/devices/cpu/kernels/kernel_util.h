// Helpers the CPU kernel families share: element-type traits, shape
// arithmetic (products, row-major strides, axes), reading integer inputs,
// moving elements by size, walking strided grids in parallel, per-channel
// sums, and the dtype lists kernels are registered for.
//
//   const int axis = NormalizeAxis(attr, x.rank());     // throws "axis 3 is out of range for rank 2 ..."
//   const int64_t outer = Product(x.dims, 0, axis);
//   DispatchBySize(ElementSize(x.dtype), [&]<class W>() { ... copy W words ... });
//
// Like the framework, everything reports errors by throwing (Fail).
#ifndef WEFT_PLUGINS_DEVICES_CPU_KERNELS_KERNEL_UTIL_H_
#define WEFT_PLUGINS_DEVICES_CPU_KERNELS_KERNEL_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "../kernel_framework.h"
#include "weft/sdk/op_checks.h"
#include "weft/sdk/size.h"

namespace weft::cpu {

// --- Element types --------------------------------------------------------------------

template <class T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Every dtype of fixed size, for the kernels that only move bytes (STRING
// tensors own the storage their elements point into, so they cannot be
// copied bytewise).
constexpr weft_dtype_t kFixedSizeTypes[] = {WEFT_DTYPE_F16, WEFT_DTYPE_BF16, WEFT_DTYPE_F32, WEFT_DTYPE_F64,
                                            WEFT_DTYPE_I8,  WEFT_DTYPE_I16,  WEFT_DTYPE_I32, WEFT_DTYPE_I64,
                                            WEFT_DTYPE_U8,  WEFT_DTYPE_BOOL};

// Calls fn.template operator()<T>() for each numeric C++ type, to register
// a kernel template for all of them.
template <class Fn>
void ForEachNumericType(Fn&& fn) {
  fn.template operator()<float>();
  fn.template operator()<double>();
  fn.template operator()<Half>();
  fn.template operator()<BFloat16>();
  fn.template operator()<int8_t>();
  fn.template operator()<int16_t>();
  fn.template operator()<int32_t>();
  fn.template operator()<int64_t>();
  fn.template operator()<uint8_t>();
}

// Calls fn.template operator()<W>() with an unsigned word type W of |size|
// bytes, to move elements of that size.
template <class Fn>
void DispatchBySize(std::size_t size, Fn&& fn) {
  switch (size) {
    case 1: fn.template operator()<uint8_t>(); return;
    case 2: fn.template operator()<uint16_t>(); return;
    case 4: fn.template operator()<uint32_t>(); return;
    case 8: fn.template operator()<uint64_t>(); return;
    default: Fail("elements of ", size, " bytes are not supported");
  }
}

// --- Shapes ---------------------------------------------------------------------------

inline std::size_t ToSize(int64_t n) { return static_cast<std::size_t>(n); }

// a / b rounded up, for a >= 0 and b > 0: how many blocks of b cover a.
template <class T>
T CeilDiv(T a, T b) {
  return (a + b - 1) / b;
}

// The product of dims [begin, end).
inline int64_t Product(const Dims& dims, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t i = begin; i < end; ++i) n *= dims[ToSize(i)];
  return n;
}

// Row-major element strides.
inline std::vector<int64_t> Strides(const Dims& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

// The values of an i32 or i64 tensor (in host memory).
inline std::vector<int64_t> ReadInts(const Tensor& t) {
  if (t.dtype == WEFT_DTYPE_I32) return std::vector<int64_t>(t.as<int32_t>(), t.as<int32_t>() + t.num_elements);
  if (t.dtype == WEFT_DTYPE_I64) return std::vector<int64_t>(t.as<int64_t>(), t.as<int64_t>() + t.num_elements);
  Fail("expected an i32 or i64 tensor, got ", weft_dtype_name(t.dtype) ? weft_dtype_name(t.dtype) : "?");
}

// Input |t|, named |what| in the error, as an integer scalar.
inline int64_t ReadScalar(const Tensor& t, const char* what) {
  if (t.rank() != 0) Fail(what, " must be a scalar, got shape ", DimsString(t.dims));
  return ReadInts(t)[0];
}

// |axis| in [0, rank), counting negative values from the end; the message
// is the shape functions' (core/ops/shape_fns.cc), |what| naming the attr.
using sdk::NormalizeAxis;

// A begin or end of a strided slice of a dimension of size |dim|, as NumPy
// clamps it (StridedSlice and StridedSliceGrad read their spec alike).
inline int64_t ClampSliceIndex(int64_t dim, int64_t v, int64_t stride, bool masked, bool is_begin) {
  if (masked) return stride > 0 ? (is_begin ? 0 : dim) : (is_begin ? dim - 1 : -1);
  if (v < 0) v += dim;
  return stride > 0 ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, -1, dim - 1);
}

// The elements from b towards e (both clamped) by |step|: in unsigned
// arithmetic, since -step overflows for INT64_MIN.
inline int64_t StridedSliceLength(int64_t b, int64_t e, int64_t step) {
  if (step > 0 ? e <= b : b <= e) return 0;
  const uint64_t distance = step > 0 ? static_cast<uint64_t>(e - b) : static_cast<uint64_t>(b - e);
  const uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  return static_cast<int64_t>(1 + (distance - 1) / magnitude);
}

// StridedSlice's masks (attrs of the forward op and of its gradient).
struct StridedSliceMasks {
  int64_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink = 0;
};

// What a strided slice of a tensor of |dims| selects: the selected elements
// as a grid over the tensor (lens, and steps in elements, from |offset|)
// and the slice's shape (with its new axes, without its shrunk ones).
struct StridedSliceGrid {
  Dims lens;
  std::vector<int64_t> steps;
  int64_t offset = 0;
  Dims sliced;
};

// The slice |begin|, |end| and |strides| (entries of one count, strides
// not 0) with |masks| select from a tensor of |dims|: NumPy basic indexing
// with TensorFlow's masks, the spec read exactly as StridedSliceShape
// reads it.
inline StridedSliceGrid PlanStridedSlice(const Dims& dims, const std::vector<int64_t>& begin,
                                         const std::vector<int64_t>& end, const std::vector<int64_t>& strides,
                                         const StridedSliceMasks& masks) {
  const int rank = static_cast<int>(dims.size());
  const std::vector<int64_t> dim_strides = Strides(dims);
  StridedSliceGrid g;
  auto bit = [](int64_t mask, std::size_t i) { return i < 63 && ((mask >> i) & 1) != 0; };
  int consumed = 0;
  for (std::size_t i = 0; i < begin.size(); ++i) {
    if (!bit(masks.ellipsis, i) && !bit(masks.new_axis, i)) ++consumed;
  }
  int dim = 0;
  auto whole = [&] {
    g.lens.push_back(dims[ToSize(dim)]);
    g.steps.push_back(dim_strides[ToSize(dim)]);
    g.sliced.push_back(dims[ToSize(dim)]);
    ++dim;
  };
  for (std::size_t i = 0; i < begin.size(); ++i) {
    if (bit(masks.ellipsis, i)) {
      for (int k = rank - consumed; k > 0; --k) whole();
      continue;
    }
    if (bit(masks.new_axis, i)) {
      g.sliced.push_back(1);
      continue;
    }
    if (dim >= rank) Fail("the slice spec indexes more dimensions than the input's ", rank);
    const int64_t d = dims[ToSize(dim)], stride = dim_strides[ToSize(dim)];
    if (bit(masks.shrink, i)) {
      const int64_t index = begin[i] < 0 ? begin[i] + d : begin[i];
      if (index < 0 || index >= d) Fail("index ", begin[i], " is out of range for dimension ", dim, " of size ", d);
      g.offset += index * stride;
      ++dim;
      continue;
    }
    const int64_t step = strides[i];
    const int64_t b = ClampSliceIndex(d, begin[i], step, bit(masks.begin, i), true);
    const int64_t e = ClampSliceIndex(d, end[i], step, bit(masks.end, i), false);
    const int64_t len = StridedSliceLength(b, e, step);
    if (len > 0) g.offset += b * stride;
    g.lens.push_back(len);
    // With two or more elements |step| is below d, so this cannot overflow.
    g.steps.push_back(len > 1 ? step * stride : 0);
    g.sliced.push_back(len);
    ++dim;
  }
  while (dim < rank) whole();
  return g;
}

// --- Parallel loops -------------------------------------------------------------------

// The estimated nanoseconds to copy |bytes| (for ParallelFor).
inline int64_t CopyCost(std::size_t bytes) { return 1 + static_cast<int64_t>(bytes / 16); }

// Calls fn(row, offset) for every index of the row-major grid |lens|, with
// offset = base + sum index[k] * steps[k], in parallel chunks; each chunk
// advances its offset like an odometer instead of dividing per row.
template <class F>
void ForEachRow(const Dims& lens, const std::vector<int64_t>& steps, int64_t base, int64_t cost_per_row, F&& fn) {
  const int64_t rows = Product(lens, 0, static_cast<int64_t>(lens.size()));
  const int rank = static_cast<int>(lens.size());
  ParallelFor(rows, cost_per_row, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(lens.size());
    int64_t offset = base;
    int64_t rest = begin;
    for (int d = rank - 1; d >= 0; --d) {
      index[ToSize(d)] = rest % lens[ToSize(d)];
      rest /= lens[ToSize(d)];
      offset += index[ToSize(d)] * steps[ToSize(d)];
    }
    for (int64_t row = begin; row < end; ++row) {
      fn(row, offset);
      for (int d = rank - 1; d >= 0; --d) {
        offset += steps[ToSize(d)];
        if (++index[ToSize(d)] < lens[ToSize(d)]) break;
        offset -= steps[ToSize(d)] * lens[ToSize(d)];
        index[ToSize(d)] = 0;
      }
    }
  });
}

// Per channel c of data laid out [outer, channels, inner]: the sum of
// f(c, i) over the flat indices i of that channel, in Acc, in a fixed order
// (so independent of the thread count). The normalisation kernels and
// their gradients (nn.cc, nn_grad.cc) and BiasAddGrad sum this way.
template <class Acc, class F>
std::vector<Acc> ChannelSums(int64_t outer, int64_t channels, int64_t inner, F f) {
  // Rows (of all channels) per task when summing channels over rows.
  constexpr int64_t kRowsPerTask = 256;
  const auto c_size = ToSize(channels);
  std::vector<Acc> sums(c_size, Acc(0));
  if (channels == 0) return sums;
  if (inner == 1) {
    // [rows, channels]: blocks of rows, each summed into its own vector.
    const int64_t blocks = CeilDiv(outer, kRowsPerTask);
    std::vector<Acc> partial(ToSize(blocks) * c_size, Acc(0));
    ParallelFor(blocks, kRowsPerTask * channels, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        Acc* sum = partial.data() + b * channels;
        for (int64_t o = b * kRowsPerTask; o < std::min(outer, (b + 1) * kRowsPerTask); ++o) {
          for (int64_t c = 0; c < channels; ++c) sum[c] += f(c, o * channels + c);
        }
      }
    });
    for (std::size_t i = 0; i < partial.size(); ++i) sums[i % c_size] += partial[i];  // block by block
    return sums;
  }
  // [outer, channels, inner]: one contiguous run per (outer, channel).
  std::vector<Acc> partial(ToSize(outer) * c_size, Acc(0));
  ParallelFor(outer * channels, inner, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t c = t % channels;
      Acc sum(0);
      for (int64_t i = t * inner; i < (t + 1) * inner; ++i) sum += f(c, i);
      partial[ToSize(t)] = sum;
    }
  });
  for (std::size_t t = 0; t < partial.size(); ++t) sums[t % c_size] += partial[t];
  return sums;
}

// The mean and biased variance per channel of |x| laid out [outer,
// channels, inner], in double: the mean first, then the squared deviations
// from it (two passes, so no cancellation). FusedBatchNorm and, in
// training, its gradient compute the batch statistics this way.
template <class T>
void ChannelMoments(const T* x, int64_t outer, int64_t channels, int64_t inner, std::vector<double>* mean,
                    std::vector<double>* variance) {
  const auto count = static_cast<double>(outer * inner);
  *mean = ChannelSums<double>(outer, channels, inner, [x](int64_t, int64_t i) { return static_cast<double>(x[i]); });
  for (double& m : *mean) m /= count;
  *variance = ChannelSums<double>(outer, channels, inner, [&](int64_t c, int64_t i) {
    const double d = static_cast<double>(x[i]) - (*mean)[ToSize(c)];
    return d * d;
  });
  for (double& v : *variance) v /= count;
}

// The mean of the |n| values at |x| and 1 / sqrt(variance + |epsilon|) of
// their biased variance, in double and in two passes, as LayerNorm and its
// gradient normalise each row.
struct RowMoments {
  double mean = 0;
  double inv_std = 0;
};

template <class T>
RowMoments MomentsOfRow(const T* x, int64_t n, double epsilon) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  RowMoments m;
  m.mean = sum / static_cast<double>(n);
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - m.mean;
    squares += d * d;
  }
  m.inv_std = 1 / std::sqrt(squares / static_cast<double>(n) + epsilon);
  return m;
}

}  // namespace weft::cpu

#endif  // WEFT_PLUGINS_DEVICES_CPU_KERNELS_KERNEL_UTIL_H_
