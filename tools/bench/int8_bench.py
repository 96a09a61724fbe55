#!/usr/bin/env python3
"""int8 inference (docs/quantization.md) against f32 and against PyTorch's
int8, in the same invocation:

  int8_resnet18_b32        torchvision's ResNet-18 at batch 32 quantized by
                           `weft quantize --weight-bits 7` against the same
                           model in f32 (both `weft bench`, level 3, in
                           alternating rounds; medians)
  int8_resnet18_b32_torch  the same int8 model against PyTorch's int8
                           ResNet-18 (FX graph mode post-training
                           quantization, the engine oneDNN), batch 32
  int8_w8_resnet18_b32     8-bit weights against 7-bit: on an x86 CPU
                           without VNNI a convolution with 8-bit weights is
                           two oneDNN products (docs/quantization.md), on
                           one with VNNI one

    tools/bench/int8_bench.py WEFT_CLI [--rounds 5] [--threads 2]

Weights are torchvision's untrained ones (speed does not depend on them);
calibration uses 32 normal samples. Prints BENCH lines as
tools/bench/run.sh does.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BATCH = 32


def sh(args):
    return subprocess.run(args, check=True, capture_output=True, text=True)


def weft_bench(cli, model, repeat, threads):
    out = sh([cli, "bench", model, "--shape", f"input={BATCH}x3x224x224", "--repeat", str(repeat), "--warmup", "2",
              "--threads", str(threads), "--json"]).stdout
    return json.loads(out)["p50_ms"]


def torch_models(threads):
    import torch
    import torchvision
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.set_num_threads(threads)
    torch.backends.quantized.engine = "onednn"
    model = torchvision.models.resnet18(weights=None).eval()
    example = torch.randn(BATCH, 3, 224, 224)
    prepared = prepare_fx(model, get_default_qconfig_mapping("onednn"), (example,))
    with torch.no_grad():
        prepared(example)
    return convert_fx(prepared), example


def torch_time(model, example, repeat):
    import torch
    times = []
    with torch.no_grad():
        for i in range(repeat + 2):
            start = time.perf_counter()
            model(example)
            if i >= 2:
                times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="int8_bench_")
    sh([sys.executable, os.path.join(ROOT, "tools", "onnx", "export_models.py"), work, "--models", "resnet18"])
    onnx = os.path.join(work, "resnet18.onnx")
    np.save(f"{work}/calib.npy", np.random.RandomState(0).randn(BATCH, 3, 224, 224).astype(np.float32))
    sh([args.cli, "optimize", onnx, "-o", f"{work}/f32.wg"])
    for bits in (7, 8):
        sh([args.cli, "quantize", onnx, "--calibrate", f"input={work}/calib.npy", "--weight-bits", str(bits), "-o",
            f"{work}/w{bits}.wg"])
    tmodel, example = torch_models(args.threads)
    f32, w7, torch_int8 = [], [], []
    for _ in range(args.rounds):
        f32.append(weft_bench(args.cli, f"{work}/f32.wg", 5, args.threads))
        w7.append(weft_bench(args.cli, f"{work}/w7.wg", 5, args.threads))
        torch_int8.append(torch_time(tmodel, example, 5))
    w8 = weft_bench(args.cli, f"{work}/w8.wg", 3, args.threads)
    m_f32, m_w7, m_torch = statistics.median(f32), statistics.median(w7), statistics.median(torch_int8)
    sizes = {k: os.path.getsize(f"{work}/{k}.wg") for k in ("f32", "w7")}
    print(f"# batch {BATCH}, {args.threads} threads, {args.rounds} rounds; int8 file {sizes['w7']} bytes = "
          f"{100.0 * sizes['w7'] / sizes['f32']:.1f}% of f32 ({sizes['f32']})", file=sys.stderr)
    print(f"BENCH int8_resnet18_b32 weft={m_w7:.1f} peer={m_f32:.1f} unit=ms speedup={m_f32 / m_w7:.2f}")
    print(f"BENCH int8_resnet18_b32_torch weft={m_w7:.1f} peer={m_torch:.1f} unit=ms speedup={m_torch / m_w7:.2f}")
    print(f"BENCH int8_w8_resnet18_b32 weft={w8:.1f} peer={m_w7:.1f} unit=ms speedup={m_w7 / w8:.2f}")
    print(f"BENCH int8_w8_vs_f32_resnet18_b32 weft={w8:.1f} peer={m_f32:.1f} unit=ms speedup={m_f32 / w8:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
