#!/usr/bin/python3
"""Expected values for tests/integration/apply_ops_test.cc.

Implements the update rules of the ResourceApply* ops (torch.optim's rules,
as documented in core/ops/training_ops.cc) in NumPy, runs each case three
steps and prints the cases as a C++ initialiser list to paste into the test:

    /usr/bin/python3 tests/integration/apply_ops_reference.py

The expected values are computed in f64. For the f32 runs the inputs are
first rounded to f32 (the kernel only ever sees those), so the f32 column
differs from the f64 one by the rounding of the inputs, and the test then
only allows for the kernel's own f32 arithmetic. As a check on the test data,
the script also runs every rule in f32 and fails if that strays from the f64
reference by more than the test's f32 tolerance would (a sign of
cancellation that would make the comparison meaningless).
"""
import sys

import numpy as np

F32_RTOL = 1e-6  # the test's tolerance for f32

# Shared data: a [2, 3] variable and three gradients (each element keeps its
# sign over the steps, so no slot or variable comes near zero).
VAR0 = [1.0, -2.0, 0.5, 3.0, -1.5, 0.75]
GRADS = [
    [0.5, -1.5, 0.25, -0.125, 2.0, -0.03],
    [0.3, -1.1, 0.4, -0.2, 1.7, -0.05],
    [0.7, -0.9, 0.1, -0.15, 2.2, -0.02],
]
ZEROS = [0.0] * 6


# Each rule: (state dict of arrays, hyper-parameter dict, step, grad, dt) ->
# new state, computed with dtype dt. Scalar factors that PyTorch computes in
# Python floats are computed in f64 and then rounded to dt, as the kernels do.
def gradient_descent(s, h, step, g, dt):
    return {"var": s["var"] - h["lr"] * g}


def momentum(nesterov):
    def rule(s, h, step, g, dt):
        accum = h["momentum"] * s["accum"] + g
        update = g + h["momentum"] * accum if nesterov else accum
        return {"var": s["var"] - h["lr"] * update, "accum": accum}
    return rule


def adam_core(var, s, h, step, g, dt):
    b1, b2 = h["beta1"], h["beta2"]
    m = b1 * s["m"] + (dt(1) - b1) * g
    v = b2 * s["v"] + (dt(1) - b2) * g * g
    bc1 = 1.0 - float(b1) ** step
    bc2 = 1.0 - float(b2) ** step
    step_size = dt(float(h["lr"]) / bc1)
    bc2_sqrt = dt(np.sqrt(bc2))
    denom = np.sqrt(v) / bc2_sqrt + h["epsilon"]
    return {"var": var - step_size * m / denom, "m": m, "v": v}


def adam(s, h, step, g, dt):
    return adam_core(s["var"], s, h, step, g, dt)


def adamw(s, h, step, g, dt):
    decay = dt(1.0 - float(h["lr"]) * float(h["weight_decay"]))
    return adam_core(s["var"] * decay, s, h, step, g, dt)


def rmsprop(s, h, step, g, dt):
    rho = h["rho"]
    ms = rho * s["ms"] + (dt(1) - rho) * g * g
    avg = np.sqrt(ms) + h["epsilon"]
    mom = h["momentum"] * s["mom"] + g / avg
    return {"var": s["var"] - h["lr"] * mom, "ms": ms, "mom": mom}


def centered_rmsprop(s, h, step, g, dt):
    rho = h["rho"]
    mg = rho * s["mg"] + (dt(1) - rho) * g
    ms = rho * s["ms"] + (dt(1) - rho) * g * g
    avg = np.sqrt(ms - mg * mg) + h["epsilon"]
    mom = h["momentum"] * s["mom"] + g / avg
    return {"var": s["var"] - h["lr"] * mom, "mg": mg, "ms": ms, "mom": mom}


def adagrad(s, h, step, g, dt):
    accum = s["accum"] + g * g
    return {"var": s["var"] - h["lr"] * g / (np.sqrt(accum) + h["epsilon"]), "accum": accum}


