// Kernels of the ops whose shape-like parameters are run-time tensors, with
// ONNX's (opset 13) semantics (core/ops/dynamic_shape_ops.cc): DynamicSlice,
// DynamicPad, DynamicTile, DynamicSum, DynamicExpandDims, DynamicSqueeze and
// DynamicSplit.
//
// The index inputs are small and in host memory: each kernel reads them,
// checks them with the messages of the ops' shape functions (so a shape only
// known at run time fails the same way), computes the output shape and fills
// the output. Data movement is by element size, so one kernel serves every
// fixed-size dtype; DynamicSlice and DynamicTile are strided copies
// (strided_copy.h, as Slice and Tile are), and DynamicExpandDims and
// DynamicSqueeze forward their input with the new shape. DynamicSum adds
// floats in double (f32, f64) or float (f16, bf16), as Sum does, and wraps
// integers.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "../kernel_framework.h"
#include "kernel_util.h"
#include "strided_copy.h"

namespace weft::cpu {
namespace {

constexpr weft_dtype_t kIndexTypes[] = {WEFT_DTYPE_I32, WEFT_DTYPE_I64};

// --- Helpers ---------------------------------------------------------------------

// The integers of input |i| (named |what|), which must be 1-D.
std::vector<int64_t> ReadVector(Context& ctx, int i, const char* what) {
  const Tensor t = ctx.input(i);
  if (t.rank() != 1) Fail(what, " must be a 1-D tensor, got shape ", DimsString(t.dims));
  return ReadInts(t);
}

// The entries of |axes| in [-rank, rank), made non-negative, in their order;
// a repeated axis is an error.
std::vector<int> UniqueAxes(const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  for (int64_t a : axes) {
    const int axis = NormalizeAxis(a, rank, "axes entry");
    if (std::find(out.begin(), out.end(), axis) != out.end()) Fail("axes entry ", a, " repeats axis ", axis);
    out.push_back(axis);
  }
  return out;
}

bool Contains(const std::vector<int>& axes, int axis) {
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

// --- DynamicSlice ----------------------------------------------------------------

// The first element and the count ONNX's Slice takes from a dimension of
// size |d|: negative bounds count from the end, then start is clamped to
// [0, d] and end to [0, d] (step > 0), or start to [0, d-1] and end to
// [-1, d-1] (step < 0). The count in unsigned arithmetic, as |step| may be
// INT64_MIN.
struct SliceRange {
  int64_t start = 0, length = 0;
};

SliceRange ClampSlice(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += d;
  if (end < 0) end += d;
  const int64_t start_max = step > 0 ? d : d - 1;
  const int64_t end_min = step > 0 ? 0 : -1, end_max = step > 0 ? d : d - 1;
  start = std::min(std::max<int64_t>(start, 0), start_max);
  end = std::min(std::max(end, end_min), end_max);
  if (step > 0 ? end <= start : start <= end) return {start, 0};
  const uint64_t distance = step > 0 ? static_cast<uint64_t>(end - start) : static_cast<uint64_t>(start - end);
  const uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step) : 0 - static_cast<uint64_t>(step);
  return {start, static_cast<int64_t>(1 + (distance - 1) / magnitude)};
}

// starts, ends, axes and steps, checked against one another.
struct SliceSpec {
  std::vector<int64_t> starts, ends, axes, steps;
};

SliceSpec ReadSliceSpec(Context& ctx) {
  SliceSpec s{ReadVector(ctx, 1, "starts"), ReadVector(ctx, 2, "ends"), ReadVector(ctx, 3, "axes"),
              ReadVector(ctx, 4, "steps")};
  const std::size_t n = s.starts.size();
  if (s.ends.size() != n || s.axes.size() != n || s.steps.size() != n) {
    Fail("starts, ends, axes and steps have ", n, ", ", s.ends.size(), ", ", s.axes.size(), " and ", s.steps.size(),
         " entries; they must match");
  }
  for (std::size_t k = 0; k < n; ++k) {
    if (s.steps[k] == 0) Fail("a step is 0 (steps entry ", k, ")");
  }
  return s;
}

class DynamicSliceKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const SliceSpec spec = ReadSliceSpec(ctx);
    const std::vector<int> axes = UniqueAxes(spec.axes, x.rank());
    const std::vector<int64_t> strides = Strides(x.dims);
    StridedView view{x.dims, strides, 0};
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const auto axis = ToSize(axes[k]);
      const int64_t step = spec.steps[k];
      const SliceRange r = ClampSlice(x.dims[axis], spec.starts[k], spec.ends[k], step);
      if (r.length > 0) view.offset += r.start * strides[axis];
      view.lens[axis] = r.length;
      // With two or more elements |step| is below the dimension, so this cannot overflow.
      view.steps[axis] = r.length > 1 ? step * strides[axis] : 0;
    }
    WriteView(ctx, x, view.lens, view);
  }
};

