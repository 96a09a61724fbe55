#!/usr/bin/python3
"""The PyTorch peer of Weft's training benchmarks (tools/bench/run.sh
train_mlp_sgd train_mlp_adam train_cnn_sgd): the same model, batch, optimizer
and thread count as the Weft side, on a fixed random batch, so both time
forward, backward and update only.

    /usr/bin/python3 tools/bench/torch_train.py mlp|cnn sgd|adam BATCH THREADS STEPS

Prints `ms_per_step=<median> peak_rss_kb=<ru_maxrss>`.
"""
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn


def model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    # fashion_cnn: conv 5x5x32 SAME, maxpool 2, conv 5x5x64 SAME, maxpool 2, dense 512, dense 10
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(7 * 7 * 64, 512), nn.ReLU(), nn.Linear(512, 10))


def main():
    kind, opt_name, batch, threads, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = model(kind)
    if opt_name == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
    else:
        opt = torch.optim.Adam(net.parameters(), lr=0.001)
    shape = (batch, 784) if kind == "mlp" else (batch, 1, 28, 28)
    x = torch.rand(shape)
    y = torch.randint(0, 10, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # like Weft's fetch of the loss: waits for the step

    for _ in range(5):
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
