// Kernel of Resize (core/ops/resize_ops.cc): ONNX's Resize (opset 13) with
// run-time scales or sizes.
//
// roi, scales and sizes are small and in host memory: the kernel reads
// them, checks them with the messages of the op's shape function (so a
// shape only known at run time fails the same way) and computes the output
// shape. Then it resizes one axis at a time, skipping the axes it leaves as
// they are. Each axis has a table: for every output index, the input
// indices it weighs and their weights (one for nearest, up to two for
// linear, up to four for cubic, none for tf_crop_and_resize's
// extrapolation_value), computed in f64 from ONNX's definitions. A pass
// sums in f64; between passes the values stay f64 (in temporaries), and the
// last pass rounds them to T once. The axes that shrink most go first, so
// the temporaries stay small.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../kernel_framework.h"
#include "kernel_util.h"

namespace weft::cpu {
namespace {

// --- Attrs ---------------------------------------------------------------------------

enum class Mode { kNearest, kLinear, kCubic };
enum class Coordinate {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
enum class Rounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct Attrs {
  Mode mode = Mode::kNearest;
  Coordinate coordinate = Coordinate::kHalfPixel;
  Rounding rounding = Rounding::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
};

// The position of |value| in |names| (the values the op allows, in the
// order of the enum), or a failure naming the attr.
template <class E, std::size_t N>
E Parse(const std::string& value, const char* attr, const std::array<const char*, N>& names) {
  for (std::size_t i = 0; i < N; ++i) {
    if (value == names[i]) return static_cast<E>(i);
  }
  Fail("unknown ", attr, " '", value, "'");
}

Attrs ReadAttrs(const InitContext& init) {
  Attrs a;
  a.mode = Parse<Mode>(init.String("mode"), "mode", std::array{"nearest", "linear", "cubic"});
  a.coordinate = Parse<Coordinate>(init.String("coordinate_transformation_mode"), "coordinate_transformation_mode",
                                   std::array{"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                              "tf_half_pixel_for_nn", "tf_crop_and_resize"});
  a.rounding = Parse<Rounding>(init.String("nearest_mode"), "nearest_mode",
                               std::array{"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  a.cubic_a = init.Float("cubic_coeff_a");
  a.exclude_outside = init.Bool("exclude_outside");
  a.extrapolation = init.Float("extrapolation_value");
  return a;
}

// --- The output's shape ----------------------------------------------------------------

// One axis: its sizes, its scale s (out / in with sizes), the resized length
// L = in * s the coordinates use, and tf_crop_and_resize's region.
struct Axis {
  int64_t in = 0, out = 0;
  double scale = 1, length = 0;
  double start = 0, end = 1;
};

// |v| as the shape function writes it (shortest round trip).
std::string FloatText(float v) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, result.ptr);
}

std::vector<float> ReadFloats(Context& ctx, int i, const char* what) {
  const Tensor t = ctx.input(i);
  if (t.rank() != 1) Fail(what, " must be a 1-D tensor, got shape ", DimsString(t.dims));
  return std::vector<float>(t.as<float>(), t.as<float>() + t.num_elements);
}

std::vector<int64_t> ReadSizes(Context& ctx) {
  const Tensor t = ctx.input(3);
  if (t.rank() != 1) Fail("sizes must be a 1-D tensor, got shape ", DimsString(t.dims));
  return ReadInts(t);
}

// Axis |i| of size |in| resized to |size|, checked as SizedDim checks it.
Axis SizedAxis(int i, int64_t in, int64_t size) {
  if (size < 0) Fail("sizes must be >= 0, got ", size, " for dimension ", i);
  if (in == 0 && size > 0) {
    Fail("cannot resize dimension ", i, " of size 0 to ", size, ": it has no elements to interpolate");
  }
  Axis a;
  a.in = in;
  a.out = size;
  a.length = static_cast<double>(size);
  a.scale = in > 0 ? static_cast<double>(size) / static_cast<double>(in) : 1.0;
  return a;
}

// Axis |i| of size |in| scaled by |scale|: floor(in * scale) in f32, as
// ScaledDim computes it.
Axis ScaledAxis(int i, int64_t in, float scale) {
  if (!(scale > 0)) Fail("scales must be > 0, got ", FloatText(scale), " for dimension ", i);
  const float length = static_cast<float>(in) * scale;
  if (!(length < 9223372036854775808.0f)) {
    Fail("scale ", FloatText(scale), " makes dimension ", i, " of size ", in, " too large (", FloatText(length),
         " does not fit in 64 bits)");
  }
  Axis a;
  a.in = in;
  a.out = static_cast<int64_t>(std::floor(length));
  a.length = static_cast<double>(length);
  a.scale = static_cast<double>(scale);
  return a;
}

constexpr const char* kBothEmpty =
    "scales and sizes are both empty: one of them must give the output's size, with an entry per dimension of x";

// Every axis of |x|, from roi, scales and sizes, with the shape function's
// checks in its order.
std::vector<Axis> PlanAxes(Context& ctx, const Dims& x, const Attrs& attrs) {
  const std::vector<float> scales = ReadFloats(ctx, 2, "scales");
  const std::vector<int64_t> sizes = ReadSizes(ctx);
  if (scales.empty() && sizes.empty()) Fail(kBothEmpty);
  const bool by_sizes = !sizes.empty();
  const std::size_t n = by_sizes ? sizes.size() : scales.size(), rank = x.size();
  if (n != rank) Fail(by_sizes ? "sizes" : "scales", " has ", n, " entries for x of rank ", rank);
  std::vector<float> roi;
  if (attrs.coordinate == Coordinate::kTfCropAndResize) {
    roi = ReadFloats(ctx, 1, "roi");
    if (roi.size() != 2 * rank) {
      Fail("roi has ", roi.size(), " entries for x of rank ", rank, "; tf_crop_and_resize needs ", 2 * rank,
           " (every dimension's start, then every dimension's end)");
    }
  }
  std::vector<Axis> axes;
  for (std::size_t i = 0; i < rank; ++i) {
    const int d = static_cast<int>(i);
    axes.push_back(by_sizes ? SizedAxis(d, x[i], sizes[i]) : ScaledAxis(d, x[i], scales[i]));
    if (!roi.empty()) {
      axes.back().start = static_cast<double>(roi[i]);
      axes.back().end = static_cast<double>(roi[rank + i]);
    }
  }
  return axes;
}

// --- Tables ------------------------------------------------------------------------------

// What output index j of an axis sums: |count| (input index, weight) taps,
// in this order; none for extrapolation_value.
struct Taps {
  std::array<int64_t, 4> index{};
  std::array<double, 4> weight{};
  int count = 0;

  // Adds a tap, unless its weight is 0: an output at an input's position
  // is that input alone, whatever its neighbours hold (inf, NaN).
  void Add(int64_t i, double w) {
    if (w == 0) return;
    index[ToSize(count)] = i;
    weight[ToSize(count)] = w;
    ++count;
  }
};

// The input coordinate of output index |j| (coordinate_transformation_mode).
double SourceCoordinate(const Axis& a, Coordinate mode, int64_t j) {
  const double x = static_cast<double>(j), last = static_cast<double>(a.in - 1);
  switch (mode) {
    case Coordinate::kHalfPixel: return (x + 0.5) / a.scale - 0.5;
    case Coordinate::kPytorchHalfPixel: return a.length > 1 ? (x + 0.5) / a.scale - 0.5 : 0.0;
    case Coordinate::kAlignCorners: return a.length > 1 ? x * last / (a.length - 1) : 0.0;
    case Coordinate::kAsymmetric: return x / a.scale;
    case Coordinate::kTfHalfPixelForNn: return (x + 0.5) / a.scale;
    case Coordinate::kTfCropAndResize:
      return a.length > 1 ? a.start * last + x * (a.end - a.start) * last / (a.length - 1)
                          : 0.5 * (a.start + a.end) * last;
  }
  return 0;
}

// Index |v| (an integer in f64) clamped to [0, in - 1]: indices past the
// edge take the edge element.
int64_t ClampIndex(double v, int64_t in) {
  if (!(v > 0)) return 0;
  if (v >= static_cast<double>(in - 1)) return in - 1;
  return static_cast<int64_t>(v);
}

Taps NearestTaps(double x, int64_t in, Rounding rounding) {
  const double f = std::floor(x), frac = x - f;
  bool up = false;
  switch (rounding) {
    case Rounding::kRoundPreferFloor: up = frac > 0.5; break;
    case Rounding::kRoundPreferCeil: up = frac >= 0.5; break;
    case Rounding::kFloor: up = false; break;
    case Rounding::kCeil: up = frac > 0; break;
  }
  Taps t;
  t.Add(ClampIndex(up ? f + 1 : f, in), 1.0);
  return t;
}

// The two neighbours of |x| clamped to [0, in - 1].
Taps LinearTaps(double x, int64_t in) {
  x = std::clamp(x, 0.0, static_cast<double>(in - 1));
  const double f = std::floor(x), r = x - f;
  const int64_t i = ClampIndex(f, in);
  Taps t;
  t.Add(i, 1 - r);
  t.Add(std::min(i + 1, in - 1), r);
  return t;
}

// Keys' cubic kernel with coefficient |a| at distance |t|; exactly 0 at
// distances 1 and 2.
double CubicWeight(double t, double a) {
  t = std::abs(t);
  if (t < 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return a * (((t - 5) * t + 8) * t - 4);
  return 0;
}

// The four neighbours floor(x) - 1 .. floor(x) + 2; with exclude_outside,
// those outside [0, in) weigh 0 and the others are renormalised.
Taps CubicTaps(double x, int64_t in, double a, bool exclude_outside) {
  const double f = std::floor(x), r = x - f;
  std::array<double, 4> w{};
  std::array<double, 4> index{};
  double total = 0;
  for (int k = 0; k < 4; ++k) {
    index[ToSize(k)] = f + (k - 1);
    w[ToSize(k)] = CubicWeight(r - (k - 1), a);
    const bool outside = index[ToSize(k)] < 0 || index[ToSize(k)] > static_cast<double>(in - 1);
    if (exclude_outside && outside) w[ToSize(k)] = 0;
    total += w[ToSize(k)];
  }
  Taps t;
  for (std::size_t k = 0; k < 4; ++k) {
    t.Add(ClampIndex(index[k], in), exclude_outside && total != 0 ? w[k] / total : w[k]);
  }
  return t;
}

std::vector<Taps> AxisTable(const Axis& a, const Attrs& attrs) {
  std::vector<Taps> table(ToSize(a.out));
  for (int64_t j = 0; j < a.out; ++j) {
    const double x = SourceCoordinate(a, attrs.coordinate, j);
    Taps& t = table[ToSize(j)];
    if (attrs.coordinate == Coordinate::kTfCropAndResize && !(x >= 0 && x <= static_cast<double>(a.in - 1))) {
      continue;  // no taps: extrapolation_value
    }
    switch (attrs.mode) {
      case Mode::kNearest: t = NearestTaps(x, a.in, attrs.rounding); break;
      case Mode::kLinear: t = LinearTaps(x, a.in); break;
      case Mode::kCubic: t = CubicTaps(x, a.in, attrs.cubic_a, attrs.exclude_outside); break;
    }
  }
  return table;
}

// Whether |table| maps every index to itself alone.
bool IsIdentity(const std::vector<Taps>& table, int64_t in) {
  if (static_cast<int64_t>(table.size()) != in) return false;
  for (std::size_t j = 0; j < table.size(); ++j) {
    const Taps& t = table[j];
    if (t.count != 1 || t.index[0] != static_cast<int64_t>(j) || t.weight[0] != 1.0) return false;
  }
  return true;
}

// --- Passes ------------------------------------------------------------------------------

template <class T>
double ToDouble(const T& v) {
  return static_cast<double>(Load(v));
}

// |v| as T: through float for f16 and bf16, as every CPU kernel rounds.
template <class T>
T FromDouble(double v) {
  return StoreAs<T>(static_cast<typename ComputeType<T>::type>(v));
}

// A tensor viewed around the axis a pass resizes: [outer, in, inner].
struct PassShape {
  int64_t outer = 1, in = 1, inner = 1;
};

// One pass: out[o, j, :] = sum over the taps of j of weight * in[o, index, :],
// in f64 and in the taps' order.
template <class In, class Out>
void ResizeAxis(const In* src, Out* dst, const PassShape& s, const std::vector<Taps>& table, double extrapolation) {
  const auto out = static_cast<int64_t>(table.size());
  const Out fill = FromDouble<Out>(extrapolation);
  ParallelFor(s.outer * out, 4 * s.inner + 1, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(ToSize(s.inner));
    for (int64_t row = begin; row < end; ++row) {
      const Taps& t = table[ToSize(row % out)];
      Out* d = dst + row * s.inner;
      if (t.count == 0) {
        std::fill(d, d + s.inner, fill);
        continue;
      }
      const In* base = src + (row / out) * s.in * s.inner;
      const In* first = base + t.index[0] * s.inner;
      for (int64_t e = 0; e < s.inner; ++e) acc[ToSize(e)] = t.weight[0] * ToDouble(first[e]);
      for (int k = 1; k < t.count; ++k) {
        const In* next = base + t.index[ToSize(k)] * s.inner;
        const double w = t.weight[ToSize(k)];
        for (int64_t e = 0; e < s.inner; ++e) acc[ToSize(e)] += w * ToDouble(next[e]);
      }
      for (int64_t e = 0; e < s.inner; ++e) d[e] = FromDouble<Out>(acc[ToSize(e)]);
    }
  });
}

struct Pass {
  int axis = 0;
  std::vector<Taps> table;
};

// The passes of the axes that change, those that shrink most first (ties:
// the last axis first).
std::vector<Pass> PlanPasses(const std::vector<Axis>& axes, const Attrs& attrs) {
  std::vector<Pass> passes;
  for (int i = static_cast<int>(axes.size()) - 1; i >= 0; --i) {
    std::vector<Taps> table = AxisTable(axes[ToSize(i)], attrs);
    if (!IsIdentity(table, axes[ToSize(i)].in)) passes.push_back({i, std::move(table)});
  }
  auto ratio = [&](const Pass& p) {
    const Axis& a = axes[ToSize(p.axis)];
    return static_cast<double>(a.out) / static_cast<double>(a.in);
  };
  std::stable_sort(passes.begin(), passes.end(), [&](const Pass& p, const Pass& q) { return ratio(p) < ratio(q); });
  return passes;
}

// Runs |passes| from |x| into |y|, through f64 temporaries.
template <class T>
void RunPasses(Context& ctx, const Tensor& x, const Tensor& y, const std::vector<Pass>& passes, double extrapolation) {
  Dims dims = x.dims;
  const double* prev = nullptr;
  for (std::size_t p = 0; p < passes.size(); ++p) {
    const int axis = passes[p].axis;
    const PassShape s{Product(dims, 0, axis), dims[ToSize(axis)], Product(dims, axis + 1, x.rank())};
    dims[ToSize(axis)] = static_cast<int64_t>(passes[p].table.size());
    const bool first = p == 0, last = p + 1 == passes.size();
    double* next = last ? nullptr : ctx.allocate_temp(WEFT_DTYPE_F64, dims).as<double>();
    const std::vector<Taps>& table = passes[p].table;
    if (first && last) {
      ResizeAxis<T, T>(x.as<T>(), y.as<T>(), s, table, extrapolation);
    } else if (first) {
      ResizeAxis<T, double>(x.as<T>(), next, s, table, extrapolation);
    } else if (last) {
      ResizeAxis<double, T>(prev, y.as<T>(), s, table, extrapolation);
    } else {
      ResizeAxis<double, double>(prev, next, s, table, extrapolation);
    }
    prev = next;
  }
}

template <class T>
class ResizeKernel {
 public:
  explicit ResizeKernel(const InitContext& init) : attrs_(ReadAttrs(init)) {}

  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const std::vector<Axis> axes = PlanAxes(ctx, x.dims, attrs_);
    Dims out_dims;
    for (const Axis& a : axes) out_dims.push_back(a.out);
    const Tensor y = ctx.allocate_output(0, out_dims);
    if (y.num_elements == 0) return;
    const std::vector<Pass> passes = PlanPasses(axes, attrs_);
    if (passes.empty()) {
      std::copy(x.as<T>(), x.as<T>() + x.num_elements, y.as<T>());
      return;
    }
    RunPasses<T>(ctx, x, y, passes, attrs_.extrapolation);
  }

 private:
  const Attrs attrs_;
};

}  // namespace

// --- Registration --------------------------------------------------------------------------

void RegisterResizeKernels(KernelRegistry& r) {
  AddKernel<"Resize", ResizeKernel<float>, WEFT_DTYPE_F32>(r, {{"T", WEFT_DTYPE_F32}}, 0, {"roi", "scales", "sizes"});
  AddKernel<"Resize", ResizeKernel<double>, WEFT_DTYPE_F64>(r, {{"T", WEFT_DTYPE_F64}}, 0, {"roi", "scales", "sizes"});
  AddKernel<"Resize", ResizeKernel<Half>, WEFT_DTYPE_F16>(r, {{"T", WEFT_DTYPE_F16}}, 0, {"roi", "scales", "sizes"});
  AddKernel<"Resize", ResizeKernel<BFloat16>, WEFT_DTYPE_BF16>(r, {{"T", WEFT_DTYPE_BF16}}, 0,
                                                               {"roi", "scales", "sizes"});
}

}  // namespace weft::cpu
