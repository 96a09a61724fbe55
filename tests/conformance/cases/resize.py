"""Resize: ONNX's Resize (opset 13) with run-time scales or sizes.

The reference (resize_ref) is written from ONNX's definition, one output
index at a time: per axis, the input coordinate of each output index under
coordinate_transformation_mode, then the input indices and weights nearest,
linear or cubic interpolation takes there (indices past the edge take the
edge element; exclude_outside renormalises the weights of those inside;
tf_crop_and_resize gives extrapolation_value outside the input). N-D
interpolation is separable: the axes are resized one after another in
float64, and the result is rounded to the dtype once. The reference follows
Weft's documented choices where ONNX leaves them open: a weight of 0 does
not take part (an output at an input's position is that input, even next
to inf or NaN), the axes that shrink most go first (ties: the last axis
first), and with scales the resized length in the coordinate formulas is
in * scale (ONNX's reference; its output size is the floor of that, in
float32). It reproduces the outputs of ONNX's own Resize node tests
(test_resize_*, 23 of them) exactly.
"""
import math

import numpy as np

from .array import NP, cast, rng, values

FLOATS = ["f32", "f64", "f16", "bf16"]
MODES = ["nearest", "linear", "cubic"]
COORDINATES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
               "tf_crop_and_resize"]
ROUNDINGS = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
DEFAULTS = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_floor",
            "cubic_coeff_a": -0.75, "exclude_outside": False, "extrapolation_value": 0.0}


# --- the reference -------------------------------------------------------------------


def plan_axes(shape, roi, scales, sizes, crop):
    """Per axis: (in, out, scale, resized length, roi start, roi end)."""
    axes = []
    rank = len(shape)
    for i, n in enumerate(shape):
        if len(sizes):
            out = int(sizes[i])
            scale, length = (out / n if n else 1.0), float(out)
        else:
            f = np.float32(np.float32(n) * np.float32(scales[i]))
            out, scale, length = math.floor(float(f)), float(np.float32(scales[i])), float(f)
        start, end = (float(np.float32(roi[i])), float(np.float32(roi[rank + i]))) if crop else (0.0, 1.0)
        axes.append((n, out, scale, length, start, end))
    return axes


def coordinate(j, axis, mode):
    n, _, scale, length, start, end = axis
    x, last = float(j), float(n - 1)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if length > 1 else 0.0
    if mode == "align_corners":
        return x * last / (length - 1) if length > 1 else 0.0
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    assert mode == "tf_crop_and_resize", mode
    if length > 1:
        return start * last + x * (end - start) * last / (length - 1)
    return 0.5 * (start + end) * last


def clamp_index(i, n):
    return min(max(i, 0), n - 1)


def nearest_taps(x, n, rounding):
    f = math.floor(x)
    frac = x - f
    up = {"round_prefer_floor": frac > 0.5, "round_prefer_ceil": frac >= 0.5, "floor": False, "ceil": frac > 0}
    return [(clamp_index(f + 1 if up[rounding] else f, n), 1.0)]


def linear_taps(x, n):
    x = min(max(x, 0.0), float(n - 1))
    f = math.floor(x)
    r = x - f
    return [(f, 1 - r), (min(f + 1, n - 1), r)]


def cubic_weight(t, a):
    """Keys' cubic kernel with coefficient a at distance |t|."""
    t = abs(t)
    if t < 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return a * (((t - 5) * t + 8) * t - 4)
    return 0.0


def cubic_taps(x, n, a, exclude_outside):
    f = math.floor(x)
    r = x - f
    index = [f + k for k in (-1, 0, 1, 2)]
    w = [cubic_weight(r - k, a) for k in (-1, 0, 1, 2)]
    if exclude_outside:
        w = [0.0 if i < 0 or i > n - 1 else v for i, v in zip(index, w)]
        total = 0.0
        for v in w:
            total += v
        if total != 0:
            w = [v / total for v in w]
    return [(clamp_index(i, n), v) for i, v in zip(index, w)]


