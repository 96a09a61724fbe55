"""Array ops: data movement (Transpose, Concat, Split, Slice, StridedSlice,
Pad, Tile, Reverse, Gather, GatherNd, ScatterNd), array builders (OneHot,
Fill, ZerosLike, OnesLike, Range) and the runtime's own shape ops (Reshape,
ExpandDims, Squeeze, Shape, Size, Rank, Identity, StopGradient).

References are NumPy's: transpose, concatenate, split, basic and fancy
indexing, pad, tile, flip, take, add.at, arange. Moving elements is exact,
so those cases compare with no tolerance.
"""
import numpy as np

ALL = ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "bool"]
NUMERIC = ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32,
      "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_}


def rng(seed):
    return np.random.default_rng(seed)


def values(g, r, shape, dtype):
    """Distinct-looking values of |dtype| (bf16 rounded, kept as f32)."""
    if dtype == "bool":
        return r.integers(0, 2, shape).astype(np.bool_)
    if dtype == "u8":
        return r.integers(0, 250, shape).astype(np.uint8)
    if dtype in ("i8", "i16", "i32", "i64"):
        return r.integers(-100, 100, shape).astype(NP[dtype])
    x = r.standard_normal(shape) * 10
    if dtype == "bf16":
        return g.to_bf16(x.astype(np.float32))
    return x.astype(NP[dtype])


def cast(g, x, dtype):
    """|x| as |dtype|, exactly representable (bf16 rounded, kept as f32)."""
    if dtype == "bf16":
        return g.to_bf16(np.asarray(x, np.float32))
    return np.asarray(x).astype(NP[dtype])


# --- Transpose, Concat, Split --------------------------------------------------------


def transpose_cases(g):
    r = rng(1)
    for dtype in ALL:
        x = values(g, r, (3, 5), dtype)
        g.add(f"Transpose/2d_{dtype}", "Transpose", [x], {"T": dtype, "perm": [1, 0]}, [x.T])
        x = values(g, r, (2, 3, 4), dtype)
        g.add(f"Transpose/3d_{dtype}", "Transpose", [x], {"T": dtype, "perm": [2, 0, 1]},
              [np.transpose(x, (2, 0, 1))])
    x = values(g, r, (2, 3, 4), "f32")
    g.add("Transpose/default_perm_reverses", "Transpose", [x], {"T": "f32"}, [np.transpose(x)])
    g.add("Transpose/empty_perm_reverses", "Transpose", [x], {"T": "f32", "perm": []}, [np.transpose(x)])
    g.add("Transpose/negative_perm", "Transpose", [x], {"T": "f32", "perm": [-1, 0, -2]},
          [np.transpose(x, (2, 0, 1))])
    g.add("Transpose/identity", "Transpose", [x], {"T": "f32", "perm": [0, 1, 2]}, [x])
    g.add("Transpose/batched_matrices", "Transpose", [x], {"T": "f32", "perm": [0, 2, 1]},
          [np.transpose(x, (0, 2, 1))])
    # Larger than one 32x32 tile in both directions, with ragged edges.
    for dtype in ["f32", "f64", "f16", "i8"]:
        x = values(g, r, (67, 45), dtype)
        g.add(f"Transpose/tiled_{dtype}", "Transpose", [x], {"T": dtype, "perm": [1, 0]}, [x.T])
    x = values(g, r, (300, 257), "f32")
    g.add("Transpose/large", "Transpose", [x], {"T": "f32", "perm": [1, 0]}, [x.T])
    x = values(g, r, (3, 70, 41), "i16")
    g.add("Transpose/tiled_batched", "Transpose", [x], {"T": "i16", "perm": [0, 2, 1]},
          [np.transpose(x, (0, 2, 1))])
    x = values(g, r, (40, 3, 50), "i32")
    g.add("Transpose/tiled_outer", "Transpose", [x], {"T": "i32", "perm": [2, 1, 0]}, [np.transpose(x, (2, 1, 0))])
    x = values(g, r, (2, 3, 1, 2, 3, 2), "f32")
    perm = [5, 3, 1, 0, 2, 4]
    g.add("Transpose/rank6", "Transpose", [x], {"T": "f32", "perm": perm}, [np.transpose(x, perm)])
    x = values(g, r, (2, 1, 3, 2, 2, 2), "bool")
    perm = [1, 0, 3, 2, 5, 4]
    g.add("Transpose/rank6_bool", "Transpose", [x], {"T": "bool", "perm": perm}, [np.transpose(x, perm)])
    x = values(g, r, (1, 4, 1, 3), "i64")
    g.add("Transpose/unit_dims", "Transpose", [x], {"T": "i64", "perm": [3, 2, 1, 0]}, [np.transpose(x)])
    x = np.zeros((0, 3), np.float32)
    g.add("Transpose/empty", "Transpose", [x], {"T": "f32", "perm": [1, 0]}, [x.T])
    g.add("Transpose/scalar", "Transpose", [np.float32(2.5)], {"T": "f32", "perm": []}, [np.float32(2.5)])
    x = values(g, r, (2, 3), "f32")
    g.add("Transpose/repeated_perm", "Transpose", [x], {"T": "f32", "perm": [0, 0]}, error="repeats")
    g.add("Transpose/perm_too_long", "Transpose", [x], {"T": "f32", "perm": [0, 1, 2]},
          error="has 3 entries for a tensor of rank 2")
    g.add("Transpose/perm_out_of_range", "Transpose", [x], {"T": "f32", "perm": [0, 2]},
          error="perm entry 2 is out of range for rank 2")


