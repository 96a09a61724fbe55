"""The ops the symbolic gradients emit besides the nn backward ops: the
activation derivatives (ReluGrad ... ReciprocalGrad, GeluGrad),
BroadcastTo and its adjoint SumToShape, UnsortedSegmentSum, Pack,
InvertPermutation, ConcatOffset, StridedSliceGrad, Cumsum and Cumprod.

References: the derivatives written out in NumPy in float64 (Python's
math.erf for Gelu) from the rounded inputs, then rounded to the case's
dtype; numpy.broadcast_to, sum with keepdims, add.at, stack, argsort,
cumsum and cumprod; StridedSliceGrad assigns dy through the NumPy index
(np.s_) that reads the same elements as the op's spec. Integer results are
exact and wrap as the ops document (NumPy's int64 arithmetic wraps, then
narrows).
"""
import math

import numpy as np

FLOATS = ["f32", "f64", "f16", "bf16"]
SIGNED = ["i8", "i16", "i32", "i64"]
INTS = SIGNED + ["u8"]
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ["bool"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32,
      "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_}

SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805


def rng(seed):
    return np.random.default_rng(seed)


def cast_in(g, x, dtype):
    """|x| as |dtype|, exactly representable (bf16 rounded, kept as f32)."""
    if dtype == "bf16":
        return g.to_bf16(np.asarray(x, np.float32))
    return np.asarray(x).astype(NP[dtype])


def expect(g, y, dtype):
    y = np.asarray(y, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "bf16":
            return g.to_bf16(y.astype(np.float32))
        return y.astype(NP[dtype])


def tol(g, dtype, scale=1.0):
    rtol, atol = g.tolerance.get(dtype, (0, 0))
    if dtype in ("f16", "bf16"):
        scale = 1.0  # their tolerance already allows more than a float computation's error
    return {"rtol": rtol * scale, "atol": atol * scale}


def values(g, r, shape, dtype):
    """Varied values of |dtype|, small enough that sums of a few stay in range."""
    if dtype == "bool":
        return r.integers(0, 2, shape).astype(np.bool_)
    if dtype == "u8":
        return r.integers(0, 50, shape).astype(np.uint8)
    if dtype in SIGNED:
        return r.integers(-50, 50, shape).astype(NP[dtype])
    return cast_in(g, r.standard_normal(shape) * 4, dtype)


def wrap(x, dtype):
    """int64 results narrowed to |dtype|, wrapping as two's complement."""
    return np.asarray(x, np.int64).astype(NP[dtype])


# --- Activation derivatives ----------------------------------------------------------

def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def gelu_grad(g, x):
    cdf = 0.5 * (1 + erf(x / math.sqrt(2)))
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return g * (cdf + x * pdf)


def gelu_grad_tanh(g, x):
    k, c = math.sqrt(2 / math.pi), 0.044715
    t = np.tanh(k * (x + c * x ** 3))
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x))


def sigmoid(x):
    return 0.5 * (1 + np.tanh(0.5 * x))  # no overflow for any x


# op: (reference(a, b) in float64, generator of the second input, tolerance scale).
# The first input is the incoming gradient for the "gradients" ops and the
# forward output y for the others, which take dy second.
GRAD_OPS = {
    "ReluGrad": (lambda d, x: np.where(x > 0, d, 0.0), lambda r, n: r.standard_normal(n), 1),
    "Relu6Grad": (lambda d, x: np.where((x > 0) & (x < 6), d, 0.0), lambda r, n: r.uniform(-3, 9, n), 1),
    "EluGrad": (lambda d, y: np.where(y > 0, d, d * (y + 1)), lambda r, n: np.where(
        r.uniform(0, 1, n) < 0.5, r.uniform(-0.99, 0, n), r.uniform(0, 5, n)), 1),
    "SeluGrad": (lambda d, y: np.where(y > 0, d * SELU_SCALE, d * (y + SELU_SCALE * SELU_ALPHA)),
                 lambda r, n: np.where(r.uniform(0, 1, n) < 0.5, r.uniform(-1.75, 0, n), r.uniform(0, 5, n)), 1),
    "SoftplusGrad": (lambda d, x: d * sigmoid(x), lambda r, n: r.uniform(-12, 12, n), 2),
    "GeluGrad": (gelu_grad, lambda r, n: r.uniform(-5, 5, n), 4),
}
Y_GRAD_OPS = {
    # op: (reference(y, dy), generator of y, tolerance scale)
    "SigmoidGrad": (lambda y, d: d * y * (1 - y), lambda r, n: r.uniform(0.001, 0.999, n), 2),
    "TanhGrad": (lambda y, d: d * (1 - y * y), lambda r, n: r.uniform(-0.999, 0.999, n), 2),
    "SqrtGrad": (lambda y, d: d * 0.5 / y, lambda r, n: r.uniform(0.05, 10, n), 1),
    "RsqrtGrad": (lambda y, d: d * -0.5 * y ** 3, lambda r, n: r.uniform(0.05, 5, n), 2),
    "ReciprocalGrad": (lambda y, d: d * -(y * y), lambda r, n: r.choice([-1, 1], n) * r.uniform(0.05, 10, n), 1),
}


