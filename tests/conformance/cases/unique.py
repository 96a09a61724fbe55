"""OnnxUnique: ONNX's Unique (opset 11). Weft's Unique (TensorFlow's) is in
sparse.py.

The reference (onnx_unique_ref) is numpy.unique with return_index,
return_inverse and return_counts (and axis), which sorts ascending and
gives each distinct item's first occurrence (its sort is stable); unsorted
output reorders the distinct items by first occurrence, as ONNX defines it.
NumPy's inverse is flattened (its shape for an axis changed across NumPy
versions). Where NumPy and Weft's documented choice differ, slices with
NaN along an axis (NumPy compares them with ==, so each NaN slice is
distinct; Weft, as NumPy does without an axis, takes every NaN as equal and
above every number), the reference is a plain dictionary of items
(items_ref), which every other case checks against NumPy too. It
reproduces the outputs of ONNX's Unique node tests (test_unique_*, 5 of
them) exactly; the first cases here are those tests' inputs.
"""
import math

import numpy as np

from .array import NP, NUMERIC, cast, rng, values


# --- the reference -------------------------------------------------------------------


def element_key(v):
    """A sort key: numbers by value (-0 == +0), NaN equal to NaN and last."""
    return (1, 0.0) if isinstance(v, float) and math.isnan(v) else (0, v)


def items_ref(x, axis, sorted_):
    """(y, indices, inverse_indices, counts) from a dictionary of items:
    the elements of x flattened (axis None) or its slices along axis."""
    x = np.asarray(x)
    if axis is None:
        items = x.reshape(-1, 1)
    else:
        moved = np.moveaxis(x, axis, 0)
        items = moved.reshape(moved.shape[0], math.prod(moved.shape[1:]))
    groups = {}  # item key -> [first, count], in order of first occurrence
    inverse_keys = []
    for j, item in enumerate(items):
        key = tuple(element_key(v) for v in item.tolist())
        groups.setdefault(key, [j, 0])[1] += 1
        inverse_keys.append(key)
    keys = sorted(groups) if sorted_ else list(groups)
    position = {k: p for p, k in enumerate(keys)}
    first = np.array([groups[k][0] for k in keys], np.int64)
    counts = np.array([groups[k][1] for k in keys], np.int64)
    inverse = np.array([position[k] for k in inverse_keys], np.int64)
    y = np.take(x.reshape(-1), first) if axis is None else np.take(x, first, axis=axis)
    return y, first, inverse, counts


def by_first_occurrence(first, inverse, counts):
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse], counts[order]


def onnx_unique_ref(x, axis=None, sorted_=True):
    """(y, indices, inverse_indices, counts) of ONNX's Unique."""
    x = np.asarray(x)
    if axis is not None and x.dtype.kind == "f" and np.isnan(x).any():
        return items_ref(x, axis, sorted_)
    _, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    first, inverse, counts = first.astype(np.int64), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)
    if not sorted_:
        first, inverse, counts = by_first_occurrence(first, inverse, counts)
    # y taken from x at the first occurrences: the first of equal values
    # (+0 and -0, or NaNs of other bits) is the one kept.
    y = np.take(x.reshape(-1), first) if axis is None else np.take(x, first, axis=axis)
    return y, first, inverse, counts


# --- cases ---------------------------------------------------------------------------


def same(a, b):
    """Equal shapes and values (NaN equal to NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def add(g, name, x, dtype, axis=None, sorted_=True, want=None, check=True):
    """One case; |want| (y, indices, inverse, counts), when given, must be
    the reference's too, and with |check| the dictionary reference agrees."""
    x = cast(g, x, dtype)
    ref = onnx_unique_ref(x, axis, sorted_)
    if check:
        other = items_ref(x, axis, sorted_)
        assert all(same(a, b) for a, b in zip(ref, other)), name
    if want is not None:
        assert all(same(a, np.asarray(w).astype(a.dtype)) for a, w in zip(ref, want)), (name, ref, want)
    attrs = {"T": dtype, "sorted": sorted_}
    if axis is not None:
        attrs.update(axis=axis, has_axis=True)
    g.add(f"OnnxUnique/{name}", "OnnxUnique", [x], attrs, list(ref), signed_zeros=True)


