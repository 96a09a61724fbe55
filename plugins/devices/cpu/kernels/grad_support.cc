// Kernels for the ops the symbolic gradients emit: the activation
// derivatives (ReluGrad ... ReciprocalGrad, GeluGrad), BroadcastTo and its
// adjoint SumToShape, UnsortedSegmentSum, Pack, InvertPermutation,
// ConcatOffset, StridedSliceGrad, Cumsum and Cumprod.
//
// f16 and bf16 compute in float and round once per element. Sums and
// products accumulate in double for f32 and f64 and in float for f16 and
// bf16; integers wrap (computed in unsigned arithmetic). How work is split
// between threads depends on the shapes only, so results do not depend on
// the number of threads.
//
// Every check of the ops' shape functions (core/ops/grad_support_ops.cc) is
// repeated here, with the same messages, for shapes and values only known
// at run time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

// --- Helpers ---------------------------------------------------------------------

// Input |t|, named |what|, as a vector: it must be 1-D.
std::vector<int64_t> ReadVector(const Tensor& t, const char* what) {
  if (t.rank() != 1) Fail(what, " must be 1-D, got shape ", DimsString(t.dims));
  return ReadInts(t);
}

// A shape input: 1-D, without negative entries.
Dims ReadShape(const Tensor& t, const char* what) {
  Dims dims = ReadVector(t, what);
  for (int64_t d : dims) {
    if (d < 0) Fail(what, " ", DimsString(dims), " has a negative dimension");
  }
  return dims;
}

// Sets |bytes| bytes at |data| to zero, in parallel when there are many:
// all-zero bytes are 0, +0.0 and false in every fixed-size dtype.
void ZeroBytes(void* data, std::size_t bytes) {
  constexpr int64_t kPiece = 1 << 16;
  const auto pieces = static_cast<int64_t>((bytes + kPiece - 1) / kPiece);
  ParallelFor(pieces, kPiece / 16, [&](int64_t begin, int64_t end) {
    const std::size_t from = ToSize(begin * kPiece);
    const std::size_t to = std::min(bytes, ToSize(end * kPiece));
    std::memset(static_cast<char*>(data) + from, 0, to - from);
  });
}

// Every offset base + sum index[k] * steps[k] over the grid |lens|, in
// row-major order.
std::vector<int64_t> GridOffsets(const Dims& lens, const std::vector<int64_t>& steps) {
  std::vector<int64_t> offsets(ToSize(Product(lens, 0, lens.size())));
  std::vector<int64_t> index(lens.size(), 0);
  int64_t offset = 0;
  for (int64_t& o : offsets) {
    o = offset;
    for (std::size_t d = lens.size(); d-- > 0;) {
      offset += steps[d];
      if (++index[d] < lens[d]) break;
      offset -= steps[d] * lens[d];
      index[d] = 0;
    }
  }
  return offsets;
}

// The unsigned type integer sums and products wrap in: at least unsigned
// int, so that products of narrow types do not promote to (overflowing) int.
template <class T>
using WrapType = std::make_unsigned_t<std::conditional_t<(sizeof(T) < sizeof(int)), int, T>>;

// What sums and products accumulate in.
template <class T, bool = kIsFloat<T>>
struct AccOf {
  using type = std::conditional_t<std::is_floating_point_v<T>, double, float>;
};
template <class T>
struct AccOf<T, false> {
  using type = WrapType<T>;
};
template <class T>
using Acc = typename AccOf<T>::type;

template <class T>
Acc<T> ToAcc(T v) {
  return static_cast<Acc<T>>(Load(v));
}
template <class T>
T FromAcc(Acc<T> a) {
  if constexpr (kIsFloat<T>) {
    return StoreAs<T>(static_cast<typename ComputeType<T>::type>(a));
  } else {
    return static_cast<T>(a);  // modular since C++20
  }
}

// --- Activation derivatives --------------------------------------------------------

// z = Apply(first, second) elementwise over two inputs of one shape.
template <class T, class Op>
class GradKernel {
 public:
  explicit GradKernel(const InitContext& init) : op_(init) {}
  void Compute(Context& ctx) {
    const Tensor a = ctx.input(0), b = ctx.input(1);
    if (a.dims != b.dims) {
      Fail(Op::kFirst, " has shape ", DimsString(a.dims), " but ", Op::kSecond, " has shape ", DimsString(b.dims),
           "; they must have one shape");
    }
    Tensor out = ctx.allocate_output(0, a.dims);
    const T* pa = a.as<T>();
    const T* pb = b.as<T>();
    T* po = out.as<T>();
    ParallelFor(out.num_elements, Op::kCost, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) po[i] = op_.template Apply<T>(pa[i], pb[i]);
    });
  }

 private:
  const Op op_;
};

