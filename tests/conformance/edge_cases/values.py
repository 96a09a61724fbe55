"""The edge values of each dtype and what every family builds on: arrays
of them in the dtype's storage, the rounding of the references, the layouts
of an elementwise op's input, and Edge, which adds one case per op, binding
and layout."""
import warnings

import numpy as np

from gen_cases import NUMPY_DTYPE, TOLERANCE, to_bf16
from cases.ieee import round_bf16

FLOATS = ("f16", "bf16", "f32", "f64")
SIGNED = ("i8", "i16", "i32", "i64")
INTS = SIGNED + ("u8",)
NAN, INF = float("nan"), float("inf")

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
