"""Conv2D, DepthwiseConv2D, MaxPool, AvgPool, BiasAdd, and the graph optimizer's _FusedConv2D and _FusedMatMul.

The references are written here in NumPy, in float64: the input is padded
explicitly (TensorFlow's SAME: total = max((out - 1) * stride + effective
window - in, 0), the odd element after), then every filter tap takes a
strided slice of it and an einsum adds its contribution. Pooling takes the
maximum of the same slices over -inf padding, or their sum over zero
padding divided by the count of in-bounds elements (a padded ones mask).
"""
import numpy as np

NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32,
      "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8}


def spatial(in_size, window, stride, dilation, padding):
    """(output size, padding before, padding after) of one spatial dimension."""
    effective = (window - 1) * dilation + 1
    if padding == "VALID":
        return (in_size - effective) // stride + 1, 0, 0
    out = -(-in_size // stride)
    total = max((out - 1) * stride + effective - in_size, 0)
    return out, total // 2, total - total // 2


def spatial_entries(values, fmt):
    return (values[1], values[2]) if fmt == "NHWC" else (values[2], values[3])


def to_nhwc(x, fmt):
    return x if fmt == "NHWC" else x.transpose(0, 2, 3, 1)


def from_nhwc(x, fmt):
    return x if fmt == "NHWC" else x.transpose(0, 3, 1, 2)


def windows(x, kh, kw, strides, dilations, padding, fmt, pad_value=0.0):
    """The padded NHWC input, and for each tap (i, j) the [N, OH, OW, C] slice it sees."""
    x = to_nhwc(np.asarray(x, np.float64), fmt)
    sh, sw = spatial_entries(strides, fmt)
    dh, dw = spatial_entries(dilations, fmt)
    oh, top, bottom = spatial(x.shape[1], kh, sh, dh, padding)
    ow, left, right = spatial(x.shape[2], kw, sw, dw, padding)
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=pad_value)
    taps = {}
    for i in range(kh):
        for j in range(kw):
            taps[i, j] = xp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw, :]
    return (x.shape[0], oh, ow, x.shape[3]), taps


def conv_ref(x, f, strides, dilations, padding, fmt):
    f = np.asarray(f, np.float64)
    (n, oh, ow, _), taps = windows(x, f.shape[0], f.shape[1], strides, dilations, padding, fmt)
    out = np.zeros((n, oh, ow, f.shape[3]))
    for (i, j), patch in taps.items():
        out += np.einsum("nhwc,co->nhwo", patch, f[i, j])
    return from_nhwc(out, fmt)


def depthwise_ref(x, f, strides, dilations, padding, fmt):
    f = np.asarray(f, np.float64)
    c, m = f.shape[2], f.shape[3]
    (n, oh, ow, _), taps = windows(x, f.shape[0], f.shape[1], strides, dilations, padding, fmt)
    out = np.zeros((n, oh, ow, c, m))
    for (i, j), patch in taps.items():
        out += np.einsum("nhwc,cm->nhwcm", patch, f[i, j])
    return from_nhwc(out.reshape(n, oh, ow, c * m), fmt)


def pool_ref(x, ksize, strides, padding, fmt, kind):
    kh, kw = spatial_entries(ksize, fmt)
    ones = [1, 1, 1, 1]
    if kind == "max":
        _, taps = windows(x, kh, kw, strides, ones, padding, fmt, pad_value=-np.inf)
        return from_nhwc(np.max(np.stack(list(taps.values())), axis=0), fmt)
    _, taps = windows(x, kh, kw, strides, ones, padding, fmt)
    _, mask = windows(np.ones_like(x, np.float64), kh, kw, strides, ones, padding, fmt)
    total = np.sum(np.stack(list(taps.values())), axis=0)
    count = np.sum(np.stack(list(mask.values())), axis=0)
    return from_nhwc(total / count, fmt)


def conv_tolerance(g, dtype, terms):
    """f32 sums of |terms| products of values in [-1, 1] round differently in
    each summation order: allow for that."""
    rtol, atol = g.tolerance[dtype]
    return {"rtol": rtol * 8, "atol": atol * max(8, terms)}


def layout(shape_nhwc, fmt):
    n, h, w, c = shape_nhwc
    return (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)


def attr4(h, w, fmt):
    return [1, h, w, 1] if fmt == "NHWC" else [1, 1, h, w]


