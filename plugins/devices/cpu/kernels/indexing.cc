// Indexing kernels: ops that address elements by an index per element along
// an axis (GatherElements, ScatterElements) or find them (TopK, NonZero).
//
// GatherElements and ScatterElements walk "lines": the elements of indices
// that share every coordinate but the axis one. A line reads (writes) one
// line of data, so lines run in parallel without races, and within a line
// the updates apply in order: repeated positions get a deterministic result
// whatever the thread count. All indices are checked before any element
// moves, so the error names the first bad one in row-major order.
//
// Every check of the ops' shape functions (core/ops/indexing_ops.cc) is
// repeated here, with the same messages, so a shape only known at run time
// fails the same way.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <type_traits>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

// --- Helpers ---------------------------------------------------------------------

// "[1, 2]": the coordinates of row-major element |i| of |dims|, for messages.
std::string PositionString(int64_t i, const Dims& dims) {
  Dims index(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    index[d] = i % dims[d];
    i /= dims[d];
  }
  std::string out = "[";
  for (std::size_t d = 0; d < index.size(); ++d) out += (d > 0 ? ", " : "") + std::to_string(index[d]);
  return out + "]";
}

// Checks |indices| against |data| as GatherElements and ScatterElements
// need them (equal ranks; no larger than data but along the axis), and every
// index against the axis' size; returns the axis.
template <class Index>
int CheckElementIndices(const Tensor& data, const Tensor& indices, int64_t axis_attr) {
  if (data.rank() == 0) Fail("data must have rank >= 1");
  const int axis = NormalizeAxis(axis_attr, data.rank());
  if (indices.rank() != data.rank()) {
    Fail("indices has rank ", indices.rank(), " (", DimsString(indices.dims), ") but data has rank ", data.rank(), " (",
         DimsString(data.dims), "); they must be equal");
  }
  for (int d = 0; d < data.rank(); ++d) {
    if (d != axis && indices.dim(d) > data.dim(d)) {
      Fail("indices has shape ", DimsString(indices.dims), " and data ", DimsString(data.dims), ": dimension ", d,
           " of indices (", indices.dim(d), ") is larger than data's (", data.dim(d), "); only along axis ", axis,
           " may it be larger");
    }
  }
  const int64_t n = data.dim(axis);
  const Index* idx = indices.as<Index>();
  for (int64_t i = 0; i < indices.num_elements; ++i) {
    const auto v = static_cast<int64_t>(idx[i]);
    if (v < -n || v >= n) {
      Fail("index ", v, " at position ", PositionString(i, indices.dims), " of indices is out of range for axis ", axis,
           " of data ", DimsString(data.dims),
           n > 0 ? Str(" (valid: ", -n, " to ", n - 1, ")") : std::string(" (valid: none, its size is 0)"));
    }
  }
  return axis;
}

// Calls fn(first, step, line, offset) for every line of |indices| along
// |axis|, in parallel: the line's elements are indices' elements first,
// first + step, ...; offset is the element of data they index at 0 along
// the axis. |cost| is per element.
template <class F>
void ForEachLine(const Tensor& data, const Tensor& indices, int axis, int64_t cost, F&& fn) {
  if (indices.num_elements == 0) return;
  const std::vector<int64_t> strides = Strides(data.dims);
  Dims lens;
  std::vector<int64_t> steps;
  for (int d = 0; d < indices.rank(); ++d) {
    if (d == axis) continue;
    lens.push_back(indices.dim(d));
    steps.push_back(strides[ToSize(d)]);
  }
  const int64_t len = indices.dim(axis);
  const int64_t inner = Product(indices.dims, axis + 1, indices.rank());
  ForEachRow(lens, steps, 0, len * cost, [&](int64_t line, int64_t offset) {
    fn((line / inner) * len * inner + line % inner, inner, len, offset);
  });
}

// a + b and a * b: floats in their compute type, integers wrap, bools are or
// and and (as NumPy's add and multiply).
template <class T>
T AddOne(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (kIsFloat<T>) {
    return StoreAs<T>(Load(a) + Load(b));
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
}

template <class T>
T MulOne(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a && b;
  } else if constexpr (kIsFloat<T>) {
    return StoreAs<T>(Load(a) * Load(b));
  } else {
    // In 64 bits: a product of two promoted 16-bit values overflows int.
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a)) * static_cast<U>(b)));
  }
}

// --- GatherElements, ScatterElements ---------------------------------------------