def concat_cases(g):
    r = rng(2)
    for dtype in ALL:
        xs = [values(g, r, (2, n), dtype) for n in (3, 1, 4)]
        g.add(f"Concat/axis1_{dtype}", "Concat", xs, {"T": dtype, "N": 3, "axis": 1}, [np.concatenate(xs, 1)])
        xs = [values(g, r, (n, 3), dtype) for n in (2, 1)]
        g.add(f"Concat/axis0_{dtype}", "Concat", xs, {"T": dtype, "N": 2, "axis": 0}, [np.concatenate(xs, 0)])
    xs = [values(g, r, (2, n, 3), "f32") for n in (1, 2, 3)]
    g.add("Concat/rank3_axis1", "Concat", xs, {"T": "f32", "N": 3, "axis": 1}, [np.concatenate(xs, 1)])
    g.add("Concat/negative_axis", "Concat", xs, {"T": "f32", "N": 3, "axis": -2}, [np.concatenate(xs, 1)])
    xs = [values(g, r, (2, 3, n), "i32") for n in (2, 5)]
    g.add("Concat/last_axis", "Concat", xs, {"T": "i32", "N": 2, "axis": -1}, [np.concatenate(xs, -1)])
    xs = [values(g, r, (2, 0), "f32"), values(g, r, (2, 3), "f32"), values(g, r, (2, 0), "f32")]
    g.add("Concat/with_empty", "Concat", xs, {"T": "f32", "N": 3, "axis": 1}, [np.concatenate(xs, 1)])
    xs = [np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)]
    g.add("Concat/all_empty", "Concat", xs, {"T": "f32", "N": 2, "axis": 0}, [np.concatenate(xs, 0)])
    xs = [values(g, r, (4,), "u8")]
    g.add("Concat/one_input", "Concat", xs, {"T": "u8", "N": 1, "axis": 0}, xs)
    xs = [values(g, r, (64, n), "f32") for n in (300, 17, 250)]
    g.add("Concat/large", "Concat", xs, {"T": "f32", "N": 3, "axis": 1}, [np.concatenate(xs, 1)])
    g.add("Concat/dims_differ", "Concat", [np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)],
          {"T": "f32", "N": 2, "axis": 1}, error="differs from the others in dimension 0")
    g.add("Concat/ranks_differ", "Concat", [np.zeros((2, 3), np.float32), np.zeros((2, 3, 1), np.float32)],
          {"T": "f32", "N": 2, "axis": 0}, error="but input 0 has rank")
    g.add("Concat/scalars", "Concat", [np.float32(1), np.float32(2)], {"T": "f32", "N": 2, "axis": 0},
          error="cannot concatenate scalars")
    g.add("Concat/axis_out_of_range", "Concat", [np.zeros((2, 3), np.float32)] * 2, {"T": "f32", "N": 2, "axis": 2},
          error="axis 2 is out of range for rank 2")


def split_cases(g):
    r = rng(3)
    for dtype in ALL:
        x = values(g, r, (2, 6), dtype)
        g.add(f"Split/axis1_{dtype}", "Split", [x], {"T": dtype, "num_split": 3, "axis": 1}, np.split(x, 3, 1))
    x = values(g, r, (4, 3, 2), "f32")
    g.add("Split/axis0", "Split", [x], {"T": "f32", "num_split": 2, "axis": 0}, np.split(x, 2, 0))
    g.add("Split/negative_axis", "Split", [x], {"T": "f32", "num_split": 2, "axis": -1}, np.split(x, 2, -1))
    g.add("Split/middle_axis", "Split", [x], {"T": "f32", "num_split": 3, "axis": 1}, np.split(x, 3, 1))
    g.add("Split/one_part", "Split", [x], {"T": "f32", "num_split": 1, "axis": 1}, [x])
    x = np.zeros((0, 4), np.int32)
    g.add("Split/empty", "Split", [x], {"T": "i32", "num_split": 2, "axis": 1}, np.split(x, 2, 1))
    x = np.zeros((3, 0), np.int32)
    g.add("Split/empty_axis", "Split", [x], {"T": "i32", "num_split": 2, "axis": 1}, np.split(x, 2, 1))
    x = values(g, r, (80, 400), "f64")
    g.add("Split/large", "Split", [x], {"T": "f64", "num_split": 4, "axis": 1}, np.split(x, 4, 1))
    x = values(g, r, (2, 5), "f32")
    g.add("Split/uneven", "Split", [x], {"T": "f32", "num_split": 2, "axis": 1},
          error="cannot split dimension 1 of [2,5] into 2 equal parts")
    g.add("Split/axis_out_of_range", "Split", [x], {"T": "f32", "num_split": 1, "axis": -3},
          error="axis -3 is out of range for rank 2")


# --- Slice, StridedSlice -------------------------------------------------------------


def slice_cases(g):
    r = rng(4)
    for dtype in ALL:
        x = values(g, r, (4, 5), dtype)
        g.add(f"Slice/{dtype}", "Slice", [x], {"T": dtype, "begin": [1, 2], "size": [2, -1]}, [x[1:3, 2:]])
    x = values(g, r, (3, 4, 5), "f32")
    g.add("Slice/inner_rows", "Slice", [x], {"T": "f32", "begin": [0, 1, 0], "size": [-1, 2, -1]}, [x[:, 1:3, :]])
    g.add("Slice/innermost", "Slice", [x], {"T": "f32", "begin": [1, 0, 2], "size": [2, 4, 2]}, [x[1:3, :, 2:4]])
    g.add("Slice/whole", "Slice", [x], {"T": "f32", "begin": [0, 0, 0], "size": [-1, -1, -1]}, [x])
    g.add("Slice/zero_size", "Slice", [x], {"T": "f32", "begin": [1, 4, 0], "size": [2, 0, 3]}, [x[1:3, 4:4, 0:3]])
    g.add("Slice/at_end", "Slice", [x], {"T": "f32", "begin": [3, 0, 0], "size": [0, -1, -1]}, [x[3:]])
    x = values(g, r, (2, 3, 2, 4, 3, 5), "i16")
    g.add("Slice/rank6", "Slice", [x], {"T": "i16", "begin": [1, 0, 1, 1, 0, 2], "size": [1, 2, -1, 2, 3, 2]},
          [x[1:2, 0:2, 1:, 1:3, 0:3, 2:4]])
    x = np.zeros((0, 3), np.float32)
    g.add("Slice/empty_input", "Slice", [x], {"T": "f32", "begin": [0, 1], "size": [-1, 2]}, [x[:, 1:3]])
    g.add("Slice/scalar", "Slice", [np.int32(7)], {"T": "i32", "begin": [], "size": []}, [np.int32(7)])
    x = values(g, r, (4, 5), "f32")
    g.add("Slice/outside", "Slice", [x], {"T": "f32", "begin": [3, 0], "size": [2, 1]},
          error="a slice of size 2 from 3 is outside dimension 0 of [4,5]")
    g.add("Slice/negative_begin", "Slice", [x], {"T": "f32", "begin": [-1, 0], "size": [1, 1]},
          error="begin -1 / size 1 in dimension 0 are invalid")
    g.add("Slice/lengths_differ", "Slice", [x], {"T": "f32", "begin": [0, 0], "size": [1]},
          error="begin has 2 entries and size 1")
    g.add("Slice/wrong_rank", "Slice", [x], {"T": "f32", "begin": [0], "size": [1]},
          error="begin and size have 1 entries for a tensor of rank 2")


