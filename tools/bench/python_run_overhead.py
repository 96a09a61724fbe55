#!/usr/bin/env python3
"""python_run_overhead: what a weft.Session.run of a one-op graph costs from
Python, against the same session's C++ Session::Run in the same process
(weft's private _time_cpp_runs loops it with no Python in between), in
15 rounds of a Python block beside a C++ block; the figure is the median of
the rounds' differences, which drifts less than either on a noisy machine.

    PYTHONPATH=build/python /usr/bin/python3 tools/bench/python_run_overhead.py [ITERATIONS]

Prints BENCH lines (tools/bench/run.sh's format): weft = microseconds per
run from Python, peer = from C++; and the difference, which the issue
asks to keep at most 5 us. ONNX Runtime's Python package is not in Debian,
so its InferenceSession.run cannot be measured here.
"""

import statistics
import sys
import time

import numpy as np

import weft
from weft import ops


def python_block(sess, y, x, value, iterations):
    start = time.perf_counter()
    for _ in range(iterations):
        sess.run(y, {x: value})
    return (time.perf_counter() - start) / iterations * 1e6


def main():
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
    rounds = 15
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (16,), name="x")
        y = ops.neg(x, name="y")
    value = np.arange(16, dtype=np.float32)
    with weft.Session(g, config={"runtime": {"inter_op_threads": 1, "intra_op_threads": 1}}) as sess:
        python_block(sess, y, x, value, iterations)  # warm up
        # The machine is noisy: many short rounds, each a Python block right
        # beside a C++ one (the median of 5 blocks of |iterations|), and the
        # median of the per-round figures.
        py, cpp, delta = [], [], []
        for _ in range(rounds):
            p = python_block(sess, y, x, value, iterations)
            c = sess._time_cpp_runs("y", "x", value, iterations // 5)
            py.append(p)
            cpp.append(c)
            delta.append(p - c)
    python, native, overhead = statistics.median(py), statistics.median(cpp), statistics.median(delta)
    print("BENCH python_run_overhead weft=%.3g peer=%.3g unit=us speedup=%.3f"
          % (python, native, native / python), flush=True)
    print("BENCH python_run_overhead_delta weft=%.3g peer=5 unit=us speedup=%.3f"
          % (overhead, 5 / overhead if overhead > 0 else float("inf")), flush=True)
    print("python_run_overhead: %d rounds; Python %.2f us, C++ %.2f us per run (medians); the difference per "
          "round: median %.2f, quartiles %.2f-%.2f us"
          % (rounds, python, native, overhead, *statistics.quantiles(delta, n=4)[0:3:2]), file=sys.stderr)


if __name__ == "__main__":
    main()
