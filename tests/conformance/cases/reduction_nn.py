"""Reductions (Sum, Mean, Max, Min, Prod, All, Any, ArgMax, ArgMin) and the
normalisation, softmax and cross-entropy ops (FusedBatchNorm, LayerNorm,
Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits,
SparseSoftmaxCrossEntropyWithLogits).

References are NumPy computed in float64 from the (rounded) inputs, then
rounded to the case's dtype; integer references are exact (wrapping where
the ops document wrapping).
"""
import warnings

import numpy as np

FLOATS = ["f32", "f64", "f16", "bf16"]
INTS = ["i8", "i16", "i32", "i64", "u8"]
NUMERIC = FLOATS + INTS
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32,
      "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8}


def rng(seed):
    return np.random.default_rng(seed)


def cast_in(g, x, dtype):
    """Inputs exactly representable in |dtype| (bf16 rounded, kept as f32)."""
    if dtype == "bf16":
        return g.to_bf16(np.asarray(x, np.float32))
    return np.asarray(x, NP[dtype])


def expect(g, y, dtype):
    y = np.asarray(y, np.float64)
    if dtype == "bf16":
        return g.to_bf16(y.astype(np.float32))
    return y.astype(NP[dtype])


def tol(g, dtype, scale=1.0):
    rtol, atol = g.tolerance.get(dtype, (0, 0))
    return {"rtol": rtol * scale, "atol": atol * scale}


def np_axis(axis):
    """The op's axis attr as NumPy's axis: [] is every axis."""
    return None if len(axis) == 0 else tuple(axis)


def reduced_count(shape, axis):
    if len(axis) == 0:
        return int(np.prod(shape, dtype=np.int64))
    return int(np.prod([shape[a] for a in axis], dtype=np.int64))


# --- Sum, Mean, Max, Min, Prod ----------------------------------------------------

