// Array kernels: ops that move elements without arithmetic (Transpose,
// Concat, Split, Slice, StridedSlice, Tile, Reverse, Gather, GatherNd), and
// ops that build arrays (Pad, ScatterNd, OneHot, Fill, ZerosLike, OnesLike,
// Range).
//
// Data movement is by element size, so one kernel serves every fixed-size
// dtype, and contiguous runs are copied with memcpy. Slice, StridedSlice,
// Reverse, Tile and Transpose are all one strided copy (CopyStrided, from
// strided_copy.h): the output in row-major order, read from the input at an
// offset plus a step per dimension, negative for Reverse and 0 for Tile's
// repeats.
//
// String tensors are not supported by the CPU kernels yet: their elements
// point into storage their tensor owns, so they cannot be copied bytewise.
// No kernel is registered for them; such a node fails to find a kernel.
//
// Every check of the ops' shape functions is repeated here, with the same
// messages, so a shape only known at run time fails the same way.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "../kernel_framework.h"
#include "kernel_util.h"
#include "strided_copy.h"

namespace weft::cpu {
namespace {

// --- Helpers ---------------------------------------------------------------------

// memcpy that accepts the null pointers of empty tensors when |bytes| is 0.
void CopyBytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

// |v| as a T, as Cast converts: rounded for floats, truncated toward zero
// and saturated for integers (NaN gives 0), != 0 for bool.
template <class T>
T FromDouble(double v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (kIsFloat<T>) {
    return StoreAs<T>(static_cast<typename ComputeType<T>::type>(v));
  } else {
    if (std::isnan(v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// a + b; integers wrap.
template <class T>
T AddOne(T a, T b) {
  if constexpr (kIsFloat<T>) {
    return StoreAs<T>(Load(a) + Load(b));
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  }
}

// "[1, 7]": |n| integers from |values|, for messages.
template <class Index>
std::string TupleString(const Index* values, int64_t n) {
  std::string out = "[";
  for (int64_t i = 0; i < n; ++i) out += (i > 0 ? ", " : "") + std::to_string(static_cast<int64_t>(values[i]));
  return out + "]";
}

// --- Transpose, Slice, StridedSlice, Tile, Reverse -------------------------------

class TransposeKernel {
 public:
  explicit TransposeKernel(const InitContext& init) : perm_(init.Ints("perm")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    std::vector<int64_t> perm = perm_;
    if (perm.empty()) {
      for (int i = x.rank() - 1; i >= 0; --i) perm.push_back(i);
    }
    if (static_cast<int>(perm.size()) != x.rank()) {
      Fail("perm ", DimsString(perm), " has ", perm.size(), " entries for a tensor of rank ", x.rank());
    }
    const std::vector<int64_t> strides = Strides(x.dims);
    std::vector<bool> seen(perm.size(), false);
    StridedView view;
    for (int64_t p : perm) {
      const int axis = NormalizeAxis(p, x.rank(), "perm entry");
      if (seen[ToSize(axis)]) Fail("perm ", DimsString(perm), " repeats ", p);
      seen[ToSize(axis)] = true;
      view.lens.push_back(x.dim(axis));
      view.steps.push_back(strides[ToSize(axis)]);
    }
    WriteView(ctx, x, view.lens, view);
  }

 private:
  const std::vector<int64_t> perm_;
};

class SliceKernel {
 public:
  explicit SliceKernel(const InitContext& init) : begin_(init.Ints("begin")), size_(init.Ints("size")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    if (begin_.size() != size_.size()) Fail("begin has ", begin_.size(), " entries and size ", size_.size());
    if (static_cast<int>(begin_.size()) != x.rank()) {
      Fail("begin and size have ", begin_.size(), " entries for a tensor of rank ", x.rank());
    }
    const std::vector<int64_t> strides = Strides(x.dims);
    StridedView view;
    view.steps = strides;
    for (int i = 0; i < x.rank(); ++i) {
      const int64_t b = begin_[ToSize(i)], s = size_[ToSize(i)], d = x.dim(i);
      if (b < 0 || s < -1) Fail("begin ", b, " / size ", s, " in dimension ", i, " are invalid");
      if (b > d || s > d - b) {
        Fail("a slice of size ", s, " from ", b, " is outside dimension ", i, " of ", DimsString(x.dims));
      }
      view.lens.push_back(s >= 0 ? s : d - b);
      view.offset += b * strides[ToSize(i)];
    }
    WriteView(ctx, x, view.lens, view);
  }

 private:
  const std::vector<int64_t> begin_, size_;
};

// NumPy basic indexing with TensorFlow's masks; the spec is read exactly as
// StridedSliceShape reads it.
class StridedSliceKernel {
 public:
  explicit StridedSliceKernel(const InitContext& init)
      : begin_(init.Ints("begin")),
        end_(init.Ints("end")),
        strides_(init.Ints("strides")),
        masks_{init.Int("begin_mask"), init.Int("end_mask"), init.Int("ellipsis_mask"), init.Int("new_axis_mask"),
               init.Int("shrink_axis_mask")} {
    if (begin_.size() != end_.size() || begin_.size() != strides_.size()) {
      Fail("begin, end and strides have ", begin_.size(), ", ", end_.size(), " and ", strides_.size(),
           " entries; they must match");
    }
    for (int64_t s : strides_) {
      if (s == 0) Fail("a stride is 0");
    }
    if ((masks_.ellipsis & (masks_.ellipsis - 1)) != 0) Fail("more than one ellipsis in ellipsis_mask");
  }

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const StridedSliceGrid g = PlanStridedSlice(x.dims, begin_, end_, strides_, masks_);
    StridedView view;  // over the input's dims
    view.lens = g.lens;
    view.steps = g.steps;
    view.offset = g.offset;
    WriteView(ctx, x, g.sliced, view);
  }

 private:
  const std::vector<int64_t> begin_, end_, strides_;
  const StridedSliceMasks masks_;
};

// Tile reads the input as an output of shape [m0, d0, m1, d1, ...] whose
// repeat dimensions m have step 0.
class TileKernel {
 public:
  explicit TileKernel(const InitContext& init) : multiples_(init.Ints("multiples")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    if (static_cast<int>(multiples_.size()) != x.rank()) {
      Fail("multiples has ", multiples_.size(), " entries for a tensor of rank ", x.rank());
    }
    const std::vector<int64_t> strides = Strides(x.dims);
    StridedView view;
    Dims out_dims;
    for (int i = 0; i < x.rank(); ++i) {
      const int64_t m = multiples_[ToSize(i)];
      if (m < 0) Fail("multiples must be >= 0, got ", m);
      view.lens.insert(view.lens.end(), {m, x.dim(i)});
      view.steps.insert(view.steps.end(), {0, strides[ToSize(i)]});
      out_dims.push_back(sdk::MulSize(m, x.dim(i), "tiled size"));
    }
    WriteView(ctx, x, out_dims, view);
  }

 private:
  const std::vector<int64_t> multiples_;
};

class ReverseKernel {
 public:
  explicit ReverseKernel(const InitContext& init) : axis_(init.Ints("axis")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    StridedView view;
    view.lens = x.dims;
    view.steps = Strides(x.dims);
    std::vector<bool> seen(ToSize(x.rank()), false);
    for (int64_t a : axis_) {
      const int axis = NormalizeAxis(a, x.rank());
      if (seen[ToSize(axis)]) Fail("axis ", a, " is repeated");
      seen[ToSize(axis)] = true;
      if (x.dim(axis) == 0) continue;
      view.offset += (x.dim(axis) - 1) * view.steps[ToSize(axis)];
      view.steps[ToSize(axis)] = -view.steps[ToSize(axis)];
    }
    WriteView(ctx, x, x.dims, view);
  }

 private:
  const std::vector<int64_t> axis_;
};

// --- Concat, Split ---------------------------------------------------------------

class ConcatKernel {
 public:
  explicit ConcatKernel(const InitContext& init) : axis_(init.Int("axis")) {}
  void Compute(Context& ctx) {
    const int n = ctx.num_inputs();
    std::vector<Tensor> in;
    for (int i = 0; i < n; ++i) in.push_back(ctx.input(i));
    const int rank = in[0].rank();
    if (rank == 0) Fail("cannot concatenate scalars; expand them to rank 1 first");
    const int axis = NormalizeAxis(axis_, rank);
    Dims out_dims = in[0].dims;
    out_dims[ToSize(axis)] = 0;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = in[ToSize(i)];
      if (t.rank() != rank) {
        Fail("input ", i, " has shape ", DimsString(t.dims), ", of rank ", t.rank(), ", but input 0 has rank ", rank);
      }
      for (int d = 0; d < rank; ++d) {
        if (d != axis && t.dim(d) != out_dims[ToSize(d)]) {
          Fail("input ", i, " has shape ", DimsString(t.dims), ", which differs from the others in dimension ", d, " (",
               t.dim(d), " vs ", out_dims[ToSize(d)], "); only axis ", axis, " may differ");
        }
      }
      out_dims[ToSize(axis)] += t.dim(axis);
    }
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    // Each of the |outer| output rows is the inputs' rows side by side.
    const int64_t outer = Product(out_dims, 0, ToSize(axis));
    const std::size_t element_size = ElementSize(out.dtype);
    std::vector<std::size_t> bytes(ToSize(n)), position(ToSize(n));
    std::size_t row_bytes = 0;
    for (std::size_t i = 0; i < ToSize(n); ++i) {
      bytes[i] = ToSize(in[i].num_elements / outer) * element_size;
      position[i] = row_bytes;
      row_bytes += bytes[i];
    }
    auto* dst = static_cast<char*>(out.data);
    ParallelFor(outer * n, CopyCost(row_bytes / ToSize(n)), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const std::size_t o = ToSize(p / n), i = ToSize(p % n);
        CopyBytes(dst + o * row_bytes + position[i], static_cast<const char*>(in[i].data) + o * bytes[i], bytes[i]);
      }
    });
  }

 private:
  const int64_t axis_;
};

class SplitKernel {
 public:
  explicit SplitKernel(const InitContext& init) : num_split_(init.Int("num_split")), axis_(init.Int("axis")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int axis = NormalizeAxis(axis_, x.rank());
    const int64_t n = num_split_;
    if (x.dim(axis) % n != 0) {
      Fail("cannot split dimension ", axis, " of ", DimsString(x.dims), " into ", n, " equal parts");
    }
    Dims part_dims = x.dims;
    part_dims[ToSize(axis)] /= n;
    std::vector<Tensor> parts;
    for (int i = 0; i < n; ++i) parts.push_back(ctx.allocate_output(i, part_dims));
    if (x.num_elements == 0) return;
    // Each of the |outer| input rows is the parts' rows side by side.
    const int64_t outer = Product(x.dims, 0, ToSize(axis));
    const std::size_t bytes = ToSize(x.num_elements / outer / n) * ElementSize(x.dtype);
    const auto* src = static_cast<const char*>(x.data);
    ParallelFor(outer * n, CopyCost(bytes), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const std::size_t o = ToSize(p / n), i = ToSize(p % n);
        std::memcpy(static_cast<char*>(parts[i].data) + o * bytes, src + ToSize(p) * bytes, bytes);
      }
    });
  }

