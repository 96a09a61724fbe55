"""The ops whose shape-like parameters are run-time tensors, as ONNX (opset
13) defines them: DynamicSlice, DynamicPad, DynamicTile, DynamicSum,
DynamicExpandDims, DynamicSqueeze and DynamicSplit.

References are NumPy's: Python slices, pad (constant, reflect, edge), tile,
sum, expand_dims, squeeze and split at the running sums of 'split'. Negative
pads are applied as a Python slice before np.pad. One rule of ONNX's Slice
differs from Python's slices (a start below -d with a negative step is
clamped to 0, not to "before the first element"); that case's reference
is written out by hand. Moving elements is exact, so only DynamicSum has a
tolerance.
"""
import numpy as np

from .array import ALL, NP, NUMERIC, cast, rng, values

FLOATS = ["f32", "f64", "f16", "bf16"]
I64_MAX, I64_MIN = 2 ** 63 - 1, -(2 ** 63)
I32_MAX, I32_MIN = 2 ** 31 - 1, -(2 ** 31)


def ints(v, tidx):
    """A 1-D index tensor of dtype |tidx| (empty stays 1-D)."""
    return np.array(v, dtype=NP[tidx]).reshape(-1)


def tidx_of(k):
    """Alternates the index dtype over a loop."""
    return "i32" if k % 2 == 0 else "i64"


def big(tidx):
    return (I64_MAX, I64_MIN) if tidx == "i64" else (I32_MAX, I32_MIN)


# --- DynamicSlice ----------------------------------------------------------------


