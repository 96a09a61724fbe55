#!/usr/bin/python3
"""Generates the edge-case suite: for every op and every dtype binding its
CPU kernels register, cases built from the edge values of the dtype, with
NumPy's results.

Usage: gen_edge_cases.py KERNELS_TOML OUT_DIR

KERNELS_TOML is written by edge_case_test from the running CPU plugin: each
op, its inputs and outputs, and its kernels' dtype bindings ("T=f32",
"SrcT=f64,DstT=f16"). Nothing here lists dtypes by hand: a kernel added
for a new dtype gets edge cases the next run, and a binding no family can
generate is a failure of edge_case_test, not a silent gap.

Cases are generated per family of ops (unary, binary, reductions, scans,
data movement, indexing, casts, matrix products, windows, normalisation,
losses, recurrent cells) from one set of values per dtype:
  floats   NaN, +-inf, +-0, +-the smallest subnormal, +-the largest
           finite, the smallest normal, -1, 1, 0.5, -2.5, 3
  integers the lowest, lowest + 1, -1, 0, 1, 2, highest - 1, highest
  bool     false, true
laid out as scalars, empty tensors (a zero in any dimension), ranks 0 to 8
and broadcasting corners. The references are NumPy's, computed in the
op's own dtype for the basic arithmetic (as NumPy would for that dtype),
in float64 and rounded once for the transcendental functions, and with
Python's exact integers (then wrapped) for integer results. Where Weft
deliberately differs from NumPy (integer division by zero is an error,
float-to-integer casts saturate; `weft ops NAME` says so), the reference
follows Weft's documented rule.

Ops with no generated cases are listed in [[exempt]] with the reason, and
dtype bindings skipped with [[skipped]]: edge_case_test checks that every
op with a CPU kernel is one or the other.
"""
import math
import os
import sys
import tomllib
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gen_cases import NUMPY_DTYPE, TOLERANCE, open_generator, to_bf16, write_cases  # noqa: E402
from cases import conv, grad_support, indexing, nn_grad, reduction_nn, rnn, sparse  # noqa: E402
from cases.ieee import round_bf16  # noqa: E402

FLOATS = ("f16", "bf16", "f32", "f64")
SIGNED = ("i8", "i16", "i32", "i64")
INTS = SIGNED + ("u8",)
NAN, INF = float("nan"), float("inf")
SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805

warnings.simplefilter("ignore", DeprecationWarning)
warnings.simplefilter("ignore", RuntimeWarning)  # overflow, invalid, divide: the edge values want them
np.seterr(all="ignore")


# --- values ----------------------------------------------------------------------

def float_info(d):
    if d == "bf16":
        return {"max": float.fromhex("0x1.fep127"), "tiny": 2.0 ** -126, "sub": 2.0 ** -133}
    f = np.finfo(NUMPY_DTYPE[d])
    return {"max": float(f.max), "tiny": float(f.tiny), "sub": float(f.smallest_subnormal)}


def int_range(d):
    i = np.iinfo(NUMPY_DTYPE[d])
    return int(i.min), int(i.max)


def edges(d):
    """The edge values of dtype |d|, as Python numbers."""
    if d in FLOATS:
        i = float_info(d)
        return [NAN, INF, -INF, 0.0, -0.0, i["sub"], -i["sub"], i["max"], -i["max"], i["tiny"], -1.0, 1.0, 0.5,
                -2.5, 3.0]
    if d == "bool":
        return [False, True]
    lo, hi = int_range(d)
    if d == "u8":
        return [0, 1, 2, 127, 128, 254, 255]
    return [lo, lo + 1, -1, 0, 1, 2, hi - 1, hi]


def storage(d):
    """The NumPy dtype a tensor of |d| is written with (bf16 as float32)."""
    return np.float32 if d == "bf16" else NUMPY_DTYPE[d]


def arr(values, d, shape=None):
    a = np.array(values, dtype=object if d in INTS else None)
    a = a.astype(storage(d)) if d not in INTS else np.array([int(v) for v in a.reshape(-1)],
                                                            storage(d)).reshape(a.shape)
    return a.reshape(shape) if shape is not None else a


def wrap(v, d):
    """Python int |v| wrapped to integer dtype |d|."""
    lo, hi = int_range(d)
    return (int(v) - lo) % (hi - lo + 1) + lo


def out_int(values, d):
    """An object array of Python ints, wrapped to |d|."""
    a = np.asarray(values, dtype=object)
    return np.array([wrap(v, d) for v in a.reshape(-1)], storage(d)).reshape(a.shape)


def out_float(values, d):
    """float64 values rounded once to |d| (bf16: exactly, to nearest even)."""
    a = np.asarray(values, np.float64)
    if d == "bf16":
        return np.array([round_bf16(float(v)) for v in a.reshape(-1)], np.float32).reshape(a.shape)
    return a.astype(storage(d))


def native(x, d):
    """|x| in the type Weft computes |d| in: f16 and bf16 compute in float32
    and round once, at the end (for one operation that is NumPy's float16
    result; for a formula it is closer to the exact value)."""
    return np.asarray(x, np.float32 if d in ("f16", "bf16") else storage(d))


def round_native(y, d):
    if d == "bf16":
        return to_bf16(np.asarray(y, np.float32))
    return np.asarray(y, storage(d))


def dense(x):
    """A C-ordered copy that stays 0-d for a 0-d array."""
    return np.array(x, order="C", copy=True)


def tol(d, scale=1.0):
    if d not in FLOATS:
        return {}
    rtol, atol = TOLERANCE[d]
    if d in ("f16", "bf16"):
        scale = min(scale, 2.0)
    return {"rtol": rtol * scale, "atol": atol * scale}


def objects(x):
    return np.asarray(x).astype(object)


# Ranks 0 to 8 holding 16 elements (rank 0: one).
RANK_SHAPES = [(), (16,), (4, 4), (2, 4, 2), (2, 2, 2, 2), (1, 2, 2, 2, 2), (2, 1, 2, 1, 2, 2),
               (1, 2, 1, 2, 2, 1, 2), (2, 1, 1, 2, 1, 2, 1, 2)]
EMPTY_SHAPES = [(0,), (3, 0), (0, 2, 3), (2, 0, 1, 1, 1, 1, 1, 3)]


def tiled(d, n):
    e = edges(d)
    return [e[i % len(e)] for i in range(n)]


class Edge:
    def __init__(self, g, ops):
        self.g = g
        self.ops = ops          # name -> op entry of kernels.toml
        self.covered = set()
        self.exempt = {}
        self.skipped = []

    def add(self, op, binding, layout, inputs, outputs=None, attrs=None, **kw):
        attrs = dict(attrs or {})
        attrs.update(binding)
        name = f"{op}/{','.join(f'{k}={v}' for k, v in sorted(binding.items())) or 'any'}/{layout}"
        self.g.add(name, op, inputs, attrs, outputs, **kw)
        self.covered.add(op)


def choices(binding, attr, options):
    """The values of index-type attr |attr| to generate: the binding's own
    when the kernel constrains it, else each of |options|."""
    return (binding[attr],) if attr in binding else options


def parse_binding(text):
    out = {}
    for part in filter(None, text.split(",")):
        k, v = part.split("=")
        out[k] = v
    return out


# --- unary ------------------------------------------------------------------------

def f64_unary(fn):
    return lambda x, d: out_float(fn(np.asarray(x, np.float64)), d)


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def sigmoid64(x):
    x = np.asarray(x, np.float64)
    return np.where(x >= 0, 1 / (1 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1 + np.exp(-np.abs(x))))


def softplus64(x):
    x = np.asarray(x, np.float64)
    return np.where(x > 0, x + np.log1p(np.exp(-x)), np.log1p(np.exp(x)))


def gelu64(x, approximate):
    x = np.asarray(x, np.float64)
    if approximate:
        y = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    else:
        y = 0.5 * x * (1 + erf(x / math.sqrt(2)))
    # The limits at +-inf (the formulas give inf * 0 = NaN at -inf).
    return np.where(np.isinf(x), np.where(x > 0, x, 0.0), y)


def native_unary(fn):
    return lambda x, d: round_native(fn(native(x, d)), d)


# name: (float reference, int reference or None, signed zeros, tolerance scale)
UNARY = {
    "Abs": (native_unary(np.abs), lambda x, d: out_int([abs(v) for v in x], d), True, 1),
    "Neg": (native_unary(np.negative), lambda x, d: out_int([-v for v in x], d), True, 1),
    "Sign": (native_unary(np.sign), lambda x, d: out_int([(v > 0) - (v < 0) for v in x], d), False, 1),
    "Square": (native_unary(lambda x: x * x), lambda x, d: out_int([v * v for v in x], d), True, 1),
    "Relu": (native_unary(lambda x: np.where(np.isnan(x), x, np.where(x > 0, x, 0))),
             lambda x, d: out_int([max(v, 0) for v in x], d), False, 1),
    "Relu6": (native_unary(lambda x: np.where(np.isnan(x), x, np.clip(x, 0, 6))),
              lambda x, d: out_int([min(max(v, 0), 6) for v in x], d), False, 1),
    "Exp": (f64_unary(np.exp), None, False, 4),
    "Expm1": (f64_unary(np.expm1), None, True, 4),
    "Log": (f64_unary(np.log), None, False, 4),
    "Log1p": (f64_unary(np.log1p), None, True, 4),
    "Sqrt": (native_unary(np.sqrt), None, True, 1),
    "Rsqrt": (f64_unary(lambda x: 1 / np.sqrt(x)), None, False, 2),
    "Reciprocal": (native_unary(lambda x: 1 / x), None, True, 1),
    "Sin": (f64_unary(np.sin), None, True, 4),
    "Cos": (f64_unary(np.cos), None, False, 4),
    "Tanh": (f64_unary(np.tanh), None, True, 4),
    "Sigmoid": (f64_unary(sigmoid64), None, False, 4),
    "Erf": (f64_unary(erf), None, True, 4),
    "Elu": (f64_unary(lambda x: np.where(x > 0, x, np.expm1(x))), None, False, 4),
    "Selu": (f64_unary(lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x))), None, False, 4),
    "Softplus": (f64_unary(softplus64), None, False, 4),
    "Floor": (native_unary(np.floor), None, True, 1),
    "Ceil": (native_unary(np.ceil), None, True, 1),
    "Round": (native_unary(np.round), None, True, 1),
}

PREDICATES = {"IsNan": np.isnan, "IsInf": np.isinf}