 private:
  const int64_t num_split_, axis_;
};

// --- Gather, GatherNd, ScatterNd -------------------------------------------------

template <class Index>
class GatherKernel {
 public:
  explicit GatherKernel(const InitContext& init) : axis_(init.Int("axis")) {}
  void Compute(Context& ctx) {
    const Tensor params = ctx.input(0), indices = ctx.input(1);
    if (params.rank() == 0) Fail("params must have rank >= 1");
    const int axis = NormalizeAxis(axis_, params.rank());
    Dims out_dims(params.dims.begin(), params.dims.begin() + axis);
    out_dims.insert(out_dims.end(), indices.dims.begin(), indices.dims.end());
    out_dims.insert(out_dims.end(), params.dims.begin() + axis + 1, params.dims.end());
    const Index* idx = indices.as<Index>();
    const int64_t limit = params.dim(axis);
    for (int64_t i = 0; i < indices.num_elements; ++i) {
      const auto v = static_cast<int64_t>(idx[i]);
      if (v < 0 || v >= limit) {
        Fail("index ", v, " at position ", i, " is out of range [0, ", limit, ") for axis ", axis, " of params ",
             DimsString(params.dims));
      }
    }
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    // Output row (o, j) is params row (o, idx[j]), of |inner| elements.
    const int64_t outer = Product(params.dims, 0, ToSize(axis));
    const int64_t n = indices.num_elements;
    const std::size_t row_bytes =
        ToSize(Product(params.dims, ToSize(axis) + 1, params.dims.size())) * ElementSize(params.dtype);
    const auto* src = static_cast<const char*>(params.data);
    auto* dst = static_cast<char*>(out.data);
    ParallelFor(outer * n, CopyCost(row_bytes), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t row = (p / n) * limit + static_cast<int64_t>(idx[p % n]);
        std::memcpy(dst + ToSize(p) * row_bytes, src + ToSize(row) * row_bytes, row_bytes);
      }
    });
  }

 private:
  const int64_t axis_;
};

