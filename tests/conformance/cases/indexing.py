"""Indexing ops: GatherElements, ScatterElements, TopK and NonZero (ONNX's
ops of these names).

References: numpy.take_along_axis (on data cut to indices' extent in the
other dimensions, with negative indices made positive); ScatterElements
written out as a loop over indices in row-major order that assigns, adds or
multiplies in the case's dtype (NumPy's scalar arithmetic: integers wrap,
bool add is or and multiply is and; bf16 rounded after each step), which is
numpy.put_along_axis for 'none' without repeats and numpy.add.at /
multiply.at for the others; TopK sorts each line with Python's stable sort
on (NaN first or last, value, index), NumPy's sort order with ties by
index; NonZero is numpy.array(numpy.nonzero(x)), and by hand for a scalar
(shape [0, 1] or [0, 0]: one element with an empty index, or none).
Moving elements is exact, so only ScatterElements' float reductions
compare with a tolerance.
"""
import math

import numpy as np

# The dtype lists and value makers the array ops' cases use.
from cases.array import ALL, NP, NUMERIC, cast, rng, values

FLOATS = ["f32", "f64", "f16", "bf16"]


def positive(indices, size):
    return np.where(indices < 0, indices + size, indices).astype(np.int64)


# --- GatherElements ----------------------------------------------------------------------

def gather_elements_ref(data, indices, axis):
    axis %= data.ndim
    cut = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(indices.shape))
    return np.take_along_axis(data[cut], positive(indices, data.shape[axis]), axis=axis)


def gather_elements_cases(g):
    r = rng(21)
    for dtype in ALL:
        for ti in ["i32", "i64"]:
            d = values(g, r, (3, 4), dtype)
            i = r.integers(-3, 3, (5, 4)).astype(NP[ti])
            g.add(f"GatherElements/axis0_{dtype}_{ti}", "GatherElements", [d, i], {"T": dtype, "Tindices": ti},
                  [gather_elements_ref(d, i, 0)])
    d = values(g, r, (2, 3, 4), "f32")
    for axis in [0, 1, 2, -1, -3]:
        size = d.shape[axis]
        i = r.integers(-size, size, (2, 3, 4)).astype(np.int64)
        g.add(f"GatherElements/rank3_axis{axis}", "GatherElements", [d, i],
              {"T": "f32", "Tindices": "i64", "axis": axis}, [gather_elements_ref(d, i, axis)])
    # indices smaller than data in the other dimensions, larger along the axis.
    i = r.integers(0, 4, (1, 2, 7)).astype(np.int32)
    g.add("GatherElements/narrower_indices", "GatherElements", [d, i], {"T": "f32", "Tindices": "i32", "axis": 2},
          [gather_elements_ref(d, i, 2)])
    i = np.int64([[0, 1, -1, -2]])
    g.add("GatherElements/negative_indices", "GatherElements", [d[0], i], {"T": "f32", "Tindices": "i64", "axis": 1},
          [gather_elements_ref(d[0], i, 1)])
    d1 = values(g, r, (6,), "i16")
    i = np.int32([5, 0, 0, -6, 3])
    g.add("GatherElements/rank1", "GatherElements", [d1, i], {"T": "i16", "Tindices": "i32"},
          [gather_elements_ref(d1, i, 0)])
    g.add("GatherElements/no_indices", "GatherElements", [d, np.zeros((2, 0, 4), np.int64)],
          {"T": "f32", "Tindices": "i64", "axis": 1}, [np.zeros((2, 0, 4), np.float32)])
    g.add("GatherElements/empty_data", "GatherElements", [np.zeros((0, 3), np.float32), np.zeros((0, 2), np.int32)],
          {"T": "f32", "Tindices": "i32", "axis": 1}, [np.zeros((0, 2), np.float32)])
    d = values(g, r, (300, 200), "f64")
    i = r.integers(-300, 300, (400, 150)).astype(np.int64)
    g.add("GatherElements/large", "GatherElements", [d, i], {"T": "f64", "Tindices": "i64"},
          [gather_elements_ref(d, i, 0)])
    d = values(g, r, (3, 4), "f32")
    g.add("GatherElements/out_of_range", "GatherElements", [d, np.int32([[0, 1, 2, 0], [3, 0, 0, 0]])],
          {"T": "f32", "Tindices": "i32"},
          error="index 3 at position [1, 0] of indices is out of range for axis 0 of data [3,4] (valid: -3 to 2)")
    g.add("GatherElements/negative_out_of_range", "GatherElements", [d, np.int64([[0, -5]])],
          {"T": "f32", "Tindices": "i64", "axis": -1},
          error="index -5 at position [0, 1] of indices is out of range for axis 1 of data [3,4] (valid: -4 to 3)")
    g.add("GatherElements/empty_axis", "GatherElements", [np.zeros((2, 0), np.float32), np.int32([[0], [0]])],
          {"T": "f32", "Tindices": "i32", "axis": 1},
          error="index 0 at position [0, 0] of indices is out of range for axis 1 of data [2,0] "
                "(valid: none, its size is 0)")
    g.add("GatherElements/ranks_differ", "GatherElements", [d, np.int32([0, 1])], {"T": "f32", "Tindices": "i32"},
          error="indices has rank 1 ([2]) but data has rank 2 ([3,4]); they must be equal")
    g.add("GatherElements/indices_wider", "GatherElements", [d, np.zeros((2, 5), np.int32)],
          {"T": "f32", "Tindices": "i32"},
          error="indices has shape [2,5] and data [3,4]: dimension 1 of indices (5) is larger than data's (4); "
                "only along axis 0 may it be larger")
    g.add("GatherElements/axis_out_of_range", "GatherElements", [d, np.zeros((3, 4), np.int32)],
          {"T": "f32", "Tindices": "i32", "axis": 2}, error="axis 2 is out of range for rank 2")
    g.add("GatherElements/scalar_data", "GatherElements", [np.float32(1), np.int32(0)], {"T": "f32", "Tindices": "i32"},
          error="data must have rank >= 1")