def unary_layouts(e, d):
    """(layout name, input) pairs for a unary op over dtype |d|."""
    yield "values", arr(e, d)
    for k in (0, 4, 7):  # NaN, -0 and the largest finite as scalars (0, -0, +-1 for integers)
        yield f"scalar{k}", arr(e[k % len(e)], d)
    for shape in EMPTY_SHAPES:
        yield "empty_" + "x".join(map(str, shape)), np.zeros(shape, storage(d))
    for r, shape in enumerate(RANK_SHAPES):
        if r == 0:
            continue
        yield f"rank{r}", arr(tiled(d, 16), d, shape)
    # A transposed layout: the values in another order.
    yield "transposed", dense(arr(tiled(d, 20), d, (4, 5)).T)


def gen_unary(edge, op, binding):
    d = binding.get("T")
    if op in PREDICATES:
        for layout, x in unary_layouts(edges(d), d):
            edge.add(op, binding, layout, [x], [PREDICATES[op](np.asarray(x, np.float64))])
        return
    if op == "LogicalNot":
        for layout, x in unary_layouts(edges("bool"), "bool"):
            edge.add(op, {}, layout, [x], [np.logical_not(x)])
        return
    if op in ("Gelu",):
        for approximate in (False, True):
            for layout, x in unary_layouts(edges(d), d):
                edge.add(op, binding, f"{layout}_approx{int(approximate)}", [x],
                         [out_float(gelu64(x, approximate), d)], {"approximate": approximate}, **tol(d, 8))
        return
    float_ref, int_ref, signed, scale = UNARY[op]
    for layout, x in unary_layouts(edges(d), d):
        if d in FLOATS:
            y = float_ref(x, d)
            edge.add(op, binding, layout, [x], [y], signed_zeros=signed, **tol(d, scale))
        else:
            y = int_ref(objects(x).reshape(-1), d).reshape(x.shape)
            edge.add(op, binding, layout, [x], [y])


# --- binary -----------------------------------------------------------------------

def int_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def np_floordiv(x, y):
    return np.floor_divide(x, y)


