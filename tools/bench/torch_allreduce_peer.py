#!/usr/bin/python3
"""The PyTorch peer of `tools/bench/run.sh allreduce_busbw`: WORLD processes
on loopback, each holding one f32 tensor of BYTES bytes, run ITERS in-place
`torch.distributed.all_reduce` calls over the gloo backend in each of 5
blocks, after a warm-up and a barrier; the same work as Weft's side (a
collective group over its gloo plugin), one thread per process.

    /usr/bin/python3 tools/bench/torch_allreduce_peer.py WORLD BYTES ITERS

Prints `us_per_op=<median block's microseconds per all_reduce, rank 0>`.
"""
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world, size, iters, port, queue):
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(size // 4, dtype=torch.float32)
    barrier = torch.ones(1, dtype=torch.float32)
    for _ in range(max(2, iters // 10)):
        dist.all_reduce(t)
    blocks = []
    for _ in range(5):
        dist.all_reduce(barrier)
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        blocks.append((time.perf_counter() - t0) / iters * 1e6)
    dist.all_reduce(barrier)
    if rank == 0:
        queue.put(sorted(blocks)[len(blocks) // 2])
    dist.destroy_process_group()


def main():
    world, size, iters = (int(a) for a in sys.argv[1:4])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(run, args=(world, size, iters, port, queue), nprocs=world, join=True)
    print(f"us_per_op={queue.get():.2f}")


if __name__ == "__main__":
    main()
