// Kernels of OnnxUnique (core/ops/unique_ops.cc): ONNX's Unique.
//
// x is seen as [outer, d, inner] around the axis ([1, n, 1] without one):
// item j is the slice x[:, j, :], its elements in row-major order. The
// items are sorted stably by a total order (lexicographic over the
// elements; floats by value, with -0 equal to +0 and NaN equal to NaN and
// above every number), so equal items are adjacent, the first occurrence
// first: each run is one distinct item. Unsorted output reorders the runs
// by first occurrence. Then y gathers the first occurrences' slices. The
// result depends on nothing but x (the order is total and the sort stable).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

// -1, 0 or 1 as a is below, equal to or above b (floats: -0 == +0; NaN
// equals NaN and is above every number).
template <class T>
int CompareElements(const T& a, const T& b) {
  const auto x = Load(a), y = Load(b);
  if constexpr (kIsFloat<T>) {
    const bool nan_x = std::isnan(x), nan_y = std::isnan(y);
    if (nan_x || nan_y) return nan_x == nan_y ? 0 : (nan_x ? 1 : -1);
  }
  return x < y ? -1 : (y < x ? 1 : 0);
}

// x as [outer, d, inner]: d items of outer * inner elements each.
struct ItemLayout {
  int64_t outer = 1, d = 0, inner = 1;
};

// The items of a tensor with elements, compared lexicographically.
template <class T>
struct Items {
  const T* x;
  ItemLayout s;

  int Compare(int64_t a, int64_t b) const {
    for (int64_t o = 0; o < s.outer; ++o) {
      const T* pa = x + (o * s.d + a) * s.inner;
      const T* pb = x + (o * s.d + b) * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) {
        const int c = CompareElements(pa[i], pb[i]);
        if (c != 0) return c;
      }
    }
    return 0;
  }
};

// The distinct items: the first occurrence and count of each, in output
// order, and for each item of x the position of its distinct item.
struct Groups {
  std::vector<int64_t> first, counts, inverse;
};

// |g|'s distinct items put in the order of their first occurrence.
void OrderByFirstOccurrence(Groups& g) {
  std::vector<int64_t> order(g.first.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::sort(order.begin(), order.end(), [&g](int64_t a, int64_t b) { return g.first[ToSize(a)] < g.first[ToSize(b)]; });
  std::vector<int64_t> position(order.size());
  Groups out;
  for (std::size_t k = 0; k < order.size(); ++k) {
    position[ToSize(order[k])] = static_cast<int64_t>(k);
    out.first.push_back(g.first[ToSize(order[k])]);
    out.counts.push_back(g.counts[ToSize(order[k])]);
  }
  for (int64_t& i : g.inverse) i = position[ToSize(i)];
  g.first = std::move(out.first);
  g.counts = std::move(out.counts);
}

template <class T>
Groups Group(const Items<T>& items, bool sorted) {
  const int64_t d = items.s.d;
  std::vector<int64_t> order(ToSize(d));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&items](int64_t a, int64_t b) { return items.Compare(a, b) < 0; });
  Groups g;
  g.inverse.resize(ToSize(d));
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || items.Compare(order[k - 1], order[k]) != 0) {
      g.first.push_back(order[k]);
      g.counts.push_back(0);
    }
    g.inverse[ToSize(order[k])] = static_cast<int64_t>(g.first.size()) - 1;
    ++g.counts.back();
  }
  if (!sorted) OrderByFirstOccurrence(g);
  return g;
}

void WriteIndices(Context& ctx, int i, const std::vector<int64_t>& v) {
  Tensor t = ctx.allocate_output(i, {static_cast<int64_t>(v.size())});
  if (!v.empty()) std::memcpy(t.data, v.data(), v.size() * sizeof(int64_t));
}

// y: the first occurrences' slices, [outer, k, inner] from x's [outer, d, inner].
void GatherItems(const Tensor& x, const Tensor& y, const ItemLayout& s, const std::vector<int64_t>& first) {
  if (y.num_elements == 0) return;
  const auto k = static_cast<int64_t>(first.size());
  const std::size_t row = ToSize(s.inner) * ElementSize(x.dtype);
  const auto* src = static_cast<const char*>(x.data);
  auto* dst = static_cast<char*>(y.data);
  ParallelFor(s.outer * k, CopyCost(row), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / k, j = first[ToSize(r % k)];
      std::memcpy(dst + ToSize(r) * row, src + ToSize(o * s.d + j) * row, row);
    }
  });
}

template <class T>
class OnnxUniqueKernel {
 public:
  explicit OnnxUniqueKernel(const InitContext& init)
      : sorted_(init.Bool("sorted")), has_axis_(init.Bool("has_axis")), axis_(init.Int("axis")) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    int axis = 0;
    ItemLayout s;
    if (!has_axis_) {
      s.d = x.num_elements;
    } else {
      if (x.rank() == 0) Fail("x must have rank >= 1 to take slices along an axis, got a scalar");
      axis = NormalizeAxis(axis_, x.rank());
      s.d = x.dim(axis);
    }
    if (x.num_elements == 0) {
      WriteEmpty(ctx, x, axis, s.d);
      return;
    }
    if (has_axis_) s = {Product(x.dims, 0, axis), s.d, Product(x.dims, axis + 1, x.rank())};
    const Groups g = Group(Items<T>{x.as<T>(), s}, sorted_);
    const Tensor y = ctx.allocate_output(0, YDims(x, axis, static_cast<int64_t>(g.first.size())));
    GatherItems(x, y, s, g.first);
    WriteIndices(ctx, 1, g.first);
    WriteIndices(ctx, 2, g.inverse);
    WriteIndices(ctx, 3, g.counts);
  }

 private:
  // y's shape for |k| distinct items.
  Dims YDims(const Tensor& x, int axis, int64_t k) const {
    if (!has_axis_) return {k};
    Dims dims = x.dims;
    dims[ToSize(axis)] = k;
    return dims;
  }

  // x without elements: no items (d = 0), or d items without elements, all
  // equal. Written straight into the outputs, as d may be huge (and the
  // products of x's other dimensions not even countable).
  void WriteEmpty(Context& ctx, const Tensor& x, int axis, int64_t d) const {
    const int64_t k = d > 0 ? 1 : 0;
    ctx.allocate_output(0, YDims(x, axis, k));
    Tensor first = ctx.allocate_output(1, {k});
    Tensor inverse = ctx.allocate_output(2, {d});
    Tensor counts = ctx.allocate_output(3, {k});
    if (k == 0) return;
    first.as<int64_t>()[0] = 0;
    counts.as<int64_t>()[0] = d;
    std::fill(inverse.as<int64_t>(), inverse.as<int64_t>() + d, int64_t{0});
  }

  const bool sorted_, has_axis_;
  const int64_t axis_;
};

}  // namespace

// --- Registration -----------------------------------------------------------------------

void RegisterUniqueKernels(KernelRegistry& r) {
  ForEachNumericType([&r]<class T>() {
    AddKernel<"OnnxUnique", OnnxUniqueKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
  });
}

}  // namespace weft::cpu
