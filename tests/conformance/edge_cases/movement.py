"""Data movement (Identity to Select), casts, and the shape helpers of
gradients (ConcatOffset, SumToShape, StridedSliceGrad)."""
import math

import numpy as np

from gen_cases import NUMPY_DTYPE, to_bf16
from cases.ieee import round_bf16

from .reductions import edge_rows, reduce_ref
from .values import FLOATS, INF, INTS, NAN, RANK_SHAPES, SIGNED, arr, choices, dense, edges, int_range, native, \
    storage, tiled, tol, unary_layouts, wrap


# --- data movement --------------------------------------------------------------------

def movement_input(d, shape=(3, 5)):
    return arr(tiled(d, int(np.prod(shape))), d, shape)


def add_move(edge, op, binding, layout, inputs, outputs, attrs=None):
    edge.add(op, binding, layout, inputs, outputs, attrs, signed_zeros=True)


def gen_movement(edge, op, binding):
    d = binding.get("T", binding.get("dtype"))
    x = movement_input(d)
    x8 = arr(tiled(d, 16), d, RANK_SHAPES[8])
    s = storage(d)
    if op in ("Identity", "StopGradient"):
        for layout, v in unary_layouts(edges(d), d):
            add_move(edge, op, binding, layout, [v], [v])
    elif op in ("ZerosLike", "OnesLike"):
        fill = 0 if op == "ZerosLike" else 1
        for layout, v in unary_layouts(edges(d), d):
            add_move(edge, op, binding, layout, [v], [np.full(v.shape, fill, s)])
    elif op in ("Shape", "Size", "Rank"):
        outs = choices(binding, "out_type", ("i32", "i64")) if op != "Rank" else (None,)
        for out_type in outs:
            b = dict(binding, out_type=out_type) if out_type else binding
            t = NUMPY_DTYPE[out_type] if out_type else np.int32
            for layout, v in unary_layouts(edges(d), d):
                ref = {"Shape": np.array(v.shape, t), "Size": np.array(v.size, t), "Rank": np.array(v.ndim, t)}[op]
                edge.add(op, b, layout, [v], [ref])
    elif op == "Reshape":
        for tshape in choices(binding, "Tshape", ("i32", "i64")):
            b = dict(binding, Tshape=tshape)
            t = NUMPY_DTYPE[tshape]
            for layout, v, shape in [("to_rank8", x8.reshape(16), [2, 1, 2, 1, 2, 1, 2, 1]),
                                     ("inferred", x, [-1, 3]), ("to_scalar", arr(edges(d)[0], d, (1, 1)), []),
                                     ("empty", np.zeros((0, 4), s), [2, 0, 3]), ("from_rank8", x8, [16])]:
                add_move(edge, op, b, layout, [v, np.array(shape, t)], [v.reshape(shape)])
            edge.add(op, b, "bad_count", [x, np.array([4, 4], t)], error="(15 elements) to [4,4] (16 elements)")
    elif op == "ExpandDims":
        for axis in (0, 2, -1):
            add_move(edge, op, binding, f"axis{axis}", [x], [np.expand_dims(x, axis)], {"axis": axis})
        add_move(edge, op, binding, "scalar", [arr(edges(d)[0], d)], [arr([edges(d)[0]], d)], {"axis": 0})
        add_move(edge, op, binding, "rank7_to_8", [x8.reshape(2, 1, 2, 2, 1, 2, 1)],
                 [x8.reshape(2, 1, 2, 2, 1, 2, 1, 1)], {"axis": -1})
    elif op == "Squeeze":
        add_move(edge, op, binding, "all", [x8], [np.squeeze(x8)], {"axis": []})
        add_move(edge, op, binding, "some", [x8], [np.squeeze(x8, axis=(1, 2))], {"axis": [1, 2]})
        add_move(edge, op, binding, "empty", [np.zeros((0, 1), s)], [np.zeros((0,), s)], {"axis": [1]})
        edge.add(op, binding, "not_one", [x], attrs={"axis": [0]}, error="cannot squeeze axis 0")
    elif op == "Transpose":
        for layout, v, perm in [("2d", x, [1, 0]), ("default", x, []), ("rank8", x8, [7, 0, 6, 1, 5, 2, 4, 3]),
                                ("empty", np.zeros((0, 2, 3), s), [2, 0, 1]), ("scalar", arr(edges(d)[1], d), [])]:
            want = np.transpose(v, None if not perm else perm)
            add_move(edge, op, binding, layout, [v], [dense(want)], {"perm": perm})
    elif op == "Reverse":
        for layout, v, axis in [("rows", x, [0]), ("both", x, [0, -1]), ("rank8", x8, [0, 3, 7]),
                                ("none", x, []), ("empty", np.zeros((0, 3), s), [0, 1])]:
            want = np.flip(v, axis=tuple(axis)) if axis else v
            add_move(edge, op, binding, layout, [v], [dense(want)], {"axis": axis})
    elif op == "Tile":
        for layout, v, mult in [("2d", x, [2, 1]), ("zero", x, [0, 2]), ("rank8", x8, [1, 2, 1, 1, 1, 1, 1, 2]),
                                ("empty", np.zeros((0, 3), s), [3, 2])]:
            add_move(edge, op, binding, layout, [v], [np.tile(v, mult)], {"multiples": mult})
    elif op == "Pad":
        for mode in ("CONSTANT", "REFLECT", "SYMMETRIC"):
            for layout, v, pads in [("2d", x, [1, 2, 2, 1]), ("none", x, [0, 0, 0, 0]),
                                    ("rank8", x8, [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])]:
                width = list(zip(pads[::2], pads[1::2]))
                attrs = {"paddings": pads, "mode": mode}
                if mode == "CONSTANT":
                    values = [0.0, -0.0, NAN, INF] if d in FLOATS else [0, 1, -1] if d in SIGNED else [0, 1]
                    for cv in values:
                        fill = np.array(cv).astype(s)
                        add_move(edge, op, binding, f"{layout}_{mode}_{cv}", [v],
                                 [np.pad(v, width, mode="constant", constant_values=fill)],
                                 dict(attrs, constant_value=float(cv)))
                else:
                    add_move(edge, op, binding, f"{layout}_{mode}", [v],
                             [np.pad(v, width, mode=mode.lower())], attrs)
            if mode == "CONSTANT":
                add_move(edge, op, binding, "empty_CONSTANT", [np.zeros((0, 2), s)],
                         [np.zeros((2, 3), s)], {"paddings": [1, 1, 0, 1], "mode": mode})
    elif op == "Slice":
        for layout, v, begin, size in [("2d", x, [1, 2], [2, -1]), ("empty", x, [3, 0], [0, 5]),
                                       ("all", x, [0, 0], [-1, -1]),
                                       ("rank8", x8, [1, 0, 0, 1, 0, 0, 0, 1], [1, 1, 1, 1, 1, 2, 1, 1])]:
            idx = tuple(slice(b, None if z == -1 else b + z) for b, z in zip(begin, size))
            add_move(edge, op, binding, layout, [v], [dense(v[idx])], {"begin": begin, "size": size})
    elif op == "StridedSlice":
        imin = -(2 ** 63)
        for layout, v, begin, end, strides, idx in [
                ("step2", x, [0, 4], [3, 0], [2, -2], np.s_[0:3:2, 4:0:-2]),
                ("reverse_all", x, [-1, -1], [-4, -6], [-1, -1], np.s_[-1:-4:-1, -1:-6:-1]),
                ("int64_min", x, [2, 0], [imin, 5], [imin, 1], np.s_[2::imin, 0:5:1]),
                ("empty", x, [2, 0], [1, 5], [1, 1], np.s_[2:1, 0:5]),
                ("rank8", x8, [0] * 8, [2] * 8, [1, 1, 1, 1, 1, 1, 1, -1], np.s_[0:2, 0:2, 0:2, 0:2, 0:2, 0:2, 0:2, 0:2:-1])]:
            add_move(edge, op, binding, layout, [v], [dense(v[idx])],
                     {"begin": begin, "end": end, "strides": strides})
    elif op == "Concat":
        for layout, vs, axis in [("rows", [x, x[:1], x[:0]], 0), ("columns", [x, x[:, 2:]], -1),
                                 ("one", [x], 1), ("rank8", [x8, x8], 7), ("empty", [x[:0], x[:0]], 0)]:
            b = dict(binding, N=len(vs))
            add_move(edge, op, b, layout, vs, [np.concatenate(vs, axis=axis)], {"axis": axis})
    elif op == "Pack":
        for layout, vs, axis in [("front", [x, x[::-1]], 0), ("back", [x, x, x], -1), ("scalars",
                                 [arr(v, d) for v in edges(d)], 0), ("empty", [x[:0]] * 2, 1)]:
            b = dict(binding, N=len(vs))
            add_move(edge, op, b, layout, vs, [np.stack(vs, axis=axis)], {"axis": axis})
    elif op == "Split":
        for layout, v, n, axis in [("rows", x, 3, 0), ("columns", x, 5, -1), ("one", x, 1, 1),
                                   ("rank8", x8, 2, 7), ("empty", np.zeros((0, 4), s), 2, 1)]:
            add_move(edge, op, binding, layout, [v], [dense(p) for p in np.split(v, n, axis=axis)],
                     {"num_split": n, "axis": axis})
        edge.add(op, binding, "uneven", [x], attrs={"num_split": 2, "axis": 1}, error="into 2 equal parts")
    elif op == "BroadcastTo":
        for tidx in choices(binding, "Tidx", ("i32", "i64")):
            b = dict(binding, Tidx=tidx)
            for layout, v, shape in [("row", x[:1], [4, 5]), ("scalar", arr(edges(d)[0], d), [2, 3]),
                                     ("rank8", x[0, :2].reshape(2, 1), [1, 2, 1, 2, 1, 1, 2, 2]),
                                     ("empty", x[:1], [0, 5]), ("same", x, [3, 5])]:
                add_move(edge, op, b, layout, [v, np.array(shape, NUMPY_DTYPE[tidx])],
                         [dense(np.broadcast_to(v, shape))])
            edge.add(op, b, "incompatible", [x, np.array([2, 5], NUMPY_DTYPE[tidx])], error="cannot be broadcast to [2,5]")
    elif op == "Fill":
        for index in choices(binding, "index_type", ("i32", "i64")):
            b = dict(binding, index_type=index)
            for k, value in enumerate(edges(d)):
                for shape in ([2, 3], [], [0, 4]):
                    add_move(edge, op, b, f"v{k}_{'x'.join(map(str, shape)) or 'scalar'}",
                             [np.array(shape, NUMPY_DTYPE[index]), arr(value, d)], [np.full(shape, arr(value, d), s)])
            edge.add(op, b, "negative_dim", [np.array([2, -1], NUMPY_DTYPE[index]), arr(edges(d)[0], d)], error="has a negative dimension")
    elif op == "Select":
        e = edges(d)
        n = len(e)
        cond = np.array([i % 3 == 0 for i in range(n)])
        t, f = arr(e, d), arr(e[::-1], d)
        add_move(edge, op, binding, "same_shape", [cond, t, f], [np.where(cond, t, f)])
        add_move(edge, op, binding, "scalar_cond", [np.array(True), t, f], [t])
        add_move(edge, op, binding, "broadcast", [cond.reshape(n, 1), t.reshape(1, n), arr(e[0], d)],
                 [np.where(cond.reshape(n, 1), t.reshape(1, n), arr(e[0], d))])
        add_move(edge, op, binding, "empty", [np.zeros((0,), bool), t[:0], f[:0]], [t[:0]])
        add_move(edge, op, binding, "rank8", [cond[:1].reshape([1] * 8), x8, x8[::-1]],
                 [np.where(cond[:1].reshape([1] * 8), x8, x8[::-1])])
    else:
        raise KeyError(op)


