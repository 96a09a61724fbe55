"""IEEE edge values where Weft once differed from NumPy (issue: op
correctness at the edges), each a regression case:

- FloorDiv of floats by +-0 is +-inf (NaN for 0 // 0), as numpy.floor_divide;
- FloorMod of floats gives a zero result the sign of the divisor, as
  numpy.mod (4.0 % -2.0 is -0.0);
- MaxPool of a window of -inf is -inf (not the lowest finite value);
- Cast from f64, i32 and i64 to f16 and bf16 rounds once, to nearest even,
  from the exact value (not first to f32): the references are NumPy's
  astype for f16 (which rounds from the double), and for bf16, which NumPy
  lacks, exact rounding written out below with Python integers;
- StridedSlice (and its gradient) with a stride of INT64_MIN selects one
  element, as NumPy's x[7::-2**63] does.

Zeros are compared with their sign (signed_zeros) wherever IEEE and NumPy
define it.
"""
import math

import numpy as np

FLOATS = ["f32", "f64", "f16"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16}
INT64_MIN = -(2 ** 63)


def floor_cases(g):
    inf, nan = np.inf, np.nan
    x = [1.0, -1.0, 0.0, -0.0, 1.0, -1.0, 0.0, inf, -inf, nan, 5.0, -5.0, 4.0, -4.0, 4.0, -4.0, 1.0, -1.0]
    y = [0.0, 0.0, 0.0, 0.0, -0.0, -0.0, -0.0, 1.0, 1.0, 1.0, inf, inf, -2.0, 2.0, 2.0, -2.0, -inf, -inf]
    for dtype in FLOATS:
        a, b = np.array(x, NP[dtype]), np.array(y, NP[dtype])
        with np.errstate(all="ignore"):
            g.add(f"FloorDiv/ieee_{dtype}", "FloorDiv", [a, b], {"T": dtype}, [np.floor_divide(a, b)],
                  signed_zeros=True)
            g.add(f"FloorMod/ieee_{dtype}", "FloorMod", [a, b], {"T": dtype}, [np.mod(a, b)], signed_zeros=True)
    # The two examples, alone.
    g.add("FloorDiv/one_by_minus_zero", "FloorDiv", [np.float32(1.0), np.float32(-0.0)], {"T": "f32"},
          [np.float32(-np.inf)])
    g.add("FloorMod/four_by_minus_two", "FloorMod", [np.float64(4.0), np.float64(-2.0)], {"T": "f64"},
          [np.float64(-0.0)], signed_zeros=True)