// An op of inputs (a, b) computed in the compute type C.
#define WEFT_GRAD_OP(Name, first, second, cost, expr) \
  struct Name {                                       \
    static constexpr int64_t kCost = cost;            \
    static constexpr const char* kFirst = first;      \
    static constexpr const char* kSecond = second;    \
    explicit Name(const InitContext&) {}              \
    template <class T>                                \
    T Apply(T va, T vb) const {                       \
      using C = typename ComputeType<T>::type;        \
      const C a = Load(va), b = Load(vb);             \
      return StoreAs<T>(static_cast<C>(expr));        \
    }                                                 \
  };

constexpr double kSeluScale = 1.0507009873554805;
constexpr double kSeluAlpha = 1.6732632423543772;

// NaN features compare false and give 0, as TensorFlow's.
WEFT_GRAD_OP(ReluGradOp, "gradients", "features", 1, b > C(0) ? a : C(0))
WEFT_GRAD_OP(Relu6GradOp, "gradients", "features", 1, (b > C(0) && b < C(6)) ? a : C(0))
WEFT_GRAD_OP(EluGradOp, "gradients", "outputs", 1, b > C(0) ? a : a * (b + C(1)))
WEFT_GRAD_OP(SeluGradOp, "gradients", "outputs", 1, b > C(0) ? a * C(kSeluScale) : a * (b + C(kSeluScale * kSeluAlpha)))
WEFT_GRAD_OP(SoftplusGradOp, "gradients", "features", 10,
             a*(b >= C(0) ? C(1) / (C(1) + std::exp(-b)) : std::exp(b) / (C(1) + std::exp(b))))
WEFT_GRAD_OP(SigmoidGradOp, "y", "dy", 1, b* a*(C(1) - a))
WEFT_GRAD_OP(TanhGradOp, "y", "dy", 1, b*(C(1) - a * a))
WEFT_GRAD_OP(SqrtGradOp, "y", "dy", 2, C(0.5) * b / a)
WEFT_GRAD_OP(RsqrtGradOp, "y", "dy", 1, C(-0.5) * b * (a * a * a))
WEFT_GRAD_OP(ReciprocalGradOp, "y", "dy", 1, -b*(a* a))
#undef WEFT_GRAD_OP

struct GeluGradOp {
  static constexpr int64_t kCost = 20;
  static constexpr const char* kFirst = "gradients";
  static constexpr const char* kSecond = "features";
  explicit GeluGradOp(const InitContext& init) : approximate_(init.Bool("approximate")) {}
  template <class T>
  T Apply(T vg, T vx) const {
    using C = typename ComputeType<T>::type;
    const C g = Load(vg), x = Load(vx);
    // The derivative's limits: 1 at +inf, 0 at -inf.
    if (std::isinf(x)) return StoreAs<T>(g * C(x > 0 ? 1 : 0));
    if (approximate_) {
      // Beyond |x| = 20 tanh(u) is +-1 in every precision and the
      // derivative 1 or 0; computing it would overflow x^3 into inf * 0.
      if (std::abs(x) > C(20)) return StoreAs<T>(g * C(x > 0 ? 1 : 0));
      // d/dx 0.5 x (1 + tanh(u)), u = k (x + c x^3).
      const C k = C(0.7978845608028654), c = C(0.044715);  // sqrt(2/pi)
      const C t = std::tanh(k * (x + c * x * x * x));
      const C du = k * (C(1) + C(3) * c * x * x);
      return StoreAs<T>(g * (C(0.5) * (C(1) + t) + C(0.5) * x * (C(1) - t * t) * du));
    }
    // Phi(x) + x phi(x).
    const C cdf = C(0.5) * (C(1) + std::erf(x * C(0.7071067811865476)));
    const C pdf = C(0.3989422804014327) * std::exp(C(-0.5) * x * x);  // 1/sqrt(2 pi)
    return StoreAs<T>(g * (cdf + x * pdf));
  }
  const bool approximate_;
};

// --- BroadcastTo, SumToShape -------------------------------------------------------

// The dims and steps of a loop over |out| that reads an input of |in| dims
// (aligned at the end) with step 0 where it is broadcast; dims of size 1
// dropped and neighbours that step alike merged.
void PlanBroadcastRead(const Dims& in, const Dims& out, Dims* lens, std::vector<int64_t>* steps) {
  const std::vector<int64_t> in_strides = Strides(in);
  const std::size_t lead = out.size() - in.size();
  for (std::size_t o = 0; o < out.size(); ++o) {
    if (out[o] == 1) continue;
    const int64_t step = o < lead || in[o - lead] == 1 ? 0 : in_strides[o - lead];
    if (!lens->empty() && ((steps->back() == 0 && step == 0) || (step != 0 && steps->back() == step * out[o]))) {
      lens->back() *= out[o];
      steps->back() = step;
    } else {
      lens->push_back(out[o]);
      steps->push_back(step);
    }
  }
}

class BroadcastToKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Dims target = ReadShape(ctx.input(1), "shape");
    sdk::CheckBroadcastTo(x.dims, target);
    if (target == x.dims) {
      ctx.forward(0, 0);
      return;
    }
    Tensor out = ctx.allocate_output(0, target);
    if (out.num_elements == 0) return;
    Dims lens;
    std::vector<int64_t> steps;
    PlanBroadcastRead(x.dims, target, &lens, &steps);
    if (lens.empty()) {  // one element
      lens.push_back(1);
      steps.push_back(0);
    }
    // Rows of the innermost dimension, each cut into pieces so that a few
    // long rows (a scalar filling a big tensor) still spread over threads.
    constexpr int64_t kPiece = 1 << 14;
    // The innermost step is 0 (broadcast) or 1: the input dims after the
    // innermost one read are all 1.
    const int64_t inner = lens.back(), step = steps.back();
    const int64_t pieces = (inner + kPiece - 1) / kPiece;
    Dims outer_lens(lens.begin(), lens.end() - 1);
    std::vector<int64_t> outer_steps(steps.begin(), steps.end() - 1);
    outer_lens.push_back(pieces);
    outer_steps.push_back(step * kPiece);
    DispatchBySize(ElementSize(x.dtype), [&]<class W>() {
      const W* src = x.as<W>();
      W* dst = out.as<W>();
      ForEachRow(outer_lens, outer_steps, 0, CopyCost(ToSize(std::min(inner, kPiece)) * sizeof(W)),
                 [&](int64_t unit, int64_t offset) {
                   const int64_t from = (unit % pieces) * kPiece;
                   const int64_t n = std::min(kPiece, inner - from);
                   W* o = dst + (unit / pieces) * inner + from;
                   if (step == 0) {
                     std::fill(o, o + n, src[offset]);
                   } else {
                     std::memcpy(o, src + offset, ToSize(n) * sizeof(W));
                   }
                 });
    });
  }
};

