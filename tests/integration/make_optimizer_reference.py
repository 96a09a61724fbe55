#!/usr/bin/python3
"""Reference values for tests/integration/optimizer_test.cc, from PyTorch.

Runs torch.optim (float64) on one fixed problem for every optimizer
configuration the test checks, runs torch's learning-rate schedulers and
torch.nn.utils.clip_grad_norm_, and writes what they produce to TOML files
that are checked in, so the C++ test needs no PyTorch:

    /usr/bin/python3 tests/integration/make_optimizer_reference.py [OUT_DIR]

OUT_DIR defaults to tests/data/optimizer_reference/ in the source tree.

The problem: W [3, 4] and b [4] (initial values below), fixed inputs X [5, 3]
and targets Y [5, 4], loss = mean((tanh(X W + b) - Y)^2). Each trajectory
runs 12 steps and records, per step s (0-based), the learning rate used, the
loss before the update and W and b after it.

Each configuration names the Weft plugin, its hyper-parameters (the names
the plugin declares) and the torch.optim call they map to:
  momentum, nesterov     -> SGD(momentum, nesterov, dampening=0)
  beta1, beta2, epsilon  -> Adam/AdamW(betas=(beta1, beta2), eps=epsilon)
  rho, centered, momentum -> RMSprop(alpha=rho, centered, momentum)
  lr_decay, initial_accumulator_value, epsilon -> Adagrad(...)
  weight_decay           -> weight_decay of each.
Defaults that differ between Weft and torch are passed explicitly to torch
(AdamW's weight_decay is 0.01 in both).
"""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conformance"))
from gen_cases import toml_value  # noqa: E402

torch.set_default_dtype(torch.float64)

STEPS = 12

# The problem's constants.
X0 = [[0.5, -1.2, 0.3],
      [-0.7, 0.8, 1.1],
      [1.5, 0.2, -0.4],
      [0.1, -0.3, 0.9],
      [-1.0, 0.6, -0.8]]
Y0 = [[0.2, -0.5, 0.7, 0.1],
      [-0.3, 0.4, 0.0, 0.6],
      [0.8, -0.1, -0.6, 0.3],
      [0.05, 0.25, -0.45, -0.2],
      [-0.6, 0.35, 0.5, -0.4]]
W0 = [[0.3, -0.2, 0.5, 0.1],
      [-0.4, 0.6, -0.1, 0.2],
      [0.25, 0.15, -0.35, -0.5]]
B0 = [0.05, -0.1, 0.2, 0.0]

