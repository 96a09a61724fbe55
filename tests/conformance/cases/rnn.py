"""The fused LSTM cell: LSTMCell and LSTMCellGrad, f32 and f64.

References are NumPy in float64 from the (rounded) inputs. The forward pass
is the cell written out: z = concat(x, h_prev) @ w + b split into i, f, g,
o blocks, i = sigmoid(z_i), f = sigmoid(z_f + forget_bias), g = tanh(z_g),
o = sigmoid(z_o), c = f c_prev + i g, h = o tanh(c). The backward pass is
derived by hand from those lines (chain rule, d sigmoid = s (1 - s),
d tanh = 1 - t^2):
  dc_total = dc + dh o (1 - tanh(c)^2)
  dz_i = dc_total g i (1 - i),   dz_f = dc_total c_prev f (1 - f),
  dz_g = dc_total i (1 - g^2),   dz_o = dh tanh(c) o (1 - o)
  dc_prev = dc_total f,  [dx, dh_prev] = dz w^T,  dw = [x, h_prev]^T dz,
  db = sum over the batch of dz.
Small hand-picked cases with zero weights check the formulas against
values worked out on paper.
"""
import numpy as np

NP = {"f32": np.float32, "f64": np.float64}
# f32 sums of up to input + hidden products, through tanh and sigmoid.
TOL = {"f32": {"rtol": 2e-5, "atol": 2e-5}, "f64": {"rtol": 1e-12, "atol": 1e-12}}


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def cell(x, c_prev, h_prev, w, b, forget_bias):
    x, c_prev, h_prev, w, b = (np.asarray(a, np.float64) for a in (x, c_prev, h_prev, w, b))
    hidden = c_prev.shape[1]
    z = np.concatenate([x, h_prev], axis=1) @ w + b
    zi, zf, zg, zo = (z[:, k * hidden:(k + 1) * hidden] for k in range(4))
    i, f, g, o = sigmoid(zi), sigmoid(zf + forget_bias), np.tanh(zg), sigmoid(zo)
    c = f * c_prev + i * g
    h = o * np.tanh(c)
    return c, h, np.concatenate([i, f, g, o], axis=1)


def cell_grad(x, c_prev, h_prev, w, c, gates, dc, dh):
    x, c_prev, h_prev, w, c, gates, dc, dh = (np.asarray(a, np.float64)
                                              for a in (x, c_prev, h_prev, w, c, gates, dc, dh))
    hidden = c_prev.shape[1]
    i, f, g, o = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
    tc = np.tanh(c)
    dct = dc + dh * o * (1 - tc ** 2)
    dz = np.concatenate([dct * g * i * (1 - i), dct * c_prev * f * (1 - f), dct * i * (1 - g ** 2),
                         dh * tc * o * (1 - o)], axis=1)
    dxh = dz @ w.T
    xh = np.concatenate([x, h_prev], axis=1)
    return dxh[:, :x.shape[1]], dct * f, dxh[:, x.shape[1]:], xh.T @ dz, dz.sum(axis=0)


def random_inputs(r, dtype, batch, inp, hidden):
    t = NP[dtype]
    return [r.uniform(-1, 1, (batch, inp)).astype(t), r.uniform(-1, 1, (batch, hidden)).astype(t),
            r.uniform(-1, 1, (batch, hidden)).astype(t), r.uniform(-0.7, 0.7, (inp + hidden, 4 * hidden)).astype(t),
            r.uniform(-0.5, 0.5, (4 * hidden,)).astype(t)]