def activation_grad_cases(g):
    r = rng(1)
    n = (5, 7)
    for op, (ref, gen, scale) in GRAD_OPS.items():
        for dtype in FLOATS:
            d = cast_in(g, r.standard_normal(n) * 2, dtype)
            x = cast_in(g, gen(r, n), dtype)
            want = ref(d.astype(np.float64), x.astype(np.float64))
            g.add(f"{op}/{dtype}", op, [d, x], {"T": dtype}, [expect(g, want, dtype)], **tol(g, dtype, scale))
    for op, (ref, gen, scale) in Y_GRAD_OPS.items():
        for dtype in FLOATS:
            y = cast_in(g, gen(r, n), dtype)
            d = cast_in(g, r.standard_normal(n) * 2, dtype)
            want = ref(y.astype(np.float64), d.astype(np.float64))
            g.add(f"{op}/{dtype}", op, [y, d], {"T": dtype}, [expect(g, want, dtype)], **tol(g, dtype, scale))
    # GeluGrad's tanh approximation.
    for dtype in FLOATS:
        d = cast_in(g, r.standard_normal(n), dtype)
        x = cast_in(g, r.uniform(-5, 5, n), dtype)
        want = gelu_grad_tanh(d.astype(np.float64), x.astype(np.float64))
        g.add(f"GeluGrad/approximate_{dtype}", "GeluGrad", [d, x], {"T": dtype, "approximate": True},
              [expect(g, want, dtype)], **tol(g, dtype, 4))
    # Integer ReluGrad and Relu6Grad: the kinks (0 and 6) get 0.
    for dtype in SIGNED:
        d = values(g, r, (4, 6), dtype)
        x = np.arange(-8, 16).reshape(4, 6).astype(NP[dtype])
        g.add(f"ReluGrad/{dtype}", "ReluGrad", [d, x], {"T": dtype}, [np.where(x > 0, d, 0).astype(NP[dtype])])
        g.add(f"Relu6Grad/{dtype}", "Relu6Grad", [d, x], {"T": dtype},
              [np.where((x > 0) & (x < 6), d, 0).astype(NP[dtype])])
    special_activation_cases(g)
    # One shape, no broadcasting.
    for op in list(GRAD_OPS) + list(Y_GRAD_OPS):
        g.add(f"{op}/shapes_differ", op, [np.zeros((2, 3), np.float32), np.zeros(3, np.float32)], {"T": "f32"},
              error="[2,3] but")
        g.add(f"{op}/empty", op, [np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)], {"T": "f32"},
              [np.zeros((0, 3), np.float32)])
        g.add(f"{op}/scalar", op, [np.float64(0.75), np.float64(0.5)], {"T": "f64"},
              [np.float64((GRAD_OPS.get(op) or Y_GRAD_OPS.get(op))[0](np.float64(0.75), np.float64(0.5)))],
              **tol(g, "f64", 4))
    g.add("ReluGrad/shapes_differ_message", "ReluGrad", [np.zeros((2, 3), np.float32), np.zeros(3, np.float32)],
          {"T": "f32"}, error="gradients has shape [2,3] but features has shape [3]; they must have one shape")
    g.add("SigmoidGrad/shapes_differ_message", "SigmoidGrad", [np.zeros(4, np.float32), np.zeros((4, 1), np.float32)],
          {"T": "f32"}, error="y has shape [4] but dy has shape [4,1]; they must have one shape")
    # Long inputs: split across threads.
    d = r.standard_normal(100_003).astype(np.float32)
    x = r.standard_normal(100_003).astype(np.float32)
    g.add("ReluGrad/f32_long", "ReluGrad", [d, x], {"T": "f32"}, [np.where(x > 0, d, 0).astype(np.float32)])
    want = gelu_grad(d.astype(np.float64), x.astype(np.float64))
    g.add("GeluGrad/f32_long", "GeluGrad", [d, x], {"T": "f32"}, [want.astype(np.float32)], **tol(g, "f32", 4))


def special_activation_cases(g):
    """Kinks, NaN and infinities, hand-checked against the ops' docs."""
    nan, inf = np.nan, np.inf
    for dtype in FLOATS:
        d = cast_in(g, [1.5, 1.5, 1.5, 1.5, 1.5, 1.5], dtype)
        # ReluGrad: 0 at 0 and for NaN features; Relu6Grad: 0 at 0 and 6.
        x = cast_in(g, [0, -0.0, nan, 1e-30 if dtype == "f64" else 1e-3, inf, -inf], dtype)
        g.add(f"ReluGrad/special_{dtype}", "ReluGrad", [d, x], {"T": dtype},
              [cast_in(g, [0, 0, 0, 1.5, 1.5, 0], dtype)], rtol=0, atol=0)
        x = cast_in(g, [0, 6, 5.5, nan, 7, -1], dtype)
        g.add(f"Relu6Grad/special_{dtype}", "Relu6Grad", [d, x], {"T": dtype},
              [cast_in(g, [0, 0, 1.5, 0, 0, 0], dtype)], rtol=0, atol=0)
        # SqrtGrad at y = 0: inf with the sign of dy, NaN for dy = 0.
        y = cast_in(g, [0, 0, 0, 4, inf, 1], dtype)
        dy = cast_in(g, [2, -2, 0, 2, 2, nan], dtype)
        g.add(f"SqrtGrad/special_{dtype}", "SqrtGrad", [y, dy], {"T": dtype},
              [cast_in(g, [inf, -inf, nan, 0.25, 0, nan], dtype)], rtol=0, atol=0)
    # SoftplusGrad does not overflow for large |x|: sigmoid saturates at 0 and 1.
    for dtype in ["f32", "f64"]:
        x = cast_in(g, [-1000, -100, -30, 0, 30, 100, 1000, -inf, inf], dtype)
        d = np.ones_like(x)
        want = sigmoid(x.astype(np.float64))
        g.add(f"SoftplusGrad/extremes_{dtype}", "SoftplusGrad", [d, x], {"T": dtype}, [expect(g, want, dtype)],
              **tol(g, dtype, 2))
        # GeluGrad at the extremes: 0 far left, 1 far right.
        x = cast_in(g, [-40, -10, 0, 10, 40], dtype)
        g.add(f"GeluGrad/extremes_{dtype}", "GeluGrad", [np.ones_like(x), x], {"T": dtype},
              [expect(g, gelu_grad(1.0, x.astype(np.float64)), dtype)], **tol(g, dtype, 4))