# (name, input NHWC shape, filter [kh, kw, in, out], strides (h, w), dilations (h, w), padding)
CONV = [
    ("valid_3x3", (1, 6, 7, 2), (3, 3, 2, 3), (1, 1), (1, 1), "VALID"),
    ("same_5x5", (2, 9, 8, 3), (5, 5, 3, 4), (1, 1), (1, 1), "SAME"),
    ("same_stride2_odd", (2, 7, 9, 3), (3, 3, 3, 5), (2, 2), (1, 1), "SAME"),
    ("same_stride2_asym_pad", (2, 8, 8, 2), (3, 3, 2, 4), (2, 2), (1, 1), "SAME"),  # pads 0 before, 1 after
    ("same_even_kernel", (1, 6, 5, 2), (4, 2, 2, 3), (1, 1), (1, 1), "SAME"),  # pads 1/2 and 0/1
    ("valid_stride_asym", (2, 9, 11, 3), (3, 2, 3, 2), (2, 3), (1, 1), "VALID"),
    ("same_stride_asym", (1, 10, 7, 2), (3, 3, 2, 3), (3, 1), (1, 1), "SAME"),
    ("valid_dilation2", (2, 9, 10, 2), (3, 3, 2, 3), (1, 1), (2, 2), "VALID"),
    ("same_dilation2", (2, 8, 7, 3), (3, 3, 3, 2), (1, 1), (2, 2), "SAME"),
    ("same_dilation_asym", (1, 9, 9, 2), (2, 3, 2, 2), (1, 1), (3, 1), "SAME"),
    ("same_dilation_stride", (2, 11, 10, 2), (3, 3, 2, 3), (2, 2), (2, 2), "SAME"),
    ("pointwise_1x1", (3, 5, 6, 8), (1, 1, 8, 6), (1, 1), (1, 1), "VALID"),
    ("pointwise_1x1_stride2", (2, 7, 6, 4), (1, 1, 4, 5), (2, 2), (1, 1), "SAME"),
    ("lenet_5x5_c1", (4, 28, 28, 1), (5, 5, 1, 8), (1, 1), (1, 1), "SAME"),
    ("wide_3x3", (2, 12, 12, 16), (3, 3, 16, 32), (1, 1), (1, 1), "SAME"),
    ("window_equals_input", (2, 4, 5, 3), (4, 5, 3, 2), (1, 1), (1, 1), "VALID"),
    ("window_larger_same", (1, 3, 2, 2), (5, 4, 2, 2), (1, 1), (1, 1), "SAME"),
]

# (name, input NHWC shape, filter [kh, kw, C, M], strides, dilations, padding)
DEPTHWISE = [
    ("valid_m1", (2, 7, 6, 3), (3, 3, 3, 1), (1, 1), (1, 1), "VALID"),
    ("same_m3", (2, 8, 7, 4), (3, 3, 4, 3), (1, 1), (1, 1), "SAME"),
    ("same_stride2_m2", (1, 9, 8, 3), (5, 5, 3, 2), (2, 2), (1, 1), "SAME"),
    ("valid_stride_asym_m1", (2, 10, 9, 5), (3, 2, 5, 1), (1, 2), (1, 1), "VALID"),
    ("same_dilation2_m2", (2, 9, 9, 2), (3, 3, 2, 2), (1, 1), (2, 2), "SAME"),
    ("wide_m1", (2, 12, 12, 32), (3, 3, 32, 1), (1, 1), (1, 1), "SAME"),
]

# (name, input NHWC shape, ksize (h, w), strides (h, w), padding)
POOL = [
    ("valid_2x2_s2", (2, 8, 6, 3), (2, 2), (2, 2), "VALID"),
    ("same_3x3_s2", (2, 7, 9, 3), (3, 3), (2, 2), "SAME"),  # windows overlap the padding
    ("same_3x3_s1", (1, 5, 6, 2), (3, 3), (1, 1), "SAME"),
    ("same_2x3_s12", (2, 6, 7, 3), (2, 3), (1, 2), "SAME"),
    ("valid_3x2_s21", (2, 7, 8, 2), (3, 2), (2, 1), "VALID"),
    ("same_window_larger", (1, 3, 4, 2), (5, 5), (1, 1), "SAME"),
    ("same_stride_over_window", (2, 9, 9, 2), (2, 2), (3, 3), "SAME"),
    ("same_4x4_s3_odd", (1, 10, 11, 3), (4, 4), (3, 3), "SAME"),
    ("wide_3x3_s2", (4, 16, 16, 32), (3, 3), (2, 2), "SAME"),
]


