#!/usr/bin/python3
"""Scaling past one machine, on paper: predicts the step time and examples/s
of asynchronous parameter-server training with 1 to 1,000 workers and 1 to
64 ps tasks, from per-message and per-byte costs measured on one machine by
weft_dist_bench (null_step, tensor_send_64m, ps_train_mlp).

    /usr/bin/python3 tools/bench/scale_model.py                    # table + docs/images/scaling.png
    /usr/bin/python3 tools/bench/scale_model.py --bench bench.txt  # fit to new BENCH lines
    /usr/bin/python3 tools/bench/scale_model.py --measure          # run 1,2,4,8 workers here first

The model (docs/distributed-internals.md, "Scaling past one machine, on paper"):

  one worker alone:  T1 = c + alpha * sum_p r_p + beta * sum_p b_p + sum_p a_p
  ps task p's work per worker step:  D_p = s * m_p + beta * b_p + a_p
  W workers:  a closed queue, W customers cycling between their own
              machine (Z = T1 - D, no waiting) and the busiest ps task
              (D = max_p D_p, first come first served), solved exactly by
              mean-value analysis; max(T1, W*D) <= T(W) <= T1 + (W-1)*D
  examples/s = W * batch / T(W)

where c is the worker's compute per step, r_p the round trips a step
waits for between a worker and ps task p (its RunGraph, and one batched
request for the tensors each way: their answers follow one another on the
same connection), m_p the messages ps task p serves (one per tensor, and
the RunGraph), b_p the bytes, a_p the time of
the optimizer's update on ps task p, alpha the round trip of one message,
s the ps task's own time per message and beta the cost of one byte.

The built-in input figures (BENCHMARKS.md) were measured with all processes
sharing the same 2 cores: the docs say where that, and the rest, make the
model untrustworthy.
"""
import argparse
import csv
import dataclasses
import importlib.util
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# The fallback figures: BENCHMARKS.md as of 2026-12-01, one line per BENCH
# name: (weft, peer, unit). Sources:
#   null_step_*: "The distributed step: one request per task pair (issue
#     39)", medians of 3 runs 2026-12-01 05:04 UTC, 1, 2 or 8 `weft serve`
#     ps tasks and 1..8 worker processes on the same 2 cores.
#   tensor_send_64m_tcp: "The distributed step, first part (issue 39)",
#     2026-11-30 11:47 UTC.
#   ps_train_mlp_*: the same section, 05:05 UTC, weft = 1 ps + 1 worker
#     (ms/step) or 1 ps + 2 workers (examples/s), peer = the same training
#     in one process.
#   train_mlp_sgd/adam: "The optimizers' update loops were not vectorized
#     (issue 39)", one invocation 2026-12-01 04:43 UTC: only their ratio is
#     used.
DEFAULT_BENCH = {
    "null_step_ps1_w1": (0.321, 0.204, "ms"),
    "null_step_ps1_w2": (0.687, 0.023, "ms"),
    "null_step_ps1_w4": (0.509, 0.054, "ms"),
    "null_step_ps1_w8": (0.645, 0.110, "ms"),
    "null_step_ps2_w1": (0.441, 0.202, "ms"),
    "null_step_ps2_w2": (0.463, 0.049, "ms"),
    "null_step_ps2_w4": (0.765, 0.136, "ms"),
    "null_step_ps2_w8": (1.106, 0.257, "ms"),
    "null_step_ps8_w1": (1.084, 0.229, "ms"),
    "tensor_send_64m_tcp": (2.60, 1.35, "GB/s"),
    "ps_train_mlp_1ps_1worker": (10.33, 6.0, "ms/step"),
    "ps_train_mlp_1ps_2workers": (14490.0, 21330.0, "examples/s"),
    "train_mlp_sgd": (5.082, 10.02, "ms"),
    "train_mlp_adam": (6.137, 16.09, "ms"),
}
DEFAULT_SOURCE = "BENCHMARKS.md (2026-12-01), built into this script"

# The sample MLP, configs/models/fashion_mlp.wgt: its variables, in
# elements (f32), largest first.
MLP_VARIABLES = [
    ("dense1/kernel", 784 * 512),
    ("dense2/kernel", 512 * 512),
    ("dense3/kernel", 512 * 10),
    ("dense1/bias", 512),
    ("dense2/bias", 512),
    ("dense3/bias", 10),
]
MLP_PARAMS = sum(n for _, n in MLP_VARIABLES)  # 669,706
MLP_BATCH = 128
# What a step of the MLP waits for from each ps task that holds variables:
# its RunGraph, the worker's one request for the variables (RecvTensors),
# and the ps task's one request for their gradients; the answers to a
# request follow each other on one connection.
MLP_ROUND_TRIPS = 3

# The embedding model of issue 14, configs/models/debian_bow.wgt (a
# bag-of-words classifier trained with Adagrad by configs/debian_bow.toml):
# a 1,048,576 x 64 f32 embedding partitioned over the ps tasks along
# dimension 0, the mean of each example's rows, then a 64 x 16 dense layer;
# batch 64 of 64 ids each.
EMBED_ROWS = 1 << 20
EMBED_DIM = 64
EMBED_BATCH = 64
EMBED_DENSE = 64 * 16 + 16

WORKER_GRID = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000]
PS_GRID = [1, 2, 4, 8, 16, 32, 64]


class UsageError(Exception):
    """A problem with the input that the user can fix; printed without a traceback."""


# --- Reading BENCH lines ----------------------------------------------------------------------

