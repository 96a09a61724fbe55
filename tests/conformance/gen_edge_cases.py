#!/usr/bin/python3
"""Generates the edge-case suite: for every op and every dtype binding its
CPU kernels register, cases built from the edge values of the dtype, with
NumPy's results.

Usage: gen_edge_cases.py KERNELS_TOML OUT_DIR

KERNELS_TOML is written by edge_case_test from the running CPU plugin: each
op, its inputs and outputs, and its kernels' dtype bindings ("T=f32",
"SrcT=f64,DstT=f16"). Nothing here lists dtypes by hand: a kernel added
for a new dtype gets edge cases the next run, and a binding no family can
generate is a failure of edge_case_test, not a silent gap.

Cases are generated per family of ops (unary, binary, reductions, scans,
data movement, indexing, casts, matrix products, windows, normalisation,
losses, recurrent cells) from one set of values per dtype:
  floats   NaN, +-inf, +-0, +-the smallest subnormal, +-the largest
           finite, the smallest normal, -1, 1, 0.5, -2.5, 3
  integers the lowest, lowest + 1, -1, 0, 1, 2, highest - 1, highest
  bool     false, true
laid out as scalars, empty tensors (a zero in any dimension), ranks 0 to 8
and broadcasting corners. The references are NumPy's, computed in the
op's own dtype for the basic arithmetic (as NumPy would for that dtype),
in float64 and rounded once for the transcendental functions, and with
Python's exact integers (then wrapped) for integer results. Where Weft
deliberately differs from NumPy (integer division by zero is an error,
float-to-integer casts saturate; `weft ops NAME` says so), the reference
follows Weft's documented rule.

Ops with no generated cases are listed in [[exempt]] with the reason, and
dtype bindings skipped with [[skipped]]: edge_case_test checks that every
op with a CPU kernel is one or the other.
"""
import os
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gen_cases import open_generator, write_cases  # noqa: E402
# The families and their edge values: edge_cases/ beside this file.
from edge_cases import EXEMPT, FAMILIES, Edge, parse_binding  # noqa: E402


def main():
    kernels_file, out_dir = sys.argv[1], sys.argv[2]
    with open(kernels_file, "rb") as f:
        ops = {op["name"]: op for op in tomllib.load(f)["op"]}
    g = open_generator(out_dir)
    edge = Edge(g, ops)
    unknown = []
    for name, op in sorted(ops.items()):
        if name.startswith("_") or (not op["bindings"] and not op["runtime"]):
            continue  # the runtime's own (Send, Recv, Arg, Retval), or no CPU kernel
        if name in EXEMPT:
            edge.exempt[name] = EXEMPT[name]
            continue
        family = FAMILIES.get(name)
        if family is None:
            unknown.append(name)
            continue
        for text in op["bindings"] or [""]:
            binding = parse_binding(text)
            if "string" in binding.values() or "resource" in binding.values():
                edge.skipped.append((name, text, "strings and resources do not travel in .npy files; "
                                                 "string kernels are tested in their op's unit tests"))
                continue
            family(edge, name, binding)
    lines = list(g.lines)
    for name, reason in sorted(edge.exempt.items()):
        lines += ["[[exempt]]", f'op = "{name}"', f'reason = "{reason}"', ""]
    for name, text, reason in edge.skipped:
        lines += ["[[skipped]]", f'op = "{name}"', f'binding = "{text}"', f'reason = "{reason}"', ""]
    write_cases(out_dir, lines, "gen_edge_cases.py")
    print(f"gen_edge_cases: {len(g.names)} cases for {len(edge.covered)} ops; {len(edge.exempt)} ops exempt; "
          f"{len(edge.skipped)} bindings skipped", flush=True)
    if unknown:
        print("gen_edge_cases: no family generates cases for " + ", ".join(unknown), file=sys.stderr)


if __name__ == "__main__":
    main()