def conv_cases(g, r):
    for name, in_shape, f_shape, strides, dilations, padding in CONV:
        for fmt in ["NHWC", "NCHW"]:
            for dtype in ["f32", "f64"]:
                x = r.uniform(-1, 1, layout(in_shape, fmt)).astype(NP[dtype])
                f = r.uniform(-1, 1, f_shape).astype(NP[dtype])
                attrs = {"T": dtype, "strides": attr4(*strides, fmt), "dilations": attr4(*dilations, fmt),
                         "padding": padding, "data_format": fmt}
                want = conv_ref(x, f, attrs["strides"], attrs["dilations"], padding, fmt)
                terms = f_shape[0] * f_shape[1] * f_shape[2]
                g.add(f"Conv2D/{name}_{fmt}_{dtype}", "Conv2D", [x, f], attrs, [want.astype(NP[dtype])],
                      **conv_tolerance(g, dtype, terms))
    # Defaults: VALID, NHWC, unit strides and dilations.
    x = r.uniform(-1, 1, (2, 5, 5, 2)).astype(np.float32)
    f = r.uniform(-1, 1, (2, 2, 2, 3)).astype(np.float32)
    g.add("Conv2D/default_attrs", "Conv2D", [x, f], {"T": "f32"},
          [conv_ref(x, f, [1, 1, 1, 1], [1, 1, 1, 1], "VALID", "NHWC").astype(np.float32)],
          **conv_tolerance(g, "f32", 8))
    # Empty: no batch, and no input channels (an empty sum: zeros).
    g.add("Conv2D/empty_batch", "Conv2D", [np.zeros((0, 5, 5, 2), np.float32), np.ones((3, 3, 2, 4), np.float32)],
          {"T": "f32", "padding": "SAME"}, [np.zeros((0, 5, 5, 4), np.float32)])
    g.add("Conv2D/no_input_channels", "Conv2D",
          [np.zeros((2, 4, 4, 0), np.float64), np.zeros((3, 3, 0, 2), np.float64)],
          {"T": "f64", "padding": "SAME"}, [np.zeros((2, 4, 4, 2), np.float64)])
    # Errors.
    g.add("Conv2D/channel_mismatch", "Conv2D", [np.zeros((1, 5, 5, 3), np.float32), np.zeros((3, 3, 2, 4), np.float32)],
          {"T": "f32"}, error="channels")
    g.add("Conv2D/channel_mismatch_nchw", "Conv2D",
          [np.zeros((1, 3, 5, 5), np.float32), np.zeros((3, 3, 5, 4), np.float32)],
          {"T": "f32", "data_format": "NCHW"}, error="channels")
    g.add("Conv2D/batch_stride", "Conv2D", [np.zeros((1, 5, 5, 2), np.float32), np.zeros((3, 3, 2, 4), np.float32)],
          {"T": "f32", "strides": [2, 1, 1, 1]}, error="must be 1 in the batch and channel dimensions")
    g.add("Conv2D/channel_stride_nchw", "Conv2D",
          [np.zeros((1, 2, 5, 5), np.float32), np.zeros((3, 3, 2, 4), np.float32)],
          {"T": "f32", "strides": [1, 2, 1, 1], "data_format": "NCHW"}, error="must be 1 in the batch and channel")
    g.add("Conv2D/channel_dilation", "Conv2D", [np.zeros((1, 5, 5, 2), np.float32), np.zeros((3, 3, 2, 4), np.float32)],
          {"T": "f32", "dilations": [1, 1, 1, 2]}, error="must be 1 in the batch and channel dimensions")
    g.add("Conv2D/strides_length", "Conv2D", [np.zeros((1, 5, 5, 2), np.float32), np.zeros((3, 3, 2, 4), np.float32)],
          {"T": "f32", "strides": [1, 1, 1]}, error="must have 4 entries")
    g.add("Conv2D/window_larger_valid", "Conv2D",
          [np.zeros((1, 4, 6, 2), np.float32), np.zeros((5, 3, 2, 4), np.float32)],
          {"T": "f32", "padding": "VALID"}, error="larger than the input")
    g.add("Conv2D/dilated_window_larger_valid", "Conv2D",
          [np.zeros((1, 6, 6, 2), np.float64), np.zeros((3, 3, 2, 4), np.float64)],
          {"T": "f64", "padding": "VALID", "dilations": [1, 1, 3, 1]}, error="larger than the input")
    g.add("Conv2D/empty_filter_window", "Conv2D",
          [np.zeros((1, 4, 4, 2), np.float32), np.zeros((0, 3, 2, 4), np.float32)], {"T": "f32"},
          error="at least 1x1")
    g.add("Conv2D/rank3", "Conv2D", [np.zeros((5, 5, 2), np.float32), np.zeros((3, 3, 2, 4), np.float32)],
          {"T": "f32"}, error="rank 4")


