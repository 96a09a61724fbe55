#!/usr/bin/python3
"""The PyTorch peer of Weft's lstm_cell benchmark (tools/bench/run.sh
lstm_cell): torch.nn.LSTMCell's forward pass on a fixed random batch, with
the thread count of the Weft side, without autograd (the Weft side runs
the forward op only).

    /usr/bin/python3 tools/bench/torch_lstm_cell.py BATCH INPUT HIDDEN THREADS STEPS

Prints `ms_per_step=<median> peak_rss_kb=<ru_maxrss>`.
"""
import resource
import statistics
import sys
import time

import torch


def main():
    batch, inp, hidden, threads, steps = (int(a) for a in sys.argv[1:6])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(inp, hidden)
    x = torch.rand(batch, inp) * 2 - 1
    h = torch.rand(batch, hidden) * 2 - 1
    c = torch.rand(batch, hidden) * 2 - 1

    def step():
        with torch.no_grad():
            h1, c1 = cell(x, (h, c))
        return h1, c1

    for _ in range(20):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"ms_per_step={statistics.median(times) * 1e3:.4f} peak_rss_kb={rss}")


if __name__ == "__main__":
    main()
