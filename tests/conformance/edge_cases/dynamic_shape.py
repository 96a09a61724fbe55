"""The ops whose shape-like parameters are run-time tensors (DynamicSlice,
DynamicPad, DynamicTile, DynamicSum, DynamicExpandDims, DynamicSqueeze,
DynamicSplit): the edge values moved (or summed) as ONNX's Slice, Pad,
Tile, ReduceSum, Unsqueeze, Squeeze and Split do, with the extreme index
values of the binding's Tidx."""
import numpy as np

from gen_cases import NUMPY_DTYPE

from .movement import add_move, movement_input
from .reductions import edge_rows, reduce_ref
from .values import FLOATS, INF, NAN, RANK_SHAPES, SIGNED, arr, dense, edges, storage, tiled, tol


def index_range(ti):
    i = np.iinfo(NUMPY_DTYPE[ti])
    return int(i.min), int(i.max)


def gen_dynamic_shape(edge, op, binding):
    d, ti = binding["T"], binding["Tidx"]
    x = movement_input(d)  # (3, 5)
    x8 = arr(tiled(d, 16), d, RANK_SHAPES[8])
    s = storage(d)

    def ints(v):
        return np.array(v, NUMPY_DTYPE[ti]).reshape(-1)

    GEN[op](edge, op, binding, d, x, x8, s, ints, index_range(ti))


def gen_slice(edge, op, binding, d, x, x8, s, ints, lim):
    lo, hi = lim
    for layout, v, starts, ends, axes, steps, idx in [
            ("step2", x, [0, 4], [3, 0], [0, 1], [2, -2], np.s_[0:3:2, 4:0:-2]),
            ("reverse_all", x, [-1, -1], [lo, lo], [1, 0], [-1, -1], np.s_[::-1, ::-1]),
            ("index_max", x, [1, lo], [hi, hi], [-1, 0], [1, 1], np.s_[:, 1:]),
            ("index_min_step", x, [2, -1], [lo, lo], [0, 1], [lo, lo], np.s_[2::lo, -1::lo]),
            ("empty", x, [2], [1], [0], [1], np.s_[2:1]),
            ("none", x, [], [], [], [], np.s_[:, :]),
            ("rank8", x8, [0, 1], [2, 0], [3, -1], [1, -1], np.s_[:, :, :, 0:2, :, :, :, 1:0:-1])]:
        add_move(edge, op, binding, layout, [v] + [ints(a) for a in (starts, ends, axes, steps)], [dense(v[idx])])
    edge.add(op, binding, "zero_step", [x] + [ints(a) for a in ([0], [1], [0], [0])], error="a step is 0")


def gen_pad(edge, op, binding, d, x, x8, s, ints, lim):
    r8 = [1] + [0] * 7 + [0] * 7 + [1]
    for layout, v, pads in [("2d", x, [1, 2, 2, 1]), ("negative", x, [-1, 2, 1, -2]), ("none", x, [0, 0, 0, 0]),
                            ("rank8", x8, r8)]:
        rank = v.ndim
        cropped = v[tuple(slice(max(-pads[i], 0), v.shape[i] - max(-pads[rank + i], 0)) for i in range(rank))]
        width = [(max(pads[i], 0), max(pads[rank + i], 0)) for i in range(rank)]
        for cv in ([0.0, -0.0, NAN, INF] if d in FLOATS else [0, 1, -1] if d in SIGNED else [0, 1]):
            want = np.pad(cropped, width, mode="constant", constant_values=np.array(cv).astype(s))
            add_move(edge, op, binding, f"{layout}_constant_{cv}", [v, ints(pads), arr(cv, d)], [want],
                     {"mode": "constant"})
        for mode in ("reflect", "edge"):
            add_move(edge, op, binding, f"{layout}_{mode}", [v, ints(pads), arr(0, d)],
                     [np.pad(cropped, width, mode=mode)], {"mode": mode})
    add_move(edge, op, binding, "empty", [np.zeros((0, 2), s), ints([1, 0, 1, 1]), arr(edges(d)[0], d)],
             [np.full((2, 3), arr(edges(d)[0], d), s)], {"mode": "constant"})
    edge.add(op, binding, "reflect_too_far", [x, ints([3, 0, 0, 0]), arr(0, d)], attrs={"mode": "reflect"},
             error="reflect padding of dimension 0 must be smaller than its size 3")


