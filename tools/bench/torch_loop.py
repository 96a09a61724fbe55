"""The peer of BENCH while_loop_iter: the same loop (i = 0, s = 0; while
i < n: s += i; i += 1) over scalar tensors in TorchScript, whose interpreter
runs a data-dependent loop without unrolling, like Weft's executor.

    python3 torch_loop.py N REPEATS   ->   us_per_iter=<median>
"""
import sys
import time

import torch


@torch.jit.script
def loop(n: torch.Tensor) -> torch.Tensor:
    i = torch.zeros((), dtype=torch.int64)
    s = torch.zeros((), dtype=torch.int64)
    while bool(i < n):
        s = s + i
        i = i + 1
    return s


def main():
    n, repeats = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(1)
    limit = torch.tensor(n, dtype=torch.int64)
    for _ in range(3):
        loop(limit)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        s = loop(limit)
        times.append(time.perf_counter() - start)
    assert int(s) == n * (n - 1) // 2
    times.sort()
    print("us_per_iter=%.4f" % (times[len(times) // 2] / n * 1e6))


if __name__ == "__main__":
    main()