def strided_slice_cases(g):
    r = rng(5)
    x = values(g, r, (5, 6), "f32")

    def add(name, x, begin, end, strides, want, dtype="f32", **masks):
        attrs = {"T": dtype, "begin": begin, "end": end, "strides": strides}
        attrs.update(masks)
        g.add(f"StridedSlice/{name}", "StridedSlice", [x], attrs, [want])

    add("basic", x, [1, 0], [3, 0], [1, 2], x[1:3, ::2], begin_mask=2, end_mask=2)
    add("negative_strides", x, [0, 4], [0, 0], [-1, -2], x[::-1, 4:0:-2], begin_mask=1, end_mask=1)
    add("negative_indices", x, [-3, -1], [-1, -5], [1, -1], x[-3:-1, -1:-5:-1])
    add("clamped", x, [-100, 1], [100, 50], [1, 1], x[-100:100, 1:50])
    add("clamped_negative_stride", x, [100, 50], [-100, -50], [-2, -3], x[100:-100:-2, 50:-50:-3])
    add("begin_mask_negative_stride", x, [0, 0], [1, 2], [-1, -1], x[:1:-1, :2:-1], begin_mask=3)
    add("end_mask_negative_stride", x, [3, 4], [0, 0], [-1, -2], x[3::-1, 4::-2], end_mask=3)
    add("shrink", x, [2, 1], [3, 3], [1, 1], x[2, 1:3], shrink_axis_mask=1)
    add("shrink_negative", x, [0, -1], [0, 0], [1, 1], x[:, -1], begin_mask=1, end_mask=1, shrink_axis_mask=2)
    add("shrink_all", x, [4, -6], [5, -5], [1, 1], x[4, -6], shrink_axis_mask=3)
    add("new_axis", x, [0, 0, 1], [0, 0, 0], [1, 1, 1], x[:, None, 1:], begin_mask=1, end_mask=5,
        new_axis_mask=2)
    add("new_axis_first", x, [0, 1], [0, 4], [1, 2], x[None, 1:4:2], new_axis_mask=1)
    add("empty_range", x, [3, 0], [1, 0], [1, 1], x[3:1], end_mask=2)
    add("empty_range_negative_stride", x, [1, 0], [3, 0], [-1, 1], x[1:3:-1], end_mask=2)
    add("implicit_trailing_dims", x, [1], [4], [2], x[1:4:2])
    y = values(g, r, (2, 3, 4, 5), "i32")
    add("ellipsis_last", y, [0, 1], [0, 2], [1, 1], y[..., 1], dtype="i32", ellipsis_mask=1, shrink_axis_mask=2)
    add("ellipsis_middle", y, [1, 0, 0], [2, 0, 0], [1, 1, -1], y[1, ..., ::-1], dtype="i32",
        ellipsis_mask=2, shrink_axis_mask=1, begin_mask=4, end_mask=4)
    add("ellipsis_new_axis", y, [0, 0], [0, 0], [1, 1], y[..., None], dtype="i32", ellipsis_mask=1, new_axis_mask=2)
    add("ellipsis_covers_nothing", y, [0, 1, 0, 0, 1], [1, 3, 0, 4, 4], [1, 1, 1, 2, 2],
        y[0:1, 1:3, ..., 0:4:2, 1:4:2], dtype="i32", ellipsis_mask=4)
    z = values(g, r, (3, 4, 2, 3, 2, 4), "i64")
    add("rank6", z, [2, 0, 1, 0, 0, 3], [0, 4, 0, 3, 2, 0], [-1, 2, -1, 2, 1, -2],
        z[2::-1, 0:4:2, 1::-1, 0:3:2, 0:2, 3::-2], dtype="i64", end_mask=0b000101)
    add("to_scalar", np.float64([1.5, 2.5, 3.5]), [-2], [0], [1], np.float64(2.5), dtype="f64", shrink_axis_mask=1)
    e = np.zeros((0, 4), np.float32)
    add("empty_input", e, [0, 1], [0, 3], [1, 1], e[:, 1:3], begin_mask=1, end_mask=1)
    add("empty_input_reversed", e, [0, 0], [0, 0], [-1, -1], e[::-1, ::-1], begin_mask=3, end_mask=3)
    for dtype in ALL:
        v = values(g, r, (4, 7), dtype)
        add(f"negative_strides_{dtype}", v, [3, 6], [0, 0], [-2, -3], v[3::-2, 6::-3], dtype=dtype, end_mask=3)
        add(f"forward_{dtype}", v, [1, 2], [3, 7], [1, 1], v[1:3, 2:7], dtype=dtype)
    big = values(g, r, (200, 300), "f32")
    add("large", big, [10, 299], [190, 0], [1, -1], big[10:190, 299:0:-1])

    def error(name, message, begin, end, strides, **masks):
        attrs = {"T": "f32", "begin": begin, "end": end, "strides": strides}
        attrs.update(masks)
        g.add(f"StridedSlice/{name}", "StridedSlice", [x], attrs, error=message)

    error("zero_stride", "a stride is 0", [0, 0], [1, 1], [1, 0])
    error("lengths_differ", "they must match", [0, 0], [1], [1, 1])
    error("shrink_out_of_range", "index 5 is out of range for dimension 0 of size 5", [5], [6], [1],
          shrink_axis_mask=1)
    error("shrink_negative_out_of_range", "index -7 is out of range for dimension 1 of size 6", [0, -7], [0, -6],
          [1, 1], shrink_axis_mask=2)
    error("two_ellipses", "more than one ellipsis", [0, 0], [0, 0], [1, 1], ellipsis_mask=3)
    error("too_many_dims", "indexes more dimensions than the input's 2", [0, 0, 0], [1, 1, 1], [1, 1, 1])


# --- Pad, Tile, Reverse --------------------------------------------------------------