// The element offsets into a tensor of |dims| that the rows of |indices|
// (its last dimension indexing the first dims) address; |what| names the
// tensor in the error for an index out of range.
template <class Index>
std::vector<int64_t> NdOffsets(const Tensor& indices, const Dims& dims, const char* what) {
  const int64_t depth = indices.dims.back();
  const int64_t n = Product(indices.dims, 0, indices.dims.size() - 1);
  const std::vector<int64_t> strides = Strides(dims);
  const Index* idx = indices.as<Index>();
  std::vector<int64_t> offsets(ToSize(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    const Index* tuple = idx + i * depth;
    for (int64_t k = 0; k < depth; ++k) {
      const auto v = static_cast<int64_t>(tuple[k]);
      if (v < 0 || v >= dims[ToSize(k)]) {
        Fail("index ", TupleString(tuple, depth), " at position ", i, " is out of range for ", what, " of shape ",
             DimsString(dims), ": ", v, " is not in [0, ", dims[ToSize(k)], ") in dimension ", k);
      }
      offsets[ToSize(i)] += v * strides[ToSize(k)];
    }
  }
  return offsets;
}

template <class Index>
class GatherNdKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor params = ctx.input(0), indices = ctx.input(1);
    if (indices.rank() < 1) Fail("indices must have rank >= 1");
    const int64_t depth = indices.dims.back();
    if (depth > params.rank()) {
      Fail("indices' last dimension (", depth, ") is larger than params' rank (", params.rank(), ")");
    }
    Dims out_dims(indices.dims.begin(), indices.dims.end() - 1);
    out_dims.insert(out_dims.end(), params.dims.begin() + depth, params.dims.end());
    const std::vector<int64_t> offsets = NdOffsets<Index>(indices, params.dims, "params");
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    const std::size_t element_size = ElementSize(params.dtype);
    const std::size_t slice_bytes = ToSize(Product(params.dims, ToSize(depth), params.dims.size())) * element_size;
    const auto* src = static_cast<const char*>(params.data);
    auto* dst = static_cast<char*>(out.data);
    ParallelFor(static_cast<int64_t>(offsets.size()), CopyCost(slice_bytes), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        std::memcpy(dst + ToSize(i) * slice_bytes, src + ToSize(offsets[ToSize(i)]) * element_size, slice_bytes);
      }
    });
  }
};

