// Reductions: Sum, Mean, Max, Min, Prod, All and Any over a set of axes,
// and ArgMax/ArgMin along one axis.
//
// The input's dims are collapsed first: size-1 dims dropped, and adjacent
// dims merged when both are reduced or both kept. When one run of dims is
// reduced the input is a [outer, reduce, inner] block: reducing trailing
// axes (inner == 1) reduces one contiguous row per output; otherwise rows of
// |inner| elements are accumulated into a vector (leading axes: outer ==
// 1). Any other axis set walks the reduced index space of each output.
//
// Float sums and products accumulate in double (f32, f64) or float (f16,
// bf16), in blocks combined pairwise, so long sums stay accurate. Integer
// Sum and Prod wrap (computed in unsigned arithmetic); integer Mean is the
// exact mean truncated toward zero. Results do not depend on the number
// of threads: how a reduction is split depends on its shape only.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

// The unsigned type integer Sum and Prod wrap in: at least unsigned int, so
// that products of narrow types do not promote to (overflowing) int.
template <class T>
using WrapType = std::make_unsigned_t<std::conditional_t<(sizeof(T) < sizeof(int)), int, T>>;

// Exact sums of int64 values, for Mean.
__extension__ typedef __int128 Int128;

// What float sums accumulate in: double for f32 and f64, float for f16/bf16.
template <class T>
using FloatAcc = std::conditional_t<std::is_floating_point_v<T>, double, float>;

// What Sum and Prod accumulate in.
template <class T, bool = kIsFloat<T>>
struct SumAccOf {
  using type = FloatAcc<T>;
};
template <class T>
struct SumAccOf<T, false> {
  using type = WrapType<T>;
};

// --- Reducers --------------------------------------------------------------------
//
// A reducer folds elements (In) into an accumulator (Acc) with Op, which
// also merges two partial accumulators, and turns the final accumulator of
// |count| elements into the output element (Out). kEmptyError, when not
// null, says why reducing an empty set is an error.

template <class T>
struct SumReducer {
  using Elem = T;
  using Acc = typename SumAccOf<T>::type;
  static constexpr const char* kName = "Sum";
  static constexpr const char* kEmptyError = nullptr;
  static Acc Identity() { return Acc(0); }
  static Acc In(T v) { return static_cast<Acc>(Load(v)); }
  static Acc Op(Acc a, Acc b) { return a + b; }
  static T Out(Acc a, int64_t) {
    if constexpr (kIsFloat<T>) {
      return StoreAs<T>(static_cast<typename ComputeType<T>::type>(a));
    } else {
      return static_cast<T>(a);  // modular since C++20
    }
  }
};

template <class T>
struct MeanReducer {
  using Elem = T;
  using Acc = std::conditional_t<kIsFloat<T>, FloatAcc<T>, std::conditional_t<sizeof(T) == 8, Int128, int64_t>>;
  static constexpr const char* kName = "Mean";
  static constexpr const char* kEmptyError = kIsFloat<T> ? nullptr : "is undefined for integers (it would be NaN)";
  static Acc Identity() { return Acc(0); }
  static Acc In(T v) { return static_cast<Acc>(Load(v)); }
  static Acc Op(Acc a, Acc b) { return a + b; }
  static T Out(Acc a, int64_t count) {
    if constexpr (kIsFloat<T>) {
      return StoreAs<T>(static_cast<typename ComputeType<T>::type>(a / static_cast<Acc>(count)));  // 0 / 0 is NaN
    } else {
      return static_cast<T>(a / count);  // truncates toward zero
    }
  }
};

template <class T>
struct ProdReducer {
  using Elem = T;
  using Acc = typename SumAccOf<T>::type;
  static constexpr const char* kName = "Prod";
  static constexpr const char* kEmptyError = nullptr;
  static Acc Identity() { return Acc(1); }
  static Acc In(T v) { return static_cast<Acc>(Load(v)); }
  static Acc Op(Acc a, Acc b) { return a * b; }
  static T Out(Acc a, int64_t) { return SumReducer<T>::Out(a, 0); }
};

