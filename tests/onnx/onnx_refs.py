"""NumPy references for the ONNX importer's tests (onnx_ops_test.py): the
ONNX operator definitions computed directly, so that no expected value
comes from Weft."""
import numpy as np

# --- NumPy references (the ONNX operator definitions) ---------------------------


def conv2d(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    eh, ew = (kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1
    oh = (xp.shape[2] - eh) // strides[0] + 1
    ow = (xp.shape[3] - ew) // strides[1] + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    og = o // group
    for g in range(group):
        for oc in range(g * og, (g + 1) * og):
            for i in range(oh):
                for j in range(ow):
                    patch = xp[:, g * cg:(g + 1) * cg, i * strides[0]:i * strides[0] + eh:dilations[0],
                               j * strides[1]:j * strides[1] + ew:dilations[1]]
                    out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out.astype(np.float32)


def conv_transpose2d(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), output_padding=(0, 0),
                     group=1):
    """ONNX ConvTranspose by its definition: each input element scatters its
    weighted kernel into the full output, which the pads then crop."""
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cout = cog * group
    fh = strides[0] * (h - 1) + (kh - 1) * dilations[0] + 1 + output_padding[0]
    fw = strides[1] * (wd - 1) + (kw - 1) * dilations[1] + 1 + output_padding[1]
    full = np.zeros((n, cout, fh, fw), np.float64)
    cig = cin // group
    for g in range(group):
        for ci in range(g * cig, (g + 1) * cig):
            for i in range(h):
                for j in range(wd):
                    for a in range(kh):
                        for bb in range(kw):
                            full[:, g * cog:(g + 1) * cog, i * strides[0] + a * dilations[0],
                                 j * strides[1] + bb * dilations[1]] += x[:, ci, i, j, None] * w[ci, :, a, bb]
    out = full[:, :, pads[0]:fh - pads[2], pads[1]:fw - pads[3]]
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out.astype(np.float32)


def pool2d(x, k, strides, pads=(0, 0, 0, 0), mode="max", count_include_pad=False, ceil=False):
    n, c, h, w = x.shape
    fill = -np.inf if mode == "max" else np.nan
    hp, wp = h + pads[0] + pads[2], w + pads[1] + pads[3]

    def out_size(size, kk, s):
        return (-(-(size - kk) // s) if ceil else (size - kk) // s) + 1

    oh = out_size(hp, k[0], strides[0])
    ow = out_size(wp, k[1], strides[1])
    # Windows may run past the padded input in ceil mode: pad more with the fill.
    extra_h = max(0, (oh - 1) * strides[0] + k[0] - hp)
    extra_w = max(0, (ow - 1) * strides[1] + k[1] - wp)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2] + extra_h), (pads[1], pads[3] + extra_w)),
                constant_values=np.nan)
    inside = np.pad(np.ones((h, w)), ((pads[0], pads[2] + extra_h), (pads[1], pads[3] + extra_w)))
    in_pad = np.pad(np.ones((h, w)), ((pads[0], pads[2]), (pads[1], pads[3])), constant_values=1)
    in_pad = np.pad(in_pad, ((0, extra_h), (0, extra_w)))
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * strides[0]:i * strides[0] + k[0], j * strides[1]:j * strides[1] + k[1]]
            if mode == "max":
                out[:, :, i, j] = np.nanmax(np.where(np.isnan(win), fill, win), axis=(2, 3))
            else:
                s = np.nansum(win, axis=(2, 3))
                if count_include_pad:
                    cnt = in_pad[i * strides[0]:i * strides[0] + k[0], j * strides[1]:j * strides[1] + k[1]].sum()
                else:
                    cnt = inside[i * strides[0]:i * strides[0] + k[0], j * strides[1]:j * strides[1] + k[1]].sum()
                out[:, :, i, j] = s / cnt
    return out.astype(np.float32)


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_legacy(x, axis, log=False):
    shape = x.shape
    flat = x.reshape(int(np.prod(shape[:axis])), -1)
    y = softmax(flat, 1)
    return (np.log(y) if log else y).reshape(shape)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def lstm_ref(x, w, r, b, h0, c0, reverse=False):
    # ONNX LSTM, one direction, gates i, o, f, c.
    hidden = r.shape[-1]
    wb, rb = b[:4 * hidden], b[4 * hidden:]
    h, c = h0, c0
    ys = [None] * x.shape[0]
    order = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in order:
        z = x[t] @ w.T + h @ r.T + wb + rb
        i, o, f, cc = np.split(z, 4, axis=1)
        i, o, f, cc = sigmoid(i), sigmoid(o), sigmoid(f), np.tanh(cc)
        c = f * c + i * cc
        h = o * np.tanh(c)
        ys[t] = h
    return np.stack(ys), h, c