def pad_cases(g):
    r = rng(6)
    for mode in ("REFLECT", "SYMMETRIC"):
        # An empty dimension is fine when nothing is padded onto it (as NumPy).
        x = np.zeros((0, 3), np.float32)
        g.add(f"Pad/{mode.lower()}_empty_dim_unpadded", "Pad", [x],
              {"T": "f32", "paddings": [0, 0, 1, 1], "mode": mode}, [np.pad(x, ((0, 0), (1, 1)), mode=mode.lower())])
    for dtype in ALL:
        x = values(g, r, (3, 4), dtype)
        value = {"bool": 1.0, "u8": 7.0}.get(dtype, -2.5 if dtype.startswith("f") or dtype == "bf16" else -7.0)
        want = np.pad(x, ((1, 2), (0, 3)), mode="constant", constant_values=cast(g, value, dtype))
        g.add(f"Pad/constant_{dtype}", "Pad", [x], {"T": dtype, "paddings": [1, 2, 0, 3], "constant_value": value},
              [want])
        if dtype != "bool":
            for mode in ["REFLECT", "SYMMETRIC"]:
                want = np.pad(x, ((2, 1), (3, 2)), mode=mode.lower())
                g.add(f"Pad/{mode.lower()}_{dtype}", "Pad", [x], {"T": dtype, "paddings": [2, 1, 3, 2], "mode": mode},
                      [want])
    x = values(g, r, (3, 4), "f32")
    g.add("Pad/default_zero", "Pad", [x], {"T": "f32", "paddings": [1, 1, 2, 2]}, [np.pad(x, ((1, 1), (2, 2)))])
    x = values(g, r, (2, 3, 4), "f32")
    for mode in ["CONSTANT", "REFLECT", "SYMMETRIC"]:
        pads = ((1, 1), (2, 1), (0, 3))
        g.add(f"Pad/rank3_{mode.lower()}", "Pad", [x], {"T": "f32", "paddings": [1, 1, 2, 1, 0, 3], "mode": mode},
              [np.pad(x, pads, mode=mode.lower())])
        pads = ((0, 0), (2, 2), (0, 0))
        g.add(f"Pad/middle_only_{mode.lower()}", "Pad", [x], {"T": "f32", "paddings": [0, 0, 2, 2, 0, 0], "mode": mode},
              [np.pad(x, pads, mode=mode.lower())])
    x = values(g, r, (2, 3, 2, 3, 2, 3), "i32")
    pads = ((1, 0), (0, 2), (1, 1), (2, 0), (0, 1), (2, 2))
    for mode in ["CONSTANT", "REFLECT", "SYMMETRIC"]:
        g.add(f"Pad/rank6_{mode.lower()}", "Pad", [x], {"T": "i32", "paddings": list(np.ravel(pads)), "mode": mode},
              [np.pad(x, pads, mode=mode.lower())])
    x = values(g, r, (5,), "f64")
    g.add("Pad/symmetric_whole_edge", "Pad", [x], {"T": "f64", "paddings": [5, 5], "mode": "SYMMETRIC"},
          [np.pad(x, (5, 5), mode="symmetric")])
    g.add("Pad/reflect_most", "Pad", [x], {"T": "f64", "paddings": [4, 4], "mode": "REFLECT"},
          [np.pad(x, (4, 4), mode="reflect")])
    x = np.zeros((0, 3), np.float32)
    g.add("Pad/empty_input", "Pad", [x], {"T": "f32", "paddings": [1, 1, 0, 1], "constant_value": 3.0},
          [np.pad(x, ((1, 1), (0, 1)), constant_values=3.0)])
    x = np.zeros((2, 0), np.float32)
    g.add("Pad/empty_inner", "Pad", [x], {"T": "f32", "paddings": [0, 1, 2, 1], "constant_value": 3.0},
          [np.pad(x, ((0, 1), (2, 1)), constant_values=3.0)])
    g.add("Pad/scalar", "Pad", [np.float32(4)], {"T": "f32", "paddings": []}, [np.float32(4)])
    x = values(g, r, (100, 120), "f32")
    g.add("Pad/large_reflect", "Pad", [x], {"T": "f32", "paddings": [3, 5, 7, 2], "mode": "REFLECT"},
          [np.pad(x, ((3, 5), (7, 2)), mode="reflect")])
    x = values(g, r, (3, 4), "f32")
    g.add("Pad/reflect_too_far", "Pad", [x], {"T": "f32", "paddings": [3, 0, 0, 0], "mode": "REFLECT"},
          error="REFLECT padding of dimension 0 (size 3) must be at most 2, got 3, 0")
    g.add("Pad/symmetric_too_far", "Pad", [x], {"T": "f32", "paddings": [0, 0, 0, 5], "mode": "SYMMETRIC"},
          error="SYMMETRIC padding of dimension 1 (size 4) must be at most 4, got 0, 5")
    g.add("Pad/odd_paddings", "Pad", [x], {"T": "f32", "paddings": [1, 1, 1]}, error="odd number of entries")
    g.add("Pad/negative", "Pad", [x], {"T": "f32", "paddings": [1, -1, 0, 0]}, error="paddings must be >= 0")
    g.add("Pad/wrong_rank", "Pad", [x], {"T": "f32", "paddings": [1, 1]},
          error="paddings has 1 (before, after) pairs for a tensor of rank 2")
    g.add("Pad/bad_mode", "Pad", [x], {"T": "f32", "paddings": [1, 1, 1, 1], "mode": "WRAP"}, error="WRAP")


def tile_cases(g):
    r = rng(7)
    for dtype in ALL:
        x = values(g, r, (2, 3), dtype)
        g.add(f"Tile/{dtype}", "Tile", [x], {"T": dtype, "multiples": [2, 3]}, [np.tile(x, (2, 3))])
    x = values(g, r, (3,), "f32")
    g.add("Tile/1d", "Tile", [x], {"T": "f32", "multiples": [4]}, [np.tile(x, 4)])
    x = values(g, r, (3, 1), "i32")
    g.add("Tile/unit_inner", "Tile", [x], {"T": "i32", "multiples": [2, 5]}, [np.tile(x, (2, 5))])
    x = values(g, r, (2, 3), "f32")
    g.add("Tile/ones", "Tile", [x], {"T": "f32", "multiples": [1, 1]}, [x])
    g.add("Tile/zero_multiple", "Tile", [x], {"T": "f32", "multiples": [0, 2]}, [np.tile(x, (0, 2))])
    x = values(g, r, (2, 1, 3, 1, 2, 2), "i8")
    m = (1, 3, 2, 2, 1, 2)
    g.add("Tile/rank6", "Tile", [x], {"T": "i8", "multiples": list(m)}, [np.tile(x, m)])
    g.add("Tile/scalar", "Tile", [np.float64(1.25)], {"T": "f64", "multiples": []}, [np.float64(1.25)])
    x = np.zeros((0, 2), np.float32)
    g.add("Tile/empty", "Tile", [x], {"T": "f32", "multiples": [3, 2]}, [np.tile(x, (3, 2))])
    x = values(g, r, (50, 40), "f32")
    g.add("Tile/large", "Tile", [x], {"T": "f32", "multiples": [3, 4]}, [np.tile(x, (3, 4))])
    x = values(g, r, (2, 3), "f32")
    g.add("Tile/wrong_rank", "Tile", [x], {"T": "f32", "multiples": [2]},
          error="multiples has 1 entries for a tensor of rank 2")
    g.add("Tile/negative", "Tile", [x], {"T": "f32", "multiples": [1, -2]}, error="multiples must be >= 0, got -2")


