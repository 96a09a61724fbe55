"""QuantizeLinear, DequantizeLinear and the graph optimizer's quantized ops _QConv2D and _QMatMul.

Expected values: NumPy's rint (half to even) and saturation for quantizing,
exact integer sums (float64 of small integers) for the products, and the
requantization in float64. The kernels requantize in float32 (oneDNN with
the bias folded into its scaled sum), so a value within float32 rounding of
a tie can land one step away: quantized outputs allow 1.
"""
import numpy as np

from cases.conv import conv_ref, depthwise_ref, attr4, to_nhwc, from_nhwc

RANGES = {"i8": (-128, 127), "u8": (0, 255)}
RESIDUAL_TYPE = {"residual_i8_into_u8": "i8", "residual_u8_into_f32": "u8"}
NP = {"i8": np.int8, "u8": np.uint8, "i32": np.int32}


def quantize(x, scale, zero_point, dtype):
    lo, hi = RANGES[dtype]
    with np.errstate(invalid="ignore"):
        v = np.rint(np.float64(x) / np.float64(scale)) + zero_point
        v = np.where(np.isnan(v), zero_point, v)
    return np.clip(v, lo, hi).astype(NP[dtype])


def requantize(real, tout, scale, zero_point):
    return real.astype(np.float32) if tout == "f32" else quantize(real, scale, zero_point, tout)


def activate(y, activation, alpha=0.0, beta=0.0):
    if activation == "Relu":
        return np.maximum(y, 0)
    if activation == "Relu6":
        return np.clip(y, 0, 6)
    if activation == "Clip":
        return np.clip(y, alpha, beta)
    return y