// Sums runs of the input into an output of |target| dims. The input's dims
// are grouped (size-1 dims dropped, neighbours of one kind merged) into
// kept and reduced groups; the innermost group decides the loop:
// - kept (width w): each output row of w elements adds input rows of w
//   contiguous elements, a vector loop;
// - reduced (run v): each output element adds runs of v contiguous
//   elements, in eight lanes.
// When there are few output rows the reduced index space is cut into
// blocks whose partial sums are then added in block order.
template <class T>
class SumToShapeKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Dims target = ReadShape(ctx.input(1), "shape");
    if (target.size() > x.dims.size()) {
      Fail("input of shape ", DimsString(x.dims), " is not a broadcast of ", DimsString(target),
           ", which has more dimensions");
    }
    const std::size_t lead = x.dims.size() - target.size();
    for (std::size_t i = 0; i < target.size(); ++i) {
      const int64_t t = target[i], d = x.dims[lead + i];
      if (t != 1 && d != t) {
        Fail("input of shape ", DimsString(x.dims), " is not a broadcast of ", DimsString(target), ": dimension ",
             lead + i, " is ", d, ", not ", t);
      }
    }
    if (target == x.dims) {
      ctx.forward(0, 0);
      return;
    }
    Tensor out = ctx.allocate_output(0, target);
    if (out.num_elements == 0) return;
    T* po = out.as<T>();
    if (x.num_elements == 0) {  // an empty reduced dimension: every sum is 0
      ZeroBytes(po, ToSize(out.num_elements) * sizeof(T));
      return;
    }
    // Groups of the input's dims: (length, reduced).
    std::vector<std::pair<int64_t, bool>> groups;
    for (std::size_t k = 0; k < x.dims.size(); ++k) {
      if (x.dims[k] == 1) continue;
      const bool reduced = k < lead || target[k - lead] == 1;
      if (!groups.empty() && groups.back().second == reduced) {
        groups.back().first *= x.dims[k];
      } else {
        groups.emplace_back(x.dims[k], reduced);
      }
    }
    Dims kept_lens, reduced_lens;
    std::vector<int64_t> kept_steps, reduced_steps;
    int64_t stride = x.num_elements;
    for (const auto& [len, reduced] : groups) {
      stride /= len;
      (reduced ? reduced_lens : kept_lens).push_back(len);
      (reduced ? reduced_steps : kept_steps).push_back(stride);
    }
    const T* px = x.as<T>();
    if (groups.empty() || !groups.back().second) {
      // Innermost kept (or nothing reduced): vectors of w elements.
      const int64_t w = kept_lens.empty() ? 1 : kept_lens.back();
      if (!kept_lens.empty()) {
        kept_lens.pop_back();
        kept_steps.pop_back();
      }
      SumRows(px, po, w, GridOffsets(kept_lens, kept_steps), GridOffsets(reduced_lens, reduced_steps));
    } else {
      const int64_t v = reduced_lens.back();
      reduced_lens.pop_back();
      reduced_steps.pop_back();
      SumRuns(px, po, v, GridOffsets(kept_lens, kept_steps), GridOffsets(reduced_lens, reduced_steps));
    }
  }

 private:
  using A = Acc<T>;
  // Elements one task adds at least, and the most blocks one sum is cut into.
  static constexpr int64_t kBlock = 1 << 15;
  static constexpr int64_t kMaxBlocks = 64;
  static constexpr int64_t kManyTasks = 16;
  static constexpr int64_t kColumns = 1024;

  static A Add(A a, A b) { return a + b; }  // unsigned for integers: wraps

  // Output row r (w elements at r * w) = sum over |reduced| of the input
  // rows at rows[r] + reduced[i].
  static void SumRows(const T* x, T* out, int64_t w, const std::vector<int64_t>& rows,
                      const std::vector<int64_t>& reduced) {
    const auto n_rows = static_cast<int64_t>(rows.size()), n_red = static_cast<int64_t>(reduced.size());
    const int64_t col_blocks = (w + kColumns - 1) / kColumns;
    const int64_t tasks = n_rows * col_blocks;
    const int64_t cols = std::min(w, kColumns);
    int64_t blocks = 1;
    if (tasks < kManyTasks) blocks = std::clamp<int64_t>(n_red * cols / kBlock, 1, kMaxBlocks);
    const int64_t per_block = (n_red + blocks - 1) / blocks;
    std::vector<A> partial(ToSize(blocks > 1 ? tasks * blocks * cols : 0));
    ParallelFor(tasks * blocks, per_block * cols, [&](int64_t begin, int64_t end) {
      std::vector<A> acc(ToSize(cols));
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t task = unit / blocks, block = unit % blocks;
        const int64_t r = task / col_blocks, c0 = (task % col_blocks) * kColumns;
        const int64_t width = std::min(kColumns, w - c0);
        std::fill(acc.begin(), acc.end(), A(0));
        const int64_t i1 = std::min(n_red, (block + 1) * per_block);
        for (int64_t i = block * per_block; i < i1; ++i) {
          const T* p = x + rows[ToSize(r)] + reduced[ToSize(i)] + c0;
          for (int64_t j = 0; j < width; ++j) acc[ToSize(j)] = Add(acc[ToSize(j)], ToAcc(p[j]));
        }
        if (blocks == 1) {
          T* o = out + r * w + c0;
          for (int64_t j = 0; j < width; ++j) o[j] = FromAcc<T>(acc[ToSize(j)]);
        } else {
          std::copy(acc.begin(), acc.begin() + width, partial.begin() + unit * cols);
        }
      }
    });
    if (blocks == 1) return;
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t r = task / col_blocks, c0 = (task % col_blocks) * kColumns;
      const int64_t width = std::min(kColumns, w - c0);
      for (int64_t j = 0; j < width; ++j) {
        A sum = A(0);
        for (int64_t block = 0; block < blocks; ++block)
          sum = Add(sum, partial[ToSize((task * blocks + block) * cols + j)]);
        out[r * w + c0 + j] = FromAcc<T>(sum);
      }
    }
  }

  // Sum of the v contiguous elements at |p|, in eight lanes.
  static A SumRun(const T* p, int64_t v) {
    constexpr int kLanes = 8;
    A lane[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= v; i += kLanes) {
      for (int j = 0; j < kLanes; ++j) lane[j] = Add(lane[j], ToAcc(p[i + j]));
    }
    for (; i < v; ++i) lane[0] = Add(lane[0], ToAcc(p[i]));
    for (int width = kLanes / 2; width > 0; width /= 2) {
      for (int j = 0; j < width; ++j) lane[j] = Add(lane[j], lane[j + width]);
    }
    return lane[0];
  }

  // Output element e = sum over |reduced| of the runs of v elements at
  // elems[e] + reduced[i].
  static void SumRuns(const T* x, T* out, int64_t v, const std::vector<int64_t>& elems,
                      const std::vector<int64_t>& reduced) {
    const auto n_out = static_cast<int64_t>(elems.size()), n_red = static_cast<int64_t>(reduced.size());
    int64_t blocks = 1;
    if (n_out < kManyTasks) blocks = std::clamp<int64_t>(n_red * v / kBlock, 1, kMaxBlocks);
    // A single long run is cut by elements instead of by runs.
    const bool cut_run = blocks > 1 && n_red < blocks;
    const int64_t per_block = cut_run ? (v + blocks - 1) / blocks : (n_red + blocks - 1) / blocks;
    std::vector<A> partial(ToSize(blocks > 1 ? n_out * blocks : 0));
    ParallelFor(n_out * blocks, cut_run ? per_block * n_red : per_block * v, [&](int64_t begin, int64_t end) {
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t e = unit / blocks, block = unit % blocks;
        A sum = A(0);
        if (cut_run) {
          const int64_t from = std::min(v, block * per_block), to = std::min(v, (block + 1) * per_block);
          for (int64_t i = 0; i < n_red; ++i)
            sum = Add(sum, SumRun(x + elems[ToSize(e)] + reduced[ToSize(i)] + from, to - from));
        } else {
          const int64_t i1 = std::min(n_red, (block + 1) * per_block);
          for (int64_t i = block * per_block; i < i1; ++i)
            sum = Add(sum, SumRun(x + elems[ToSize(e)] + reduced[ToSize(i)], v));
        }
        if (blocks == 1) {
          out[e] = FromAcc<T>(sum);
        } else {
          partial[ToSize(unit)] = sum;
        }
      }
    });
    if (blocks == 1) return;
    for (int64_t e = 0; e < n_out; ++e) {
      A sum = A(0);
      for (int64_t block = 0; block < blocks; ++block) sum = Add(sum, partial[ToSize(e * blocks + block)]);
      out[e] = FromAcc<T>(sum);
    }
  }
};