template <class Index>
class GatherElementsKernel {
 public:
  explicit GatherElementsKernel(const InitContext& init) : axis_(init.Int("axis")) {}
  void Compute(Context& ctx) {
    const Tensor data = ctx.input(0), indices = ctx.input(1);
    const int axis = CheckElementIndices<Index>(data, indices, axis_);
    Tensor out = ctx.allocate_output(0, indices.dims);
    const int64_t n = data.dim(axis), step = Strides(data.dims)[ToSize(axis)];
    const Index* idx = indices.as<Index>();
    DispatchBySize(ElementSize(data.dtype), [&]<class W>() {
      const W* src = data.as<W>();
      W* dst = out.as<W>();
      ForEachLine(data, indices, axis, 1, [&](int64_t first, int64_t stride, int64_t len, int64_t offset) {
        for (int64_t j = 0, p = first; j < len; ++j, p += stride) {
          const auto v = static_cast<int64_t>(idx[p]);
          dst[p] = src[offset + (v < 0 ? v + n : v) * step];
        }
      });
    });
  }

 private:
  const int64_t axis_;
};

template <class T, class Index>
class ScatterElementsKernel {
 public:
  explicit ScatterElementsKernel(const InitContext& init)
      : axis_(init.Int("axis")), reduction_(ParseReduction(init.String("reduction"))) {}
  void Compute(Context& ctx) {
    const Tensor data = ctx.input(0), indices = ctx.input(1), updates = ctx.input(2);
    const int axis = CheckElementIndices<Index>(data, indices, axis_);
    if (updates.dims != indices.dims) {
      Fail("updates has shape ", DimsString(updates.dims), " but indices ", DimsString(indices.dims),
           "; they must have one shape");
    }
    Tensor out = ctx.allocate_output(0, data.dims);
    if (out.num_elements == 0) return;
    T* dst = out.as<T>();
    const T* src = data.as<T>();
    ParallelFor(out.num_elements, 1,
                [&](int64_t begin, int64_t end) { std::copy(src + begin, src + end, dst + begin); });
    const int64_t n = data.dim(axis), step = Strides(data.dims)[ToSize(axis)];
    const Index* idx = indices.as<Index>();
    const T* upd = updates.as<T>();
    ForEachLine(data, indices, axis, 2, [&](int64_t first, int64_t stride, int64_t len, int64_t offset) {
      for (int64_t j = 0, p = first; j < len; ++j, p += stride) {
        const auto v = static_cast<int64_t>(idx[p]);
        T& o = dst[offset + (v < 0 ? v + n : v) * step];
        switch (reduction_) {
          case Reduction::kNone: o = upd[p]; break;
          case Reduction::kAdd: o = AddOne<T>(o, upd[p]); break;
          case Reduction::kMul: o = MulOne<T>(o, upd[p]); break;
        }
      }
    });
  }

 private:
  enum class Reduction { kNone, kAdd, kMul };

  static Reduction ParseReduction(const std::string& reduction) {
    if (reduction == "none") return Reduction::kNone;
    if (reduction == "add") return Reduction::kAdd;
    if (reduction == "mul") return Reduction::kMul;
    Fail("unknown reduction '", reduction, "'; expected none, add or mul");
  }

  const int64_t axis_;
  const Reduction reduction_;
};

// --- TopK ------------------------------------------------------------------------

// Each line along the axis is sorted on its own: its indices ordered by
// value (NaN above every number) and then by index, so the order is total
// and the result does not depend on the sort.
template <class T>
class TopKKernel {
 public:
  explicit TopKKernel(const InitContext& init) : axis_(init.Int("axis")), largest_(init.Bool("largest")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int64_t k = ReadScalar(ctx.input(1), "k");
    if (x.rank() == 0) Fail("input must have rank >= 1");
    const int axis = NormalizeAxis(axis_, x.rank());
    const int64_t n = x.dim(axis);
    if (k < 0 || k > n) {
      Fail("k = ", k, " is out of range for axis ", axis, " of input ", DimsString(x.dims), " (valid: 0 to ", n, ")");
    }
    Dims out_dims = x.dims;
    out_dims[ToSize(axis)] = k;
    Tensor values = ctx.allocate_output(0, out_dims);
    Tensor indices = ctx.allocate_output(1, out_dims);
    if (values.num_elements == 0) return;  // so n >= k > 0
    const int64_t inner = Product(x.dims, axis + 1, x.rank());
    const int64_t lines = x.num_elements / n;
    const T* px = x.as<T>();
    T* pv = values.as<T>();
    auto* pi = indices.as<int64_t>();
    ParallelFor(lines, n * 16, [&](int64_t begin, int64_t end) {
      std::vector<V> keys(ToSize(n));
      std::vector<int64_t> order(ToSize(n));
      for (int64_t line = begin; line < end; ++line) {
        const int64_t in_at = (line / inner) * n * inner + line % inner;
        const int64_t out_at = (line / inner) * k * inner + line % inner;
        for (int64_t j = 0; j < n; ++j) keys[ToSize(j)] = Load(px[in_at + j * inner]);
        std::iota(order.begin(), order.end(), int64_t{0});
        auto before = [&](int64_t a, int64_t b) {
          const V va = keys[ToSize(a)], vb = keys[ToSize(b)];
          if (largest_ ? Less(vb, va) : Less(va, vb)) return true;
          if (largest_ ? Less(va, vb) : Less(vb, va)) return false;
          return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t j = 0; j < k; ++j) {
          pv[out_at + j * inner] = px[in_at + order[ToSize(j)] * inner];
          pi[out_at + j * inner] = order[ToSize(j)];
        }
      }
    });
  }