# (test name, op, op inputs in order, use_nesterov, rule, hyper-parameters,
#  steps, initial values of the variables in input order)
CASES = [
    ("GradientDescent", "ResourceApplyGradientDescent", ["var", "lr", "grad"], False, gradient_descent,
     {"lr": 0.1}, [1, 2, 3], {"var": VAR0}),
    ("Momentum", "ResourceApplyMomentum", ["var", "accum", "lr", "grad", "momentum"], False, momentum(False),
     {"lr": 0.1, "momentum": 0.9}, [1, 2, 3], {"var": VAR0, "accum": ZEROS}),
    ("MomentumFromNonZeroAccum", "ResourceApplyMomentum", ["var", "accum", "lr", "grad", "momentum"], False,
     momentum(False), {"lr": 0.05, "momentum": 0.5}, [1, 2, 3],
     {"var": VAR0, "accum": [0.2, -0.3, 0.1, -0.5, 0.4, -0.1]}),
    ("Nesterov", "ResourceApplyMomentum", ["var", "accum", "lr", "grad", "momentum"], True, momentum(True),
     {"lr": 0.1, "momentum": 0.9}, [1, 2, 3], {"var": VAR0, "accum": ZEROS}),
    ("Adam", "ResourceApplyAdam", ["var", "m", "v", "lr", "beta1", "beta2", "epsilon", "step", "grad"], False,
     adam, {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}, [1, 2, 3],
     {"var": VAR0, "m": ZEROS, "v": ZEROS}),
    ("AdamLaterSteps", "ResourceApplyAdam", ["var", "m", "v", "lr", "beta1", "beta2", "epsilon", "step", "grad"],
     False, adam, {"lr": 0.05, "beta1": 0.8, "beta2": 0.99, "epsilon": 0.01}, [7, 8, 9],
     {"var": VAR0, "m": [0.1, -0.2, 0.05, -0.1, 0.3, -0.01], "v": [0.04, 0.3, 0.01, 0.02, 0.5, 0.001]}),
    ("AdamW", "ResourceApplyAdamW",
     ["var", "m", "v", "lr", "beta1", "beta2", "epsilon", "weight_decay", "step", "grad"], False, adamw,
     {"lr": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "weight_decay": 0.1}, [1, 2, 3],
     {"var": VAR0, "m": ZEROS, "v": ZEROS}),
    ("RMSProp", "ResourceApplyRMSProp", ["var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"], False,
     rmsprop, {"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-6}, [1, 2, 3],
     {"var": VAR0, "ms": ZEROS, "mom": ZEROS}),
    ("RMSPropWithoutMomentum", "ResourceApplyRMSProp",
     ["var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"], False, rmsprop,
     {"lr": 0.01, "rho": 0.99, "momentum": 0.0, "epsilon": 1e-8}, [1, 2, 3],
     {"var": VAR0, "ms": ZEROS, "mom": ZEROS}),
    ("CenteredRMSProp", "ResourceApplyCenteredRMSProp",
     ["var", "mg", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"], False, centered_rmsprop,
     {"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-6}, [1, 2, 3],
     {"var": VAR0, "mg": ZEROS, "ms": ZEROS, "mom": ZEROS}),
    ("Adagrad", "ResourceApplyAdagrad", ["var", "accum", "lr", "epsilon", "grad"], False, adagrad,
     {"lr": 0.1, "epsilon": 1e-10}, [1, 2, 3], {"var": VAR0, "accum": [0.1] * 6}),
]


def run(rule, hyper, steps, initial, dt, round_to=None):
    """Three steps of |rule| in dtype |dt|, inputs first rounded to |round_to|."""
    r = (lambda x: np.asarray(x, dtype=round_to).astype(dt)) if round_to else (lambda x: np.asarray(x, dtype=dt))
    state = {k: r(v) for k, v in initial.items()}
    h = {k: dt(r(v)) for k, v in hyper.items()}
    for step, g in zip(steps, GRADS):
        state = rule(state, h, step, r(g), dt)
    return state


def cxx_list(values):
    return "{" + ", ".join(repr(float(x)) for x in values) + "}"


def main():
    out = []
    worst = 0.0
    for name, op, inputs, nesterov, rule, hyper, steps, initial in CASES:
        resources = list(initial)
        ref64 = run(rule, hyper, steps, initial, np.float64)
        ref32 = run(rule, hyper, steps, initial, np.float64, round_to=np.float32)
        sim32 = run(rule, hyper, steps, initial, np.float32)
        for k in resources:
            rel = np.max(np.abs(sim32[k].astype(np.float64) - ref32[k]) / np.abs(ref32[k]))
            worst = max(worst, rel)
            if rel > F32_RTOL / 4:
                sys.exit(f"{name}: {k} in f32 differs from the f64 reference by {rel:.3g} relative; "
                         "choose data without cancellation")
        has_step = "step" in inputs
        lines = [
            f'    {{"{name}", "{op}", {{{", ".join(chr(34) + i + chr(34) for i in inputs)}}}, '
            f'{"true" if nesterov else "false"},',
            "     {" + ", ".join(f'{{"{k}", {v!r}}}' for k, v in hyper.items()) + "},",
            "     " + ("{" + ", ".join(str(s) for s in steps) + "}" if has_step else "{}") + ",",
            "     {" + ", ".join(cxx_list(initial[k]) for k in resources) + "},",
            "     /*f64=*/{" + ", ".join(cxx_list(ref64[k]) for k in resources) + "},",
            "     /*f32=*/{" + ", ".join(cxx_list(ref32[k]) for k in resources) + "}},",
        ]
        out.append("\n".join(lines))
    print(f"// Grads: {', '.join(cxx_list(g) for g in GRADS)}")
    print("\n".join(out))
    print(f"// worst f32 simulation error: {worst:.3g} relative", file=sys.stderr)


if __name__ == "__main__":
    main()