def depthwise_cases(g, r):
    for name, in_shape, f_shape, strides, dilations, padding in DEPTHWISE:
        for fmt in ["NHWC", "NCHW"]:
            for dtype in ["f32", "f64"]:
                x = r.uniform(-1, 1, layout(in_shape, fmt)).astype(NP[dtype])
                f = r.uniform(-1, 1, f_shape).astype(NP[dtype])
                attrs = {"T": dtype, "strides": attr4(*strides, fmt), "dilations": attr4(*dilations, fmt),
                         "padding": padding, "data_format": fmt}
                want = depthwise_ref(x, f, attrs["strides"], attrs["dilations"], padding, fmt)
                g.add(f"DepthwiseConv2D/{name}_{fmt}_{dtype}", "DepthwiseConv2D", [x, f], attrs,
                      [want.astype(NP[dtype])], **conv_tolerance(g, dtype, f_shape[0] * f_shape[1]))
    # Hand-checkable: one channel of ones, multiplier 2 scaling by 1 and 10.
    x = np.ones((1, 3, 3, 1), np.float64)
    f = np.stack([np.ones((2, 2)), 10 * np.ones((2, 2))], axis=-1).reshape(2, 2, 1, 2)
    want = np.float64([[4, 2], [2, 1]])[None, :, :, None] * np.float64([1, 10])  # SAME pads after: edges see less
    g.add("DepthwiseConv2D/hand_same_m2", "DepthwiseConv2D", [x, f], {"T": "f64", "padding": "SAME",
          "strides": [1, 2, 2, 1]}, [want])
    g.add("DepthwiseConv2D/channel_mismatch", "DepthwiseConv2D",
          [np.zeros((1, 5, 5, 3), np.float32), np.zeros((3, 3, 2, 2), np.float32)], {"T": "f32"}, error="channels")
    g.add("DepthwiseConv2D/batch_stride", "DepthwiseConv2D",
          [np.zeros((1, 5, 5, 2), np.float32), np.zeros((3, 3, 2, 2), np.float32)],
          {"T": "f32", "strides": [2, 1, 1, 1]}, error="must be 1 in the batch and channel dimensions")
    g.add("DepthwiseConv2D/window_larger_valid", "DepthwiseConv2D",
          [np.zeros((1, 4, 4, 2), np.float32), np.zeros((5, 5, 2, 1), np.float32)], {"T": "f32"},
          error="larger than the input")