 private:
  using V = typename ComputeType<T>::type;

  // a < b, with NaN above every number (NumPy's sort order).
  static bool Less(V a, V b) {
    if constexpr (kIsFloat<T>) {
      return !std::isnan(a) && (std::isnan(b) || a < b);
    } else {
      return a < b;
    }
  }

  const int64_t axis_;
  const bool largest_;
};

// --- NonZero ---------------------------------------------------------------------

// Counts the nonzero elements per block of the input, then writes each
// block's coordinates from where the blocks before it end.
template <class T>
class NonZeroKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const T* px = x.as<T>();
    const int64_t n = x.num_elements;
    const int64_t blocks = CeilDiv(n, kBlock);
    std::vector<int64_t> start(ToSize(blocks) + 1, 0);
    ParallelFor(blocks, kBlock, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        int64_t count = 0;
        for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) count += IsNonZero(px[i]) ? 1 : 0;
        start[ToSize(b) + 1] = count;
      }
    });
    std::partial_sum(start.begin(), start.end(), start.begin());
    const int64_t total = start.back();
    const int rank = x.rank();
    Tensor y = ctx.allocate_output(0, {rank, total});
    if (rank == 0 || total == 0) return;
    auto* py = y.as<int64_t>();
    const std::vector<int64_t> strides = Strides(x.dims);
    ParallelFor(blocks, kBlock * 2, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        int64_t column = start[ToSize(b)];
        for (int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
          if (!IsNonZero(px[i])) continue;
          for (int d = 0; d < rank; ++d) py[d * total + column] = (i / strides[ToSize(d)]) % x.dim(d);
          ++column;
        }
      }
    });
  }

 private:
  static constexpr int64_t kBlock = 4096;

  // -0 is zero and NaN is not.
  static bool IsNonZero(T v) {
    if constexpr (std::is_same_v<T, bool>) {
      return v;
    } else {
      return Load(v) != 0;
    }
  }
};

}  // namespace

void RegisterIndexingKernels(KernelRegistry& r) {
  constexpr weft_dtype_t kI32 = WEFT_DTYPE_I32, kI64 = WEFT_DTYPE_I64;
  for (weft_dtype_t t : kFixedSizeTypes) {
    AddKernel<"GatherElements", GatherElementsKernel<int32_t>, kI32>(r, {{"T", t}, {"Tindices", kI32}});
    AddKernel<"GatherElements", GatherElementsKernel<int64_t>, kI64>(r, {{"T", t}, {"Tindices", kI64}});
  }
  auto numeric_and_bool = [&]<class T>() {
    constexpr weft_dtype_t t = DtypeOf<T>();
    AddKernel<"ScatterElements", ScatterElementsKernel<T, int32_t>, t>(r, {{"T", t}, {"Tindices", kI32}});
    AddKernel<"ScatterElements", ScatterElementsKernel<T, int64_t>, t>(r, {{"T", t}, {"Tindices", kI64}});
    AddKernel<"NonZero", NonZeroKernel<T>, t>(r, {{"T", t}});
  };
  ForEachNumericType([&]<class T>() {
    numeric_and_bool.template operator()<T>();
    AddKernel<"TopK", TopKKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}}, 0, {"k"});
  });
  numeric_and_bool.template operator()<bool>();
}

}  // namespace weft::cpu