BENCH_LINE = re.compile(r"^BENCH\s+(\S+)\s+weft=([-+0-9.eE]+)\s+peer=([-+0-9.eE]+)\s+unit=(\S+)")
# A row of a table in BENCHMARKS.md: | name [(...)] | weft | peer | unit | ...
TABLE_ROW = re.compile(r"^\|\s*([a-z0-9_]+)[^|]*\|\s*([0-9][0-9,.]*)\s*\|\s*([0-9][0-9,.]*)\s*\|\s*([^|]*?)\s*\|")


def read_bench(path):
    """{name: (weft, peer, unit)} from BENCH lines (or BENCHMARKS.md table
    rows) in |path|; several lines of one name give their medians."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UsageError(f"--bench {path}: cannot read it: {e.strerror}") from None
    found = {}
    for number, line in enumerate(text.splitlines(), 1):
        m = BENCH_LINE.match(line.strip()) or TABLE_ROW.match(line.strip())
        if not m:
            continue
        name, weft, peer, unit = m.group(1), m.group(2), m.group(3), m.group(4)
        try:
            values = (float(weft.replace(",", "")), float(peer.replace(",", "")))
        except ValueError:
            raise UsageError(f"{path}:{number}: {name}: weft={weft} peer={peer} are not numbers") from None
        found.setdefault(name, []).append((values, unit.split()[0] if unit else ""))
    out = {}
    for name, rows in found.items():
        out[name] = (statistics.median(r[0][0] for r in rows), statistics.median(r[0][1] for r in rows), rows[0][1])
    if not out:
        raise UsageError(f"--bench {path}: no BENCH lines in it (expected lines like "
                         "'BENCH null_step_ps1_w1 weft=0.127 peer=0.035 unit=ms speedup=0.273', "
                         "as tools/bench/run.sh null_step tensor_send_64m ps_train_mlp prints)")
    return out


def to_ms(name, value, unit):
    units = {"ms": 1.0, "ms/step": 1.0, "ms per step": 1.0, "us": 1e-3, "µs": 1e-3, "s": 1e3}
    if unit not in units:
        raise UsageError(f"{name}: unit '{unit}' is not a time (expected ms or us)")
    return value * units[unit]


# --- Parameters --------------------------------------------------------------------------------


@dataclass
class Params:
    alpha: float  # ms per message round trip, seen by the worker
    s: float  # ms of a ps task's own time per message
    beta: float  # ms per byte
    local_ms: float  # the MLP's step in one process (compute + update)
    apply_share: float  # the Adam update's share of the local step
    embed_compute_ms: float  # the embedding model's compute per step on a worker
    overlap_ps: bool = False  # round trips to different ps tasks overlap
    link_bytes_per_ms: float = 0.0  # a ps task's link, each direction (0: no limit)
    sources: dict = field(default_factory=dict)
    null_points: dict = field(default_factory=dict)  # (ps, workers) -> measured ms
    mlp_points: list = field(default_factory=list)  # (workers, ps, examples/s, label)

    @property
    def apply_ms_per_param(self):
        return self.local_ms * self.apply_share / MLP_PARAMS

    @property
    def mlp_compute_ms(self):
        return self.local_ms * (1 - self.apply_share)


def mva(z, d, n_max):
    """Exact mean-value analysis of a closed network: n = 1..n_max customers,
    each cycling through a delay of |z| ms and one FCFS queue of demand |d| ms.
    Returns (step time T(n), the queue's utilisation rho(n)) as lists."""
    times, rhos = [], []
    q = 0.0
    for n in range(1, n_max + 1):
        r = d * (1 + q)
        t = z + r
        x = n / t
        q = x * r
        times.append(t)
        rhos.append(min(x * d, 1.0))
    return times, rhos


def fit_s(alpha, points):
    """The ps task's time per message s from the null step with one ps task
    ({workers: ms}): by the bottleneck law a queue that serves one request
    in s completes at most 1/s of them per ms, so W / T(W) <= 1/s for every
    W measured, and the highest rate measured, min over W of T(W) / W, is the
    estimate (at most alpha: one worker alone waits a whole round trip).
    None without a point for more than one worker."""
    rates = [t / w for w, t in points.items() if w > 1]
    if not rates:
        return None
    return min(min(rates), alpha)


def fit_params(args):
    bench = dict(DEFAULT_BENCH)
    given = {}
    if args.bench:
        given = read_bench(args.bench)
        if any(k.startswith("null_step_") for k in given):  # one run's null steps, not a mix of two
            bench = {k: v for k, v in bench.items() if not k.startswith("null_step_")}
        bench.update({k: v for k, v in given.items() if k in DEFAULT_BENCH or k.startswith("null_step_")})
        if "null_step_ps1_w1" not in bench:
            raise UsageError(f"--bench {args.bench}: has null_step lines but not null_step_ps1_w1, which gives alpha")

    def source(name):
        return f"{args.bench}" if name in given else DEFAULT_SOURCE

    sources = {}
    w1 = bench["null_step_ps1_w1"]
    alpha = to_ms("null_step_ps1_w1", w1[0], w1[2])
    sources["alpha"] = f"null_step_ps1_w1 weft ({source('null_step_ps1_w1')})"

    null_points = {}
    for name, (weft, _, unit) in bench.items():
        m = re.fullmatch(r"null_step_ps(\d+)_w(\d+)", name)
        if m:
            null_points[(int(m.group(1)), int(m.group(2)))] = to_ms(name, weft, unit)
    ps1 = {w: t for (p, w), t in null_points.items() if p == 1}
    if args.s_ms is not None:
        s = args.s_ms
        sources["s"] = "--s-ms"
    else:
        s = fit_s(alpha, ps1)
        if s is None:
            raise UsageError("cannot fit the ps task's time per message: need null_step_ps1_w1 and at least one "
                             "more null_step_ps1_wN line (or give --s-ms)")
        best = min((w for w in ps1 if w > 1), key=lambda w: ps1[w] / w)
        sources["s"] = f"null_step_ps1_w{best} / {best}, the fastest rate through one ps task of " \
                       f"null_step_ps1_w{{{','.join(str(w) for w in sorted(ps1))}}} ({source(f'null_step_ps1_w{best}')})"

    one = bench["ps_train_mlp_1ps_1worker"]
    t_cluster = to_ms("ps_train_mlp_1ps_1worker", one[0], one[2])
    local_ms = to_ms("ps_train_mlp_1ps_1worker", one[1], one[2])
    sources["local"] = f"ps_train_mlp_1ps_1worker peer ({source('ps_train_mlp_1ps_1worker')})"

    sgd, adam = bench["train_mlp_sgd"], bench["train_mlp_adam"]
    apply_share = max(0.0, (adam[0] - sgd[0]) / adam[0])
    sources["apply"] = f"(train_mlp_adam - train_mlp_sgd) / train_mlp_adam, weft ({source('train_mlp_adam')})"
    if args.apply_share is not None:
        apply_share = args.apply_share
        sources["apply"] = "--apply-share"

    send = bench["tensor_send_64m_tcp"]
    if send[2] != "GB/s":
        raise UsageError(f"tensor_send_64m_tcp: unit '{send[2]}', expected GB/s")
    beta_send = 1.0 / (send[0] * 1e6)  # ms per byte
    mlp_round_trips = MLP_ROUND_TRIPS
    mlp_bytes = 2 * 4 * MLP_PARAMS
    beta_mlp = (t_cluster - local_ms - mlp_round_trips * alpha) / mlp_bytes
    if args.beta_from == "send":
        beta = beta_send
        sources["beta"] = f"1 / tensor_send_64m_tcp weft ({source('tensor_send_64m_tcp')})"
    elif beta_mlp < beta_send:
        print(f"warning: ps_train_mlp leaves {beta_mlp * 1e6:.3f} ns per byte, less than tensor_send_64m's "
              f"{beta_send * 1e6:.3f}: using tensor_send_64m's", file=sys.stderr)
        beta = beta_send
        sources["beta"] = f"1 / tensor_send_64m_tcp weft ({source('tensor_send_64m_tcp')})"
    else:
        beta = beta_mlp
        sources["beta"] = (f"(ps_train_mlp_1ps_1worker weft - peer - {mlp_round_trips} alpha) / {mlp_bytes:,} bytes "
                           f"({source('ps_train_mlp_1ps_1worker')})")
    if s > alpha:
        raise UsageError(f"--s-ms {s} is more than a whole round trip (alpha = {alpha:.4f} ms)")

    mlp_points = [(1, 1, MLP_BATCH / t_cluster * 1e3, "ps_train_mlp"), (1, 0, MLP_BATCH / local_ms * 1e3, "ps_train_mlp")]
    two = bench.get("ps_train_mlp_1ps_2workers")
    if two is not None:
        mlp_points.append((2, 1, two[0], "ps_train_mlp"))
    return Params(alpha=alpha, s=s, beta=beta, local_ms=local_ms, apply_share=apply_share,
                  embed_compute_ms=args.embed_compute_ms, overlap_ps=args.overlap_ps,
                  link_bytes_per_ms=args.link_gbps * 1e9 / 8 / 1e3 if args.link_gbps else 0.0,
                  sources=sources, null_points=null_points, mlp_points=mlp_points), beta_send, beta_mlp


# --- Workloads ---------------------------------------------------------------------------------


@dataclass
class PsLoad:
    round_trips: float = 0.0  # what one worker's step waits for, in round trips
    messages: float = 0.0  # what the ps task serves per worker step, in messages
    bytes_in: float = 0.0  # bytes from the worker per step
    bytes_out: float = 0.0  # bytes to the worker per step
    apply_ms: float = 0.0  # the optimizer's update per step


@dataclass
class Workload:
    compute_ms: float
    batch: int
    ps: list  # PsLoad per ps task that holds anything
    note: str = ""


def null_workload(p):
    """The null step: one scalar read from each of |p| ps tasks."""
    return Workload(0.0, 1, [PsLoad(round_trips=1, messages=1) for _ in range(p)])


def greedy_bytes(sizes, p):
    """[cluster] variable_placement = "greedy_bytes": largest first, each to
    the ps task holding the fewest bytes so far (then the lowest index)."""
    held = [0] * p
    where = []
    for size in sizes:
        i = min(range(p), key=lambda k: (held[k], k))
        held[i] += size
        where.append(i)
    return where


def mlp_workload(p, params, placement):
    """The sample MLP with Adam, batch 128. Per step, each variable is read
    (ps -> worker) and its gradient sent back (worker -> ps), each its own
    answer to one batched request per direction (MLP_ROUND_TRIPS round trips
    with the RunGraph, and a message per tensor); the Adam update runs on
    the variable's ps task."""
    per_param = params.apply_ms_per_param
    if placement == "even":
        loads = [PsLoad(round_trips=MLP_ROUND_TRIPS, messages=2 * len(MLP_VARIABLES) + 1, bytes_in=4 * MLP_PARAMS / p, bytes_out=4 * MLP_PARAMS / p,
                        apply_ms=per_param * MLP_PARAMS / p) for _ in range(p)]
        return Workload(params.mlp_compute_ms, MLP_BATCH, loads, "every variable split over all ps tasks")
    where = greedy_bytes([n for _, n in MLP_VARIABLES], p)
    loads = {}
    for (_, n), i in zip(MLP_VARIABLES, where):
        load = loads.setdefault(i, PsLoad(round_trips=MLP_ROUND_TRIPS, messages=1))
        load.messages += 2
        load.bytes_in += 4 * n
        load.bytes_out += 4 * n
        load.apply_ms += per_param * n
    return Workload(params.mlp_compute_ms, MLP_BATCH, list(loads.values()),
                    f"greedy_bytes: {len(loads)} of {p} ps tasks hold variables")


def embed_workload(p, params, unique_rows):
    """The embedding model: the worker reads |unique_rows| rows per step,
    spread evenly over the |p| shards (the ids are hashes), and sends their
    gradients back as a sparse update (rows and their indices); the update
    touches those rows only, at the Adam update's measured cost per element
    (Adagrad's does less). Per shard and step: RunGraph, the ids, the rows,
    the gradient's rows and its indices (5 messages, in 3 round trips: the
    RunGraph, the rows' request, and the ps task's one request for the ids
    and the gradient). The dense layer (2 variables) is on ps task 0: 4 more
    messages in the same requests."""
    rows = unique_rows / p
    row_bytes = 4 * EMBED_DIM
    per_param = params.apply_ms_per_param
    loads = [PsLoad(round_trips=3, messages=5, bytes_in=rows * (row_bytes + 8 + 8), bytes_out=rows * row_bytes,
                    apply_ms=per_param * rows * EMBED_DIM) for _ in range(p)]
    dense = loads[0]
    dense.messages += 4
    dense.bytes_in += 4 * EMBED_DENSE
    dense.bytes_out += 4 * EMBED_DENSE
    dense.apply_ms += per_param * EMBED_DENSE
    return Workload(params.embed_compute_ms, EMBED_BATCH, loads, f"{unique_rows:,} rows per step")


@dataclass
class Prediction:
    times: list  # ms per step for W = 1..n_max
    rhos: list  # busiest ps task's utilisation
    t1: float
    d: float
    batch: int

    def step_ms(self, w):
        return self.times[w - 1]

    def examples_per_s(self, w):
        return w * self.batch / self.times[w - 1] * 1e3


def predict(work, params, n_max):
    beta_worker = params.beta
    if params.link_bytes_per_ms:
        beta_worker = max(beta_worker, 1.0 / params.link_bytes_per_ms)
    parts = [params.alpha * l.round_trips + beta_worker * (l.bytes_in + l.bytes_out) + l.apply_ms for l in work.ps]
    t1 = work.compute_ms + (max(parts) if params.overlap_ps else sum(parts))
    demands = []
    for l in work.ps:
        cpu = params.s * l.messages + params.beta * (l.bytes_in + l.bytes_out) + l.apply_ms
        link = max(l.bytes_in, l.bytes_out) / params.link_bytes_per_ms if params.link_bytes_per_ms else 0.0
        demands.append(max(cpu, link))
    d = max(demands)
    times, rhos = mva(max(t1 - d, 0.0), d, n_max)
    return Prediction(times, rhos, t1, d, work.batch)


# --- Output ------------------------------------------------------------------------------------


def fmt_rate(x):
    if x >= 1e6:
        return f"{x / 1e6:.2f}M"
    if x >= 1e4:
        return f"{x / 1e3:.0f}k"
    if x >= 1e3:
        return f"{x / 1e3:.1f}k"
    return f"{x:.0f}"


def fmt_ms(x):
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def print_table(title, make, params, unit_note):
    print(f"\n{title}")
    preds = {p: predict(make(p), params, max(WORKER_GRID)) for p in PS_GRID}
    for p in PS_GRID:
        note = make(p).note
        pr = preds[p]
        busy = next((w for w, r in enumerate(pr.rhos, 1) if r >= 0.9), None)
        print(f"  P={p:<2}  one worker: T1 = {pr.t1:7.3f} ms; busiest ps: D = {pr.d:6.4f} ms per worker step, "
              f"so at most {fmt_rate(pr.batch / pr.d * 1e3)} {unit_note}, 90% busy from W = {busy}"
              + (f" ({note})" if note else ""))
    head = "  " + f"{'W':>5}" + "".join(f"{'P=' + str(p):>17}" for p in PS_GRID)
    print("  step time, ms  /  " + unit_note + " (all workers)")
    print(head)
    for w in WORKER_GRID:
        cells = "".join(f"{fmt_ms(preds[p].step_ms(w)):>9} {fmt_rate(preds[p].examples_per_s(w)):>7}" for p in PS_GRID)
        print(f"  {w:>5}{cells}")
    return preds


def describe(params, beta_send, beta_mlp):
    print("Weft scaling model: asynchronous parameter-server training, predicted from one machine's costs.")
    print("NOTE: every input figure comes from one machine whose cores all the processes (workers and ps")
    print("tasks) shared: 2 cores for the built-in BENCHMARKS.md figures. The predictions assume one machine")
    print('per task. docs/distributed-internals.md, "Scaling past one machine, on paper", says where they stop being')
    print("trustworthy.\n")
    print("Parameters:")
    rows = [
        ("alpha", f"{params.alpha:.4f} ms", "round trip of one message, as the worker sees it", params.sources["alpha"]),
        ("s", f"{params.s:.4f} ms", "a ps task's own time per message (contention)", params.sources["s"]),
        ("beta", f"{params.beta * 1e6:.3f} ns/byte", f"= {1 / (params.beta * 1e6):.2f} GB/s effective "
         f"(tensor_send_64m alone: {1 / (beta_send * 1e6):.2f} GB/s; ps_train_mlp's residual: "
         f"{(1 / (beta_mlp * 1e6)) if beta_mlp > 0 else float('nan'):.2f} GB/s)", params.sources["beta"]),
        ("local", f"{params.local_ms:.3f} ms", "the MLP's step in one process", params.sources["local"]),
        ("apply", f"{params.apply_share:.3f} of it", f"the Adam update: {params.local_ms * params.apply_share:.3f} ms "
         f"= {params.apply_ms_per_param * 1e6:.2f} ns per parameter, on the ps", params.sources["apply"]),
        ("c_mlp", f"{params.mlp_compute_ms:.3f} ms", "the MLP worker's compute = local - apply", "derived"),
        ("c_embed", f"{params.embed_compute_ms:.3f} ms", "the embedding model worker's compute",
         "--embed-compute-ms (an estimate, not measured)"),
    ]
    for name, value, what, src in rows:
        print(f"  {name:<8} {value:<16} {what}\n  {'':<8} {'':<16} from: {src}")
    points = params.null_points
    seen = ", ".join(f"{points[(p, 1)] / points[(1, 1)]:.1f}x with {p}" for p in sorted({p for p, _ in points})
                     if p > 1 and (p, 1) in points and (1, 1) in points)
    mode = "overlap (only the slowest ps task counts)" if params.overlap_ps else \
        f"one after another (null_step here, against one ps task: {seen or 'not measured'})"
    print(f"  a worker's round trips to different ps tasks: {mode}")
    if params.link_bytes_per_ms:
        print(f"  each task's link: {params.link_bytes_per_ms * 8e3 / 1e9:g} Gb/s each way")

    print("\nNull step (one scalar read from each ps task), measured here vs the model:")
    print(f"  {'ps':>3} {'W':>3} {'measured ms':>12} {'model ms':>9} {'model/measured':>15}")
    for (p, w) in sorted(params.null_points):
        pr = predict(null_workload(p), params, w)
        m = params.null_points[(p, w)]
        print(f"  {p:>3} {w:>3} {m:>12.3f} {pr.step_ms(w):>9.3f} {pr.step_ms(w) / m:>15.2f}")


def print_measured(params, measured):
    print("\nThe MLP, measured here vs the model (one machine per task; here every process shared the cores):")
    print(f"  {'W':>3} {'ps':>3} {'measured ex/s':>14} {'model ex/s':>11} {'model/measured':>15}  source")
    for w, p, eps, label in measured:
        if p == 0:
            print(f"  {w:>3} {'-':>3} {eps:>14,.0f} {'':>11} {'':>15}  {label}: one process, no cluster")
            continue
        pr = predict(mlp_workload(p, params, "greedy"), params, w)
        print(f"  {w:>3} {p:>3} {eps:>14,.0f} {pr.examples_per_s(w):>11,.0f} {pr.examples_per_s(w) / eps:>15.2f}  {label}")


def read_measured(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise UsageError(f"--measured {path}: cannot read it: {e.strerror}") from None
    out = []
    for i, row in enumerate(rows, 2):
        try:
            out.append((int(row["workers"]), int(row["ps"]), float(row["examples_per_s"]), Path(path).name))
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"{path}:{i}: expected the columns workers,ps,examples_per_s "
                             f"(integers, integers, a number), got {row}") from None
    if not out:
        raise UsageError(f"--measured {path}: no rows (header workers,ps,examples_per_s, then one row per run)")
    return out


def plot(path, params, measured, unique_rows):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_max = max(WORKER_GRID)
    ws = list(range(1, n_max + 1))
    fig, axes = plt.subplots(1, 3, figsize=(16.5, 5.2))
    colors = {1: "tab:blue", 2: "tab:orange", 8: "tab:green", 64: "tab:red"}

    # (a) the null step
    ax = axes[0]
    for p in (1, 2, 8, 64):
        pr = predict(null_workload(p), params, n_max)
        ax.plot(ws, pr.times, color=colors[p], label=f"model, {p} ps")
    for p, marker in ((1, "o"), (2, "s"), (8, "^")):
        pts = sorted((w, t) for (q, w), t in params.null_points.items() if q == p)
        if pts:
            ax.plot([w for w, _ in pts], [t for _, t in pts], marker, color=colors[p], mfc="none", ms=8,
                    label=f"measured here, {p} ps")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("workers")
    ax.set_ylabel("ms per step")
    ax.set_title("(a) null step: read one scalar from every ps task")

    # (b) the MLP
    ax = axes[1]
    for p, placement, style in ((1, "greedy", "-"), (2, "greedy", "-"), (8, "even", "--"), (64, "even", "--")):
        pr = predict(mlp_workload(p, params, placement), params, n_max)
        label = f"model, {p} ps" + (" (variables split)" if placement == "even" else "")
        ax.plot(ws, [pr.examples_per_s(w) for w in ws], style, color=colors[p], label=label)
    other = dataclasses.replace(params, overlap_ps=not params.overlap_ps)
    other_label = "overlapping" if other.overlap_ps else "one after another"
    pr = predict(mlp_workload(64, other, "even"), other, n_max)
    ax.plot(ws, [pr.examples_per_s(w) for w in ws], ":", color=colors[64], lw=1,
            label=f"model, 64 ps (variables split), round trips {other_label}")
    local = [eps for _, p, eps, _ in measured if p == 0]
    if local:
        ax.axhline(local[-1], color="gray", ls=":", label="measured here, one process (no cluster)")
    for p, marker in ((1, "o"), (2, "s"), (8, "^")):
        pts = sorted((w, eps) for w, q, eps, _ in measured if q == p)
        if pts:
            ax.plot([w for w, _ in pts], [e for _, e in pts], marker, color=colors.get(p, "k"), mfc="none", ms=8,
                    label=f"measured here, {p} ps (2 shared cores)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("workers")
    ax.set_ylabel("examples/s, all workers")
    ax.set_title(f"(b) sample MLP, Adam, batch {MLP_BATCH} (2.7 MB)")

    # (c) the embedding model
    ax = axes[2]
    for p in (1, 2, 8, 64):
        pr = predict(embed_workload(p, params, unique_rows), params, n_max)
        ax.plot(ws, [pr.examples_per_s(w) for w in ws], color=colors[p], label=f"model, {p} ps")
    pr = predict(embed_workload(64, other, unique_rows), other, n_max)
    ax.plot(ws, [pr.examples_per_s(w) for w in ws], ":", color=colors[64], lw=1,
            label=f"model, 64 ps, round trips {other_label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("workers")
    ax.set_ylabel("examples/s, all workers")
    ax.set_title(f"(c) debian_bow, 1M x 64 embedding: {unique_rows:,} rows/step")

    from matplotlib.ticker import FuncFormatter, LogLocator

    for ax, unit in zip(axes, ("ms", "rate", "rate")):
        ax.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda *_: ""))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _, unit=unit: fmt_rate(y) if unit == "rate" else f"{y:g}"))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    mode = "overlapping" if params.overlap_ps else "one after another"
    fig.suptitle("Weft, predicted asynchronous ps training (one machine per task; a worker's round trips to the ps tasks "
                 f"{mode}); points: measured on one 2-core machine shared by every process", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def unique_rows_per_batch(path):
    """The mean number of distinct ids (embedding rows, padding 0 included)
    in a random batch of EMBED_BATCH examples of the [N, k] array in |path|."""
    try:
        import numpy as np
    except ImportError:
        raise UsageError(f"--ids needs numpy, which {sys.executable} lacks: install Debian's python3-numpy and "
                         "run this with /usr/bin/python3") from None

    try:
        ids = np.load(path)
    except (OSError, ValueError) as e:
        raise UsageError(f"--ids {path}: cannot read it as a .npy array: {e}") from None
    if ids.ndim != 2 or len(ids) < EMBED_BATCH:
        raise UsageError(f"--ids {path}: expected an [N, ids per example] array with N >= {EMBED_BATCH}, "
                         f"got shape {list(ids.shape)}")
    ids = ids.astype(np.int64)
    rng = np.random.default_rng(1)
    counts = [len(np.unique(ids[rng.choice(len(ids), EMBED_BATCH, replace=False)])) for _ in range(500)]
    return int(round(float(np.mean(counts))))


# --- Measuring here ----------------------------------------------------------------------------

FASHION = Path("/usr/share/datasets/fashion-mnist")


def free_ports(n):
    """|n| distinct loopback ports that were free a moment ago (bound to port 0, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def training_toml(path, workers, steps):
    """A config like configs/cluster_train.toml (without test data or
    checkpoints, so that only training runs); workers = 0: no [cluster]."""
    lines = []
    if workers > 0:
        ports = free_ports(workers + 1)
        lines += ["[cluster]", 'transport = "tcp"', "connect_timeout_ms = 30000", "rpc_timeout_ms = 120000",
                  "init_timeout_s = 120", "[cluster.jobs]", f'ps = ["127.0.0.1:{ports[0]}"]',
                  "worker = [" + ", ".join(f'"127.0.0.1:{p}"' for p in ports[1:]) + "]"]
    lines += ["[model]", 'loss = "loss"', 'images = "images"', 'labels = "labels"', 'accuracy = "accuracy"',
              'init = "init"', "[data]", 'format = "idx"',
              f'train_images = "{FASHION / "train-images-idx3-ubyte.gz"}"',
              f'train_labels = "{FASHION / "train-labels-idx1-ubyte.gz"}"', "scale = 0.00392156862745098",
              "shuffle = true", "[training]", f"batch_size = {MLP_BATCH}", "seed = 1", f"log_every = {10 * steps}",
              f"steps = {steps}", "[optimizer]", 'name = "adam"', "learning_rate = 0.001"]
    Path(path).write_text("\n".join(lines) + "\n")
    return str(path)


TRAINED = re.compile(r"trained (\d+) steps in ([0-9.]+) s")
EPS = re.compile(r"examples_per_sec=([0-9.]+)")


def trained_seconds(text, what):
    """(steps, seconds) of training from `weft train`'s output, as
    tools/bench/dist_bench_train.cc's TrainedSeconds reads it; the seconds from the
    final line's examples_per_sec when it has one (more digits)."""
    m = TRAINED.search(text)
    if not m:
        tail = "\n".join(text.splitlines()[-15:])
        raise RuntimeError(f"{what}: no 'trained N steps in X s' line in its output:\n{tail}")
    steps, seconds = int(m.group(1)), float(m.group(2))
    e = EPS.findall(text)
    if e and float(e[-1]) > 0:
        seconds = steps * MLP_BATCH / float(e[-1])
    return steps, seconds


class Processes:
    """The processes of one measurement; all of them are stopped at the end,
    and nothing whose command line names our directory may be left."""

    def __init__(self, tag):
        self.tag = tag
        self.procs = []

    def start(self, argv, log):
        f = open(log, "w")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True)
        f.close()
        self.procs.append(p)
        return p

    @staticmethod
    def _signal_group(p, sig):
        # Each process leads its own process group (start_new_session):
        # the signal reaches whatever it started too.
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop_all(self):
        for p in self.procs:
            self._signal_group(p, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self._signal_group(p, signal.SIGKILL)
            p.wait()
        # Anything else still naming our directory (none expected): ours, by pid.
        left = subprocess.run(["pgrep", "-f", self.tag], capture_output=True, text=True).stdout.split()
        left = [int(x) for x in left if int(x) != os.getpid()]
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if left:
            print(f"warning: killed {len(left)} leftover process(es) of this measurement: {left}", file=sys.stderr)


def wait_all(procs, timeout, what):
    deadline = time.monotonic() + timeout
    for name, p in procs:
        try:
            rc = p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{what}: {name} did not finish within {timeout} s (--timeout)") from None
        if rc != 0:
            raise RuntimeError(f"{what}: {name} exited with status {rc}")


def run_measure(args, weft, model, out_csv):
    if not Path(weft).is_file() or not os.access(weft, os.X_OK):
        raise UsageError(f"no weft binary at {weft}: build it (cmake --build --preset release) or set WEFT=path")
    if not Path(model).is_file():
        raise UsageError(f"no model {model}")
    for f in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"):
        if not (FASHION / f).is_file():
            raise UsageError(f"no {FASHION / f}: Fashion-MNIST is needed for --measure (tools/setup.sh installs it)")
    workers_list = args.workers
    cores = os.cpu_count()
    print(f"Measuring the sample MLP ({args.steps} steps per worker, batch {MLP_BATCH}, Adam) with 1 ps task and "
          f"{', '.join(map(str, workers_list))} workers, and in one process.")
    print(f"NOTE: every process (the ps task and all workers) shares this machine's {cores} cores; a worker here "
          f"competes with the others for them, so these figures are not those of a cluster of machines.")
    rows = []

    def write_csv():  # after every run, so that a failure keeps what was measured
        Path(out_csv).parent.mkdir(parents=True, exist_ok=True)
        with open(out_csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["workers", "ps", "examples_per_s"])
            for row in rows:
                w.writerow([row[0], row[1], f"{row[2]:.1f}"])

    with tempfile.TemporaryDirectory(prefix="weft_scale_model_") as tmp:
        runs = [0] + list(workers_list)
        for workers in runs:
            procs = Processes(tmp)
            what = "one process" if workers == 0 else f"1 ps + {workers} worker(s)"
            config = training_toml(Path(tmp) / f"w{workers}.toml", workers, args.steps)
            try:
                if workers == 0:
                    p = procs.start([weft, "train", model, "--config", config, "--local"], Path(tmp) / "local.log")
                    wait_all([("weft train", p)], args.timeout, what)
                    steps, seconds = trained_seconds((Path(tmp) / "local.log").read_text(), what)
                    eps = steps * MLP_BATCH / seconds
                    rows.append((1, 0, eps))
                else:
                    procs.start([weft, "serve", "--config", config, "--job", "ps", "--task", "0"],
                                Path(tmp) / f"w{workers}-ps.log")
                    ws = []
                    for i in range(workers):
                        log = Path(tmp) / f"w{workers}-worker{i}.log"
                        ws.append((f"worker {i}", procs.start(
                            [weft, "train", model, "--config", config, "--job", "worker", "--task", str(i),
                             "--steps", str(args.steps)], log), log))
                    try:
                        wait_all([(n, p) for n, p, _ in ws], args.timeout, what)
                    except RuntimeError as e:
                        tails = "\n".join(f"--- {n}:\n" + "\n".join(log.read_text().splitlines()[-8:])
                                          for n, _, log in ws)
                        raise RuntimeError(f"{e}\n{tails}") from None
                    results = [trained_seconds(log.read_text(), f"{what}, {n}") for n, _, log in ws]
                    # As dist_bench's ps_train_mlp: all the examples over the slowest worker's time.
                    eps = sum(s for s, _ in results) * MLP_BATCH / max(t for _, t in results)
                    rows.append((workers, 1, eps))
            finally:
                procs.stop_all()
            write_csv()
            print(f"  {what:<22} {eps:>10,.0f} examples/s", flush=True)
    print(f"wrote {out_csv} (ps = 0: one process, no cluster)")


# --- Main --------------------------------------------------------------------------------------


def int_list(text):
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated worker counts such as 1,2,4,8, got '{text}'")
    if not out or any(x < 1 for x in out):
        raise argparse.ArgumentTypeError(f"worker counts must be >= 1, got '{text}'")
    return out


def positive(kind):
    def parse(text):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got '{text}'")
        if v <= 0:
            raise argparse.ArgumentTypeError(f"expected a positive number, got '{text}'")
        return v
    return parse


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="scale_model.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n")[0] + ".",
        epilog="""Inputs. Without --bench, the figures in BENCHMARKS.md (built in). --bench FILE reads
BENCH lines (BENCH <name> weft=<v> peer=<v> unit=<u> speedup=<x>, as tools/bench/run.sh prints
them; a BENCHMARKS.md table works too) and fits:
  alpha    null_step_ps1_w1 (weft)
  s        the null_step_ps1_wN curve: the fastest rate through one ps task, min over N
           of null_step_ps1_wN / N (the bottleneck law)
  beta     ps_train_mlp_1ps_1worker's time beyond the local step and 13 round trips, per byte
           moved (--beta-from mlp), or 1/tensor_send_64m_tcp (--beta-from send)
  local    ps_train_mlp_1ps_1worker (peer: the same step in one process)
  apply    the Adam update's share of it, (train_mlp_adam - train_mlp_sgd) / train_mlp_adam
A name missing from FILE keeps its built-in figure.

Measuring. --measure first trains the MLP with `weft serve` (1 ps task) and W `weft train
--job worker` processes for each W of --workers, and in one process, on free loopback ports;
writes --measured (workers,ps,examples_per_s; ps = 0 is the one-process run) and plots it.
All the processes share this machine's cores.

Example:
  tools/bench/run.sh null_step tensor_send_64m ps_train_mlp train_mlp_sgd train_mlp_adam > bench.txt
  /usr/bin/python3 tools/bench/scale_model.py --bench bench.txt --measure --steps 300""")
    parser.add_argument("--bench", metavar="FILE", help="BENCH lines to fit the costs to (default: built-in "
                        "BENCHMARKS.md figures)")
    parser.add_argument("--measured", metavar="CSV", help="measured MLP points to plot (columns workers,ps,"
                        "examples_per_s); with --measure, where to write them (default "
                        "build/scale_model/measured.csv)")
    parser.add_argument("--plot", metavar="PNG", default=str(REPO / "docs" / "images" / "scaling.png"),
                        help="where to write the figure (default: docs/images/scaling.png); '' for none")
    parser.add_argument("--beta-from", choices=("mlp", "send"), default="mlp",
                        help="the per-byte cost: what ps_train_mlp's 1-worker step leaves (default), or the "
                        "64 MiB send rate alone (the optimistic end)")
    parser.add_argument("--overlap-ps", action="store_true",
                        help="a worker's round trips to different ps tasks overlap (default: one after another, "
                        "the pessimistic end)")
    parser.add_argument("--link-gbps", type=positive(float), default=None, metavar="GBPS",
                        help="each task's network link, Gb/s each way (default: no limit beyond beta)")
    parser.add_argument("--mlp-placement", choices=("greedy", "even"), default="greedy",
                        help="the MLP table's variables: greedy_bytes, whole variables (default), or every "
                        "variable split evenly over the ps tasks")
    parser.add_argument("--unique-rows", type=positive(int), default=2000, metavar="N",
                        help="embedding rows a batch of 64 x 64 ids reads (default 2000)")
    parser.add_argument("--ids", metavar="NPY", help="count the rows a batch reads in this data set instead "
                        "(an [N, 64] array of ids, e.g. build/data/debian_sections/train_ids.npy)")
    parser.add_argument("--embed-compute-ms", type=positive(float), default=1.0, metavar="MS",
                        help="the embedding model's compute per step on a worker (default 1.0: an estimate)")
    parser.add_argument("--s-ms", type=positive(float), default=None, metavar="MS",
                        help="the ps task's time per message, instead of fitting it")
    parser.add_argument("--apply-share", type=float, default=None, metavar="X",
                        help="the optimizer update's share (0..1) of the local MLP step, instead of fitting it")
    parser.add_argument("--measure", action="store_true", help="measure the MLP here first (see below)")
    parser.add_argument("--workers", type=int_list, default=[1, 2, 4, 8], metavar="LIST",
                        help="--measure: worker counts (default 1,2,4,8)")
    parser.add_argument("--steps", type=positive(int), default=200, help="--measure: steps per worker (default 200)")
    parser.add_argument("--timeout", type=positive(float), default=600, metavar="S",
                        help="--measure: seconds one run may take (default 600)")
    args = parser.parse_args(argv)
    if args.apply_share is not None and not 0 <= args.apply_share < 1:
        parser.error(f"--apply-share must be in [0, 1), got {args.apply_share}")

    if args.plot and importlib.util.find_spec("matplotlib") is None:
        print(f"scale_model.py: {sys.executable} cannot import matplotlib, which the figure needs: install "
              f"Debian's python3-matplotlib (apt-get install python3-matplotlib) and run this with "
              f"/usr/bin/python3, or give --plot '' for the table alone", file=sys.stderr)
        return 2

    try:
        if args.measure:
            weft = os.environ.get("WEFT", str(REPO / "build" / "bin" / "weft"))
            out = args.measured or str(REPO / "build" / "scale_model" / "measured.csv")
            run_measure(args, weft, str(REPO / "configs" / "models" / "fashion_mlp.wgt"), out)
            args.measured = out
            print()
        params, beta_send, beta_mlp = fit_params(args)
        unique_rows, rows_from = args.unique_rows, ""
        if args.ids:
            unique_rows = unique_rows_per_batch(args.ids)
            rows_from = f", the mean of {args.ids}'s batches"
        measured = read_measured(args.measured) if args.measured else params.mlp_points
        describe(params, beta_send, beta_mlp)
        print_measured(params, measured)
        unit = "examples/s"
        print_table("Null step (a worker reads one scalar from every ps task; 1 'example' per step):",
                    null_workload, params, "steps/s")
        place = args.mlp_placement
        print_table(f"Sample MLP (Adam, batch {MLP_BATCH}, {MLP_PARAMS:,} parameters = {4 * MLP_PARAMS / 1e6:.2f} MB; "
                    f"per step {2 * len(MLP_VARIABLES)} tensors + 1 RunGraph per ps task used; placement {place}):",
                    lambda p: mlp_workload(p, params, place), params, unit)
        print_table(f"Embedding model, debian_bow ({EMBED_ROWS:,} x {EMBED_DIM} f32 = "
                    f"{EMBED_ROWS * EMBED_DIM * 4 / 2**20:.0f} MiB, {2 * EMBED_ROWS * EMBED_DIM * 4 / 2**20:.0f} MiB "
                    f"with Adagrad's accumulator, split over P; batch {EMBED_BATCH}; {unique_rows:,} rows read and "
                    f"updated per step{rows_from}):",
                    lambda p: embed_workload(p, params, unique_rows), params, unit)
        if args.plot:
            plot(args.plot, params, measured, unique_rows)
            print(f"\nwrote {args.plot}")
    except UsageError as e:
        print(f"scale_model.py: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        print(f"scale_model.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that --measure's clean-up runs
    try:
        sys.exit(main())
    except BrokenPipeError:  # | head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
