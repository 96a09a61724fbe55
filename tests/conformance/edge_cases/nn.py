"""Matrix products, BiasAdd, AddN, ClipByValue and Range; windows
(convolution and pooling); softmax, losses, normalisation and recurrent
cells."""
import numpy as np

from gen_cases import NUMPY_DTYPE
from cases import conv, nn_grad, reduction_nn, rnn

from .movement import movement_input
from .reductions import edge_rows, reduce_ref
from .values import FLOATS, INF, INTS, NAN, RANK_SHAPES, arr, choices, dense, edges, int_range, native, objects, \
    out_float, out_int, round_native, storage, tol


# --- matrix products and bias --------------------------------------------------------

def one_edge_per_row(d, rows, cols, seed=0):
    """A [rows, cols] matrix of small exact values with row i's column
    i % cols holding edge value i: each output element then sees at most
    one edge value, so its value does not depend on the order of the sum."""
    base = np.array([[((i * 7 + j * 3 + seed) % 5) - 2 for j in range(cols)] for i in range(rows)], np.float64)
    base *= 0.5
    e = edges(d)
    m = arr(base.reshape(-1).tolist(), d, (rows, cols)) if d in FLOATS else arr(
        [int(v) for v in (base * 2).reshape(-1)], d, (rows, cols))
    for i in range(rows):
        m[i, i % cols] = arr(e[i % len(e)], d)
    return m


def matmul_ref(a, b, d):
    if d in INTS:
        return out_int(objects(a) @ objects(b), d)
    return out_float(np.asarray(a, np.float64) @ np.asarray(b, np.float64), d)


def gen_matmul(edge, op, binding):
    d = binding["T"]
    n = len(edges(d))
    a = one_edge_per_row(d, n, 4)
    # b has small exact values only, so a row's single edge value meets
    # finite factors.
    bm = arr((np.arange(12).reshape(4, 3) % 4 - 1.5).reshape(-1).tolist() if d in FLOATS else
             (np.arange(12) % 4 - 1).tolist(), d, (4, 3))
    layouts = [("edge_rows", a, bm, False, False), ("transposed_a", dense(a.T), bm, True, False),
               ("transposed_b", a, dense(bm.T), False, True),
               ("both", dense(a.T), dense(bm.T), True, True),
               ("empty_k", np.zeros((3, 0), storage(d)), np.zeros((0, 2), storage(d)), False, False),
               ("empty_m", np.zeros((0, 4), storage(d)), bm, False, False)]
    attr_names = ("transpose_a", "transpose_b") if op == "MatMul" else ("adj_x", "adj_y")
    for layout, x, y, ta, tb in layouts:
        xa = x.T if ta else x
        yb = y.T if tb else y
        want = matmul_ref(xa, yb, d)
        if op == "BatchMatMul":
            x, y, want = x[None], y[None], want[None]
        edge.add(op, binding, layout, [x, y], [want], {attr_names[0]: ta, attr_names[1]: tb}, **tol(d, 8))
    if op == "BatchMatMul":
        x = np.stack([a[:4], a[4:8]])[:, None]          # [2, 1, 4, 4]
        y = np.stack([bm, bm[::-1], bm])[None]           # [1, 3, 4, 3]
        want = matmul_ref(np.broadcast_to(x, (2, 3, 4, 4)), np.broadcast_to(y, (2, 3, 4, 3)), d)
        edge.add(op, binding, "broadcast_batch", [x, y], [want], **tol(d, 8))
        edge.add(op, binding, "empty_batch", [np.zeros((0, 2, 4), storage(d)), bm[None]],
                 [np.zeros((0, 2, 3), storage(d))])
        edge.add(op, binding, "rank8_batch", [a[:4].reshape(1, 1, 1, 1, 1, 1, 4, 4), bm.reshape(1, 1, 1, 1, 1, 1, 4, 3)],
                 [matmul_ref(a[:4], bm, d).reshape(1, 1, 1, 1, 1, 1, 4, 3)], **tol(d, 8))


