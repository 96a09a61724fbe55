"""QuantizeLinear and DequantizeLinear: the f32 edge values (NaN to the
zero point, infinities and the largest values saturated, subnormals and
-0 to the zero point, ties to even) quantized to each int8 type, and each
integer type's edge values dequantized, per tensor and along an axis, at
every rank, empty and scalar; the reference is cases/quantize.py's NumPy
one, and DequantizeLinear's f32 arithmetic as the kernel's: the integer
difference, then one f32 product."""
import numpy as np

from cases.quantize import quantize

from .values import RANK_SHAPES, arr, edges, tiled


def dequantize(x, scale, zero_point):
    diff = np.asarray(x, np.int64) - np.asarray(zero_point, np.int64)
    return (diff.astype(np.float32) * np.asarray(scale, np.float32)).astype(np.float32)


def gen_quantize(edge, op, binding):
    d = binding["T"]
    quantizing = op == "QuantizeLinear"
    src = "f32" if quantizing else d
    e = edges(src)
    zp_type = np.int8 if d == "i8" else (np.uint8 if d == "u8" else np.int32)
    zp = zp_type(-3 if d == "i8" else (5 if d == "u8" else 7))

    def add(layout, x, scale, zero_point, axis=-1):
        if quantizing:
            shape = [1] * x.ndim
            if np.ndim(scale) == 1 and x.ndim > 0:
                shape[axis] = -1
            want = quantize(x, np.reshape(scale, shape) if np.ndim(scale) == 1 else scale,
                            (np.reshape(zero_point, shape) if np.ndim(zero_point) == 1 else zero_point).astype(
                                np.float64), d)
        else:
            shape = [1] * x.ndim
            if np.ndim(scale) == 1:
                shape[axis] = -1
            want = dequantize(x, np.reshape(scale, shape) if np.ndim(scale) == 1 else scale,
                              np.reshape(zero_point, shape) if np.ndim(zero_point) == 1 else zero_point)
        edge.add(op, binding, layout, [x, np.asarray(scale, np.float32), np.asarray(zero_point, zp_type)], [want],
                 {"axis": axis}, rtol=0, atol=0)

    flat = arr(e, src)
    for scale in (0.5, 3.0, 1e-30, 1e30):
        add(f"values_scale_{scale:g}", flat, np.float32(scale), zp)
    for rank, shape in enumerate(RANK_SHAPES):
        n = int(np.prod(shape)) if shape else 1
        add(f"rank{rank}", arr(tiled(src, n), src, shape), np.float32(0.25), zp)
    add("empty", arr([], src, (0, 3)), np.float32(0.5), zp)
    rows = arr([e, e[::-1]], src)
    add("per_axis_0", rows, np.array([0.5, 2.0], np.float32), np.array([zp, 0], zp_type), axis=0)
    add("per_axis_last", rows.T.copy(), np.array([0.5, 2.0], np.float32), np.array([0, zp], zp_type), axis=-1)