// --- UnsortedSegmentSum --------------------------------------------------------------

// "[1,2]": the row-major index of flat position |i| in |dims|.
std::string IndexString(int64_t i, const Dims& dims) {
  Dims index(dims.size());
  for (std::size_t d = dims.size(); d-- > 0;) {
    index[d] = i % dims[d];
    i /= dims[d];
  }
  return DimsString(index);
}

template <class T, class Index>
class UnsortedSegmentSumKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor data = ctx.input(0), ids = ctx.input(1);
    const int64_t num = ReadScalar(ctx.input(2), "num_segments");
    if (num < 0) Fail("num_segments must be >= 0, got ", num);
    if (ids.rank() > data.rank() || !std::equal(ids.dims.begin(), ids.dims.end(), data.dims.begin())) {
      Fail("segment_ids' shape ", DimsString(ids.dims), " is not a prefix of data's shape ", DimsString(data.dims));
    }
    const Index* pid = ids.as<Index>();
    const int64_t n = ids.num_elements;
    for (int64_t i = 0; i < n; ++i) {
      if (static_cast<int64_t>(pid[i]) >= num) {
        Fail("segment id ", static_cast<int64_t>(pid[i]), " at position ", IndexString(i, ids.dims),
             " of segment_ids is out of range: num_segments is ", num);
      }
    }
    Dims out_dims{num};
    out_dims.insert(out_dims.end(), data.dims.begin() + ids.rank(), data.dims.end());
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    T* po = out.as<T>();
    ZeroBytes(po, ToSize(out.num_elements) * sizeof(T));
    const int64_t inner = Product(data.dims, ToSize(ids.rank()), data.dims.size());
    // The rows each segment adds, in row order (a stable sort by id), so
    // that every output element is one sum in Acc, rounded once, in an
    // order that does not depend on the threads.
    std::vector<int64_t> rows;
    rows.reserve(ToSize(n));
    for (int64_t i = 0; i < n; ++i) {
      if (pid[i] >= 0) rows.push_back(i);  // negative ids are dropped, as TensorFlow
    }
    std::stable_sort(rows.begin(), rows.end(), [pid](int64_t a, int64_t b) { return pid[a] < pid[b]; });
    std::vector<std::size_t> starts;  // where each named segment's rows begin in |rows|, then the end
    for (std::size_t k = 0; k < rows.size(); ++k) {
      if (k == 0 || pid[rows[k]] != pid[rows[k - 1]]) starts.push_back(k);
    }
    starts.push_back(rows.size());
    const auto segments = static_cast<int64_t>(starts.size()) - 1;
    const int64_t col_blocks = (inner + kColumns - 1) / kColumns;
    const int64_t cost =
        std::min(inner, kColumns) * (1 + static_cast<int64_t>(rows.size()) / std::max<int64_t>(segments, 1));
    const T* pd = data.as<T>();
    ParallelFor(segments * col_blocks, cost, [&](int64_t begin, int64_t end) {
      A acc[kColumns];
      for (int64_t unit = begin; unit < end; ++unit) {
        const std::size_t segment = ToSize(unit / col_blocks);
        const int64_t c0 = (unit % col_blocks) * kColumns, width = std::min(kColumns, inner - c0);
        std::fill(acc, acc + width, A(0));
        for (std::size_t k = starts[segment]; k < starts[segment + 1]; ++k) {
          const T* d = pd + rows[k] * inner + c0;
          for (int64_t j = 0; j < width; ++j) acc[j] = Add(acc[j], ToAcc(d[j]));
        }
        T* o = po + static_cast<int64_t>(pid[rows[starts[segment]]]) * inner + c0;
        for (int64_t j = 0; j < width; ++j) o[j] = FromAcc<T>(acc[j]);
      }
    });
  }

 private:
  using A = Acc<T>;
  static constexpr int64_t kColumns = 256;
  static A Add(A a, A b) { return a + b; }  // unsigned for integers: wraps
};