# name: (float reference in the native dtype, int reference on Python ints or None, signed zeros)
BINARY = {
    "Add": (lambda x, y: x + y, lambda a, b: a + b, True),
    "Sub": (lambda x, y: x - y, lambda a, b: a - b, True),
    "Mul": (lambda x, y: x * y, lambda a, b: a * b, True),
    "Div": (lambda x, y: x / y, int_div, True),
    "RealDiv": (lambda x, y: x / y, None, True),
    "FloorDiv": (np_floordiv, lambda a, b: a // b, True),
    "FloorMod": (np.mod, lambda a, b: a % b, True),
    "Pow": (np.power, None, False),
    "Maximum": (np.maximum, max, False),
    "Minimum": (np.minimum, min, False),
    "SquaredDifference": (lambda x, y: (x - y) * (x - y), lambda a, b: (a - b) * (a - b), False),
}
COMPARE = {"Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less, "LessEqual": np.less_equal,
           "Greater": np.greater, "GreaterEqual": np.greater_equal}
LOGICAL = {"LogicalAnd": np.logical_and, "LogicalOr": np.logical_or}


def binary_layouts(ex, ey, d):
    """(layout, x, y) for a broadcasting binary op."""
    n, m = len(ex), len(ey)
    yield "pairs", arr([a for a in ex for _ in ey], d), arr([b for _ in ex for b in ey], d)
    yield "outer", arr(ex, d, (n, 1)), arr(ey, d, (1, m))
    yield "scalar_left", arr(ex[0], d), arr(ey, d)
    yield "scalar_right", arr(ex, d), arr(ey[-1], d)
    yield "scalars", arr(ex[-1], d), arr(ey[0], d)
    yield "empty", np.zeros((0,), storage(d)), np.zeros((0,), storage(d))
    yield "empty_vs_one", np.zeros((0,), storage(d)), arr([ey[0]], d)
    yield "empty_vs_scalar", np.zeros((2, 0), storage(d)), arr(ey[0], d)
    yield "empty_rows_vs_row", np.zeros((0, 3), storage(d)), arr([ey[i % m] for i in range(3)], d)
    yield "bcast_3x2", arr([ex[i % n] for i in range(6)], d, (2, 1, 3)), arr([ey[i % m] for i in range(4)], d,
                                                                                (4, 1))
    yield "rank8", (arr([ex[i % n] for i in range(16)], d, (2, 1, 2, 1, 2, 1, 2, 1)),
                    arr([ey[i % m] for i in range(16)], d, (1, 2, 1, 2, 1, 2, 1, 2)))[0], \
        arr([ey[i % m] for i in range(16)], d, (1, 2, 1, 2, 1, 2, 1, 2))
    yield "rank8_vs_vector", arr([ex[i % n] for i in range(16)], d, (2, 1, 1, 2, 1, 2, 1, 2)), \
        arr([ey[i % m] for i in range(2)], d)


def elementwise_int(fn, x, y, d):
    xb, yb = np.broadcast_arrays(objects(x), objects(y))
    return out_int(np.vectorize(fn, otypes=[object])(xb, yb) if xb.size else np.zeros(xb.shape, object), d)


def gen_binary(edge, op, binding):
    if op in LOGICAL:
        e = edges("bool")
        for layout, x, y in binary_layouts(e, e, "bool"):
            edge.add(op, {}, layout, [x, y], [LOGICAL[op](x, y)])
        return
    d = binding["T"]
    e = edges(d)
    if op in COMPARE:
        for layout, x, y in binary_layouts(e, e, d):
            if d in FLOATS:
                z = COMPARE[op](native(x, d), native(y, d))
            else:
                z = COMPARE[op](x, y)
            edge.add(op, binding, layout, [x, y], [z])
        return
    float_ref, int_ref, signed = BINARY[op]
    if d in FLOATS:
        for layout, x, y in binary_layouts(e, e, d):
            z = round_native(float_ref(native(x, d), native(y, d)), d)
            edge.add(op, binding, layout, [x, y], [z], signed_zeros=signed, **tol(d, 2 if op == "Pow" else 1))
        return
    ey = e
    if op in ("Div", "FloorDiv", "FloorMod"):
        # Dividing an integer by zero is an error (the docs say so): zero
        # divisors get a case of their own.
        ey = [v for v in e if v != 0]
        x = arr([e[0], e[1]], d)
        edge.add(op, binding, "by_zero", [x, arr([1, 0], d)], error="division by zero")
    if op == "Pow":
        if int_ref is None:
            lo, hi = int_range(d)
            ey = [0, 1, 2, 3, 31, 63, hi]
            bits = hi - lo + 1
            int_ref_fn = lambda a, b: pow(a, b, bits)  # noqa: E731
        edge.add(op, binding, "negative_exponent", [arr([2, 2], d), arr([1, -1], d)], error="negative")
    else:
        int_ref_fn = int_ref
    for layout, x, y in binary_layouts(e, ey, d):
        edge.add(op, binding, layout, [x, y], [elementwise_int(int_ref_fn, x, y, d)])


# Gradients of activations: (gradient-like input, value-like input) -> result,
# by the formula `weft ops NAME` gives, evaluated left to right in the dtype.
GRADS = {
    "ReluGrad": lambda g, f: np.where(f > 0, g, 0),
    "Relu6Grad": lambda g, f: np.where((f > 0) & (f < 6), g, 0),
    "EluGrad": lambda g, y: np.where(y > 0, g, g * (y + 1)),
    "SeluGrad": lambda g, y: np.where(y > 0, g * SELU_SCALE, g * (y + SELU_SCALE * SELU_ALPHA)),
    "SigmoidGrad": lambda y, dy: dy * y * (1 - y),
    "TanhGrad": lambda y, dy: dy * (1 - y * y),  # products are written as the docs group them
    "RsqrtGrad": lambda y, dy: dy * -0.5 * (y * y * y),
    "SqrtGrad": lambda y, dy: dy * 0.5 / y,
    "ReciprocalGrad": lambda y, dy: dy * -(y * y),
}


def gen_grad(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    layouts = [("pairs", arr([a for a in e for _ in e], d), arr([b for _ in e for b in e], d)),
               ("empty", np.zeros((0, 2), storage(d)), np.zeros((0, 2), storage(d))),
               ("scalars", arr(e[len(e) // 2], d), arr(e[-1], d)),
               ("rank8", arr(tiled(d, 16), d, (2, 1, 2, 1, 2, 1, 2, 1)), arr(tiled(d, 16)[::-1], d,
                                                                           (2, 1, 2, 1, 2, 1, 2, 1)))]
    for layout, a, b in layouts:
        if d in FLOATS:
            if op in ("GeluGrad", "SoftplusGrad"):
                continue
            z = round_native(GRADS[op](native(a, d), native(b, d)), d)
        else:
            z = out_int(np.where(objects(b) > 0, objects(a), 0) if op == "ReluGrad" else
                        np.where((objects(b) > 0) & (objects(b) < 6), objects(a), 0), d)
        edge.add(op, binding, layout, [a, b], [z], **tol(d, 4))
    if op in ("GeluGrad", "SoftplusGrad"):
        # gradients * derivative(features), the derivative in float64.
        for layout, a, b in layouts:
            f = np.asarray(b, np.float64)
            if op == "SoftplusGrad":
                variants = [({}, sigmoid64(f))]
            else:
                pdf = np.exp(-f * f / 2) / math.sqrt(2 * math.pi)
                exact = 0.5 * (1 + erf(f / math.sqrt(2))) + f * pdf
                exact = np.where(np.isinf(f), np.where(f > 0, 1.0, 0.0), exact)
                u = math.sqrt(2 / math.pi) * (f + 0.044715 * f ** 3)
                t = np.tanh(u)
                approx = 0.5 * (1 + t) + 0.5 * f * (1 - t * t) * math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * f * f)
                # Beyond |x| = 20 the derivative is 1 or 0 to every precision
                # (the formula itself overflows x^3 into inf * 0 there).
                approx = np.where(np.abs(f) > 20, np.where(f > 0, 1.0, 0.0), approx)
                variants = [({"approximate": False}, exact), ({"approximate": True}, approx)]
            for attrs, deriv in variants:
                z = out_float(np.asarray(a, np.float64) * deriv, d)
                edge.add(op, binding, layout + "".join(f"_{k}{int(v)}" for k, v in attrs.items()), [a, b], [z],
                         attrs, **tol(d, 8))


# --- reductions ---------------------------------------------------------------------

# Each row holds one edge value among fillers that keep the exact result
# independent of the order of accumulation.
FILLER = {"Sum": [1, -1, 0], "Mean": [1, -1, 0], "Prod": [1, -1, 1], "Max": [1, -1, 0], "Min": [1, -1, 0],
          "ArgMax": [1, -1, 0], "ArgMin": [1, -1, 0]}


def edge_rows(op, d):
    e = edges(d)
    filler = FILLER[op]
    rows = [[v] + filler for v in e]
    rows += [filler[:1] + [v] + filler[1:] for v in e]  # the edge value second
    return arr(rows, d)


def reduce_ref(op, x, d, axis, keep):
    if d in INTS:
        return reduction_nn.int_reference(op, x, list(axis), keep)
    y = reduction_nn.float_reference(op, x, list(axis), keep)
    return out_float(y, d)


def gen_reduce(edge, op, binding):
    d = binding["T"]
    rows = edge_rows(op, d)
    r8 = arr(tiled(d, 16), d, RANK_SHAPES[8]) if op != "Prod" else arr([1] * 15 + [edges(d)[0]], d,
                                                                          RANK_SHAPES[8])
    layouts = [("rows", rows, [1], False), ("rows_keep", rows, [-1], True), ("columns", rows, [0], False),
               ("all", rows, [], False), ("all_keep", rows, [0, 1], True), ("rank8", r8, [1, 3, 7], False),
               ("rank8_all", r8, [], True), ("scalar", arr(edges(d)[0], d), [], False),
               ("empty_keep_rows", np.zeros((0, 3), storage(d)), [1], False)]
    empty_ok = op in ("Sum", "Prod") or (op == "Mean" and d in FLOATS)
    for layout, x, axis, keep in layouts:
        y = reduce_ref(op, x, d, axis, keep)
        edge.add(op, binding, layout, [x], [y], {"axis": axis, "keep_dims": keep}, **tol(d, 4))
    x = np.zeros((0, 3), storage(d))
    if empty_ok:
        edge.add(op, binding, "empty_axis", [x], [reduce_ref(op, x, d, [0], False)], {"axis": [0]})
    else:
        edge.add(op, binding, "empty_axis", [x], attrs={"axis": [0]}, error="empty")


def gen_arg(edge, op, binding):
    d = binding["T"]
    rows = edge_rows(op, d)
    fn = np.argmax if op == "ArgMax" else np.argmin
    for out_type in choices(binding, "output_type", ("i32", "i64")):
        b = dict(binding, output_type=out_type)
        for axis in (1, -1, 0):
            x = native(rows, d) if d in FLOATS else rows
            edge.add(op, b, f"rows_axis{axis}", [rows], [fn(x, axis=axis).astype(NUMPY_DTYPE[out_type])],
                     {"axis": axis})
        r8 = arr(tiled(d, 16), d, RANK_SHAPES[8])
        edge.add(op, b, "rank8", [r8], [fn(native(r8, d) if d in FLOATS else r8, axis=3)
                                        .astype(NUMPY_DTYPE[out_type])], {"axis": 3})
        edge.add(op, b, "empty_rows", [np.zeros((0, 3), storage(d))], [np.zeros((0,), NUMPY_DTYPE[out_type])],
                 {"axis": 1})
        edge.add(op, b, "empty_axis", [np.zeros((2, 0), storage(d))], attrs={"axis": 1}, error="empty")


def gen_logical_reduce(edge, op, binding):
    fn = np.all if op == "All" else np.any
    x = np.array([[a, b, c] for a in (False, True) for b in (False, True) for c in (False, True)])
    for layout, v, axis, keep in [("rows", x, [1], False), ("columns", x, [0], True), ("all", x, [], False),
                                  ("empty", np.zeros((0, 3), bool), [0], False),
                                  ("empty_rows", np.zeros((0, 3), bool), [1], True),
                                  ("rank8", x.reshape(-1)[:16].reshape(RANK_SHAPES[8]), [0, 2, 4], False)]:
        edge.add(op, {}, layout, [v], [fn(v, axis=None if not axis else tuple(axis), keepdims=keep)],
                 {"axis": axis, "keep_dims": keep})


def gen_scan(edge, op, binding):
    d = binding["T"]
    rows = edge_rows("Sum" if op == "Cumsum" else "Prod", d)
    for tidx in choices(binding, "Tidx", ("i32", "i64")):
        b = dict(binding, Tidx=tidx)
        for exclusive in (False, True):
            for reverse in (False, True):
                for axis in (1, 0):
                    # Each scanned line holds one edge value (columns: the rows transposed).
                    x = rows if axis == 1 else dense(rows.T)
                    y = grad_scan(op, x, axis, exclusive, reverse, d)
                    edge.add(op, b, f"axis{axis}_ex{int(exclusive)}_rev{int(reverse)}",
                             [x, np.array(axis, NUMPY_DTYPE[tidx])], [y],
                             {"exclusive": exclusive, "reverse": reverse}, **tol(d, 4))
        edge.add(op, b, "empty", [np.zeros((0, 3), storage(d)), np.array(-1, NUMPY_DTYPE[tidx])],
                 [np.zeros((0, 3), storage(d))])
        edge.add(op, b, "scalar_axis_out_of_range", [arr(edges(d)[:3], d), np.array(1, NUMPY_DTYPE[tidx])],
                 error="axis")


def grad_scan(op, x, axis, exclusive, reverse, d):
    """The conformance suite's running sum or product, rounded to |d|."""
    y = grad_support.scan_ref(op, np.asarray(x), axis, exclusive, reverse, d)
    return y if d in INTS else out_float(y, d)


# --- data movement --------------------------------------------------------------------

def movement_input(d, shape=(3, 5)):
    return arr(tiled(d, int(np.prod(shape))), d, shape)


def add_move(edge, op, binding, layout, inputs, outputs, attrs=None):
    edge.add(op, binding, layout, inputs, outputs, attrs, signed_zeros=True)


def gen_movement(edge, op, binding):
    d = binding.get("T", binding.get("dtype"))
    x = movement_input(d)
    x8 = arr(tiled(d, 16), d, RANK_SHAPES[8])
    s = storage(d)
    if op in ("Identity", "StopGradient"):
        for layout, v in unary_layouts(edges(d), d):
            add_move(edge, op, binding, layout, [v], [v])
    elif op in ("ZerosLike", "OnesLike"):
        fill = 0 if op == "ZerosLike" else 1
        for layout, v in unary_layouts(edges(d), d):
            add_move(edge, op, binding, layout, [v], [np.full(v.shape, fill, s)])
    elif op in ("Shape", "Size", "Rank"):
        outs = choices(binding, "out_type", ("i32", "i64")) if op != "Rank" else (None,)
        for out_type in outs:
            b = dict(binding, out_type=out_type) if out_type else binding
            t = NUMPY_DTYPE[out_type] if out_type else np.int32
            for layout, v in unary_layouts(edges(d), d):
                ref = {"Shape": np.array(v.shape, t), "Size": np.array(v.size, t), "Rank": np.array(v.ndim, t)}[op]
                edge.add(op, b, layout, [v], [ref])
    elif op == "Reshape":
        for tshape in choices(binding, "Tshape", ("i32", "i64")):
            b = dict(binding, Tshape=tshape)
            t = NUMPY_DTYPE[tshape]
            for layout, v, shape in [("to_rank8", x8.reshape(16), [2, 1, 2, 1, 2, 1, 2, 1]),
                                     ("inferred", x, [-1, 3]), ("to_scalar", arr(edges(d)[0], d, (1, 1)), []),
                                     ("empty", np.zeros((0, 4), s), [2, 0, 3]), ("from_rank8", x8, [16])]:
                add_move(edge, op, b, layout, [v, np.array(shape, t)], [v.reshape(shape)])
            edge.add(op, b, "bad_count", [x, np.array([4, 4], t)], error="(15 elements) to [4,4] (16 elements)")
    elif op == "ExpandDims":
        for axis in (0, 2, -1):
            add_move(edge, op, binding, f"axis{axis}", [x], [np.expand_dims(x, axis)], {"axis": axis})
        add_move(edge, op, binding, "scalar", [arr(edges(d)[0], d)], [arr([edges(d)[0]], d)], {"axis": 0})
        add_move(edge, op, binding, "rank7_to_8", [x8.reshape(2, 1, 2, 2, 1, 2, 1)],
                 [x8.reshape(2, 1, 2, 2, 1, 2, 1, 1)], {"axis": -1})
    elif op == "Squeeze":
        add_move(edge, op, binding, "all", [x8], [np.squeeze(x8)], {"axis": []})
        add_move(edge, op, binding, "some", [x8], [np.squeeze(x8, axis=(1, 2))], {"axis": [1, 2]})
        add_move(edge, op, binding, "empty", [np.zeros((0, 1), s)], [np.zeros((0,), s)], {"axis": [1]})
        edge.add(op, binding, "not_one", [x], attrs={"axis": [0]}, error="cannot squeeze axis 0")
    elif op == "Transpose":
        for layout, v, perm in [("2d", x, [1, 0]), ("default", x, []), ("rank8", x8, [7, 0, 6, 1, 5, 2, 4, 3]),
                                ("empty", np.zeros((0, 2, 3), s), [2, 0, 1]), ("scalar", arr(edges(d)[1], d), [])]:
            want = np.transpose(v, None if not perm else perm)
            add_move(edge, op, binding, layout, [v], [dense(want)], {"perm": perm})
    elif op == "Reverse":
        for layout, v, axis in [("rows", x, [0]), ("both", x, [0, -1]), ("rank8", x8, [0, 3, 7]),
                                ("none", x, []), ("empty", np.zeros((0, 3), s), [0, 1])]:
            want = np.flip(v, axis=tuple(axis)) if axis else v
            add_move(edge, op, binding, layout, [v], [dense(want)], {"axis": axis})
    elif op == "Tile":
        for layout, v, mult in [("2d", x, [2, 1]), ("zero", x, [0, 2]), ("rank8", x8, [1, 2, 1, 1, 1, 1, 1, 2]),
                                ("empty", np.zeros((0, 3), s), [3, 2])]:
            add_move(edge, op, binding, layout, [v], [np.tile(v, mult)], {"multiples": mult})
    elif op == "Pad":
        for mode in ("CONSTANT", "REFLECT", "SYMMETRIC"):
            for layout, v, pads in [("2d", x, [1, 2, 2, 1]), ("none", x, [0, 0, 0, 0]),
                                    ("rank8", x8, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])]:
                width = list(zip(pads[::2], pads[1::2]))
                attrs = {"paddings": pads, "mode": mode}
                if mode == "CONSTANT":
                    values = [0.0, -0.0, NAN, INF] if d in FLOATS else [0, 1, -1] if d in SIGNED else [0, 1]
                    for cv in values:
                        fill = np.array(cv).astype(s)
                        add_move(edge, op, binding, f"{layout}_{mode}_{cv}", [v],
                                 [np.pad(v, width, mode="constant", constant_values=fill)],
                                 dict(attrs, constant_value=float(cv)))
                else:
                    add_move(edge, op, binding, f"{layout}_{mode}", [v],
                             [np.pad(v, width, mode=mode.lower())], attrs)
            if mode == "CONSTANT":
                add_move(edge, op, binding, "empty_CONSTANT", [np.zeros((0, 2), s)],
                         [np.zeros((2, 3), s)], {"paddings": [1, 1, 0, 1], "mode": mode})
    elif op == "Slice":
        for layout, v, begin, size in [("2d", x, [1, 2], [2, -1]), ("empty", x, [3, 0], [0, 5]),
                                       ("all", x, [0, 0], [-1, -1]),
                                       ("rank8", x8, [1, 0, 0, 1, 0, 0, 0, 1], [1, 1, 1, 1, 1, 2, 1, 1])]:
            idx = tuple(slice(b, None if z == -1 else b + z) for b, z in zip(begin, size))
            add_move(edge, op, binding, layout, [v], [dense(v[idx])], {"begin": begin, "size": size})
    elif op == "StridedSlice":
        imin = -(2 ** 63)
        for layout, v, begin, end, strides, idx in [
                ("step2", x, [0, 4], [3, 0], [2, -2], np.s_[0:3:2, 4:0:-2]),
                ("reverse_all", x, [-1, -1], [-4, -6], [-1, -1], np.s_[-1:-4:-1, -1:-6:-1]),
                ("int64_min", x, [2, 0], [imin, 5], [imin, 1], np.s_[2::imin, 0:5:1]),
                ("empty", x, [2, 0], [1, 5], [1, 1], np.s_[2:1, 0:5]),
                ("rank8", x8, [0] * 8, [2] * 8, [1, 1, 1, 1, 1, 1, 1, -1], np.s_[0:2, 0:2, 0:2, 0:2, 0:2, 0:2, 0:2, 0:2:-1])]:
            add_move(edge, op, binding, layout, [v], [dense(v[idx])],
                     {"begin": begin, "end": end, "strides": strides})
    elif op == "Concat":
        for layout, vs, axis in [("rows", [x, x[:1], x[:0]], 0), ("columns", [x, x[:, 2:]], -1),
                                 ("one", [x], 1), ("rank8", [x8, x8], 7), ("empty", [x[:0], x[:0]], 0)]:
            b = dict(binding, N=len(vs))
            add_move(edge, op, b, layout, vs, [np.concatenate(vs, axis=axis)], {"axis": axis})
    elif op == "Pack":
        for layout, vs, axis in [("front", [x, x[::-1]], 0), ("back", [x, x, x], -1), ("scalars",
                                 [arr(v, d) for v in edges(d)], 0), ("empty", [x[:0]] * 2, 1)]:
            b = dict(binding, N=len(vs))
            add_move(edge, op, b, layout, vs, [np.stack(vs, axis=axis)], {"axis": axis})
    elif op == "Split":
        for layout, v, n, axis in [("rows", x, 3, 0), ("columns", x, 5, -1), ("one", x, 1, 1),
                                   ("rank8", x8, 2, 7), ("empty", np.zeros((0, 4), s), 2, 1)]:
            add_move(edge, op, binding, layout, [v], [dense(p) for p in np.split(v, n, axis=axis)],
                     {"num_split": n, "axis": axis})
        edge.add(op, binding, "uneven", [x], attrs={"num_split": 2, "axis": 1}, error="into 2 equal parts")
    elif op == "BroadcastTo":
        for tidx in choices(binding, "Tidx", ("i32", "i64")):
            b = dict(binding, Tidx=tidx)
            for layout, v, shape in [("row", x[:1], [4, 5]), ("scalar", arr(edges(d)[0], d), [2, 3]),
                                     ("rank8", x[0, :2].reshape(2, 1), [1, 2, 1, 2, 1, 1, 2, 2]),
                                     ("empty", x[:1], [0, 5]), ("same", x, [3, 5])]:
                add_move(edge, op, b, layout, [v, np.array(shape, NUMPY_DTYPE[tidx])],
                         [dense(np.broadcast_to(v, shape))])
            edge.add(op, b, "incompatible", [x, np.array([2, 5], NUMPY_DTYPE[tidx])], error="cannot be broadcast to [2,5]")
    elif op == "Fill":
        for index in choices(binding, "index_type", ("i32", "i64")):
            b = dict(binding, index_type=index)
            for k, value in enumerate(edges(d)):
                for shape in ([2, 3], [], [0, 4]):
                    add_move(edge, op, b, f"v{k}_{'x'.join(map(str, shape)) or 'scalar'}",
                             [np.array(shape, NUMPY_DTYPE[index]), arr(value, d)], [np.full(shape, arr(value, d), s)])
            edge.add(op, b, "negative_dim", [np.array([2, -1], NUMPY_DTYPE[index]), arr(edges(d)[0], d)], error="has a negative dimension")
    elif op == "Select":
        e = edges(d)
        n = len(e)
        cond = np.array([i % 3 == 0 for i in range(n)])
        t, f = arr(e, d), arr(e[::-1], d)
        add_move(edge, op, binding, "same_shape", [cond, t, f], [np.where(cond, t, f)])
        add_move(edge, op, binding, "scalar_cond", [np.array(True), t, f], [t])
        add_move(edge, op, binding, "broadcast", [cond.reshape(n, 1), t.reshape(1, n), arr(e[0], d)],
                 [np.where(cond.reshape(n, 1), t.reshape(1, n), arr(e[0], d))])
        add_move(edge, op, binding, "empty", [np.zeros((0,), bool), t[:0], f[:0]], [t[:0]])
        add_move(edge, op, binding, "rank8", [cond[:1].reshape([1] * 8), x8, x8[::-1]],
                 [np.where(cond[:1].reshape([1] * 8), x8, x8[::-1])])
    else:
        raise KeyError(op)


# --- indexing ------------------------------------------------------------------------

def gen_indexing(edge, op, binding):
    d = binding["T"]
    s = storage(d)
    x = movement_input(d, (5, 3))
    if op == "Gather":
        ti = binding["Tindices"]
        for layout, idx, axis in [("rows", [4, 0, 0, 2], 0), ("columns", [[2, 1], [0, 2]], 1), ("empty", [], 0),
                                  ("scalar", 3, 0)]:
            i = np.array(idx, NUMPY_DTYPE[ti])
            add_move(edge, op, binding, layout, [x, i], [np.take(x, i, axis=axis)], {"axis": axis})
        edge.add(op, binding, "out_of_range", [x, np.array([5], NUMPY_DTYPE[ti])], error="index 5 at position 0 is out of range")
        edge.add(op, binding, "negative", [x, np.array([-1], NUMPY_DTYPE[ti])], error="index -1 at position 0 is out of range")
    elif op == "GatherNd":
        ti = binding["Tindices"]
        for layout, idx in [("points", [[4, 2], [0, 0]]), ("rows", [[3], [1]]), ("empty", np.zeros((0, 2))),
                            ("whole", np.zeros((0,)))]:
            i = np.array(idx, NUMPY_DTYPE[ti])
            want = np.array([x[tuple(r)] for r in i.reshape(-1, i.shape[-1])]).reshape(
                i.shape[:-1] + x.shape[i.shape[-1]:]).astype(s) if i.ndim > 1 or i.size else x
            if i.ndim == 1 and i.size == 0:
                want = x
            add_move(edge, op, binding, layout, [x, i], [want])
        edge.add(op, binding, "out_of_range", [x, np.array([[5, 0]], NUMPY_DTYPE[ti])], error="is out of range for params of shape [5,3]")
    elif op == "ScatterNd":
        ti = binding["Tindices"]
        upd = arr(edges(d)[:4], d)
        idx = np.array([[0], [3], [1], [3]], NUMPY_DTYPE[ti])
        if d in FLOATS:
            # Index 3 repeats: its two edge values add in the compute type.
            w = np.zeros(5, native(upd, d).dtype)
            np.add.at(w, idx[:, 0], native(upd, d))
            want = round_native(w, d)
        else:
            w = np.zeros(5, object)
            for i, u in zip(idx[:, 0], objects(upd)):
                w[i] += u
            want = out_int(w, d)
        edge.add(op, binding, "repeated", [idx, upd], [want], {"shape": [5]})
        edge.add(op, binding, "empty", [np.zeros((0, 1), NUMPY_DTYPE[ti]), upd[:0]], [np.zeros(5, s)],
                 {"shape": [5]}, signed_zeros=True)
        edge.add(op, binding, "out_of_range", [np.array([[5]], NUMPY_DTYPE[ti]), upd[:1]], attrs={"shape": [5]},
                 error="is out of range for the output of shape [5]")
    elif op == "UnsortedSegmentSum":
        ti, tn = binding["Tindices"], binding.get("Tnumsegments", "i32")
        b = dict(binding, Tnumsegments=tn)
        e = edges(d)
        data = arr(e, d)
        ids = np.array([i % 4 if i % 5 else -1 for i in range(len(e))], NUMPY_DTYPE[ti])
        if d in FLOATS:
            w = np.zeros(5, native(data, d).dtype)
            for i, v in zip(ids, native(data, d)):
                if i >= 0:
                    w[i] += v
            want = round_native(w, d)
        else:
            w = np.zeros(5, object)
            for i, v in zip(ids, objects(data)):
                if i >= 0:
                    w[i] += v
            want = out_int(w, d)
        # One value per segment would be order-free; with several the sum is
        # taken in index order, as TensorFlow's CPU kernel does.
        edge.add(op, b, "values", [data, ids, np.array(5, NUMPY_DTYPE[tn])], [want], **tol(d))
        edge.add(op, b, "empty", [data[:0], ids[:0], np.array(2, NUMPY_DTYPE[tn])], [np.zeros(2, storage(d))])
        edge.add(op, b, "too_large", [data[:1], np.array([7], NUMPY_DTYPE[ti]), np.array(5, NUMPY_DTYPE[tn])],
                 error="segment id 7 at position [0] of segment_ids is out of range")
    elif op == "DynamicPartition":
        e = edges(d)
        data = arr(e, d)
        parts = np.array([i % 3 for i in range(len(e))], np.int32)
        for n in (3, 4):
            add_move(edge, op, dict(binding, num_partitions=n), f"n{n}", [data, parts],
                     [data[parts == p] for p in range(n)])
        edge.add(op, dict(binding, num_partitions=2), "out_of_range", [arr(tiled(d, 3), d), np.array([0, 2, 1], np.int32)],
                 error="is outside [0, 2)")
    elif op == "DynamicStitch":
        e = tiled(d, max(8, len(edges(d))))
        a, b_ = arr(e[:4], d), arr(e[4:], d)
        ia = np.array([0, 2, 4, 6], np.int32)
        ib = np.array([1, 3, 5] + list(range(7, 7 + len(e) - 7)), np.int32)
        ids = [ia, ib]
        datas = [a, b_]
        want = sparse.stitch_reference(ids, datas)
        add_move(edge, op, dict(binding, N=2), "interleave", ids + datas, [np.asarray(want, s)])
        edge.add(op, dict(binding, N=1), "gap", [np.array([0, 2], np.int32), arr(e[:2], d)], error="but no indices list names it")
    elif op == "Unique":
        e = edges(d)
        x1 = arr(e + e[::-1], d)
        y, idx = sparse.unique_reference(x1) if d not in FLOATS else unique_float(x1)
        for out_idx in choices(binding, "out_idx", ("i32", "i64")):
            edge.add(op, dict(binding, out_idx=out_idx), "values", [x1], [y, idx.astype(NUMPY_DTYPE[out_idx])],
                     signed_zeros=True)
            edge.add(op, dict(binding, out_idx=out_idx), "empty", [x1[:0]], [x1[:0],
                                                                             np.zeros(0, NUMPY_DTYPE[out_idx])])
    elif op == "OneHot":
        ti = binding["TI"]
        lo = 0 if ti == "u8" else int_range(ti)[0]
        idx = np.array([0, 2, lo, 3, int_range(ti)[1], 1], NUMPY_DTYPE[ti])
        for on, off in ([1.0, 0.0], [-0.0, NAN], [INF, -INF]):
            if d not in FLOATS and not all(map(math.isfinite, (on, off))):
                continue
            for axis in (-1, 0):
                eye = np.array([[1 if j == i else 0 for j in range(3)] for i in idx.astype(object)], bool)
                if axis == 0:
                    eye = eye.T
                want = np.where(eye, np.array(on).astype(s), np.array(off).astype(s))
                if d == "bf16":
                    want = to_bf16(want)
                add_move(edge, op, binding, f"on{on}_off{off}_axis{axis}", [idx], [want],
                         {"depth": 3, "on_value": on, "off_value": off, "axis": axis})
        add_move(edge, op, binding, "depth0", [idx], [np.zeros((6, 0), s)], {"depth": 0})
    elif op == "InvertPermutation":
        for layout, p in [("perm", [3, 0, 4, 1, 2]), ("empty", []), ("one", [0])]:
            p = np.array(p, storage(d))
            add_move(edge, op, binding, layout, [p], [np.argsort(p).astype(storage(d))])
        edge.add(op, binding, "repeated", [np.array([0, 0], storage(d))], error="repeats x[0]")
        edge.add(op, binding, "out_of_range", [np.array([0, int_range(d)[1]], storage(d))], error="is out of range [0, 2)")
    else:
        raise KeyError(op)


# --- element indexing ------------------------------------------------------------------

def scatter_elements_edge(data, indices, updates, axis, reduction, d):
    """ScatterElements in the dtype's arithmetic: floats in the type Weft
    computes them in (f16 and bf16 in float32, rounded after each update),
    integers exact and then wrapped, bool add as or and mul as and."""
    out = np.array(data, copy=True)
    idx = np.where(indices < 0, indices + data.shape[axis], indices)
    for pos in np.ndindex(*indices.shape):
        target = list(pos)
        target[axis] = idx[pos]
        target = tuple(target)
        a, u = out[target], updates[pos]
        if reduction == "none":
            v = u
        elif d == "bool":
            v = (a or u) if reduction == "add" else (a and u)
        elif d in FLOATS:
            x, y = native(a, d), native(u, d)
            v = round_native(x + y if reduction == "add" else x * y, d)
        else:
            v = out_int([int(a) + int(u) if reduction == "add" else int(a) * int(u)], d)[0]
        out[target] = v
    return out


def gen_elements(edge, op, binding):
    d = binding["T"]
    s = storage(d)
    if op == "NonZero":
        e = edges(d)
        for layout, x in unary_layouts(e, d):
            edge.add(op, binding, layout, [x], [indexing.non_zero_ref(x)])
        return
    if op == "TopK":
        e = edges(d)
        n = 2 * len(e)
        x = arr([e + e[::-1], e[::-1] + e], d)  # each line holds every edge value twice: ties
        x8 = arr(tiled(d, 16), d, RANK_SHAPES[8])
        for tk in choices(binding, "Tk", ("i32", "i64")):
            b = dict(binding, Tk=tk)
            for largest in (True, False):
                for layout, v, k, axis in [("rows_k3", x, 3, 1), ("rows_all", x, n, -1), ("columns", x, 2, 0),
                                           ("k0", x, 0, 1), ("rank8", x8, 1, 7), ("empty", np.zeros((0, 3), s), 2, 1)]:
                    want = indexing.top_k_ref(v, k, axis, largest)
                    edge.add(op, b, f"{layout}_largest{int(largest)}", [v, np.array(k, NUMPY_DTYPE[tk])],
                             [dense(w) for w in want], {"axis": axis, "largest": largest}, signed_zeros=True)
            edge.add(op, b, "k_too_large", [x, np.array(n + 1, NUMPY_DTYPE[tk])],
                     error=f"k = {n + 1} is out of range for axis 1 of input [2,{n}] (valid: 0 to {n})")
        return
    ti = binding["Tindices"]
    t = NUMPY_DTYPE[ti]
    x = movement_input(d, (5, 3))
    x8 = arr(tiled(d, 16), d, RANK_SHAPES[8])
    i8 = np.array([i % 3 - 1 for i in range(16)], t).reshape(RANK_SHAPES[8])  # -1, 0, 1 along an axis of 2
    layouts = [("rows", np.array([[4, 0, -1], [0, 0, 2], [-5, 3, 3]], t), 0),
               ("columns", np.array([[2, -3, 0, 1]] * 5, t), 1), ("rank8", i8, 7), ("empty", np.zeros((0, 3), t), 0)]
    if op == "GatherElements":
        for layout, i, axis in layouts:
            add_move(edge, op, binding, layout, [x if i.ndim == 2 else x8, i],
                     [dense(indexing.gather_elements_ref(x if i.ndim == 2 else x8, i, axis))], {"axis": axis})
        edge.add(op, binding, "out_of_range", [x, np.array([[5]], t)], attrs={"axis": 0},
                 error="index 5 at position [0, 0] of indices is out of range for axis 0 of data [5,3]")
        return
    e = edges(d)
    for reduction in ("none", "add", "mul"):
        b = dict(binding)
        for layout, i, axis in layouts:
            data = x if i.ndim == 2 else x8
            # The edge values in reverse, so each meets the others in a sum or product.
            u = arr([e[::-1][k % len(e)] for k in range(i.size)], d, i.shape)
            want = scatter_elements_edge(data, i, u, axis, reduction, d)
            edge.add(op, b, f"{layout}_{reduction}", [data, i, u], [want], {"axis": axis, "reduction": reduction},
                     signed_zeros=True)
        edge.add(op, b, f"out_of_range_{reduction}", [x, np.array([[-6]], t), x[:1, :1]],
                 attrs={"axis": 0, "reduction": reduction},
                 error="index -6 at position [0, 0] of indices is out of range for axis 0 of data [5,3]")


def unique_float(x):
    """Unique by value: +0 and -0 are one value (the first's sign), each NaN its own."""
    values, idx = [], []
    for v in x.tolist():
        if v == v:
            for k, u in enumerate(values):
                if u == v:
                    idx.append(k)
                    break
            else:
                values.append(v)
                idx.append(len(values) - 1)
        else:
            values.append(v)
            idx.append(len(values) - 1)
    return np.array(values, x.dtype), np.array(idx)


# --- casts -------------------------------------------------------------------------

def cast_ref(values, src, dst):
    """Weft's Cast of the exact values |values| (Python numbers) from |src| to
    |dst|, by the rules `weft ops Cast` gives."""
    if dst == "bool":
        return np.array([v != 0 for v in values], bool)  # NaN != 0
    if dst in INTS:
        lo, hi = int_range(dst)
        out = []
        for v in values:
            if src in FLOATS:
                if math.isnan(v):
                    out.append(0)
                elif math.isinf(v):
                    out.append(hi if v > 0 else lo)
                else:
                    out.append(min(max(int(v), lo), hi))  # int() truncates toward zero; then saturate
            else:
                out.append(wrap(int(v), dst))
        return np.array(out, storage(dst))
    if dst == "bf16":
        return np.array([round_bf16(int(v) if src not in FLOATS else float(v)) for v in values], np.float32)
    if src not in FLOATS:
        return np.array([exact_int_to_float(int(v), dst) for v in values], storage(dst))
    return np.array(values, np.float64).astype(storage(dst))  # one rounding from the exact value


def exact_int_to_float(v, dst):
    """Python int |v| rounded once, to nearest even, to float dtype |dst|."""
    if dst == "f64":
        return float(v)  # Python rounds int -> float correctly
    # Round to float64 exactly first only when that is exact; else do it by hand.
    if abs(v) < 2 ** 53:
        return np.float64(v).astype(NUMPY_DTYPE[dst])
    mant = {"f32": 24, "f16": 11}[dst]
    sign, m = (-1 if v < 0 else 1), abs(v)
    shift = m.bit_length() - mant
    q, rem = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if rem > half or (rem == half and q & 1):
        q += 1
    return np.float64(sign * q * 2.0 ** shift).astype(NUMPY_DTYPE[dst])


def gen_cast(edge, op, binding):
    src, dst = binding["SrcT"], binding["DstT"]
    values = edges(src)
    if src in FLOATS:
        values = values + [2.5, -3.7, 1e10 if src != "f16" else 6e4, 0.9999999]
        values = [float(native(arr(v, src), src)) if src != "bf16" else float(to_bf16(np.float32(v)))
                  for v in values]
    x = arr(values, src)
    exact = [v for v in (x.tolist() if src != "bool" else [bool(b) for b in x])]
    if src in INTS:
        exact = [int(v) for v in exact]
    want = cast_ref(exact, src, dst)
    signed = dst in FLOATS
    edge.add(op, binding, "values", [x], [want], signed_zeros=signed)
    edge.add(op, binding, "empty", [x[:0].reshape(0, 1)], [want[:0].reshape(0, 1)])
    edge.add(op, binding, "rank8", [np.resize(x, 16).reshape(RANK_SHAPES[8])],
             [np.resize(want, 16).reshape(RANK_SHAPES[8])], signed_zeros=signed)
    edge.add(op, binding, "scalar", [x[0]], [want[0]], signed_zeros=signed)


# --- matrix products and bias --------------------------------------------------------

def one_edge_per_row(d, rows, cols, seed=0):
    """A [rows, cols] matrix of small exact values with row i's column
    i % cols holding edge value i: each output element then sees at most
    one edge value, so its value does not depend on the order of the sum."""
    base = np.array([[((i * 7 + j * 3 + seed) % 5) - 2 for j in range(cols)] for i in range(rows)], np.float64)
    base *= 0.5
    e = edges(d)
    m = arr(base.reshape(-1).tolist(), d, (rows, cols)) if d in FLOATS else arr(
        [int(v) for v in (base * 2).reshape(-1)], d, (rows, cols))
    for i in range(rows):
        m[i, i % cols] = arr(e[i % len(e)], d)
    return m


def matmul_ref(a, b, d):
    if d in INTS:
        return out_int(objects(a) @ objects(b), d)
    return out_float(np.asarray(a, np.float64) @ np.asarray(b, np.float64), d)


def gen_matmul(edge, op, binding):
    d = binding["T"]
    n = len(edges(d))
    a = one_edge_per_row(d, n, 4)
    # b has small exact values only, so a row's single edge value meets
    # finite factors.
    bm = arr((np.arange(12).reshape(4, 3) % 4 - 1.5).reshape(-1).tolist() if d in FLOATS else
             (np.arange(12) % 4 - 1).tolist(), d, (4, 3))
    layouts = [("edge_rows", a, bm, False, False), ("transposed_a", dense(a.T), bm, True, False),
               ("transposed_b", a, dense(bm.T), False, True),
               ("both", dense(a.T), dense(bm.T), True, True),
               ("empty_k", np.zeros((3, 0), storage(d)), np.zeros((0, 2), storage(d)), False, False),
               ("empty_m", np.zeros((0, 4), storage(d)), bm, False, False)]
    attr_names = ("transpose_a", "transpose_b") if op == "MatMul" else ("adj_x", "adj_y")
    for layout, x, y, ta, tb in layouts:
        xa = x.T if ta else x
        yb = y.T if tb else y
        want = matmul_ref(xa, yb, d)
        if op == "BatchMatMul":
            x, y, want = x[None], y[None], want[None]
        edge.add(op, binding, layout, [x, y], [want], {attr_names[0]: ta, attr_names[1]: tb}, **tol(d, 8))
    if op == "BatchMatMul":
        x = np.stack([a[:4], a[4:8]])[:, None]          # [2, 1, 4, 4]
        y = np.stack([bm, bm[::-1], bm])[None]           # [1, 3, 4, 3]
        want = matmul_ref(np.broadcast_to(x, (2, 3, 4, 4)), np.broadcast_to(y, (2, 3, 4, 3)), d)
        edge.add(op, binding, "broadcast_batch", [x, y], [want], **tol(d, 8))
        edge.add(op, binding, "empty_batch", [np.zeros((0, 2, 4), storage(d)), bm[None]],
                 [np.zeros((0, 2, 3), storage(d))])
        edge.add(op, binding, "rank8_batch", [a[:4].reshape(1, 1, 1, 1, 1, 1, 4, 4), bm.reshape(1, 1, 1, 1, 1, 1, 4, 3)],
                 [matmul_ref(a[:4], bm, d).reshape(1, 1, 1, 1, 1, 1, 4, 3)], **tol(d, 8))


def gen_bias(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    n = len(e)
    if op == "BiasAdd":
        v = movement_input(d, (2, n))
        bias = arr(e[::-1], d)
        for fmt, val in (("NHWC", v), ("NCHW", v.reshape(2, n, 1, 1))):
            if d in FLOATS:
                want = round_native(native(val, d) + native(bias.reshape((n,) if fmt == "NHWC" else (n, 1, 1)), d), d)
            else:
                want = out_int(objects(val) + objects(bias.reshape((n,) if fmt == "NHWC" else (n, 1, 1))), d)
            edge.add(op, binding, fmt, [val, bias], [want], {"data_format": fmt}, signed_zeros=True)
        edge.add(op, binding, "empty", [np.zeros((0, n), storage(d)), bias], [np.zeros((0, n), storage(d))],
                 {"data_format": "NHWC"})
    else:  # BiasAddGrad: one edge value per channel among exact fillers
        rows = edge_rows("Sum", d).T  # [4, channels]
        for fmt, val in (("NHWC", rows), ("NCHW", rows.reshape(rows.shape[0], rows.shape[1], 1, 1))):
            want = reduce_ref("Sum", np.asarray(rows), d, [0], False)
            edge.add(op, binding, fmt, [val], [want], {"data_format": fmt}, **tol(d, 4))
        edge.add(op, binding, "empty", [np.zeros((0, 3), storage(d))], [np.zeros(3, storage(d))])


def gen_addn(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    x, y = arr([a for a in e for _ in e], d), arr([b for _ in e for b in e], d)
    if d in FLOATS:
        two = round_native(native(x, d) + native(y, d), d)
    else:
        two = out_int(objects(x) + objects(y), d)
    edge.add(op, dict(binding, N=2), "pairs", [x, y], [two], signed_zeros=True)
    edge.add(op, dict(binding, N=1), "one", [arr(e, d)], [arr(e, d)], signed_zeros=True)
    edge.add(op, dict(binding, N=3), "empty", [np.zeros((0, 2), storage(d))] * 3, [np.zeros((0, 2), storage(d))])


def gen_clip(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    x = arr(e, d)
    for layout, lo, hi in [("scalar_bounds", arr(e[-4] if d in FLOATS else e[2], d), arr(e[-1], d)),
                           ("edge_bounds", arr(e, d), arr(e[::-1], d)), ("inf_bounds", None, None)]:
        if lo is None:
            if d not in FLOATS:
                continue
            lo, hi = arr(-INF, d), arr(INF, d)
        if d in FLOATS:
            want = round_native(np.minimum(np.maximum(native(x, d), native(lo, d)), native(hi, d)), d)
        else:
            xb, lb, hb = np.broadcast_arrays(objects(x), objects(lo), objects(hi))
            want = out_int([min(max(a, b), c) for a, b, c in zip(xb, lb, hb)], d)
        edge.add(op, binding, layout, [x, lo, hi], [want])
    edge.add(op, binding, "empty", [x[:0], arr(e[2], d), arr(e[3], d)], [x[:0]])


def gen_range(edge, op, binding):
    d = binding["Tidx"]
    t = storage(d)
    if d in FLOATS:
        cases = [("empty", 0.0, 0.0, 1.0), ("down", 5.0, 0.0, -1.5), ("minus_zero", -0.0, 2.0, 1.0),
                 ("tiny_count", 0.0, 1.0, 0.25)]
        for layout, a, b, c in cases:
            want = np.arange(a, b, c, dtype=np.float64).astype(t) if layout != "minus_zero" else \
                np.array([-0.0, 1.0], t)
            edge.add(op, binding, layout, [t(a), t(b), t(c)], [want], signed_zeros=True)
        edge.add(op, binding, "nan", [t(0), t(NAN), t(1)], error="must be finite")
        edge.add(op, binding, "inf", [t(0), t(INF), t(1)], error="must be finite")
        edge.add(op, binding, "zero_delta", [t(0), t(1), t(0)], error="delta must not be 0")
    else:
        lo, hi = int_range(d)
        for layout, a, b, c in [("top", hi - 2, hi, 1), ("bottom", lo + 2, lo, -1), ("wide_step", 0, hi, hi // 3 + 1),
                                ("empty", lo, lo, 1), ("full_span_step", lo, hi, hi)]:
            want = np.array(list(range(a, b, c)), t)
            edge.add(op, binding, layout, [t(a), t(b), t(c)], [want])
        edge.add(op, binding, "zero_delta", [t(0), t(1), t(0)], error="delta must not be 0")
        edge.add(op, binding, "wrong_direction", [t(0), t(5), t(-1)], error="cannot reach limit 5 with delta -1")


# --- windows: convolution and pooling ----------------------------------------------

def edge_image(d, shape, seed=0):
    """An NHWC image of small exact values with one edge value per batch
    element, at a position that differs per element."""
    n = shape[0]
    flat = ((np.arange(int(np.prod(shape))) * 7 + seed) % 5 - 2) * 0.5
    x = flat.reshape(shape).astype(storage(d))
    e = edges(d)
    for b in range(n):
        h, w = (b * 2) % shape[1], (b * 3) % shape[2]
        x[b, h, w, b % shape[3]] = e[b % len(e)]
    return x


def gen_window(edge, op, binding):
    d = binding["T"]
    n = len(edges(d))
    x = edge_image(d, (n, 4, 5, 2))
    f = (((np.arange(3 * 3 * 2 * 3) * 5) % 7 - 3) * 0.25).reshape(3, 3, 2, 3).astype(storage(d))
    fd = f[:, :, :, :2]
    for padding in ("VALID", "SAME"):
        for fmt in ("NHWC", "NCHW"):
            xi = x if fmt == "NHWC" else dense(x.transpose(0, 3, 1, 2))
            strides = [1, 2, 1, 1] if fmt == "NHWC" else [1, 1, 2, 1]
            dil = [1, 1, 1, 1]
            attrs = {"padding": padding, "data_format": fmt, "strides": strides}
            tag = f"{padding}_{fmt}"
            if op == "Conv2D":
                edge.add(op, binding, tag, [xi, f], [out_float(conv.conv_ref(xi, f, strides, dil, padding, fmt), d)],
                         dict(attrs, dilations=dil), **tol(d, 16))
            elif op == "DepthwiseConv2D":
                edge.add(op, binding, tag, [xi, fd],
                         [out_float(conv.depthwise_ref(xi, fd, strides, dil, padding, fmt), d)],
                         dict(attrs, dilations=dil), **tol(d, 16))
            elif op in ("Conv2DBackpropInput", "DepthwiseConv2DBackpropInput"):
                dw = op.startswith("Depthwise")
                filt = fd if dw else f
                fwd = conv.depthwise_ref(xi, filt, strides, dil, padding, fmt) if dw else \
                    conv.conv_ref(xi, filt, strides, dil, padding, fmt)
                dy = edge_image(d, fwd.shape if fmt == "NHWC" else (fwd.shape[0], fwd.shape[2], fwd.shape[3],
                                                                    fwd.shape[1]), seed=3)
                if fmt == "NCHW":
                    dy = dense(dy.transpose(0, 3, 1, 2))
                want = nn_grad.conv_input_grad(xi.shape, filt, dy, strides, dil, padding, fmt, dw)
                for ts in choices(binding, "Tshape", ("i32", "i64")):
                    edge.add(op, dict(binding, Tshape=ts), tag, [np.array(xi.shape, NUMPY_DTYPE[ts]), filt, dy],
                             [out_float(want, d)], dict(attrs, dilations=dil), **tol(d, 16))
            elif op in ("Conv2DBackpropFilter", "DepthwiseConv2DBackpropFilter"):
                dw = op.startswith("Depthwise")
                filt = fd if dw else f
                fwd = conv.depthwise_ref(xi, filt, strides, dil, padding, fmt) if dw else \
                    conv.conv_ref(xi, filt, strides, dil, padding, fmt)
                # dy small and exact; the edge values come from the input.
                dy = (((np.arange(fwd.size) * 3) % 5 - 2) * 0.5).reshape(fwd.shape).astype(storage(d))
                want = nn_grad.conv_filter_grad(xi, filt.shape, dy, strides, dil, padding, fmt, dw)
                for ts in choices(binding, "Tshape", ("i32", "i64")):
                    edge.add(op, dict(binding, Tshape=ts), tag, [xi, np.array(filt.shape, NUMPY_DTYPE[ts]), dy],
                             [out_float(want, d)], dict(attrs, dilations=dil), **tol(d, 16))
            elif op in ("MaxPool", "AvgPool"):
                ksize = [1, 2, 3, 1] if fmt == "NHWC" else [1, 1, 2, 3]
                kind = "max" if op == "MaxPool" else "avg"
                edge.add(op, binding, tag, [xi], [out_float(conv.pool_ref(xi, ksize, strides, padding, fmt, kind), d)],
                         dict(attrs, ksize=ksize), signed_zeros=op == "MaxPool", **tol(d, 4))
            elif op in ("MaxPoolGrad", "AvgPoolGrad"):
                ksize = [1, 2, 3, 1] if fmt == "NHWC" else [1, 1, 2, 3]
                kind = "max" if op == "MaxPoolGrad" else "avg"
                y = conv.pool_ref(xi, ksize, strides, padding, fmt, kind)
                dy = (((np.arange(y.size) * 3) % 5 - 2) * 0.5).reshape(y.shape).astype(storage(d))
                if kind == "max":
                    want = nn_grad.pool_grad(xi, dy, ksize, strides, padding, fmt, "max")
                    edge.add(op, binding, tag, [xi, y.astype(storage(d)), dy], [out_float(want, d)],
                             dict(attrs, ksize=ksize), **tol(d, 4))
                else:
                    dye = edge_image(d, y.shape if fmt == "NHWC" else (y.shape[0], y.shape[2], y.shape[3], y.shape[1]),
                                     seed=2)
                    if fmt == "NCHW":
                        dye = dense(dye.transpose(0, 3, 1, 2))
                    want = nn_grad.pool_grad(xi.shape, dye, ksize, strides, padding, fmt, "avg")
                    for ts in choices(binding, "Tshape", ("i32", "i64")):
                        edge.add(op, dict(binding, Tshape=ts), tag, [np.array(xi.shape, NUMPY_DTYPE[ts]), dye],
                                 [out_float(want, d)], dict(attrs, ksize=ksize), **tol(d, 4))
            else:
                raise KeyError(op)


# --- softmax, losses, normalisation, cells --------------------------------------------

def gen_softmax(edge, op, binding):
    d = binding["T"]
    rows = edge_rows("Max", d)
    log = op == "LogSoftmax"
    for axis in (-1, 0):
        edge.add(op, binding, f"rows_axis{axis}", [rows], [out_float(reduction_nn.softmax_ref(rows, axis, log), d)],
                 {"axis": axis}, **tol(d, 8))
    edge.add(op, binding, "empty", [np.zeros((0, 3), storage(d))], [np.zeros((0, 3), storage(d))])
    edge.add(op, binding, "rank8", [rows.reshape(-1)[:16].reshape(RANK_SHAPES[8])],
             [out_float(reduction_nn.softmax_ref(rows.reshape(-1)[:16].reshape(RANK_SHAPES[8]), -1, log), d)], **tol(d, 8))


def gen_xent(edge, op, binding):
    d = binding["T"]
    feats = edge_rows("Max", d)
    n = feats.shape[0]
    logp = reduction_nn.softmax_ref(feats, 1, True)
    p = np.exp(logp)
    if op == "SoftmaxCrossEntropyWithLogits":
        labels = np.tile(np.array([0.25, 0.25, 0.5, 0.0]), (n, 1)).astype(storage(d))
        loss = -np.sum(labels * logp, axis=1)
        edge.add(op, binding, "rows", [feats, labels], [out_float(loss, d), out_float(p - labels, d)], **tol(d, 8))
        edge.add(op, binding, "empty", [feats[:0], labels[:0]], [np.zeros(0, storage(d)), feats[:0]])
    else:
        tl = binding.get("Tlabels", "i64")
        labels = np.array([i % 4 for i in range(n)], NUMPY_DTYPE[tl])
        loss = -logp[np.arange(n), labels.astype(int)]
        grad = p.copy()
        grad[np.arange(n), labels.astype(int)] -= 1
        b = dict(binding, Tlabels=tl)
        edge.add(op, b, "rows", [feats, labels], [out_float(loss, d), out_float(grad, d)], **tol(d, 8))
        edge.add(op, b, "bad_label", [feats, np.full(n, 4, NUMPY_DTYPE[tl])], error="label 4 of row 0 is out of range [0, 4)")


def gen_norm(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    n = len(e)
    s = storage(d)
    if op in ("FusedBatchNorm", "FusedBatchNormGrad"):
        x = one_edge_per_row(d, n, 3).T.copy()   # [3, n]: channel c holds edge value c once
        x = dense(x)
        scale = np.full(n, 1.5, s)
        offset = np.full(n, -0.5, s)
        mean_in = np.full(n, 0.25, s)
        var_in = np.full(n, 2.0, s)
        eps = 0.001
        for training in (True, False):
            xf = x.astype(np.float64)
            if training:
                m, v = xf.mean(0), xf.var(0)
                uv = xf.var(0, ddof=1)
            else:
                m, v, uv = mean_in.astype(np.float64), var_in.astype(np.float64), var_in.astype(np.float64)
            if op == "FusedBatchNorm":
                y = (xf - m) / np.sqrt(v + eps) * scale + offset
                edge.add(op, binding, f"train{int(training)}", [x, scale, offset, mean_in, var_in],
                         [out_float(y, d), out_float(m, d), out_float(uv, d)],
                         {"epsilon": eps, "is_training": training}, **tol(d, 16))
            else:
                dy = (((np.arange(x.size) * 3) % 5 - 2) * 0.5).reshape(x.shape).astype(s)
                dx, dscale, doffset = nn_grad.batch_norm_grad_ref(dy, x, scale, mean_in, var_in, eps, training, 1)
                edge.add(op, binding, f"train{int(training)}", [dy, x, scale, mean_in, var_in],
                         [out_float(dx, d), out_float(dscale, d), out_float(doffset, d)],
                         {"epsilon": eps, "is_training": training}, **tol(d, 16))
    else:
        x = one_edge_per_row(d, n, 4)
        gamma = np.array([1.0, -2.0, 0.5, 1.5], s)
        beta = np.array([0.0, 1.0, -1.0, 0.5], s)
        eps = 1e-5
        xf = x.astype(np.float64)
        mean = xf.mean(1, keepdims=True)
        var = xf.var(1, keepdims=True)
        if op == "LayerNorm":
            y = (xf - mean) / np.sqrt(var + eps) * gamma + beta
            edge.add(op, binding, "rows", [x, gamma, beta], [out_float(y, d)], {"epsilon": eps}, **tol(d, 16))
            edge.add(op, binding, "empty", [x[:0], gamma, beta], [x[:0]], {"epsilon": eps})
        else:
            dy = (((np.arange(x.size) * 3) % 5 - 2) * 0.5).reshape(x.shape).astype(s)
            dx, dgamma, dbeta = nn_grad.layer_norm_grad_ref(dy, x, gamma, eps, 1)
            edge.add(op, binding, "rows", [dy, x, gamma], [out_float(dx, d), out_float(dgamma, d),
                                                           out_float(dbeta, d)], {"epsilon": eps}, **tol(d, 16))


def gen_lstm(edge, op, binding):
    d = binding["T"]
    s = storage(d)
    n = len(edges(d))
    hidden, inp = 2, 3
    x = one_edge_per_row(d, n, inp)
    c_prev = np.full((n, hidden), 0.5, s)
    h_prev = np.full((n, hidden), -0.25, s)
    w = (((np.arange((inp + hidden) * 4 * hidden) * 3) % 7 - 3) * 0.125).reshape(inp + hidden, 4 * hidden).astype(s)
    b = np.zeros(4 * hidden, s)
    c, h, gates = rnn.cell(x, c_prev, h_prev, w, b, 1.0)
    if op == "LSTMCell":
        edge.add(op, binding, "edge_rows", [x, c_prev, h_prev, w, b], [out_float(c, d), out_float(h, d),
                                                                        out_float(gates, d)],
                 {"forget_bias": 1.0}, **tol(d, 16))
    else:
        dc = np.full((n, hidden), 0.5, s)
        dh = np.full((n, hidden), 1.0, s)
        # Edge values through the forward outputs, as the gradient receives them.
        grads = rnn.cell_grad(x, c_prev, h_prev, w, c.astype(s), gates.astype(s), dc, dh)
        edge.add(op, binding, "edge_rows", [x, c_prev, h_prev, w, c.astype(s), gates.astype(s), dc, dh],
                 [out_float(gv, d) for gv in grads], **tol(d, 16))


# --- shape helpers of gradients -------------------------------------------------------

def gen_shape_helpers(edge, op, binding):
    if op == "ConcatOffset":
        t = NUMPY_DTYPE[binding["Tshape"]]
        shapes = [np.array([2, 3, 5], t), np.array([2, 0, 5], t), np.array([2, 4, 5], t)]
        offs = [np.array([0, 0, 0], t), np.array([0, 3, 0], t), np.array([0, 3, 0], t)]
        edge.add(op, dict(binding, N=3), "three", [np.array(1, np.int32)] + shapes, offs)
        edge.add(op, dict(binding, N=1), "scalar_shapes", [np.array(0, np.int32), np.zeros(0, t)], error="is out of range for rank 0")
        return
    d = binding["T"]
    s = storage(d)
    if op == "SumToShape":
        ti = binding.get("Tidx", "i32")
        b = dict(binding, Tidx=ti)
        x = edge_rows("Sum", d)
        for layout, shape in [("rows", [x.shape[0], 1]), ("columns", [x.shape[1]]), ("same", list(x.shape)),
                              ("scalar", [])]:
            if shape == [x.shape[1]]:
                want = reduce_ref("Sum", x, d, [0], False)
            elif shape == list(x.shape):
                want = x
            elif shape == []:
                want = reduce_ref("Sum", x, d, [], False)
            else:
                want = reduce_ref("Sum", x, d, [1], True)
            edge.add(op, b, layout, [x, np.array(shape, NUMPY_DTYPE[ti])], [want], **tol(d, 4))
        edge.add(op, b, "empty", [np.zeros((0, 3), s), np.array([3], NUMPY_DTYPE[ti])], [np.zeros(3, s)])
        edge.add(op, b, "not_a_broadcast", [x, np.array([5], NUMPY_DTYPE[ti])], error="is not a broadcast of [5]")
    elif op == "StridedSliceGrad":
        for ti in choices(binding, "Index", ("i32", "i64")):
            strided_slice_grad(edge, op, dict(binding, Index=ti), d, s)
    else:
        raise KeyError(op)


def strided_slice_grad(edge, op, binding, d, s):
    if True:
        ti = binding["Index"]
        t = NUMPY_DTYPE[ti]
        dy = arr(edges(d)[:4], d, (2, 2)) if d != "bool" else np.array([[True, False], [True, True]])
        shape, begin, end, strides = [3, 5], [0, 4], [3, 0], [2, -2]
        want = np.zeros(shape, s)
        want[0:3:2, 4:0:-2] = dy
        add_move(edge, op, binding, "step2", [np.array(v, t) for v in (shape, begin, end, strides)] + [dy], [want])
        imin = -(2 ** 63) if ti == "i64" else -(2 ** 31)
        dy1 = dy[:1, :1].reshape(1, 1)
        want = np.zeros(shape, s)
        want[2:3, 0:1] = dy1
        edge.add(op, binding, "min_stride", [np.array(v, t) for v in ([3, 5], [2, 0], [imin, 1], [imin, 1])] + [dy1],
                 [want], signed_zeros=True)
        edge.add(op, binding, "empty", [np.array(v, t) for v in ([0, 5], [0, 0], [0, 5], [1, 1])] + [
            np.zeros((0, 5), s)], [np.zeros((0, 5), s)])


# --- the families ---------------------------------------------------------------------

FAMILIES = {}
for _op in list(UNARY) + list(PREDICATES) + ["LogicalNot", "Gelu"]:
    FAMILIES[_op] = gen_unary
for _op in list(BINARY) + list(COMPARE) + list(LOGICAL):
    FAMILIES[_op] = gen_binary
for _op in list(GRADS) + ["GeluGrad", "SoftplusGrad"]:
    FAMILIES[_op] = gen_grad
for _op in ("Sum", "Mean", "Prod", "Max", "Min"):
    FAMILIES[_op] = gen_reduce
FAMILIES.update({"ArgMax": gen_arg, "ArgMin": gen_arg, "All": gen_logical_reduce, "Any": gen_logical_reduce,
                 "Cumsum": gen_scan, "Cumprod": gen_scan, "Cast": gen_cast, "MatMul": gen_matmul,
                 "BatchMatMul": gen_matmul, "BiasAdd": gen_bias, "BiasAddGrad": gen_bias, "AddN": gen_addn,
                 "ClipByValue": gen_clip, "Range": gen_range, "Softmax": gen_softmax, "LogSoftmax": gen_softmax,
                 "SoftmaxCrossEntropyWithLogits": gen_xent, "SparseSoftmaxCrossEntropyWithLogits": gen_xent,
                 "FusedBatchNorm": gen_norm, "FusedBatchNormGrad": gen_norm, "LayerNorm": gen_norm,
                 "LayerNormGrad": gen_norm, "LSTMCell": gen_lstm, "LSTMCellGrad": gen_lstm,
                 "ConcatOffset": gen_shape_helpers, "SumToShape": gen_shape_helpers,
                 "StridedSliceGrad": gen_shape_helpers})
for _op in ("Identity", "StopGradient", "ZerosLike", "OnesLike", "Shape", "Size", "Rank", "Reshape", "ExpandDims",
            "Squeeze", "Transpose", "Reverse", "Tile", "Pad", "Slice", "StridedSlice", "Concat", "Pack", "Split",
            "BroadcastTo", "Fill", "Select"):
    FAMILIES[_op] = gen_movement
for _op in ("Gather", "GatherNd", "ScatterNd", "UnsortedSegmentSum", "DynamicPartition", "DynamicStitch", "Unique",
            "OneHot", "InvertPermutation"):
    FAMILIES[_op] = gen_indexing
for _op in ("GatherElements", "ScatterElements", "TopK", "NonZero"):
    FAMILIES[_op] = gen_elements
for _op in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2D",
            "DepthwiseConv2DBackpropInput", "DepthwiseConv2DBackpropFilter", "MaxPool", "AvgPool", "MaxPoolGrad",
            "AvgPoolGrad"):
    FAMILIES[_op] = gen_window

# Ops a one-op graph of constants cannot exercise on its own, and where
# their edges are tested instead.
EXEMPT = {
    "Const": "every case's inputs are Const nodes of the edge values (static and poisoned runs)",
    "Placeholder": "every case's inputs are placeholders in the unknown-shape run",
    "NoOp": "has no inputs or outputs (session_test runs it as a target)",
    "RandomUniform": "values NumPy cannot predict; random_test.cc checks empty and huge shapes and the distribution",
    "RandomNormal": "as RandomUniform", "TruncatedNormal": "as RandomUniform",
    "RandomShuffle": "random order; random_test.cc",
}
for _op in ("VarHandle", "ReadVariable", "Assign", "AssignAdd", "AssignSub", "ResourceGather", "ResourceScatterAdd",
            "VarIsInitialized", "ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdam",
            "ResourceApplyAdamW", "ResourceApplyRMSProp", "ResourceApplyCenteredRMSProp", "ResourceApplyAdagrad"):
    EXEMPT[_op] = "reads or writes a variable, which a one-op graph does not have (variable_test, apply_ops_test)"
for _op in ("Save", "SaveShard", "Restore"):
    EXEMPT[_op] = "writes or reads files (checkpoint_ops_test, checkpoint_fault_test)"
for _op in ("FIFOQueue", "RandomShuffleQueue", "QueueEnqueueMany", "QueueDequeueMany", "QueueClose", "QueueSize",
            "Stack", "StackPush", "StackPop"):
    EXEMPT[_op] = "needs a queue or stack resource made by another node (queue_test, stack_test)"
for _op in ("GradientAccumulator", "AccumulatorApplyGradient", "AccumulatorTakeGradient", "AccumulatorSetGlobalStep",
            "StepTokenQueue", "StepTokenPut", "StepTokenTake", "StepTokenClose"):
    EXEMPT[_op] = "synchronous training: needs an accumulator or token resource and other steps (sync_ops_test)"
for _op in ("CollectiveAllReduce", "CollectiveBroadcast", "CollectiveAllGather"):
    EXEMPT[_op] = "needs a collective group of several ranks (collectives_test)"
for _op in ("Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"):
    EXEMPT[_op] = "control flow: needs a frame (loop_executor_test, control_flow_test)"


def main():
    kernels_file, out_dir = sys.argv[1], sys.argv[2]
    with open(kernels_file, "rb") as f:
        ops = {op["name"]: op for op in tomllib.load(f)["op"]}
    g = open_generator(out_dir)
    edge = Edge(g, ops)
    unknown = []
    for name, op in sorted(ops.items()):
        if name.startswith("_") or (not op["bindings"] and not op["runtime"]):
            continue  # the runtime's own (Send, Recv, Arg, Retval), or no CPU kernel
        if name in EXEMPT:
            edge.exempt[name] = EXEMPT[name]
            continue
        family = FAMILIES.get(name)
        if family is None:
            unknown.append(name)
            continue
        for text in op["bindings"] or [""]:
            binding = parse_binding(text)
            if "string" in binding.values() or "resource" in binding.values():
                edge.skipped.append((name, text, "strings and resources do not travel in .npy files; "
                                                 "string kernels are tested in their op's unit tests"))
                continue
            family(edge, name, binding)
    lines = list(g.lines)
    for name, reason in sorted(edge.exempt.items()):
        lines += ["[[exempt]]", f'op = "{name}"', f'reason = "{reason}"', ""]
    for name, text, reason in edge.skipped:
        lines += ["[[skipped]]", f'op = "{name}"', f'binding = "{text}"', f'reason = "{reason}"', ""]
    write_cases(out_dir, lines, "gen_edge_cases.py")
    print(f"gen_edge_cases: {len(g.names)} cases for {len(edge.covered)} ops; {len(edge.exempt)} ops exempt; "
          f"{len(edge.skipped)} bindings skipped", flush=True)
    if unknown:
        print("gen_edge_cases: no family generates cases for " + ", ".join(unknown), file=sys.stderr)


if __name__ == "__main__":
    main()