def axis_table(axis, a):
    """For each output index, its (input index, weight) taps; None gives
    extrapolation_value."""
    n, out = axis[0], axis[1]
    ctm = a["coordinate_transformation_mode"]
    table = []
    for j in range(out):
        x = coordinate(j, axis, ctm)
        if ctm == "tf_crop_and_resize" and not (0 <= x <= n - 1):
            table.append(None)
        elif a["mode"] == "nearest":
            table.append(nearest_taps(x, n, a["nearest_mode"]))
        elif a["mode"] == "linear":
            table.append([t for t in linear_taps(x, n) if t[1] != 0])
        else:
            taps = cubic_taps(x, n, a["cubic_coeff_a"], a["exclude_outside"])
            table.append([t for t in taps if t[1] != 0])
    return table


def is_identity(table, n):
    return len(table) == n and all(t is not None and t == [(j, 1.0)] for j, t in enumerate(table))


def resize_axis(y, axis, table, extrapolation):
    ym = np.moveaxis(y, axis, 0)
    out = np.empty((len(table),) + ym.shape[1:], np.float64)
    for j, taps in enumerate(table):
        if taps is None:
            out[j] = extrapolation
            continue
        acc = taps[0][1] * ym[taps[0][0]]
        for i, w in taps[1:]:
            acc = acc + w * ym[i]
        out[j] = acc
    return np.moveaxis(out, 0, axis)


def store(g, y, dtype):
    """float64 |y| rounded to |dtype| as Weft rounds it (f16 and bf16 through f32)."""
    if dtype == "f64":
        return np.asarray(y, np.float64)
    y = np.asarray(y, np.float64).astype(np.float32)
    if dtype == "bf16":
        return g.to_bf16(y)
    return y.astype(NP[dtype])


def resize_ref(g, x, roi, scales, sizes, attrs, dtype):
    """ONNX's Resize of |x| (attrs: the op's, defaults filled in)."""
    a = dict(DEFAULTS)
    a.update(attrs)
    crop = a["coordinate_transformation_mode"] == "tf_crop_and_resize"
    axes = plan_axes(x.shape, roi, scales, sizes, crop)
    shape = tuple(ax[1] for ax in axes)
    if 0 in shape:
        return store(g, np.zeros(shape), dtype)
    passes = []
    for i in reversed(range(x.ndim)):
        table = axis_table(axes[i], a)
        if not is_identity(table, axes[i][0]):
            passes.append((i, table))
    passes.sort(key=lambda p: axes[p[0]][1] / axes[p[0]][0])  # stable: ties keep the last axis first
    y = np.asarray(x, np.float64)
    for i, table in passes:
        y = resize_axis(y, i, table, float(a["extrapolation_value"]))
    return store(g, y, dtype)


# --- cases ---------------------------------------------------------------------------


def f32s(v):
    return np.array(v, np.float32).reshape(-1)


def i64s(v):
    return np.array(v, np.int64).reshape(-1)


def add(g, name, x, dtype="f32", scales=(), sizes=(), roi=(), **attrs):
    """One case: x (cast to |dtype|) resized by |scales| or |sizes| (the other empty)."""
    x = cast(g, x, dtype)
    inputs = [x, f32s(roi), f32s(scales), i64s(sizes)]
    want = resize_ref(g, x, inputs[1], inputs[2], inputs[3], attrs, dtype)
    # Nearest moves elements exactly; interpolation gets the dtype's tolerance.
    if attrs.get("mode", "nearest") == "nearest":
        kw = {"signed_zeros": True}
    else:
        rtol, atol = g.tolerance[dtype]
        kw = {"rtol": 4 * rtol, "atol": 4 * atol}
    # roi and scales are f32 whatever T is (bf16 values travel as f32 files marked bf16).
    g.add(f"Resize/{name}", "Resize", inputs, dict(attrs, T=dtype), [want],
          input_dtypes=["bf16" if dtype == "bf16" else None, None, None, None], **kw)


def dtype_cases(g, r):
    for dtype in FLOATS:
        x = values(g, r, (3, 4), dtype)
        for mode in MODES:
            add(g, f"{mode}_up_{dtype}", x, dtype, scales=[2, 1.5], mode=mode)
            add(g, f"{mode}_down_sizes_{dtype}", x, dtype, sizes=[2, 3], mode=mode)