def slice_cases(g):
    r = rng(11)

    def add(name, x, starts, ends, axes, steps, want, dtype="f32", tidx="i64"):
        inputs = [x] + [ints(v, tidx) for v in (starts, ends, axes, steps)]
        g.add(f"DynamicSlice/{name}", "DynamicSlice", inputs, {"T": dtype, "Tidx": tidx}, [np.array(want)])

    for k, dtype in enumerate(ALL):
        t = tidx_of(k)
        hi, _ = big(t)
        x = values(g, r, (4, 5), dtype)
        add(f"{dtype}_{t}", x, [1, -4], [3, hi], [0, 1], [1, 2], x[1:3, -4:hi:2], dtype, t)
        add(f"reversed_{dtype}_{t}", x, [-1, 3], [-100, 0], [1, 0], [-2, -1], x[3:0:-1, -1:-100:-2], dtype, t)
    x = values(g, r, (3, 4, 5), "f32")
    add("negative_axes", x, [-2], [100], [-1], [1], x[:, :, -2:100])
    add("unlisted_axes_whole", x, [1], [3], [1], [1], x[:, 1:3])
    add("axes_out_of_order", x, [0, 1], [4, 2], [2, 0], [2, 1], x[1:2, :, 0:4:2])
    add("no_axes", x, [], [], [], [], x)
    add("identity_listed", x, [0, 0], [I64_MAX, 4], [0, 1], [1, 1], x)
    add("int64_max_end", x, [1], [I64_MAX], [1], [1], x[:, 1:])
    add("int64_min_end_reverse", x, [-1], [I64_MIN], [0], [-1], x[::-1])
    add("int64_min_step", x, [-1], [I64_MIN], [2], [I64_MIN], x[:, :, -1:I64_MIN:I64_MIN])
    add("int64_max_step", x, [0], [I64_MAX], [2], [I64_MAX], x[:, :, 0::I64_MAX])
    add("start_past_end", x, [10], [20], [2], [1], x[:, :, 10:20])
    add("empty_range", x, [3], [1], [2], [1], x[:, :, 3:1])
    add("empty_range_negative_step", x, [1], [3], [2], [-1], x[:, :, 1:3:-1])
    add("negative_step_from_past_end", x, [100], [-100], [2], [-2], x[:, :, 100:-100:-2])
    add("negative_step_to_first", x, [4], [-6], [2], [-1], x[:, :, 4:-6:-1])
    add("negative_step_end_in_range", x, [4], [1], [2], [-3], x[:, :, 4:1:-3])
    # ONNX clamps a start below -d to 0 for a negative step (Python's slice
    # would select nothing): x[0] alone, going down to before element 0.
    v = values(g, r, (5,), "i32")
    add("onnx_start_below_minus_d_negative_step", v, [-100], [I64_MIN], [0], [-1], v[0:1], "i32")
    add("onnx_start_below_minus_d_positive_step", v, [-100], [2], [0], [1], v[-100:2], "i32")
    e = np.zeros((0, 3), np.float32)
    add("empty_input", e, [0, 1], [5, 3], [0, 1], [1, 1], e[0:5, 1:3])
    add("empty_input_negative_step", e, [-1, -1], [I64_MIN, I64_MIN], [0, 1], [-1, -1], e[::-1, ::-1])
    add("scalar", np.float32(2.5), [], [], [], [], np.float32(2.5))
    y = values(g, r, (2, 3, 2, 4, 3, 5), "i16")
    add("rank6", y, [1, 0, -1, 3, 0], [2, 3, -3, 0, 5], [0, 1, 3, 4, 5], [1, 2, -1, -2, 2],
        y[1:2, 0:3:2, :, -1:-3:-1, 3:0:-2, 0:5:2], "i16", "i32")
    w = values(g, r, (60, 70), "f32")
    add("large", w, [59, 3], [0, 70], [0, 1], [-1, 3], w[59:0:-1, 3:70:3])
    for t in ("i32", "i64"):
        hi, lo = big(t)
        add(f"clamped_{t}", x, [lo, -2], [hi, lo], [0, 1], [1, -1], x[lo:hi, -2:lo:-1], "f32", t)

    def error(name, message, starts, ends, axes, steps, tidx="i64"):
        inputs = [values(g, r, (3, 4), "f32")] + [ints(v, tidx) for v in (starts, ends, axes, steps)]
        g.add(f"DynamicSlice/{name}", "DynamicSlice", inputs, {"T": "f32", "Tidx": tidx}, error=message)

    error("zero_step", "a step is 0 (steps entry 1)", [0, 0], [1, 1], [0, 1], [1, 0])
    error("repeated_axis", "axes entry -2 repeats axis 0", [0, 0], [1, 1], [0, -2], [1, 1])
    error("axis_out_of_range", "axes entry 2 is out of range for rank 2", [0], [1], [2], [1], "i32")
    error("negative_axis_out_of_range", "axes entry -3 is out of range for rank 2", [0], [1], [-3], [1])
    error("lengths_differ", "starts, ends, axes and steps have 2, 1, 2 and 2 entries; they must match",
          [0, 0], [1], [0, 1], [1, 1])
    x = values(g, r, (3, 4), "f32")
    g.add("DynamicSlice/starts_not_1d", "DynamicSlice",
          [x, np.zeros((1, 1), np.int64), ints([1], "i64"), ints([0], "i64"), ints([1], "i64")],
          {"T": "f32", "Tidx": "i64"}, error="starts must be a 1-D tensor, got shape [1,1]")


# --- DynamicPad ------------------------------------------------------------------


def crop(x, pads):
    """|x| without what the negative entries of ONNX |pads| remove."""
    rank = x.ndim
    index = tuple(slice(max(-pads[i], 0), x.shape[i] - max(-pads[rank + i], 0)) for i in range(rank))
    return x[index]


def pad_ref(g, x, pads, mode, value=None):
    """ONNX's Pad: the negative pads crop, then NumPy pads the rest."""
    rank = x.ndim
    width = [(max(pads[i], 0), max(pads[rank + i], 0)) for i in range(rank)]
    y = crop(x, pads)
    if rank == 0:
        return np.asarray(x)  # nothing to pad
    if mode == "constant":
        return np.pad(y, width, mode="constant", constant_values=value)
    return np.pad(y, width, mode=mode)


