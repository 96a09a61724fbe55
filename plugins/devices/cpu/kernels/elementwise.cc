// Elementwise kernels: unary math, binary arithmetic and comparisons with
// NumPy broadcasting, logical ops, Select, AddN, Cast and ClipByValue.
//
// f16 and bf16 compute in float and round once per element. Integer
// arithmetic wraps (computed in unsigned arithmetic, so there is no
// undefined behaviour); integer division by zero is an error.
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "broadcast.h"
#include "kernel_util.h"
#include "vector_math.h"

namespace weft::cpu {
namespace {

// Two's-complement wrapping arithmetic for integers.
template <class C>
C WrapAdd(C a, C b) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
}
template <class C>
C WrapSub(C a, C b) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(a) - static_cast<U>(b));
}
template <class C>
C WrapMul(C a, C b) {
  using U = std::make_unsigned_t<std::conditional_t<(sizeof(C) < sizeof(int)), unsigned, C>>;
  return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
}

// Python's (and NumPy's) float floor division, through divmod: exact for
// the quotients floor(x / y) gets wrong by one, and NaN for an infinite
// dividend, as CPython's float_floor_div computes it. By a zero divisor it
// is x / y (+-inf, or NaN for 0 / 0), as NumPy's floor_divide gives.
template <class C>
C PythonFloorDiv(C x, C y) {
  if (y == 0) return x / y;
  C mod = std::fmod(x, y);
  C div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) div -= 1;
  }
  if (div != 0) {
    C floordiv = std::floor(div);
    if (div - floordiv > C(0.5)) floordiv += 1;
    return floordiv;
  }
  return std::copysign(C(0), x / y);
}

// Python's (and NumPy's) float remainder: the sign of the divisor, a zero
// result included (4.0 % -2.0 is -0.0); NaN for a zero divisor.
template <class C>
C PythonFloorMod(C x, C y) {
  const C mod = std::fmod(x, y);
  if (mod == 0) return std::copysign(C(0), y);
  return (mod < 0) != (y < 0) ? mod + y : mod;
}

// --- Unary -----------------------------------------------------------------------

// out[i] = op.Apply<T>(in[i]) over the elements, in parallel.
template <class T, class Op>
class UnaryKernel {
 public:
  explicit UnaryKernel(const InitContext& init) : op_(sdk::MakeFromInit<Op>(init)) {}
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    Tensor y = ctx.allocate_output(0, x.dims);
    const T* in = x.as<T>();
    auto* out = y.as<typename Op::template Out<T>>();
    ParallelFor(x.num_elements, Op::kCost, [&](int64_t b, int64_t e) {
      // An op with a vectorised loop of its own for this type runs it.
      if constexpr (requires { op_.Bulk(in, out, b, e); }) {
        if (op_.Bulk(in, out, b, e)) return;
      }
      for (int64_t i = b; i < e; ++i) out[i] = op_.template Apply<T>(in[i]);
    });
  }

 private:
  Op op_;
};

// What every elementwise op declares: its estimated nanoseconds per
// element (for ParallelFor), its output type for inputs of type T (T itself
// unless |Result| names another), and for a binary op, the message of the
// error its Apply reports by returning false (none by default).
template <int64_t cost, class Result = void>
struct OpTraits {
  static constexpr int64_t kCost = cost;
  static constexpr const char* kError = "";
  template <class T>
  using Out = std::conditional_t<std::is_void_v<Result>, T, Result>;
};

// Ops over the compute type that return the same type.
#define WEFT_FLOAT_UNARY(Name, cost, expr)     \
  struct Name##Op : OpTraits<cost> {           \
    static constexpr const char* kOp = #Name;  \
    template <class T>                         \
    T Apply(T v) const {                       \
      using C = typename ComputeType<T>::type; \
      const C x = Load(v);                     \
      return StoreAs<T>(static_cast<C>(expr)); \
    }                                          \
  };

