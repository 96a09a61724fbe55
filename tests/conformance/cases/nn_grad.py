"""The backward ops of the nn family: Conv2DBackpropInput,
Conv2DBackpropFilter, their depthwise twins, MaxPoolGrad, AvgPoolGrad,
BiasAddGrad, FusedBatchNormGrad and LayerNormGrad.

References are NumPy in float64. The convolution gradients are the adjoints
of conv.py's forward reference, tap by tap: every filter tap (i, j) reads a
strided slice of the padded input, so the input gradient adds
dy . filter[i, j]^T into that same slice of a padded zero tensor (then
cropped), and the filter gradient of tap (i, j) is the contraction of that
slice with dy over the batch and the output positions. The pooling
gradients loop over the output positions: the window's in-bounds part of
the input, the first maximum of it in row-major order (numpy.argmax) for
MaxPoolGrad, an even share for AvgPoolGrad. The normalisation gradients
are the closed forms, written out: with xhat = (x - mean) / sqrt(var + eps)
and n elements per statistic, dx = scale / sqrt(var + eps) * (dy -
mean(dy) - xhat * mean(dy * xhat)) when the statistics are the batch's.
"""
import warnings

import numpy as np

from cases import conv, reduction_nn

NP = conv.NP
NUMERIC = ["f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8"]
INTS = ["i8", "i16", "i32", "i64", "u8"]


def tol(g, dtype, scale=1.0):
    rtol, atol = g.tolerance.get(dtype, (0, 0))
    return {"rtol": rtol * scale, "atol": atol * scale}


# --- Convolution backprop -------------------------------------------------------------

def geometry(in_nhwc, kh, kw, strides, dilations, padding, fmt):
    """(oh, ow, top, left, padded height, padded width, sh, sw, dh, dw) of a window op."""
    sh, sw = conv.spatial_entries(strides, fmt)
    dh, dw = conv.spatial_entries(dilations, fmt)
    oh, top, bottom = conv.spatial(in_nhwc[1], kh, sh, dh, padding)
    ow, left, right = conv.spatial(in_nhwc[2], kw, sw, dw, padding)
    return oh, ow, top, left, in_nhwc[1] + top + bottom, in_nhwc[2] + left + right, sh, sw, dh, dw


def conv_input_grad(in_shape, f, dy, strides, dilations, padding, fmt, depthwise):
    """The adjoint of conv.conv_ref (or depthwise_ref) in its input."""
    f = np.asarray(f, np.float64)
    kh, kw, c, m = f.shape
    n, h, w, _ = conv.to_nhwc(np.zeros(in_shape), fmt).shape
    oh, ow, top, left, hp, wp, sh, sw, dh, dw = geometry((n, h, w), kh, kw, strides, dilations, padding, fmt)
    d = conv.to_nhwc(np.asarray(dy, np.float64), fmt)
    dxp = np.zeros((n, hp, wp, c))
    for i in range(kh):
        for j in range(kw):
            if depthwise:
                part = np.einsum("nhwcm,cm->nhwc", d.reshape(n, oh, ow, c, m), f[i, j])
            else:
                part = np.einsum("nhwo,co->nhwc", d, f[i, j])
            dxp[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw, :] += part
    return conv.from_nhwc(dxp[:, top:top + h, left:left + w, :], fmt)


def conv_filter_grad(x, f_shape, dy, strides, dilations, padding, fmt, depthwise):
    """The adjoint of conv.conv_ref (or depthwise_ref) in its filter."""
    kh, kw, c, m = f_shape
    (n, oh, ow, _), taps = conv.windows(x, kh, kw, strides, dilations, padding, fmt)
    d = conv.to_nhwc(np.asarray(dy, np.float64), fmt)
    df = np.zeros(f_shape)
    for (i, j), patch in taps.items():
        if depthwise:
            df[i, j] = np.einsum("nhwc,nhwcm->cm", patch, d.reshape(n, oh, ow, c, m))
        else:
            df[i, j] = np.einsum("nhwc,nhwo->co", patch, d)
    return df