def coordinate_cases(g, r):
    """Every coordinate mode with every mode, one axis up and one down."""
    x = values(g, r, (5, 6), "f32")
    y = values(g, r, (4, 7), "f64")
    for ctm in COORDINATES:
        roi = [0.1, -0.2, 0.9, 1.3] if ctm == "tf_crop_and_resize" else []
        for mode in MODES:
            add(g, f"{ctm}_{mode}_sizes", x, "f32", sizes=[8, 4], roi=roi, mode=mode,
                coordinate_transformation_mode=ctm)
            add(g, f"{ctm}_{mode}_scales", y, "f64", scales=[0.6, 2.3], roi=roi, mode=mode,
                coordinate_transformation_mode=ctm)
            add(g, f"{ctm}_{mode}_to_one", x, "f32", sizes=[1, 3], roi=roi, mode=mode,
                coordinate_transformation_mode=ctm)


def nearest_cases(g, r):
    x = values(g, r, (4, 5), "f32")
    for rounding in ROUNDINGS:
        for ctm in ("half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn", "pytorch_half_pixel"):
            add(g, f"nearest_{rounding}_{ctm}", x, "f32", sizes=[8, 3], nearest_mode=rounding,
                coordinate_transformation_mode=ctm)
        # Scale 2 from half_pixel puts coordinates on the .25 and .75 marks;
        # scale 4 from asymmetric on the .5 mark, where the roundings differ.
        add(g, f"nearest_{rounding}_ties", x, "f64", scales=[1, 4], nearest_mode=rounding,
            coordinate_transformation_mode="asymmetric")
    # tf_half_pixel_for_nn moves by half an element even at scale 1.
    add(g, "nearest_tf_half_pixel_for_nn_scale1_ceil", x, "f32", scales=[1, 1], nearest_mode="ceil",
        coordinate_transformation_mode="tf_half_pixel_for_nn")


