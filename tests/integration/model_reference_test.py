#!/usr/bin/python3
"""End to end through the CLI: `weft run` on the sample models against NumPy.

NumPy computes each model's forward pass from the same weights (read from
the graph through `weft run --fetch <weight>`, which returns a Const's
stored value untouched) and the same inputs; the logits and probabilities
weft computes must match within float32 tolerance.

Usage: model_reference_test.py WEFT_BINARY SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

weft, source = sys.argv[1], sys.argv[2]
failures = 0


def run(args):
    result = subprocess.run([weft] + args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"weft {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result.stdout


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def conv2d_nhwc(x, w, padding):
    """Cross-correlation with TensorFlow's SAME/VALID padding, stride 1."""
    k = w.shape[0]
    if padding == "SAME":
        total = k - 1
        x = np.pad(x, ((0, 0), (total // 2, total - total // 2), (total // 2, total - total // 2), (0, 0)))
    n, h, wd, c = x.shape
    oh, ow = h - k + 1, wd - k + 1
    out = np.zeros((n, oh, ow, w.shape[3]))
    for i in range(k):
        for j in range(k):
            out += np.einsum("nhwc,co->nhwo", x[:, i:i + oh, j:j + ow, :], w[i, j])
    return out


def maxpool2(x):
    n, h, w, c = x.shape
    return x[:, :h // 2 * 2, :w // 2 * 2, :].reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def check(name, got, want, rtol=1e-4, atol=1e-5):
    global failures
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
        err = np.max(np.abs(got - want)) if got.shape == want.shape else "shape"
        print(f"FAIL {name}: max abs error {err}")
        failures += 1
    else:
        print(f"ok   {name}: {got.shape}, max abs error {np.max(np.abs(got - want)):.2e}")


with tempfile.TemporaryDirectory() as tmp:
    rng = np.random.default_rng(3)

    # MLP: images [n,784] -> dense 64 relu -> dense 10.
    x = rng.uniform(0, 1, (16, 784)).astype(np.float32)
    np.save(os.path.join(tmp, "x.npy"), x)
    weights = ["dense1/kernel", "dense1/bias", "dense2/kernel", "dense2/bias"]
    model = os.path.join(source, "configs/models/mnist_mlp.wgt")
    run(["run", model, "--feed", f"images={tmp}/x.npy", "--fetch", "logits", "--fetch", "probabilities",
         *sum((["--fetch", w] for w in weights), []), "--out", tmp, "--quiet"])
    w1, b1, w2, b2 = (np.load(os.path.join(tmp, w.replace("/", "_") + ".npy")).astype(np.float64) for w in weights)
    logits = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    check("mnist_mlp logits", np.load(f"{tmp}/logits.npy"), logits)
    check("mnist_mlp probabilities", np.load(f"{tmp}/probabilities.npy"), softmax(logits))

    # LeNet: images [n,28,28,1].
    x = rng.uniform(0, 1, (4, 28, 28, 1)).astype(np.float32)
    np.save(os.path.join(tmp, "x4.npy"), x)
    names = ["conv1/kernel", "conv1/bias", "conv2/kernel", "conv2/bias", "dense1/kernel", "dense1/bias",
             "dense2/kernel", "dense2/bias", "dense3/kernel", "dense3/bias"]
    model = os.path.join(source, "configs/models/mnist_lenet.wgt")
    run(["run", model, "--feed", f"images={tmp}/x4.npy", "--fetch", "logits", "--fetch", "probabilities",
         *sum((["--fetch", w] for w in names), []), "--out", tmp, "--quiet"])
    p = {n: np.load(os.path.join(tmp, n.replace("/", "_") + ".npy")).astype(np.float64) for n in names}
    h = maxpool2(np.maximum(conv2d_nhwc(x.astype(np.float64), p["conv1/kernel"], "SAME") + p["conv1/bias"], 0))
    h = maxpool2(np.maximum(conv2d_nhwc(h, p["conv2/kernel"], "VALID") + p["conv2/bias"], 0))
    h = h.reshape(h.shape[0], -1)
    h = np.maximum(h @ p["dense1/kernel"] + p["dense1/bias"], 0)
    h = np.maximum(h @ p["dense2/kernel"] + p["dense2/bias"], 0)
    logits = h @ p["dense3/kernel"] + p["dense3/bias"]
    check("mnist_lenet logits", np.load(f"{tmp}/logits.npy"), logits)
    check("mnist_lenet probabilities", np.load(f"{tmp}/probabilities.npy"), softmax(logits))

sys.exit(1 if failures else 0)