# --- BroadcastTo, SumToShape ---------------------------------------------------------

BROADCASTS = [
    # (name, input shape, target shape)
    ("scalar", (), (2, 3)),
    ("row", (3,), (4, 3)),
    ("column", (4, 1), (4, 3)),
    ("middle", (2, 1, 3), (2, 5, 3)),
    ("outer_and_inner", (1, 3, 1), (2, 3, 4)),
    ("leading_dims", (3, 1), (2, 2, 3, 5)),
    ("same_shape", (2, 3), (2, 3)),
    ("ones_to_ones", (1, 1), (1, 1, 1)),
    ("to_empty", (1, 3), (0, 3)),
    ("empty_input", (0, 1), (2, 0, 4)),
    ("rank6", (2, 1, 3, 1, 1, 2), (2, 4, 3, 2, 3, 2)),
]


def broadcast_to_cases(g):
    r = rng(2)
    for name, shape, target in BROADCASTS:
        for dtype in (ALL if name == "middle" else ["f32", "i64"]):
            x = values(g, r, shape, dtype)
            g.add(f"BroadcastTo/{name}_{dtype}", "BroadcastTo", [x, np.int32(target)], {"T": dtype},
                  [np.broadcast_to(x, target)])
    x = values(g, r, (3, 1), "f64")
    g.add("BroadcastTo/i64_shape", "BroadcastTo", [x, np.int64([2, 3, 7])], {"T": "f64", "Tidx": "i64"},
          [np.broadcast_to(x, (2, 3, 7))])
    # Large: a scalar filling a big tensor, rows repeated, a column spread.
    x = values(g, r, (), "f32")
    g.add("BroadcastTo/scalar_large", "BroadcastTo", [x, np.int32([300, 700])], {"T": "f32"},
          [np.broadcast_to(x, (300, 700))])
    x = values(g, r, (1, 40_000), "i16")
    g.add("BroadcastTo/long_row", "BroadcastTo", [x, np.int32([5, 40_000])], {"T": "i16"},
          [np.broadcast_to(x, (5, 40_000))])
    x = values(g, r, (500, 1), "u8")
    g.add("BroadcastTo/column_large", "BroadcastTo", [x, np.int32([500, 300])], {"T": "u8"},
          [np.broadcast_to(x, (500, 300))])
    x = np.zeros((2, 3), np.float32)
    g.add("BroadcastTo/fewer_dims", "BroadcastTo", [x, np.int32([3])], {"T": "f32"},
          error="input of shape [2,3] cannot be broadcast to [3], which has fewer dimensions")
    g.add("BroadcastTo/dim_mismatch", "BroadcastTo", [x, np.int32([4, 2, 4])], {"T": "f32"},
          error="input of shape [2,3] cannot be broadcast to [4,2,4]: its dimension 1 is 3, not 1 or 4")
    g.add("BroadcastTo/negative_dim", "BroadcastTo", [x, np.int32([2, -3])], {"T": "f32"},
          error="shape [2,-3] has a negative dimension")
    g.add("BroadcastTo/shape_rank2", "BroadcastTo", [x, np.int32([[2, 3]])], {"T": "f32"},
          error="shape must be 1-D, got shape [1,2]")


def sum_to_shape_ref(x, target):
    """numpy.sum over the broadcast dims, with keepdims, the leading axes dropped."""
    lead = x.ndim - len(target)
    axes = tuple(range(lead)) + tuple(lead + i for i, t in enumerate(target) if t == 1 and x.shape[lead + i] != 1)
    return np.sum(x, axis=axes, keepdims=True).reshape(target)


SUMS = [
    # (name, input shape, target shape)
    ("to_row", (4, 3), (3,)),
    ("to_row_keep", (4, 3), (1, 3)),
    ("to_column", (4, 3), (4, 1)),
    ("to_scalar", (2, 3, 4), ()),
    ("to_ones", (2, 3, 4), (1, 1, 1)),
    ("middle", (2, 5, 3), (2, 1, 3)),
    ("outer_and_inner", (2, 3, 4), (1, 3, 1)),
    ("alternating", (2, 3, 4, 5, 6), (3, 1, 5, 1)),
    ("leading_dims", (2, 2, 3, 5), (3, 1)),
    ("same_shape", (2, 3), (2, 3)),
    ("size1_dims", (1, 4, 1, 3), (4, 1, 1)),
    ("rank6", (2, 4, 3, 2, 3, 2), (2, 1, 3, 1, 1, 2)),
]


