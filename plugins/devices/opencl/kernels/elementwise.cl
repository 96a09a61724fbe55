// Elementwise kernels, built once per element type: T is the type, UT its
// unsigned twin (integer arithmetic wraps, as in NumPy, computed unsigned
// so there is no undefined overflow), AS_T reinterprets UT as T, and
// WEFT_FLOAT, WEFT_INT or WEFT_BOOL says which kind T is.
//
// Binary kernels broadcast as NumPy: the host collapses the shapes into at
// most 8 dimensions (dims) and gives each operand's element strides there
// (0 where it is broadcast); work-item i computes output element i.
#pragma OPENCL FP_CONTRACT OFF
#ifdef WEFT_F64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// The offset in an operand of output element |i|.
inline ulong plan_offset(ulong i, int rank, long8 dims, long8 strides) {
  if (rank == 1) return i * (ulong)strides.s0;
  const long d[8] = {dims.s0, dims.s1, dims.s2, dims.s3, dims.s4, dims.s5, dims.s6, dims.s7};
  const long s[8] = {strides.s0, strides.s1, strides.s2, strides.s3, strides.s4, strides.s5, strides.s6, strides.s7};
  ulong offset = 0;
  for (int k = rank - 1; k >= 0; --k) {
    const ulong n = (ulong)d[k];
    offset += (i % n) * (ulong)s[k];
    i /= n;
  }
  return offset;
}

#define UNARY_OUT(name, OUT, expr)                                                           \
  __kernel void name(__global const T* xs, __global OUT* ys, const ulong n) {               \
    const ulong i = get_global_id(0);                                                        \
    if (i >= n) return;                                                                      \
    const T x = xs[i];                                                                       \
    ys[i] = (expr);                                                                          \
  }
#define UNARY(name, expr) UNARY_OUT(name, T, expr)

#define BINARY_OUT(name, OUT, expr)                                                          \
  __kernel void name(__global const T* xs, __global const T* ys, __global OUT* zs, const ulong n, \
                     const int rank, const long8 dims, const long8 sx, const long8 sy) {     \
    const ulong i = get_global_id(0);                                                        \
    if (i >= n) return;                                                                      \
    const T x = xs[plan_offset(i, rank, dims, sx)];                                          \
    const T y = ys[plan_offset(i, rank, dims, sy)];                                          \
    zs[i] = (expr);                                                                          \
  }
#define BINARY(name, expr) BINARY_OUT(name, T, expr)

// --- Comparisons and copies: every T ------------------------------------------------

BINARY_OUT(equal, uchar, x == y)
BINARY_OUT(not_equal, uchar, x != y)
BINARY_OUT(less, uchar, x < y)
BINARY_OUT(less_equal, uchar, x <= y)
BINARY_OUT(greater, uchar, x > y)
BINARY_OUT(greater_equal, uchar, x >= y)

// numpy.where over three broadcast operands.
__kernel void where_(__global const uchar* cs, __global const T* ts, __global const T* es, __global T* zs,
                     const ulong n, const int rank, const long8 dims, const long8 sc, const long8 st,
                     const long8 se) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  zs[i] = cs[plan_offset(i, rank, dims, sc)] ? ts[plan_offset(i, rank, dims, st)] : es[plan_offset(i, rank, dims, se)];
}

// numpy.broadcast_to.
__kernel void broadcast(__global const T* xs, __global T* ys, const ulong n, const int rank, const long8 dims,
                        const long8 sx) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  ys[i] = xs[plan_offset(i, rank, dims, sx)];
}

// Every element set to the scalar value[0] (a device tensor).
__kernel void fill(__global const T* value, __global T* ys, const ulong n) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  ys[i] = value[0];
}

#if defined(WEFT_BOOL)
BINARY(logical_and, (uchar)(x && y))
BINARY(logical_or, (uchar)(x || y))
UNARY(logical_not, (uchar)!x)
#else

// --- Arithmetic: numbers ------------------------------------------------------------

// min(max(t, lo), hi) over three broadcast operands; NaN (in t or a bound) gives NaN.
__kernel void clip(__global const T* ts, __global const T* los, __global const T* his, __global T* zs,
                   const ulong n, const int rank, const long8 dims, const long8 st, const long8 sl,
                   const long8 sh) {
  const ulong i = get_global_id(0);
  if (i >= n) return;
  const T v = ts[plan_offset(i, rank, dims, st)];
  const T lo = los[plan_offset(i, rank, dims, sl)];
  const T hi = his[plan_offset(i, rank, dims, sh)];
  T r = v < lo ? lo : v;
  r = r > hi ? hi : r;
#if defined(WEFT_FLOAT)
  if (isnan(lo)) r = lo;  // a NaN bound gives NaN, as torch.clamp (weft ops ClipByValue)
  if (isnan(hi)) r = hi;
#endif
  zs[i] = r;
}

#if defined(WEFT_FLOAT)

// tanh, exactly +-1 beyond |x| = 20 (PoCL's gives 0.99999994 at infinity;
// from 20 on the exact value rounds to 1 in f32 and f64).
inline T tanh_of(T x) { return fabs(x) > (T)20 ? copysign((T)1, x) : tanh(x); }