def reverse_cases(g):
    r = rng(8)
    for dtype in ALL:
        x = values(g, r, (3, 4), dtype)
        g.add(f"Reverse/both_{dtype}", "Reverse", [x], {"T": dtype, "axis": [0, 1]}, [np.flip(x, (0, 1))])
    x = values(g, r, (3, 4, 5), "f32")
    g.add("Reverse/axis0", "Reverse", [x], {"T": "f32", "axis": [0]}, [np.flip(x, 0)])
    g.add("Reverse/middle", "Reverse", [x], {"T": "f32", "axis": [1]}, [np.flip(x, 1)])
    g.add("Reverse/negative_axis", "Reverse", [x], {"T": "f32", "axis": [-1]}, [np.flip(x, -1)])
    g.add("Reverse/no_axes", "Reverse", [x], {"T": "f32", "axis": []}, [x])
    x = values(g, r, (2, 3, 2, 4, 1, 3), "u8")
    g.add("Reverse/rank6", "Reverse", [x], {"T": "u8", "axis": [0, 2, 5, 4]}, [np.flip(x, (0, 2, 5, 4))])
    x = np.zeros((0, 3), np.float32)
    g.add("Reverse/empty", "Reverse", [x], {"T": "f32", "axis": [0, 1]}, [x])
    g.add("Reverse/scalar", "Reverse", [np.int64(9)], {"T": "i64", "axis": []}, [np.int64(9)])
    x = values(g, r, (100, 300), "f64")
    g.add("Reverse/large", "Reverse", [x], {"T": "f64", "axis": [1]}, [np.flip(x, 1)])
    x = values(g, r, (3, 4), "f32")
    g.add("Reverse/repeated_axis", "Reverse", [x], {"T": "f32", "axis": [1, -1]}, error="axis -1 is repeated")
    g.add("Reverse/axis_out_of_range", "Reverse", [x], {"T": "f32", "axis": [2]},
          error="axis 2 is out of range for rank 2")


# --- Gather, GatherNd, ScatterNd -----------------------------------------------------


def gather_cases(g):
    r = rng(9)
    for dtype in ALL:
        p = values(g, r, (5, 3), dtype)
        i = np.int32([4, 0, 2, 2])
        g.add(f"Gather/{dtype}", "Gather", [p, i], {"T": dtype, "Tindices": "i32"}, [np.take(p, i, axis=0)])
    p = values(g, r, (4, 5, 3), "f32")
    for axis in [0, 1, 2, -1, -3]:
        i = np.int64([[1, 0, 2], [2, 2, 0]])
        g.add(f"Gather/axis{axis}", "Gather", [p, i], {"T": "f32", "Tindices": "i64", "axis": axis},
              [np.take(p, i, axis=axis)])
    g.add("Gather/scalar_index", "Gather", [p, np.int32(3)], {"T": "f32", "Tindices": "i32", "axis": 1},
          [np.take(p, 3, axis=1)])
    g.add("Gather/no_indices", "Gather", [p, np.zeros((0,), np.int32)], {"T": "f32", "Tindices": "i32", "axis": 1},
          [np.take(p, np.zeros((0,), np.int32), axis=1)])
    e = np.zeros((3, 0), np.float32)
    g.add("Gather/empty_rows", "Gather", [e, np.int32([2, 0])], {"T": "f32", "Tindices": "i32"},
          [np.take(e, [2, 0], axis=0)])
    p = values(g, r, (1000, 64), "f32")
    i = r.integers(0, 1000, (500,)).astype(np.int64)
    g.add("Gather/large", "Gather", [p, i], {"T": "f32", "Tindices": "i64"}, [np.take(p, i, axis=0)])
    p = values(g, r, (5, 3), "f32")
    g.add("Gather/index_too_large", "Gather", [p, np.int32([0, 1, 5])], {"T": "f32", "Tindices": "i32"},
          error="index 5 at position 2 is out of range [0, 5) for axis 0")
    g.add("Gather/negative_index", "Gather", [p, np.int64([[0, 1], [-1, 2]])],
          {"T": "f32", "Tindices": "i64", "axis": 1}, error="index -1 at position 2 is out of range [0, 3) for axis 1")
    g.add("Gather/scalar_params", "Gather", [np.float32(1), np.int32([0])], {"T": "f32", "Tindices": "i32"},
          error="params must have rank >= 1")
    g.add("Gather/axis_out_of_range", "Gather", [p, np.int32([0])], {"T": "f32", "Tindices": "i32", "axis": 2},
          error="axis 2 is out of range for rank 2")


def gather_nd_reference(params, indices):
    depth = indices.shape[-1]
    flat = indices.reshape(-1, depth)
    rows = [params[tuple(t)] for t in flat]
    out = np.array(rows, dtype=params.dtype).reshape(indices.shape[:-1] + params.shape[depth:])
    return out


