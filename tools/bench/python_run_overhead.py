#!/usr/bin/env python3
"""python_run_overhead: what a weft.Session.run of a one-op graph costs from
Python, against the same session's C++ Session::Run in the same process
(weft's private _time_cpp_runs loops it with no Python in between).

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


def python_runs(sess, y, x, value, iterations):
    blocks = []
    for block in range(6):
        start = time.perf_counter()
        for _ in range(iterations):
            sess.run(y, {x: value})
        if block > 0:  # the first warms up
            blocks.append((time.perf_counter() - start) / iterations * 1e6)
    return statistics.median(blocks)


def main():
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    g = weft.Graph()
    with g.as_default():
        x = weft.placeholder("f32", (16,), name="x")
        y = ops.neg(x, name="y")
    value = np.arange(16, dtype=np.float32)
    results = {}
    with weft.Session(g, config={"runtime": {"inter_op_threads": 1, "intra_op_threads": 1}}) as sess:
        # Interleaved, three times each: the machine is noisy.
        py, cpp = [], []
        for _ in range(3):
            py.append(python_runs(sess, y, x, value, iterations))
            cpp.append(sess._session._time_cpp_runs("y", "x", value, iterations))
        results["python"] = statistics.median(py)
        results["cpp"] = statistics.median(cpp)
    overhead = results["python"] - results["cpp"]
    print("BENCH python_run_overhead weft=%.3g peer=%.3g unit=us speedup=%.3f"
          % (results["python"], results["cpp"], results["cpp"] / results["python"]), flush=True)
    print("BENCH python_run_overhead_delta weft=%.3g peer=5 unit=us speedup=%.3f"
          % (overhead, 5 / overhead if overhead > 0 else float("inf")), flush=True)
    print("python_run_overhead: Python %s us, C++ %s us per run (medians of 5 blocks of %d, 3 rounds each)"
          % (["%.2f" % v for v in py], ["%.2f" % v for v in cpp], iterations), file=sys.stderr)


if __name__ == "__main__":
    main()