def sum_to_shape_cases(g):
    r = rng(3)
    for name, shape, target in SUMS:
        for dtype in (NUMERIC if name in ("middle", "to_scalar", "alternating") else ["f32", "f64", "i32"]):
            x = values(g, r, shape, dtype)
            if dtype in INTS:
                want = wrap(sum_to_shape_ref(x.astype(np.int64), target), dtype)
                g.add(f"SumToShape/{name}_{dtype}", "SumToShape", [x, np.int32(target)], {"T": dtype}, [want])
            else:
                want = expect(g, sum_to_shape_ref(x.astype(np.float64), target), dtype)
                g.add(f"SumToShape/{name}_{dtype}", "SumToShape", [x, np.int32(target)], {"T": dtype}, [want],
                      **tol(g, dtype, 2))
    # Integers wrap.
    for dtype in INTS:
        info = np.iinfo(NP[dtype])
        x = np.array([[info.max, info.max, 3], [info.max, 1, info.min], [2, info.min, info.min]], NP[dtype])
        g.add(f"SumToShape/wrap_{dtype}_rows", "SumToShape", [x, np.int64([3, 1])], {"T": dtype, "Tidx": "i64"},
              [wrap(np.sum(x.astype(np.int64), axis=1, keepdims=True), dtype)])
        g.add(f"SumToShape/wrap_{dtype}_columns", "SumToShape", [x, np.int32([3])], {"T": dtype},
              [wrap(np.sum(x.astype(np.int64), axis=0), dtype)])
    # Empty: an empty reduced dim sums to 0; an empty kept dim is an empty result.
    for dtype in ["f32", "i8", "bf16"]:
        g.add(f"SumToShape/empty_reduced_{dtype}", "SumToShape", [cast_in(g, np.zeros((0, 3)), dtype),
              np.int32([1, 3])], {"T": dtype}, [cast_in(g, np.zeros((1, 3)), dtype)])
        g.add(f"SumToShape/empty_kept_{dtype}", "SumToShape", [cast_in(g, np.zeros((4, 0)), dtype),
              np.int32([1, 0])], {"T": dtype}, [cast_in(g, np.zeros((1, 0)), dtype)])
    # Long sums: the reduced index space is cut into blocks (few outputs),
    # a single long run is cut by elements, and wide rows span column blocks.
    long_cases = [
        ("long_rows", (3, 100_000), (3, 1), "f32"),
        ("one_long_run", (200_000,), (1,), "f32"),
        ("long_columns", (100_000, 3), (3,), "f32"),
        ("wide_rows", (40, 3000), (3000,), "f64"),
        ("long_middle", (2, 50_000, 3), (2, 1, 3), "f32"),
        ("long_runs_many", (64, 4000), (64, 1), "f32"),
        ("long_i32", (5, 70_000), (1, 70_000), "i32"),
        ("long_f16", (20_000, 3), (3,), "f16"),
        ("long_bf16", (3, 20_000), (3, 1), "bf16"),
    ]
    for name, shape, target, dtype in long_cases:
        if dtype in INTS:
            x = r.integers(-1000, 1000, shape).astype(NP[dtype])
            want = wrap(sum_to_shape_ref(x.astype(np.int64), target), dtype)
            g.add(f"SumToShape/{name}", "SumToShape", [x, np.int32(target)], {"T": dtype}, [want])
            continue
        x = cast_in(g, r.uniform(-1, 2, shape), dtype)
        want = expect(g, sum_to_shape_ref(x.astype(np.float64), target), dtype)
        g.add(f"SumToShape/{name}", "SumToShape", [x, np.int32(target)], {"T": dtype}, [want], **tol(g, dtype, 4))
    x = np.zeros((2, 3), np.float32)
    g.add("SumToShape/more_dims", "SumToShape", [x, np.int32([1, 2, 3])], {"T": "f32"},
          error="input of shape [2,3] is not a broadcast of [1,2,3], which has more dimensions")
    g.add("SumToShape/dim_mismatch", "SumToShape", [x, np.int32([2, 2])], {"T": "f32"},
          error="input of shape [2,3] is not a broadcast of [2,2]: dimension 1 is 3, not 2")
    g.add("SumToShape/negative_dim", "SumToShape", [x, np.int32([-1, 3])], {"T": "f32"},
          error="shape [-1,3] has a negative dimension")


# --- UnsortedSegmentSum ----------------------------------------------------------------

def segment_sum_ref(data, ids, num, dtype):
    out = np.zeros((num,) + data.shape[ids.ndim:], np.int64 if dtype in INTS else np.float64)
    keep = ids >= 0  # negative ids are dropped
    np.add.at(out, ids[keep], data[keep].astype(out.dtype))
    return wrap(out, dtype) if dtype in INTS else out


