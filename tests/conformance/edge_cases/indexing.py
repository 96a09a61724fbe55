"""Indexing: gathers, scatters, segments, partitions, Unique, OneHot and
InvertPermutation, then the element indexing of GatherElements,
ScatterElements, TopK and NonZero."""
import math

import numpy as np

from gen_cases import NUMPY_DTYPE, to_bf16
from cases import indexing, sparse

from .movement import add_move, movement_input
from .values import FLOATS, INF, NAN, RANK_SHAPES, arr, choices, dense, edges, int_range, native, objects, out_int, \
    round_native, storage, tiled, tol, unary_layouts


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