def int_reference(op, x, axis, keep):
    """Exact integer results: Sum and Prod wrap, Mean truncates toward zero."""
    t = x.dtype
    ax = np_axis(axis)
    if op == "Sum":
        return np.sum(x.astype(np.int64), axis=ax, keepdims=keep).astype(t)  # int64 wraps, then narrows
    if op == "Prod":
        return np.prod(x.astype(np.int64), axis=ax, keepdims=keep).astype(t)
    if op == "Mean":
        total = np.sum(x.astype(object), axis=ax, keepdims=keep)  # Python ints: exact
        n = reduced_count(x.shape, axis)
        trunc = np.vectorize(lambda v: abs(v) // n * (1 if v >= 0 else -1), otypes=[object])
        return np.asarray(trunc(total)).astype(t)
    return (np.max if op == "Max" else np.min)(x, axis=ax, keepdims=keep)


def float_reference(op, x, axis, keep):
    fn = {"Sum": np.sum, "Mean": np.mean, "Max": np.max, "Min": np.min, "Prod": np.prod}[op]
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an empty slice is NaN, as documented
        return fn(np.asarray(x, np.float64), axis=np_axis(axis), keepdims=keep)


def reduce_input(g, op, dtype, shape, seed):
    r = rng(seed)
    if dtype in INTS:
        lo = 0 if dtype == "u8" else -6
        return r.integers(lo, 7, shape).astype(NP[dtype])
    if op == "Prod":
        x = r.uniform(0.6, 1.6, shape) * r.choice([-1, 1], shape)
    else:
        x = r.standard_normal(shape) * 3
    return cast_in(g, x, dtype)


def add_reduce(g, name, op, x, dtype, axis, keep=False, scale=1.0):
    """A case of |op| over |axis| whose reference NumPy computes."""
    attrs = {"T": dtype, "axis": list(axis), "keep_dims": keep}
    if dtype in INTS:
        g.add(name, op, [x], attrs, [int_reference(op, x, axis, keep)])
        return
    want = expect(g, float_reference(op, x, axis, keep), dtype)
    exact = op in ("Max", "Min")  # picks an input element: no rounding
    g.add(name, op, [x], attrs, [want], **({"rtol": 0, "atol": 0} if exact else tol(g, dtype, scale)))


AXES_3D = {
    "all": [],
    "axis0": [0],
    "axis1": [1],
    "axis2": [2],
    "neg1": [-1],
    "leading": [0, 1],
    "trailing": [1, 2],
    "outer_pair": [0, 2],
    "every_listed": [2, 0, 1],
}


def reduce_cases(g):
    for op_index, op in enumerate(["Sum", "Mean", "Max", "Min", "Prod"]):
        for dtype_index, dtype in enumerate(NUMERIC):
            x = reduce_input(g, op, dtype, (3, 4, 5), 100 * op_index + dtype_index)
            for axis_name, axis in AXES_3D.items():
                add_reduce(g, f"{op}/{dtype}_{axis_name}", op, x, dtype, axis)
            add_reduce(g, f"{op}/{dtype}_keep_dims", op, x, dtype, [0, -1], keep=True)
            add_reduce(g, f"{op}/{dtype}_keep_dims_all", op, x, dtype, [], keep=True)
        # Rank 0: nothing to reduce, whatever keep_dims says.
        for dtype in ["f32", "i32"]:
            x = cast_in(g, np.array(-3.0), dtype)
            add_reduce(g, f"{op}/scalar_{dtype}", op, x, dtype, [])
            add_reduce(g, f"{op}/scalar_keep_{dtype}", op, x, dtype, [], keep=True)
        g.add(f"{op}/scalar_axis_out_of_range", op, [np.float32(1)], {"T": "f32", "axis": [0]},
              error="is out of range")
        # Rank 6: axis sets that leave several reduced runs (the general path).
        for dtype in ["f32", "f64", "i32"]:
            x = reduce_input(g, op, dtype, (2, 3, 1, 2, 4, 3), 61)
            for axis_name, axis in {"alternate": [0, 2, 4], "odd": [1, 3, 5], "ends": [-1, -6],
                                    "middle": [1, 2, 3, 4], "size1_axis": [2]}.items():
                add_reduce(g, f"{op}/rank6_{dtype}_{axis_name}", op, x, dtype, axis)
            add_reduce(g, f"{op}/rank6_{dtype}_keep", op, x, dtype, [0, 3, 4], keep=True)
        # Repeated and out-of-range axes.
        x = np.zeros((2, 3), np.float32)
        g.add(f"{op}/repeated_axis", op, [x], {"T": "f32", "axis": [1, -1]}, error="is repeated")
        g.add(f"{op}/axis_out_of_range", op, [x], {"T": "f32", "axis": [2]}, error="is out of range")
        g.add(f"{op}/negative_axis_out_of_range", op, [x], {"T": "f32", "axis": [-3]}, error="is out of range")
    empty_cases(g)
    nan_cases(g)
    wrap_cases(g)
    long_cases(g)


def empty_cases(g):
    for op in ["Sum", "Mean", "Prod", "Max", "Min"]:
        for dtype in ["f32", "i32", "bf16"]:
            x = cast_in(g, np.zeros((0, 3)), dtype)
            # Reducing the non-empty axis of an empty tensor: an empty result.
            add_reduce(g, f"{op}/empty_{dtype}_kept_empty", op, x, dtype, [1])
            for axis_name, axis in {"axis0": [0], "all": [], "all_keep": []}.items():
                keep = axis_name == "all_keep"
                name = f"{op}/empty_{dtype}_{axis_name}"
                if op in ("Max", "Min"):
                    g.add(name, op, [x], {"T": dtype, "axis": axis, "keep_dims": keep},
                          error=f"{op} of an empty set has no identity")
                elif op == "Mean" and dtype == "i32":
                    g.add(name, op, [x], {"T": dtype, "axis": axis, "keep_dims": keep},
                          error="Mean of an empty set is undefined for integers")
                else:
                    add_reduce(g, name, op, x, dtype, axis, keep)  # 0, NaN (Mean) or 1
        # NumPy refuses an empty reduced axis even when the output is empty.
        if op in ("Max", "Min"):
            g.add(f"{op}/empty_both", op, [np.zeros((0, 0), np.float32)], {"T": "f32", "axis": [0]},
                  error="has no identity")
        else:
            add_reduce(g, f"{op}/empty_both", op, np.zeros((0, 0), np.float32), "f32", [0])
    for op, ref in [("All", np.all), ("Any", np.any)]:
        x = np.zeros((0, 3), np.bool_)
        for axis_name, axis in {"axis0": [0], "axis1": [1], "all": []}.items():
            g.add(f"{op}/empty_{axis_name}", op, [x], {"axis": axis}, [ref(x, axis=np_axis(axis))])


def nan_cases(g):
    x = np.array([[1, np.nan, 3, -2], [4, 5, -np.inf, 0], [np.nan, np.nan, 1, 2]], np.float64)
    for op in ["Sum", "Mean", "Max", "Min", "Prod"]:
        for dtype in FLOATS:
            xd = cast_in(g, x, dtype)
            for axis_name, axis in {"rows": [1], "columns": [0], "all": []}.items():
                name = f"{op}/nan_{dtype}_{axis_name}"
                with np.errstate(invalid="ignore"):
                    want = expect(g, float_reference(op, xd, axis, False), dtype)
                g.add(name, op, [xd], {"T": dtype, "axis": axis}, [want], rtol=0, atol=0)
    # Inf but no NaN: Max/Min see the infinities.
    x = np.float32([[np.inf, 1, -np.inf], [-np.inf, -np.inf, -np.inf]])
    g.add("Max/inf", "Max", [x], {"T": "f32", "axis": [1]}, [np.max(x, axis=1)], rtol=0, atol=0)
    g.add("Min/inf", "Min", [x], {"T": "f32", "axis": [1]}, [np.min(x, axis=1)], rtol=0, atol=0)


def wrap_cases(g):
    for dtype in INTS:
        t = NP[dtype]
        info = np.iinfo(t)
        x = np.array([[info.max, info.max, 1, 3], [info.min, info.min, info.min, 5], [info.max, 0, 2, 1]], t)
        if dtype == "u8":
            x = np.array([[255, 255, 1, 3], [200, 100, 7, 5], [250, 0, 2, 1]], t)
        for axis_name, axis in {"rows": [1], "columns": [0], "all": []}.items():
            add_reduce(g, f"Sum/wrap_{dtype}_{axis_name}", "Sum", x, dtype, axis)
            add_reduce(g, f"Prod/wrap_{dtype}_{axis_name}", "Prod", x, dtype, axis)
            add_reduce(g, f"Mean/exact_{dtype}_{axis_name}", "Mean", x, dtype, axis)  # no wrap: the true mean
            add_reduce(g, f"Max/limits_{dtype}_{axis_name}", "Max", x, dtype, axis)
            add_reduce(g, f"Min/limits_{dtype}_{axis_name}", "Min", x, dtype, axis)
    # Mean truncates toward zero: -7/2 = -3, 7/2 = 3, -1/3 = 0.
    x = np.int32([[-7, 0, 0], [7, 0, 0], [-1, 0, 0], [-2, 1, 0]])
    g.add("Mean/truncates_toward_zero", "Mean", [x[:, :2]], {"T": "i32", "axis": [1]}, [np.int32([-3, 3, 0, 0])])
    g.add("Mean/truncates_toward_zero_3", "Mean", [x], {"T": "i32", "axis": [1]}, [np.int32([-2, 2, 0, 0])])


def long_cases(g):
    """Long reductions: accuracy, and rows or columns split across tasks."""
    r = rng(99)
    # One million f32 values with a large mean: a naive float sum is off by ~1e-3 relative.
    x = r.uniform(0, 1, 1_000_000).astype(np.float32)
    add_reduce(g, "Sum/f32_long", "Sum", x, "f32", [])
    x = x[:300_000]
    add_reduce(g, "Mean/f32_long", "Mean", x, "f32", [])
    x = x[:200_000]
    add_reduce(g, "Max/f32_long", "Max", x, "f32", [])
    g.add("ArgMax/f32_long", "ArgMax", [x], {"T": "f32", "axis": 0}, [np.argmax(x).astype(np.int64)])
    g.add("ArgMin/f32_long", "ArgMin", [x], {"T": "f32", "axis": 0, "output_type": "i32"},
          [np.int32(np.argmin(x))])
    # Few long rows (each split across tasks).
    x = r.uniform(-1, 2, (3, 70_000)).astype(np.float32)
    add_reduce(g, "Sum/f32_few_long_rows", "Sum", x, "f32", [1], scale=2)
    add_reduce(g, "Max/f32_few_long_rows", "Max", x, "f32", [1])
    g.add("ArgMin/f32_few_long_rows", "ArgMin", [x], {"T": "f32", "axis": 1}, [np.argmin(x, axis=1).astype(np.int64)])
    xi = r.integers(-100, 100, (3, 70_000)).astype(np.int32)
    add_reduce(g, "Sum/i32_few_long_rows", "Sum", xi, "i32", [1])
    # Few long columns (leading axis reduced, split across tasks) and wide
    # rows (several column blocks).
    x = r.uniform(-1, 2, (60_000, 3)).astype(np.float32)
    add_reduce(g, "Sum/f32_long_columns", "Sum", x, "f32", [0], scale=2)
    add_reduce(g, "Min/f32_long_columns", "Min", x, "f32", [0])
    x = r.uniform(-1, 2, (300, 600)).astype(np.float32)
    for op in ["Sum", "Mean", "Max"]:
        add_reduce(g, f"{op}/f32_wide_columns", op, x, "f32", [0], scale=2)
    x = r.uniform(-1, 2, (2, 150, 300))
    for op in ["Sum", "Max"]:
        add_reduce(g, f"{op}/f64_middle_axis", op, x, "f64", [1], scale=4)
    x = r.uniform(-1, 2, (3, 400, 17, 5)).astype(np.float32)
    add_reduce(g, "Sum/f32_general_long", "Sum", x, "f32", [1, 3], scale=4)
    # 16-bit floats accumulate in float.
    for dtype in ["f16", "bf16"]:
        x = cast_in(g, r.uniform(0, 1, 20_000), dtype)
        add_reduce(g, f"Sum/{dtype}_long", "Sum", x, dtype, [])
        add_reduce(g, f"Mean/{dtype}_long", "Mean", x, dtype, [])
        x2 = cast_in(g, r.uniform(0, 1, (20_000, 3)), dtype)
        add_reduce(g, f"Sum/{dtype}_long_columns", "Sum", x2, dtype, [0])


# --- All, Any ---------------------------------------------------------------------

def logical_cases(g):
    r = rng(31)
    x = r.uniform(0, 1, (3, 4, 5)) < 0.8  # a mix of all-true and mixed slices
    x[1, :, :] = True
    x[2, 2, :] = False
    for op, ref in [("All", np.all), ("Any", np.any)]:
        for axis_name, axis in AXES_3D.items():
            g.add(f"{op}/{axis_name}", op, [x], {"axis": axis}, [ref(x, axis=np_axis(axis))])
        g.add(f"{op}/keep_dims", op, [x], {"axis": [1], "keep_dims": True}, [ref(x, axis=1, keepdims=True)])
        g.add(f"{op}/scalar", op, [np.bool_(True)], {"axis": []}, [ref(np.bool_(True))])
        x6 = r.uniform(0, 1, (2, 3, 2, 1, 3, 2)) < 0.5
        g.add(f"{op}/rank6", op, [x6], {"axis": [0, 2, 4]}, [ref(x6, axis=(0, 2, 4))])
        long = np.ones(100_000, np.bool_) if op == "All" else np.zeros(100_000, np.bool_)
        long[77_777] = not long[77_777]
        g.add(f"{op}/long", op, [long], {"axis": [0]}, [ref(long)])
        g.add(f"{op}/repeated_axis", op, [x], {"axis": [0, 0]}, error="is repeated")


# --- ArgMax, ArgMin ---------------------------------------------------------------

def arg_cases(g):
    r = rng(41)
    for op, ref in [("ArgMax", np.argmax), ("ArgMin", np.argmin)]:
        for dtype in NUMERIC:
            # Few distinct values: many ties, which go to the first index.
            raw = r.integers(0, 4, (3, 4, 5))
            x = raw.astype(NP[dtype]) if dtype in INTS else cast_in(g, raw * 0.5 - 1, dtype)
            for out in ["i32", "i64"]:
                for axis in [0, 1, 2, -1]:
                    g.add(f"{op}/{dtype}_{out}_axis{axis}", op, [x], {"T": dtype, "axis": axis, "output_type": out},
                          [ref(x, axis=axis).astype(NP[out])])
        x = np.float32([[1, np.nan, 5, np.nan], [3, 3, 1, 1], [-np.inf, -np.inf, np.inf, np.inf],
                        [np.nan, 0, 0, 0]])
        for dtype in FLOATS:
            xd = cast_in(g, x, dtype)
            g.add(f"{op}/nan_ties_{dtype}", op, [xd], {"T": dtype, "axis": 1}, [ref(xd, axis=1).astype(np.int64)])
            g.add(f"{op}/nan_ties_columns_{dtype}", op, [xd.T.copy()], {"T": dtype, "axis": 0},
                  [ref(xd.T, axis=0).astype(np.int64)])
        x = cast_in(g, r.integers(0, 5, (2, 3, 2, 1, 3, 2)), "f32")
        for axis in [0, 3, 4, -1]:
            g.add(f"{op}/rank6_axis{axis}", op, [x], {"T": "f32", "axis": axis}, [ref(x, axis=axis).astype(np.int64)])
        x = r.standard_normal((7, 600)).astype(np.float64)  # several column blocks
        g.add(f"{op}/wide_columns", op, [x], {"T": "f64", "axis": 0}, [ref(x, axis=0).astype(np.int64)])
        g.add(f"{op}/rank1", op, [np.int16([3, -2, 7, 7])], {"T": "i16", "axis": 0},
              [np.int64(ref(np.int16([3, -2, 7, 7])))])
        g.add(f"{op}/empty_other_dims", op, [np.zeros((0, 3), np.float32)], {"T": "f32", "axis": 1},
              [np.zeros((0,), np.int64)])
        g.add(f"{op}/empty_axis", op, [np.zeros((0, 3), np.float32)], {"T": "f32", "axis": 0},
              error=f"{op} of an empty axis")
        g.add(f"{op}/scalar", op, [np.float32(1)], {"T": "f32", "axis": 0}, error="rank >= 1")
        g.add(f"{op}/axis_out_of_range", op, [np.zeros((2, 3), np.float32)], {"T": "f32", "axis": 2},
              error="is out of range")
        g.add(f"{op}/negative_axis_out_of_range", op, [np.zeros((2, 3), np.float32)], {"T": "f32", "axis": -3},
              error="is out of range")


# --- FusedBatchNorm ---------------------------------------------------------------

# The layouts FusedBatchNorm (and its gradient, in nn_grad.py) is checked in:
# name: (x's shape, data_format).
BATCH_NORM_LAYOUTS = {
    "nhwc": ((2, 3, 4, 5), "NHWC"),
    "nchw": ((2, 5, 3, 4), "NCHW"),
    "2d": ((6, 5), "NHWC"),
    "2d_nchw_attr": ((6, 5), "NCHW"),  # data_format does not apply to [N, C]
    "nhwc_one_pixel": ((3, 1, 1, 5), "NHWC"),
    "nchw_many_rows": ((300, 5, 1, 2), "NCHW"),
    "nhwc_many_rows": ((40, 10, 3, 5), "NHWC"),
}


def batch_norm_cases(g):
    r = rng(51)
    for dtype in ["f32", "f64"]:
        t = NP[dtype]
        for name, (shape, fmt) in BATCH_NORM_LAYOUTS.items():
            c_axis = 1 if fmt == "NCHW" and len(shape) == 4 else len(shape) - 1
            axes = tuple(i for i in range(len(shape)) if i != c_axis)
            bshape = [1] * len(shape)
            bshape[c_axis] = shape[c_axis]
            x = (r.standard_normal(shape) * 2 + 3).astype(t)
            scale = r.uniform(0.5, 2, shape[c_axis]).astype(t)
            offset = r.standard_normal(shape[c_axis]).astype(t)
            mean_in = r.standard_normal(shape[c_axis]).astype(t)
            var_in = r.uniform(0.5, 3, shape[c_axis]).astype(t)
            xf = x.astype(np.float64)
            for training in (True, False):
                for eps in (0.001, 0.25):
                    if training:
                        m, v = xf.mean(axis=axes), xf.var(axis=axes)
                        outs_mv = [m, xf.var(axis=axes, ddof=1)]
                    else:
                        m, v = mean_in.astype(np.float64), var_in.astype(np.float64)
                        outs_mv = [mean_in, var_in]
                    y = (xf - m.reshape(bshape)) / np.sqrt(v.reshape(bshape) + eps) * scale.reshape(bshape) \
                        + offset.reshape(bshape)
                    mode = "training" if training else "inference"
                    attrs = {"T": dtype, "epsilon": eps, "is_training": training, "data_format": fmt}
                    g.add(f"FusedBatchNorm/{dtype}_{name}_{mode}_eps{eps}", "FusedBatchNorm",
                          [x, scale, offset, mean_in, var_in], attrs,
                          [y.astype(t), np.asarray(outs_mv[0]).astype(t), np.asarray(outs_mv[1]).astype(t)],
                          **tol(g, dtype, 4))
    # The default attrs: training, epsilon 0.001, NHWC.
    x = r.standard_normal((4, 3)).astype(np.float32)
    p = np.ones(3, np.float32)
    xf = x.astype(np.float64)
    y = (xf - xf.mean(0)) / np.sqrt(xf.var(0) + 0.001)
    g.add("FusedBatchNorm/defaults", "FusedBatchNorm", [x, p, p * 0, p * 0, p], {"T": "f32"},
          [y.astype(np.float32), xf.mean(0).astype(np.float32), xf.var(0, ddof=1).astype(np.float32)],
          **tol(g, "f32", 4))
    # One element per channel: the unbiased variance is 0/0 (NaN, as NumPy's ddof=1).
    x = np.float32([[1, 2, 3]])
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        unbiased = np.var(x.astype(np.float64), axis=0, ddof=1).astype(np.float32)
    g.add("FusedBatchNorm/single_row_training", "FusedBatchNorm", [x, p, p * 0, p * 0, p], {"T": "f32"},
          [np.zeros_like(x), x[0], unbiased])
    # An empty batch: NaN statistics (NumPy's mean of nothing), an empty y.
    x = np.zeros((0, 3), np.float64)
    pd = np.ones(3, np.float64)
    g.add("FusedBatchNorm/empty_batch_training", "FusedBatchNorm", [x, pd, pd, pd, pd], {"T": "f64"},
          [x, np.full(3, np.nan), np.full(3, np.nan)])
    g.add("FusedBatchNorm/empty_batch_inference", "FusedBatchNorm", [x, pd, pd, pd * 2, pd * 3],
          {"T": "f64", "is_training": False}, [x, pd * 2, pd * 3])
    g.add("FusedBatchNorm/rank3", "FusedBatchNorm", [np.zeros((2, 3, 4), np.float32), p, p, p, p],
          {"T": "f32"}, error="x must have rank 2 or 4")
    g.add("FusedBatchNorm/scale_size", "FusedBatchNorm",
          [np.zeros((2, 4), np.float32), p, np.ones(4, np.float32), np.ones(4, np.float32), np.ones(4, np.float32)],
          {"T": "f32"}, error="has 3 elements, x has 4 channels")
    g.add("FusedBatchNorm/nchw_channels", "FusedBatchNorm", [np.zeros((2, 4, 2, 3), np.float32), p, p, p, p],
          {"T": "f32", "data_format": "NCHW"}, error="x has 4 channels")
    g.add("FusedBatchNorm/param_rank", "FusedBatchNorm",
          [np.zeros((2, 3), np.float32), p.reshape(1, 3), p, p, p], {"T": "f32"}, error="must be 1-D")


# --- LayerNorm --------------------------------------------------------------------

def layer_norm_cases(g):
    r = rng(61)
    shapes = [((4, 6), -1), ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), 0), ((2, 3, 4), -2), ((5,), 0),
              ((3, 2, 2, 2, 1, 3), 3), ((64, 300), 1)]
    for dtype in ["f32", "f64"]:
        t = NP[dtype]
        for shape, begin in shapes:
            for eps in (1e-5, 0.5):
                x = (r.standard_normal(shape) * 3 + 1).astype(t)
                b = begin % len(shape)
                norm_axes = tuple(range(b, len(shape)))
                gamma = r.uniform(0.5, 2, shape[b:]).astype(t)
                beta = r.standard_normal(shape[b:]).astype(t)
                xf = x.astype(np.float64)
                mean = xf.mean(axis=norm_axes, keepdims=True)
                var = xf.var(axis=norm_axes, keepdims=True)
                y = (xf - mean) / np.sqrt(var + eps) * gamma + beta
                shape_name = "x".join(map(str, shape))
                g.add(f"LayerNorm/{dtype}_{shape_name}_begin{begin}_eps{eps}", "LayerNorm", [x, gamma, beta],
                      {"T": dtype, "epsilon": eps, "begin_norm_axis": begin}, [y.astype(t)], **tol(g, dtype, 4))
    # Defaults: the last axis, epsilon 1e-5; a constant row normalises to beta.
    x = np.float32([[2, 2, 2], [1, 2, 3]])
    gamma = np.float32([1, 2, 3])
    beta = np.float32([0.5, 0, -0.5])
    xf = x.astype(np.float64)
    y = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + 1e-5) * gamma + beta
    g.add("LayerNorm/defaults", "LayerNorm", [x, gamma, beta], {"T": "f32"}, [y.astype(np.float32)],
          **tol(g, "f32", 4))
    g.add("LayerNorm/empty_rows", "LayerNorm", [np.zeros((0, 3), np.float32), gamma, beta], {"T": "f32"},
          [np.zeros((0, 3), np.float32)])
    g.add("LayerNorm/gamma_shape", "LayerNorm", [x, np.ones(2, np.float32), beta], {"T": "f32"},
          error="gamma has shape")
    g.add("LayerNorm/beta_shape", "LayerNorm", [x, gamma, np.ones((2, 3), np.float32)],
          {"T": "f32", "begin_norm_axis": -1}, error="beta has shape")
    g.add("LayerNorm/axis_out_of_range", "LayerNorm", [x, gamma, beta], {"T": "f32", "begin_norm_axis": 2},
          error="begin_norm_axis 2 is out of range")