def gather_nd_cases(g):
    r = rng(10)
    g.add("GatherNd/rank0_indices", "GatherNd", [np.float32([1, 2]), np.int32(0)], {"T": "f32", "Tindices": "i32"},
          error="indices must have rank >= 1")
    for dtype in ALL:
        p = values(g, r, (4, 3, 2), dtype)
        i = np.int32([[1, 2], [3, 0], [1, 2]])
        g.add(f"GatherNd/{dtype}", "GatherNd", [p, i], {"T": dtype, "Tindices": "i32"},
              [gather_nd_reference(p, i)])
    p = values(g, r, (4, 3, 2), "f32")
    i = np.int64([[[0, 1, 1], [3, 2, 0]], [[2, 0, 1], [1, 1, 0]]])
    g.add("GatherNd/full_depth", "GatherNd", [p, i], {"T": "f32", "Tindices": "i64"}, [p[tuple(np.moveaxis(i, -1, 0))]])
    i = np.int32([[3], [0]])
    g.add("GatherNd/depth1", "GatherNd", [p, i], {"T": "f32", "Tindices": "i32"}, [p[i[:, 0]]])
    i = np.zeros((2, 0), np.int32)
    g.add("GatherNd/depth0", "GatherNd", [p, i], {"T": "f32", "Tindices": "i32"}, [np.stack([p, p])])
    i = np.int32([2, 1])
    g.add("GatherNd/single_index", "GatherNd", [p, i], {"T": "f32", "Tindices": "i32"}, [p[2, 1]])
    i = np.zeros((0, 2), np.int32)
    g.add("GatherNd/no_indices", "GatherNd", [p, i], {"T": "f32", "Tindices": "i32"}, [np.zeros((0, 2), np.float32)])
    p = values(g, r, (300, 40, 8), "f32")
    i = np.stack([r.integers(0, 300, 400), r.integers(0, 40, 400)], -1).astype(np.int64)
    g.add("GatherNd/large", "GatherNd", [p, i], {"T": "f32", "Tindices": "i64"}, [gather_nd_reference(p, i)])
    p = values(g, r, (4, 3), "f32")
    g.add("GatherNd/out_of_range", "GatherNd", [p, np.int32([[0, 0], [1, 3]])], {"T": "f32", "Tindices": "i32"},
          error="index [1, 3] at position 1 is out of range for params of shape [4,3]")
    g.add("GatherNd/negative_index", "GatherNd", [p, np.int64([[-1, 0]])], {"T": "f32", "Tindices": "i64"},
          error="-1 is not in [0, 4) in dimension 0")
    g.add("GatherNd/too_deep", "GatherNd", [p, np.int32([[0, 0, 0]])], {"T": "f32", "Tindices": "i32"},
          error="indices' last dimension (3) is larger than params' rank (2)")


def scatter_nd_reference(indices, updates, shape):
    out = np.zeros(shape, updates.dtype)
    depth = indices.shape[-1]
    flat = indices.reshape(-1, depth)
    slices = updates.reshape((flat.shape[0],) + tuple(shape[depth:]))
    np.add.at(out, tuple(flat.T), slices)
    return out


def scatter_nd_cases(g):
    r = rng(11)
    for dtype in NUMERIC:
        i = np.int32([[1], [3], [1], [0]])  # row 1 twice: adds
        u = cast(g, r.integers(0, 9, (4, 3)), dtype)
        g.add(f"ScatterNd/{dtype}", "ScatterNd", [i, u], {"T": dtype, "Tindices": "i32", "shape": [5, 3]},
              [scatter_nd_reference(i, u, (5, 3))])
    i = np.int64([[0, 1], [2, 2], [0, 1], [1, 0]])
    u = values(g, r, (4,), "f64")
    g.add("ScatterNd/elements", "ScatterNd", [i, u], {"T": "f64", "Tindices": "i64", "shape": [3, 3]},
          [scatter_nd_reference(i, u, (3, 3))], rtol=1e-12, atol=1e-12)
    i = np.int32([[[0, 1], [1, 1]], [[0, 1], [2, 0]]])
    u = values(g, r, (2, 2, 4), "f32")
    g.add("ScatterNd/batched_slices", "ScatterNd", [i, u], {"T": "f32", "Tindices": "i32", "shape": [3, 2, 4]},
          [scatter_nd_reference(i, u, (3, 2, 4))], rtol=g.tolerance["f32"][0], atol=g.tolerance["f32"][1])
    i = np.int32([[2], [2], [2]])
    u = np.int8([100, 100, 100])
    g.add("ScatterNd/int_wraps", "ScatterNd", [i, u], {"T": "i8", "Tindices": "i32", "shape": [3]},
          [np.int8([0, 0, (300 + 128) % 256 - 128])])
    i = np.zeros((0, 1), np.int32)
    u = np.zeros((0, 3), np.float32)
    g.add("ScatterNd/no_updates", "ScatterNd", [i, u], {"T": "f32", "Tindices": "i32", "shape": [2, 3]},
          [np.zeros((2, 3), np.float32)])
    i = np.zeros((0, 1), np.int32)
    u = np.zeros((0, 0), np.float32)
    g.add("ScatterNd/empty_output", "ScatterNd", [i, u], {"T": "f32", "Tindices": "i32", "shape": [2, 0]},
          [np.zeros((2, 0), np.float32)])
    i = r.integers(0, 50, (2000, 1)).astype(np.int64)
    u = cast(g, r.integers(-5, 5, (2000, 300)), "f32")
    g.add("ScatterNd/large", "ScatterNd", [i, u], {"T": "f32", "Tindices": "i64", "shape": [50, 300]},
          [scatter_nd_reference(i, u, (50, 300))])
    u = np.float32([[1, 2, 3]])
    g.add("ScatterNd/out_of_range", "ScatterNd", [np.int32([[4]]), u], {"T": "f32", "Tindices": "i32", "shape": [4, 3]},
          error="index [4] at position 0 is out of range for the output of shape [4,3]")
    g.add("ScatterNd/bad_updates", "ScatterNd", [np.int32([[1]]), np.float32([[1, 2]])],
          {"T": "f32", "Tindices": "i32", "shape": [4, 3]}, error="updates has shape [1,2], expected [1,3]")
    g.add("ScatterNd/negative_shape", "ScatterNd", [np.int32([[1]]), np.float32([1])],
          {"T": "f32", "Tindices": "i32", "shape": [4, -3]}, error="has a negative dimension")


# --- OneHot, Fill, ZerosLike, OnesLike, Range ----------------------------------------


def one_hot_reference(indices, depth, axis, on, off, dtype):
    """On and off values exactly representable in |dtype| (bf16 as f32)."""
    hot = np.asarray(indices).astype(np.int64)[..., None] == np.arange(depth)
    out = np.where(hot, on, off)
    rank = np.ndim(indices) + 1
    return np.moveaxis(out, -1, axis if axis >= 0 else rank + axis).astype(NP[dtype])


