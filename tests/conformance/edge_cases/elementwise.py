"""The elementwise families: unary ops (with IsNan, IsInf, LogicalNot and
Gelu), binary ops (arithmetic, comparisons, logical) and the gradients of
activations."""
import math

import numpy as np

from .values import FLOATS, arr, edges, int_range, native, objects, out_float, out_int, round_native, storage, \
    tiled, tol, unary_layouts

SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805


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
    "Tan": (f64_unary(np.tan), None, True, 4),
    "Asin": (f64_unary(np.arcsin), None, True, 4),
    "Acos": (f64_unary(np.arccos), None, False, 4),
    "Atan": (f64_unary(np.arctan), None, True, 4),
    "Sinh": (f64_unary(np.sinh), None, True, 4),
    "Cosh": (f64_unary(np.cosh), None, False, 4),
    "Tanh": (f64_unary(np.tanh), None, True, 4),
    "Asinh": (f64_unary(np.arcsinh), None, True, 4),
    "Acosh": (f64_unary(np.arccosh), None, False, 4),
    "Atanh": (f64_unary(np.arctanh), None, True, 4),
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