// Max (kMax) or Min; NaN wins.
template <class T, bool kMax>
struct ExtremumReducer {
  using Elem = T;
  using Acc = typename ComputeType<T>::type;
  static constexpr const char* kName = kMax ? "Max" : "Min";
  static constexpr const char* kEmptyError = "has no identity";
  static Acc Identity() {
    if constexpr (kIsFloat<T>) {
      return kMax ? -std::numeric_limits<Acc>::infinity() : std::numeric_limits<Acc>::infinity();
    } else {
      return kMax ? std::numeric_limits<Acc>::lowest() : std::numeric_limits<Acc>::max();
    }
  }
  static Acc In(T v) { return Load(v); }
  static Acc Op(Acc a, Acc b) {
    const Acc better = (kMax ? b > a : b < a) ? b : a;
    if constexpr (kIsFloat<T>) {
      // a + b is NaN when either is; both sides are computed, so this
      // compiles to compares and blends, which vectorise.
      return std::isunordered(a, b) ? a + b : better;
    } else {
      return better;
    }
  }
  static T Out(Acc a, int64_t) { return StoreAs<T>(a); }
};

// All (kAll) or Any over bools.
template <bool kAll>
struct LogicalReducer {
  using Elem = bool;
  using Acc = bool;
  static constexpr const char* kName = kAll ? "All" : "Any";
  static constexpr const char* kEmptyError = nullptr;
  static bool Identity() { return kAll; }
  static bool In(bool v) { return v; }
  static bool Op(bool a, bool b) { return kAll ? a && b : a || b; }
  static bool Out(bool a, int64_t) { return a; }
};

// --- Reduction loops -------------------------------------------------------------

// A row shorter than this is reduced by one task.
constexpr int64_t kChunk = int64_t{1} << 15;
// At most this many tasks share one row (or column block).
constexpr int64_t kMaxChunks = 64;
// With this many rows (or column blocks) or more, each is one task.
constexpr int64_t kManyTasks = 16;
// Elements folded per block before the block joins the running total.
constexpr int64_t kBlock = 1024;
// Columns accumulated together by one task (a page of f32 per row: much
// narrower slices of rows far apart spend their time on TLB misses), and
// rows per block there.
constexpr int64_t kColumnBlock = 1024;
constexpr int64_t kRowBlock = 64;

// How many tasks reduce |work| elements that |tasks| independent tasks
// would otherwise split: 1 unless there are few tasks and much work.
int64_t ChunksFor(int64_t tasks, int64_t work) {
  if (tasks >= kManyTasks) return 1;
  return std::clamp<int64_t>(work / kChunk, 1, kMaxChunks);
}

// Folds x[0], x[stride], ... (n elements): eight lanes over blocks of
// kBlock elements (so the contiguous loop vectorises and long sums round
// like pairwise ones), then the blocks in order.
template <class R>
typename R::Acc ReduceRun(const typename R::Elem* x, int64_t n, int64_t stride) {
  using Acc = typename R::Acc;
  constexpr int kLanes = 8;
  Acc total = R::Identity();
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    Acc lane[kLanes];
    std::fill(lane, lane + kLanes, R::Identity());
    int64_t i = begin;
    if (stride == 1) {
      for (; i + kLanes <= end; i += kLanes) {
        for (int j = 0; j < kLanes; ++j) lane[j] = R::Op(lane[j], R::In(x[i + j]));
      }
    }
    for (; i < end; ++i) lane[0] = R::Op(lane[0], R::In(x[i * stride]));
    for (int width = kLanes / 2; width > 0; width /= 2) {
      for (int j = 0; j < width; ++j) lane[j] = R::Op(lane[j], lane[j + width]);
    }
    total = R::Op(total, lane[0]);
  }
  return total;
}