def pad_cases(g):
    r = rng(12)

    def add(name, x, pads, mode, dtype, tidx, value=None, value_shape=()):
        v = cast(g, 0 if value is None else value, dtype)
        want = pad_ref(g, x, pads, mode, v)
        g.add(f"DynamicPad/{name}", "DynamicPad", [x, ints(pads, tidx), v.reshape(value_shape)],
              {"T": dtype, "Tidx": tidx, "mode": mode}, [want])

    for k, dtype in enumerate(ALL):
        t = tidx_of(k)
        x = values(g, r, (3, 4), dtype)
        value = {"bool": 1, "u8": 7}.get(dtype, -2.5 if dtype in FLOATS else -7)
        add(f"constant_{dtype}", x, [1, 0, 2, 3], "constant", dtype, t, value)
        add(f"reflect_{dtype}", x, [2, 1, 1, 3], "reflect", dtype, tidx_of(k + 1))
        add(f"edge_{dtype}", x, [2, 0, 0, 5], "edge", dtype, t)
        add(f"negative_{dtype}", x, [-1, 1, 0, -2], "constant", dtype, t, value)
    x = values(g, r, (3, 4), "f32")
    add("one_element_value", x, [0, 1, 1, 0], "constant", "f32", "i64", 4.5, (1,))
    add("default_zero", x, [1, 1, 1, 1], "constant", "f32", "i32")
    add("nothing", x, [0, 0, 0, 0], "reflect", "f32", "i64")
    add("reflect_negative_crop", x, [-1, 2, 1, -1], "reflect", "f32", "i64")
    add("edge_negative_crop", x, [2, -3, -1, 3], "edge", "f32", "i32")
    add("remove_everything", x, [-3, 0, 0, 0], "constant", "f32", "i64", 1.0)
    add("remove_and_pad_back", x, [-3, 0, 2, 0], "constant", "f32", "i64", 1.0)
    add("reflect_largest", x, [2, 3, 2, 3], "reflect", "f32", "i64")
    add("edge_of_one", values(g, r, (1, 4), "i32"), [3, 0, 2, 1], "edge", "i32", "i32")
    y = values(g, r, (2, 3, 4), "i64")
    for mode in ("constant", "reflect", "edge"):
        add(f"rank3_{mode}", y, [1, 2, 0, 1, 0, 3], mode, "i64", "i64", -5)
    z = values(g, r, (5,), "f64")
    add("rank1_reflect", z, [4, 4], "reflect", "f64", "i32")
    add("scalar", np.float32(3.5), [], "constant", "f32", "i64", 1.0)
    add("empty_input", np.zeros((0, 3), np.float32), [1, 0, 1, 2], "constant", "f32", "i64", 2.0)
    add("empty_unpadded_reflect", np.zeros((0, 3), np.float32), [0, 1, 0, 1], "reflect", "f32", "i64")
    w = values(g, r, (50, 70), "f32")
    add("large_reflect", w, [20, 30, 49, 69], "reflect", "f32", "i64")
    add("large_edge", w, [7, -5, 9, 100], "edge", "f32", "i64")

    def error(name, message, pads, mode="constant", shape=(3, 4), value_shape=()):
        x = values(g, r, shape, "f32")
        g.add(f"DynamicPad/{name}", "DynamicPad", [x, ints(pads, "i64"), np.zeros(value_shape, np.float32)],
              {"T": "f32", "Tidx": "i64", "mode": mode}, error=message)

    error("pads_length", "pads has 3 entries for a tensor of rank 2; it needs 4", [1, 1, 1])
    error("reflect_too_far", "reflect padding of dimension 1 must be smaller than its size 4, got 4 before and 0 after",
          [0, 4, 0, 0], "reflect")
    error("reflect_after_crop", "reflect padding of dimension 1 must be smaller than its size 2, got 0 before and 2 "
          "after", [0, -2, 0, 2], "reflect")
    error("reflect_single", "reflect padding of dimension 0 must be smaller than its size 1", [1, 0, 0, 0],
          "reflect", (1, 4))
    error("remove_too_much", "pads -2 and -2 remove more than the 3 elements of dimension 0", [-2, 0, -2, 0])
    error("remove_int64_min", f"pads {I64_MIN} and 0 remove more than the 4 elements of dimension 1",
          [0, I64_MIN, 0, 0])
    error("edge_of_empty", "edge padding of dimension 0 has no edge to repeat", [1, 0, 0, 0], "edge", (0, 4))
    error("value_not_scalar", "constant_value must be a scalar or have one element, got shape [2]", [0, 0, 0, 0],
          value_shape=(2,))
    error("padded_size_overflows", "does not fit in 64 bits", [0, I64_MAX, 0, 1])


# --- DynamicTile -----------------------------------------------------------------


