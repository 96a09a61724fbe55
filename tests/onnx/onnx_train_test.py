#!/usr/bin/env python3
"""Training an imported model, and exporting what Weft trained.

    onnx_train_test.py WEFT_CLI

1. The untrained CNN of tools/onnx/export_models.py, exported from PyTorch,
   trains on Fashion-MNIST with `weft train cnn.onnx --config
   configs/onnx_cnn.toml` (its loss built over [model] output) to a test
   accuracy of at least 0.89.
2. The trained model exported (`weft export --checkpoint`) and imported again
   gives the outputs the trained Weft model gives (`weft run --checkpoint`).
3. The same for a model written in Weft: configs/models/fashion_cnn.wgt after
   30 steps of `weft train`.
"""
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MIN_ACCURACY = 0.89


def run(args, **kw):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=kw.pop("timeout", 1200), **kw)
    if proc.returncode != 0:
        print(f"FAIL: {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        sys.exit(1)
    return proc.stdout


def config_copy(src, dst, workdir):
    text = open(src).read()
    text = re.sub(r'^dir = .*$', f'dir = "{workdir}/ckpt"', text, flags=re.M)
    text = re.sub(r'^metrics = .*$', f'metrics = "{workdir}/metrics.jsonl"', text, flags=re.M)
    open(dst, "w").write(text)


def same_outputs(cli, graph, ckpt, exported, feed, fetch, workdir, label):
    run([cli, "run", graph, "--checkpoint", ckpt, "--feed", feed, "--fetch", fetch, "--out", f"{workdir}/a", "-q"])
    run([cli, "export", graph, "--checkpoint", ckpt, "--output", fetch, "-o", exported])
    run([cli, "run", exported, "--feed", feed, "--fetch", fetch, "--out", f"{workdir}/b", "-q"])
    a = np.load(f"{workdir}/a/{fetch}.npy")
    b = np.load(f"{workdir}/b/{fetch}.npy")
    err = float(np.abs(a.astype(np.float64) - b).max() / max(np.abs(a).max(), 1e-30))
    ok = a.shape == b.shape and err <= 1e-6
    print(f"{'ok  ' if ok else 'FAIL'} {label}: exported and re-imported, max relative difference {err:.2e}")
    return ok


def main():
    cli = sys.argv[1]
    work = tempfile.mkdtemp(prefix="onnx_train_")
    run([sys.executable, os.path.join(ROOT, "tools", "onnx", "export_models.py"), work, "--models", "cnn"])
    # 1. Training the imported CNN.
    config_copy(os.path.join(ROOT, "configs", "onnx_cnn.toml"), f"{work}/onnx_cnn.toml", work)
    out = run([cli, "train", f"{work}/cnn.onnx", "--config", f"{work}/onnx_cnn.toml"])
    m = re.search(r"^final: .*test_accuracy=([0-9.]+)", out, re.M)
    if not m:
        print(f"FAIL: no final line in\n{out}")
        return 1
    accuracy = float(m.group(1))
    ok = accuracy >= MIN_ACCURACY
    print(f"{'ok  ' if ok else 'FAIL'} the imported CNN trained to test accuracy {accuracy:.4f} (at least {MIN_ACCURACY})")
    # 2. The trained model out and back in.
    ok &= same_outputs(cli, f"{work}/cnn.onnx", f"{work}/ckpt", f"{work}/trained_cnn.onnx",
                       f"input={work}/cnn.input.npy", "output", work, "the trained imported CNN")
    # 3. A model written in Weft, after a few steps.
    wd = f"{work}/native"
    os.makedirs(wd)
    config_copy(os.path.join(ROOT, "configs", "fashion_cnn.toml"), f"{wd}/cnn.toml", wd)
    run([cli, "train", os.path.join(ROOT, "configs", "models", "fashion_cnn.wgt"), "--config", f"{wd}/cnn.toml",
         "--steps", "30"])
    np.save(f"{wd}/x.npy", np.random.default_rng(0).random((3, 28, 28, 1)).astype(np.float32))
    ok &= same_outputs(cli, os.path.join(ROOT, "configs", "models", "fashion_cnn.wgt"), f"{wd}/ckpt",
                       f"{wd}/fashion_cnn.onnx", f"images={wd}/x.npy", "probabilities", wd,
                       "configs/models/fashion_cnn.wgt trained 30 steps")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