// Reduces each of |rows| contiguous rows of |n| elements to one output.
template <class R>
void ReduceRows(const typename R::Elem* x, typename R::Elem* y, int64_t rows, int64_t n) {
  using Acc = typename R::Acc;
  const int64_t chunks = ChunksFor(rows, n);
  if (chunks == 1) {
    ParallelFor(rows, n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) y[r] = R::Out(ReduceRun<R>(x + r * n, n, 1), n);
    });
    return;
  }
  // Few long rows: split each into chunks, reduced in parallel and merged in order.
  const int64_t chunk = CeilDiv(n, chunks);
  auto partial = std::make_unique<Acc[]>(static_cast<std::size_t>(rows * chunks));
  ParallelFor(rows * chunks, chunk, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t r = t / chunks, first = (t % chunks) * chunk;
      const int64_t count = std::max<int64_t>(0, std::min(n, first + chunk) - first);
      partial[t] = ReduceRun<R>(x + r * n + first, count, 1);
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    Acc acc = partial[r * chunks];
    for (int64_t c = 1; c < chunks; ++c) acc = R::Op(acc, partial[r * chunks + c]);
    y[r] = R::Out(acc, n);
  }
}

// acc[j] = the fold of x[r * stride + j] over rows [r0, r1), for j < width,
// in blocks of kRowBlock rows.
template <class R>
void AccumulateColumns(const typename R::Elem* x, int64_t stride, int64_t r0, int64_t r1, int64_t width,
                       typename R::Acc* acc) {
  using Acc = typename R::Acc;
  std::fill(acc, acc + width, R::Identity());
  Acc block[kColumnBlock];
  for (int64_t begin = r0; begin < r1; begin += kRowBlock) {
    const int64_t end = std::min(r1, begin + kRowBlock);
    std::fill(block, block + width, R::Identity());
    for (int64_t r = begin; r < end; ++r) {
      const typename R::Elem* row = x + r * stride;
      for (int64_t j = 0; j < width; ++j) block[j] = R::Op(block[j], R::In(row[j]));
    }
    for (int64_t j = 0; j < width; ++j) acc[j] = R::Op(acc[j], block[j]);
  }
}

// Reduces x [outer, n, inner] over its middle dimension to y [outer, inner].
template <class R>
void ReduceColumns(const typename R::Elem* x, typename R::Elem* y, int64_t outer, int64_t n, int64_t inner) {
  using Acc = typename R::Acc;
  const int64_t blocks = CeilDiv(inner, kColumnBlock);
  const int64_t tasks = outer * blocks;
  const int64_t width = std::min(inner, kColumnBlock);
  const int64_t chunks = ChunksFor(tasks, n * width);
  const int64_t chunk = CeilDiv(n, chunks);
  std::unique_ptr<Acc[]> partial;
  if (chunks > 1) partial = std::make_unique<Acc[]>(static_cast<std::size_t>(chunks * outer * inner));
  ParallelFor(tasks * chunks, chunk * width, [&](int64_t begin, int64_t end) {
    Acc acc[kColumnBlock];
    for (int64_t t = begin; t < end; ++t) {
      const int64_t c = t % chunks, task = t / chunks;
      const int64_t o = task / blocks, j0 = (task % blocks) * kColumnBlock;
      const int64_t w = std::min(inner - j0, kColumnBlock);
      const int64_t r0 = std::min(n, c * chunk), r1 = std::min(n, r0 + chunk);
      AccumulateColumns<R>(x + o * n * inner + j0, inner, r0, r1, w, acc);
      if (chunks == 1) {
        for (int64_t j = 0; j < w; ++j) y[o * inner + j0 + j] = R::Out(acc[j], n);
      } else {
        std::copy(acc, acc + w, partial.get() + (c * outer + o) * inner + j0);
      }
    }
  });
  if (chunks == 1) return;
  for (int64_t i = 0; i < outer * inner; ++i) {
    Acc acc = partial[i];
    for (int64_t c = 1; c < chunks; ++c) acc = R::Op(acc, partial[c * outer * inner + i]);
    y[i] = R::Out(acc, n);
  }
}

// The reduction of a tensor over a set of axes, planned from its dims.
struct ReducePlan {
  Dims out_dims;             // the output's dims (keep_dims applied)
  int64_t out_count = 1;     // output elements
  int64_t reduce_count = 1;  // input elements per output element
  // The collapsed input: runs of adjacent dims, alternately reduced and kept.
  Dims sizes;
  std::vector<bool> reduced;
};