def gen_bias(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    n = len(e)
    if op == "BiasAdd":
        v = movement_input(d, (2, n))
        bias = arr(e[::-1], d)
        for fmt, val in (("NHWC", v), ("NCHW", v.reshape(2, n, 1, 1))):
            if d in FLOATS:
                want = round_native(native(val, d) + native(bias.reshape((n,) if fmt == "NHWC" else (n, 1, 1)), d), d)
            else:
                want = out_int(objects(val) + objects(bias.reshape((n,) if fmt == "NHWC" else (n, 1, 1))), d)
            edge.add(op, binding, fmt, [val, bias], [want], {"data_format": fmt}, signed_zeros=True)
        edge.add(op, binding, "empty", [np.zeros((0, n), storage(d)), bias], [np.zeros((0, n), storage(d))],
                 {"data_format": "NHWC"})
    else:  # BiasAddGrad: one edge value per channel among exact fillers
        rows = edge_rows("Sum", d).T  # [4, channels]
        for fmt, val in (("NHWC", rows), ("NCHW", rows.reshape(rows.shape[0], rows.shape[1], 1, 1))):
            want = reduce_ref("Sum", np.asarray(rows), d, [0], False)
            edge.add(op, binding, fmt, [val], [want], {"data_format": fmt}, **tol(d, 4))
        edge.add(op, binding, "empty", [np.zeros((0, 3), storage(d))], [np.zeros(3, storage(d))])


def gen_addn(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    x, y = arr([a for a in e for _ in e], d), arr([b for _ in e for b in e], d)
    if d in FLOATS:
        two = round_native(native(x, d) + native(y, d), d)
    else:
        two = out_int(objects(x) + objects(y), d)
    edge.add(op, dict(binding, N=2), "pairs", [x, y], [two], signed_zeros=True)
    edge.add(op, dict(binding, N=1), "one", [arr(e, d)], [arr(e, d)], signed_zeros=True)
    edge.add(op, dict(binding, N=3), "empty", [np.zeros((0, 2), storage(d))] * 3, [np.zeros((0, 2), storage(d))])


def gen_clip(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    x = arr(e, d)
    for layout, lo, hi in [("scalar_bounds", arr(e[-4] if d in FLOATS else e[2], d), arr(e[-1], d)),
                           ("edge_bounds", arr(e, d), arr(e[::-1], d)), ("inf_bounds", None, None)]:
        if lo is None:
            if d not in FLOATS:
                continue
            lo, hi = arr(-INF, d), arr(INF, d)
        if d in FLOATS:
            want = round_native(np.minimum(np.maximum(native(x, d), native(lo, d)), native(hi, d)), d)
        else:
            xb, lb, hb = np.broadcast_arrays(objects(x), objects(lo), objects(hi))
            want = out_int([min(max(a, b), c) for a, b, c in zip(xb, lb, hb)], d)
        edge.add(op, binding, layout, [x, lo, hi], [want])
    edge.add(op, binding, "empty", [x[:0], arr(e[2], d), arr(e[3], d)], [x[:0]])


def gen_range(edge, op, binding):
    d = binding["Tidx"]
    t = storage(d)
    if d in FLOATS:
        cases = [("empty", 0.0, 0.0, 1.0), ("down", 5.0, 0.0, -1.5), ("minus_zero", -0.0, 2.0, 1.0),
                 ("tiny_count", 0.0, 1.0, 0.25)]
        for layout, a, b, c in cases:
            want = np.arange(a, b, c, dtype=np.float64).astype(t) if layout != "minus_zero" else \
                np.array([-0.0, 1.0], t)
            edge.add(op, binding, layout, [t(a), t(b), t(c)], [want], signed_zeros=True)
        edge.add(op, binding, "nan", [t(0), t(NAN), t(1)], error="must be finite")
        edge.add(op, binding, "inf", [t(0), t(INF), t(1)], error="must be finite")
        edge.add(op, binding, "zero_delta", [t(0), t(1), t(0)], error="delta must not be 0")
    else:
        lo, hi = int_range(d)
        for layout, a, b, c in [("top", hi - 2, hi, 1), ("bottom", lo + 2, lo, -1), ("wide_step", 0, hi, hi // 3 + 1),
                                ("empty", lo, lo, 1), ("full_span_step", lo, hi, hi)]:
            want = np.array(list(range(a, b, c)), t)
            edge.add(op, binding, layout, [t(a), t(b), t(c)], [want])
        edge.add(op, binding, "zero_delta", [t(0), t(1), t(0)], error="delta must not be 0")
        edge.add(op, binding, "wrong_direction", [t(0), t(5), t(-1)], error="cannot reach limit 5 with delta -1")


# --- windows: convolution and pooling ----------------------------------------------

def edge_image(d, shape, seed=0):
    """An NHWC image of small exact values with one edge value per batch
    element, at a position that differs per element."""
    n = shape[0]
    flat = ((np.arange(int(np.prod(shape))) * 7 + seed) % 5 - 2) * 0.5
    x = flat.reshape(shape).astype(storage(d))
    e = edges(d)
    for b in range(n):
        h, w = (b * 2) % shape[1], (b * 3) % shape[2]
        x[b, h, w, b % shape[3]] = e[b % len(e)]
    return x


def gen_window(edge, op, binding):
    d = binding["T"]
    n = len(edges(d))
    x = edge_image(d, (n, 4, 5, 2))
    f = (((np.arange(3 * 3 * 2 * 3) * 5) % 7 - 3) * 0.25).reshape(3, 3, 2, 3).astype(storage(d))
    fd = f[:, :, :, :2]
    for padding in ("VALID", "SAME"):
        for fmt in ("NHWC", "NCHW"):
            xi = x if fmt == "NHWC" else dense(x.transpose(0, 3, 1, 2))
            strides = [1, 2, 1, 1] if fmt == "NHWC" else [1, 1, 2, 1]
            dil = [1, 1, 1, 1]
            attrs = {"padding": padding, "data_format": fmt, "strides": strides}
            tag = f"{padding}_{fmt}"
            if op == "Conv2D":
                edge.add(op, binding, tag, [xi, f], [out_float(conv.conv_ref(xi, f, strides, dil, padding, fmt), d)],
                         dict(attrs, dilations=dil), **tol(d, 16))
            elif op == "DepthwiseConv2D":
                edge.add(op, binding, tag, [xi, fd],
                         [out_float(conv.depthwise_ref(xi, fd, strides, dil, padding, fmt), d)],
                         dict(attrs, dilations=dil), **tol(d, 16))
            elif op in ("Conv2DBackpropInput", "DepthwiseConv2DBackpropInput"):
                dw = op.startswith("Depthwise")
                filt = fd if dw else f
                fwd = conv.depthwise_ref(xi, filt, strides, dil, padding, fmt) if dw else \
                    conv.conv_ref(xi, filt, strides, dil, padding, fmt)
                dy = edge_image(d, fwd.shape if fmt == "NHWC" else (fwd.shape[0], fwd.shape[2], fwd.shape[3],
                                                                    fwd.shape[1]), seed=3)
                if fmt == "NCHW":
                    dy = dense(dy.transpose(0, 3, 1, 2))
                want = nn_grad.conv_input_grad(xi.shape, filt, dy, strides, dil, padding, fmt, dw)
                for ts in choices(binding, "Tshape", ("i32", "i64")):
                    edge.add(op, dict(binding, Tshape=ts), tag, [np.array(xi.shape, NUMPY_DTYPE[ts]), filt, dy],
                             [out_float(want, d)], dict(attrs, dilations=dil), **tol(d, 16))
            elif op in ("Conv2DBackpropFilter", "DepthwiseConv2DBackpropFilter"):
                dw = op.startswith("Depthwise")
                filt = fd if dw else f
                fwd = conv.depthwise_ref(xi, filt, strides, dil, padding, fmt) if dw else \
                    conv.conv_ref(xi, filt, strides, dil, padding, fmt)
                # dy small and exact; the edge values come from the input.
                dy = (((np.arange(fwd.size) * 3) % 5 - 2) * 0.5).reshape(fwd.shape).astype(storage(d))
                want = nn_grad.conv_filter_grad(xi, filt.shape, dy, strides, dil, padding, fmt, dw)
                for ts in choices(binding, "Tshape", ("i32", "i64")):
                    edge.add(op, dict(binding, Tshape=ts), tag, [xi, np.array(filt.shape, NUMPY_DTYPE[ts]), dy],
                             [out_float(want, d)], dict(attrs, dilations=dil), **tol(d, 16))
            elif op in ("MaxPool", "AvgPool"):
                ksize = [1, 2, 3, 1] if fmt == "NHWC" else [1, 1, 2, 3]
                kind = "max" if op == "MaxPool" else "avg"
                edge.add(op, binding, tag, [xi], [out_float(conv.pool_ref(xi, ksize, strides, padding, fmt, kind), d)],
                         dict(attrs, ksize=ksize), signed_zeros=op == "MaxPool", **tol(d, 4))
            elif op in ("MaxPoolGrad", "AvgPoolGrad"):
                ksize = [1, 2, 3, 1] if fmt == "NHWC" else [1, 1, 2, 3]
                kind = "max" if op == "MaxPoolGrad" else "avg"
                y = conv.pool_ref(xi, ksize, strides, padding, fmt, kind)
                dy = (((np.arange(y.size) * 3) % 5 - 2) * 0.5).reshape(y.shape).astype(storage(d))
                if kind == "max":
                    want = nn_grad.pool_grad(xi, dy, ksize, strides, padding, fmt, "max")
                    edge.add(op, binding, tag, [xi, y.astype(storage(d)), dy], [out_float(want, d)],
                             dict(attrs, ksize=ksize), **tol(d, 4))
                else:
                    dye = edge_image(d, y.shape if fmt == "NHWC" else (y.shape[0], y.shape[2], y.shape[3], y.shape[1]),
                                     seed=2)
                    if fmt == "NCHW":
                        dye = dense(dye.transpose(0, 3, 1, 2))
                    want = nn_grad.pool_grad(xi.shape, dye, ksize, strides, padding, fmt, "avg")
                    for ts in choices(binding, "Tshape", ("i32", "i64")):
                        edge.add(op, dict(binding, Tshape=ts), tag, [np.array(xi.shape, NUMPY_DTYPE[ts]), dye],
                                 [out_float(want, d)], dict(attrs, ksize=ksize), **tol(d, 4))
            else:
                raise KeyError(op)


# --- softmax, losses, normalisation, cells --------------------------------------------

def gen_softmax(edge, op, binding):
    d = binding["T"]
    rows = edge_rows("Max", d)
    log = op == "LogSoftmax"
    for axis in (-1, 0):
        edge.add(op, binding, f"rows_axis{axis}", [rows], [out_float(reduction_nn.softmax_ref(rows, axis, log), d)],
                 {"axis": axis}, **tol(d, 8))
    edge.add(op, binding, "empty", [np.zeros((0, 3), storage(d))], [np.zeros((0, 3), storage(d))])
    edge.add(op, binding, "rank8", [rows.reshape(-1)[:16].reshape(RANK_SHAPES[8])],
             [out_float(reduction_nn.softmax_ref(rows.reshape(-1)[:16].reshape(RANK_SHAPES[8]), -1, log), d)], **tol(d, 8))


def gen_xent(edge, op, binding):
    d = binding["T"]
    feats = edge_rows("Max", d)
    n = feats.shape[0]
    logp = reduction_nn.softmax_ref(feats, 1, True)
    p = np.exp(logp)
    if op == "SoftmaxCrossEntropyWithLogits":
        labels = np.tile(np.array([0.25, 0.25, 0.5, 0.0]), (n, 1)).astype(storage(d))
        loss = -np.sum(labels * logp, axis=1)
        edge.add(op, binding, "rows", [feats, labels], [out_float(loss, d), out_float(p - labels, d)], **tol(d, 8))
        edge.add(op, binding, "empty", [feats[:0], labels[:0]], [np.zeros(0, storage(d)), feats[:0]])
    else:
        tl = binding.get("Tlabels", "i64")
        labels = np.array([i % 4 for i in range(n)], NUMPY_DTYPE[tl])
        loss = -logp[np.arange(n), labels.astype(int)]
        grad = p.copy()
        grad[np.arange(n), labels.astype(int)] -= 1
        b = dict(binding, Tlabels=tl)
        edge.add(op, b, "rows", [feats, labels], [out_float(loss, d), out_float(grad, d)], **tol(d, 8))
        edge.add(op, b, "bad_label", [feats, np.full(n, 4, NUMPY_DTYPE[tl])], error="label 4 of row 0 is out of range [0, 4)")


def gen_norm(edge, op, binding):
    d = binding["T"]
    e = edges(d)
    n = len(e)
    s = storage(d)
    if op in ("FusedBatchNorm", "FusedBatchNormGrad"):
        x = one_edge_per_row(d, n, 3).T.copy()   # [3, n]: channel c holds edge value c once
        x = dense(x)
        scale = np.full(n, 1.5, s)
        offset = np.full(n, -0.5, s)
        mean_in = np.full(n, 0.25, s)
        var_in = np.full(n, 2.0, s)
        eps = 0.001
        for training in (True, False):
            xf = x.astype(np.float64)
            if training:
                m, v = xf.mean(0), xf.var(0)
                uv = xf.var(0, ddof=1)
            else:
                m, v, uv = mean_in.astype(np.float64), var_in.astype(np.float64), var_in.astype(np.float64)
            if op == "FusedBatchNorm":
                y = (xf - m) / np.sqrt(v + eps) * scale + offset
                edge.add(op, binding, f"train{int(training)}", [x, scale, offset, mean_in, var_in],
                         [out_float(y, d), out_float(m, d), out_float(uv, d)],
                         {"epsilon": eps, "is_training": training}, **tol(d, 16))
            else:
                dy = (((np.arange(x.size) * 3) % 5 - 2) * 0.5).reshape(x.shape).astype(s)
                dx, dscale, doffset = nn_grad.batch_norm_grad_ref(dy, x, scale, mean_in, var_in, eps, training, 1)
                edge.add(op, binding, f"train{int(training)}", [dy, x, scale, mean_in, var_in],
                         [out_float(dx, d), out_float(dscale, d), out_float(doffset, d)],
                         {"epsilon": eps, "is_training": training}, **tol(d, 16))
    else:
        x = one_edge_per_row(d, n, 4)
        gamma = np.array([1.0, -2.0, 0.5, 1.5], s)
        beta = np.array([0.0, 1.0, -1.0, 0.5], s)
        eps = 1e-5
        xf = x.astype(np.float64)
        mean = xf.mean(1, keepdims=True)
        var = xf.var(1, keepdims=True)
        if op == "LayerNorm":
            y = (xf - mean) / np.sqrt(var + eps) * gamma + beta
            edge.add(op, binding, "rows", [x, gamma, beta], [out_float(y, d)], {"epsilon": eps}, **tol(d, 16))
            edge.add(op, binding, "empty", [x[:0], gamma, beta], [x[:0]], {"epsilon": eps})
        else:
            dy = (((np.arange(x.size) * 3) % 5 - 2) * 0.5).reshape(x.shape).astype(s)
            dx, dgamma, dbeta = nn_grad.layer_norm_grad_ref(dy, x, gamma, eps, 1)
            edge.add(op, binding, "rows", [dy, x, gamma], [out_float(dx, d), out_float(dgamma, d),
                                                           out_float(dbeta, d)], {"epsilon": eps}, **tol(d, 16))


def gen_lstm(edge, op, binding):
    d = binding["T"]
    s = storage(d)
    n = len(edges(d))
    hidden, inp = 2, 3
    x = one_edge_per_row(d, n, inp)
    c_prev = np.full((n, hidden), 0.5, s)
    h_prev = np.full((n, hidden), -0.25, s)
    w = (((np.arange((inp + hidden) * 4 * hidden) * 3) % 7 - 3) * 0.125).reshape(inp + hidden, 4 * hidden).astype(s)
    b = np.zeros(4 * hidden, s)
    c, h, gates = rnn.cell(x, c_prev, h_prev, w, b, 1.0)
    if op == "LSTMCell":
        edge.add(op, binding, "edge_rows", [x, c_prev, h_prev, w, b], [out_float(c, d), out_float(h, d),
                                                                        out_float(gates, d)],
                 {"forget_bias": 1.0}, **tol(d, 16))
    else:
        dc = np.full((n, hidden), 0.5, s)
        dh = np.full((n, hidden), 1.0, s)
        # Edge values through the forward outputs, as the gradient receives them.
        grads = rnn.cell_grad(x, c_prev, h_prev, w, c.astype(s), gates.astype(s), dc, dh)
        edge.add(op, binding, "edge_rows", [x, c_prev, h_prev, w, c.astype(s), gates.astype(s), dc, dh],
                 [out_float(gv, d) for gv in grads], **tol(d, 16))