def one_hot_cases(g):
    i = np.int32([0, 2, 1, 5, -1])  # 5 and -1 are outside [0, 3): rows of off_value
    for dtype in NUMERIC:
        on, off = (5.0, -1.0) if dtype != "u8" else (5.0, 2.0)
        g.add(f"OneHot/{dtype}", "OneHot", [i], {"T": dtype, "TI": "i32", "depth": 3, "on_value": on, "off_value": off},
              [one_hot_reference(i, 3, -1, on, off, dtype)])
    g.add("OneHot/defaults", "OneHot", [i], {"TI": "i32", "depth": 4}, [one_hot_reference(i, 4, -1, 1, 0, "f32")])
    i2 = np.int64([[0, 3], [2, 1], [1, 1]])
    for axis in [0, 1, 2, -1, -2, -3]:
        g.add(f"OneHot/axis{axis}", "OneHot", [i2], {"T": "f32", "TI": "i64", "depth": 4, "axis": axis},
              [one_hot_reference(i2, 4, axis, 1, 0, "f32")])
    u = np.uint8([0, 255, 3, 1])
    g.add("OneHot/u8_indices", "OneHot", [u], {"T": "i32", "TI": "u8", "depth": 4},
          [one_hot_reference(u, 4, -1, 1, 0, "i32")])
    g.add("OneHot/scalar_index", "OneHot", [np.int32(2)], {"T": "f64", "TI": "i32", "depth": 3},
          [one_hot_reference(np.int32(2), 3, -1, 1, 0, "f64")])
    g.add("OneHot/depth0", "OneHot", [i], {"T": "f32", "TI": "i32", "depth": 0}, [np.zeros((5, 0), np.float32)])
    g.add("OneHot/no_indices", "OneHot", [np.zeros((0,), np.int32)], {"T": "f32", "TI": "i32", "depth": 3},
          [np.zeros((0, 3), np.float32)])
    big = rng(12).integers(-1, 100, (300, 20)).astype(np.int32)
    g.add("OneHot/large", "OneHot", [big], {"T": "f32", "TI": "i32", "depth": 100, "axis": 1},
          [one_hot_reference(big, 100, 1, 1, 0, "f32")])
    g.add("OneHot/axis_out_of_range", "OneHot", [i], {"T": "f32", "TI": "i32", "depth": 3, "axis": 2},
          error="axis 2 is out of range for rank 2")
    g.add("OneHot/negative_depth", "OneHot", [i], {"T": "f32", "TI": "i32", "depth": -1},
          error="depth must be >= 0, got -1")


def fill_cases(g):
    r = rng(13)
    for dtype in ALL:
        v = values(g, r, (), dtype)
        g.add(f"Fill/{dtype}", "Fill", [np.int32([2, 3]), v], {"T": dtype, "index_type": "i32"},
              [np.full((2, 3), v, dtype=v.dtype)])
    g.add("Fill/i64_dims", "Fill", [np.int64([3, 1, 2]), np.float32(1.5)], {"T": "f32", "index_type": "i64"},
          [np.full((3, 1, 2), 1.5, np.float32)])
    g.add("Fill/scalar", "Fill", [np.zeros((0,), np.int32), np.int16(-4)], {"T": "i16", "index_type": "i32"},
          [np.int16(-4)])
    g.add("Fill/empty", "Fill", [np.int32([0, 3]), np.float32(1)], {"T": "f32", "index_type": "i32"},
          [np.zeros((0, 3), np.float32)])
    g.add("Fill/large", "Fill", [np.int64([300, 200]), np.float64(-0.5)], {"T": "f64", "index_type": "i64"},
          [np.full((300, 200), -0.5)])
    g.add("Fill/negative_dim", "Fill", [np.int32([2, -1]), np.float32(1)], {"T": "f32", "index_type": "i32"},
          error="has a negative dimension")
    g.add("Fill/value_not_scalar", "Fill", [np.int32([2]), np.float32([1, 2])], {"T": "f32", "index_type": "i32"},
          error="value must be a scalar")


def zeros_ones_like_cases(g):
    r = rng(14)
    for op, ref in [("ZerosLike", np.zeros_like), ("OnesLike", np.ones_like)]:
        for dtype in NUMERIC + ["bool"]:
            x = values(g, r, (2, 3), dtype)
            g.add(f"{op}/{dtype}", op, [x], {"T": dtype}, [ref(x)])
        g.add(f"{op}/scalar", op, [np.float64(3)], {"T": "f64"}, [ref(np.float64(3))])
        g.add(f"{op}/empty", op, [np.zeros((0, 2), np.int32)], {"T": "i32"}, [ref(np.zeros((0, 2), np.int32))])


def range_cases(g):
    def add(name, dtype, start, limit, delta, **tol):
        t = NP[dtype]
        s, lim, d = t(start), t(limit), t(delta)
        if dtype in ("f32", "f64"):
            # float64 arithmetic on the exact inputs, rounded once.
            want = np.arange(np.float64(s), np.float64(lim), np.float64(d)).astype(t)
        else:
            want = np.arange(s, lim, d, dtype=t)
        g.add(f"Range/{name}", "Range", [s, lim, d], {"Tidx": dtype}, [want], **tol)

    add("i32", "i32", 2, 11, 3)
    add("i32_limit_excluded", "i32", 0, 12, 3)
    add("i32_negative_delta", "i32", 10, 1, -3)
    add("i64", "i64", -5, 5, 1)
    add("i64_big", "i64", 10**12, 10**12 + 20, 7)
    add("i32_empty", "i32", 3, 3, 1)
    add("f32", "f32", 0, 1, 0.1, rtol=2e-6, atol=1e-6)
    add("f32_negative_delta", "f32", 1.5, -2, -0.25, rtol=2e-6, atol=1e-6)
    add("f64", "f64", -1, 2.05, 0.3, rtol=1e-12, atol=1e-12)
    add("f64_empty", "f64", 1.0, 1.0, 0.5)
    add("large", "i32", 0, 100000, 1)
    add("i64_beyond_2_53", "i64", 2**62, 2**62 + 3, 1)  # exact counting, not in double
    # NumPy's arange overflows computing limit - start = 2^63 here and returns
    # nothing; by hand the sequence is -2^62, -2^61, 0, 2^61.
    g.add("Range/i64_full_span", "Range", [np.int64(-2**62), np.int64(2**62), np.int64(2**61)], {"Tidx": "i64"},
          [np.int64([-2**62, -2**61, 0, 2**61])])
    g.add("Range/zero_delta", "Range", [np.int32(0), np.int32(5), np.int32(0)], {"Tidx": "i32"},
          error="delta must not be 0")
    g.add("Range/wrong_direction", "Range", [np.float32(0), np.float32(5), np.float32(-1)], {"Tidx": "f32"},
          error="cannot reach limit")
    g.add("Range/not_scalar", "Range", [np.int32([0]), np.int32(5), np.int32(1)], {"Tidx": "i32"},
          error="start, limit and delta must be scalars")