ReducePlan PlanReduction(const Dims& dims, const std::vector<int64_t>& axis, bool keep_dims) {
  const int rank = static_cast<int>(dims.size());
  // Axes as the shape function normalises them: empty means every axis.
  std::vector<bool> reduce(dims.size(), axis.empty());
  for (const int64_t a : axis) {
    if (a < -rank || a >= rank) {
      Fail("axis ", a, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
    }
    const auto i = static_cast<std::size_t>(a < 0 ? a + rank : a);
    if (reduce[i]) Fail("axis ", a, " is repeated in ", DimsString(axis));
    reduce[i] = true;
  }
  ReducePlan plan;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (reduce[i]) {
      plan.reduce_count *= dims[i];
      if (keep_dims) plan.out_dims.push_back(1);
    } else {
      plan.out_count *= dims[i];
      plan.out_dims.push_back(dims[i]);
    }
    if (dims[i] == 1) continue;  // changes no index
    if (!plan.sizes.empty() && plan.reduced.back() == reduce[i]) {
      plan.sizes.back() *= dims[i];
    } else {
      plan.sizes.push_back(dims[i]);
      plan.reduced.push_back(reduce[i]);
    }
  }
  return plan;
}

// Any axis set: each output element walks its reduced elements, a run of
// the innermost reduced dims at a time.
template <class R>
void ReduceGeneral(const ReducePlan& plan, const typename R::Elem* x, typename R::Elem* y) {
  using Acc = typename R::Acc;
  const std::size_t runs = plan.sizes.size();
  std::vector<int64_t> strides(runs);
  int64_t stride = 1;
  for (std::size_t i = runs; i-- > 0;) {
    strides[i] = stride;
    stride *= plan.sizes[i];
  }
  Dims kept_sizes, kept_strides, reduced_sizes, reduced_strides;
  for (std::size_t i = 0; i < runs; ++i) {
    (plan.reduced[i] ? reduced_sizes : kept_sizes).push_back(plan.sizes[i]);
    (plan.reduced[i] ? reduced_strides : kept_strides).push_back(strides[i]);
  }
  const int64_t run_length = reduced_sizes.back(), run_stride = reduced_strides.back();
  reduced_sizes.pop_back();
  reduced_strides.pop_back();
  const int64_t run_count = plan.reduce_count / run_length;
  // The offset of row-major index |index| over |sizes| with |steps|.
  auto offset_of = [](int64_t index, const Dims& sizes, const Dims& steps) {
    int64_t offset = 0;
    for (std::size_t d = sizes.size(); d-- > 0;) {
      offset += (index % sizes[d]) * steps[d];
      index /= sizes[d];
    }
    return offset;
  };
  ParallelFor(plan.out_count, plan.reduce_count, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const typename R::Elem* base = x + offset_of(o, kept_sizes, kept_strides);
      Acc acc = R::Identity();
      for (int64_t q = 0; q < run_count; ++q) {
        acc = R::Op(acc, ReduceRun<R>(base + offset_of(q, reduced_sizes, reduced_strides), run_length, run_stride));
      }
      y[o] = R::Out(acc, plan.reduce_count);
    }
  });
}

template <class R>
void Reduce(const ReducePlan& plan, const typename R::Elem* x, typename R::Elem* y) {
  if (plan.reduce_count == 0) {
    std::fill(y, y + plan.out_count, R::Out(R::Identity(), 0));
    return;
  }
  if (std::count(plan.reduced.begin(), plan.reduced.end(), true) > 1) {
    ReduceGeneral<R>(plan, x, y);
    return;
  }
  // [outer, n, inner], with n == 1 when nothing (of size > 1) is reduced.
  int64_t outer = 1, n = 1, inner = 1;
  bool seen = false;
  for (std::size_t i = 0; i < plan.sizes.size(); ++i) {
    if (plan.reduced[i]) {
      n = plan.sizes[i];
      seen = true;
    } else {
      (seen ? inner : outer) *= plan.sizes[i];
    }
  }
  if (inner == 1) {
    ReduceRows<R>(x, y, outer, n);
  } else {
    ReduceColumns<R>(x, y, outer, n, inner);
  }
}