# --- ScatterElements -----------------------------------------------------------------------

def scatter_elements_ref(g, data, indices, updates, axis, reduction, dtype):
    """Every update in row-major order of indices, in the dtype's arithmetic."""
    out = np.array(data, copy=True)
    axis %= data.ndim
    idx = positive(indices, data.shape[axis])
    with np.errstate(over="ignore"):
        for pos in np.ndindex(*indices.shape):
            target = list(pos)
            target[axis] = idx[pos]
            target = tuple(target)
            u = updates[pos]
            if reduction == "add":
                u = out[target] + u
            elif reduction == "mul":
                u = out[target] * u
            out[target] = g.to_bf16(np.float32(u)) if dtype == "bf16" else u
    return out


def scatter_elements_cases(g):
    r = rng(22)
    for dtype in NUMERIC + ["bool"]:
        for reduction in ["none", "add", "mul"]:
            for ti in ["i32", "i64"]:
                d = values(g, r, (3, 4), dtype)
                # Rows repeat within columns: 'none' keeps the last update, add and mul apply them all.
                i = r.integers(-3, 3, (5, 4)).astype(NP[ti])
                if dtype in FLOATS and reduction == "mul":
                    u = cast(g, r.choice([-2, -1, -0.5, 0.5, 1, 2], (5, 4)), dtype)  # exact products
                else:
                    u = values(g, r, (5, 4), dtype)
                want = scatter_elements_ref(g, d, i, u, 0, reduction, dtype)
                g.add(f"ScatterElements/{reduction}_{dtype}_{ti}", "ScatterElements", [d, i, u],
                      {"T": dtype, "Tindices": ti, "reduction": reduction}, [want])
    d = values(g, r, (2, 3, 4), "f32")
    for axis in [0, 1, 2, -1, -2]:
        size = d.shape[axis]
        i = r.integers(-size, size, (2, 3, 4)).astype(np.int64)
        u = values(g, r, (2, 3, 4), "f32")
        for reduction in ["none", "add"]:
            g.add(f"ScatterElements/rank3_axis{axis}_{reduction}", "ScatterElements", [d, i, u],
                  {"T": "f32", "Tindices": "i64", "axis": axis, "reduction": reduction},
                  [scatter_elements_ref(g, d, i, u, axis, reduction, "f32")])
    i = r.integers(-4, 4, (1, 2, 9)).astype(np.int32)
    u = values(g, r, (1, 2, 9), "f32")
    g.add("ScatterElements/narrower_indices", "ScatterElements", [d, i, u],
          {"T": "f32", "Tindices": "i32", "axis": 2, "reduction": "add"},
          [scatter_elements_ref(g, d, i, u, 2, "add", "f32")])
    # Repeats: the last update of a position wins; every one adds or multiplies.
    d1 = np.float64([1, 2, 3, 4])
    i = np.int64([1, 3, 1, -3, 0, 1])
    u = np.float64([10, 20, 30, 40, 50, 60])
    g.add("ScatterElements/repeated_none", "ScatterElements", [d1, i, u], {"T": "f64", "Tindices": "i64"},
          [np.float64([50, 60, 3, 20])])
    g.add("ScatterElements/repeated_add", "ScatterElements", [d1, i, u],
          {"T": "f64", "Tindices": "i64", "reduction": "add"}, [np.float64([51, 142, 3, 24])])
    g.add("ScatterElements/repeated_mul", "ScatterElements", [d1, i, u],
          {"T": "f64", "Tindices": "i64", "reduction": "mul"}, [np.float64([50, 2 * 10 * 30 * 40 * 60, 3, 80])])
    # Integers wrap.
    g.add("ScatterElements/add_wraps_i8", "ScatterElements", [np.int8([100, 0]), np.int32([0, 0]), np.int8([100, 100])],
          {"T": "i8", "Tindices": "i32", "reduction": "add"}, [np.int8([(300 + 128) % 256 - 128, 0])])
    g.add("ScatterElements/mul_wraps_i16", "ScatterElements",
          [np.int16([300, 1]), np.int32([0, 0]), np.int16([300, -2])],
          {"T": "i16", "Tindices": "i32", "reduction": "mul"}, [np.int16([(-180000 + 32768) % 65536 - 32768, 1])])
    g.add("ScatterElements/mul_wraps_u8", "ScatterElements", [np.uint8([16, 3]), np.int64([0]), np.uint8([16])],
          {"T": "u8", "Tindices": "i64", "reduction": "mul"}, [np.uint8([0, 3])])
    g.add("ScatterElements/no_updates", "ScatterElements",
          [d, np.zeros((2, 0, 4), np.int32), np.zeros((2, 0, 4), np.float32)],
          {"T": "f32", "Tindices": "i32", "axis": 1}, [d])
    g.add("ScatterElements/empty_data", "ScatterElements",
          [np.zeros((0, 3), np.float32), np.zeros((0, 2), np.int32), np.zeros((0, 2), np.float32)],
          {"T": "f32", "Tindices": "i32", "axis": 1}, [np.zeros((0, 3), np.float32)])
    d = values(g, r, (200, 300), "f32")
    i = r.integers(-200, 200, (500, 250)).astype(np.int64)
    u = cast(g, r.integers(-8, 8, (500, 250)), "f32")  # small integers: the sums are exact in any order
    for reduction in ["none", "add"]:
        want = d.copy()
        cols = np.broadcast_to(np.arange(250), i.shape)
        if reduction == "add":
            np.add.at(want, (positive(i, 200), cols), u)
        else:
            want = scatter_elements_ref(g, d, i, u, 0, "none", "f32")
        g.add(f"ScatterElements/large_{reduction}", "ScatterElements", [d, i, u],
              {"T": "f32", "Tindices": "i64", "reduction": reduction}, [want], rtol=1e-6, atol=1e-5)
    d = values(g, r, (3, 4), "f32")
    u = values(g, r, (2, 4), "f32")
    g.add("ScatterElements/out_of_range", "ScatterElements", [d, np.int32([[0, 1, 2, 0], [2, 0, 3, 0]]), u],
          {"T": "f32", "Tindices": "i32"},
          error="index 3 at position [1, 2] of indices is out of range for axis 0 of data [3,4] (valid: -3 to 2)")
    g.add("ScatterElements/negative_out_of_range", "ScatterElements", [d, np.int64([[-4, 0, 0, 0]]), u[:1]],
          {"T": "f32", "Tindices": "i64", "reduction": "add"},
          error="index -4 at position [0, 0] of indices is out of range for axis 0 of data [3,4] (valid: -3 to 2)")
    g.add("ScatterElements/updates_differ", "ScatterElements", [d, np.zeros((2, 3), np.int32), u],
          {"T": "f32", "Tindices": "i32"}, error="updates has shape [2,4] but indices [2,3]; they must have one shape")
    g.add("ScatterElements/ranks_differ", "ScatterElements", [d, np.int32([0]), np.float32([1])],
          {"T": "f32", "Tindices": "i32"},
          error="indices has rank 1 ([1]) but data has rank 2 ([3,4]); they must be equal")
    g.add("ScatterElements/indices_wider", "ScatterElements",
          [d, np.zeros((4, 1), np.int32), np.zeros((4, 1), np.float32)], {"T": "f32", "Tindices": "i32", "axis": 1},
          error="indices has shape [4,1] and data [3,4]: dimension 0 of indices (4) is larger than data's (3); "
                "only along axis 1 may it be larger")
    g.add("ScatterElements/axis_out_of_range", "ScatterElements", [d, np.zeros((2, 4), np.int32), u],
          {"T": "f32", "Tindices": "i32", "axis": -3}, error="axis -3 is out of range for rank 2")
    g.add("ScatterElements/bad_reduction", "ScatterElements", [d, np.zeros((2, 4), np.int32), u],
          {"T": "f32", "Tindices": "i32", "reduction": "max"},
          error='attr "reduction" is "max"; expected one of "none", "add", "mul"')
    g.add("ScatterElements/scalar_data", "ScatterElements", [np.float32(1), np.int32(0), np.float32(2)],
          {"T": "f32", "Tindices": "i32"}, error="data must have rank >= 1")