template <class T, class Index>
class ScatterNdKernel {
 public:
  explicit ScatterNdKernel(const InitContext& init) : shape_(init.Ints("shape")) {
    for (int64_t d : shape_) {
      if (d < 0) Fail("shape ", DimsString(shape_), " has a negative dimension");
    }
  }
  void Compute(Context& ctx) {
    const Tensor indices = ctx.input(0), updates = ctx.input(1);
    if (indices.rank() < 1) Fail("indices must have rank >= 1");
    const int64_t depth = indices.dims.back();
    if (depth > static_cast<int64_t>(shape_.size())) {
      Fail("indices' last dimension (", depth, ") is larger than the output rank (", shape_.size(), ")");
    }
    Dims expect(indices.dims.begin(), indices.dims.end() - 1);
    expect.insert(expect.end(), shape_.begin() + depth, shape_.end());
    if (updates.dims != expect) {
      Fail("updates has shape ", DimsString(updates.dims), ", expected ", DimsString(expect));
    }
    const std::vector<int64_t> offsets = NdOffsets<Index>(indices, shape_, "the output");
    Tensor out = ctx.allocate_output(0, shape_);
    if (out.num_elements == 0) return;
    T* dst = out.as<T>();
    const T* src = updates.as<T>();
    const int64_t slice = Product(shape_, ToSize(depth), shape_.size());
    const auto n = static_cast<int64_t>(offsets.size());
    std::memset(dst, 0, ToSize(out.num_elements) * sizeof(T));  // +0 in every numeric type
    // Split over the slice's elements, each adding every update in order:
    // repeated indices add up deterministically and without races.
    ParallelFor(slice, 1 + n, [&](int64_t begin, int64_t end) {
      for (int64_t i = 0; i < n; ++i) {
        T* o = dst + offsets[ToSize(i)];
        const T* u = src + i * slice;
        for (int64_t j = begin; j < end; ++j) o[j] = AddOne<T>(o[j], u[j]);
      }
    });
  }