WEFT_FLOAT_UNARY(Exp, 10, std::exp(x))
WEFT_FLOAT_UNARY(Expm1, 10, std::expm1(x))
WEFT_FLOAT_UNARY(Log, 10, std::log(x))
WEFT_FLOAT_UNARY(Log1p, 10, std::log1p(x))
WEFT_FLOAT_UNARY(Sqrt, 4, std::sqrt(x))
WEFT_FLOAT_UNARY(Rsqrt, 4, C(1) / std::sqrt(x))
WEFT_FLOAT_UNARY(Reciprocal, 2, C(1) / x)
WEFT_FLOAT_UNARY(Sin, 10, std::sin(x))
WEFT_FLOAT_UNARY(Cos, 10, std::cos(x))
WEFT_FLOAT_UNARY(Tan, 10, std::tan(x))
WEFT_FLOAT_UNARY(Asin, 10, std::asin(x))
WEFT_FLOAT_UNARY(Acos, 10, std::acos(x))
WEFT_FLOAT_UNARY(Atan, 10, std::atan(x))
WEFT_FLOAT_UNARY(Sinh, 10, std::sinh(x))
WEFT_FLOAT_UNARY(Cosh, 10, std::cosh(x))
WEFT_FLOAT_UNARY(Tanh, 10, std::tanh(x))
WEFT_FLOAT_UNARY(Asinh, 10, std::asinh(x))
WEFT_FLOAT_UNARY(Acosh, 10, std::acosh(x))
WEFT_FLOAT_UNARY(Atanh, 10, std::atanh(x))
WEFT_FLOAT_UNARY(Sigmoid, 10, x >= 0 ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x)))
WEFT_FLOAT_UNARY(Elu, 10, x > 0 ? x : std::expm1(x))
WEFT_FLOAT_UNARY(Selu, 10, C(1.0507009873554805) * (x > 0 ? x : C(1.6732632423543772) * std::expm1(x)))
WEFT_FLOAT_UNARY(Softplus, 10, x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)))
WEFT_FLOAT_UNARY(Erf, 10, std::erf(x))
WEFT_FLOAT_UNARY(Floor, 2, std::floor(x))
WEFT_FLOAT_UNARY(Ceil, 2, std::ceil(x))
WEFT_FLOAT_UNARY(Round, 2, std::nearbyint(x))
#undef WEFT_FLOAT_UNARY

struct GeluOp : OpTraits<12> {
  static constexpr const char* kOp = "Gelu";
  explicit GeluOp(const InitContext& init) : approximate_(init.Bool("approximate")) {}
  template <class T>
  T Apply(T v) const {
    using C = typename ComputeType<T>::type;
    const C x = Load(v);
    // The limits at +-inf (the formulas would give -inf * 0 = NaN at -inf).
    if (std::isinf(x)) return StoreAs<T>(x > 0 ? x : C(0));
    if (approximate_) {
      const C k = C(0.7978845608028654);  // sqrt(2/pi)
      return StoreAs<T>(C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x))));
    }
    return StoreAs<T>(C(0.5) * x * (C(1) + std::erf(x * C(0.7071067811865476))));
  }
  // The exact f32 form through the vectorised loop (vector_math.h).
  bool Bulk(const float* in, float* out, int64_t begin, int64_t end) const {
    if (approximate_) return false;
    GeluErf(in + begin, out + begin, end - begin);
    return true;
  }
  bool approximate_;
};

// Ops valid for integers too: |float_expr| of x, the value in the compute
// type, for the floats; |int_expr| of v for the integers, which wraps.
#define WEFT_SIGNED_UNARY(Name, float_expr, int_expr) \
  struct Name##Op : OpTraits<1> {                     \
    static constexpr const char* kOp = #Name;         \
    template <class T>                                \
    T Apply(T v) const {                              \
      if constexpr (kIsFloat<T>) {                    \
        const auto x = Load(v);                       \
        return StoreAs<T>(float_expr);                \
      } else {                                        \
        return int_expr;                              \
      }                                               \
    }                                                 \
  };

WEFT_SIGNED_UNARY(Neg, -x, WrapSub<T>(0, v))
WEFT_SIGNED_UNARY(Abs, std::fabs(x), v < 0 ? WrapSub<T>(0, v) : v)
WEFT_SIGNED_UNARY(Square, x* x, WrapMul<T>(v, v))
#undef WEFT_SIGNED_UNARY

struct SignOp : OpTraits<1> {
  static constexpr const char* kOp = "Sign";
  template <class T>
  T Apply(T v) const {
    if constexpr (kIsFloat<T>) {
      if (std::isnan(Load(v))) return v;
    }
    using C = typename ComputeType<T>::type;
    const C x = Load(v);
    return StoreAs<T>(x > 0 ? C(1) : (x < 0 ? C(-1) : C(0)));
  }
};

