#!/usr/bin/env python3
"""Post-training int8 quantization end to end (docs/quantization.md).

    quantize_test.py WEFT_CLI [--checkpoint DIR]

1. The sample CNN (configs/models/fashion_cnn.wgt) trained as tools/demo.sh
   trains it (configs/fashion_cnn.toml: two epochs of Adam), or the newest
   checkpoint of DIR, exported frozen (`weft export --checkpoint`).
2. `weft quantize` with 500 calibration images from the training set, with
   8-bit and 7-bit weights and with the percentile method: the int8 model's
   test accuracy on the 10,000 test images is within 1.0 point of the f32
   model's, and the file is at most 30% of the optimized f32 file.
3. The int8 model at level 2 runs _QConv2D and _QMatMul (weft optimize
   --list-ops), and its logits agree with the same model at level 0 (the
   QDQ form in f32): the int8 kernels compute what the dequantize-op-
   quantize graph says.
4. Bad input: each refusal with its message.

Accuracies are computed here with NumPy from the logits `weft run` writes;
labels from the dataset files.
"""
import gzip
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = "/usr/share/datasets/fashion-mnist"
CALIBRATION = 500
MAX_DROP = 1.0  # points of accuracy
MAX_SIZE = 0.30

failures = []


def check(ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        failures.append(what)


def run(args, expect_fail=False, timeout=1800):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if (proc.returncode != 0) != expect_fail:
        print(f"FAIL: {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        sys.exit(1)
    return proc


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def images(path):
    return (idx(path).astype(np.float32) / 255.0)[..., None]


def train(cli, work):
    text = open(os.path.join(ROOT, "configs", "fashion_cnn.toml")).read()
    text = re.sub(r'^dir = .*$', f'dir = "{work}/ckpt"', text, flags=re.M)
    text = re.sub(r'^metrics = .*$', f'metrics = "{work}/metrics.jsonl"', text, flags=re.M)
    text = text.replace('"/usr/share/', '"/usr/share/')  # absolute already
    config = f"{work}/fashion_cnn.toml"
    open(config, "w").write(text)
    out = run([cli, "train", os.path.join(ROOT, "configs", "models", "fashion_cnn.wgt"), "--config", config]).stdout
    final = [line for line in out.splitlines() if line.startswith("final:")]
    print(final[-1] if final else out[-500:])
    return f"{work}/ckpt"


def accuracy(cli, model, test_x, labels, work, name, level=None):
    args = [cli, "run", model, "--feed", f"images={test_x}", "--fetch", "logits", "--out", f"{work}/{name}", "-q"]
    if level is not None:
        args += ["--optimize", str(level)]
    run(args)
    logits = np.load(f"{work}/{name}/logits.npy")
    return logits, 100.0 * float(np.mean(np.argmax(logits, axis=1) == labels))


def main():
    cli = sys.argv[1]
    checkpoint = sys.argv[sys.argv.index("--checkpoint") + 1] if "--checkpoint" in sys.argv else None
    if not os.path.exists(f"{DATA}/t10k-images-idx3-ubyte.gz"):
        print("SKIP: dataset-fashion-mnist is not installed")
        return 0
    work = tempfile.mkdtemp(prefix="quantize_")
    if checkpoint is None:
        checkpoint = train(cli, work)
    run([cli, "export", os.path.join(ROOT, "configs", "models", "fashion_cnn.wgt"), "--checkpoint", checkpoint,
         "--output", "logits", "-o", f"{work}/cnn.onnx"])
    run([cli, "optimize", f"{work}/cnn.onnx", "-o", f"{work}/cnn.wg"])

    # Calibration: 500 training images, seeded; the test set for accuracy.
    train_x = images(f"{DATA}/train-images-idx3-ubyte.gz")
    pick = np.random.RandomState(0).choice(len(train_x), CALIBRATION, replace=False)
    np.save(f"{work}/calib.npy", train_x[pick])
    np.save(f"{work}/test.npy", images(f"{DATA}/t10k-images-idx3-ubyte.gz"))
    labels = idx(f"{DATA}/t10k-labels-idx1-ubyte.gz").astype(np.int64)

    f32_logits, f32_acc = accuracy(cli, f"{work}/cnn.wg", f"{work}/test.npy", labels, work, "f32")
    print(f"f32 test accuracy {f32_acc:.2f}%")
    f32_size = os.path.getsize(f"{work}/cnn.wg")
    for name, extra in [("w8_minmax", []), ("w7_minmax", ["--weight-bits", "7"]),
                        ("w8_percentile", ["--method", "percentile", "--percentile", "99.999"])]:
        out = f"{work}/cnn_{name}.wg"
        res = run([cli, "quantize", f"{work}/cnn.onnx", "--calibrate", f"images={work}/calib.npy", "-o", out] + extra)
        print(res.stdout.strip())
        check("4 of 4 products int8" in res.stdout, f"{name}: both convolutions and both products quantized")
        size = os.path.getsize(out)
        check(size <= MAX_SIZE * f32_size,
              f"{name}: file {size} bytes = {100.0 * size / f32_size:.1f}% of the f32 file ({f32_size}), <= 30%")
        ops = run([cli, "optimize", out, "--list-ops"]).stdout
        check("_QConv2D" in ops and "_QMatMul" in ops, f"{name}: level 2 runs _QConv2D and _QMatMul")
        logits, acc = accuracy(cli, out, f"{work}/test.npy", labels, work, name)
        check(f32_acc - acc <= MAX_DROP,
              f"{name}: int8 test accuracy {acc:.2f}% vs f32 {f32_acc:.2f}% (drop {f32_acc - acc:.2f} <= {MAX_DROP})")
        # The int8 kernels against the QDQ graph in f32 (level 0): the same
        # classes, logits within a few output steps.
        qdq, qdq_acc = accuracy(cli, out, f"{work}/test.npy", labels, work, name + "_qdq", level=0)
        agree = float(np.mean(np.argmax(qdq, axis=1) == np.argmax(logits, axis=1)))
        err = float(np.abs(qdq - logits).max() / np.abs(qdq).max())
        check(agree >= 0.998 and err <= 0.02,
              f"{name}: int8 kernels vs the QDQ graph in f32: {100 * agree:.2f}% same class, largest logit "
              f"difference {err:.2e} of the largest logit (level 0 accuracy {qdq_acc:.2f}%)")

    # Export (weft export): ONNX's QDQ form, each Conv reading a
    # DequantizeLinear of its int8 weights directly (what ONNX Runtime fuses
    # into an int8 convolution); imported again, it gives the QDQ graph's
    # values.
    import onnx
    exported = f"{work}/cnn_w8_minmax.onnx"
    run([cli, "export", f"{work}/cnn_w8_minmax.wg", "--output", "logits", "-o", exported])
    model = onnx.load(exported)
    producers = {o: n for n in model.graph.node for o in n.output}
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    check(len(convs) == 2 and all(producers[n.input[1]].op_type == "DequantizeLinear" for n in convs),
          "export: both Convs read a DequantizeLinear of int8 weights")
    int8 = {t.name for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT8}
    weights = [n.input[0] for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in int8]
    check(len(weights) == 4, f"export: the 4 weight tensors are int8 initializers, dequantized ({len(weights)})")
    f32_onnx = os.path.getsize(f"{work}/cnn.onnx")
    check(os.path.getsize(exported) <= MAX_SIZE * f32_onnx,
          f"export: {os.path.getsize(exported)} bytes, {100.0 * os.path.getsize(exported) / f32_onnx:.1f}% of the "
          f"f32 ONNX model")
    reimported, _ = accuracy(cli, exported, f"{work}/test.npy", labels, work, "reimported")
    qdq, _ = accuracy(cli, f"{work}/cnn_w8_minmax.wg", f"{work}/test.npy", labels, work, "qdq_again", level=0)
    err = float(np.abs(reimported - qdq).max() / np.abs(qdq).max())
    check(err <= 1e-5, f"export: the ONNX model imported again gives the QDQ graph's logits (max error {err:.2e})")

    # Bad input.
    calib = f"images={work}/calib.npy"
    np.save(f"{work}/calib_short.npy", np.load(f"{work}/calib.npy")[:10])
    for args, message in [
            ([f"{work}/cnn.onnx", "-o", f"{work}/x.wg"], "no calibration data: give --calibrate NAME=FILE.npy"),
            ([f"{work}/cnn.onnx", "--calibrate", calib, "-o", f"{work}/x.onnx"], "weft quantize writes a .wg or .wgt"),
            ([f"{work}/cnn.onnx", "--calibrate", calib, "--method", "kl", "-o", f"{work}/x.wg"],
             "--method \"kl\": expected minmax or percentile"),
            ([f"{work}/cnn.onnx", "--calibrate", calib, "--calibrate", f"images={work}/calib_short.npy", "-o",
              f"{work}/x.wg"], "has 10 samples but images has 500"),
            ([f"{work}/cnn.onnx", "--calibrate", f"pixels={work}/calib.npy", "-o", f"{work}/x.wg"], "pixels"),
            ([f"{work}/cnn.onnx", "--calibrate", f"images={work}/missing.npy", "-o", f"{work}/x.wg"], "missing.npy"),
            ([f"{work}/cnn.onnx", "--calibrate", "images", "-o", f"{work}/x.wg"], "expected NAME=FILE.npy"),
            ([f"{work}/cnn.onnx", "--calibrate", calib, "--exclude", "nosuchnode", "-o", f"{work}/x.wg"],
             "--exclude \"nosuchnode\": the optimized model has no such node")]:
        res = run([cli, "quantize"] + args, expect_fail=True)
        check(message in res.stderr, f"refused: {message!r} in {res.stderr.strip()[:160]!r}")
    np.save(f"{work}/calib_scalar.npy", np.float32(1.0))
    res = run([cli, "quantize", f"{work}/cnn.onnx", "--calibrate", f"images={work}/calib_scalar.npy", "-o",
               f"{work}/x.wg"], expect_fail=True)
    check("must hold samples along its first dimension" in res.stderr, "refused: a scalar calibration array")
    # Excluding a product keeps it in f32.
    # Excluding a product (by its name in the optimized model, as the
    # summary lists it) keeps it in f32.
    summary = run([cli, "quantize", f"{work}/cnn.onnx", "--calibrate", calib, "-o", f"{work}/again.wg"]).stdout
    last = re.search(r"products int8 \(([^)]*)\)", summary).group(1).split(", ")[-1]
    res = run([cli, "quantize", f"{work}/cnn.onnx", "--calibrate", calib, "--exclude", last, "-o",
               f"{work}/excluded.wg"])
    check("3 of 4 products int8" in res.stdout and "--exclude" in res.stderr,
          f"--exclude {last}: 3 of 4 products int8; {res.stderr.strip()[-120:]!r}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all quantization checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