// --- Pack, InvertPermutation, ConcatOffset ---------------------------------------

class PackKernel {
 public:
  explicit PackKernel(const InitContext& init) : axis_(init.Int("axis")) {}
  void Compute(Context& ctx) {
    const int n = ctx.num_inputs();
    std::vector<Tensor> in;
    for (int i = 0; i < n; ++i) in.push_back(ctx.input(i));
    for (int i = 1; i < n; ++i) {
      if (in[ToSize(i)].dims != in[0].dims) {
        Fail("input ", i, " has shape ", DimsString(in[ToSize(i)].dims), ", but the inputs before it have shape ",
             DimsString(in[0].dims), "; Pack needs one shape");
      }
    }
    const Dims& dims = in[0].dims;
    const int axis = NormalizeAxis(axis_, in[0].rank() + 1);
    Dims out_dims = dims;
    out_dims.insert(out_dims.begin() + axis, n);
    Tensor out = ctx.allocate_output(0, out_dims);
    if (out.num_elements == 0) return;
    // Output row o is the inputs' rows o side by side.
    const int64_t outer = Product(dims, 0, ToSize(axis));
    const std::size_t bytes = ToSize(Product(dims, ToSize(axis), dims.size())) * ElementSize(out.dtype);
    auto* dst = static_cast<char*>(out.data);
    ParallelFor(outer * n, CopyCost(bytes), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const std::size_t o = ToSize(p / n), i = ToSize(p % n);
        std::memcpy(dst + ToSize(p) * bytes, static_cast<const char*>(in[i].data) + o * bytes, bytes);
      }
    });
  }

 private:
  const int64_t axis_;
};

template <class Index>
class InvertPermutationKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    if (x.rank() != 1) Fail("x must be 1-D, got shape ", DimsString(x.dims));
    const int64_t n = x.num_elements;
    Tensor y = ctx.allocate_output(0, x.dims);
    const Index* px = x.as<Index>();
    Index* py = y.as<Index>();
    std::vector<int64_t> at(ToSize(n), -1);  // where each value was seen
    for (int64_t i = 0; i < n; ++i) {
      const auto v = static_cast<int64_t>(px[i]);
      if (v < 0 || v >= n) {
        Fail("x[", i, "] = ", v, " is out of range [0, ", n, "); x must be a permutation of 0 .. ", n - 1);
      }
      if (at[ToSize(v)] >= 0) {
        Fail("x[", i, "] = ", v, " repeats x[", at[ToSize(v)], "]; x must be a permutation of 0 .. ", n - 1);
      }
      at[ToSize(v)] = i;
      py[v] = static_cast<Index>(i);
    }
  }
};

template <class Index>
class ConcatOffsetKernel {
 public:
  void Compute(Context& ctx) {
    const int64_t dim = ReadScalar(ctx.input(0), "concat_dim");
    const int n = ctx.num_inputs() - 1;
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < n; ++i) {
      const Tensor s = ctx.input(1 + i);
      if (s.rank() != 1) Fail("shape ", i, " must be 1-D, got a tensor of shape ", DimsString(s.dims));
      shapes.push_back(ReadInts(s));
      if (shapes.back().size() != shapes[0].size()) {
        Fail("shape ", i, " has ", shapes.back().size(), " entries but shape 0 has ", shapes[0].size(),
             "; the inputs must have one rank");
      }
    }
    const int rank = static_cast<int>(shapes[0].size());
    const int axis = NormalizeAxis(dim, rank, "concat_dim");
    for (int i = 1; i < n; ++i) {
      for (int d = 0; d < rank; ++d) {
        if (d != axis && shapes[ToSize(i)][ToSize(d)] != shapes[0][ToSize(d)]) {
          Fail("shape ", i, " is ", DimsString(shapes[ToSize(i)]), ", which differs from shape 0 ",
               DimsString(shapes[0]), " in dimension ", d, "; only dimension ", axis, " may differ");
        }
      }
    }
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      Tensor out = ctx.allocate_output(i, {rank});
      Index* po = out.as<Index>();
      std::fill(po, po + rank, Index(0));
      po[axis] = static_cast<Index>(offset);
      offset += shapes[ToSize(i)][ToSize(axis)];
    }
  }
};

// --- StridedSliceGrad ----------------------------------------------------------------

