#!/usr/bin/env python3
"""startup_rss: what a process pays for the plugins it loads.

Runs `weft devices` (every plugin found, every device opened and
described) with every built plugin, then with the GPU plugins (cuda, hip)
disabled, then with OpenCL disabled too, each REPEATS times in alternation,
and reports the median peak resident set (ru_maxrss of the child) and wall
time of each. The BENCH line compares all plugins (weft) with the GPU
plugins disabled (peer): on a machine without a GPU they should cost
nothing, so the ratio should be ~1.

Usage: startup_rss.py WEFT [REPEATS]
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

weft = sys.argv[1]
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7

configs = {
    "all plugins": "",
    "cuda and hip disabled": '[plugins]\ndisable = ["cuda", "hip"]\n',
    "cuda, hip and opencl disabled": '[plugins]\ndisable = ["cuda", "hip", "opencl"]\n',
}


def run_once(config_path):
    """Peak RSS (MiB) and seconds of one `weft devices` in a fresh child."""
    args = [weft] + (["--config", config_path] if config_path else []) + ["devices"]
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        env = dict(os.environ, WEFT_PLUGIN_PATH="")
        os.execve(args[0], args, env)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"startup_rss: {' '.join(args)} failed")
    return usage.ru_maxrss / 1024.0, seconds


with tempfile.TemporaryDirectory() as tmp:
    paths = {}
    for name, text in configs.items():
        if text:
            paths[name] = os.path.join(tmp, name.replace(" ", "_").replace(",", "") + ".toml")
            with open(paths[name], "w") as f:
                f.write(text)
        else:
            paths[name] = None
    rss = {name: [] for name in configs}
    secs = {name: [] for name in configs}
    run_once(None)  # warm the page cache
    for r in range(repeats):
        order = list(configs) if r % 2 == 0 else list(reversed(configs))
        for name in order:
            m, s = run_once(paths[name])
            rss[name].append(m)
            secs[name].append(s)

med = {name: statistics.median(v) for name, v in rss.items()}
tmed = {name: statistics.median(v) for name, v in secs.items()}
all_, no_gpu, none = med["all plugins"], med["cuda and hip disabled"], med["cuda, hip and opencl disabled"]
for name in configs:
    print(f"# startup_rss: weft devices with {name}: peak RSS {med[name]:.1f} MiB, {tmed[name] * 1000:.0f} ms"
          f" (median of {repeats})", file=sys.stderr)
print(f"# startup_rss: the GPU plugins add {all_ - no_gpu:+.1f} MiB; OpenCL (PoCL) adds {no_gpu - none:+.1f} MiB",
      file=sys.stderr)
print(f"BENCH startup_rss weft={all_:.1f} peer={no_gpu:.1f} unit=MiB speedup={no_gpu / all_:.2f}")
print(f"BENCH startup_time weft={tmed['all plugins'] * 1000:.0f} peer={tmed['cuda and hip disabled'] * 1000:.0f}"
      f" unit=ms speedup={tmed['cuda and hip disabled'] / tmed['all plugins']:.2f}")