def pool_cases(g, r):
    for op, kind in [("MaxPool", "max"), ("AvgPool", "avg")]:
        for name, in_shape, ksize, strides, padding in POOL:
            for fmt in ["NHWC", "NCHW"]:
                for dtype in ["f32", "f64"]:
                    x = r.uniform(-1, 1, layout(in_shape, fmt)).astype(NP[dtype])
                    attrs = {"T": dtype, "ksize": attr4(*ksize, fmt), "strides": attr4(*strides, fmt),
                             "padding": padding, "data_format": fmt}
                    want = pool_ref(x, attrs["ksize"], attrs["strides"], padding, fmt, kind)
                    rtol, atol = g.tolerance[dtype]
                    g.add(f"{op}/{name}_{fmt}_{dtype}", op, [x], attrs, [want.astype(NP[dtype])],
                          rtol=rtol * 4, atol=atol * 4)
        g.add(f"{op}/window_larger_valid", op, [np.zeros((1, 4, 4, 2), np.float32)],
              {"T": "f32", "ksize": [1, 5, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
              error="larger than the input")
        g.add(f"{op}/batch_ksize", op, [np.zeros((2, 4, 4, 2), np.float32)],
              {"T": "f32", "ksize": [2, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
              error="must be 1 in the batch and channel dimensions")
        g.add(f"{op}/channel_stride_nchw", op, [np.zeros((1, 2, 4, 4), np.float64)],
              {"T": "f64", "ksize": [1, 1, 2, 2], "strides": [1, 2, 1, 1], "padding": "SAME", "data_format": "NCHW"},
              error="must be 1 in the batch and channel dimensions")
        g.add(f"{op}/empty_batch", op, [np.zeros((0, 4, 4, 2), np.float32)],
              {"T": "f32", "ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"},
              [np.zeros((0, 2, 2, 2), np.float32)])
    # Negative inputs: zero padding must never win the maximum.
    x = r.uniform(-3, -1, (2, 5, 5, 3))
    attrs = {"T": "f64", "ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    g.add("MaxPool/negative_same", "MaxPool", [x], attrs, [pool_ref(x, attrs["ksize"], attrs["strides"], "SAME",
                                                                   "NHWC", "max")])
    g.add("MaxPool/negative_same_f32", "MaxPool", [x.astype(np.float32)], dict(attrs, T="f32"),
          [pool_ref(x.astype(np.float32), attrs["ksize"], attrs["strides"], "SAME", "NHWC", "max").astype(np.float32)])
    # Hand-derived: a 3x3 SAME average at a corner of a 2x2 ones-and-threes image
    # covers the 4 in-bounds values only.
    x = np.float64([[1, 3], [3, 1]]).reshape(1, 2, 2, 1)
    g.add("AvgPool/hand_corner", "AvgPool", [x], {"T": "f64", "ksize": [1, 3, 3, 1], "strides": [1, 1, 1, 1],
                                                   "padding": "SAME"}, [np.full((1, 2, 2, 1), 2.0)])


def bias_cases(g, r):
    shapes = [("nhwc", (2, 3, 4, 5), "NHWC"), ("nchw", (2, 5, 3, 4), "NCHW"), ("rank2", (4, 5), "NHWC"),
              ("rank2_nchw", (4, 5), "NCHW"), ("rank5", (2, 2, 3, 2, 5), "NHWC"), ("rank5_nchw", (2, 5, 2, 3, 2), "NCHW"),
              ("rank3_nchw", (3, 5, 7), "NCHW")]
    for dtype in ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8"]:
        for name, shape, fmt in shapes:
            if dtype not in ("f32", "f64") and name not in ("nhwc", "nchw", "rank5_nchw"):
                continue
            channels = shape[1] if fmt == "NCHW" else shape[-1]
            if dtype in ("i8", "i16", "i32", "i64"):
                x, b = r.integers(-50, 50, shape), r.integers(-50, 50, channels)
            elif dtype == "u8":
                x, b = r.integers(0, 120, shape), r.integers(0, 120, channels)
            else:
                x, b = r.uniform(-4, 4, shape), r.uniform(-4, 4, channels)
            if dtype == "bf16":
                x, b = g.to_bf16(x), g.to_bf16(b)
            else:
                x, b = x.astype(NP[dtype]), b.astype(NP[dtype])
            bshape = [1] * len(shape)
            bshape[1 if fmt == "NCHW" else -1] = channels
            want = x.astype(np.float64) + b.astype(np.float64).reshape(bshape)
            want = g.to_bf16(want) if dtype == "bf16" else want.astype(NP[dtype])
            rtol, atol = g.tolerance.get(dtype, (0, 0))
            g.add(f"BiasAdd/{name}_{dtype}", "BiasAdd", [x, b], {"T": dtype, "data_format": fmt}, [want],
                  rtol=rtol, atol=atol)
    # Integers wrap (hand-derived).
    g.add("BiasAdd/wrap_i8", "BiasAdd", [np.int8([[127, -128], [0, 1]]), np.int8([1, -1])], {"T": "i8"},
          [np.int8([[-128, 127], [1, 0]])])
    g.add("BiasAdd/wrap_u8", "BiasAdd", [np.uint8([[250, 5]]), np.uint8([10, 255])], {"T": "u8"},
          [np.uint8([[4, 4]])])
    g.add("BiasAdd/wrap_i32", "BiasAdd", [np.int32([[2**31 - 1]]), np.int32([1])], {"T": "i32"},
          [np.int32([[-2**31]])])
    g.add("BiasAdd/empty", "BiasAdd", [np.zeros((0, 3), np.float32), np.ones(3, np.float32)], {"T": "f32"},
          [np.zeros((0, 3), np.float32)])
    g.add("BiasAdd/size_mismatch", "BiasAdd", [np.zeros((2, 3, 4), np.float32), np.zeros(3, np.float32)],
          {"T": "f32"}, error="channels")
    g.add("BiasAdd/size_mismatch_nchw", "BiasAdd", [np.zeros((2, 3, 4, 4), np.float32), np.zeros(4, np.float32)],
          {"T": "f32", "data_format": "NCHW"}, error="channels")
    g.add("BiasAdd/bias_rank2", "BiasAdd", [np.zeros((2, 3), np.float32), np.zeros((1, 3), np.float32)],
          {"T": "f32"}, error="bias must be 1-D")
    g.add("BiasAdd/value_rank1", "BiasAdd", [np.zeros(3, np.float32), np.zeros(3, np.float32)],
          {"T": "f32"}, error="rank >= 2")


def activate(y, activation, alpha=0.0, beta=0.0):
    """The fused ops' activations, in float64, from their definitions."""
    from math import erf, sqrt
    if activation == "None":
        return y
    if activation == "Relu":
        return np.maximum(y, 0)
    if activation == "Relu6":
        return np.clip(y, 0, 6)
    if activation == "Clip":
        return np.clip(y, alpha, beta)
    if activation == "LeakyRelu":
        return np.where(y < 0, alpha * y, y)
    if activation == "Elu":
        return np.where(y > 0, y, np.expm1(y))
    if activation == "Sigmoid":
        return 1 / (1 + np.exp(-y))
    if activation == "Tanh":
        return np.tanh(y)
    if activation == "Swish":
        return y / (1 + np.exp(-y))
    if activation == "Gelu":
        return 0.5 * y * (1 + np.vectorize(erf)(y / sqrt(2)))
    if activation == "GeluTanh":
        return 0.5 * y * (1 + np.tanh(sqrt(2 / np.pi) * (y + 0.044715 * y ** 3)))
    raise ValueError(activation)


# (name, input NHWC shape, filter, strides, explicit pads (top, bottom, left, right) or a padding, depthwise,
#  bias, residual, activation)
FUSED_CONV = [
    ("bias_relu_same", (2, 7, 6, 3), (3, 3, 3, 4), (1, 1), "SAME", False, True, False, "Relu"),
    ("bias_residual_relu", (1, 6, 6, 4), (3, 3, 4, 4), (1, 1), "SAME", False, True, True, "Relu"),
    ("explicit_pads_stride2", (2, 9, 8, 3), (3, 3, 3, 5), (2, 2), (1, 0, 2, 1), False, True, False, "Relu6"),
    ("explicit_7x7_s2", (1, 16, 16, 3), (7, 7, 3, 8), (2, 2), (3, 3, 3, 3), False, True, False, "None"),
    ("no_bias_sigmoid", (1, 5, 6, 2), (1, 1, 2, 3), (1, 1), "VALID", False, False, False, "Sigmoid"),
    ("tanh_valid", (2, 6, 5, 3), (2, 2, 3, 2), (1, 1), "VALID", False, True, False, "Tanh"),
    ("elu", (1, 5, 5, 2), (3, 3, 2, 3), (1, 1), "SAME", False, True, False, "Elu"),
    ("swish", (1, 6, 6, 4), (1, 1, 4, 6), (1, 1), "VALID", False, True, False, "Swish"),
    ("gelu", (1, 5, 4, 3), (3, 3, 3, 2), (1, 1), "SAME", False, True, False, "Gelu"),
    ("gelu_tanh_residual", (1, 5, 4, 3), (3, 3, 3, 3), (1, 1), "SAME", False, True, True, "GeluTanh"),
    ("leaky_relu", (1, 4, 4, 2), (3, 3, 2, 2), (1, 1), "SAME", False, False, False, "LeakyRelu"),
    ("clip", (1, 4, 4, 2), (3, 3, 2, 2), (1, 1), "SAME", False, True, False, "Clip"),
    ("depthwise_relu6", (2, 8, 7, 4), (3, 3, 4, 1), (1, 1), "SAME", True, True, False, "Relu6"),
    ("depthwise_m2_explicit", (1, 9, 9, 3), (3, 3, 3, 2), (2, 2), (1, 1, 1, 1), True, True, False, "Relu"),
    ("depthwise_residual", (1, 6, 6, 4), (3, 3, 4, 1), (1, 1), "SAME", True, False, True, "None"),
]


def fused_conv_cases(g, r):
    for name, in_shape, f_shape, strides, pads, depthwise, bias, residual, activation in FUSED_CONV:
        for fmt in ["NHWC", "NCHW"]:
            x = r.uniform(-1, 1, layout(in_shape, fmt)).astype(np.float32)
            f = r.uniform(-1, 1, f_shape).astype(np.float32)
            attrs = {"T": "f32", "strides": attr4(*strides, fmt), "data_format": fmt, "depthwise": depthwise,
                     "bias": bias, "residual": residual, "activation": activation}
            alpha, beta = {"LeakyRelu": (0.1, 0.0), "Clip": (-0.5, 0.75)}.get(activation, (0.0, 0.0))
            if activation in ("LeakyRelu", "Clip"):
                attrs["alpha"], attrs["beta"] = alpha, beta
            if isinstance(pads, str):
                attrs["padding"] = pads
                xp = x
                padding = pads
            else:
                attrs["padding"] = "EXPLICIT"
                attrs["explicit_paddings"] = list(pads)
                top, bottom, left, right = pads
                spatial_pads = ((0, 0), (top, bottom), (left, right), (0, 0))
                if fmt == "NCHW":
                    spatial_pads = ((0, 0), (0, 0), (top, bottom), (left, right))
                xp = np.pad(x, spatial_pads)
                padding = "VALID"
            ones = attr4(1, 1, fmt)
            ref = depthwise_ref if depthwise else conv_ref
            y = ref(xp, f, attrs["strides"], ones, padding, fmt)
            out_channels = f_shape[2] * f_shape[3] if depthwise else f_shape[3]
            inputs = [x, f]
            if bias:
                b = r.uniform(-1, 1, out_channels).astype(np.float32)
                inputs.append(b)
                y = y + (b if fmt == "NHWC" else b[:, None, None])
            if residual:
                res = r.uniform(-1, 1, y.shape).astype(np.float32)
                inputs.append(res)
                y = y + res
            attrs["N"] = len(inputs) - 2
            want = activate(y, activation, alpha, beta)
            terms = f_shape[0] * f_shape[1] * (1 if depthwise else f_shape[2])
            g.add(f"_FusedConv2D/{name}_{fmt}", "_FusedConv2D", inputs, attrs, [want.astype(np.float32)],
                  **conv_tolerance(g, "f32", terms + 2))
    # A constant filter: the same values as a filter that may change.
    x = r.uniform(-1, 1, (1, 5, 5, 2)).astype(np.float32)
    f = r.uniform(-1, 1, (3, 3, 2, 3)).astype(np.float32)
    g.add("_FusedConv2D/constant_filter", "_FusedConv2D", [x, f],
          {"T": "f32", "N": 0, "padding": "SAME", "constant_filter": True},
          [conv_ref(x, f, [1, 1, 1, 1], [1, 1, 1, 1], "SAME", "NHWC").astype(np.float32)],
          **conv_tolerance(g, "f32", 18))
    # Winograd allowed (the optimizer's level 3): 3x3, stride 1, channels
    # oneDNN's Winograd takes, with a residual and the exact Relu after it;
    # and geometries it declines (3 channels, stride 2), which run direct.
    # The same NumPy sums: Winograd's fewer products round differently,
    # within the convolution tolerance.
    for name, in_shape, f_shape, strides, padding, residual, activation in [
            ("winograd_same_residual_relu", (1, 10, 9, 16), (3, 3, 16, 32), (1, 1), "SAME", True, "Relu"),
            ("winograd_valid", (2, 8, 8, 32), (3, 3, 32, 16), (1, 1), "VALID", False, "None"),
            ("winograd_declined_3_channels", (1, 6, 6, 3), (3, 3, 3, 4), (1, 1), "SAME", False, "Relu6"),
            ("winograd_declined_stride2", (1, 9, 9, 16), (3, 3, 16, 16), (2, 2), "SAME", True, "None")]:
        x = r.uniform(-1, 1, in_shape).astype(np.float32)
        f = r.uniform(-1, 1, f_shape).astype(np.float32)
        b = r.uniform(-1, 1, f_shape[3]).astype(np.float32)
        y = conv_ref(x, f, attr4(*strides, "NHWC"), [1, 1, 1, 1], padding, "NHWC") + b
        inputs = [x, f, b]
        if residual:
            res = r.uniform(-1, 1, y.shape).astype(np.float32)
            inputs.append(res)
            y = y + res
        g.add(f"_FusedConv2D/{name}", "_FusedConv2D", inputs,
              {"T": "f32", "N": len(inputs) - 2, "strides": attr4(*strides, "NHWC"), "padding": padding, "bias": True,
               "residual": residual, "activation": activation, "winograd": True, "constant_filter": True},
              [activate(y, activation, 0.0, 0.0).astype(np.float32)], **conv_tolerance(g, "f32", 9 * f_shape[2] + 2))
    # Winograd allowed, but the input holds an infinity and a NaN: the
    # direct sum's IEEE values (the infinity stays in the windows over it,
    # the NaN too), not a tile's worth of NaN.
    x = r.uniform(-1, 1, (1, 8, 8, 16)).astype(np.float32)
    x[0, 1, 1, 3] = np.inf
    x[0, 5, 6, 0] = np.nan
    f = r.uniform(0.1, 1, (3, 3, 16, 16)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        want = conv_ref(x, f, [1, 1, 1, 1], [1, 1, 1, 1], "SAME", "NHWC").astype(np.float32)
    g.add("_FusedConv2D/winograd_nonfinite_input", "_FusedConv2D", [x, f],
          {"T": "f32", "N": 0, "padding": "SAME", "winograd": True, "constant_filter": True}, [want],
          **conv_tolerance(g, "f32", 146))
    # No input channels: an empty sum, then the bias and the activation.
    g.add("_FusedConv2D/no_input_channels", "_FusedConv2D",
          [np.zeros((1, 3, 3, 0), np.float32), np.zeros((3, 3, 0, 2), np.float32), np.float32([-1, 2])],
          {"T": "f32", "N": 1, "padding": "SAME", "bias": True, "activation": "Relu"},
          [np.tile(np.float32([0, 2]), (1, 3, 3, 1))])
    # Errors: the args do not agree with the attrs or the output.
    g.add("_FusedConv2D/bias_size", "_FusedConv2D",
          [np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 3, 2, 3), np.float32), np.zeros(2, np.float32)],
          {"T": "f32", "N": 1, "bias": True}, error="channels")
    g.add("_FusedConv2D/n_mismatch", "_FusedConv2D",
          [np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 3, 2, 3), np.float32), np.zeros(3, np.float32)],
          {"T": "f32", "N": 1}, error="N is 1 but bias and residual ask for 0")
    g.add("_FusedConv2D/explicit_pads_length", "_FusedConv2D",
          [np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 3, 2, 3), np.float32)],
          {"T": "f32", "N": 0, "padding": "EXPLICIT", "explicit_paddings": [1, 1]}, error="4 entries")
    g.add("_FusedConv2D/residual_wider", "_FusedConv2D",
          [np.zeros((1, 4, 4, 2), np.float32), np.zeros((1, 1, 2, 3), np.float32), np.zeros((2, 4, 4, 3), np.float32)],
          {"T": "f32", "N": 1, "residual": True}, error="residual")


