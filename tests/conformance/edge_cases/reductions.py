"""The reductions (Sum, Mean, Prod, Max, Min, ArgMax, ArgMin, All, Any) and
the scans (Cumsum, Cumprod)."""
import numpy as np

from gen_cases import NUMPY_DTYPE
from cases import grad_support, reduction_nn

from .values import FLOATS, INTS, RANK_SHAPES, arr, choices, dense, edges, native, out_float, storage, tiled, tol


# --- reductions ---------------------------------------------------------------------

# Each row holds one edge value among fillers that keep the exact result
# independent of the order of accumulation.
FILLER = {"Sum": [1, -1, 0], "Mean": [1, -1, 0], "Prod": [1, -1, 1], "Max": [1, -1, 0], "Min": [1, -1, 0],
          "ArgMax": [1, -1, 0], "ArgMin": [1, -1, 0]}


def edge_rows(op, d):
    e = edges(d)
    filler = FILLER[op]
    rows = [[v] + filler for v in e]
    rows += [filler[:1] + [v] + filler[1:] for v in e]  # the edge value second
    return arr(rows, d)


def reduce_ref(op, x, d, axis, keep):
    if d in INTS:
        return reduction_nn.int_reference(op, x, list(axis), keep)
    y = reduction_nn.float_reference(op, x, list(axis), keep)
    return out_float(y, d)


def gen_reduce(edge, op, binding):
    d = binding["T"]
    rows = edge_rows(op, d)
    r8 = arr(tiled(d, 16), d, RANK_SHAPES[8]) if op != "Prod" else arr([1] * 15 + [edges(d)[0]], d,
                                                                          RANK_SHAPES[8])
    layouts = [("rows", rows, [1], False), ("rows_keep", rows, [-1], True), ("columns", rows, [0], False),
               ("all", rows, [], False), ("all_keep", rows, [0, 1], True), ("rank8", r8, [1, 3, 7], False),
               ("rank8_all", r8, [], True), ("scalar", arr(edges(d)[0], d), [], False),
               ("empty_keep_rows", np.zeros((0, 3), storage(d)), [1], False)]
    empty_ok = op in ("Sum", "Prod") or (op == "Mean" and d in FLOATS)
    for layout, x, axis, keep in layouts:
        y = reduce_ref(op, x, d, axis, keep)
        edge.add(op, binding, layout, [x], [y], {"axis": axis, "keep_dims": keep}, **tol(d, 4))
    x = np.zeros((0, 3), storage(d))
    if empty_ok:
        edge.add(op, binding, "empty_axis", [x], [reduce_ref(op, x, d, [0], False)], {"axis": [0]})
    else:
        edge.add(op, binding, "empty_axis", [x], attrs={"axis": [0]}, error="empty")


def gen_arg(edge, op, binding):
    d = binding["T"]
    rows = edge_rows(op, d)
    fn = np.argmax if op == "ArgMax" else np.argmin
    for out_type in choices(binding, "output_type", ("i32", "i64")):
        b = dict(binding, output_type=out_type)
        for axis in (1, -1, 0):
            x = native(rows, d) if d in FLOATS else rows
            edge.add(op, b, f"rows_axis{axis}", [rows], [fn(x, axis=axis).astype(NUMPY_DTYPE[out_type])],
                     {"axis": axis})
        r8 = arr(tiled(d, 16), d, RANK_SHAPES[8])
        edge.add(op, b, "rank8", [r8], [fn(native(r8, d) if d in FLOATS else r8, axis=3)
                                        .astype(NUMPY_DTYPE[out_type])], {"axis": 3})
        edge.add(op, b, "empty_rows", [np.zeros((0, 3), storage(d))], [np.zeros((0,), NUMPY_DTYPE[out_type])],
                 {"axis": 1})
        edge.add(op, b, "empty_axis", [np.zeros((2, 0), storage(d))], attrs={"axis": 1}, error="empty")


def gen_logical_reduce(edge, op, binding):
    fn = np.all if op == "All" else np.any
    x = np.array([[a, b, c] for a in (False, True) for b in (False, True) for c in (False, True)])
    for layout, v, axis, keep in [("rows", x, [1], False), ("columns", x, [0], True), ("all", x, [], False),
                                  ("empty", np.zeros((0, 3), bool), [0], False),
                                  ("empty_rows", np.zeros((0, 3), bool), [1], True),
                                  ("rank8", x.reshape(-1)[:16].reshape(RANK_SHAPES[8]), [0, 2, 4], False)]:
        edge.add(op, {}, layout, [v], [fn(v, axis=None if not axis else tuple(axis), keepdims=keep)],
                 {"axis": axis, "keep_dims": keep})


def gen_scan(edge, op, binding):
    d = binding["T"]
    rows = edge_rows("Sum" if op == "Cumsum" else "Prod", d)
    for tidx in choices(binding, "Tidx", ("i32", "i64")):
        b = dict(binding, Tidx=tidx)
        for exclusive in (False, True):
            for reverse in (False, True):
                for axis in (1, 0):
                    # Each scanned line holds one edge value (columns: the rows transposed).
                    x = rows if axis == 1 else dense(rows.T)
                    y = grad_scan(op, x, axis, exclusive, reverse, d)
                    edge.add(op, b, f"axis{axis}_ex{int(exclusive)}_rev{int(reverse)}",
                             [x, np.array(axis, NUMPY_DTYPE[tidx])], [y],
                             {"exclusive": exclusive, "reverse": reverse}, **tol(d, 4))
        edge.add(op, b, "empty", [np.zeros((0, 3), storage(d)), np.array(-1, NUMPY_DTYPE[tidx])],
                 [np.zeros((0, 3), storage(d))])
        edge.add(op, b, "scalar_axis_out_of_range", [arr(edges(d)[:3], d), np.array(1, NUMPY_DTYPE[tidx])],
                 error="axis")


def grad_scan(op, x, axis, exclusive, reverse, d):
    """The conformance suite's running sum or product, rounded to |d|."""
    y = grad_support.scan_ref(op, np.asarray(x), axis, exclusive, reverse, d)
    return y if d in INTS else out_float(y, d)