def cases(g):
    r = np.random.default_rng(20261122)
    for dtype in ["f32", "f64"]:
        t = NP[dtype]
        for batch, inp, hidden, fb in [(1, 1, 1, 1.0), (3, 5, 4, 1.0), (4, 2, 7, 0.0), (16, 24, 32, 1.5)]:
            x, c_prev, h_prev, w, b = random_inputs(r, dtype, batch, inp, hidden)
            c, h, gates = cell(x, c_prev, h_prev, w, b, fb)
            name = f"{batch}x{inp}x{hidden}_fb{fb}_{dtype}"
            g.add(f"LSTMCell/{name}", "LSTMCell", [x, c_prev, h_prev, w, b],
                  {"T": dtype, "forget_bias": fb}, outputs=[c.astype(t), h.astype(t), gates.astype(t)], **TOL[dtype])
            # The backward op on the forward values rounded to the dtype, as
            # the forward kernel would hand them over.
            c_t, gates_t = c.astype(t), gates.astype(t)
            dc = r.uniform(-1, 1, c.shape).astype(t)
            dh = r.uniform(-1, 1, c.shape).astype(t)
            grads = cell_grad(x, c_prev, h_prev, w, c_t, gates_t, dc, dh)
            g.add(f"LSTMCellGrad/{name}", "LSTMCellGrad", [x, c_prev, h_prev, w, c_t, gates_t, dc, dh],
                  {"T": dtype}, outputs=[a.astype(t) for a in grads], **TOL[dtype])

    # Worked on paper: w = 0 and b = 0 make every z 0 (forget_bias 0), so
    # i = f = o = 1/2 and g = 0: c = c_prev / 2, h = tanh(c) / 2.
    c_prev = np.float64([[2.0, -4.0]])
    c = c_prev / 2
    gates = np.float64([[0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.5, 0.5]])
    g.add("LSTMCell/hand_zero_weights", "LSTMCell",
          [np.float64([[3.0]]), c_prev, np.float64([[1.0, 1.0]]), np.zeros((3, 8)), np.zeros(8)],
          {"T": "f64", "forget_bias": 0.0}, outputs=[c, np.tanh(c) / 2, gates])
    # Its gradient with dc = 1, dh = 0: dc_total = 1, dc_prev = f = 1/2;
    # dz_i = g i (1 - i) = 0, dz_f = c_prev / 4, dz_g = i = 1/2, dz_o = 0;
    # dx and dh_prev are dz @ w^T = 0; dw = [3, 1, 1]^T dz; db = dz.
    dz = np.float64([[0.0, 0.0, 0.5, -1.0, 0.5, 0.5, 0.0, 0.0]])
    g.add("LSTMCellGrad/hand_zero_weights", "LSTMCellGrad",
          [np.float64([[3.0]]), c_prev, np.float64([[1.0, 1.0]]), np.zeros((3, 8)), c, gates, np.ones((1, 2)),
           np.zeros((1, 2))],
          {"T": "f64"},
          outputs=[np.zeros((1, 1)), np.float64([[0.5, 0.5]]), np.zeros((1, 2)), np.float64([[3.0], [1.0], [1.0]]) @ dz,
                   dz[0]])
    # An empty batch: empty outputs, and zero weight gradients.
    x, c_prev, h_prev, w, b = random_inputs(r, "f32", 0, 3, 2)
    g.add("LSTMCell/empty_batch", "LSTMCell", [x, c_prev, h_prev, w, b], {"T": "f32"},
          outputs=[np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32), np.zeros((0, 8), np.float32)])
    g.add("LSTMCellGrad/empty_batch", "LSTMCellGrad",
          [x, c_prev, h_prev, w, np.zeros((0, 2), np.float32), np.zeros((0, 8), np.float32),
           np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32)], {"T": "f32"},
          outputs=[np.zeros((0, 3), np.float32), np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32),
                   np.zeros((5, 8), np.float32), np.zeros(8, np.float32)])

    # Errors: w of the wrong shape, b of the wrong size, rank.
    x, c_prev, h_prev, w, b = random_inputs(r, "f32", 2, 3, 4)
    g.add("LSTMCell/bad_w_rows", "LSTMCell", [x, c_prev, h_prev, w[1:], b], {"T": "f32"},
          error="w has shape [6,16], expected [input + hidden, 4 * hidden] = [7,16] (batch 2, input 3, hidden 4)")
    g.add("LSTMCell/bad_w_columns", "LSTMCell", [x, c_prev, h_prev, w[:, :10], b], {"T": "f32"},
          error="w has shape [7,10]: dimension 1 (10) must be 4 * hidden, one block per gate i, f, g, o")
    g.add("LSTMCell/bad_b", "LSTMCell", [x, c_prev, h_prev, w, b[:12]], {"T": "f32"},
          error="b has shape [12], expected [4 * hidden] = [16] (batch 2, input 3, hidden 4)")
    g.add("LSTMCell/x_rank", "LSTMCell", [x[0], c_prev, h_prev, w, b], {"T": "f32"},
          error="x must have rank 2 ([batch, input]), got [3]")
    c = np.zeros((2, 4), np.float32)
    g.add("LSTMCellGrad/bad_w", "LSTMCellGrad", [x, c_prev, h_prev, w[:, :12], c, np.zeros((2, 16), np.float32), c, c],
          {"T": "f32"},
          error="w has shape [7,12], expected [input + hidden, 4 * hidden] = [7,16] (batch 2, input 3, hidden 4)")