def fused_matmul_cases(g, r):
    for name, (m, k, n), ta, tb, bias, residual, activation in [
        ("bias_relu", (4, 5, 3), False, False, True, False, "Relu"),
        ("bias_gelu", (3, 8, 6), False, False, True, False, "Gelu"),
        ("transposed_bias_tanh", (5, 4, 7), True, True, True, False, "Tanh"),
        ("residual_sigmoid", (2, 6, 3), False, True, False, True, "Sigmoid"),
        ("bias_residual_none", (6, 3, 4), True, False, True, True, "None"),
        ("gelu_tanh", (3, 3, 3), False, False, True, False, "GeluTanh"),
    ]:
        a = r.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
        b = r.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
        y = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
        inputs = [a, b]
        if bias:
            v = r.uniform(-1, 1, n).astype(np.float32)
            inputs.append(v)
            y = y + v
        if residual:
            res = r.uniform(-1, 1, (m, n)).astype(np.float32)
            inputs.append(res)
            y = y + res
        attrs = {"T": "f32", "N": len(inputs) - 2, "transpose_a": ta, "transpose_b": tb, "bias": bias,
                 "residual": residual, "activation": activation}
        g.add(f"_FusedMatMul/{name}", "_FusedMatMul", inputs, attrs, [activate(y, activation).astype(np.float32)],
              **conv_tolerance(g, "f32", k + 2))
    g.add("_FusedMatMul/inner_mismatch", "_FusedMatMul", [np.zeros((2, 3), np.float32), np.zeros((4, 2), np.float32)],
          {"T": "f32", "N": 0}, error="inner dimension")
    g.add("_FusedMatMul/empty_inner", "_FusedMatMul",
          [np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32), np.float32([1, -2, 3])],
          {"T": "f32", "N": 1, "bias": True, "activation": "Relu"}, [np.float32([[1, 0, 3], [1, 0, 3]])])


def cases(g):
    r = np.random.default_rng(2024)
    conv_cases(g, r)
    depthwise_cases(g, r)
    pool_cases(g, r)
    bias_cases(g, r)
    fused_conv_cases(g, r)
    fused_matmul_cases(g, r)