def gru_ref(x, w, r, b, h0, linear_before_reset=False, reverse=False):
    # ONNX GRU, one direction, gates z, r, h.
    hid = r.shape[-1]
    wz, wr, wh = np.split(w, 3)
    rz, rr, rh = np.split(r, 3)
    wbz, wbr, wbh, rbz, rbr, rbh = np.split(b, 6)
    h = h0
    ys = [None] * x.shape[0]
    order = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in order:
        z = sigmoid(x[t] @ wz.T + h @ rz.T + wbz + rbz)
        rg = sigmoid(x[t] @ wr.T + h @ rr.T + wbr + rbr)
        if linear_before_reset:
            hh = np.tanh(x[t] @ wh.T + rg * (h @ rh.T + rbh) + wbh)
        else:
            hh = np.tanh(x[t] @ wh.T + (rg * h) @ rh.T + rbh + wbh)
        h = (1 - z) * hh + z * h
        ys[t] = h
    return np.stack(ys), h


def rnn_ref(x, w, r, b, h0, reverse=False):
    hid = r.shape[-1]
    wb, rb = b[:hid], b[hid:]
    h = h0
    ys = [None] * x.shape[0]
    order = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in order:
        h = np.tanh(x[t] @ w.T + h @ r.T + wb + rb)
        ys[t] = h
    return np.stack(ys), h


def resize_ref(x, out_shape, scales, mode="nearest", coord="half_pixel", nearest="round_prefer_floor", a=-0.75,
               exclude_outside=False):
    """ONNX Resize, one axis at a time, each output element from its neighbours (the operator's definition)."""
    y = x.astype(np.float64)
    for axis, (n_out, scale) in enumerate(zip(out_shape, scales)):
        n_in = y.shape[axis]
        moved = np.moveaxis(y, axis, -1)
        res = np.zeros(moved.shape[:-1] + (n_out,))
        for o in range(n_out):
            if coord == "half_pixel":
                xo = (o + 0.5) / scale - 0.5
            elif coord == "pytorch_half_pixel":
                xo = (o + 0.5) / scale - 0.5 if n_out > 1 else 0.0
            elif coord == "align_corners":
                xo = 0.0 if n_out == 1 else o * (n_in - 1) / (n_out - 1)
            elif coord == "asymmetric":
                xo = o / scale
            else:
                xo = (o + 0.5) / scale
            xi = int(np.floor(xo))
            r = xo - xi
            if mode == "nearest":
                if nearest == "round_prefer_floor":
                    up = r > 0.5
                elif nearest == "round_prefer_ceil":
                    up = r >= 0.5
                elif nearest == "floor":
                    up = False
                else:
                    up = r > 0
                idx, coeffs = [xi, xi + 1], [0.0, 1.0] if up else [1.0, 0.0]
            elif mode == "linear":
                idx, coeffs = [xi, xi + 1], [1 - r, r]
            else:
                idx = [xi - 1, xi, xi + 1, xi + 2]
                coeffs = [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                          ((a + 2) * r - (a + 3)) * r * r + 1,
                          ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                          ((a * ((1 - r) + 1) - 5 * a) * ((1 - r) + 1) + 8 * a) * ((1 - r) + 1) - 4 * a]
            coeffs = np.array(coeffs)
            if exclude_outside:
                coeffs = np.where([0 <= i < n_in for i in idx], coeffs, 0)
                coeffs = coeffs / coeffs.sum()
            for i, w in zip(idx, coeffs):
                res[..., o] += w * moved[..., min(max(i, 0), n_in - 1)]
        y = np.moveaxis(res, -1, axis)
    return y.astype(x.dtype)