// Relu (kCap 0: no upper bound) and Relu6 (kCap 6); NaN compares false:
// it stays NaN.
template <int kCap>
struct ReluOp : OpTraits<1> {
  static constexpr const char* kOp = kCap == 0 ? "Relu" : "Relu6";
  template <class T>
  T Apply(T v) const {
    using C = typename ComputeType<T>::type;
    const C x = Load(v);
    if constexpr (kCap == 0) {
      return x < C(0) ? StoreAs<T>(C(0)) : v;
    } else {
      if (x < C(0)) return StoreAs<T>(C(0));
      if (x > C(kCap)) return StoreAs<T>(C(kCap));
      return v;
    }
  }
};

struct IsNanOp : OpTraits<1, bool> {
  static constexpr const char* kOp = "IsNan";
  template <class T>
  bool Apply(T v) const {
    return std::isnan(Load(v));
  }
};

struct IsInfOp : OpTraits<1, bool> {
  static constexpr const char* kOp = "IsInf";
  template <class T>
  bool Apply(T v) const {
    return std::isinf(Load(v));
  }
};

struct LogicalNotOp : OpTraits<1> {
  static constexpr const char* kOp = "LogicalNot";
  template <class T>
  T Apply(T v) const {
    return !v;
  }
};

// --- Binary ----------------------------------------------------------------------

template <class T, class Op>
class BinaryKernel {
 public:
  void Compute(Context& ctx) {
    const Tensor x = ctx.input(0);
    const Tensor y = ctx.input(1);
    using Out = typename Op::template Out<T>;
    if (x.dims == y.dims) {
      // No broadcast (scalars in a loop, most of all): one flat loop,
      // without planning.
      Tensor z = ctx.allocate_output(0, x.dims);
      const T* a = x.as<T>();
      const T* b = y.as<T>();
      Out* out = z.as<Out>();
      bool failed = false;
      const int64_t n = z.num_elements;
      if (n * Op::kCost < kInlineCost) {
        for (int64_t i = 0; i < n; ++i) {
          if (!Op::template Apply<T>(a[i], b[i], out + i)) failed = true;
        }
      } else {
        std::atomic<bool> shard_failed{false};
        ParallelFor(n, Op::kCost, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            if (!Op::template Apply<T>(a[i], b[i], out + i)) shard_failed = true;
          }
        });
        failed = shard_failed;
      }
      if (failed) Fail(Op::kError);
      return;
    }
    const Dims out_dims = BroadcastDims(x.dims, y.dims);
    Tensor z = ctx.allocate_output(0, out_dims);
    if (z.num_elements == 0) return;
    const T* a = x.as<T>();
    const T* b = y.as<T>();
    Out* out = z.as<Out>();
    const auto plan = PlanBroadcast<2>(out_dims, {x.dims, y.dims});
    std::atomic<bool> failed{false};
    ForEachRun(plan, Op::kCost,
               [&](int64_t o, const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& step) {
                 const T* pa = a + off[0];
                 const T* pb = b + off[1];
                 Out* po = out + o;
                 if (step[0] == 1 && step[1] == 1) {
                   for (int64_t i = 0; i < n; ++i) {
                     if (!Op::template Apply<T>(pa[i], pb[i], po + i)) failed = true;
                   }
                 } else if (step[0] == 1 && step[1] == 0) {
                   const T vb = pb[0];
                   for (int64_t i = 0; i < n; ++i) {
                     if (!Op::template Apply<T>(pa[i], vb, po + i)) failed = true;
                   }
                 } else if (step[0] == 0 && step[1] == 1) {
                   const T va = pa[0];
                   for (int64_t i = 0; i < n; ++i) {
                     if (!Op::template Apply<T>(va, pb[i], po + i)) failed = true;
                   }
                 } else {
                   for (int64_t i = 0; i < n; ++i) {
                     if (!Op::template Apply<T>(pa[i * step[0]], pb[i * step[1]], po + i)) failed = true;
                   }
                 }
               });
    if (failed) Fail(Op::kError);
  }
};

