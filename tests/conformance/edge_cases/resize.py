"""Resize (ONNX's Resize with run-time scales or sizes): the edge values
resized by every mode, with the conformance suite's reference
(cases/resize.py). Nearest copies exactly (signed zeros, NaN); linear and
cubic interpolate in float64 and round once, so inf and NaN spread to the
outputs that weigh them, and an output at an input's position is that
input alone; tf_crop_and_resize fills with an extrapolation_value of NaN
or inf."""
import numpy as np

from cases.resize import f32s, i64s, resize_ref

from .movement import movement_input
from .values import INF, NAN, RANK_SHAPES, arr, storage, tiled, tol

CROP = "tf_crop_and_resize"


def gen_resize(edge, op, binding):
    d = binding["T"]
    x = movement_input(d)  # (3, 5): every edge value once
    x8 = arr(tiled(d, 16), d, RANK_SHAPES[8])
    s = storage(d)
    # roi and scales are f32 whatever T is: only x travels as bf16.
    dtypes = ["bf16" if d == "bf16" else None, None, None, None]

    def add(layout, v, scales=(), sizes=(), roi=(), exact=False, **attrs):
        inputs = [v, f32s(roi), f32s(scales), i64s(sizes)]
        want = resize_ref(edge.g, v, inputs[1], inputs[2], inputs[3], attrs, d)
        kw = {"signed_zeros": True} if exact else tol(d, 4)
        edge.add(op, binding, layout, inputs, [want], attrs, input_dtypes=dtypes, **kw)

    add("nearest_up", x, scales=[2, 1.5], exact=True)
    add("nearest_down_ceil", x, sizes=[2, 3], exact=True, nearest_mode="round_prefer_ceil",
        coordinate_transformation_mode="asymmetric")
    add("identity", x, scales=[1, 1], exact=True, mode="cubic")
    add("linear_up", x, scales=[2, 2], mode="linear")
    add("linear_on_the_grid", x, sizes=[5, 9], mode="linear", coordinate_transformation_mode="align_corners")
    add("linear_down", x, sizes=[2, 2], mode="linear", coordinate_transformation_mode="pytorch_half_pixel")
    for exclude in (False, True):
        add(f"cubic_up_exclude{int(exclude)}", x, scales=[2, 1.6], mode="cubic", exclude_outside=exclude)
        add(f"cubic_down_exclude{int(exclude)}", x, sizes=[2, 4], mode="cubic", cubic_coeff_a=-0.5,
            exclude_outside=exclude)
    for value in (NAN, INF):
        for mode in ("nearest", "linear"):
            add(f"crop_{mode}_extrapolate_{value}", x, sizes=[4, 6], roi=[-0.5, 0.25, 1.0, 1.5], mode=mode,
                coordinate_transformation_mode=CROP, extrapolation_value=value)
    add("rank8_nearest", x8, sizes=[2, 2, 1, 3, 1, 2, 2, 2], exact=True)
    add("rank8_linear", x8, scales=[1, 2, 1, 1, 3, 1, 1, 1], mode="linear")
    add("empty", np.zeros((0, 3), s), scales=[2, 2], mode="linear")
    add("to_empty", x, sizes=[0, 5], mode="cubic")
    edge.add(op, binding, "zero_scale", [x, f32s([]), f32s([2, 0]), i64s([])], input_dtypes=dtypes,
             error="scales must be > 0, got 0 for dimension 1")