def conv_backprop_cases(g, r):
    for depthwise, table in [(False, conv.CONV), (True, conv.DEPTHWISE)]:
        forward = "DepthwiseConv2D" if depthwise else "Conv2D"
        for k, (name, in_nhwc, f_shape, strides, dilations, padding) in enumerate(table):
            for fmt in ["NHWC", "NCHW"]:
                for dtype in ["f32", "f64"]:
                    t = NP[dtype]
                    attrs = {"T": dtype, "strides": conv.attr4(*strides, fmt),
                             "dilations": conv.attr4(*dilations, fmt), "padding": padding, "data_format": fmt}
                    in_shape = conv.layout(in_nhwc, fmt)
                    out_c = f_shape[2] * f_shape[3] if depthwise else f_shape[3]
                    oh, ow = geometry(in_nhwc, f_shape[0], f_shape[1], attrs["strides"], attrs["dilations"],
                                      padding, fmt)[:2]
                    x = r.uniform(-1, 1, in_shape).astype(t)
                    f = r.uniform(-1, 1, f_shape).astype(t)
                    dy = r.uniform(-1, 1, conv.layout((in_nhwc[0], oh, ow, out_c), fmt)).astype(t)
                    # Both index types for the sizes, alternating over the table.
                    index = "i64" if (k + (fmt == "NCHW")) % 2 else "i32"
                    attrs["Tshape"] = index
                    dx = conv_input_grad(in_shape, f, dy, attrs["strides"], attrs["dilations"], padding, fmt,
                                         depthwise)
                    terms = f_shape[0] * f_shape[1] * (f_shape[3] if depthwise else out_c)
                    g.add(f"{forward}BackpropInput/{name}_{fmt}_{dtype}", f"{forward}BackpropInput",
                          [np.array(in_shape, NP[index]), f, dy], attrs, [dx.astype(t)],
                          **conv.conv_tolerance(g, dtype, terms))
                    df = conv_filter_grad(x, f_shape, dy, attrs["strides"], attrs["dilations"], padding, fmt,
                                          depthwise)
                    g.add(f"{forward}BackpropFilter/{name}_{fmt}_{dtype}", f"{forward}BackpropFilter",
                          [x, np.array(f_shape, NP[index]), dy], attrs, [df.astype(t)],
                          **conv.conv_tolerance(g, dtype, in_nhwc[0] * oh * ow))
        conv_backprop_edge_cases(g, r, forward)