def segment_sum_cases(g):
    r = rng(4)
    for dtype in NUMERIC:
        for id_type in ["i32", "i64"]:
            data = values(g, r, (6, 3), dtype)
            ids = np.array([2, 0, 2, -1, 4, 2], NP[id_type])  # segments 1 and 3 are empty, row 3 dropped
            want = segment_sum_ref(data, ids, 5, dtype)
            g.add(f"UnsortedSegmentSum/{dtype}_{id_type}", "UnsortedSegmentSum", [data, ids, np.int32(5)],
                  {"T": dtype, "Tindices": id_type}, [want if dtype in INTS else expect(g, want, dtype)],
                  **({} if dtype in INTS else tol(g, dtype, 2)))
    data = values(g, r, (2, 3, 4), "f64")
    ids = np.array([[1, 0, 1], [1, -5, 0]], np.int64)
    g.add("UnsortedSegmentSum/ids_rank2", "UnsortedSegmentSum", [data, ids, np.int64(3)],
          {"T": "f64", "Tindices": "i64", "Tnumsegments": "i64"}, [segment_sum_ref(data, ids, 3, "f64")],
          **tol(g, "f64", 2))
    ids = np.array([[1, 0, 1, 3], [1, 2, 0, 2], [0, 0, 0, 0]], np.int32)
    data = values(g, r, (3, 4), "i16")
    g.add("UnsortedSegmentSum/ids_like_data", "UnsortedSegmentSum", [data, ids, np.int32(4)],
          {"T": "i16", "Tindices": "i32"}, [segment_sum_ref(data, ids, 4, "i16")])
    data = values(g, r, (4,), "f32")
    g.add("UnsortedSegmentSum/no_segments_named", "UnsortedSegmentSum",
          [data, np.int32([-1, -2, -1, -3]), np.int32(3)], {"T": "f32", "Tindices": "i32"}, [np.zeros(3, np.float32)])
    g.add("UnsortedSegmentSum/zero_segments", "UnsortedSegmentSum",
          [data, np.int32([-1, -1, -1, -1]), np.int32(0)], {"T": "f32", "Tindices": "i32"}, [np.zeros(0, np.float32)])
    g.add("UnsortedSegmentSum/empty_data", "UnsortedSegmentSum",
          [np.zeros((0, 3), np.float32), np.zeros(0, np.int32), np.int32(2)], {"T": "f32", "Tindices": "i32"},
          [np.zeros((2, 3), np.float32)])
    # Integers wrap.
    data = np.array([[120, -100], [100, -100], [10, 5]], np.int8)
    g.add("UnsortedSegmentSum/wrap_i8", "UnsortedSegmentSum", [data, np.int32([0, 0, 1]), np.int32(2)],
          {"T": "i8", "Tindices": "i32"}, [wrap([[220, -200], [10, 5]], "i8")])
    # Many rows into few segments: sums accumulate in double (f32) and float
    # (f16, bf16), not in T, so the result is the rounded exact sum.
    for dtype in ["f32", "f16", "bf16"]:
        data = cast_in(g, r.uniform(0, 1, (4000, 5)), dtype)
        ids = r.integers(0, 3, 4000).astype(np.int32)
        want = expect(g, segment_sum_ref(data, ids, 3, dtype), dtype)
        g.add(f"UnsortedSegmentSum/many_rows_{dtype}", "UnsortedSegmentSum", [data, ids, np.int32(3)],
              {"T": dtype, "Tindices": "i32"}, [want], **tol(g, dtype, 4))
    data = r.standard_normal((3000, 70)).astype(np.float32)
    ids = r.integers(-1, 40, 3000).astype(np.int64)
    g.add("UnsortedSegmentSum/large", "UnsortedSegmentSum", [data, ids, np.int32(40)],
          {"T": "f32", "Tindices": "i64"}, [segment_sum_ref(data, ids, 40, "f32").astype(np.float32)],
          rtol=2e-5, atol=2e-5)
    data = r.standard_normal((500, 2, 300)).astype(np.float64)  # rows wider than a column block
    ids = r.integers(0, 7, 500).astype(np.int32)
    g.add("UnsortedSegmentSum/wide_rows", "UnsortedSegmentSum", [data, ids, np.int64(9)],
          {"T": "f64", "Tindices": "i32", "Tnumsegments": "i64"}, [segment_sum_ref(data, ids, 9, "f64")],
          **tol(g, "f64", 8))
    data = np.zeros((2, 3), np.float32)
    g.add("UnsortedSegmentSum/id_too_large", "UnsortedSegmentSum", [data, np.int32([0, 3]), np.int32(3)],
          {"T": "f32", "Tindices": "i32"},
          error="segment id 3 at position [1] of segment_ids is out of range: num_segments is 3")
    g.add("UnsortedSegmentSum/id_too_large_rank2", "UnsortedSegmentSum",
          [data, np.int64([[0, 1, 0], [1, 7, 0]]), np.int32(2)], {"T": "f32", "Tindices": "i64"},
          error="segment id 7 at position [1,1] of segment_ids is out of range: num_segments is 2")
    g.add("UnsortedSegmentSum/not_a_prefix", "UnsortedSegmentSum", [data, np.int32([0, 1, 0]), np.int32(3)],
          {"T": "f32", "Tindices": "i32"}, error="segment_ids' shape [3] is not a prefix of data's shape [2,3]")
    g.add("UnsortedSegmentSum/negative_num", "UnsortedSegmentSum", [data, np.int32([0, 1]), np.int32(-1)],
          {"T": "f32", "Tindices": "i32"}, error="num_segments must be >= 0, got -1")
    g.add("UnsortedSegmentSum/num_not_scalar", "UnsortedSegmentSum", [data, np.int32([0, 1]), np.int32([3])],
          {"T": "f32", "Tindices": "i32"}, error="num_segments must be a scalar, got shape [1]")


# --- Pack, InvertPermutation, ConcatOffset -----------------------------------------------

def pack_cases(g):
    r = rng(5)
    for dtype in ALL:
        xs = [values(g, r, (2, 3), dtype) for _ in range(3)]
        for axis in [0, 1, 2, -1, -3]:
            g.add(f"Pack/{dtype}_axis{axis}", "Pack", xs, {"T": dtype, "N": 3, "axis": axis},
                  [np.stack(xs, axis=axis)])
    xs = [values(g, r, (), "f64") for _ in range(4)]
    g.add("Pack/scalars", "Pack", xs, {"T": "f64", "N": 4}, [np.stack(xs)])
    xs = [values(g, r, (2, 1, 3), "i32")]
    g.add("Pack/one_input", "Pack", xs, {"T": "i32", "N": 1, "axis": 2}, [np.stack(xs, axis=2)])
    xs = [np.zeros((0, 3), np.float32)] * 2
    g.add("Pack/empty", "Pack", xs, {"T": "f32", "N": 2, "axis": 1}, [np.stack(xs, axis=1)])
    xs = [values(g, r, (300, 200), "f32") for _ in range(5)]
    g.add("Pack/large", "Pack", xs, {"T": "f32", "N": 5, "axis": 1}, [np.stack(xs, axis=1)])
    g.add("Pack/large_last_axis", "Pack", xs, {"T": "f32", "N": 5, "axis": -1}, [np.stack(xs, axis=-1)])
    g.add("Pack/shapes_differ", "Pack", [np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)],
          {"T": "f32", "N": 2}, error="input 1 has shape [3,2], but the inputs before it have shape [2,3]")
    g.add("Pack/axis_out_of_range", "Pack", [np.zeros((2, 3), np.float32)] * 2, {"T": "f32", "N": 2, "axis": 3},
          error="axis 3 is out of range for rank 3")
    g.add("Pack/negative_axis_out_of_range", "Pack", [np.zeros(2, np.float32)] * 2, {"T": "f32", "N": 2, "axis": -3},
          error="axis -3 is out of range for rank 2")