def tile_cases(g):
    r = rng(13)

    def add(name, x, repeats, dtype, tidx):
        g.add(f"DynamicTile/{name}", "DynamicTile", [x, ints(repeats, tidx)], {"T": dtype, "Tidx": tidx},
              [np.tile(x, repeats) if repeats else x])

    for k, dtype in enumerate(ALL):
        add(f"{dtype}", values(g, r, (2, 3), dtype), [2, 3], dtype, tidx_of(k))
    x = values(g, r, (2, 3, 4), "f32")
    add("rank3", x, [1, 2, 3], "f32", "i64")
    add("ones", x, [1, 1, 1], "f32", "i32")
    add("zero_repeats", x, [2, 0, 1], "f32", "i64")
    add("outer_only", x, [3, 1, 1], "f32", "i64")
    add("inner_only", x, [1, 1, 5], "f32", "i32")
    add("scalar", np.int32(-4), [], "i32", "i64")
    add("rank1", values(g, r, (7,), "i8"), [4], "i8", "i32")
    add("empty_input", np.zeros((0, 3), np.float32), [4, 2], "f32", "i64")
    add("large", values(g, r, (30, 40), "f64"), [5, 7], "f64", "i64")
    x = values(g, r, (2, 3), "f32")
    g.add("DynamicTile/repeats_length", "DynamicTile", [x, ints([2], "i64")], {"T": "f32", "Tidx": "i64"},
          error="repeats has 1 entries for a tensor of rank 2")
    g.add("DynamicTile/negative_repeat", "DynamicTile", [x, ints([1, -1], "i32")], {"T": "f32", "Tidx": "i32"},
          error="repeats must be >= 0, got -1 for dimension 1")
    g.add("DynamicTile/overflow", "DynamicTile", [x, ints([1, I64_MAX], "i64")], {"T": "f32", "Tidx": "i64"},
          error="does not fit in 64 bits")


# --- DynamicSum ------------------------------------------------------------------


def sum_ref(g, x, dtype, axes, keep, noop=False):
    if len(axes) == 0 and noop:
        return x
    axis = None if len(axes) == 0 else tuple(axes)
    if dtype in FLOATS:
        y = np.sum(np.asarray(x, np.float64), axis=axis, keepdims=keep)
        return g.to_bf16(y.astype(np.float32)) if dtype == "bf16" else np.asarray(y).astype(NP[dtype])
    return np.asarray(np.sum(x.astype(np.int64), axis=axis, keepdims=keep)).astype(NP[dtype])  # wraps


def sum_input(g, r, shape, dtype):
    if dtype in FLOATS:
        x = r.standard_normal(shape) * 3
        return g.to_bf16(x.astype(np.float32)) if dtype == "bf16" else x.astype(NP[dtype])
    lo = 0 if dtype == "u8" else -6
    return r.integers(lo, 7, shape).astype(NP[dtype])