def onnx_cases(g):
    """The inputs of ONNX's node tests, with their expected outputs."""
    x = [2.0, 1.0, 1.0, 3.0, 4.0, 3.0]
    add(g, "onnx_sorted_without_axis", x, "f32",
        want=([1, 2, 3, 4], [1, 0, 3, 4], [1, 0, 0, 2, 3, 2], [2, 1, 2, 1]))
    add(g, "onnx_not_sorted_without_axis", x, "f32", sorted_=False,
        want=([2, 1, 3, 4], [0, 1, 3, 4], [0, 1, 1, 2, 3, 2], [1, 2, 2, 1]))
    add(g, "onnx_sorted_with_axis", [[1, 0, 0], [1, 0, 0], [2, 3, 4]], "f32", axis=0,
        want=([[1, 0, 0], [2, 3, 4]], [0, 2], [0, 0, 1], [2, 1]))
    x3 = [[[1, 1], [0, 1], [2, 1], [0, 1]], [[1, 1], [0, 1], [2, 1], [0, 1]]]
    add(g, "onnx_sorted_with_axis_3d", x3, "f32", axis=1,
        want=([[[0, 1], [1, 1], [2, 1]], [[0, 1], [1, 1], [2, 1]]], [1, 0, 2], [1, 0, 2, 0], [2, 1, 1]))
    add(g, "onnx_sorted_with_negative_axis", [[1, 0, 0], [1, 0, 0], [2, 3, 3]], "f32", axis=-1,
        want=([[0, 1], [0, 1], [3, 2]], [1, 0], [1, 0, 0], [2, 1]))


def repeats(g, r, shape, dtype, pool=5):
    """Values of |dtype| drawn from a small pool, so that items repeat."""
    pool = values(g, r, (pool,), dtype)
    return pool[r.integers(0, len(pool), shape)]


def dtype_cases(g, r):
    for dtype in NUMERIC:
        x = repeats(g, r, (14,), dtype)
        m = repeats(g, r, (6, 3), dtype, pool=2)
        for sorted_ in (True, False):
            s = "sorted" if sorted_ else "unsorted"
            add(g, f"{dtype}_{s}", x, dtype, sorted_=sorted_)
            add(g, f"{dtype}_{s}_rows", m, dtype, axis=0, sorted_=sorted_)
            add(g, f"{dtype}_{s}_columns", m.T, dtype, axis=-1, sorted_=sorted_)
            add(g, f"{dtype}_{s}_flattened", m, dtype, sorted_=sorted_)
        add(g, f"{dtype}_3d_middle_axis", repeats(g, r, (2, 7, 2), dtype, pool=2), dtype, axis=1)


def shape_cases(g, r):
    x = repeats(g, r, (3, 4, 5), "i32", pool=2)
    for axis in (0, 1, 2, -3):
        for sorted_ in (True, False):
            add(g, f"rank3_axis{axis}_sorted{int(sorted_)}", x, "i32", axis=axis, sorted_=sorted_)
    add(g, "rank5_flattened", repeats(g, r, (2, 1, 3, 2, 2), "f64"), "f64", sorted_=False)
    add(g, "rank5_axis3", repeats(g, r, (2, 1, 3, 4, 2), "i8", pool=2), "i8", axis=3)
    add(g, "scalar", np.float32(2.5), "f32")
    add(g, "one_element", [7], "i64", axis=0)
    add(g, "all_equal", [[3, 3], [3, 3], [3, 3]], "u8", axis=0, want=([[3, 3]], [0], [0, 0, 0], [3]))
    add(g, "all_distinct_unsorted", [5, -1, 3, 0], "i16", sorted_=False,
        want=([5, -1, 3, 0], [0, 1, 2, 3], [0, 1, 2, 3], [1, 1, 1, 1]))
    add(g, "all_distinct_sorted", [5, -1, 3, 0], "i16", want=([-1, 0, 3, 5], [1, 3, 2, 0], [3, 0, 2, 1], [1, 1, 1, 1]))
    # Lexicographic order of rows: the first element decides, then the next.
    rows = [[1, 9, 0], [1, 2, 5], [0, 9, 9], [1, 2, 5], [1, 2, 4]]
    add(g, "lexicographic_rows", rows, "i32", axis=0,
        want=([[0, 9, 9], [1, 2, 4], [1, 2, 5], [1, 9, 0]], [2, 4, 1, 0], [3, 2, 0, 2, 1], [1, 1, 2, 1]))
    add(g, "large_flat", r.integers(0, 1000, 5000), "i64")
    add(g, "large_flat_unsorted", r.integers(-50, 50, 4000), "i32", sorted_=False)
    add(g, "large_rows", r.integers(0, 3, (3000, 3)), "i16", axis=0, sorted_=False)
    add(g, "large_floats", repeats(g, r, (3000,), "f32", pool=900), "f32")