// A binary op: Apply writes *out and returns false on an error (integer
// division by zero), whose message is kError.
#define WEFT_BINARY(Name, cost, float_expr, int_expr, error_test)     \
  struct Name : OpTraits<cost> {                                      \
    static constexpr const char* kError = "integer division by zero"; \
    template <class T>                                                \
    static bool Apply(T va, T vb, T* out) {                           \
      if constexpr (kIsFloat<T>) {                                    \
        using C = typename ComputeType<T>::type;                      \
        const C x = Load(va), y = Load(vb);                           \
        *out = StoreAs<T>(static_cast<C>(float_expr));                \
        return true;                                                  \
      } else {                                                        \
        const T x = va, y = vb;                                       \
        if (error_test) return false;                                 \
        *out = static_cast<T>(int_expr);                              \
        return true;                                                  \
      }                                                               \
    }                                                                 \
  };

WEFT_BINARY(AddOp, 1, x + y, WrapAdd<T>(x, y), false)
WEFT_BINARY(SubOp, 1, x - y, WrapSub<T>(x, y), false)
WEFT_BINARY(MulOp, 1, x* y, WrapMul<T>(x, y), false)
// C division truncates; INT_MIN / -1 wraps to INT_MIN.
WEFT_BINARY(DivOp, 2, x / y, (y == -1 ? WrapSub<T>(0, x) : x / y), y == 0)
WEFT_BINARY(RealDivOp, 2, x / y, x / y, y == 0)
WEFT_BINARY(FloorDivOp, 4, PythonFloorDiv(x, y),
            (y == -1 ? WrapSub<T>(0, x) : (x / y - ((x % y != 0) && ((x < 0) != (y < 0))))), y == 0)
WEFT_BINARY(FloorModOp, 4, PythonFloorMod(x, y),
            (y == -1 ? 0 : ((x % y != 0 && ((x % y < 0) != (y < 0))) ? x % y + y : x % y)), y == 0)
WEFT_BINARY(MaximumOp, 1, (std::isnan(x) || std::isnan(y)) ? std::numeric_limits<C>::quiet_NaN() : (x > y ? x : y),
            x > y ? x : y, false)
WEFT_BINARY(MinimumOp, 1, (std::isnan(x) || std::isnan(y)) ? std::numeric_limits<C>::quiet_NaN() : (x < y ? x : y),
            x < y ? x : y, false)
WEFT_BINARY(SquaredDifferenceOp, 1, (x - y) * (x - y), WrapMul<T>(WrapSub<T>(x, y), WrapSub<T>(x, y)), false)
#undef WEFT_BINARY

// Integer powers by squaring (wrapping); a negative exponent is an error.
struct PowOp : OpTraits<10> {
  static constexpr const char* kError = "integers to negative integer powers are not allowed";
  template <class T>
  static bool Apply(T va, T vb, T* out) {
    if constexpr (kIsFloat<T>) {
      using C = typename ComputeType<T>::type;
      *out = StoreAs<T>(static_cast<C>(std::pow(Load(va), Load(vb))));
      return true;
    } else {
      if (vb < 0) return false;
      T result = 1, base = va;
      for (T e = vb; e > 0; e >>= 1) {
        if (e & 1) result = WrapMul<T>(result, base);
        base = WrapMul<T>(base, base);
      }
      *out = result;
      return true;
    }
  }
};

// A comparison or logical op: the standard function object Cmp
// (std::less<>, ...) of the two values in their compute type.
template <class Cmp>
struct CompareOp : OpTraits<1, bool> {
  template <class T>
  static bool Apply(T va, T vb, bool* out) {
    *out = Cmp()(Load(va), Load(vb));
    return true;
  }
};

// --- Select, ClipByValue, AddN, Cast -------------------------------------------

// Output 0 as the broadcast of inputs 0, 1 and 2, of element types A, T and
// T: out = f(a, b, c) at each output position, f taking pointers to the
// operands' elements there (so it reads only those it needs).
template <class A, class T, class F>
void BroadcastTernary(Context& ctx, F f) {
  const Tensor a = ctx.input(0), b = ctx.input(1), c = ctx.input(2);
  const Dims out_dims = BroadcastDims(BroadcastDims(a.dims, b.dims), c.dims);
  Tensor out = ctx.allocate_output(0, out_dims);
  if (out.num_elements == 0) return;
  const A* pa = a.as<A>();
  const T* pb = b.as<T>();
  const T* pc = c.as<T>();
  T* po = out.as<T>();
  const auto plan = PlanBroadcast<3>(out_dims, {a.dims, b.dims, c.dims});
  ForEachRun(plan, 1, [&](int64_t o, const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& s) {
    for (int64_t i = 0; i < n; ++i)
      po[o + i] = f(pa + off[0] + i * s[0], pb + off[1] + i * s[1], pc + off[2] + i * s[2]);
  });
}