def sum_cases(g):
    r = rng(14)

    def add(name, x, dtype, axes, keep=True, noop=False, tidx="i64"):
        attrs = {"T": dtype, "Tidx": tidx, "keep_dims": keep, "noop_with_empty_axes": noop}
        want = sum_ref(g, x, dtype, axes, keep, noop)
        tol = {}
        if dtype in FLOATS:
            rtol, atol = g.tolerance[dtype]
            tol = {"rtol": rtol * 4, "atol": atol * 4}
        g.add(f"DynamicSum/{name}", "DynamicSum", [x, ints(axes, tidx)], attrs, [want], **tol)

    for k, dtype in enumerate(NUMERIC):
        x = sum_input(g, r, (3, 4, 5), dtype)
        t = tidx_of(k)
        add(f"{dtype}_axis1", x, dtype, [1], tidx=t)
        add(f"{dtype}_negative_axes", x, dtype, [-1, 0], keep=False, tidx=t)
        add(f"{dtype}_all", x, dtype, [], tidx=t)
        add(f"{dtype}_all_dropped", x, dtype, [], keep=False, tidx=tidx_of(k + 1))
    x = sum_input(g, r, (3, 4, 5), "f32")
    add("noop_with_empty_axes", x, "f32", [], noop=True)
    add("noop_ignored_with_axes", x, "f32", [2], keep=False, noop=True)
    add("leading", x, "f32", [0, 1], keep=False, tidx="i32")
    add("trailing", x, "f32", [1, 2])
    add("outer_pair", x, "f32", [2, 0], keep=False)
    add("every_listed", x, "f32", [2, 0, 1], keep=False)
    y = sum_input(g, r, (2, 3, 1, 2, 4, 3), "f64")
    add("rank6_alternate", y, "f64", [0, 2, 4], keep=False)
    add("rank6_odd", y, "f64", [-1, 3, 1], keep=True)
    z = sum_input(g, r, (200, 150), "f32")
    add("large_leading", z, "f32", [0])
    add("large_trailing", z, "f32", [-1], keep=False)
    add("scalar", np.float32(-3.0), "f32", [])
    add("scalar_dropped", np.int32(9), "i32", [], keep=False)
    e = np.zeros((0, 3), np.float32)
    add("empty_reduced", e, "f32", [0], keep=False)
    add("empty_kept", e, "f32", [1])
    add("empty_all", e, "f32", [], keep=False)
    w = np.full((4, 70), 100, np.uint8)
    add("u8_wraps", w, "u8", [0])
    v = np.full((3, 5), 2 ** 62, np.int64)
    add("i64_wraps", v, "i64", [1], keep=False)
    x = np.zeros((2, 3), np.float32)
    g.add("DynamicSum/repeated_axis", "DynamicSum", [x, ints([1, -1], "i64")], {"T": "f32", "Tidx": "i64"},
          error="axes entry -1 repeats axis 1")
    g.add("DynamicSum/axis_out_of_range", "DynamicSum", [x, ints([2], "i32")], {"T": "f32", "Tidx": "i32"},
          error="axes entry 2 is out of range for rank 2")
    g.add("DynamicSum/axes_not_1d", "DynamicSum", [x, np.int64(0)], {"T": "f32", "Tidx": "i64"},
          error="axes must be a 1-D tensor, got shape []")


# --- DynamicExpandDims, DynamicSqueeze -------------------------------------------


def expand_dims_cases(g):
    r = rng(15)

    def add(name, x, axes, dtype, tidx):
        want = np.expand_dims(x, tuple(axes)) if axes else x
        g.add(f"DynamicExpandDims/{name}", "DynamicExpandDims", [x, ints(axes, tidx)], {"T": dtype, "Tidx": tidx},
              [want])

    for k, dtype in enumerate(ALL):
        add(f"{dtype}", values(g, r, (2, 3), dtype), [0, 3], dtype, tidx_of(k))
    x = values(g, r, (2, 3), "f32")
    add("negative", x, [-1], "f32", "i64")
    add("negative_pair", x, [-4, 1], "f32", "i32")
    add("out_of_order", x, [3, 0, 2], "f32", "i64")
    add("middle", x, [1], "f32", "i64")
    add("none", x, [], "f32", "i64")
    add("scalar", np.float32(1.5), [0], "f32", "i64")
    add("scalar_to_rank3", np.int64(7), [-1, 0, 1], "i64", "i32")
    add("empty_input", np.zeros((0, 3), np.float32), [1], "f32", "i64")
    add("to_rank8", values(g, r, (2, 2, 2, 2), "i16"), [0, 2, 4, 6], "i16", "i64")
    y = values(g, r, (2,), "f32")
    g.add("DynamicExpandDims/repeated", "DynamicExpandDims", [y, ints([2, -1], "i64")], {"T": "f32", "Tidx": "i64"},
          error="axes entry -1 repeats axis 2")
    g.add("DynamicExpandDims/out_of_range", "DynamicExpandDims", [y, ints([2], "i32")], {"T": "f32", "Tidx": "i32"},
          error="axes entry 2 is out of range for rank 2")
    g.add("DynamicExpandDims/rank_too_high", "DynamicExpandDims",
          [np.zeros((1,) * 7, np.float32), ints([0, 1], "i64")], {"T": "f32", "Tidx": "i64"},
          error="the result would have rank 9, above the maximum of 8")