def invert_permutation_cases(g):
    r = rng(6)
    for dtype in ["i32", "i64"]:
        for n in [1, 5, 1000]:
            x = r.permutation(n).astype(NP[dtype])
            g.add(f"InvertPermutation/{dtype}_{n}", "InvertPermutation", [x], {"T": dtype},
                  [np.argsort(x).astype(NP[dtype])])
    g.add("InvertPermutation/empty", "InvertPermutation", [np.zeros(0, np.int32)], {"T": "i32"},
          [np.zeros(0, np.int32)])
    g.add("InvertPermutation/identity", "InvertPermutation", [np.arange(6, dtype=np.int64)], {"T": "i64"},
          [np.arange(6, dtype=np.int64)])
    g.add("InvertPermutation/out_of_range", "InvertPermutation", [np.int32([0, 3, 1])], {"T": "i32"},
          error="x[1] = 3 is out of range [0, 3); x must be a permutation of 0 .. 2")
    g.add("InvertPermutation/negative", "InvertPermutation", [np.int64([-1, 0])], {"T": "i64"},
          error="x[0] = -1 is out of range [0, 2)")
    g.add("InvertPermutation/repeated", "InvertPermutation", [np.int32([2, 0, 2])], {"T": "i32"},
          error="x[2] = 2 repeats x[0]; x must be a permutation of 0 .. 2")
    g.add("InvertPermutation/rank2", "InvertPermutation", [np.int32([[0, 1]])], {"T": "i32"},
          error="x must be 1-D, got shape [1,2]")


def concat_offset_ref(dim, shapes):
    axis = dim % len(shapes[0])
    starts = np.cumsum([0] + [s[axis] for s in shapes[:-1]])
    out = []
    for start, s in zip(starts, shapes):
        o = np.zeros(len(s), np.int64)
        o[axis] = start
        out.append(o)
    return out


def concat_offset_cases(g):
    specs = [
        ("axis1", 1, [[2, 3, 5], [2, 7, 5], [2, 0, 5], [2, 1, 5]]),
        ("axis0", 0, [[4, 3], [1, 3]]),
        ("negative_axis", -1, [[2, 2, 3], [2, 2, 9]]),
        ("one_shape", 0, [[6]]),
        ("rank4", 2, [[1, 2, 3, 4], [1, 2, 5, 4], [1, 2, 1, 4]]),
    ]
    for name, dim, shapes in specs:
        for t in ["i32", "i64"]:
            ins = [np.int32(dim)] + [np.array(s, NP[t]) for s in shapes]
            want = [o.astype(NP[t]) for o in concat_offset_ref(dim, shapes)]
            g.add(f"ConcatOffset/{name}_{t}", "ConcatOffset", ins, {"N": len(shapes), "Tshape": t}, want)
    g.add("ConcatOffset/dims_differ", "ConcatOffset", [np.int32(1), np.int32([2, 3]), np.int32([3, 3])],
          {"N": 2}, error="shape 1 is [3,3], which differs from shape 0 [2,3] in dimension 0; only dimension 1 may differ")
    g.add("ConcatOffset/ranks_differ", "ConcatOffset", [np.int32(0), np.int32([2, 3]), np.int32([3, 3, 1])],
          {"N": 2}, error="shape 1 has 3 entries but shape 0 has 2; the inputs must have one rank")
    g.add("ConcatOffset/axis_out_of_range", "ConcatOffset", [np.int32(2), np.int32([2, 3]), np.int32([3, 3])],
          {"N": 2}, error="concat_dim 2 is out of range for rank 2")
    g.add("ConcatOffset/shape_rank2", "ConcatOffset", [np.int32(0), np.int32([[2, 3]])],
          {"N": 1}, error="shape 0 must be 1-D, got a tensor of shape [1,2]")
    g.add("ConcatOffset/dim_not_scalar", "ConcatOffset", [np.int32([0]), np.int32([2, 3])],
          {"N": 1}, error="concat_dim must be a scalar, got shape [1]")


# --- StridedSliceGrad ----------------------------------------------------------------------