 private:
  const std::vector<int64_t> shape_;
};

// --- Pad -------------------------------------------------------------------------

// Pads the innermost dimension while copying the input rows into place,
// then each outer dimension, innermost first, by filling (CONSTANT) or
// mirroring (REFLECT, SYMMETRIC) whole slabs of the output itself: a slab
// of dimension k is complete once the dimensions inside it are padded.
template <class T>
class PadKernel {
 public:
  explicit PadKernel(const InitContext& init)
      : paddings_(init.Ints("paddings")),
        mode_(ParseMode(init.String("mode"))),
        value_(FromDouble<T>(init.Float("constant_value"))) {
    if (paddings_.size() % 2 != 0) Fail("paddings has an odd number of entries (", paddings_.size(), ")");
  }

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int rank = x.rank();
    if (static_cast<int>(paddings_.size() / 2) != rank) {
      Fail("paddings has ", paddings_.size() / 2, " (before, after) pairs for a tensor of rank ", rank);
    }
    Dims out_dims;
    for (int i = 0; i < rank; ++i) {
      const int64_t before = Before(i), after = After(i), d = x.dim(i);
      if (before < 0 || after < 0) Fail("paddings must be >= 0, got ", before, ", ", after, " for dimension ", i);
      if (mode_ != kConstant && (before > 0 || after > 0)) {
        const int64_t limit = mode_ == kReflect ? d - 1 : d;
        if (before > limit || after > limit) {
          Fail(mode_ == kReflect ? "REFLECT" : "SYMMETRIC", " padding of dimension ", i, " (size ", d,
               ") must be at most ", limit, ", got ", before, ", ", after);
        }
      }
      out_dims.push_back(sdk::AddSize(sdk::AddSize(d, before, "padded size"), after, "padded size"));
    }
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    const T* in = x.as<T>();
    T* o = out.as<T>();
    if (rank == 0) {
      o[0] = in[0];
      return;
    }
    const std::vector<int64_t> strides = Strides(out_dims);
    // Where input element [0, ..., 0] lands, and the grid of input rows.
    int64_t origin = 0;
    for (int i = 0; i < rank; ++i) origin += Before(i) * strides[ToSize(i)];
    const int last = rank - 1;
    const int64_t width = x.dim(last), before = Before(last), after = After(last);
    const Dims row_lens(x.dims.begin(), x.dims.end() - 1);
    const std::vector<int64_t> row_steps(strides.begin(), strides.end() - 1);
    ForEachRow(row_lens, row_steps, origin - before, out_dims.back(), [&](int64_t row, int64_t offset) {
      const T* src = in + row * width;
      T* dst = o + offset;
      for (int64_t j = 0; j < before; ++j) dst[j] = mode_ == kConstant ? value_ : src[Mirror(before - j)];
      CopyBytes(dst + before, src, ToSize(width) * sizeof(T));
      for (int64_t j = 0; j < after; ++j) {
        dst[before + width + j] = mode_ == kConstant ? value_ : src[width - 1 - Mirror(j + 1)];
      }
    });
    for (int k = last - 1; k >= 0; --k) {
      const int64_t d = x.dim(k), pad_before = Before(k), pad_after = After(k);
      if (pad_before == 0 && pad_after == 0) continue;
      const int64_t slab = strides[ToSize(k)];
      // The interior positions of dimensions [0, k), at dimension k's first interior slab.
      const Dims lens(x.dims.begin(), x.dims.begin() + k);
      const std::vector<int64_t> steps(strides.begin(), strides.begin() + k);
      int64_t base = pad_before * slab;
      for (int i = 0; i < k; ++i) base += Before(i) * strides[ToSize(i)];
      ForEachRow(lens, steps, base, (pad_before + pad_after) * slab, [&](int64_t, int64_t offset) {
        T* first = o + offset;  // interior slab 0 of dimension k
        auto fill = [&](int64_t position, int64_t source) {
          T* dst = first + position * slab;
          if (mode_ == kConstant) {
            std::fill(dst, dst + slab, value_);
          } else {
            std::memcpy(dst, first + source * slab, ToSize(slab) * sizeof(T));
          }
        };
        for (int64_t j = 1; j <= pad_before; ++j) fill(-j, Mirror(j));
        for (int64_t j = 1; j <= pad_after; ++j) fill(d - 1 + j, d - 1 - Mirror(j));
      });
    }
  }

 private:
  enum Mode { kConstant, kReflect, kSymmetric };

  static Mode ParseMode(const std::string& mode) {
    if (mode == "CONSTANT") return kConstant;
    if (mode == "REFLECT") return kReflect;
    if (mode == "SYMMETRIC") return kSymmetric;
    Fail("unknown padding mode '", mode, "'; expected CONSTANT, REFLECT or SYMMETRIC");
  }

  int64_t Before(int i) const { return paddings_[ToSize(2 * i)]; }
  int64_t After(int i) const { return paddings_[ToSize(2 * i + 1)]; }

  // The input index, from the near edge, that the padding element |j| >= 1
  // places away from that edge mirrors.
  int64_t Mirror(int64_t j) const { return mode_ == kReflect ? j : j - 1; }

  const std::vector<int64_t> paddings_;
  const Mode mode_;
  const T value_;
};