UNARY(neg, -x)
UNARY(abs_, fabs(x))
UNARY(sign_, x > 0 ? (T)1 : (x < 0 ? (T)-1 : (x == 0 ? (T)0 : x)))
UNARY(exp_, exp(x))
UNARY(expm1_, expm1(x))
UNARY(log_, log(x))
UNARY(log1p_, log1p(x))
UNARY(sqrt_, sqrt(x))
UNARY(rsqrt_, (T)1 / sqrt(x))
UNARY(square, x * x)
UNARY(reciprocal, (T)1 / x)
UNARY(sin_, sin(x))
UNARY(cos_, cos(x))
UNARY(tan_, tan(x))
UNARY(asin_, asin(x))
UNARY(acos_, acos(x))
UNARY(atan_, atan(x))
UNARY(sinh_, sinh(x))
UNARY(cosh_, cosh(x))
UNARY(tanh_, tanh_of(x))
UNARY(asinh_, asinh(x))
UNARY(acosh_, acosh(x))
UNARY(atanh_, atanh(x))
UNARY(sigmoid, x >= 0 ? (T)1 / ((T)1 + exp(-x)) : exp(x) / ((T)1 + exp(x)))
UNARY(relu, x < 0 ? (T)0 : x)
UNARY(relu6, x < 0 ? (T)0 : (x > 6 ? (T)6 : x))
UNARY(elu, x > 0 ? x : expm1(x))
UNARY(selu, (T)1.0507009873554805 * (x > 0 ? x : (T)1.6732632423543772 * expm1(x)))
UNARY(softplus, x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)))
UNARY(erf_, erf(x))
UNARY(floor_, floor(x))
UNARY(ceil_, ceil(x))
UNARY(round_, rint(x))
// At +-inf, the limits (the formulas would give -inf * 0 = NaN at -inf).
UNARY(gelu_erf, isinf(x) ? (x > (T)0 ? x : (T)0) : (T)0.5 * x * ((T)1 + erf(x * (T)0.7071067811865476)))
UNARY(gelu_tanh, isinf(x) ? (x > (T)0 ? x : (T)0)
                          : (T)0.5 * x * ((T)1 + tanh_of((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x))))
UNARY_OUT(is_nan, uchar, (uchar)(isnan(x) ? 1 : 0))
UNARY_OUT(is_inf, uchar, (uchar)(isinf(x) ? 1 : 0))

BINARY(add, x + y)
BINARY(sub, x - y)
BINARY(mul, x * y)
BINARY(div_, x / y)
BINARY(maximum, (isnan(x) || isnan(y)) ? (T)NAN : (x > y ? x : y))
BINARY(minimum, (isnan(x) || isnan(y)) ? (T)NAN : (x < y ? x : y))
BINARY(pow_, pow(x, y))
BINARY(squared_difference, (x - y) * (x - y))

// Activation derivatives: x and y name the op's first and second input.
BINARY(relu_grad, y > 0 ? x : (T)0)
BINARY(relu6_grad, (y > 0 && y < 6) ? x : (T)0)
BINARY(elu_grad, y > 0 ? x : x * (y + (T)1))
BINARY(selu_grad, y > 0 ? x * (T)1.0507009873554805 : x * (y + (T)(1.0507009873554805 * 1.6732632423543772)))
BINARY(softplus_grad, x * (y >= 0 ? (T)1 / ((T)1 + exp(-y)) : exp(y) / ((T)1 + exp(y))))
BINARY(sigmoid_grad, y * x * ((T)1 - x))
BINARY(tanh_grad, y * ((T)1 - x * x))
BINARY(sqrt_grad, (T)0.5 * y / x)
BINARY(rsqrt_grad, (T)-0.5 * y * (x * x * x))
BINARY(reciprocal_grad, -y * (x * x))

inline T gelu_grad_erf_of(T g, T x) {
  if (isinf(x)) return g * (x > (T)0 ? (T)1 : (T)0);  // the derivative's limits
  const T cdf = (T)0.5 * ((T)1 + erf(x * (T)0.7071067811865476));
  const T pdf = (T)0.3989422804014327 * exp((T)-0.5 * x * x);
  return g * (cdf + x * pdf);
}
inline T gelu_grad_tanh_of(T g, T x) {
  // Beyond |x| = 20 the derivative is 1 or 0 (x^3 would overflow into inf * 0).
  if (fabs(x) > (T)20) return g * (x > (T)0 ? (T)1 : (T)0);
  const T k = (T)0.7978845608028654, c = (T)0.044715;
  const T t = tanh_of(k * (x + c * x * x * x));
  const T du = k * ((T)1 + (T)3 * c * x * x);
  return g * ((T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * du);
}
BINARY(gelu_grad_erf, gelu_grad_erf_of(x, y))
BINARY(gelu_grad_tanh, gelu_grad_tanh_of(x, y))

#else  // WEFT_INT

#define WRAP(u) AS_T(u)
UNARY(neg, WRAP((UT)0 - (UT)x))
UNARY(abs_, x < 0 ? WRAP((UT)0 - (UT)x) : x)
UNARY(sign_, x > 0 ? (T)1 : (x < 0 ? (T)-1 : (T)0))
UNARY(square, WRAP((UT)x * (UT)x))
UNARY(relu, x < 0 ? (T)0 : x)
UNARY(relu6, x < 0 ? (T)0 : (x > 6 ? (T)6 : x))

BINARY(add, WRAP((UT)x + (UT)y))
BINARY(sub, WRAP((UT)x - (UT)y))
BINARY(mul, WRAP((UT)x * (UT)y))
BINARY(maximum, x > y ? x : y)
BINARY(minimum, x < y ? x : y)
BINARY(squared_difference, WRAP(((UT)x - (UT)y) * ((UT)x - (UT)y)))
BINARY(relu_grad, y > 0 ? x : (T)0)
BINARY(relu6_grad, (y > 0 && y < 6) ? x : (T)0)

#endif  // WEFT_FLOAT
#endif  // WEFT_BOOL