// --- DynamicPad ------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge };

PadMode ParsePadMode(const std::string& mode) {
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  Fail("unknown padding mode '", mode, "'; expected constant, reflect or edge");
}

// One dimension of a pad: |crop| elements removed at its start and |kept|
// left (negative pads remove first), then |before| and |after| added.
struct PadDim {
  int64_t crop = 0, kept = 0, before = 0, after = 0, size = 0;
};

// Dimension |i| of size |d| padded by |b| before and |e| after, with the
// checks of the shape function (PaddedDim) in its words.
PadDim PlanPadDim(int i, int64_t d, int64_t b, int64_t e, PadMode mode) {
  // Each removal checked against d first, so that negating cannot overflow.
  if (b < -d || e < -d || (b < 0 ? -b : 0) > d - (e < 0 ? -e : 0)) {
    Fail("pads ", b, " and ", e, " remove more than the ", d, " elements of dimension ", i);
  }
  PadDim p;
  p.crop = b < 0 ? -b : 0;
  p.kept = d + std::min<int64_t>(b, 0) + std::min<int64_t>(e, 0);
  p.before = std::max<int64_t>(b, 0);
  p.after = std::max<int64_t>(e, 0);
  const bool pads = p.before > 0 || p.after > 0;
  if (mode == PadMode::kReflect && pads && (p.before >= p.kept || p.after >= p.kept)) {
    Fail("reflect padding of dimension ", i, " must be smaller than its size ", p.kept, ", got ", p.before,
         " before and ", p.after, " after");
  }
  if (mode == PadMode::kEdge && pads && p.kept == 0) {
    Fail("edge padding of dimension ", i, " has no edge to repeat: the dimension is empty");
  }
  int64_t padded = 0;
  if (__builtin_add_overflow(p.before, p.after, &padded) || __builtin_add_overflow(p.kept, padded, &p.size)) {
    Fail("padding dimension ", i, " of size ", d, " by ", b, " and ", e, " does not fit in 64 bits");
  }
  return p;
}

// For each output index of dimension |p|, the input index it copies, or -1
// for constant_value.
std::vector<int64_t> PadSources(const PadDim& p, PadMode mode) {
  std::vector<int64_t> out(ToSize(p.size));
  for (int64_t j = 0; j < p.size; ++j) {
    int64_t k = j - p.before;  // in the kept elements
    if (k < 0 || k >= p.kept) {
      if (mode == PadMode::kConstant) {
        out[ToSize(j)] = -1;
        continue;
      }
      if (mode == PadMode::kReflect) {
        k = k < 0 ? -k : 2 * (p.kept - 1) - k;
      } else {
        k = k < 0 ? 0 : p.kept - 1;
      }
    }
    out[ToSize(j)] = p.crop + k;
  }
  return out;
}

// Fills |out| (|out_dims|, not empty) from |x|: output row r (all dims but
// the last) reads the input row its outer indices map to, element by
// element through the last dimension's map.
template <class W>
void FillPadded(const Tensor& x, W* out, const Dims& out_dims, const std::vector<std::vector<int64_t>>& sources,
                W value) {
  const int last = static_cast<int>(out_dims.size()) - 1;
  const W* in = x.as<W>();
  const std::vector<int64_t> in_strides = Strides(x.dims);
  const int64_t width = out_dims.back();
  const std::vector<int64_t>& columns = sources.back();
  const int64_t rows = Product(out_dims, 0, last);
  ParallelFor(rows, width, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      W* dst = out + row * width;
      int64_t src = 0;
      bool inside = true;
      for (int64_t k = last - 1, rest = row; k >= 0; --k) {
        const int64_t m = sources[ToSize(k)][ToSize(rest % out_dims[ToSize(k)])];
        rest /= out_dims[ToSize(k)];
        inside = inside && m >= 0;
        src += m * in_strides[ToSize(k)];
      }
      if (!inside) {
        std::fill(dst, dst + width, value);
        continue;
      }
      for (int64_t j = 0; j < width; ++j) {
        const int64_t m = columns[ToSize(j)];
        dst[j] = m < 0 ? value : in[src + m];
      }
    }
  });
}