def strided_slice_grad_cases(g):
    r = rng(7)

    def add(name, shape, begin, end, strides, index, dtype="f32", index_type="i32", **masks):
        """dy has the shape of zeros(shape)[index]; the reference writes it there."""
        want = np.zeros(shape, NP[dtype])
        dy = values(g, r, want[index].shape, dtype)
        want[index] = dy
        attrs = {"T": dtype, "Index": index_type}
        attrs.update(masks)
        t = NP[index_type]
        g.add(f"StridedSliceGrad/{name}", "StridedSliceGrad",
              [np.array(shape, t), np.array(begin, t), np.array(end, t), np.array(strides, t), dy], attrs, [want])

    s = np.s_
    add("basic", (5, 6), [1, 0], [3, 0], [1, 2], s[1:3, ::2], begin_mask=2, end_mask=2)
    add("negative_strides", (5, 6), [0, 4], [0, 0], [-1, -2], s[::-1, 4:0:-2], begin_mask=1, end_mask=1)
    add("negative_indices", (5, 6), [-3, -1], [-1, -5], [1, -1], s[-3:-1, -1:-5:-1])
    add("clamped", (5, 6), [-100, 1], [100, 50], [1, 1], s[-100:100, 1:50])
    add("clamped_negative_stride", (5, 6), [100, 50], [-100, -50], [-2, -3], s[100:-100:-2, 50:-50:-3])
    add("shrink", (5, 6), [2, 1], [3, 3], [1, 1], s[2, 1:3], shrink_axis_mask=1)
    add("shrink_negative", (5, 6), [0, -1], [0, 0], [1, 1], s[:, -1], begin_mask=1, end_mask=1, shrink_axis_mask=2)
    add("shrink_all", (5, 6), [4, -6], [5, -5], [1, 1], s[4, -6], shrink_axis_mask=3)
    add("new_axis", (5, 6), [0, 0, 1], [0, 0, 0], [1, 1, 1], s[:, None, 1:], begin_mask=1, end_mask=5, new_axis_mask=2)
    add("empty_range", (5, 6), [3, 0], [1, 0], [1, 1], s[3:1], end_mask=2)
    add("implicit_trailing_dims", (5, 6), [1], [4], [2], s[1:4:2])
    add("ellipsis_last", (2, 3, 4, 5), [0, 1], [0, 2], [1, 1], s[..., 1], "i32", ellipsis_mask=1, shrink_axis_mask=2)
    add("ellipsis_middle", (2, 3, 4, 5), [1, 0, 0], [2, 0, 0], [1, 1, -1], s[1, ..., ::-1], "i32",
        ellipsis_mask=2, shrink_axis_mask=1, begin_mask=4, end_mask=4)
    add("ellipsis_new_axis", (2, 3, 4), [0, 0], [0, 0], [1, 1], s[..., None], "u8", ellipsis_mask=1, new_axis_mask=2)
    add("rank6", (3, 4, 2, 3, 2, 4), [2, 0, 1, 0, 0, 3], [0, 4, 0, 3, 2, 0], [-1, 2, -1, 2, 1, -2],
        s[2::-1, 0:4:2, 1::-1, 0:3:2, 0:2, 3::-2], "i64", end_mask=0b000101)
    add("to_scalar", (3,), [-2], [0], [1], s[-2], "f64", "i64", shrink_axis_mask=1)
    add("whole", (4, 3), [0, 0], [4, 3], [1, 1], s[0:4, 0:3], "i16")
    add("empty_shape", (0, 4), [0, 1], [0, 3], [1, 1], s[:, 1:3], begin_mask=1, end_mask=1)
    for dtype in ALL:
        add(f"negative_strides_{dtype}", (4, 7), [3, 6], [0, 0], [-2, -3], s[3::-2, 6::-3], dtype, end_mask=3)
        add(f"forward_{dtype}", (4, 7), [1, 2], [3, 7], [1, 1], s[1:3, 2:7], dtype, "i64")
    add("large", (200, 300), [10, 299], [190, 0], [1, -1], s[10:190, 299:0:-1])
    add("large_strided", (400, 500), [1, 3], [400, 500], [3, 7], s[1:400:3, 3:500:7], "f64")

    def error(name, message, begin, end, strides, dy_shape=(1, 1), shape=(5, 6), **masks):
        attrs = {"T": "f32", "Index": "i32"}
        attrs.update(masks)
        g.add(f"StridedSliceGrad/{name}", "StridedSliceGrad",
              [np.int32(shape), np.int32(begin), np.int32(end), np.int32(strides), np.zeros(dy_shape, np.float32)],
              attrs, error=message)

    error("zero_stride", "a stride is 0", [0, 0], [1, 1], [1, 0])
    error("lengths_differ", "begin, end and strides have 2, 1 and 2 entries; they must match", [0, 0], [1], [1, 1])
    error("shrink_out_of_range", "index 5 is out of range for dimension 0 of size 5", [5], [6], [1], dy_shape=(6,),
          shrink_axis_mask=1)
    error("two_ellipses", "more than one ellipsis", [0, 0], [0, 0], [1, 1], ellipsis_mask=3)
    error("too_many_dims", "the slice spec indexes more dimensions than the input's 2", [0, 0, 0], [1, 1, 1],
          [1, 1, 1])
    error("dy_shape", "dy has shape [2,2], but slicing [5,6] by the spec gives [1,3]", [1, 0], [2, 3], [1, 1],
          dy_shape=(2, 2))
    error("negative_shape", "shape [5,-6] has a negative dimension", [0, 0], [1, 1], [1, 1], shape=(5, -6))


# --- Cumsum, Cumprod ----------------------------------------------------------------------

def scan_ref(op, x, axis, exclusive, reverse, dtype):
    """The running sum or product along |axis|, in int64 (wrapping) or float64."""
    wide = x.astype(np.int64 if dtype in INTS else np.float64)
    if reverse:
        wide = np.flip(wide, axis)
    with np.errstate(over="ignore"):
        out = (np.cumsum if op == "Cumsum" else np.cumprod)(wide, axis=axis)
    if exclusive and out.shape[axis] > 0:
        # Shifted by one along the axis, starting from the identity.
        first = (np.zeros_like if op == "Cumsum" else np.ones_like)(np.take(out, [0], axis=axis))
        out = np.concatenate([first, np.delete(out, -1, axis=axis)], axis=axis)
    if reverse:
        out = np.flip(out, axis)
    return wrap(out, dtype) if dtype in INTS else out