# --- TopK ----------------------------------------------------------------------------------

def top_k_ref(x, k, axis, largest):
    """Each line sorted by (NaN first with largest / last without, value, index)."""
    x = np.asarray(x)
    moved = np.moveaxis(x, axis, -1)
    n = moved.shape[-1]
    rows = moved.reshape(-1, n)
    vals = np.empty((rows.shape[0], k), x.dtype)
    idxs = np.empty((rows.shape[0], k), np.int64)
    for j, row in enumerate(rows):
        items = [v.item() for v in row]  # Python numbers: no overflow negating the lowest integer

        def key(i):
            v = items[i]
            nan = isinstance(v, float) and math.isnan(v)
            if largest:
                return (0 if nan else 1, 0 if nan else -v, i)
            return (1 if nan else 0, 0 if nan else v, i)

        order = sorted(range(n), key=key)[:k]
        vals[j] = row[order]
        idxs[j] = order
    shape = moved.shape[:-1] + (k,)
    return np.moveaxis(vals.reshape(shape), -1, axis), np.moveaxis(idxs.reshape(shape), -1, axis)


def top_k_cases(g):
    r = rng(23)
    for dtype in NUMERIC:
        x = values(g, r, (4, 7), dtype)
        for largest in [True, False]:
            want = top_k_ref(x, 3, -1, largest)
            g.add(f"TopK/{dtype}_{'largest' if largest else 'smallest'}", "TopK", [x, np.int64(3)],
                  {"T": dtype, "Tk": "i64", "largest": largest}, list(want))
    x = values(g, r, (3, 4, 5), "f32")
    for axis in [0, 1, 2, -1, -2, -3]:
        for k in [0, 1, x.shape[axis]]:
            g.add(f"TopK/rank3_axis{axis}_k{k}", "TopK", [x, np.int32(k)], {"T": "f32", "Tk": "i32", "axis": axis},
                  list(top_k_ref(x, k, axis, True)))
    g.add("TopK/unsorted_is_sorted", "TopK", [x, np.int64(2)], {"T": "f32", "Tk": "i64", "sorted": False},
          list(top_k_ref(x, 2, -1, True)))
    # Ties: the lower index first, both ways; -0 equals +0.
    t = np.float32([[2, 1, 2, 3, 1, 3], [0, -0.0, 0, -1, -0.0, 1]])
    for largest in [True, False]:
        g.add(f"TopK/ties_{'largest' if largest else 'smallest'}", "TopK", [t, np.int64(5)],
              {"T": "f32", "Tk": "i64", "largest": largest}, list(top_k_ref(t, 5, -1, largest)), signed_zeros=True)
    ti = np.int8([[-128, 127, -128, 5, 127, 0]])
    for largest in [True, False]:
        g.add(f"TopK/int_ties_{'largest' if largest else 'smallest'}", "TopK", [ti, np.int64(4)],
              {"T": "i8", "Tk": "i64", "largest": largest}, list(top_k_ref(ti, 4, 1, largest)))
    # NaN is above every number (NumPy's sort order), inf below it.
    nan = float("nan")
    for dtype in FLOATS:
        v = cast(g, [[1, nan, -np.inf, np.inf, nan, 0], [nan, nan, nan, 2, -1, np.inf]], dtype)
        for largest in [True, False]:
            g.add(f"TopK/nan_{dtype}_{'largest' if largest else 'smallest'}", "TopK", [v, np.int64(4)],
                  {"T": dtype, "Tk": "i64", "largest": largest}, list(top_k_ref(v, 4, 1, largest)))
    g.add("TopK/rank1_all", "TopK", [np.float64([3, 1, 2]), np.int64(3)], {"T": "f64", "Tk": "i64"},
          [np.float64([3, 2, 1]), np.int64([0, 2, 1])])
    g.add("TopK/empty_lines", "TopK", [np.zeros((0, 4), np.float32), np.int64(2)], {"T": "f32", "Tk": "i64"},
          [np.zeros((0, 2), np.float32), np.zeros((0, 2), np.int64)])
    g.add("TopK/empty_axis", "TopK", [np.zeros((3, 0), np.float32), np.int64(0)], {"T": "f32", "Tk": "i64"},
          [np.zeros((3, 0), np.float32), np.zeros((3, 0), np.int64)])
    x = values(g, r, (100, 500), "f32")
    for axis, k in [(1, 50), (0, 100), (1, 500)]:
        g.add(f"TopK/large_axis{axis}_k{k}", "TopK", [x, np.int64(k)], {"T": "f32", "Tk": "i64", "axis": axis},
              list(top_k_ref(x, k, axis, True)))
    x = values(g, r, (3, 4), "f32")
    g.add("TopK/k_too_large", "TopK", [x, np.int64(5)], {"T": "f32", "Tk": "i64"},
          error="k = 5 is out of range for axis 1 of input [3,4] (valid: 0 to 4)")
    g.add("TopK/k_negative", "TopK", [x, np.int32(-1)], {"T": "f32", "Tk": "i32", "axis": 0},
          error="k = -1 is out of range for axis 0 of input [3,4] (valid: 0 to 3)")
    g.add("TopK/k_not_scalar", "TopK", [x, np.int64([2])], {"T": "f32", "Tk": "i64"},
          error="k must be a scalar, got shape [1]")
    g.add("TopK/axis_out_of_range", "TopK", [x, np.int64(1)], {"T": "f32", "Tk": "i64", "axis": 2},
          error="axis 2 is out of range for rank 2")
    g.add("TopK/scalar", "TopK", [np.float32(1), np.int64(0)], {"T": "f32", "Tk": "i64"},
          error="input must have rank >= 1")