# --- Softmax, LogSoftmax ----------------------------------------------------------

def softmax_ref(x, axis, log):
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        shifted = x - np.max(x, axis=axis, keepdims=True)
        lse = np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
        return shifted - lse if log else np.exp(shifted - lse)


def softmax_cases(g):
    r = rng(71)
    shapes = [((3, 7), -1), ((3, 7), 0), ((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 2), ((2, 3, 4), -2),
              ((9,), 0), ((2, 1, 3, 1, 2, 4), 3), ((2, 1, 3, 1, 2, 4), -1), ((3, 10, 300), 1), ((4, 1000), -1),
              ((5, 1), -1)]
    for op in ["Softmax", "LogSoftmax"]:
        log = op == "LogSoftmax"
        for dtype in ["f32", "f64"]:
            t = NP[dtype]
            for shape, axis in shapes:
                x = (r.standard_normal(shape) * 4).astype(t)
                shape_name = "x".join(map(str, shape))
                g.add(f"{op}/{dtype}_{shape_name}_axis{axis}", op, [x], {"T": dtype, "axis": axis},
                      [softmax_ref(x, axis, log).astype(t)], **tol(g, dtype, 4))
            # Large logits: stable (no overflow), and a -inf logit gets probability 0.
            x = np.array([[1000, 1001, 1002], [-1000, -1001, -1002], [0, -np.inf, 1], [88.7, 89, 90]], t)
            with np.errstate(divide="ignore"):
                want = softmax_ref(x, -1, log).astype(t)
            g.add(f"{op}/{dtype}_large", op, [x], {"T": dtype}, [want], **tol(g, dtype, 4))
        x = np.float32([[1, np.nan, 2], [1, 2, 3]])
        g.add(f"{op}/nan", op, [x], {"T": "f32"}, [softmax_ref(x, -1, log).astype(np.float32)], **tol(g, "f32", 4))
        g.add(f"{op}/empty", op, [np.zeros((0, 4), np.float32)], {"T": "f32"}, [np.zeros((0, 4), np.float32)])
        g.add(f"{op}/empty_axis", op, [np.zeros((3, 0), np.float32)], {"T": "f32"}, [np.zeros((3, 0), np.float32)])
        g.add(f"{op}/scalar", op, [np.float32(1)], {"T": "f32"}, error="logits must have rank >= 1")
        g.add(f"{op}/axis_out_of_range", op, [np.zeros((2, 3), np.float32)], {"T": "f32", "axis": 2},
              error="is out of range")


# --- Cross entropy ----------------------------------------------------------------

def xent_cases(g):
    r = rng(81)
    for dtype in ["f32", "f64"]:
        t = NP[dtype]
        for batch, classes in [(4, 5), (1, 1), (3, 1000), (0, 4), (64, 10)]:
            features = (r.standard_normal((batch, classes)) * 3).astype(t)
            labels = r.uniform(0, 1, (batch, classes))
            labels = (labels / labels.sum(axis=1, keepdims=True)).astype(t)
            logp = softmax_ref(features, -1, True)
            loss = -np.sum(labels.astype(np.float64) * logp, axis=1)
            backprop = np.exp(logp) - labels
            g.add(f"SoftmaxCrossEntropyWithLogits/{dtype}_{batch}x{classes}", "SoftmaxCrossEntropyWithLogits",
                  [features, labels], {"T": dtype}, [loss.astype(t), backprop.astype(t)], **tol(g, dtype, 8))
            idx = r.integers(0, classes, batch)
            for ltype in ["i32", "i64"]:
                loss = -logp[np.arange(batch), idx]
                backprop = np.exp(logp)
                backprop[np.arange(batch), idx] -= 1
                g.add(f"SparseSoftmaxCrossEntropyWithLogits/{dtype}_{ltype}_{batch}x{classes}",
                      "SparseSoftmaxCrossEntropyWithLogits", [features, idx.astype(NP[ltype])],
                      {"T": dtype, "Tlabels": ltype}, [loss.astype(t), backprop.astype(t)], **tol(g, dtype, 8))
        # Large logits and one-hot labels.
        features = np.array([[1000, 0, -1000], [50, 51, 52]], t)
        labels = np.array([[0, 1, 0], [0.25, 0.25, 0.5]], t)
        logp = softmax_ref(features, -1, True)
        g.add(f"SoftmaxCrossEntropyWithLogits/{dtype}_large", "SoftmaxCrossEntropyWithLogits", [features, labels],
              {"T": dtype}, [(-np.sum(labels * logp, axis=1)).astype(t), (np.exp(logp) - labels).astype(t)],
              **tol(g, dtype, 8))
        idx = np.array([1, 2], np.int64)
        backprop = np.exp(logp)
        backprop[[0, 1], idx] -= 1
        g.add(f"SparseSoftmaxCrossEntropyWithLogits/{dtype}_large", "SparseSoftmaxCrossEntropyWithLogits",
              [features, idx], {"T": dtype}, [(-logp[[0, 1], idx]).astype(t), backprop.astype(t)], **tol(g, dtype, 8))
    f = np.zeros((3, 4), np.float32)
    g.add("SoftmaxCrossEntropyWithLogits/labels_shape", "SoftmaxCrossEntropyWithLogits",
          [f, np.zeros((3, 5), np.float32)], {"T": "f32"}, error="must have the shape of features")
    g.add("SoftmaxCrossEntropyWithLogits/rank1", "SoftmaxCrossEntropyWithLogits",
          [np.zeros(4, np.float32), np.zeros(4, np.float32)], {"T": "f32"}, error="features must be [batch, classes]")
    for ltype in ["i32", "i64"]:
        lt = NP[ltype]
        g.add(f"SparseSoftmaxCrossEntropyWithLogits/label_too_large_{ltype}", "SparseSoftmaxCrossEntropyWithLogits",
              [f, np.array([0, 3, 4], lt)], {"T": "f32", "Tlabels": ltype},
              error="label 4 of row 2 is out of range [0, 4)")
        g.add(f"SparseSoftmaxCrossEntropyWithLogits/label_negative_{ltype}", "SparseSoftmaxCrossEntropyWithLogits",
              [f, np.array([0, -1, 1], lt)], {"T": "f32", "Tlabels": ltype},
              error="label -1 of row 1 is out of range [0, 4)")
    g.add("SparseSoftmaxCrossEntropyWithLogits/no_classes", "SparseSoftmaxCrossEntropyWithLogits",
          [np.zeros((2, 0), np.float32), np.array([0, 0], np.int64)], {"T": "f32"},
          error="label 0 of row 0 is out of range [0, 0)")
    g.add("SparseSoftmaxCrossEntropyWithLogits/labels_rows", "SparseSoftmaxCrossEntropyWithLogits",
          [f, np.array([0, 1], np.int64)], {"T": "f32"}, error="labels has 2 rows, features 3")
    g.add("SparseSoftmaxCrossEntropyWithLogits/labels_rank", "SparseSoftmaxCrossEntropyWithLogits",
          [f, np.zeros((3, 1), np.int64)], {"T": "f32"}, error="labels must be [batch]")


def cases(g):
    reduce_cases(g)
    logical_cases(g)
    arg_cases(g)
    batch_norm_cases(g)
    layer_norm_cases(g)
    softmax_cases(g)
    xent_cases(g)