// --- OneHot, Fill, ZerosLike, OnesLike, Range ------------------------------------

template <class T, class Index>
class OneHotKernel {
 public:
  explicit OneHotKernel(const InitContext& init)
      : depth_(init.Int("depth")),
        axis_(init.Int("axis")),
        on_(FromDouble<T>(init.Float("on_value"))),
        off_(FromDouble<T>(init.Float("off_value"))) {
    if (depth_ < 0) Fail("depth must be >= 0, got ", depth_);
  }
  void Compute(Context& ctx) {
    const Tensor indices = ctx.input(0);
    const int axis = NormalizeAxis(axis_, indices.rank() + 1);
    Dims out_dims = indices.dims;
    out_dims.insert(out_dims.begin() + axis, depth_);
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    // Output [o, k, i] is on_ where indices [o, i] == k.
    const int64_t inner = Product(indices.dims, ToSize(axis), indices.dims.size());
    const Index* idx = indices.as<Index>();
    T* o = out.as<T>();
    ParallelFor(out.num_elements, 1, [&](int64_t begin, int64_t end) { std::fill(o + begin, o + end, off_); });
    ParallelFor(indices.num_elements, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const auto k = static_cast<int64_t>(idx[p]);
        if (k >= 0 && k < depth_) o[((p / inner) * depth_ + k) * inner + p % inner] = on_;
      }
    });
  }

 private:
  const int64_t depth_, axis_;
  const T on_, off_;
};