class DynamicPadKernel {
 public:
  explicit DynamicPadKernel(const InitContext& init) : mode_(ParsePadMode(init.String("mode"))) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<int64_t> pads = ReadVector(ctx, 1, "pads");
    const Tensor value = ctx.input(2);
    if (value.num_elements != 1) {
      Fail("constant_value must be a scalar or have one element, got shape ", DimsString(value.dims));
    }
    const int rank = x.rank();
    if (static_cast<int64_t>(pads.size()) != 2 * int64_t{rank}) {
      Fail("pads has ", pads.size(), " entries for a tensor of rank ", rank, "; it needs ", 2 * rank,
           " (every dimension's begin, then every dimension's end)");
    }
    std::vector<PadDim> plan;
    Dims out_dims;
    for (int i = 0; i < rank; ++i) {
      plan.push_back(PlanPadDim(i, x.dim(i), pads[ToSize(i)], pads[ToSize(rank + i)], mode_));
      out_dims.push_back(plan.back().size);
    }
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    const std::size_t element_size = ElementSize(x.dtype);
    if (rank == 0) {
      std::memcpy(out.data, x.data, element_size);
      return;
    }
    std::vector<std::vector<int64_t>> sources;
    for (const PadDim& p : plan) sources.push_back(PadSources(p, mode_));
    DispatchBySize(element_size, [&]<class W>() {
      W fill;
      std::memcpy(&fill, value.data, sizeof fill);
      FillPadded<W>(x, out.as<W>(), out_dims, sources, fill);
    });
  }

 private:
  const PadMode mode_;
};

// --- DynamicTile -----------------------------------------------------------------

// Reads the input as an output of shape [m0, d0, m1, d1, ...] whose repeat
// dimensions m have step 0.
class DynamicTileKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<int64_t> repeats = ReadVector(ctx, 1, "repeats");
    if (static_cast<int64_t>(repeats.size()) != x.rank()) {
      Fail("repeats has ", repeats.size(), " entries for a tensor of rank ", x.rank());
    }
    const std::vector<int64_t> strides = Strides(x.dims);
    StridedView view;
    Dims out_dims;
    for (int i = 0; i < x.rank(); ++i) {
      const int64_t m = repeats[ToSize(i)], d = x.dim(i);
      if (m < 0) Fail("repeats must be >= 0, got ", m, " for dimension ", i);
      int64_t tiled = 0;
      if (__builtin_mul_overflow(d, m, &tiled)) {
        Fail("dimension ", i, " (", d, ") times ", m, " does not fit in 64 bits");
      }
      view.lens.insert(view.lens.end(), {m, d});
      view.steps.insert(view.steps.end(), {0, strides[ToSize(i)]});
      out_dims.push_back(tiled);
    }
    WriteView(ctx, x, out_dims, view);
  }
};

// --- DynamicSum ------------------------------------------------------------------

// The unsigned type integer sums wrap in: at least unsigned int, so that
// narrow types do not promote to int.
template <class T>
using WrapType = std::make_unsigned_t<std::conditional_t<(sizeof(T) < sizeof(int)), int, T>>;

// What a sum of T accumulates in: double for f32 and f64, float for f16
// and bf16, the wrapping type for integers.
template <class T, bool = kIsFloat<T>>
struct SumAcc {
  using type = std::conditional_t<std::is_floating_point_v<T>, double, float>;
};
template <class T>
struct SumAcc<T, false> {
  using type = WrapType<T>;
};

// Output columns accumulated together when the kept dimensions end in a
// contiguous run (a reduction of leading axes): the input is then read
// row by row.
constexpr int64_t kColumns = 64;