// Writes dy into zeros of 'shape' at the positions StridedSlice selects;
// the spec is read as StridedSliceKernel (array.cc) reads it (PlanStridedSlice).
class StridedSliceGradKernel {
 public:
  explicit StridedSliceGradKernel(const InitContext& init)
      : masks_{init.Int("begin_mask"), init.Int("end_mask"), init.Int("ellipsis_mask"), init.Int("new_axis_mask"),
               init.Int("shrink_axis_mask")} {
    if ((masks_.ellipsis & (masks_.ellipsis - 1)) != 0) Fail("more than one ellipsis in ellipsis_mask");
  }

  void Compute(Context& ctx) {
    const Dims dims = ReadShape(ctx.input(0), "shape");
    const std::vector<int64_t> begin = ReadVector(ctx.input(1), "begin");
    const std::vector<int64_t> end = ReadVector(ctx.input(2), "end");
    const std::vector<int64_t> strides = ReadVector(ctx.input(3), "strides");
    const Tensor dy = ctx.input(4);
    if (begin.size() != end.size() || begin.size() != strides.size()) {
      Fail("begin, end and strides have ", begin.size(), ", ", end.size(), " and ", strides.size(),
           " entries; they must match");
    }
    if (begin.size() > 63) Fail("a slice spec has at most 63 entries (the masks are 64-bit), got ", begin.size());
    for (int64_t s : strides) {
      if (s == 0) Fail("a stride is 0");
    }
    // The selected positions: a grid over the output.
    StridedSliceGrid grid = PlanStridedSlice(dims, begin, end, strides, masks_);
    Dims& lens = grid.lens;
    std::vector<int64_t>& steps = grid.steps;
    const int64_t offset = grid.offset;
    const Dims& sliced = grid.sliced;
    if (dy.dims != sliced) {
      Fail("dy has shape ", DimsString(dy.dims), ", but slicing ", DimsString(dims), " by the spec gives ",
           DimsString(sliced));
    }
    Tensor out = ctx.allocate_output(0, dims);
    if (out.num_elements == 0) return;
    const std::size_t element_size = ElementSize(dy.dtype);
    ZeroBytes(out.data, ToSize(out.num_elements) * element_size);
    if (dy.num_elements == 0) return;
    // Scatter dy, in its row-major order, over the grid: its rows along the
    // innermost grid dimension.
    if (lens.empty()) {
      lens.push_back(1);
      steps.push_back(0);
    }
    const int64_t inner = lens.back(), step = steps.back();
    const Dims outer_lens(lens.begin(), lens.end() - 1);
    const std::vector<int64_t> outer_steps(steps.begin(), steps.end() - 1);
    DispatchBySize(element_size, [&]<class W>() {
      const W* src = dy.as<W>();
      W* dst = out.as<W>();
      ForEachRow(outer_lens, outer_steps, offset, CopyCost(ToSize(inner) * sizeof(W)), [&](int64_t row, int64_t at) {
        const W* s = src + row * inner;
        W* o = dst + at;
        if (step == 1) {
          std::memcpy(o, s, ToSize(inner) * sizeof(W));
        } else {
          for (int64_t j = 0; j < inner; ++j) o[j * step] = s[j];
        }
      });
    });
  }

 private:
  const StridedSliceMasks masks_;
};

// --- Cumsum, Cumprod -------------------------------------------------------------

// The input is [outer, len, inner] around the axis. Each task scans one
// block of up to kColumns columns of one outer row, carrying a vector of
// running values down the axis (inner == 1 is one column per row).
template <class T, bool kProd>
class ScanKernel {
 public:
  explicit ScanKernel(const InitContext& init) : exclusive_(init.Bool("exclusive")), reverse_(init.Bool("reverse")) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const int axis = NormalizeAxis(ReadScalar(ctx.input(1), "axis"), x.rank());
    Tensor out = ctx.allocate_output(0, x.dims);
    if (out.num_elements == 0) return;
    const int64_t outer = Product(x.dims, 0, ToSize(axis));
    const int64_t len = x.dim(axis);
    const int64_t inner = Product(x.dims, ToSize(axis) + 1, x.dims.size());
    const int64_t col_blocks = (inner + kColumns - 1) / kColumns;
    const T* px = x.as<T>();
    T* po = out.as<T>();
    ParallelFor(outer * col_blocks, len * std::min(inner, kColumns), [&](int64_t begin, int64_t end) {
      A acc[kColumns];
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t o = unit / col_blocks, c0 = (unit % col_blocks) * kColumns;
        const int64_t width = std::min(kColumns, inner - c0);
        std::fill(acc, acc + width, A(kProd ? 1 : 0));
        for (int64_t k = 0; k < len; ++k) {
          const int64_t at = (o * len + (reverse_ ? len - 1 - k : k)) * inner + c0;
          const T* p = px + at;
          T* q = po + at;
          if (exclusive_) {
            for (int64_t j = 0; j < width; ++j) {
              q[j] = FromAcc<T>(acc[j]);
              acc[j] = Op(acc[j], ToAcc(p[j]));
            }
          } else {
            for (int64_t j = 0; j < width; ++j) {
              acc[j] = Op(acc[j], ToAcc(p[j]));
              q[j] = FromAcc<T>(acc[j]);
            }
          }
        }
      }
    });
  }

 private:
  using A = Acc<T>;
  static constexpr int64_t kColumns = 256;
  static A Op(A a, A b) { return kProd ? a * b : a + b; }  // unsigned for integers: wraps

  const bool exclusive_, reverse_;
};