def conv_backprop_edge_cases(g, r, forward):
    depthwise = forward == "DepthwiseConv2D"
    backprop_input, backprop_filter = f"{forward}BackpropInput", f"{forward}BackpropFilter"
    # Hand-derived: a 1x1 input under a 3x3 SAME filter is read by the centre tap only.
    x = np.float64([[[[2.0]]]])
    f = np.arange(9, dtype=np.float64).reshape(3, 3, 1, 1)
    dy = np.float64([[[[3.0]]]])
    g.add(f"{backprop_input}/hand_centre_tap", backprop_input, [np.int32([1, 1, 1, 1]), f, dy],
          {"T": "f64", "padding": "SAME"}, [np.float64([[[[12.0]]]])])  # 3 * f[1, 1] = 3 * 4
    want = np.zeros((3, 3, 1, 1))
    want[1, 1] = 6.0  # x * dy
    g.add(f"{backprop_filter}/hand_centre_tap", backprop_filter, [x, np.int32([3, 3, 1, 1]), dy],
          {"T": "f64", "padding": "SAME"}, [want])
    # Defaults: VALID, NHWC, unit strides, i32 sizes.
    x = r.uniform(-1, 1, (2, 5, 4, 2)).astype(np.float32)
    f = r.uniform(-1, 1, (2, 3, 2, 3)).astype(np.float32)
    out_c = 6 if depthwise else 3
    dy = r.uniform(-1, 1, (2, 4, 2, out_c)).astype(np.float32)
    ones = [1, 1, 1, 1]
    g.add(f"{backprop_input}/default_attrs", backprop_input, [np.int32(x.shape), f, dy], {"T": "f32"},
          [conv_input_grad(x.shape, f, dy, ones, ones, "VALID", "NHWC", depthwise).astype(np.float32)],
          **conv.conv_tolerance(g, "f32", 18))
    g.add(f"{backprop_filter}/default_attrs", backprop_filter, [x, np.int32(f.shape), dy], {"T": "f32"},
          [conv_filter_grad(x, f.shape, dy, ones, ones, "VALID", "NHWC", depthwise).astype(np.float32)],
          **conv.conv_tolerance(g, "f32", 16))
    # Empty: no batch (nothing flows back; the filter gradient is an empty sum).
    for dtype in ["f32", "f64"]:
        t = NP[dtype]
        f = np.ones((3, 3, 2, 2 if depthwise else 4), t)  # 4 output channels
        dy = np.zeros((0, 5, 5, 4), t)
        g.add(f"{backprop_input}/empty_batch_{dtype}", backprop_input, [np.int32([0, 5, 5, 2]), f, dy],
              {"T": dtype, "padding": "SAME"}, [np.zeros((0, 5, 5, 2), t)])
        g.add(f"{backprop_filter}/empty_batch_{dtype}", backprop_filter,
              [np.zeros((0, 5, 5, 2), t), np.int32(f.shape), dy], {"T": dtype, "padding": "SAME"}, [np.zeros(f.shape, t)])
        # No output channels: the input gradient is all zeros.
        g.add(f"{backprop_input}/no_output_channels_{dtype}", backprop_input,
              [np.int32([2, 4, 4, 2]), np.ones((3, 3, 2, 0), t), np.zeros((2, 4, 4, 0), t)],
              {"T": dtype, "padding": "SAME"}, [np.zeros((2, 4, 4, 2), t)])
    # Errors, as the shape function reports them.
    f = np.zeros((3, 3, 2, 2), np.float32)
    x = np.zeros((1, 5, 5, 2), np.float32)
    dy = np.zeros((1, 3, 3, 4 if depthwise else 2), np.float32)
    wrong = np.zeros((1, 4, 4, 4 if depthwise else 2), np.float32)
    g.add(f"{backprop_input}/out_backprop_shape", backprop_input, [np.int32([1, 5, 5, 2]), f, wrong], {"T": "f32"},
          error=f"out_backprop has shape {shape_str(wrong.shape)}, but {forward} of an input [1,5,5,2] with a "
                f"filter [3,3,2,2] gives {shape_str(dy.shape)}")
    g.add(f"{backprop_filter}/out_backprop_shape", backprop_filter, [x, np.int32([3, 3, 2, 2]), wrong],
          {"T": "f32"}, error=f"out_backprop has shape {shape_str(wrong.shape)}, but {forward} of an input "
                              f"[1,5,5,2] with a filter [3,3,2,2] gives {shape_str(dy.shape)}")
    g.add(f"{backprop_input}/sizes_length", backprop_input, [np.int32([1, 5, 5]), f, dy], {"T": "f32"},
          error="input_sizes must be a 1-D tensor of 4 elements, got shape [3]")
    g.add(f"{backprop_filter}/sizes_length", backprop_filter, [x, np.int64([[3, 3, 2, 2]]), dy],
          {"T": "f32", "Tshape": "i64"}, error="filter_sizes must be a 1-D tensor of 4 elements, got shape [1,4]")
    g.add(f"{backprop_input}/negative_size", backprop_input, [np.int32([1, -5, 5, 2]), f, dy], {"T": "f32"},
          error="input_sizes [1,-5,5,2] has a negative entry")
    g.add(f"{backprop_input}/channel_mismatch", backprop_input, [np.int32([1, 5, 5, 3]), f, dy], {"T": "f32"},
          error="the input has 3 channels (NHWC [1,5,5,3]) but the filter expects 2 (HWIO [3,3,2,2])")
    g.add(f"{backprop_filter}/channel_mismatch_nchw", backprop_filter,
          [np.zeros((1, 3, 5, 5), np.float32), np.int32([3, 3, 2, 2]), dy], {"T": "f32", "data_format": "NCHW"},
          error="the input has 3 channels (NCHW [1,3,5,5]) but the filter expects 2")
    g.add(f"{backprop_input}/batch_stride", backprop_input, [np.int32([1, 5, 5, 2]), f, dy],
          {"T": "f32", "strides": [2, 1, 1, 1]}, error="attr 'strides' must be 1 in the batch and channel dimensions")
    g.add(f"{backprop_filter}/dilations_length", backprop_filter, [x, np.int32([3, 3, 2, 2]), dy],
          {"T": "f32", "dilations": [1, 1]}, error="attr 'dilations' must have 4 entries, got 2")
    g.add(f"{backprop_input}/window_larger_valid", backprop_input,
          [np.int32([1, 2, 5, 2]), f, np.zeros((1, 1, 3, 2), np.float32)], {"T": "f32"},
          error="height: the window (3 with dilation) is larger than the input (2)")
    g.add(f"{backprop_filter}/empty_window", backprop_filter, [x, np.int32([0, 3, 2, 2]), dy], {"T": "f32"},
          error="the filter window [0,3,2,2] is empty; it must be at least 1x1")
    g.add(f"{backprop_input}/filter_rank3", backprop_input, [np.int32([1, 5, 5, 2]), np.zeros((3, 3, 2), np.float32),
          dy], {"T": "f32"}, error="filter must have rank 4, got [3,3,2]")