# (name, plugin, learning rate, hyper-parameters as the plugin names them,
#  torch class, torch keyword arguments)
CONFIGS = [
    ("sgd", "sgd", 0.5, {}, torch.optim.SGD, {}),
    ("sgd_weight_decay", "sgd", 0.5, {"weight_decay": 0.05}, torch.optim.SGD, {"weight_decay": 0.05}),
    ("momentum", "momentum", 0.1, {"momentum": 0.9}, torch.optim.SGD, {"momentum": 0.9, "dampening": 0}),
    ("momentum_nesterov", "momentum", 0.1, {"momentum": 0.9, "nesterov": True}, torch.optim.SGD,
     {"momentum": 0.9, "dampening": 0, "nesterov": True}),
    ("momentum_weight_decay", "momentum", 0.1, {"momentum": 0.8, "weight_decay": 0.02}, torch.optim.SGD,
     {"momentum": 0.8, "dampening": 0, "weight_decay": 0.02}),
    ("adam", "adam", 0.05, {}, torch.optim.Adam, {"betas": (0.9, 0.999), "eps": 1e-8}),
    ("adam_weight_decay", "adam", 0.05, {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-6, "weight_decay": 0.1},
     torch.optim.Adam, {"betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
    ("adamw", "adamw", 0.05, {"weight_decay": 0.01}, torch.optim.AdamW,
     {"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}),
    ("adamw_strong_decay", "adamw", 0.05, {"beta1": 0.85, "weight_decay": 0.5}, torch.optim.AdamW,
     {"betas": (0.85, 0.999), "eps": 1e-8, "weight_decay": 0.5}),
    ("rmsprop", "rmsprop", 0.01, {}, torch.optim.RMSprop, {"alpha": 0.99, "eps": 1e-8}),
    ("rmsprop_centered", "rmsprop", 0.01, {"rho": 0.9, "centered": True}, torch.optim.RMSprop,
     {"alpha": 0.9, "eps": 1e-8, "centered": True}),
    ("rmsprop_momentum", "rmsprop", 0.01, {"rho": 0.95, "momentum": 0.9, "weight_decay": 0.01},
     torch.optim.RMSprop, {"alpha": 0.95, "eps": 1e-8, "momentum": 0.9, "weight_decay": 0.01}),
    ("rmsprop_centered_momentum", "rmsprop", 0.01, {"centered": True, "momentum": 0.5, "epsilon": 1e-4},
     torch.optim.RMSprop, {"alpha": 0.99, "eps": 1e-4, "momentum": 0.5, "centered": True}),
    ("adagrad", "adagrad", 0.1, {}, torch.optim.Adagrad, {"eps": 1e-10}),
    ("adagrad_lr_decay", "adagrad", 0.1, {"lr_decay": 0.1}, torch.optim.Adagrad, {"eps": 1e-10, "lr_decay": 0.1}),
    ("adagrad_initial_accumulator", "adagrad", 0.1, {"initial_accumulator_value": 0.5, "epsilon": 1e-6},
     torch.optim.Adagrad, {"eps": 1e-6, "initial_accumulator_value": 0.5}),
]


def fmt(v):
    """A TOML value: floats in shortest round-trip form (so they read back
    exactly), as the conformance generator writes them, plus inline tables."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return toml_value(v)


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def problem():
    return torch.tensor(X0), torch.tensor(Y0)


def loss_of(W, b):
    X, Y = problem()
    return ((torch.tanh(X @ W + b) - Y) ** 2).mean()


def torch_lrs(base_lr, make_scheduler, steps):
    """The rate a torch scheduler sets for updates 0 .. steps-1 (update s
    runs after s scheduler steps), read from a throwaway SGD."""
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=base_lr)
    sched = make_scheduler(opt)
    lrs = []
    for _ in range(steps):
        lrs.append(float(opt.param_groups[0]["lr"]))
        opt.step()
        sched.step()
    return lrs


def warmup_factors(warmup_steps, steps):
    """LambdaLR's factors for linear warm-up: min(1, (s + 1) / warmup_steps)."""
    return torch_lrs(1.0, lambda o: torch.optim.lr_scheduler.LambdaLR(
        o, lambda s: min(1.0, (s + 1) / warmup_steps)), steps)


def trajectory(cls, kwargs, lrs, clip_norm=0.0):
    W = torch.tensor(W0, requires_grad=True)
    b = torch.tensor(B0, requires_grad=True)
    opt = cls([W, b], lr=lrs[0], **kwargs)
    out = {"lr": [], "loss": [], "norm": [], "W": [], "b": []}
    for s in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = lrs[s]
        opt.zero_grad()
        loss = loss_of(W, b)
        loss.backward()
        if clip_norm > 0:
            out["norm"].append(float(torch.nn.utils.clip_grad_norm_([W, b], clip_norm)))
        opt.step()
        out["lr"].append(float(lrs[s]))
        out["loss"].append(float(loss))
        out["W"].append(flat(W))
        out["b"].append(flat(b))
    return out


def write_trajectories(path):
    lines = ["# Written by tests/integration/make_optimizer_reference.py with torch "
             f"{torch.__version__} in float64; do not edit.",
             "# Per step s: lr used, loss before the update, W (row-major) and b after it.",
             "", "[problem]", f"steps = {STEPS}",
             f"X = {fmt([float(x) for row in X0 for x in row])}", "X_shape = [5, 3]",
             f"Y = {fmt([float(x) for row in Y0 for x in row])}", "Y_shape = [5, 4]",
             f"W = {fmt([float(x) for row in W0 for x in row])}", "W_shape = [3, 4]",
             f"b = {fmt([float(x) for x in B0])}", "b_shape = [4]", ""]

    def emit(name, plugin, hyper, torch_call, schedule, base_lr, clip_norm, t):
        lines.append("[[trajectory]]")
        lines.append(f"name = {fmt(name)}")
        lines.append(f"optimizer = {fmt(plugin)}")
        lines.append(f"hyperparameters = {fmt(hyper)}")
        lines.append(f"torch = {fmt(torch_call)}")
        lines.append(f"learning_rate = {fmt(float(base_lr))}")
        if schedule:
            lines.append(f"schedule = {fmt(schedule)}")
        if clip_norm > 0:
            lines.append(f"clip_norm = {fmt(float(clip_norm))}")
            lines.append(f"norm = {fmt(t['norm'])}")
        lines.append(f"lr = {fmt(t['lr'])}")
        lines.append(f"loss = {fmt(t['loss'])}")
        lines.append(f"W = {fmt(t['W'])}")
        lines.append(f"b = {fmt(t['b'])}")
        lines.append("")

    for name, plugin, lr, hyper, cls, kwargs in CONFIGS:
        call = f"{cls.__name__}(" + ", ".join(f"{k}={v}" for k, v in {"lr": lr, **kwargs}.items()) + ")"
        emit(name, plugin, hyper, call, None, lr, 0.0, trajectory(cls, kwargs, [lr] * STEPS))

    # Plain SGD with clipping: the first steps' gradients are clipped, later
    # ones (as the loss falls) pass unchanged.
    t = trajectory(torch.optim.SGD, {}, [0.5] * STEPS, clip_norm=0.25)
    assert any(n > 0.25 for n in t["norm"]) and any(n < 0.25 for n in t["norm"]), t["norm"]
    emit("sgd_clip", "sgd", {}, "SGD(lr=0.5) with clip_grad_norm_(max_norm=0.25)", None, 0.5, 0.25, t)

    # Adam under cosine annealing with linear warm-up: the rate is the
    # product of CosineAnnealingLR's and LambdaLR's (each from torch).
    base, warmup, total, floor = 0.05, 3, STEPS, 0.005
    cosine = torch_lrs(base, lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=total, eta_min=floor),
                       STEPS)
    lrs = [c * w for c, w in zip(cosine, warmup_factors(warmup, STEPS))]
    kwargs = {"betas": (0.9, 0.999), "eps": 1e-8}
    emit("adam_cosine_warmup", "adam", {}, "Adam(lr=0.05) under CosineAnnealingLR(T_max=12, eta_min=0.005) x "
         "LambdaLR(min(1, (s + 1) / 3))",
         {"kind": "cosine", "warmup_steps": warmup, "total_steps": total, "min_learning_rate": floor}, base, 0.0,
         trajectory(torch.optim.Adam, kwargs, lrs))

    with open(path, "w") as f:
        f.write("\n".join(lines))


def write_schedules(path):
    S = torch.optim.lr_scheduler
    steps = 24
    lines = ["# Written by tests/integration/make_optimizer_reference.py with torch "
             f"{torch.__version__}; do not edit.",
             "# lr[s] is the rate of update s (s updates done before it), from torch's schedulers;",
             "# with warm-up, the product of the schedule's rate and LambdaLR(min(1, (s + 1) / warmup_steps)).",
             ""]

    def emit(name, torch_call, schedule, base, total, lrs):
        lines.append("[[schedule]]")
        lines.append(f"name = {fmt(name)}")
        lines.append(f"torch = {fmt(torch_call)}")
        lines.append(f"config = {fmt(schedule)}")
        lines.append(f"base_lr = {fmt(float(base))}")
        lines.append(f"run_steps = {total}")
        lines.append(f"lr = {fmt(lrs)}")
        lines.append("")

    def with_warmup(lrs, warmup):
        return [x * w for x, w in zip(lrs, warmup_factors(warmup, steps))] if warmup else lrs

    emit("constant", "no scheduler", {"kind": "constant"}, 0.1, steps, [0.1] * steps)
    emit("constant_warmup", "LambdaLR(min(1, (s + 1) / 5))", {"kind": "constant", "warmup_steps": 5}, 0.1, steps,
         with_warmup([0.1] * steps, 5))
    emit("step", "StepLR(step_size=3, gamma=0.5)", {"kind": "step", "step_size": 3, "gamma": 0.5}, 0.1, steps,
         torch_lrs(0.1, lambda o: S.StepLR(o, step_size=3, gamma=0.5), steps))
    emit("step_warmup", "StepLR(step_size=5, gamma=0.1) x LambdaLR(min(1, (s + 1) / 4))",
         {"kind": "step", "step_size": 5, "gamma": 0.1, "warmup_steps": 4}, 0.2, steps,
         with_warmup(torch_lrs(0.2, lambda o: S.StepLR(o, step_size=5, gamma=0.1), steps), 4))
    emit("exponential", "ExponentialLR(gamma=0.9)", {"kind": "exponential", "decay_steps": 1, "decay_rate": 0.9},
         0.1, steps, torch_lrs(0.1, lambda o: S.ExponentialLR(o, gamma=0.9), steps))
    # decay_rate per decay_steps: ExponentialLR with gamma = decay_rate^(1 / decay_steps).
    emit("exponential_smooth", "ExponentialLR(gamma=0.8 ** (1 / 4))",
         {"kind": "exponential", "decay_steps": 4, "decay_rate": 0.8}, 0.1, steps,
         torch_lrs(0.1, lambda o: S.ExponentialLR(o, gamma=0.8 ** (1 / 4)), steps))
    # staircase: the whole factor once per decay_steps, which is StepLR.
    emit("exponential_staircase", "StepLR(step_size=4, gamma=0.8)",
         {"kind": "exponential", "decay_steps": 4, "decay_rate": 0.8, "staircase": True}, 0.1, steps,
         torch_lrs(0.1, lambda o: S.StepLR(o, step_size=4, gamma=0.8), steps))
    # Cosine over the whole run (total_steps = 0 takes the run's length) and
    # over an explicit total_steps; torch's schedule is run for T_max + 1
    # updates, the range where its closed form and the recursion agree.
    emit("cosine_run", "CosineAnnealingLR(T_max=20, eta_min=0.001)",
         {"kind": "cosine", "min_learning_rate": 0.001}, 0.1, 20,
         torch_lrs(0.1, lambda o: S.CosineAnnealingLR(o, T_max=20, eta_min=0.001), 21))
    emit("cosine_total_steps", "CosineAnnealingLR(T_max=16, eta_min=0)",
         {"kind": "cosine", "total_steps": 16}, 0.3, 1000,
         torch_lrs(0.3, lambda o: S.CosineAnnealingLR(o, T_max=16, eta_min=0.0), 17))
    emit("cosine_warmup", "CosineAnnealingLR(T_max=20, eta_min=0.01) x LambdaLR(min(1, (s + 1) / 6))",
         {"kind": "cosine", "min_learning_rate": 0.01, "warmup_steps": 6}, 0.1, 20,
         with_warmup(torch_lrs(0.1, lambda o: S.CosineAnnealingLR(o, T_max=20, eta_min=0.01), 21), 6)[:21])
    with open(path, "w") as f:
        f.write("\n".join(lines))


def write_clipping(path):
    lines = ["# Written by tests/integration/make_optimizer_reference.py with torch "
             f"{torch.__version__} in float64; do not edit.",
             "# torch.nn.utils.clip_grad_norm_(params, max_norm): norm is what it returns (before clipping),",
             "# clipped the gradients after it, row-major.", ""]
    grads = [torch.tensor([[0.3, -1.2, 0.5], [2.0, 0.1, -0.7]]),
             torch.tensor([0.25, -0.4, 1.5, 0.0]),
             torch.tensor(-0.9)]
    total = math.sqrt(sum(float((g * g).sum()) for g in grads))
    for name, max_norm in [("clipped", 1.0), ("barely_clipped", total * 0.999), ("unclipped", total * 1.5),
                           ("large", 1e6)]:
        params = []
        for g in grads:
            p = torch.zeros_like(g, requires_grad=True)
            p.grad = g.clone()
            params.append(p)
        norm = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
        lines.append("[[case]]")
        lines.append(f"name = {fmt(name)}")
        lines.append(f"max_norm = {fmt(float(max_norm))}")
        lines.append(f"shapes = {fmt([list(g.shape) for g in grads])}")
        lines.append(f"grads = {fmt([flat(g) for g in grads])}")
        lines.append(f"norm = {fmt(norm)}")
        lines.append(f"clipped = {fmt([flat(p.grad) for p in params])}")
        lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "data", "optimizer_reference")
    os.makedirs(out, exist_ok=True)
    write_trajectories(os.path.join(out, "trajectories.toml"))
    write_schedules(os.path.join(out, "schedules.toml"))
    write_clipping(os.path.join(out, "clipping.toml"))


if __name__ == "__main__":
    main()