// Adds the elements of the reduced index space of |p| from |base| into
// acc[0, width) (width contiguous columns from there).
template <class T, class Acc>
void SumInto(const T* x, int64_t base, const sdk::ReduceLayout& p, int64_t width, Acc* acc) {
  const std::size_t n = p.reduced_dims.size();
  const int64_t inner = p.reduced_dims[n - 1], step = p.reduced_strides[n - 1];
  const int64_t outer = p.num_reduced / inner;
  int64_t index[WEFT_MAX_RANK] = {};
  int64_t offset = base;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* row = x + offset + i * step;
      for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<Acc>(Load(row[j]));
    }
    for (std::size_t k = n - 1; k-- > 0;) {  // the odometer over the outer reduced dims
      offset += p.reduced_strides[k];
      if (++index[k] < p.reduced_dims[k]) break;
      offset -= p.reduced_strides[k] * p.reduced_dims[k];
      index[k] = 0;
    }
  }
}

template <class T>
T StoreSum(typename SumAcc<T>::type a) {
  if constexpr (kIsFloat<T>) {
    return StoreAs<T>(static_cast<typename ComputeType<T>::type>(a));
  } else {
    return static_cast<T>(a);  // modular since C++20
  }
}

template <class T>
void ReduceSum(const T* x, T* y, const sdk::ReduceLayout& p) {
  using Acc = typename SumAcc<T>::type;
  Dims lens = p.kept_dims;
  std::vector<int64_t> steps = p.kept_strides;
  // The kept dimensions' contiguous tail, if any, in blocks of kColumns.
  int64_t columns = 1;
  if (steps.back() == 1 && lens.back() > 1) {
    columns = lens.back();
    lens.back() = CeilDiv(columns, kColumns);
    steps.back() = kColumns;
  }
  const int64_t blocks = CeilDiv(columns, kColumns);
  ForEachRow(lens, steps, 0, std::max<int64_t>(1, p.num_reduced) * std::min(columns, kColumns),
             [&](int64_t row, int64_t offset) {
               const int64_t first = (row % blocks) * kColumns;
               const int64_t width = std::min(kColumns, columns - first);
               Acc acc[kColumns] = {};
               if (p.num_reduced > 0) SumInto<T, Acc>(x, offset, p, width, acc);
               T* out = y + (row / blocks) * columns + first;
               for (int64_t j = 0; j < width; ++j) out[j] = StoreSum<T>(acc[j]);
             });
}

template <class T>
class DynamicSumKernel {
 public:
  explicit DynamicSumKernel(const InitContext& init)
      : keep_dims_(init.Bool("keep_dims")), noop_(init.Bool("noop_with_empty_axes")) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<int64_t> axes = ReadVector(ctx, 1, "axes");
    if (axes.empty() && noop_) {
      ctx.forward(0, 0);
      return;
    }
    std::vector<bool> reduce(ToSize(x.rank()), axes.empty());
    for (int axis : UniqueAxes(axes, x.rank())) reduce[ToSize(axis)] = true;
    Dims out_dims;
    for (int i = 0; i < x.rank(); ++i) {
      if (!reduce[ToSize(i)]) {
        out_dims.push_back(x.dim(i));
      } else if (keep_dims_) {
        out_dims.push_back(1);
      }
    }
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    ReduceSum<T>(x.as<T>(), out.as<T>(), sdk::PlanReduce(x.dims, reduce));
  }

 private:
  const bool keep_dims_, noop_;
};

// --- DynamicExpandDims, DynamicSqueeze -------------------------------------------

class DynamicExpandDimsKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<int64_t> axes = ReadVector(ctx, 1, "axes");
    const int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
    if (out_rank > WEFT_MAX_RANK) {
      Fail("the result would have rank ", out_rank, ", above the maximum of ", WEFT_MAX_RANK);
    }
    const std::vector<int> inserted = UniqueAxes(axes, static_cast<int>(out_rank));
    Dims dims;
    int next = 0;
    for (int i = 0; i < out_rank; ++i) dims.push_back(Contains(inserted, i) ? 1 : x.dim(next++));
    ctx.forward_reshaped(0, 0, dims);
  }
};

class DynamicSqueezeKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<int64_t> axes = ReadVector(ctx, 1, "axes");
    const std::vector<int> removed = UniqueAxes(axes, x.rank());
    for (std::size_t k = 0; k < removed.size(); ++k) {
      const int64_t d = x.dim(removed[k]);
      if (d != 1) Fail("cannot squeeze axis ", axes[k], " of ", DimsString(x.dims), ": its size is ", d, ", not 1");
    }
    Dims dims;
    for (int i = 0; i < x.rank(); ++i) {
      if (!Contains(removed, i)) dims.push_back(x.dim(i));
    }
    ctx.forward_reshaped(0, 0, dims);
  }
};