def shape_str(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


# --- Pooling backprop -------------------------------------------------------------------

def pool_grad(x_or_shape, dy, ksize, strides, padding, fmt, kind):
    """dx of MaxPool (first maximum of each window's in-bounds part) or AvgPool."""
    if kind == "max":
        x = conv.to_nhwc(np.asarray(x_or_shape, np.float64), fmt)
    else:
        x = conv.to_nhwc(np.zeros(x_or_shape), fmt)
    n, h, w, c = x.shape
    kh, kw = conv.spatial_entries(ksize, fmt)
    oh, ow, top, left, _, _, sh, sw, _, _ = geometry(x.shape, kh, kw, strides, [1, 1, 1, 1], padding, fmt)
    d = conv.to_nhwc(np.asarray(dy, np.float64), fmt)
    dx = np.zeros(x.shape)
    nn, cc = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
    for i in range(oh):
        h0, h1 = max(i * sh - top, 0), min(i * sh - top + kh, h)
        for j in range(ow):
            w0, w1 = max(j * sw - left, 0), min(j * sw - left + kw, w)
            if kind == "max":
                window = x[:, h0:h1, w0:w1, :].reshape(n, -1, c)
                first = np.argmax(window, axis=1)  # [n, c], row-major within the window
                rows, cols = h0 + first // (w1 - w0), w0 + first % (w1 - w0)
                np.add.at(dx, (nn, rows, cols, cc), d[:, i, j, :])
            else:
                dx[:, h0:h1, w0:w1, :] += d[:, i:i + 1, j:j + 1, :] / ((h1 - h0) * (w1 - w0))
    return conv.from_nhwc(dx, fmt)


def pool_backprop_cases(g, r):
    for op, kind in [("MaxPoolGrad", "max"), ("AvgPoolGrad", "avg")]:
        for k, (name, in_nhwc, ksize, strides, padding) in enumerate(conv.POOL):
            for fmt in ["NHWC", "NCHW"]:
                for dtype in ["f32", "f64"]:
                    t = NP[dtype]
                    attrs = {"T": dtype, "ksize": conv.attr4(*ksize, fmt), "strides": conv.attr4(*strides, fmt),
                             "padding": padding, "data_format": fmt}
                    in_shape = conv.layout(in_nhwc, fmt)
                    # Few distinct values, so windows hold tied maxima.
                    x = (r.integers(-3, 4, in_shape) * 0.5).astype(t) if k % 2 else r.uniform(-1, 1, in_shape).astype(t)
                    y = conv.pool_ref(x, attrs["ksize"], attrs["strides"], padding, fmt, kind).astype(t)
                    dy = r.uniform(-1, 1, y.shape).astype(t)
                    dx = pool_grad(x if kind == "max" else in_shape, dy, attrs["ksize"], attrs["strides"], padding,
                                   fmt, kind)
                    if kind == "max":
                        inputs = [x, y, dy]
                    else:
                        index = "i64" if (k + (fmt == "NCHW")) % 2 else "i32"
                        attrs["Tshape"] = index
                        inputs = [np.array(in_shape, NP[index]), dy]
                    g.add(f"{op}/{name}_{fmt}_{dtype}", op, inputs, attrs, [dx.astype(t)], **tol(g, dtype, 8))
    pool_backprop_edge_cases(g, r)


def pool_backprop_edge_cases(g, r):
    same3 = {"ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": "SAME"}
    # Hand-derived ties: a constant 3x3 image, 2x2 VALID windows with stride 1:
    # each window sends its gradient to its top-left element.
    x = np.ones((1, 3, 3, 1))
    dy = np.float64([1, 2, 3, 4]).reshape(1, 2, 2, 1)
    g.add("MaxPoolGrad/hand_ties_first", "MaxPoolGrad", [x, np.ones((1, 2, 2, 1)), dy],
          {"T": "f64", "ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
          [np.float64([[1, 2, 0], [3, 4, 0], [0, 0, 0]]).reshape(1, 3, 3, 1)])
    # Windows that do not overlap (stride >= window) take a path of their own
    # in MaxPoolGrad. Hand-derived: 2x2 windows with stride 2; the left one
    # holds 3 twice (the first, in row-major order, gets 5), the right one
    # is all zeros (its first element gets 7).
    x = np.float64([[1, 3, 0, 0], [3, 2, 0, 0]]).reshape(1, 2, 4, 1)
    g.add("MaxPoolGrad/hand_disjoint_ties", "MaxPoolGrad", [x, np.float64([3, 0]).reshape(1, 1, 2, 1),
                                                            np.float64([5, 7]).reshape(1, 1, 2, 1)],
          {"T": "f64", "ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"},
          [np.float64([[0, 5, 7, 0], [0, 0, 0, 0]]).reshape(1, 2, 4, 1)])
    # The same path with many ties, more channels than one block of 64, SAME
    # padding of an odd size, and rows and columns no VALID window reaches.
    disjoint = [("same_2x2_s2_wide", (2, 7, 9, 70), (2, 2), (2, 2), "SAME"),
                ("valid_3x3_s3_leftover", (2, 8, 7, 5), (3, 3), (3, 3), "VALID"),
                ("valid_2x1_s3x2", (1, 9, 7, 3), (2, 1), (3, 2), "VALID")]
    for name, in_nhwc, ksize, strides, padding in disjoint:
        for fmt in ["NHWC", "NCHW"]:
            for dtype in ["f32", "f64"]:
                t = NP[dtype]
                attrs = {"T": dtype, "ksize": conv.attr4(*ksize, fmt), "strides": conv.attr4(*strides, fmt),
                         "padding": padding, "data_format": fmt}
                x = (r.integers(-2, 3, conv.layout(in_nhwc, fmt)) * 0.5).astype(t)
                y = conv.pool_ref(x, attrs["ksize"], attrs["strides"], padding, fmt, "max").astype(t)
                dy = r.uniform(-1, 1, y.shape).astype(t)
                dx = pool_grad(x, dy, attrs["ksize"], attrs["strides"], padding, fmt, "max")
                g.add(f"MaxPoolGrad/disjoint_{name}_{fmt}_{dtype}", "MaxPoolGrad", [x, y, dy], attrs,
                      [dx.astype(t)], **tol(g, dtype, 8))
    # Negative inputs with SAME padding: the padding never holds the maximum.
    x = r.uniform(-3, -1, (2, 5, 5, 3))
    attrs = dict(same3, T="f64")
    y = conv.pool_ref(x, same3["ksize"], same3["strides"], "SAME", "NHWC", "max")
    dy = r.uniform(-1, 1, y.shape)
    g.add("MaxPoolGrad/negative_same", "MaxPoolGrad", [x, y, dy], attrs,
          [pool_grad(x, dy, same3["ksize"], same3["strides"], "SAME", "NHWC", "max")], **tol(g, "f64", 8))
    # Hand-derived: AvgPool 3x3 SAME over a 2x2 image: every window covers all 4 elements.
    g.add("AvgPoolGrad/hand_corner", "AvgPoolGrad", [np.int32([1, 2, 2, 1]), np.full((1, 2, 2, 1), 4.0)],
          {"T": "f64", "ksize": [1, 3, 3, 1], "strides": [1, 1, 1, 1], "padding": "SAME"},
          [np.full((1, 2, 2, 1), 4.0)])
    for dtype in ["f32", "f64"]:
        t = NP[dtype]
        g.add(f"MaxPoolGrad/empty_batch_{dtype}", "MaxPoolGrad",
              [np.zeros((0, 4, 4, 2), t), np.zeros((0, 2, 2, 2), t), np.zeros((0, 2, 2, 2), t)], dict(same3, T=dtype),
              [np.zeros((0, 4, 4, 2), t)])
        g.add(f"AvgPoolGrad/empty_batch_{dtype}", "AvgPoolGrad", [np.int64([0, 4, 4, 2]), np.zeros((0, 2, 2, 2), t)],
              dict(same3, T=dtype, Tshape="i64"), [np.zeros((0, 4, 4, 2), t)])
    x = np.zeros((1, 4, 4, 2), np.float32)
    y = np.zeros((1, 2, 2, 2), np.float32)
    attrs = dict(same3, T="f32")
    g.add("MaxPoolGrad/orig_output_shape", "MaxPoolGrad", [x, np.zeros((1, 3, 3, 2), np.float32), y], attrs,
          error="orig_output has shape [1,3,3,2], but MaxPool of orig_input [1,4,4,2] gives [1,2,2,2]")
    g.add("MaxPoolGrad/grad_shape", "MaxPoolGrad", [x, y, np.zeros((1, 2, 2, 1), np.float32)], attrs,
          error="grad has shape [1,2,2,1], but MaxPool of orig_input [1,4,4,2] gives [1,2,2,2]")
    g.add("MaxPoolGrad/rank3", "MaxPoolGrad", [x[0], y, y], attrs, error="orig_input must have rank 4, got [4,4,2]")
    g.add("MaxPoolGrad/batch_ksize", "MaxPoolGrad", [x, y, y], dict(attrs, ksize=[2, 3, 3, 1]),
          error="attr 'ksize' must be 1 in the batch and channel dimensions, got [2,3,3,1]")
    g.add("MaxPoolGrad/window_larger_valid", "MaxPoolGrad", [x, y, y], dict(attrs, ksize=[1, 5, 1, 1], padding="VALID"),
          error="height: the window (5 with dilation) is larger than the input (4)")
    g.add("AvgPoolGrad/grad_shape", "AvgPoolGrad", [np.int32([1, 4, 4, 2]), np.zeros((1, 4, 4, 2), np.float32)],
          attrs, error="grad has shape [1,4,4,2], but AvgPool of an input [1,4,4,2] gives [1,2,2,2]")
    g.add("AvgPoolGrad/shape_length", "AvgPoolGrad", [np.int32([4, 4, 2]), y], attrs,
          error="orig_input_shape must be a 1-D tensor of 4 elements, got shape [3]")
    g.add("AvgPoolGrad/negative_shape", "AvgPoolGrad", [np.int32([1, 4, -4, 2]), y], attrs,
          error="orig_input_shape [1,4,-4,2] has a negative entry")
    g.add("AvgPoolGrad/channel_stride_nchw", "AvgPoolGrad", [np.int32([1, 2, 4, 4]), y],
          {"T": "f32", "ksize": [1, 1, 2, 2], "strides": [1, 2, 1, 1], "padding": "SAME", "data_format": "NCHW"},
          error="attr 'strides' must be 1 in the batch and channel dimensions, got [1,2,1,1]")


# --- BiasAddGrad ---------------------------------------------------------------------------

def bias_add_grad_cases(g, r):
    shapes = [("nhwc", (2, 3, 4, 5), "NHWC"), ("nchw", (2, 5, 3, 4), "NCHW"), ("rank2", (4, 5), "NHWC"),
              ("rank2_nchw", (4, 5), "NCHW"), ("rank5", (2, 2, 3, 2, 5), "NHWC"),
              ("rank5_nchw", (2, 5, 2, 3, 2), "NCHW"), ("rank3_nchw", (3, 5, 7), "NCHW"),
              ("many_rows", (1000, 7), "NHWC"), ("long_planes", (3, 4, 90, 100), "NCHW")]
    for dtype in NUMERIC:
        for name, shape, fmt in shapes:
            if dtype not in ("f32", "f64") and name not in ("nhwc", "nchw", "rank5_nchw", "many_rows"):
                continue
            axis = 1 if fmt == "NCHW" else len(shape) - 1
            axes = tuple(i for i in range(len(shape)) if i != axis)
            if dtype in INTS:
                x = r.integers(0 if dtype == "u8" else -100, 100, shape).astype(NP[dtype])
                want = np.sum(x.astype(np.int64), axis=axes).astype(NP[dtype])  # wraps
                g.add(f"BiasAddGrad/{name}_{dtype}", "BiasAddGrad", [x], {"T": dtype, "data_format": fmt}, [want])
                continue
            x = r.uniform(-4, 4, shape)
            x = g.to_bf16(x) if dtype == "bf16" else x.astype(NP[dtype])
            want = np.sum(x.astype(np.float64), axis=axes)
            want = g.to_bf16(want) if dtype == "bf16" else want.astype(NP[dtype])
            g.add(f"BiasAddGrad/{name}_{dtype}", "BiasAddGrad", [x], {"T": dtype, "data_format": fmt}, [want],
                  **tol(g, dtype, 4))
    # Integers wrap (hand-derived): 127 + 1 = -128 in i8, 200 + 100 = 44 in u8.
    g.add("BiasAddGrad/wrap_i8", "BiasAddGrad", [np.int8([[127, 5], [1, -3]])], {"T": "i8"}, [np.int8([-128, 2])])
    g.add("BiasAddGrad/wrap_u8", "BiasAddGrad", [np.uint8([[200, 1], [100, 2]])], {"T": "u8"}, [np.uint8([44, 3])])
    g.add("BiasAddGrad/empty_rows", "BiasAddGrad", [np.zeros((0, 3), np.float32)], {"T": "f32"},
          [np.zeros(3, np.float32)])
    g.add("BiasAddGrad/no_channels", "BiasAddGrad", [np.zeros((4, 0), np.float64)], {"T": "f64"},
          [np.zeros(0, np.float64)])
    g.add("BiasAddGrad/rank1", "BiasAddGrad", [np.zeros(3, np.float32)], {"T": "f32"},
          error="out_backprop must have rank >= 2, got [3]")


# --- FusedBatchNormGrad, LayerNormGrad -----------------------------------------------------

def batch_norm_grad_ref(dy, x, scale, mean_in, var_in, eps, training, c_axis):
    dy, x = dy.astype(np.float64), x.astype(np.float64)
    axes = tuple(i for i in range(x.ndim) if i != c_axis)
    bshape = [1] * x.ndim
    bshape[c_axis] = x.shape[c_axis]
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the statistics of an empty batch are NaN
        if training:
            mean, var = x.mean(axis=axes), x.var(axis=axes)
        else:
            mean, var = mean_in.astype(np.float64), var_in.astype(np.float64)
        inv = (1 / np.sqrt(var + eps)).reshape(bshape)
        xhat = (x - mean.reshape(bshape)) * inv
    d_offset = dy.sum(axis=axes)
    d_scale = (dy * xhat).sum(axis=axes)
    factor = scale.astype(np.float64).reshape(bshape) * inv
    if training:
        count = x.size // x.shape[c_axis] if x.size else 1
        dx = factor * (dy - d_offset.reshape(bshape) / count - xhat * d_scale.reshape(bshape) / count)
    else:
        dx = factor * dy
    return dx, d_scale, d_offset


def batch_norm_grad_cases(g, r):
    for dtype in ["f32", "f64"]:
        t = NP[dtype]
        for name, (shape, fmt) in reduction_nn.BATCH_NORM_LAYOUTS.items():
            c_axis = 1 if fmt == "NCHW" and len(shape) == 4 else len(shape) - 1
            c = shape[c_axis]
            x = (r.standard_normal(shape) * 2 + 3).astype(t)
            dy = r.standard_normal(shape).astype(t)
            scale = r.uniform(0.5, 2, c).astype(t)
            mean_in = r.standard_normal(c).astype(t)
            var_in = r.uniform(0.5, 3, c).astype(t)
            for training in (True, False):
                for eps in (0.001, 0.25):
                    want = batch_norm_grad_ref(dy, x, scale, mean_in, var_in, eps, training, c_axis)
                    mode = "training" if training else "inference"
                    g.add(f"FusedBatchNormGrad/{dtype}_{name}_{mode}_eps{eps}", "FusedBatchNormGrad",
                          [dy, x, scale, mean_in, var_in],
                          {"T": dtype, "epsilon": eps, "is_training": training, "data_format": fmt},
                          [w.astype(t) for w in want], **tol(g, dtype, 16))
    # Training reads neither the mean nor the variance input: NaN there changes nothing.
    x = r.standard_normal((4, 3))
    dy = r.standard_normal((4, 3))
    p = np.ones(3)
    want = batch_norm_grad_ref(dy, x, p, p, p, 0.001, True, 1)
    g.add("FusedBatchNormGrad/training_ignores_statistics", "FusedBatchNormGrad",
          [dy, x, p, np.full(3, np.nan), np.full(3, np.nan)], {"T": "f64"}, list(want), **tol(g, "f64", 16))
    # An empty batch: empty x_backprop, and sums over nothing, 0.
    for training in (True, False):
        g.add(f"FusedBatchNormGrad/empty_batch_{training}", "FusedBatchNormGrad",
              [np.zeros((0, 3)), np.zeros((0, 3)), p, p, p], {"T": "f64", "is_training": training},
              [np.zeros((0, 3)), np.zeros(3), np.zeros(3)])
    p = np.ones(3, np.float32)
    z = np.zeros((2, 3), np.float32)
    g.add("FusedBatchNormGrad/rank3", "FusedBatchNormGrad", [np.zeros((2, 3, 4), np.float32)] * 2 + [p, p, p],
          {"T": "f32"}, error="y_backprop must have rank 2 or 4, got [2,3,4]")
    g.add("FusedBatchNormGrad/x_shape", "FusedBatchNormGrad", [z, np.zeros((3, 3), np.float32), p, p, p],
          {"T": "f32"}, error="y_backprop has shape [2,3], but x has shape [3,3]; they must be equal")
    g.add("FusedBatchNormGrad/scale_size", "FusedBatchNormGrad", [z, z, np.ones(4, np.float32), p, p],
          {"T": "f32"}, error="scale has 4 elements, x has 3 channels")
    g.add("FusedBatchNormGrad/variance_size_nchw", "FusedBatchNormGrad",
          [np.zeros((2, 4, 2, 3), np.float32)] * 2 + [np.ones(4, np.float32)] * 2 + [p],
          {"T": "f32", "data_format": "NCHW"}, error="variance has 3 elements, x has 4 channels")
    g.add("FusedBatchNormGrad/mean_rank", "FusedBatchNormGrad", [z, z, p, p.reshape(1, 3), p], {"T": "f32"},
          error="mean must be 1-D, got [1,3]")


def layer_norm_grad_ref(dy, x, gamma, eps, begin):
    dy, x, gamma = dy.astype(np.float64), x.astype(np.float64), gamma.astype(np.float64)
    b = begin % x.ndim
    norm_axes = tuple(range(b, x.ndim))
    lead_axes = tuple(range(b))
    mean = x.mean(axis=norm_axes, keepdims=True)
    inv = 1 / np.sqrt(x.var(axis=norm_axes, keepdims=True) + eps)
    xhat = (x - mean) * inv
    gdy = dy * gamma
    dx = inv * (gdy - gdy.mean(axis=norm_axes, keepdims=True) - xhat * (gdy * xhat).mean(axis=norm_axes, keepdims=True))
    return dx, (dy * xhat).sum(axis=lead_axes), dy.sum(axis=lead_axes)


def layer_norm_grad_cases(g, r):
    shapes = [((4, 6), -1), ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), 0), ((5,), 0),
              ((3, 2, 2, 2, 1, 3), 3), ((64, 300), 1), ((300, 70), -1)]
    for dtype in ["f32", "f64"]:
        t = NP[dtype]
        for shape, begin in shapes:
            for eps in (1e-5, 0.5):
                x = (r.standard_normal(shape) * 3 + 1).astype(t)
                dy = r.standard_normal(shape).astype(t)
                gamma = r.uniform(0.5, 2, shape[begin % len(shape):]).astype(t)
                want = layer_norm_grad_ref(dy, x, gamma, eps, begin)
                shape_name = "x".join(map(str, shape))
                g.add(f"LayerNormGrad/{dtype}_{shape_name}_begin{begin}_eps{eps}", "LayerNormGrad", [dy, x, gamma],
                      {"T": dtype, "epsilon": eps, "begin_norm_axis": begin}, [w.astype(t) for w in want],
                      **tol(g, dtype, 16))
    # Defaults: the last axis, epsilon 1e-5.
    x = r.standard_normal((3, 4)).astype(np.float32)
    dy = r.standard_normal((3, 4)).astype(np.float32)
    gamma = np.float32([1, 2, 3, 4])
    g.add("LayerNormGrad/defaults", "LayerNormGrad", [dy, x, gamma], {"T": "f32"},
          [w.astype(np.float32) for w in layer_norm_grad_ref(dy, x, gamma, 1e-5, -1)], **tol(g, "f32", 16))
    g.add("LayerNormGrad/empty_rows", "LayerNormGrad", [np.zeros((0, 3)), np.zeros((0, 3)), np.ones(3)], {"T": "f64"},
          [np.zeros((0, 3)), np.zeros(3), np.zeros(3)])
    g.add("LayerNormGrad/empty_normalized", "LayerNormGrad", [np.zeros((2, 0)), np.zeros((2, 0)), np.ones(0)],
          {"T": "f64"}, [np.zeros((2, 0)), np.zeros(0), np.zeros(0)])
    z = np.zeros((2, 3), np.float32)
    g.add("LayerNormGrad/x_shape", "LayerNormGrad", [z, np.zeros((2, 4), np.float32), np.ones(4, np.float32)],
          {"T": "f32"}, error="dy has shape [2,3], but x has shape [2,4]; they must be equal")
    g.add("LayerNormGrad/gamma_shape", "LayerNormGrad", [z, z, np.ones(2, np.float32)], {"T": "f32"},
          error="gamma has shape [2], expected the normalized dimensions [3]")
    g.add("LayerNormGrad/gamma_shape_begin0", "LayerNormGrad", [z, z, np.ones(3, np.float32)],
          {"T": "f32", "begin_norm_axis": 0}, error="gamma has shape [3], expected the normalized dimensions [2,3]")
    g.add("LayerNormGrad/axis_out_of_range", "LayerNormGrad", [z, z, np.ones(3, np.float32)],
          {"T": "f32", "begin_norm_axis": 2}, error="begin_norm_axis 2 is out of range for rank 2")


def cases(g):
    r = np.random.default_rng(2025)
    conv_backprop_cases(g, r)
    pool_backprop_cases(g, r)
    bias_add_grad_cases(g, r)
    batch_norm_grad_cases(g, r)
    layer_norm_grad_cases(g, r)
