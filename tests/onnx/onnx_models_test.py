#!/usr/bin/env python3
"""PyTorch models exported to ONNX, run through `weft run`, against PyTorch.

    onnx_models_test.py WEFT_CLI [--models mlp,cnn,...] [--keep DIR]

tools/onnx/export_models.py exports each model with its input and what the
PyTorch module itself computes for it; `weft run MODEL.onnx` (imported on
the fly, initializers frozen) must give the same output within a relative
error of 1e-4: max |weft - torch| / max |torch| over the output (an
element-wise ratio means nothing where torch's value is near 0).

Each model also goes through `weft import` and `weft export` (a round
trip), and through `weft optimize --level 2` and `weft export` (the fused
ops exported as what they fuse), each result run again against PyTorch.

Each .onnx model also runs at `--optimize 0`: the graph optimizer
(docs/optimizer.md) must not change its output, bitwise at level 1 (whose
passes change no arithmetic), within 1e-5 relative above it.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXPORT = os.path.join(HERE, "..", "..", "tools", "onnx", "export_models.py")
TOLERANCE = 1e-4


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cli")
    parser.add_argument("--models", default="mlp,cnn,resnet18,mobilenet_v2,lstm,gru,upsample,densenet121,"
                        "efficientnet_b0_64,vit,transformer,conv1d,decoder")
    parser.add_argument("--keep")
    args = parser.parse_args()
    workdir = args.keep or tempfile.mkdtemp(prefix="onnx_models_")
    os.makedirs(workdir, exist_ok=True)
    export = subprocess.run([sys.executable, EXPORT, workdir, "--models", args.models], capture_output=True, text=True)
    if export.returncode != 0:
        print(export.stdout + export.stderr)
        print("FAIL: exporting the models failed")
        return 1
    failures = 0
    for name in args.models.split(","):
        failures += check(args.cli, workdir, name, name + ".onnx", "weft run")
        failures += check_levels(args.cli, workdir, name)
        onnx = os.path.join(workdir, name + ".onnx")
        wg = os.path.join(workdir, name + ".wg")
        failures += through(args.cli, workdir, name, "round trip", [
            ["import", onnx, "-o", wg, "--freeze"],
            ["export", wg, "--output", "output", "-o", os.path.join(workdir, name + ".roundtrip.onnx")]])
        # Optimized first (level 2: the fused ops, which export as what they
        # fuse), then exported and run again.
        opt = os.path.join(workdir, name + ".opt.wg")
        failures += through(args.cli, workdir, name, "optimized, exported", [
            ["optimize", onnx, "--level", "2", "-o", opt],
            ["export", opt, "--output", "output", "-o", os.path.join(workdir, name + ".opt.onnx")]])
        if name in IMAGE_MODELS:
            # The channels-first path (weft import --nchw): convolutions as ONNX lays them out.
            nchw = os.path.join(workdir, name + ".nchw.wg")
            proc = subprocess.run([args.cli, "import", os.path.join(workdir, name + ".onnx"), "-o", nchw, "--freeze",
                                   "--nchw"], capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                print(f"FAIL {name}: weft import --nchw exited {proc.returncode}: {proc.stderr.strip()}")
                failures += 1
            else:
                failures += check(args.cli, workdir, name, name + ".nchw.wg", "nchw")
    return 1 if failures else 0


def through(cli, workdir, name, label, steps):
    """Runs the weft commands |steps|, then checks the .onnx the last one
    wrote; the failures (0 or 1)."""
    for step in steps:
        proc = subprocess.run([cli] + step, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            print(f"FAIL {name}: weft {step[0]} exited {proc.returncode}: {proc.stderr.strip()}")
            return 1
    return check(cli, workdir, name, os.path.basename(steps[-1][-1]), label)


IMAGE_MODELS = {"cnn", "resnet18", "mobilenet_v2", "upsample", "densenet121", "efficientnet_b0_64", "decoder"}


def run_model(cli, workdir, model, input_name, out, extra):
    """Runs |model| with |extra| flags; the output array, or an error string."""
    proc = subprocess.run([cli, "run", os.path.join(workdir, model), "--feed",
                           "input=" + os.path.join(workdir, input_name), "--fetch", "output", "--out", out, "-q"] + extra,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return f"weft run {' '.join(extra)} exited {proc.returncode}: {proc.stderr.strip()}"
    return np.load(os.path.join(out, "output.npy"))


def check_levels(cli, workdir, name):
    """1 when the optimizer changes |name|'s output at any level."""
    base = run_model(cli, workdir, name + ".onnx", name + ".input.npy", os.path.join(workdir, "l0_" + name),
                     ["--optimize", "0"])
    if isinstance(base, str):
        print(f"FAIL {name} (level 0): {base}")
        return 1
    failures = 0
    for level in (1, 2, 3):
        got = run_model(cli, workdir, name + ".onnx", name + ".input.npy", os.path.join(workdir, f"l{level}_{name}"),
                        ["--optimize", str(level)])
        if isinstance(got, str):
            print(f"FAIL {name} (level {level}): {got}")
            failures += 1
            continue
        if level == 1:
            ok = got.shape == base.shape and got.tobytes() == base.tobytes()
            detail = "bitwise equal" if ok else "not bitwise equal"
        else:
            rel = float(np.abs(got.astype(np.float64) - base).max() / max(np.abs(base).max(), 1e-30))
            ok = got.shape == base.shape and rel <= 1e-5
            detail = f"max relative error {rel:.2e} (limit 1e-05)"
        print(f"{'ok  ' if ok else 'FAIL'} {name:13s} level {level} vs 0: {detail}")
        failures += 0 if ok else 1
    return failures


def check(cli, workdir, name, model, label):
    """Runs |model| on |name|'s input; 1 when it does not match PyTorch."""
    out = os.path.join(workdir, "out_" + model)
    proc = subprocess.run([cli, "run", os.path.join(workdir, model), "--feed",
                           "input=" + os.path.join(workdir, name + ".input.npy"), "--fetch", "output", "--out", out,
                           "-q"], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"FAIL {name} ({label}): weft run exited {proc.returncode}: {proc.stderr.strip()}")
        return 1
    got = np.load(os.path.join(out, "output.npy"))
    want = np.load(os.path.join(workdir, name + ".expected.npy"))
    if got.shape != want.shape:
        print(f"FAIL {name} ({label}): shape {got.shape}, PyTorch's {want.shape}")
        return 1
    rel = float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())
    same_argmax = bool((got.argmax(-1) == want.argmax(-1)).all())
    ok = rel <= TOLERANCE
    print(f"{'ok  ' if ok else 'FAIL'} {name:13s} {label:10s} {str(got.shape):12s} max relative error {rel:.2e} "
          f"(limit {TOLERANCE:g}), same argmax: {same_argmax}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