# --- Ops the runtime implements ------------------------------------------------------


def runtime_cases(g):
    r = rng(15)
    x = values(g, r, (2, 3, 4), "f32")
    g.add("Reshape/basic", "Reshape", [x, np.int64([6, 4])], {"T": "f32", "Tshape": "i64"}, [x.reshape(6, 4)])
    g.add("Reshape/infer", "Reshape", [x, np.int64([-1, 2])], {"T": "f32", "Tshape": "i64"}, [x.reshape(-1, 2)])
    g.add("Reshape/i32_shape", "Reshape", [x, np.int32([4, 3, 2])], {"T": "f32", "Tshape": "i32"},
          [x.reshape(4, 3, 2)])
    g.add("Reshape/to_scalar", "Reshape", [np.int32([7]), np.zeros((0,), np.int64)], {"T": "i32", "Tshape": "i64"},
          [np.int32(7)])
    for dtype in ["bf16", "f16", "bool", "u8"]:
        v = values(g, r, (2, 3), dtype)
        g.add(f"Reshape/{dtype}", "Reshape", [v, np.int64([3, 2])], {"T": dtype, "Tshape": "i64"}, [v.reshape(3, 2)])
    g.add("Reshape/empty", "Reshape", [np.zeros((0, 4), np.float32), np.int64([2, 0, 3])],
          {"T": "f32", "Tshape": "i64"}, [np.zeros((2, 0, 3), np.float32)])
    g.add("Reshape/wrong_count", "Reshape", [x, np.int64([5, 5])], {"T": "f32", "Tshape": "i64"},
          error="cannot reshape")
    g.add("Reshape/two_unknowns", "Reshape", [x, np.int64([-1, -1])], {"T": "f32", "Tshape": "i64"},
          error="more than one -1")

    for axis in [0, 1, 3, -1, -4]:
        g.add(f"ExpandDims/axis{axis}", "ExpandDims", [x], {"T": "f32", "axis": axis}, [np.expand_dims(x, axis)])
    g.add("ExpandDims/scalar", "ExpandDims", [np.int64(3)], {"T": "i64", "axis": 0}, [np.int64([3])])
    g.add("ExpandDims/axis_out_of_range", "ExpandDims", [x], {"T": "f32", "axis": 4},
          error="axis 4 is out of range for rank 4")

    y = values(g, r, (1, 3, 1, 2), "i32")
    g.add("Squeeze/all", "Squeeze", [y], {"T": "i32"}, [np.squeeze(y)])
    g.add("Squeeze/one_axis", "Squeeze", [y], {"T": "i32", "axis": [2]}, [np.squeeze(y, 2)])
    g.add("Squeeze/negative_axis", "Squeeze", [y], {"T": "i32", "axis": [-4]}, [np.squeeze(y, 0)])
    g.add("Squeeze/to_scalar", "Squeeze", [np.float32([[5]])], {"T": "f32"}, [np.float32(5)])
    g.add("Squeeze/not_one", "Squeeze", [y], {"T": "i32", "axis": [1]},
          error="cannot squeeze axis 1 of [1,3,1,2]: its size is 3, not 1")

    for out_type, t in [("i32", np.int32), ("i64", np.int64)]:
        g.add(f"Shape/{out_type}", "Shape", [x], {"T": "f32", "out_type": out_type}, [np.array(x.shape, t)])
        g.add(f"Size/{out_type}", "Size", [x], {"T": "f32", "out_type": out_type}, [t(x.size)])
    g.add("Shape/default_i32", "Shape", [y], {"T": "i32"}, [np.int32(y.shape)])
    g.add("Shape/scalar", "Shape", [np.float64(1)], {"T": "f64"}, [np.zeros((0,), np.int32)])
    g.add("Shape/empty", "Shape", [np.zeros((3, 0), np.bool_)], {"T": "bool"}, [np.int32([3, 0])])
    g.add("Size/scalar", "Size", [np.float64(1)], {"T": "f64"}, [np.int32(1)])
    g.add("Size/empty", "Size", [np.zeros((3, 0), np.bool_)], {"T": "bool"}, [np.int32(0)])
    g.add("Rank/rank3", "Rank", [x], {"T": "f32"}, [np.int32(3)])
    g.add("Rank/scalar", "Rank", [np.int8(1)], {"T": "i8"}, [np.int32(0)])
    g.add("Rank/empty", "Rank", [np.zeros((0, 2), np.float16)], {"T": "f16"}, [np.int32(2)])

    # Every case's inputs are Const nodes, so each case runs Const too; a
    # case cannot spell the tensor attr 'value' itself, so Const's own case
    # checks that a Const without one is refused.
    g.add("Const/missing_value", "Const", [], {"dtype": "f32"}, error='missing attr "value"')

    for op in ["Identity", "StopGradient"]:
        for dtype in ALL:
            v = values(g, r, (2, 3), dtype)
            g.add(f"{op}/{dtype}", op, [v], {"T": dtype}, [v])
        g.add(f"{op}/scalar", op, [np.float32(2)], {"T": "f32"}, [np.float32(2)])
        g.add(f"{op}/empty", op, [np.zeros((0, 3), np.int64)], {"T": "i64"}, [np.zeros((0, 3), np.int64)])


def cases(g):
    all_cases(g)


def all_cases(g):
    transpose_cases(g)
    concat_cases(g)
    split_cases(g)
    slice_cases(g)
    strided_slice_cases(g)
    pad_cases(g)
    tile_cases(g)
    reverse_cases(g)
    gather_cases(g)
    gather_nd_cases(g)
    scatter_nd_cases(g)
    one_hot_cases(g)
    fill_cases(g)
    zeros_ones_like_cases(g)
    range_cases(g)
    runtime_cases(g)