def cases(g):
    r = np.random.RandomState(7)
    # QuantizeLinear: ties to even, saturation, NaN and infinities.
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1000.0, -1000.0, np.nan, np.inf, -np.inf, 0.26, 0.0],
                 np.float32)
    for dtype, zp in [("i8", 0), ("i8", -3), ("u8", 128), ("u8", 0)]:
        scale = np.float32(0.5)
        g.add(f"QuantizeLinear/ties_saturation_{dtype}_zp{zp}", "QuantizeLinear",
              [x, scale, np.array(zp, NP[dtype])], {"T": dtype}, [quantize(x, scale, zp, dtype)])
    xs = r.uniform(-4, 4, (2, 3, 5)).astype(np.float32)
    for axis in [1, -1]:
        n = xs.shape[axis]
        scales = r.uniform(0.01, 0.1, n).astype(np.float32)
        zps = r.randint(-10, 10, n).astype(np.int8)
        shape = [1, 1, 1]
        shape[axis] = n
        want = quantize(xs, scales.reshape(shape), zps.reshape(shape).astype(np.float64), "i8")
        g.add(f"QuantizeLinear/per_axis_{axis}", "QuantizeLinear", [xs, scales, zps], {"T": "i8", "axis": axis}, [want])
    g.add("QuantizeLinear/zero_scale", "QuantizeLinear", [xs, np.float32(0), np.int8(0)], {"T": "i8"},
          error="the scale must be positive")
    g.add("QuantizeLinear/scale_along_wrong_axis", "QuantizeLinear",
          [xs, np.ones(4, np.float32), np.zeros(4, np.int8)], {"T": "i8", "axis": 1},
          error="the scale has 4 elements but axis 1")

    # DequantizeLinear.
    for dtype, lo, hi in [("i8", -128, 128), ("u8", 0, 256), ("i32", -(1 << 30), 1 << 30)]:
        q = r.randint(lo, hi, (3, 4)).astype(NP[dtype])
        zp = NP[dtype](5)
        scale = np.float32(0.125)
        want = ((q.astype(np.float64) - 5) * 0.125).astype(np.float32)
        g.add(f"DequantizeLinear/{dtype}", "DequantizeLinear", [q, scale, np.array(zp)], {"T": dtype}, [want])
    q = r.randint(-128, 128, (2, 3, 3, 4)).astype(np.int8)
    scales = r.uniform(0.01, 0.1, 4).astype(np.float32)
    want = (q.astype(np.float64) * scales.astype(np.float64)).astype(np.float32)
    g.add("DequantizeLinear/per_channel_weights", "DequantizeLinear", [q, scales, np.zeros(4, np.int8)],
          {"T": "i8", "axis": 3}, [want], rtol=1e-7, atol=0)

    # _QConv2D: the real convolution of the dequantized values, requantized.
    for (name, in_shape, f_shape, strides, padding, pads, depthwise, tin, in_zp, tout, out_zp, bias, residual,
         activation, fmt) in [
            ("u8_relu_bias", (2, 6, 6, 8), (3, 3, 8, 16), (1, 1), "SAME", [], False, "u8", 0, "u8", 0, True, False,
             "Relu", "NHWC"),
            ("i8_zero_points_stride2", (1, 7, 7, 5), (3, 3, 5, 6), (2, 2), "SAME", [], False, "i8", -5, "i8", 3,
             False, False, "None", "NHWC"),
            ("pointwise_f32_out", (1, 4, 5, 16), (1, 1, 16, 8), (1, 1), "VALID", [], False, "u8", 0, "f32", 0, True,
             False, "None", "NHWC"),
            ("residual_relu", (1, 5, 5, 8), (3, 3, 8, 8), (1, 1), "SAME", [], False, "u8", 0, "i8", -2, True, True,
             "Relu", "NHWC"),
            ("residual_i8_into_u8", (2, 5, 5, 8), (3, 3, 8, 16), (1, 1), "SAME", [], False, "u8", 0, "u8", 0, True,
             True, "Relu", "NHWC"),
            ("residual_u8_into_f32", (2, 5, 5, 8), (3, 3, 8, 8), (1, 1), "SAME", [], False, "u8", 0, "f32", 0, True,
             True, "Relu", "NHWC"),
            ("explicit_pads_relu6", (1, 6, 6, 4), (3, 3, 4, 8), (1, 1), "EXPLICIT", [1, 0, 2, 1], False, "u8", 0,
             "u8", 0, True, False, "Relu6", "NHWC"),
            ("clip", (1, 5, 5, 4), (3, 3, 4, 4), (1, 1), "VALID", [], False, "i8", 0, "i8", 0, True, False, "Clip",
             "NHWC"),
            ("depthwise_relu", (1, 8, 8, 16), (3, 3, 16, 1), (1, 1), "SAME", [], True, "u8", 0, "u8", 0, True, False,
             "Relu", "NHWC"),
            ("depthwise_stride2_multiplier2", (1, 7, 7, 4), (3, 3, 4, 2), (2, 2), "SAME", [], True, "i8", 4, "i8", 0,
             True, False, "None", "NHWC"),
            ("nchw", (1, 3, 5, 5), (3, 3, 3, 4), (1, 1), "SAME", [], False, "u8", 10, "u8", 1, True, True, "Relu",
             "NCHW")]:
      for bits in (8, 7):
          x_scale, out_scale, res_scale = 0.02, 0.05, 0.04
          xq = r.randint(*(np.array(RANGES[tin]) + [0, 1]), in_shape).astype(NP[tin])
          wq = r.randint(-(1 << (bits - 1)) + 1, 1 << (bits - 1), f_shape).astype(np.int8)
          channels = f_shape[2] * f_shape[3] if depthwise else f_shape[3]
          w_scales = r.uniform(0.002, 0.01, channels).astype(np.float32)
          xr = (xq.astype(np.float64) - in_zp) * x_scale
          wr = wq.astype(np.float64) * (w_scales.astype(np.float64).reshape(f_shape[2], f_shape[3]) if depthwise
                                        else w_scales.astype(np.float64))
          ref_padding = padding
          if padding == "EXPLICIT":
              nhwc = to_nhwc(xr, fmt)
              nhwc = np.pad(nhwc, [(0, 0), (pads[0], pads[1]), (pads[2], pads[3]), (0, 0)])
              xr_p, ref_padding = from_nhwc(nhwc, fmt), "VALID"
          else:
              xr_p = xr
          # The padded input's real zero is the zero point: np.pad above pads
          # real values with 0, as the convolution does.
          ref = depthwise_ref if depthwise else conv_ref
          y = ref(xr_p, wr, attr4(*strides, fmt), [1, 1, 1, 1], ref_padding, fmt)
          inputs = [xq, wq]
          attrs = {"Tin": tin, "Tout": tout, "strides": attr4(*strides, fmt), "padding": padding,
                   "explicit_paddings": pads, "data_format": fmt, "depthwise": depthwise,
                   "filter_scales": [float(s) for s in w_scales], "input_scale": x_scale, "input_zero_point": in_zp,
                   "output_scale": out_scale if tout != "f32" else 1.0, "output_zero_point": out_zp,
                   "activation": activation, "alpha": -0.3, "beta": 0.4, "Nb": int(bias), "Nr": int(residual)}
          if bias:
              b = r.uniform(-0.5, 0.5, channels).astype(np.float32)
              inputs.append(b)
              y = y + (b if fmt == "NHWC" else b[:, None, None])
          if residual:
              # The residual's own type: the output's, or (ResNet's
              # blocks) i8 into a u8 output and u8 into an f32 one.
              tres = RESIDUAL_TYPE.get(name, tout)
              res_zp = -1 if tres == "i8" else 2
              rq = r.randint(*(np.array(RANGES[tres]) + [0, 1]), y.shape).astype(NP[tres])
              inputs.append(rq)
              y = y + (rq.astype(np.float64) - res_zp) * res_scale
              attrs.update({"residual_scale": res_scale, "residual_zero_point": res_zp, "Tres": tres})
          want = requantize(activate(y, activation, -0.3, 0.4), tout, out_scale, out_zp)
          tol = {"rtol": 1e-5, "atol": 1e-5} if tout == "f32" else {"atol": 1}
          g.add(f"_QConv2D/{name}_w{bits}", "_QConv2D", inputs, attrs, [want], **tol)

    # _QMatMul.
    for name, m, k, n, tb, tin, in_zp, tout, out_zp, bias, residual, activation in [
            ("u8_bias_relu", 4, 32, 16, False, "u8", 0, "u8", 0, True, False, "Relu"),
            ("i8_zero_point_transposed", 3, 17, 5, True, "i8", 7, "i8", -4, False, False, "None"),
            ("f32_out", 2, 64, 10, False, "u8", 0, "f32", 0, True, False, "None"),
            ("residual", 5, 8, 8, False, "i8", -1, "i8", 2, True, True, "Relu6")]:
      for bits in (8, 7):
          a_scale, out_scale, res_scale = 0.03, 0.06, 0.05
          aq = r.randint(*(np.array(RANGES[tin]) + [0, 1]), (m, k)).astype(NP[tin])
          bq = r.randint(-(1 << (bits - 1)) + 1, 1 << (bits - 1), (n, k) if tb else (k, n)).astype(np.int8)
          b_scales = r.uniform(0.002, 0.01, n).astype(np.float32)
          ar = (aq.astype(np.float64) - in_zp) * a_scale
          br = (bq.T if tb else bq).astype(np.float64) * b_scales.astype(np.float64)
          y = ar @ br
          inputs = [aq, bq]
          attrs = {"Tin": tin, "Tout": tout, "transpose_b": tb, "b_scales": [float(s) for s in b_scales],
                   "input_scale": a_scale, "input_zero_point": in_zp, "output_scale": out_scale if tout != "f32" else 1.0,
                   "output_zero_point": out_zp, "activation": activation, "Nb": int(bias), "Nr": int(residual)}
          if bias:
              b = r.uniform(-0.5, 0.5, n).astype(np.float32)
              inputs.append(b)
              y = y + b
          if residual:
              rq = r.randint(-128, 128, (m, n)).astype(np.int8)
              inputs.append(rq)
              y = y + (rq.astype(np.float64) - 3) * res_scale
              attrs.update({"residual_scale": res_scale, "residual_zero_point": 3, "Tres": "i8"})
          want = requantize(activate(y, activation), tout, out_scale, out_zp)
          tol = {"rtol": 1e-5, "atol": 1e-5} if tout == "f32" else {"atol": 1}
          g.add(f"_QMatMul/{name}_w{bits}", "_QMatMul", inputs, attrs, [want], **tol)
    # More terms than a 32-bit sum of int8 products holds.
    k = 65794
    g.add("_QMatMul/too_many_terms", "_QMatMul", [np.zeros((1, k), np.uint8), np.zeros((k, 1), np.int8)],
          {"Tin": "u8", "Tout": "f32", "b_scales": [0.1]}, error="sums 65794 int8 products, more than the 65793")
    g.add("_QMatMul/too_few_scales", "_QMatMul",
          [np.zeros((2, 3), np.uint8), np.zeros((3, 4), np.int8)],
          {"Tin": "u8", "Tout": "u8", "b_scales": [0.1, 0.2]}, error="b_scales has 2 entries")