def empty_cases(g):
    add(g, "empty_flat", np.zeros((0,)), "f32")
    add(g, "empty_flattened_2d", np.zeros((2, 0)), "i32", sorted_=False)
    add(g, "empty_along_axis", np.zeros((0, 3)), "f64", axis=0)
    # Slices of no elements are all equal: one distinct slice.
    add(g, "empty_slices", np.zeros((3, 0)), "f32", axis=0, want=(np.zeros((1, 0)), [0], [0, 0, 0], [3]))
    add(g, "empty_slices_unsorted", np.zeros((2, 4, 0)), "i8", axis=1, sorted_=False,
        want=(np.zeros((2, 1, 0)), [0], [0, 0, 0, 0], [4]))


def float_cases(g):
    nan, inf = np.nan, np.inf
    x = [0.0, -0.0, nan, 1.5, -inf, nan, -0.0, inf]
    for dtype in ("f32", "f64", "f16", "bf16"):
        # +0 and -0 are one value (the first's sign); NaNs are one value, after inf.
        add(g, f"{dtype}_signed_zeros_and_nans", x, dtype,
            want=([-inf, 0.0, 1.5, inf, nan], [4, 0, 3, 7, 2], [1, 1, 4, 2, 0, 4, 1, 3], [1, 3, 1, 1, 2]))
        add(g, f"{dtype}_signed_zeros_and_nans_unsorted", x, dtype, sorted_=False,
            want=([0.0, nan, 1.5, -inf, inf], [0, 2, 3, 4, 7], [0, 0, 1, 2, 3, 1, 0, 4], [3, 2, 1, 1, 1]))
    add(g, "negative_zero_first", [-0.0, 0.0, 2.0], "f32", want=([-0.0, 2.0], [0, 2], [0, 0, 1], [2, 1]))
    # Along an axis too, NaN equals NaN (NumPy would keep each NaN row).
    rows = [[1, nan], [0, 5], [1, nan], [-0.0, 5], [nan, 0]]
    add(g, "nan_rows", rows, "f32", axis=0, check=False,
        want=([[0, 5], [1, nan], [nan, 0]], [1, 0, 4], [1, 0, 1, 0, 2], [2, 2, 1]))
    add(g, "nan_rows_unsorted", rows, "f64", axis=0, sorted_=False, check=False,
        want=([[1, nan], [0, 5], [nan, 0]], [0, 1, 4], [0, 1, 0, 1, 2], [2, 2, 1]))


def error_cases(g):
    x = np.zeros((2, 3), np.float32)
    g.add("OnnxUnique/axis_out_of_range", "OnnxUnique", [x], {"T": "f32", "axis": 2, "has_axis": True},
          error="axis 2 is out of range for rank 2 (valid: -2 to 1)")
    g.add("OnnxUnique/negative_axis_out_of_range", "OnnxUnique", [x], {"T": "f32", "axis": -3, "has_axis": True},
          error="axis -3 is out of range for rank 2 (valid: -2 to 1)")
    g.add("OnnxUnique/scalar_with_axis", "OnnxUnique", [np.float32(1)], {"T": "f32", "axis": 0, "has_axis": True},
          error="x must have rank >= 1 to take slices along an axis, got a scalar")


def cases(g):
    r = rng(52)
    onnx_cases(g)
    dtype_cases(g, r)
    shape_cases(g, r)
    empty_cases(g)
    float_cases(g)
    error_cases(g)