# --- casts -------------------------------------------------------------------------

def cast_ref(values, src, dst):
    """Weft's Cast of the exact values |values| (Python numbers) from |src| to
    |dst|, by the rules `weft ops Cast` gives."""
    if dst == "bool":
        return np.array([v != 0 for v in values], bool)  # NaN != 0
    if dst in INTS:
        lo, hi = int_range(dst)
        out = []
        for v in values:
            if src in FLOATS:
                if math.isnan(v):
                    out.append(0)
                elif math.isinf(v):
                    out.append(hi if v > 0 else lo)
                else:
                    out.append(min(max(int(v), lo), hi))  # int() truncates toward zero; then saturate
            else:
                out.append(wrap(int(v), dst))
        return np.array(out, storage(dst))
    if dst == "bf16":
        return np.array([round_bf16(int(v) if src not in FLOATS else float(v)) for v in values], np.float32)
    if src not in FLOATS:
        return np.array([exact_int_to_float(int(v), dst) for v in values], storage(dst))
    return np.array(values, np.float64).astype(storage(dst))  # one rounding from the exact value


def exact_int_to_float(v, dst):
    """Python int |v| rounded once, to nearest even, to float dtype |dst|."""
    if dst == "f64":
        return float(v)  # Python rounds int -> float correctly
    # Round to float64 exactly first only when that is exact; else do it by hand.
    if abs(v) < 2 ** 53:
        return np.float64(v).astype(NUMPY_DTYPE[dst])
    mant = {"f32": 24, "f16": 11}[dst]
    sign, m = (-1 if v < 0 else 1), abs(v)
    shift = m.bit_length() - mant
    q, rem = divmod(m, 1 << shift)
    half = 1 << (shift - 1)
    if rem > half or (rem == half and q & 1):
        q += 1
    return np.float64(sign * q * 2.0 ** shift).astype(NUMPY_DTYPE[dst])