def gen_tile(edge, op, binding, d, x, x8, s, ints, lim):
    for layout, v, reps in [("2d", x, [2, 1]), ("zero", x, [0, 2]), ("rank8", x8, [1, 2, 1, 1, 1, 1, 1, 2]),
                            ("empty", np.zeros((0, 3), s), [3, 2]), ("scalar", arr(edges(d)[0], d), [])]:
        add_move(edge, op, binding, layout, [v, ints(reps)], [dense(np.tile(v, reps)) if reps else v])
    edge.add(op, binding, "negative", [x, ints([1, -1])], error="repeats must be >= 0, got -1 for dimension 1")


def gen_sum(edge, op, binding, d, x, x8, s, ints, lim):
    rows = edge_rows("Sum", d)
    for layout, v, axes, keep in [("rows", rows, [1], False), ("rows_keep", rows, [-1], True),
                                  ("columns", rows, [0], False), ("all", rows, [], False), ("all_keep", rows, [], True),
                                  ("rank8", x8, [1, 3, 7], False), ("scalar", arr(edges(d)[0], d), [], True),
                                  ("empty_rows", np.zeros((0, 3), s), [1], False),
                                  ("empty_axis", np.zeros((0, 3), s), [0], True)]:
        want = reduce_ref("Sum", v, d, axes, keep)
        edge.add(op, binding, layout, [v, ints(axes)], [want], {"keep_dims": keep}, **tol(d, 4))
    edge.add(op, binding, "noop", [rows, ints([])], [rows], {"noop_with_empty_axes": True}, signed_zeros=True)
    edge.add(op, binding, "repeated", [rows, ints([0, -2])], error="axes entry -2 repeats axis 0")


def gen_expand_dims(edge, op, binding, d, x, x8, s, ints, lim):
    for layout, v, axes in [("front_back", x, [0, -1]), ("middle", x, [1]), ("scalar", arr(edges(d)[0], d), [0]),
                            ("empty", np.zeros((0, 3), s), [2]), ("none", x, []),
                            ("to_rank8", x8.reshape(2, 2, 2, 2), [0, 2, 4, 6])]:
        add_move(edge, op, binding, layout, [v, ints(axes)], [np.expand_dims(v, tuple(axes)) if axes else v])
    edge.add(op, binding, "repeated", [x, ints([1, -3])], error="axes entry -3 repeats axis 1")


def gen_squeeze(edge, op, binding, d, x, x8, s, ints, lim):
    for layout, v, axes in [("some", x8, [1, -2]), ("all", x8, [1, 2, 4, 6]), ("none", x8, []),
                            ("empty", np.zeros((0, 1), s), [1]), ("to_scalar", arr([[edges(d)[0]]], d), [0, 1])]:
        add_move(edge, op, binding, layout, [v, ints(axes)], [np.squeeze(v, tuple(axes)) if axes else v])
    edge.add(op, binding, "not_one", [x, ints([0])], error="cannot squeeze axis 0 of [3,5]: its size is 3, not 1")


def gen_split(edge, op, binding, d, x, x8, s, ints, lim):
    for layout, v, split, axis in [("rows", x, [1, 0, 2], 0), ("columns", x, [2, 3], -1), ("one", x, [5], 1),
                                   ("rank8", x8, [1, 1], 7), ("empty", np.zeros((0, 4), s), [3, 1], 1)]:
        parts = np.split(v, np.cumsum(split)[:-1], axis=axis)
        add_move(edge, op, binding, layout, [v, ints(split)], [dense(p) for p in parts],
                 {"num_split": len(split), "axis": axis})
    edge.add(op, binding, "bad_sum", [x, ints([1, 2])], attrs={"num_split": 2, "axis": 1},
             error="split's entries [1,2] sum to 3, but dimension 1 of [3,5] has size 5")


GEN = {"DynamicSlice": gen_slice, "DynamicPad": gen_pad, "DynamicTile": gen_tile, "DynamicSum": gen_sum,
       "DynamicExpandDims": gen_expand_dims, "DynamicSqueeze": gen_squeeze, "DynamicSplit": gen_split}