template <class R>
class ReduceKernel {
 public:
  explicit ReduceKernel(const InitContext& init) : axis_(init.Ints("axis")), keep_dims_(init.Bool("keep_dims")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const ReducePlan plan = PlanReduction(x.dims, axis_, keep_dims_);
    if (plan.reduce_count == 0 && R::kEmptyError != nullptr) {
      Fail(R::kName, " of an empty set ", R::kEmptyError, ": input shape ", DimsString(x.dims), ", axis ",
           DimsString(axis_));
    }
    Tensor y = ctx.allocate_output(0, plan.out_dims);
    if (plan.out_count == 0) return;
    Reduce<R>(plan, x.as<typename R::Elem>(), y.as<typename R::Elem>());
  }

 private:
  std::vector<int64_t> axis_;
  bool keep_dims_;
};

// --- ArgMax, ArgMin --------------------------------------------------------------

// Whether |v| should replace |best| in ArgMax (kMax) or ArgMin: strictly
// better, or the first NaN.
template <bool kMax, class C>
bool Better(C v, C best) {
  const bool better = kMax ? v > best : v < best;
  if constexpr (std::is_floating_point_v<C>) {
    return better || (std::isnan(v) && !std::isnan(best));
  } else {
    return better;
  }
}

template <class T, class Index, bool kMax>
class ArgReduceKernel {
  using C = typename ComputeType<T>::type;
  static constexpr const char* kName = kMax ? "ArgMax" : "ArgMin";

 public:
  explicit ArgReduceKernel(const InitContext& init) : axis_(init.Int("axis")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int rank = x.rank();
    if (rank == 0) Fail(kName, " needs a tensor of rank >= 1, got a scalar");
    if (axis_ < -rank || axis_ >= rank) {
      Fail("axis ", axis_, " is out of range for rank ", rank, " (valid: ", -rank, " to ", rank - 1, ")");
    }
    const int axis = static_cast<int>(axis_ < 0 ? axis_ + rank : axis_);
    int64_t outer = 1, inner = 1;
    Dims out_dims;
    for (int i = 0; i < rank; ++i) {
      if (i == axis) continue;
      (i < axis ? outer : inner) *= x.dim(i);
      out_dims.push_back(x.dim(i));
    }
    const int64_t n = x.dim(axis);
    if (n == 0) Fail(kName, " of an empty axis: input shape ", DimsString(x.dims), ", axis ", axis_);
    if constexpr (sizeof(Index) < sizeof(int64_t)) {
      if (n - 1 > std::numeric_limits<Index>::max()) {
        Fail(kName, ": axis ", axis_, " of ", DimsString(x.dims), " has more indices than output_type holds");
      }
    }
    Tensor y = ctx.allocate_output(0, out_dims);
    if (y.num_elements == 0) return;
    if (inner == 1) {
      Rows(x.as<T>(), y.as<Index>(), outer, n);
    } else {
      Columns(x.as<T>(), y.as<Index>(), outer, n, inner);
    }
  }

 private:
  struct Best {
    C value;
    int64_t index;
  };

  // The best of x[first, first + count), which is not empty: the extremum
  // by a vectorised fold, then the first element equal to it (or the first
  // NaN when it is NaN).
  static Best Scan(const T* x, int64_t first, int64_t count) {
    const C value = ReduceRun<ExtremumReducer<T, kMax>>(x + first, count, 1);
    int64_t i = first;
    if constexpr (kIsFloat<T>) {
      if (std::isnan(value)) {
        while (!std::isnan(Load(x[i]))) ++i;
        return {value, i};
      }
    }
    while (Load(x[i]) != value) ++i;
    return {value, i};
  }