def gen_cast(edge, op, binding):
    src, dst = binding["SrcT"], binding["DstT"]
    values = edges(src)
    if src in FLOATS:
        values = values + [2.5, -3.7, 1e10 if src != "f16" else 6e4, 0.9999999]
        values = [float(native(arr(v, src), src)) if src != "bf16" else float(to_bf16(np.float32(v)))
                  for v in values]
    x = arr(values, src)
    exact = [v for v in (x.tolist() if src != "bool" else [bool(b) for b in x])]
    if src in INTS:
        exact = [int(v) for v in exact]
    want = cast_ref(exact, src, dst)
    signed = dst in FLOATS
    edge.add(op, binding, "values", [x], [want], signed_zeros=signed)
    edge.add(op, binding, "empty", [x[:0].reshape(0, 1)], [want[:0].reshape(0, 1)])
    edge.add(op, binding, "rank8", [np.resize(x, 16).reshape(RANK_SHAPES[8])],
             [np.resize(want, 16).reshape(RANK_SHAPES[8])], signed_zeros=signed)
    edge.add(op, binding, "scalar", [x[0]], [want[0]], signed_zeros=signed)


# --- shape helpers of gradients -------------------------------------------------------

def gen_shape_helpers(edge, op, binding):
    if op == "ConcatOffset":
        t = NUMPY_DTYPE[binding["Tshape"]]
        shapes = [np.array([2, 3, 5], t), np.array([2, 0, 5], t), np.array([2, 4, 5], t)]
        offs = [np.array([0, 0, 0], t), np.array([0, 3, 0], t), np.array([0, 3, 0], t)]
        edge.add(op, dict(binding, N=3), "three", [np.array(1, np.int32)] + shapes, offs)
        edge.add(op, dict(binding, N=1), "scalar_shapes", [np.array(0, np.int32), np.zeros(0, t)], error="is out of range for rank 0")
        return
    d = binding["T"]
    s = storage(d)
    if op == "SumToShape":
        ti = binding.get("Tidx", "i32")
        b = dict(binding, Tidx=ti)
        x = edge_rows("Sum", d)
        for layout, shape in [("rows", [x.shape[0], 1]), ("columns", [x.shape[1]]), ("same", list(x.shape)),
                              ("scalar", [])]:
            if shape == [x.shape[1]]:
                want = reduce_ref("Sum", x, d, [0], False)
            elif shape == list(x.shape):
                want = x
            elif shape == []:
                want = reduce_ref("Sum", x, d, [], False)
            else:
                want = reduce_ref("Sum", x, d, [1], True)
            edge.add(op, b, layout, [x, np.array(shape, NUMPY_DTYPE[ti])], [want], **tol(d, 4))
        edge.add(op, b, "empty", [np.zeros((0, 3), s), np.array([3], NUMPY_DTYPE[ti])], [np.zeros(3, s)])
        edge.add(op, b, "not_a_broadcast", [x, np.array([5], NUMPY_DTYPE[ti])], error="is not a broadcast of [5]")
    elif op == "StridedSliceGrad":
        for ti in choices(binding, "Index", ("i32", "i64")):
            strided_slice_grad(edge, op, dict(binding, Index=ti), d, s)
    else:
        raise KeyError(op)


def strided_slice_grad(edge, op, binding, d, s):
    if True:
        ti = binding["Index"]
        t = NUMPY_DTYPE[ti]
        dy = arr(edges(d)[:4], d, (2, 2)) if d != "bool" else np.array([[True, False], [True, True]])
        shape, begin, end, strides = [3, 5], [0, 4], [3, 0], [2, -2]
        want = np.zeros(shape, s)
        want[0:3:2, 4:0:-2] = dy
        add_move(edge, op, binding, "step2", [np.array(v, t) for v in (shape, begin, end, strides)] + [dy], [want])
        imin = -(2 ** 63) if ti == "i64" else -(2 ** 31)
        dy1 = dy[:1, :1].reshape(1, 1)
        want = np.zeros(shape, s)
        want[2:3, 0:1] = dy1
        edge.add(op, binding, "min_stride", [np.array(v, t) for v in ([3, 5], [2, 0], [imin, 1], [imin, 1])] + [dy1],
                 [want], signed_zeros=True)
        edge.add(op, binding, "empty", [np.array(v, t) for v in ([0, 5], [0, 0], [0, 5], [1, 1])] + [
            np.zeros((0, 5), s)], [np.zeros((0, 5), s)])