# --- NonZero -------------------------------------------------------------------------------

def non_zero_ref(x):
    x = np.asarray(x)
    if x.ndim == 0:
        return np.zeros((0, 1 if x != 0 else 0), np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


def non_zero_cases(g):
    r = rng(24)
    for dtype in NUMERIC + ["bool"]:
        x = values(g, r, (3, 5), dtype)
        x = np.where(r.integers(0, 3, x.shape) == 0, np.zeros((), x.dtype), x)  # a third zeros at least
        g.add(f"NonZero/{dtype}", "NonZero", [x], {"T": dtype}, [non_zero_ref(x)])
    # NaN is nonzero, -0 is zero.
    for dtype in FLOATS:
        x = cast(g, [[0, -0.0, float("nan")], [float("inf"), 0, -1e-30 if dtype == "f64" else -1]], dtype)
        g.add(f"NonZero/specials_{dtype}", "NonZero", [x], {"T": dtype}, [non_zero_ref(x)])
    x = values(g, r, (2, 3, 2, 2), "i32") * (r.integers(0, 2, (2, 3, 2, 2)) == 1)
    g.add("NonZero/rank4", "NonZero", [x.astype(np.int32)], {"T": "i32"}, [non_zero_ref(x)])
    g.add("NonZero/rank1", "NonZero", [np.int64([0, 5, 0, -1])], {"T": "i64"}, [np.int64([[1, 3]])])
    g.add("NonZero/all_zero", "NonZero", [np.zeros((2, 3), np.float32)], {"T": "f32"}, [np.zeros((2, 0), np.int64)])
    g.add("NonZero/empty", "NonZero", [np.zeros((2, 0, 3), np.bool_)], {"T": "bool"}, [np.zeros((3, 0), np.int64)])
    g.add("NonZero/scalar_nonzero", "NonZero", [np.float32(2.5)], {"T": "f32"}, [np.zeros((0, 1), np.int64)])
    g.add("NonZero/scalar_zero", "NonZero", [np.int32(0)], {"T": "i32"}, [np.zeros((0, 0), np.int64)])
    g.add("NonZero/scalar_true", "NonZero", [np.bool_(True)], {"T": "bool"}, [non_zero_ref(np.bool_(True))])
    # Many blocks of 4096 elements, some without a nonzero element.
    x = (r.integers(0, 3, (300, 400)) == 0).astype(np.uint8) * r.integers(1, 9, (300, 400)).astype(np.uint8)
    x[10:30] = 0
    g.add("NonZero/large", "NonZero", [x], {"T": "u8"}, [non_zero_ref(x)])


def cases(g):
    gather_elements_cases(g)
    scatter_elements_cases(g)
    top_k_cases(g)
    non_zero_cases(g)
