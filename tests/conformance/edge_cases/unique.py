"""OnnxUnique (ONNX's Unique): the edge values of each dtype, each twice,
made unique as elements and as rows and columns along an axis, sorted and
in order of first occurrence, with the conformance suite's reference
(cases/unique.py). +0 and -0 are one value (the first's sign is kept); NaN
equals NaN and sorts after inf, along an axis too; slices of no elements
are all equal."""
import numpy as np

from cases.unique import onnx_unique_ref

from .values import RANK_SHAPES, arr, edges, storage, tiled


def gen_unique(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    s = storage(d)
    flat = arr(e + e[::-1], d)
    rows = arr([e, e[::-1], e, tiled(d, len(e) + 3)[3:]], d)
    x8 = arr(tiled(d, 16), d, RANK_SHAPES[8])

    def add(layout, x, axis=None, sorted_=True):
        attrs = {"sorted": sorted_}
        if axis is not None:
            attrs.update(axis=axis, has_axis=True)
        want = [np.asarray(w) for w in onnx_unique_ref(x, axis, sorted_)]
        edge.add(op, binding, f"{layout}_{'sorted' if sorted_ else 'unsorted'}", [x], want, attrs,
                 signed_zeros=True)

    for sorted_ in (True, False):
        add("values", flat, sorted_=sorted_)
        add("rows", rows, 0, sorted_)
        add("columns", rows, -1, sorted_)
        add("rank8_axis3", x8, 3, sorted_)
        add("rank8_flattened", x8, sorted_=sorted_)
        add("scalar", arr(e[0], d), sorted_=sorted_)
        add("empty", np.zeros((0,), s), sorted_=sorted_)
        add("empty_axis", np.zeros((0, 3), s), 0, sorted_)
        add("empty_slices", np.zeros((3, 0), s), 0, sorted_)
    edge.add(op, binding, "axis_out_of_range", [rows], attrs={"axis": 2, "has_axis": True},
             error="axis 2 is out of range for rank 2 (valid: -2 to 1)")
