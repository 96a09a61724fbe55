"""Unary and binary elementwise ops, Select, AddN, Cast and ClipByValue.

References are NumPy (or Python's math module for erf), computed in float64
and rounded to the case's dtype.
"""
import math
import zlib

import numpy as np

FLOATS = ["f32", "f64", "f16", "bf16"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32,
      "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8}


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def rng(seed):
    return np.random.default_rng(seed)


def cast_in(g, x, dtype):
    """Inputs exactly representable in |dtype| (bf16 rounded, kept as f32)."""
    if dtype == "bf16":
        return g.to_bf16(np.asarray(x, np.float32))
    return np.asarray(x, NP[dtype])


def expect(g, y, dtype):
    y = np.asarray(y, np.float64)
    with np.errstate(over="ignore"):  # overflow to inf is the expected result
        if dtype == "bf16":
            return g.to_bf16(y.astype(np.float32))
        return y.astype(NP[dtype])


def tol(g, dtype, scale=1.0):
    """The dtype's tolerance; |scale| widens it for f32/f64 results of
    transcendental functions (the 16-bit types already allow a unit in the
    last place, more than any libm error)."""
    rtol, atol = g.tolerance.get(dtype, (0, 0))
    if dtype in ("f16", "bf16"):
        scale = 1.0
    return {"rtol": rtol * scale, "atol": atol * scale}


UNARY = {
    # name: (reference, input generator, tolerance scale)
    "Neg": (lambda x: -x, lambda r, n: r.standard_normal(n) * 3, 1),
    "Abs": (np.abs, lambda r, n: r.standard_normal(n) * 3, 1),
    "Sign": (np.sign, lambda r, n: np.concatenate([r.standard_normal(n - 2), [0.0, 5.0]]), 1),
    "Exp": (np.exp, lambda r, n: r.uniform(-5, 5, n), 2),
    "Expm1": (np.expm1, lambda r, n: r.uniform(-2, 2, n) * 10.0 ** r.integers(-6, 1, n), 2),
    "Log": (np.log, lambda r, n: r.uniform(0.01, 50, n), 2),
    "Log1p": (np.log1p, lambda r, n: r.uniform(-0.5, 5, n) * 10.0 ** r.integers(-6, 1, n), 2),
    "Sqrt": (np.sqrt, lambda r, n: r.uniform(0, 100, n), 1),
    "Rsqrt": (lambda x: 1 / np.sqrt(x), lambda r, n: r.uniform(0.01, 100, n), 2),
    "Square": (np.square, lambda r, n: r.standard_normal(n) * 4, 1),
    "Reciprocal": (lambda x: 1 / x, lambda r, n: r.choice([-1, 1], n) * r.uniform(0.05, 20, n), 1),
    "Sin": (np.sin, lambda r, n: r.uniform(-10, 10, n), 2),
    "Cos": (np.cos, lambda r, n: r.uniform(-10, 10, n), 2),
    "Tan": (np.tan, lambda r, n: r.uniform(-1.2, 1.2, n), 2),
    "Asin": (np.arcsin, lambda r, n: r.uniform(-0.95, 0.95, n), 2),
    "Acos": (np.arccos, lambda r, n: r.uniform(-0.95, 0.95, n), 2),
    "Atan": (np.arctan, lambda r, n: r.uniform(-3, 3, n), 2),
    "Sinh": (np.sinh, lambda r, n: r.uniform(-3, 3, n), 2),
    "Cosh": (np.cosh, lambda r, n: r.uniform(-3, 3, n), 2),
    "Tanh": (np.tanh, lambda r, n: r.uniform(-6, 6, n), 2),
    "Asinh": (np.arcsinh, lambda r, n: r.uniform(-3, 3, n), 2),
    "Acosh": (np.arccosh, lambda r, n: r.uniform(1.05, 4, n), 2),
    "Atanh": (np.arctanh, lambda r, n: r.uniform(-0.95, 0.95, n), 2),
    "Sigmoid": (lambda x: 1 / (1 + np.exp(-x)), lambda r, n: np.concatenate([r.uniform(-10, 10, n - 2), [-100, 100]]), 2),
    "Relu": (lambda x: np.maximum(x, 0), lambda r, n: r.standard_normal(n), 1),
    "Relu6": (lambda x: np.minimum(np.maximum(x, 0), 6), lambda r, n: r.uniform(-3, 9, n), 1),
    "Elu": (lambda x: np.where(x > 0, x, np.expm1(x)), lambda r, n: r.uniform(-4, 4, n), 2),
    "Selu": (lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
             lambda r, n: r.uniform(-4, 4, n), 2),
    "Softplus": (lambda x: np.logaddexp(0, x), lambda r, n: np.concatenate([r.uniform(-10, 10, n - 2), [-50, 50]]), 2),
    "Erf": (erf, lambda r, n: r.uniform(-3, 3, n), 2),
    "Floor": (np.floor, lambda r, n: r.uniform(-10, 10, n), 1),
    "Ceil": (np.ceil, lambda r, n: r.uniform(-10, 10, n), 1),
    "Round": (np.rint, lambda r, n: np.concatenate([r.uniform(-10, 10, n - 6), [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]]), 1),
}

INT_UNARY = {
    "Neg": lambda x: -x,
    "Abs": np.abs,
    "Sign": np.sign,
    "Square": np.square,
    "Relu": lambda x: np.maximum(x, 0),
    "Relu6": lambda x: np.minimum(np.maximum(x, 0), 6),
}

BINARY = {
    "Add": np.add,
    "Sub": np.subtract,
    "Mul": np.multiply,
    "Div": np.divide,
    "RealDiv": np.divide,
    "FloorDiv": np.floor_divide,
    "FloorMod": np.mod,
    "Pow": np.power,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "SquaredDifference": lambda x, y: (x - y) ** 2,
}

COMPARE = {
    "Equal": np.equal, "NotEqual": np.not_equal, "Less": np.less, "LessEqual": np.less_equal,
    "Greater": np.greater, "GreaterEqual": np.greater_equal,
}


def trunc_div(a, b):
    """C integer division (truncates toward zero), from NumPy's floor division."""
    q = np.abs(a) // np.abs(b)
    return (q * np.sign(a) * np.sign(b)).astype(a.dtype)


def unary_cases(g):
    for op, (ref, gen, scale) in UNARY.items():
        for dtype in FLOATS:
            # A stable seed: Python's str hash changes from process to process.
            x = cast_in(g, gen(rng(zlib.crc32(op.encode())), 37), dtype)
            g.add(f"{op}/{dtype}", op, [x], {"T": dtype}, [expect(g, ref(x.astype(np.float64)), dtype)],
                  **tol(g, dtype, scale))
        x = np.float32([np.nan, np.inf, -np.inf])
        with np.errstate(all="ignore"):
            want = ref(x.astype(np.float64)).astype(np.float32)
        g.add(f"{op}/nan_inf", op, [x], {"T": "f32"}, [want], rtol=0, atol=0)
        g.add(f"{op}/empty", op, [np.zeros((0, 3), np.float32)], {"T": "f32"}, [np.zeros((0, 3), np.float32)])
        with np.errstate(invalid="ignore"):  # Acosh: 0.75 is outside its domain, NaN
            want = np.float64(ref(np.float64(0.75)))
        g.add(f"{op}/scalar", op, [np.float64(0.75)], {"T": "f64"}, [want], **tol(g, "f64", 2))
    for approximate in (False, True):
        for dtype in FLOATS:
            x = cast_in(g, rng(5).uniform(-5, 5, 33), dtype)
            xf = x.astype(np.float64)
            if approximate:
                want = 0.5 * xf * (1 + np.tanh(np.sqrt(2 / np.pi) * (xf + 0.044715 * xf ** 3)))
            else:
                want = 0.5 * xf * (1 + erf(xf / np.sqrt(2)))
            g.add(f"Gelu/{dtype}_{'tanh' if approximate else 'erf'}", "Gelu", [x], {"T": dtype, "approximate": approximate},
                  [expect(g, want, dtype)], **tol(g, dtype, 2))
    for op in ["IsNan", "IsInf"]:
        x = np.float32([0, 1.5, np.nan, np.inf, -np.inf, -2])
        ref = np.isnan if op == "IsNan" else np.isinf
        for dtype in FLOATS:
            g.add(f"{op}/{dtype}", op, [cast_in(g, x, dtype)], {"T": dtype}, [ref(x)])
    for op, ref in INT_UNARY.items():
        for dtype in ["i8", "i16", "i32", "i64"]:
            info = np.iinfo(NP[dtype])
            x = np.array([0, 1, -1, 5, -7, 6, 11, info.min, info.max], NP[dtype])
            with np.errstate(over="ignore"):
                want = ref(x).astype(NP[dtype])  # wraps, as documented
            g.add(f"{op}/{dtype}", op, [x], {"T": dtype}, [want])


def binary_cases(g):
    r = rng(7)
    shapes = {
        "same": ((3, 4), (3, 4)),
        "row": ((3, 4), (4,)),
        "column": ((3, 1), (1, 4)),
        "scalar_left": ((), (2, 3)),
        "scalar_right": ((2, 3), ()),
        "rank6": ((2, 1, 3, 1, 2, 2), (1, 2, 1, 2, 1, 2)),
        "empty": ((0, 4), (4,)),
        "empty_broadcast": ((3, 0), (3, 1)),
    }
    for op, ref in BINARY.items():
        for shape_name, (sa, sb) in shapes.items():
            for dtype in FLOATS:
                if dtype in ("f16", "bf16") and shape_name not in ("same", "row"):
                    continue
                a = cast_in(g, r.uniform(0.5, 3, sa), dtype)
                raw_b = r.uniform(0.5, 3, sb) * (1 if op != "Sub" else -1)
                if op in ("Div", "RealDiv", "FloorDiv", "FloorMod"):
                    raw_b = r.choice([-1, 1], sb) * r.uniform(0.5, 3, sb)
                if op == "Pow":
                    raw_b = r.uniform(-2, 2, sb)
                # Cast last: NumPy promotes 0-d float32 arithmetic with ints to float64.
                b = cast_in(g, raw_b, dtype)
                with np.errstate(all="ignore"):
                    want = ref(a.astype(np.float64), b.astype(np.float64))
                g.add(f"{op}/{shape_name}_{dtype}", op, [a, b], {"T": dtype}, [expect(g, want, dtype)],
                      **tol(g, dtype, 4))
        x = np.float32([np.nan, 1, np.inf, -np.inf, np.nan, 0])
        y = np.float32([1, np.nan, 2, np.inf, np.nan, 0])
        with np.errstate(all="ignore"):
            want = ref(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
        g.add(f"{op}/nan_inf", op, [x, y], {"T": "f32"}, [want], rtol=0, atol=0)
    # Integers: wrap-around and C vs floor division, by NumPy.
    for dtype in ["i8", "i16", "i32", "i64", "u8"]:
        t = NP[dtype]
        info = np.iinfo(t)
        a = np.array([7, -7, 7, -7, 0, info.max, info.min, 5, 1], t)
        b = np.array([2, 2, -2, -2, 3, 1, 1, 3, 1], t)
        if dtype == "u8":
            a, b = np.abs(a.astype(np.int64)).astype(t), np.abs(b.astype(np.int64)).astype(t)
        with np.errstate(over="ignore"):
            g.add(f"Add/wrap_{dtype}", "Add", [a, b], {"T": dtype}, [(a + b).astype(t)])
            g.add(f"Sub/wrap_{dtype}", "Sub", [a, b], {"T": dtype}, [(a - b).astype(t)])
            g.add(f"Mul/wrap_{dtype}", "Mul", [a, b], {"T": dtype}, [(a * b).astype(t)])
        g.add(f"Div/truncate_{dtype}", "Div", [a, b], {"T": dtype}, [trunc_div(a, b)])
        g.add(f"FloorDiv/{dtype}", "FloorDiv", [a, b], {"T": dtype}, [np.floor_divide(a, b)])
        g.add(f"FloorMod/{dtype}", "FloorMod", [a, b], {"T": dtype}, [np.mod(a, b)])
        g.add(f"Maximum/{dtype}", "Maximum", [a, b], {"T": dtype}, [np.maximum(a, b)])
        g.add(f"Minimum/{dtype}", "Minimum", [a, b], {"T": dtype}, [np.minimum(a, b)])
        g.add(f"Div/by_zero_{dtype}", "Div", [a[:2], np.array([1, 0], t)], {"T": dtype}, error="integer division by zero")
    for dtype in ["i32", "i64"]:
        t = NP[dtype]
        a = np.array([2, -3, 0, 7, 1, 3], t)
        b = np.array([3, 3, 5, 0, 64, 40], t)
        with np.errstate(over="ignore"):
            g.add(f"Pow/{dtype}", "Pow", [a, b], {"T": dtype}, [np.power(a, b).astype(t)])
        g.add(f"Pow/negative_exponent_{dtype}", "Pow", [a[:1], np.array([-1], t)], {"T": dtype},
              error="integers to negative integer powers are not allowed")
        g.add(f"SquaredDifference/{dtype}", "SquaredDifference", [a, b], {"T": dtype}, [((a - b) ** 2).astype(t)])
    # INT_MIN / -1 wraps to INT_MIN (hand-derived: the true quotient does not fit).
    g.add("Div/int_min_by_minus_one", "Div", [np.int32([-2**31]), np.int32([-1])], {"T": "i32"}, [np.int32([-2**31])])
    g.add("Add/incompatible_shapes", "Add", [np.zeros((2, 3), np.float32), np.zeros((4,), np.float32)], {"T": "f32"},
          error="cannot be broadcast together")


def compare_cases(g):
    r = rng(11)
    for op, ref in COMPARE.items():
        for dtype in ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8"]:
            if dtype.startswith(("i", "u")):
                a = r.integers(0, 4, (3, 4)).astype(NP[dtype])
                b = r.integers(0, 4, (4,)).astype(NP[dtype])
            else:
                a = cast_in(g, r.integers(0, 4, (3, 4)) / 2, dtype)
                b = cast_in(g, r.integers(0, 4, (4,)) / 2, dtype)
            g.add(f"{op}/{dtype}", op, [a, b], {"T": dtype}, [ref(a, b)])
        x = np.float32([np.nan, 1, np.nan, np.inf])
        y = np.float32([np.nan, np.nan, 1, np.inf])
        g.add(f"{op}/nan", op, [x, y], {"T": "f32"}, [ref(x, y)])
    for op in ["Equal", "NotEqual"]:
        a = np.array([True, False, True, False])
        b = np.array([True, True, False, False])
        g.add(f"{op}/bool", op, [a, b], {"T": "bool"}, [COMPARE[op](a, b)])
    a = np.array([[True, False], [True, True]])
    b = np.array([True, False])
    g.add("LogicalAnd/broadcast", "LogicalAnd", [a, b], {}, [np.logical_and(a, b)])
    g.add("LogicalOr/broadcast", "LogicalOr", [a, b], {}, [np.logical_or(a, b)])
    g.add("LogicalNot/basic", "LogicalNot", [a], {}, [np.logical_not(a)])
    g.add("LogicalNot/empty", "LogicalNot", [np.zeros((0,), np.bool_)], {}, [np.zeros((0,), np.bool_)])


def misc_cases(g):
    r = rng(13)
    c = r.integers(0, 2, (2, 3, 4)).astype(np.bool_)
    for dtype in ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8"]:
        t = cast_in(g, r.integers(-5, 5, (3, 4)), dtype)
        e = cast_in(g, r.integers(-5, 5, (4,)), dtype)
        g.add(f"Select/{dtype}", "Select", [c, t, e], {"T": dtype}, [np.where(c, t, e)])
    g.add("Select/bool", "Select", [c[0], c[1], c[0][0]], {"T": "bool"}, [np.where(c[0], c[1], c[0][0])])
    g.add("Select/scalar_condition", "Select", [np.bool_(False), np.float32([1, 2]), np.float32([3, 4])],
          {"T": "f32"}, [np.float32([3, 4])])
    for dtype in ["f32", "f64", "f16", "bf16", "i32", "i64", "u8"]:
        t = cast_in(g, r.integers(0, 10, (2, 5)), dtype)
        lo = cast_in(g, np.array(2), dtype)
        hi = cast_in(g, r.integers(5, 8, (5,)), dtype)
        g.add(f"ClipByValue/{dtype}", "ClipByValue", [t, lo, hi], {"T": dtype}, [np.minimum(np.maximum(t, lo), hi)])
    g.add("ClipByValue/nan", "ClipByValue", [np.float32([np.nan, -5, 5]), np.float32(0), np.float32(1)], {"T": "f32"},
          [np.float32([np.nan, 0, 1])])
    for dtype in ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8"]:
        xs = [cast_in(g, r.integers(0, 20, (2, 3)), dtype) for _ in range(4)]
        g.add(f"AddN/{dtype}", "AddN", xs, {"T": dtype},
              [expect(g, sum(x.astype(np.float64) for x in xs), dtype) if dtype in FLOATS
               else sum(x.astype(np.int64) for x in xs).astype(NP[dtype])], **tol(g, dtype))
    g.add("AddN/one_input", "AddN", [np.float32([1, 2])], {"T": "f32"}, [np.float32([1, 2])])
    g.add("AddN/shape_mismatch", "AddN", [np.float32([1, 2]), np.float32([1, 2, 3])], {"T": "f32"},
          error="AddN inputs must have one shape")
    cast_cases(g)


def cast_cases(g):
    values = np.array([0, 1, -1, 2.5, -2.5, 100.75, -100.75, 126, 127.9, 1e3], np.float64)
    kinds = ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "bool"]
    for src in kinds:
        for dst in kinds:
            if src in ("f32", "f64", "f16", "bf16"):
                x = cast_in(g, values, src)
                xf = x.astype(np.float64)
            elif src == "bool":
                x = np.array([True, False, True])
                xf = x.astype(np.float64)
            else:
                info = np.iinfo(NP[src])
                x = np.clip(np.array([0, 1, -1, 5, -100, 300, 40000, info.min, info.max], np.int64),
                            info.min, info.max).astype(NP[src])
                xf = x.astype(np.float64)
            if dst == "bool":
                want = xf != 0
            elif dst in ("f32", "f64", "f16", "bf16"):
                if src in ("i64",) and dst in ("f16", "bf16"):
                    continue  # int64 -> f16 rounds twice through f32; not a promise we make
                want = expect(g, x.astype(np.float64) if src != "bool" else xf, dst)
            elif src in ("f32", "f64", "f16", "bf16"):
                # Truncate toward zero, saturate (documented; NumPy's result is undefined there).
                info = np.iinfo(NP[dst])
                want = np.clip(np.trunc(xf), info.min, info.max).astype(NP[dst])
            else:
                want = x.astype(np.int64).astype(NP[dst])  # two's complement wrap
            g.add(f"Cast/{src}_to_{dst}", "Cast", [x], {"SrcT": src, "DstT": dst}, [want],
                  rtol=0, atol=0, output_dtypes=["bf16"] if dst == "bf16" else None)
    # NaN and infinities to integers: 0 and saturation, as documented.
    x = np.float32([np.nan, np.inf, -np.inf, 3.99, -3.99])
    g.add("Cast/nan_inf_to_i32", "Cast", [x], {"SrcT": "f32", "DstT": "i32"},
          [np.int32([0, 2**31 - 1, -2**31, 3, -3])])
    with np.errstate(over="ignore"):
        want = np.float32([65504, 65520, 1e-8, -1e6]).astype(np.float16)
    g.add("Cast/f32_to_f16_overflow", "Cast", [np.float32([65504, 65520, 1e-8, -1e6])], {"SrcT": "f32", "DstT": "f16"},
          [want], rtol=0, atol=0)


def cases(g):
    unary_cases(g)
    binary_cases(g)
    compare_cases(g)
    misc_cases(g)