// --- Registration ----------------------------------------------------------------

template <OpName kOp, class Op, class... Ts>
void AddGrad(KernelRegistry& r) {
  (AddKernel<kOp, GradKernel<Ts, Op>, DtypeOf<Ts>()>(r, {{"T", DtypeOf<Ts>()}}), ...);
}

#define WEFT_FLOATS float, double, Half, BFloat16
#define WEFT_SIGNED int8_t, int16_t, int32_t, int64_t

}  // namespace

void RegisterGradSupportKernels(KernelRegistry& r) {
  AddGrad<"ReluGrad", ReluGradOp, WEFT_FLOATS, WEFT_SIGNED>(r);
  AddGrad<"Relu6Grad", Relu6GradOp, WEFT_FLOATS, WEFT_SIGNED>(r);
  AddGrad<"EluGrad", EluGradOp, WEFT_FLOATS>(r);
  AddGrad<"SeluGrad", SeluGradOp, WEFT_FLOATS>(r);
  AddGrad<"SoftplusGrad", SoftplusGradOp, WEFT_FLOATS>(r);
  AddGrad<"GeluGrad", GeluGradOp, WEFT_FLOATS>(r);
  AddGrad<"SigmoidGrad", SigmoidGradOp, WEFT_FLOATS>(r);
  AddGrad<"TanhGrad", TanhGradOp, WEFT_FLOATS>(r);
  AddGrad<"SqrtGrad", SqrtGradOp, WEFT_FLOATS>(r);
  AddGrad<"RsqrtGrad", RsqrtGradOp, WEFT_FLOATS>(r);
  AddGrad<"ReciprocalGrad", ReciprocalGradOp, WEFT_FLOATS>(r);

  for (weft_dtype_t t : kFixedSizeTypes) {
    AddKernel<"BroadcastTo", BroadcastToKernel>(r, {{"T", t}}, 0, {"shape"});
    AddKernel<"Pack", PackKernel>(r, {{"T", t}});
    AddKernel<"StridedSliceGrad", StridedSliceGradKernel>(r, {{"T", t}}, 0, {"shape", "begin", "end", "strides"});
  }
  ForEachNumericType([&r]<class T>() {
    constexpr weft_dtype_t t = DtypeOf<T>();
    AddKernel<"SumToShape", SumToShapeKernel<T>, t>(r, {{"T", t}}, 0, {"shape"});
    AddKernel<"UnsortedSegmentSum", UnsortedSegmentSumKernel<T, int32_t>, t>(
        r, {{"T", t}, {"Tindices", WEFT_DTYPE_I32}}, 0, {"num_segments"});
    AddKernel<"UnsortedSegmentSum", UnsortedSegmentSumKernel<T, int64_t>, t>(
        r, {{"T", t}, {"Tindices", WEFT_DTYPE_I64}}, 0, {"num_segments"});
    AddKernel<"Cumsum", ScanKernel<T, false>, t>(r, {{"T", t}}, 0, {"axis"});
    AddKernel<"Cumprod", ScanKernel<T, true>, t>(r, {{"T", t}}, 0, {"axis"});
  });
  AddKernel<"InvertPermutation", InvertPermutationKernel<int32_t>, WEFT_DTYPE_I32>(r, {{"T", WEFT_DTYPE_I32}});
  AddKernel<"InvertPermutation", InvertPermutationKernel<int64_t>, WEFT_DTYPE_I64>(r, {{"T", WEFT_DTYPE_I64}});
  AddKernel<"ConcatOffset", ConcatOffsetKernel<int32_t>, WEFT_DTYPE_I32>(r, {{"Tshape", WEFT_DTYPE_I32}}, 0,
                                                                         {"concat_dim", "shape", "offset"});
  AddKernel<"ConcatOffset", ConcatOffsetKernel<int64_t>, WEFT_DTYPE_I64>(r, {{"Tshape", WEFT_DTYPE_I64}}, 0,
                                                                         {"concat_dim", "shape", "offset"});
}

}  // namespace weft::cpu