template <class T>
class SelectKernel {
 public:
  void Compute(Context& ctx) {
    BroadcastTernary<bool, T>(ctx, [](const bool* c, const T* t, const T* e) { return *c ? *t : *e; });
  }
};

template <class T>
class ClipKernel {
 public:
  void Compute(Context& ctx) {
    BroadcastTernary<T, T>(ctx, [](const T* pt, const T* pl, const T* ph) {
      const auto v = Load(*pt);
      const auto l = Load(*pl);
      const auto h = Load(*ph);
      auto r = v < l ? l : v;  // NaN compares false: stays NaN
      r = r > h ? h : r;
      if constexpr (std::is_floating_point_v<decltype(r)>) {
        if (l != l) r = l;  // a NaN bound gives NaN, as torch.clamp (weft ops ClipByValue)
        if (h != h) r = h;
      }
      return StoreAs<T>(r);
    });
  }
};

template <class T>
class AddNKernel {
 public:
  void Compute(Context& ctx) {
    const std::vector<Tensor> inputs = sdk::AddNInputs(ctx);
    const int n = static_cast<int>(inputs.size());
    Tensor out = ctx.allocate_output(0, inputs[0].dims);
    T* po = out.as<T>();
    ParallelFor(out.num_elements, n, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        auto sum = Load(inputs[0].as<T>()[j]);
        for (int i = 1; i < n; ++i) {
          const auto v = Load(inputs[static_cast<std::size_t>(i)].as<T>()[j]);
          if constexpr (kIsFloat<T>) {
            sum = sum + v;
          } else {
            sum = WrapAdd<T>(sum, v);
          }
        }
        po[j] = StoreAs<T>(sum);
      }
    });
  }
};

// Converts one element, as Cast documents: float -> int truncates and
// saturates, NaN -> 0; int -> narrower int wraps; anything -> bool is != 0.
template <class To, class From>
To CastOne(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return Load(v) != 0;
  } else if constexpr (std::is_same_v<From, bool>) {
    return StoreAs<To>(static_cast<typename ComputeType<To>::type>(v ? 1 : 0));
  } else if constexpr ((std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>)&&(std::is_same_v<From, double> ||
                                                                                    std::is_same_v<From, int32_t> ||
                                                                                    std::is_same_v<From, int64_t>)) {
    // One rounding from the exact source value (weft/sdk/half.h), not two
    // through float.
    const float odd = [&] {
      if constexpr (std::is_same_v<From, double>) {
        return sdk::DoubleToFloatRoundToOdd(v);
      } else {
        return sdk::Int64ToFloatRoundToOdd(v);
      }
    }();
    return StoreAs<To>(odd);
  } else if constexpr (kIsFloat<To>) {
    return StoreAs<To>(static_cast<typename ComputeType<To>::type>(Load(v)));
  } else if constexpr (kIsFloat<From>) {
    const double x = static_cast<double>(Load(v));
    if (std::isnan(x)) return 0;
    if (x <= static_cast<double>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (x >= static_cast<double>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(v);  // modular since C++20
  }
}

// Cast to To from the input's type, element by element.
template <class To>
struct CastOp : OpTraits<2, To> {
  template <class From>
  To Apply(From v) const {
    return CastOne<To, From>(v);
  }
};

// --- Registration ----------------------------------------------------------------

#define WEFT_FLOATS float, double, Half, BFloat16
#define WEFT_SIGNED int8_t, int16_t, int32_t, int64_t
#define WEFT_NUMERIC WEFT_FLOATS, WEFT_SIGNED, uint8_t

template <class Op, class T>
void AddUnaryOf(KernelRegistry& r) {
  if constexpr (KeepsKernel(Op::kOp, DtypeOf<T>())) r.Add<UnaryKernel<T, Op>>(Op::kOp, {{"T", DtypeOf<T>()}});
}
template <class Op, class... Ts>
void AddUnary(KernelRegistry& r) {
  (AddUnaryOf<Op, Ts>(r), ...);
}

// Unary ops of floats only, and of floats and signed integers, each for
// its op (kOp).
template <class... Ops>
void AddFloatUnary(KernelRegistry& r) {
  (AddUnary<Ops, WEFT_FLOATS>(r), ...);
}
template <class... Ops>
void AddSignedUnary(KernelRegistry& r) {
  (AddUnary<Ops, WEFT_FLOATS, WEFT_SIGNED>(r), ...);
}

template <OpName kOp, class Op, class... Ts>
void AddBinary(KernelRegistry& r) {
  (AddKernel<kOp, BinaryKernel<Ts, Op>, DtypeOf<Ts>()>(r, {{"T", DtypeOf<Ts>()}}), ...);
}

template <class From, class... Tos>
void AddCastsFrom(KernelRegistry& r) {
  (AddKernel<"Cast", UnaryKernel<From, CastOp<Tos>>, DtypeOf<From>()>(
       r, {{"SrcT", DtypeOf<From>()}, {"DstT", DtypeOf<Tos>()}}),
   ...);
}

}  // namespace