// --- DynamicSplit ----------------------------------------------------------------

// Checks |split| (entries >= 0 summing to dimension |axis| of |x|) as the
// shape function's CheckSplit does.
void CheckSplit(const std::vector<int64_t>& split, const Tensor& x, int axis) {
  int64_t sum = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    if (split[i] < 0) Fail("split entries must be >= 0, got ", split[i], " at position ", i);
    if (__builtin_add_overflow(sum, split[i], &sum)) Fail("split's entries ", DimsString(split), " sum past 2^63");
  }
  if (sum != x.dim(axis)) {
    Fail("split's entries ", DimsString(split), " sum to ", sum, ", but dimension ", axis, " of ", DimsString(x.dims),
         " has size ", x.dim(axis));
  }
}

class DynamicSplitKernel {
 public:
  explicit DynamicSplitKernel(const InitContext& init) : num_split_(init.Int("num_split")), axis_(init.Int("axis")) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<int64_t> split = ReadVector(ctx, 1, "split");
    if (static_cast<int64_t>(split.size()) != num_split_) {
      Fail("split has ", split.size(), " entries for num_split ", num_split_);
    }
    const int axis = NormalizeAxis(axis_, x.rank());
    CheckSplit(split, x, axis);
    const auto n = ToSize(num_split_);
    std::vector<Tensor> parts;
    std::vector<std::size_t> position(n);  // of each part in an input row, in bytes
    const std::size_t element_size = ElementSize(x.dtype);
    const int64_t inner = Product(x.dims, axis + 1, x.rank());
    const std::size_t row_bytes = ToSize(x.dim(axis) * inner) * element_size;
    std::size_t at = 0;
    for (std::size_t i = 0; i < n; ++i) {
      Dims dims = x.dims;
      dims[ToSize(axis)] = split[i];
      parts.push_back(ctx.allocate_output(static_cast<int>(i), dims));
      position[i] = at;
      at += ToSize(split[i] * inner) * element_size;
    }
    if (x.num_elements == 0) return;
    const int64_t outer = Product(x.dims, 0, axis);
    const auto* src = static_cast<const char*>(x.data);
    ParallelFor(outer * num_split_, CopyCost(row_bytes / n), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const std::size_t o = ToSize(p / num_split_), i = ToSize(p % num_split_);
        const std::size_t bytes = ToSize(split[i] * inner) * element_size;
        if (bytes > 0)
          std::memcpy(static_cast<char*>(parts[i].data) + o * bytes, src + o * row_bytes + position[i], bytes);
      }
    });
  }

 private:
  const int64_t num_split_, axis_;
};

}  // namespace

// --- Registration ----------------------------------------------------------------

void RegisterDynamicShapeKernels(KernelRegistry& r) {
  for (weft_dtype_t index : kIndexTypes) {
    for (weft_dtype_t t : kFixedSizeTypes) {  // {all} but strings; {numeric, bool}
      AddKernel<"DynamicSlice", DynamicSliceKernel>(r, {{"T", t}, {"Tidx", index}}, 0,
                                                    {"starts", "ends", "axes", "steps"});
      AddKernel<"DynamicPad", DynamicPadKernel>(r, {{"T", t}, {"Tidx", index}}, 0, {"pads", "constant_value"});
      AddKernel<"DynamicTile", DynamicTileKernel>(r, {{"T", t}, {"Tidx", index}}, 0, {"repeats"});
      AddKernel<"DynamicExpandDims", DynamicExpandDimsKernel>(r, {{"T", t}, {"Tidx", index}}, WEFT_KERNEL_INLINE,
                                                              {"axes"});
      AddKernel<"DynamicSqueeze", DynamicSqueezeKernel>(r, {{"T", t}, {"Tidx", index}}, WEFT_KERNEL_INLINE, {"axes"});
      AddKernel<"DynamicSplit", DynamicSplitKernel>(r, {{"T", t}, {"Tidx", index}}, 0, {"split"});
    }
    ForEachNumericType([&]<class T>() {
      AddKernel<"DynamicSum", DynamicSumKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}, {"Tidx", index}}, 0,
                                                                 {"axes"});
    });
  }
}

}  // namespace weft::cpu