def scan_cases(g):
    r = rng(8)
    for op in ["Cumsum", "Cumprod"]:
        for dtype in NUMERIC:
            if op == "Cumprod" and dtype not in INTS:
                x = cast_in(g, r.uniform(0.5, 1.5, (3, 4, 5)) * r.choice([-1, 1], (3, 4, 5)), dtype)
            else:
                x = values(g, r, (3, 4, 5), dtype)
            for axis in [0, 1, 2, -1]:
                for exclusive in [False, True]:
                    for reverse in [False, True]:
                        if axis in (0, 2) and (exclusive or reverse) and dtype not in ("f32", "i32"):
                            continue  # the flags on every axis for two dtypes; each dtype on axes 1, -1
                        flags = ("_exclusive" if exclusive else "") + ("_reverse" if reverse else "")
                        want = scan_ref(op, x, axis, exclusive, reverse, dtype)
                        attrs = {"T": dtype, "exclusive": exclusive, "reverse": reverse}
                        name = f"{op}/{dtype}_axis{axis}{flags}"
                        if dtype in INTS:
                            g.add(name, op, [x, np.int32(axis)], attrs, [want])
                        else:
                            g.add(name, op, [x, np.int32(axis)], attrs, [expect(g, want, dtype)],
                                  **tol(g, dtype, 4))
        x = values(g, r, (2, 3), "f64") if op == "Cumsum" else cast_in(g, r.uniform(0.5, 1.5, (2, 3)), "f64")
        g.add(f"{op}/i64_axis", op, [x, np.int64(1)], {"T": "f64", "Tidx": "i64"},
              [scan_ref(op, x, 1, False, False, "f64")], **tol(g, "f64", 4))
        g.add(f"{op}/rank1", op, [x[0], np.int32(0)], {"T": "f64", "exclusive": True},
              [scan_ref(op, x[0], 0, True, False, "f64")], **tol(g, "f64", 4))
        g.add(f"{op}/empty", op, [np.zeros((0, 3), np.float32), np.int32(0)], {"T": "f32"}, [np.zeros((0, 3), np.float32)])
        g.add(f"{op}/empty_exclusive", op, [np.zeros((3, 0), np.int32), np.int32(1)], {"T": "i32", "exclusive": True},
              [np.zeros((3, 0), np.int32)])
        # Long: many columns (several column blocks), a long axis.
        x = cast_in(g, r.uniform(0.99, 1.01, (2, 50, 700)), "f32")
        g.add(f"{op}/f32_wide", op, [x, np.int32(1)], {"T": "f32", "reverse": True},
              [scan_ref(op, x, 1, False, True, "f32").astype(np.float32)], **tol(g, "f32", 8))
        x = cast_in(g, r.uniform(0.999, 1.001, (3, 5000)), "f64")
        g.add(f"{op}/f64_long_axis", op, [x, np.int32(-1)], {"T": "f64", "exclusive": True},
              [scan_ref(op, x, 1, True, False, "f64")], **tol(g, "f64", 64))
        # 16-bit floats accumulate in float: the running value is not rounded to f16 each step.
        x = cast_in(g, r.uniform(0.999, 1.001, 2000) if op == "Cumprod" else r.uniform(0, 1, 2000), "f16")
        g.add(f"{op}/f16_long", op, [x, np.int32(0)], {"T": "f16"}, [expect(g, scan_ref(op, x, 0, False, False, "f16"),
                                                                             "f16")], **tol(g, "f16"))
        g.add(f"{op}/scalar", op, [np.float32(2), np.int32(0)], {"T": "f32"}, error="axis 0 is out of range for rank 0")
        g.add(f"{op}/axis_out_of_range", op, [np.zeros((2, 3), np.float32), np.int32(2)], {"T": "f32"},
              error="axis 2 is out of range for rank 2")
        g.add(f"{op}/negative_axis_out_of_range", op, [np.zeros((2, 3), np.float32), np.int32(-3)], {"T": "f32"},
              error="axis -3 is out of range for rank 2")
        g.add(f"{op}/axis_not_scalar", op, [np.zeros((2, 3), np.float32), np.int32([0])], {"T": "f32"},
              error="axis must be a scalar, got shape [1]")
    # Integers wrap.
    g.add("Cumsum/wrap_i8", "Cumsum", [np.int8([100, 100, -128, -128]), np.int32(0)], {"T": "i8"},
          [wrap([100, 200, 72, -56], "i8")])
    g.add("Cumprod/wrap_u8", "Cumprod", [np.uint8([16, 16, 3, 0]), np.int32(0)], {"T": "u8"},
          [np.uint8([16, 0, 0, 0])])
    g.add("Cumprod/wrap_i32", "Cumprod", [np.int32([65536, 65536, 3]), np.int32(0)], {"T": "i32"},
          [np.int32([65536, 0, 0])])
    g.add("Cumprod/wrap_i16", "Cumprod", [np.int16([300, 300, -1]), np.int32(0)], {"T": "i16"},
          [wrap([300, 90000, -90000], "i16")])


def cases(g):
    activation_grad_cases(g)
    broadcast_to_cases(g)
    sum_to_shape_cases(g)
    segment_sum_cases(g)
    pack_cases(g)
    invert_permutation_cases(g)
    concat_offset_cases(g)
    strided_slice_grad_cases(g)
    scan_cases(g)