void RegisterElementwiseKernels(KernelRegistry& r) {
  AddSignedUnary<NegOp, AbsOp, SignOp, SquareOp, ReluOp<0>, ReluOp<6>>(r);
  AddFloatUnary<ExpOp, Expm1Op, LogOp, Log1pOp, SqrtOp, RsqrtOp, ReciprocalOp, SinOp, CosOp, TanOp, AsinOp, AcosOp,
                AtanOp, SinhOp, CoshOp, TanhOp, AsinhOp, AcoshOp, AtanhOp, SigmoidOp, EluOp, SeluOp, GeluOp, SoftplusOp,
                ErfOp, FloorOp, CeilOp, RoundOp, IsNanOp, IsInfOp>(r);

  AddBinary<"Add", AddOp, WEFT_NUMERIC>(r);
  AddBinary<"Sub", SubOp, WEFT_NUMERIC>(r);
  AddBinary<"Mul", MulOp, WEFT_NUMERIC>(r);
  AddBinary<"Div", DivOp, WEFT_NUMERIC>(r);
  AddBinary<"RealDiv", RealDivOp, WEFT_FLOATS>(r);
  AddBinary<"FloorDiv", FloorDivOp, WEFT_NUMERIC>(r);
  AddBinary<"FloorMod", FloorModOp, WEFT_NUMERIC>(r);
  AddBinary<"Pow", PowOp, WEFT_FLOATS, int32_t, int64_t>(r);
  AddBinary<"Maximum", MaximumOp, WEFT_NUMERIC>(r);
  AddBinary<"Minimum", MinimumOp, WEFT_NUMERIC>(r);
  AddBinary<"SquaredDifference", SquaredDifferenceOp, WEFT_FLOATS, int32_t, int64_t>(r);
  AddBinary<"Equal", CompareOp<std::equal_to<>>, WEFT_NUMERIC, bool>(r);
  AddBinary<"NotEqual", CompareOp<std::not_equal_to<>>, WEFT_NUMERIC, bool>(r);
  AddBinary<"Less", CompareOp<std::less<>>, WEFT_NUMERIC>(r);
  AddBinary<"LessEqual", CompareOp<std::less_equal<>>, WEFT_NUMERIC>(r);
  AddBinary<"Greater", CompareOp<std::greater<>>, WEFT_NUMERIC>(r);
  AddBinary<"GreaterEqual", CompareOp<std::greater_equal<>>, WEFT_NUMERIC>(r);
  AddKernel<"LogicalAnd", BinaryKernel<bool, CompareOp<std::logical_and<>>>>(r, {});
  AddKernel<"LogicalOr", BinaryKernel<bool, CompareOp<std::logical_or<>>>>(r, {});
  if constexpr (KeepsKernel(LogicalNotOp::kOp)) r.Add<UnaryKernel<bool, LogicalNotOp>>(LogicalNotOp::kOp, {});

  auto select = [&r]<class T>() { AddKernel<"Select", SelectKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}}); };
  ForEachNumericType(select);
  select.template operator()<bool>();
  ForEachNumericType([&r]<class T>() {
    AddKernel<"ClipByValue", ClipKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
    AddKernel<"AddN", AddNKernel<T>, DtypeOf<T>()>(r, {{"T", DtypeOf<T>()}});
  });
  auto casts = [&r]<class From>() { AddCastsFrom<From, WEFT_NUMERIC, bool>(r); };
  ForEachNumericType(casts);
  casts.template operator()<bool>();
}

}  // namespace weft::cpu