def cubic_cases(g, r):
    x = values(g, r, (6, 5), "f32")
    for a in (-0.5, -0.75):
        for exclude in (False, True):
            name = f"cubic_a{a}_exclude{int(exclude)}"
            add(g, f"{name}_up", x, "f32", scales=[1.7, 2], mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
            add(g, f"{name}_down", x, "f64", sizes=[4, 2], mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
    add(g, "cubic_exclude_align_corners", x, "f32", sizes=[9, 8], mode="cubic", exclude_outside=True,
        coordinate_transformation_mode="align_corners")
    add(g, "cubic_exclude_one_element", values(g, r, (1, 3), "f32"), "f32", sizes=[3, 5], mode="cubic",
        exclude_outside=True)


def rank_cases(g, r):
    for mode in MODES:
        add(g, f"rank1_{mode}", values(g, r, (7,), "f32"), "f32", sizes=[11], mode=mode)
        add(g, f"rank3_{mode}", values(g, r, (3, 4, 5), "f64"), "f64", scales=[0.67, 1.5, 1], mode=mode)
        add(g, f"rank4_nchw_{mode}", values(g, r, (2, 3, 4, 5), "f32"), "f32", scales=[1, 1, 2, 2], mode=mode)
        add(g, f"rank5_{mode}", values(g, r, (2, 3, 2, 3, 2), "f32"), "f32", sizes=[3, 2, 4, 3, 1], mode=mode,
            coordinate_transformation_mode="align_corners")
    add(g, "large_linear", values(g, r, (2, 3, 40, 50), "f32"), "f32", sizes=[2, 3, 57, 33], mode="linear")
    add(g, "large_cubic", values(g, r, (2, 30, 70), "f64"), "f64", scales=[1, 2.5, 0.3], mode="cubic")
    add(g, "large_nearest", values(g, r, (3, 64, 64), "f32"), "f32", scales=[1, 0.5, 3], mode="nearest")


def size_cases(g, r):
    x = values(g, r, (5, 3), "f32")
    # 5 * 1.4f is 7 in float32 (6.99... in float64).
    add(g, "scales_floor_in_f32", x, "f32", scales=[1.4, 1], mode="linear")
    add(g, "scales_to_one_element", x, "f32", scales=[0.25, 1], mode="cubic")
    add(g, "identity_scales", x, "f32", scales=[1, 1], mode="cubic")
    add(g, "identity_sizes", x, "f32", sizes=[5, 3], mode="linear",
        coordinate_transformation_mode="align_corners")
    add(g, "sizes_used_when_both_given", x, "f32", scales=[2, 2], sizes=[7, 2], mode="linear")
    add(g, "one_axis_only", x, "f32", sizes=[5, 8], mode="cubic")
    add(g, "to_empty_sizes", x, "f32", sizes=[0, 3])
    add(g, "to_empty_scales", x, "f32", scales=[1, 0.2])
    add(g, "from_empty", np.zeros((0, 4), np.float32), "f32", scales=[2, 2], mode="linear")
    add(g, "from_empty_sizes", np.zeros((3, 0), np.float32), "f32", sizes=[2, 0], mode="cubic")


def crop_cases(g, r):
    x = values(g, r, (4, 5), "f32")
    for mode in MODES:
        add(g, f"crop_{mode}_extrapolate", x, "f32", sizes=[5, 6], roi=[-0.3, 0.2, 0.8, 1.4], mode=mode,
            coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=10.0)
        add(g, f"crop_{mode}_inside", x, "f64", scales=[2, 0.8], roi=[0.25, 0.1, 0.75, 0.6], mode=mode,
            coordinate_transformation_mode="tf_crop_and_resize")
    add(g, "crop_same_size_identity_roi", x, "f32", sizes=[4, 5], roi=[0, 0, 1, 1], mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize")
    add(g, "crop_same_size_shifted", x, "f32", sizes=[4, 5], roi=[0.5, 0, 1.5, 1], mode="linear",
        coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0)
    add(g, "crop_flipped", x, "f32", sizes=[4, 5], roi=[1, 0, 0, 1], mode="nearest",
        coordinate_transformation_mode="tf_crop_and_resize")
    add(g, "crop_nchw", values(g, r, (1, 2, 4, 4), "f32"), "f32", sizes=[1, 2, 3, 3],
        roi=[0, 0, 0.4, 0.6, 1, 1, 1.2, 1.7], mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=10.0)


def error_cases(g, r):
    x = values(g, r, (3, 4), "f32")

    def error(name, message, scales=(), sizes=(), roi=(), v=x, **attrs):
        g.add(f"Resize/{name}", "Resize", [v, f32s(roi), f32s(scales), i64s(sizes)], dict(attrs, T="f32"),
              error=message)

    error("both_empty", "scales and sizes are both empty")
    error("scalar", "scales and sizes are both empty", v=np.float32(1.5))
    error("scales_length", "scales has 3 entries for x of rank 2", scales=[1, 2, 2])
    error("sizes_length", "sizes has 1 entries for x of rank 2", sizes=[4], scales=[2, 2])
    error("zero_scale", "scales must be > 0, got 0 for dimension 1", scales=[2, 0])
    error("negative_scale", "scales must be > 0, got -1.5 for dimension 0", scales=[-1.5, 2])
    error("nan_scale", "scales must be > 0, got nan for dimension 1", scales=[1, float("nan")])
    error("negative_size", "sizes must be >= 0, got -2 for dimension 0", sizes=[-2, 4])
    error("huge_scale", "scale 1e+30 makes dimension 1 of size 4 too large", scales=[1, 1e30])
    error("from_empty_to_some", "cannot resize dimension 0 of size 0 to 3: it has no elements to interpolate",
          sizes=[3, 4], v=np.zeros((0, 4), np.float32))
    error("roi_length", "roi has 2 entries for x of rank 2; tf_crop_and_resize needs 4", scales=[2, 2], roi=[0, 1],
          coordinate_transformation_mode="tf_crop_and_resize")
    g.add("Resize/scales_not_1d", "Resize", [x, f32s([]), np.ones((1, 2), np.float32), i64s([])], {"T": "f32"},
          error="scales must be a 1-D tensor, got shape [1,2]")
    g.add("Resize/sizes_not_1d", "Resize", [x, f32s([]), f32s([]), np.int64(3)], {"T": "f32"},
          error="sizes must be a 1-D tensor, got shape []")


def cases(g):
    r = rng(41)
    dtype_cases(g, r)
    coordinate_cases(g, r)
    nearest_cases(g, r)
    cubic_cases(g, r)
    rank_cases(g, r)
    size_cases(g, r)
    crop_cases(g, r)
    error_cases(g, r)
