// Cast between f32, f64 (with cl_khr_fp64), i32, i64 and bool (uchar):
// one kernel per pair, cast_<from>_to_<to>. Floats to integers truncate
// toward zero and saturate, NaN giving 0 (OpenCL's _sat_rtz conversions
// do exactly that); integers to narrower integers keep the low bits;
// anything to bool is x != 0; to a float rounds to nearest even.
#pragma OPENCL FP_CONTRACT OFF
#ifdef WEFT_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define CAST(from, to, FROM, TO, expr)                                                         \
  __kernel void cast_##from##_to_##to(__global const FROM* xs, __global TO* ys, const ulong n) { \
    const ulong i = get_global_id(0);                                                          \
    if (i >= n) return;                                                                        \
    const FROM x = xs[i];                                                                      \
    ys[i] = (expr);                                                                            \
  }

#define TO_BOOL(from, FROM) CAST(from, bool, FROM, uchar, (uchar)(x != 0))

#define FROM_FLOAT(from, FROM)                        \
  CAST(from, f32, FROM, float, convert_float(x))      \
  CAST(from, i32, FROM, int, convert_int_sat_rtz(x))  \
  CAST(from, i64, FROM, long, convert_long_sat_rtz(x)) \
  TO_BOOL(from, FROM)

#define FROM_INT(from, FROM)                     \
  CAST(from, f32, FROM, float, convert_float(x)) \
  CAST(from, i32, FROM, int, convert_int(x))     \
  CAST(from, i64, FROM, long, convert_long(x))   \
  TO_BOOL(from, FROM)

FROM_FLOAT(f32, float)
FROM_INT(i32, int)
FROM_INT(i64, long)
FROM_INT(bool, uchar)

#ifdef WEFT_HAS_FP64
FROM_FLOAT(f64, double)
CAST(f32, f64, float, double, convert_double(x))
CAST(f64, f64, double, double, x)
CAST(i32, f64, int, double, convert_double(x))
CAST(i64, f64, long, double, convert_double(x))
CAST(bool, f64, uchar, double, convert_double(x))
#endif