def squeeze_cases(g):
    r = rng(16)

    def add(name, x, axes, dtype, tidx):
        want = np.squeeze(x, tuple(axes)) if axes else x
        g.add(f"DynamicSqueeze/{name}", "DynamicSqueeze", [x, ints(axes, tidx)], {"T": dtype, "Tidx": tidx},
              [want])

    for k, dtype in enumerate(ALL):
        add(f"{dtype}", values(g, r, (1, 3, 1), dtype), [0, 2], dtype, tidx_of(k))
    x = values(g, r, (1, 3, 1, 2), "f32")
    add("negative", x, [-2], "f32", "i64")
    add("one_of_two", x, [0], "f32", "i32")
    add("out_of_order", x, [2, -4], "f32", "i64")
    add("none", x, [], "f32", "i64")
    add("to_scalar", values(g, r, (1, 1), "i32"), [1, 0], "i32", "i64")
    add("empty_input", np.zeros((0, 1), np.float32), [1], "f32", "i64")
    add("from_rank8", values(g, r, (1, 2, 1, 2, 1, 2, 1, 1), "u8"), [0, 2, 4, 6, 7], "u8", "i32")
    g.add("DynamicSqueeze/not_one", "DynamicSqueeze", [x, ints([1], "i64")], {"T": "f32", "Tidx": "i64"},
          error="cannot squeeze axis 1 of [1,3,1,2]: its size is 3, not 1")
    g.add("DynamicSqueeze/not_one_negative", "DynamicSqueeze", [x, ints([0, -1], "i32")], {"T": "f32", "Tidx": "i32"},
          error="cannot squeeze axis -1 of [1,3,1,2]: its size is 2, not 1")
    g.add("DynamicSqueeze/repeated", "DynamicSqueeze", [x, ints([2, -2], "i64")], {"T": "f32", "Tidx": "i64"},
          error="axes entry -2 repeats axis 2")
    g.add("DynamicSqueeze/out_of_range", "DynamicSqueeze", [x, ints([4], "i64")], {"T": "f32", "Tidx": "i64"},
          error="axes entry 4 is out of range for rank 4")


# --- DynamicSplit ----------------------------------------------------------------


def split_cases(g):
    r = rng(17)

    def add(name, x, split, axis, dtype, tidx):
        parts = np.split(x, np.cumsum(split)[:-1], axis=axis)
        g.add(f"DynamicSplit/{name}", "DynamicSplit", [x, ints(split, tidx)],
              {"T": dtype, "Tidx": tidx, "num_split": len(split), "axis": axis}, [np.array(p) for p in parts])

    for k, dtype in enumerate(ALL):
        add(f"{dtype}", values(g, r, (2, 6), dtype), [1, 2, 3], 1, dtype, tidx_of(k))
    x = values(g, r, (4, 3, 5), "f32")
    add("axis0", x, [3, 1], 0, "f32", "i64")
    add("negative_axis", x, [2, 0, 3], -1, "f32", "i32")
    add("middle_axis", x, [1, 1, 1], 1, "f32", "i64")
    add("zero_parts", x, [0, 3, 0], 1, "f32", "i64")
    add("one_part", x, [5], 2, "f32", "i64")
    add("rank1", values(g, r, (7,), "i64"), [4, 0, 3], 0, "i64", "i32")
    add("empty_input", np.zeros((0, 4), np.float32), [1, 3], 1, "f32", "i64")
    add("empty_axis", np.zeros((3, 0), np.int32), [0, 0], 1, "i32", "i64")
    add("large", values(g, r, (80, 400), "f64"), [100, 250, 50], 1, "f64", "i64")

    def error(name, message, split, axis=1, num_split=None, tidx="i64"):
        x = values(g, r, (2, 6), "f32")
        g.add(f"DynamicSplit/{name}", "DynamicSplit", [x, ints(split, tidx)],
              {"T": "f32", "Tidx": tidx, "num_split": len(split) if num_split is None else num_split, "axis": axis},
              error=message)

    error("sum_too_small", "split's entries [1,2] sum to 3, but dimension 1 of [2,6] has size 6", [1, 2])
    error("sum_too_large", "split's entries [4,4] sum to 8, but dimension 1 of [2,6] has size 6", [4, 4], -1)
    error("negative_entry", "split entries must be >= 0, got -1 at position 0", [-1, 7], tidx="i32")
    error("count", "split has 2 entries for num_split 3", [3, 3], num_split=3)
    error("axis_out_of_range", "axis 2 is out of range for rank 2", [6], axis=2)
    error("sum_overflows", "sum past 2^63", [I64_MAX, I64_MAX, 6])


def cases(g):
    slice_cases(g)
    pad_cases(g)
    tile_cases(g)
    sum_cases(g)
    expand_dims_cases(g)
    squeeze_cases(g)
    split_cases(g)
