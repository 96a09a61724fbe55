#!/usr/bin/env python3
"""The lite build's benchmarks (docs/lite.md), against the full build in
the same invocation:

  lite_size             bytes of the stripped weft-lite built for each model
                        alone, plus the libraries it loads beyond the C and
                        C++ runtimes (XNNPACK, pthreadpool, cpuinfo)
  lite_first_inference  a whole process, exec to exit, that reads the model
                        and runs it once: weft-lite against the full build's
                        `weft run` (median of --rounds), and weft-lite's own
                        figure from main to the first result
  lite_inference        one inference at batch 1: weft-lite --repeat against
                        the full build's `weft bench` on the same .wg at
                        --optimize 0 (the graph is optimized beforehand), in
                        alternating rounds, medians

    tools/bench/lite_bench.py [--full build] [--rounds 5] [--threads 2] \\
        NAME=MODEL.wg:INPUT.npy ...

Each model's lite build goes to build-lite-bench/NAME (the lite preset's
settings, -DWEFT_LITE_MODELS=MODEL.wg). Inputs are fed at batch 1 (the first
row of INPUT.npy). Prints BENCH lines as tools/bench/run.sh does.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

RUNTIMES = ("linux-vdso", "libc.so", "libm.so", "libstdc++", "libgcc_s", "ld-linux", "libpthread.so")


def sh(args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def build_lite(src, name, model):
    out = os.path.join(src, "build-lite-bench", name)
    sh(["cmake", "-S", src, "-B", out, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DWEFT_LITE=ON",
        "-DWEFT_BUILD_TESTS=OFF", f"-DWEFT_LITE_MODELS={os.path.abspath(model)}"])
    sh(["cmake", "--build", out, "--target", "weft-lite"])
    return os.path.join(out, "bin", "weft-lite")


def size(runner):
    stripped = os.path.join(tempfile.mkdtemp(), "weft-lite")
    sh(["strip", "-o", stripped, runner])
    parts = {"weft-lite": os.path.getsize(stripped)}
    for line in sh(["ldd", runner]).stdout.splitlines():
        f = line.split()
        if "=>" in f and not any(f[0].startswith(r) for r in RUNTIMES):
            path = os.path.realpath(f[2])
            parts[os.path.basename(path)] = os.path.getsize(path)
    return parts


def wall_ms(args, env=None):
    t0 = time.perf_counter()
    subprocess.run(args, check=True, capture_output=True, env=env)
    return (time.perf_counter() - t0) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="NAME=MODEL.wg:INPUT.npy")
    parser.add_argument("--full", default="build")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    weft = os.path.join(args.full, "bin", "weft")
    env = dict(os.environ, WEFT_PLUGIN_PATH="")
    tmp = tempfile.mkdtemp()
    for spec in args.models:
        name, rest = spec.split("=", 1)
        model, data = rest.split(":", 1)
        one = os.path.join(tmp, name + ".b1.npy")
        np.save(one, np.load(data)[:1])
        runner = build_lite(src, name, model)
        parts = size(runner)
        total = sum(parts.values())
        detail = ", ".join(f"{k} {v}" for k, v in parts.items())
        print(f"BENCH lite_size_{name} weft={total} unit=bytes  # {detail}; limit {4 << 20}")

        info = [line.split() for line in sh([runner, model, "--info"]).stdout.splitlines()]
        input_name = next(f[1] for f in info if f[0] == "input")
        fetches = [a for f in info if f[0] == "output" for a in ("--fetch", f[1])]
        lite_cmd = [runner, model, one, "--threads", str(args.threads)]
        full_cmd = [weft, "run", model, "--feed", f"{input_name}={one}", *fetches, "--optimize", "0", "--out", tmp,
                    "-q"]
        lite_wall, full_wall, lite_main, startup = [], [], [], []
        for _ in range(args.rounds):
            lite_wall.append(wall_ms(lite_cmd))
            full_wall.append(wall_ms(full_cmd, env))
            out = sh(lite_cmd + ["--time"]).stdout
            lite_main.append(float(re.search(r"start to first result ([0-9.]+) ms", out).group(1)))
            # A process that loads the runner and its libraries and exits at
            # once: what comes before main, measured the same way.
            startup.append(wall_ms([runner, "--help"]))
        lw, fw = statistics.median(lite_wall), statistics.median(full_wall)
        lm, ls = statistics.median(lite_main), statistics.median(startup)
        print(f"BENCH lite_first_inference_{name} weft={lw:.1f} peer={fw:.1f} unit=ms speedup={fw / lw:.2f}"
              f"  # whole process, exec to exit, median of {args.rounds}; weft-lite main to first result "
              f"{lm:.1f} ms, process start and exit alone (--help) {ls:.1f} ms, so start to first result "
              f"about {lm + ls:.1f} ms; peer: the full build's weft run")

        lite_ms, full_ms = [], []
        for _ in range(args.rounds):
            out = sh(lite_cmd + ["--repeat", str(args.repeat), "--time"]).stdout
            lite_ms.append(float(re.search(r"median of \d+ runs ([0-9.]+) ms", out).group(1)))
            bench = json.loads(sh([weft, "bench", model, "--feed", f"{input_name}={one}", "--optimize", "0",
                                   "--repeat", str(args.repeat), "--threads", str(args.threads), "--json"],
                                  env=env).stdout)
            full_ms.append(float(bench["p50_ms"]))
        lm, fm = statistics.median(lite_ms), statistics.median(full_ms)
        print(f"BENCH lite_inference_{name} weft={lm:.3f} peer={fm:.3f} unit=ms speedup={fm / lm:.2f}"
              f"  # batch 1, {args.threads} threads, medians of {args.rounds} rounds of {args.repeat}; "
              f"peer: the full build (oneDNN) on the same .wg")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