template <class Index>
class FillKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor dims = ctx.input(0), value = ctx.input(1);
    if (dims.rank() != 1) Fail("dims must be a 1-D tensor, got shape ", DimsString(dims.dims));
    if (value.rank() != 0) Fail("value must be a scalar, got ", DimsString(value.dims));
    const Dims out_dims(dims.as<Index>(), dims.as<Index>() + dims.num_elements);
    for (int64_t d : out_dims) {
      if (d < 0) Fail("dims ", DimsString(out_dims), " has a negative dimension");
    }
    Tensor out = ctx.allocate_output(0, out_dims);
    DispatchBySize(ElementSize(value.dtype), [&]<class W>() {
      W* o = out.as<W>();
      const W v = *value.as<W>();
      ParallelFor(out.num_elements, 1, [&](int64_t begin, int64_t end) { std::fill(o + begin, o + end, v); });
    });
  }
};

// ZerosLike (kOne false) and OnesLike (true).
template <class T, bool kOne>
class FillLikeKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    Tensor y = ctx.allocate_output(0, x.dims);
    T* o = y.as<T>();
    const T v = FromDouble<T>(kOne ? 1 : 0);
    ParallelFor(y.num_elements, 1, [&](int64_t begin, int64_t end) { std::fill(o + begin, o + end, v); });
  }
};

// start, start + delta, ... up to limit, with the element count that
// RangeShape computes: exactly (in unsigned 64-bit arithmetic) for
// integers, in double for floats.
template <class T>
class RangeKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor start = ctx.input(0), limit = ctx.input(1), delta = ctx.input(2);
    if (start.rank() > 0 || limit.rank() > 0 || delta.rank() > 0) Fail("start, limit and delta must be scalars");
    const T s = *start.as<T>(), l = *limit.as<T>(), d = *delta.as<T>();
    const auto ds = static_cast<double>(s), dl = static_cast<double>(l), dd = static_cast<double>(d);
    if (dd == 0) Fail("delta must not be 0");
    if ((dd > 0 && ds > dl) || (dd < 0 && ds < dl)) {
      Fail("start ", ds, " cannot reach limit ", dl, " with delta ", dd);
    }
    int64_t n;
    if constexpr (std::is_integral_v<T>) {
      const auto us = static_cast<uint64_t>(static_cast<int64_t>(s));
      const auto ul = static_cast<uint64_t>(static_cast<int64_t>(l));
      const auto ud = static_cast<uint64_t>(static_cast<int64_t>(d));
      const uint64_t span = d > 0 ? ul - us : us - ul;
      const uint64_t step = d > 0 ? ud : 0 - ud;
      const uint64_t count = span / step + (span % step != 0 ? 1 : 0);
      if (count > static_cast<uint64_t>(INT64_MAX)) Fail("Range from ", s, " to ", l, " has more than 2^63 elements");
      n = static_cast<int64_t>(count);
    } else {
      if (!std::isfinite(ds) || !std::isfinite(dl) || !std::isfinite(dd)) {
        Fail("start, limit and delta must be finite, got ", ds, ", ", dl, ", ", dd);
      }
      const double count = std::ceil(std::abs((dl - ds) / dd));
      if (!(count < 9223372036854775808.0))
        Fail("Range from ", ds, " to ", dl, " by ", dd, " has 2^63 elements or more");
      n = static_cast<int64_t>(count);
    }
    Tensor out = ctx.allocate_output(0, {n});
    T* o = out.as<T>();
    ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        if constexpr (std::is_integral_v<T>) {
          using U = std::make_unsigned_t<T>;  // wraps past the type's range
          o[i] = static_cast<T>(static_cast<U>(s) + static_cast<U>(i) * static_cast<U>(d));
        } else {
          // The first element is start itself (-0.0 stays -0.0, as NumPy's arange).
          o[i] = i == 0 ? s : static_cast<T>(ds + static_cast<double>(i) * dd);
        }
      }
    });
  }
};

