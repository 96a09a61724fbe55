#!/usr/bin/python3
"""The PyTorch peer of Weft's ONNX benchmarks (tools/bench/run.sh
onnx_resnet18_b1 ...): the original module of a model that
tools/onnx/export_models.py exports (same seeded weights), run under
torch.no_grad() in eval mode on a random batch, with the Weft side's thread
count.

    /usr/bin/python3 tools/bench/torch_onnx_peer.py MODEL BATCH THREADS REPEATS

Prints `ms_per_step=<median> peak_rss_kb=<ru_maxrss> torch=<version>`.
"""
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx"))
import export_models  # noqa: E402


def main():
    name, batch, threads, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    model, shape = export_models.build(name)
    model.eval()
    x = torch.randn((batch,) + shape)
    with torch.no_grad():
        for _ in range(3):
            model(x)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(x)
            times.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"ms_per_step={statistics.median(times) * 1e3:.4f} peak_rss_kb={rss} torch={torch.__version__}")


if __name__ == "__main__":
    main()