def max_pool_cases(g):
    inf = np.inf
    # NHWC [1, 2, 3, 1]; 2x2 windows, VALID: the first all -inf, the second
    # -inf and 2. With SAME, more windows of -inf and padding.
    x = np.array([[-inf, -inf, 1.0], [-inf, -inf, 2.0]]).reshape(1, 2, 3, 1)
    for dtype in ["f32", "f64"]:
        xs = x.astype(NP[dtype])
        g.add(f"MaxPool/minus_inf_window_{dtype}", "MaxPool", [xs],
              {"T": dtype, "ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
              [np.array([-inf, 2.0]).reshape(1, 1, 2, 1).astype(xs.dtype)])
        # SAME, stride 1: windows at columns 0, 1 (all -inf) and 2 (1, 2 and padding).
        g.add(f"MaxPool/minus_inf_same_{dtype}", "MaxPool", [xs],
              {"T": dtype, "ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "SAME"},
              [np.array([[-inf, 2.0, 2.0], [-inf, 2.0, 2.0]]).reshape(1, 2, 3, 1).astype(xs.dtype)])
    # A window holding NaN gives NaN (NumPy's max), wherever the NaN is.
    nan = np.nan
    xs = np.array([1.0, nan, 3.0, 2.0, -inf, 5.0, nan, 0.0, 4.0], np.float32).reshape(1, 3, 3, 1)
    for dtype in ["f32", "f64"]:
        g.add(f"MaxPool/nan_window_{dtype}", "MaxPool", [xs.astype(NP[dtype])],
              {"T": dtype, "ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "SAME"},
              [np.array([nan, nan, 5.0, nan, 5.0, 5.0, nan, 4.0, 4.0]).reshape(1, 3, 3, 1).astype(NP[dtype])])
    # The lowest finite value stays itself.
    lowest = np.finfo(np.float32).min
    xs = np.array([lowest, -inf, -inf, -inf], np.float32).reshape(1, 2, 2, 1)
    g.add("MaxPool/lowest_finite_f32", "MaxPool", [xs],
          {"T": "f32", "ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
          [np.array([lowest], np.float32).reshape(1, 1, 1, 1)])


def round_bf16(v):
    """The exact value v (a float or an int) rounded once to bfloat16,
    nearest-even, as a float32; overflow gives inf."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v) or v == 0.0):
        return np.float32(v)
    if isinstance(v, int):
        if v == 0:
            return np.float32(0.0)
        sign, m = (-1 if v < 0 else 1), abs(v)
        shift = max(m.bit_length() - 8, 0)
        q, rem = divmod(m, 1 << shift)
        half = (1 << shift) >> 1
        if shift and (rem > half or (rem == half and q & 1)):
            q += 1
        value = sign * q * 2.0 ** shift
    else:
        mantissa, exponent = math.frexp(v)              # v = mantissa * 2^exponent, 0.5 <= |mantissa| < 1
        if exponent > 128:                              # at least 2^128: beyond bf16's range
            return np.float32(math.copysign(np.inf, v))
        quantum = max(exponent - 8, -133)               # 8 significant bits; subnormals step by 2^-133
        scaled = math.ldexp(v, -quantum)                # exact: a power-of-two scaling
        # round() is exact and ties to even; a value that rounds to zero keeps its sign.
        value = math.copysign(math.ldexp(round(scaled), quantum), v)
    biggest = float.fromhex("0x1.fep127")
    if abs(value) > biggest:
        return np.float32(math.copysign(np.inf, value))
    return np.float32(value)


def cast_cases(g):
    # f64 -> f16: values just past a halfway point of f16 that round to it in
    # f32 (the second rounding then goes the wrong way), with the exact ones.
    tricky_f16 = [1 + 2 ** -11 + 2 ** -40, -(1 + 2 ** -11 + 2 ** -40), 2 ** -25 + 2 ** -60, 65519.99999999,
                  -65519.99999999, 1 + 2 ** -11, 1.0, 0.1, -0.0, 0.0, 65520.0, np.inf, -np.inf, np.nan, 1e-30]
    x = np.array(tricky_f16, np.float64)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    g.add("Cast/f64_to_f16_single_rounding", "Cast", [x], {"SrcT": "f64", "DstT": "f16"}, [want], signed_zeros=True)
    tricky_bf16 = [1 + 2 ** -9 + 2 ** -40, -(1 + 2 ** -9 + 2 ** -40), 1 + 2 ** -9, 3.0, 0.1, -0.0, 0.0,
                   2.0 ** -134 + 2.0 ** -170, float.fromhex("0x1.ff7fffffffp127"), 1e39, np.inf, np.nan]
    x = np.array(tricky_bf16, np.float64)
    g.add("Cast/f64_to_bf16_single_rounding", "Cast", [x], {"SrcT": "f64", "DstT": "bf16"},
          [np.array([round_bf16(float(v)) for v in x], np.float32)], output_dtypes=["bf16"], signed_zeros=True)
    # Integers past f32's 24 bits: 2^25 + 2^17 + 1 is just above the halfway
    # point 2^25 + 2^17 of bf16, but f32 rounds it onto that point.
    for dtype, np_type, extra in [("i32", np.int32, []),
                                  ("i64", np.int64, [2 ** 60 + 2 ** 52 + 1, -(2 ** 60 + 2 ** 52 + 1), 2 ** 63 - 1,
                                                     -(2 ** 63)])]:
        ints = [2 ** 25 + 2 ** 17 + 1, -(2 ** 25 + 2 ** 17 + 1), 2 ** 25 + 2 ** 17, 257, 259, 2 ** 31 - 1, -(2 ** 31),
                0, 1, -1] + extra
        x = np.array(ints, np_type)
        g.add(f"Cast/{dtype}_to_bf16_single_rounding", "Cast", [x], {"SrcT": dtype, "DstT": "bf16"},
              [np.array([round_bf16(int(v)) for v in ints], np.float32)], output_dtypes=["bf16"])
        small = np.array([65519, -65519, 2049, 2051, 65520, 70000, 0, -1], np_type)
        with np.errstate(over="ignore"):
            want = small.astype(np.float64).astype(np.float16)
        g.add(f"Cast/{dtype}_to_f16_edges", "Cast", [small], {"SrcT": dtype, "DstT": "f16"}, [want])


def strided_slice_cases(g):
    x = np.arange(8, dtype=np.float32)
    g.add("StridedSlice/stride_int64_min", "StridedSlice", [x],
          {"T": "f32", "begin": [7], "end": [0], "strides": [INT64_MIN], "end_mask": 1},
          [x[7::INT64_MIN]])
    g.add("StridedSlice/stride_int64_min_to_start", "StridedSlice", [x],
          {"T": "f32", "begin": [5], "end": [-9], "strides": [INT64_MIN]}, [x[5:-9:INT64_MIN]])
    g.add("StridedSlice/stride_int64_max", "StridedSlice", [x],
          {"T": "f32", "begin": [2], "end": [8], "strides": [2 ** 63 - 1]}, [x[2:8:2 ** 63 - 1]])
    dy = np.array([3.0], np.float32)
    want = np.zeros(8, np.float32)
    want[7::INT64_MIN] = dy
    g.add("StridedSliceGrad/stride_int64_min", "StridedSliceGrad",
          [np.int64([8]), np.int64([7]), np.int64([0]), np.int64([INT64_MIN]), dy],
          {"T": "f32", "Index": "i64", "end_mask": 1}, [want])


def limit_cases(g):
    """What the edge-case suite found: Gelu and its gradient at +-inf give
    their limits (not -inf * 0 = NaN); a NaN bound of ClipByValue gives NaN
    (as torch.clamp; NumPy 1.24's clip ignores a NaN bound); Range starting at -0.0 starts with -0.0 (numpy.arange)."""
    inf, nan = np.inf, np.nan
    x = np.array([-inf, inf, nan, -30.0, 30.0, 1.0], np.float32)
    for approximate in (False, True):
        g.add(f"Gelu/limits_approx{int(approximate)}", "Gelu", [x], {"T": "f32", "approximate": approximate},
              [np.array([0.0, inf, nan, 0.0, 30.0, 0.8411920 if approximate else 0.8413447], np.float32)],
              rtol=1e-3, atol=1e-6)
        grad = np.array([2.0, 2.0, 2.0, 2.0, 2.0, inf], np.float32)
        g.add(f"GeluGrad/limits_approx{int(approximate)}", "GeluGrad", [grad, x],
              {"T": "f32", "approximate": approximate},
              [np.array([0.0, 2.0, nan, 0.0, 2.0, inf], np.float32)], rtol=1e-5, atol=1e-6)
    t = np.array([1.0, 1.0, 5.0, nan], np.float32)
    lo = np.array([nan, 0.0, 0.0, 0.0], np.float32)
    hi = np.array([2.0, nan, 2.0, 2.0], np.float32)
    g.add("ClipByValue/nan_bounds", "ClipByValue", [t, lo, hi], {"T": "f32"}, [np.clip(t, lo, hi)])
    g.add("Range/minus_zero_start", "Range", [np.float32(-0.0), np.float32(2.0), np.float32(1.0)],
          {"Tidx": "f32"}, [np.arange(-0.0, 2.0, 1.0).astype(np.float32)], signed_zeros=True)


def cases(g):
    limit_cases(g)
    floor_cases(g)
    max_pool_cases(g)
    cast_cases(g)
    strided_slice_cases(g)
