#!/usr/bin/python3
"""The PyTorch peer of `tools/bench/run.sh sync_train_mlp`: the sample MLP
(784-512-512-10, ReLU) trained by WORLD processes with DistributedDataParallel
over the gloo backend on loopback, each on its own BATCH examples a step of
Fashion-MNIST (the same slices of a shuffled global batch as Weft's sync
mode), Adam at 0.001, THREADS intra-op threads per process.

    /usr/bin/python3 tools/bench/torch_ddp_peer.py WORLD BATCH STEPS THREADS

Prints `examples_per_sec=<all processes' examples over the timed steps / s>`.
"""
import gzip
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

FASHION = "/usr/share/datasets/fashion-mnist/"


def load():
    with gzip.open(FASHION + "train-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784).astype(np.float32) / 255.0
    with gzip.open(FASHION + "train-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(images), torch.from_numpy(labels)


def run(rank, world, batch, steps, threads, port, queue):
    torch.set_num_threads(threads)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    model = nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    loss_fn = nn.CrossEntropyLoss()
    images, labels = load()
    order = torch.from_numpy(np.random.default_rng(1).permutation(images.shape[0]))
    global_batch = batch * world
    warmup = 5

    def step(k):
        start = (k * global_batch) % (images.shape[0] - global_batch) + rank * batch
        idx = order[start:start + batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(images[idx]), labels[idx])
        loss.backward()
        opt.step()
        return loss.item()

    for k in range(warmup):
        step(k)
    dist.barrier()
    t0 = time.perf_counter()
    for k in range(warmup, warmup + steps):
        step(k)
    dist.barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        queue.put(world * batch * steps / seconds)
    dist.destroy_process_group()


def main():
    world, batch, steps, threads = (int(a) for a in sys.argv[1:5])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(run, args=(world, batch, steps, threads, port, queue), nprocs=world, join=True)
    print(f"examples_per_sec={queue.get():.1f}")


if __name__ == "__main__":
    main()