  static void Rows(const T* x, Index* y, int64_t rows, int64_t n) {
    const int64_t chunks = ChunksFor(rows, n);
    if (chunks == 1) {
      ParallelFor(rows, n, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) y[r] = static_cast<Index>(Scan(x + r * n, 0, n).index);
      });
      return;
    }
    const int64_t chunk = CeilDiv(n, chunks);
    std::vector<Best> partial(static_cast<std::size_t>(rows * chunks), Best{C(0), -1});
    ParallelFor(rows * chunks, chunk, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t r = t / chunks, first = (t % chunks) * chunk;
        if (first < n) partial[static_cast<std::size_t>(t)] = Scan(x + r * n, first, std::min(chunk, n - first));
      }
    });
    for (int64_t r = 0; r < rows; ++r) {
      Best best = partial[static_cast<std::size_t>(r * chunks)];
      for (int64_t c = 1; c < chunks; ++c) {
        const Best& p = partial[static_cast<std::size_t>(r * chunks + c)];
        if (p.index >= 0 && Better<kMax>(p.value, best.value)) best = p;
      }
      y[r] = static_cast<Index>(best.index);
    }
  }

  static void Columns(const T* x, Index* y, int64_t outer, int64_t n, int64_t inner) {
    const int64_t blocks = CeilDiv(inner, kColumnBlock);
    ParallelFor(outer * blocks, n * std::min(inner, kColumnBlock), [&](int64_t begin, int64_t end) {
      C best[kColumnBlock];
      Index index[kColumnBlock];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / blocks, j0 = (t % blocks) * kColumnBlock;
        const int64_t w = std::min(inner - j0, kColumnBlock);
        const T* base = x + o * n * inner + j0;
        for (int64_t j = 0; j < w; ++j) {
          best[j] = Load(base[j]);
          index[j] = 0;
        }
        for (int64_t r = 1; r < n; ++r) {
          const T* row = base + r * inner;
          for (int64_t j = 0; j < w; ++j) {
            const C v = Load(row[j]);
            const bool better = Better<kMax>(v, best[j]);
            best[j] = better ? v : best[j];
            index[j] = better ? static_cast<Index>(r) : index[j];
          }
        }
        std::copy(index, index + w, y + o * inner + j0);
      }
    });
  }

  int64_t axis_;
};

}  // namespace

void RegisterReductionKernels(KernelRegistry& r) {
  auto add = [&r]<class T>() {
    constexpr weft_dtype_t t = DtypeOf<T>();
    AddKernel<"Sum", ReduceKernel<SumReducer<T>>, t>(r, {{"T", t}});
    AddKernel<"Mean", ReduceKernel<MeanReducer<T>>, t>(r, {{"T", t}});
    AddKernel<"Max", ReduceKernel<ExtremumReducer<T, true>>, t>(r, {{"T", t}});
    AddKernel<"Min", ReduceKernel<ExtremumReducer<T, false>>, t>(r, {{"T", t}});
    AddKernel<"Prod", ReduceKernel<ProdReducer<T>>, t>(r, {{"T", t}});
    AddKernel<"ArgMax", ArgReduceKernel<T, int32_t, true>, t>(r, {{"T", t}, {"output_type", WEFT_DTYPE_I32}});
    AddKernel<"ArgMax", ArgReduceKernel<T, int64_t, true>, t>(r, {{"T", t}, {"output_type", WEFT_DTYPE_I64}});
    AddKernel<"ArgMin", ArgReduceKernel<T, int32_t, false>, t>(r, {{"T", t}, {"output_type", WEFT_DTYPE_I32}});
    AddKernel<"ArgMin", ArgReduceKernel<T, int64_t, false>, t>(r, {{"T", t}, {"output_type", WEFT_DTYPE_I64}});
  };
  add.template operator()<float>();
  add.template operator()<double>();
  add.template operator()<Half>();
  add.template operator()<BFloat16>();
  add.template operator()<int8_t>();
  add.template operator()<int16_t>();
  add.template operator()<int32_t>();
  add.template operator()<int64_t>();
  add.template operator()<uint8_t>();
  AddKernel<"All", ReduceKernel<LogicalReducer<true>>>(r, {});
  AddKernel<"Any", ReduceKernel<LogicalReducer<false>>>(r, {});
}

}  // namespace weft::cpu