// --- Registration ----------------------------------------------------------------

}  // namespace

void RegisterArrayKernels(KernelRegistry& r) {
  constexpr weft_dtype_t kI32 = WEFT_DTYPE_I32, kI64 = WEFT_DTYPE_I64;
  for (weft_dtype_t t : kFixedSizeTypes) {
    AddKernel<"Transpose", TransposeKernel>(r, {{"T", t}});
    AddKernel<"Concat", ConcatKernel>(r, {{"T", t}});
    AddKernel<"Split", SplitKernel>(r, {{"T", t}});
    AddKernel<"Slice", SliceKernel>(r, {{"T", t}});
    AddKernel<"StridedSlice", StridedSliceKernel>(r, {{"T", t}});
    AddKernel<"Tile", TileKernel>(r, {{"T", t}});
    AddKernel<"Reverse", ReverseKernel>(r, {{"T", t}});
    AddKernel<"Gather", GatherKernel<int32_t>, kI32>(r, {{"T", t}, {"Tindices", kI32}});
    AddKernel<"Gather", GatherKernel<int64_t>, kI64>(r, {{"T", t}, {"Tindices", kI64}});
    AddKernel<"GatherNd", GatherNdKernel<int32_t>, kI32>(r, {{"T", t}, {"Tindices", kI32}});
    AddKernel<"GatherNd", GatherNdKernel<int64_t>, kI64>(r, {{"T", t}, {"Tindices", kI64}});
    AddKernel<"Fill", FillKernel<int32_t>, kI32>(r, {{"T", t}, {"index_type", kI32}}, 0, {"dims"});
    AddKernel<"Fill", FillKernel<int64_t>, kI64>(r, {{"T", t}, {"index_type", kI64}}, 0, {"dims"});
  }
  auto numeric_and_bool = [&r]<class T>() {
    AddKernel<"Pad", PadKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
    AddKernel<"ZerosLike", FillLikeKernel<T, false>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
    AddKernel<"OnesLike", FillLikeKernel<T, true>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
  };
  auto numeric = [&]<class T>() {
    numeric_and_bool.template operator()<T>();
    AddKernel<"ScatterNd", ScatterNdKernel<T, int32_t>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}, {"Tindices", kI32}});
    AddKernel<"ScatterNd", ScatterNdKernel<T, int64_t>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}, {"Tindices", kI64}});
    AddKernel<"OneHot", OneHotKernel<T, uint8_t>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}, {"TI", WEFT_DTYPE_U8}});
    AddKernel<"OneHot", OneHotKernel<T, int32_t>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}, {"TI", kI32}});
    AddKernel<"OneHot", OneHotKernel<T, int64_t>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}, {"TI", kI64}});
  };
  ForEachNumericType(numeric);
  numeric_and_bool.template operator()<bool>();
  AddKernel<"Range", RangeKernel<float>, WEFT_DTYPE_F32>(r, {{"Tidx", WEFT_DTYPE_F32}});
  AddKernel<"Range", RangeKernel<double>, WEFT_DTYPE_F64>(r, {{"Tidx", WEFT_DTYPE_F64}});
  AddKernel<"Range", RangeKernel<int32_t>, kI32>(r, {{"Tidx", kI32}});
  AddKernel<"Range", RangeKernel<int64_t>, kI64>(r, {{"Tidx", kI64}});
}

}  // namespace weft::cpu
