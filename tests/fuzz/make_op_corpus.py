#!/usr/bin/python3
"""Writes the op fuzzer's seed corpus from the conformance cases.

Usage: make_op_corpus.py BUILD/share/weft/conformance/cases.toml OUT_DIR [OPS_JSON]

One seed per op that has conformance cases (up to three, from different
cases): the op's name, a NUL byte, then the raw bytes of the case's first
input (.npy data, after its header), cut to 96 bytes. op_fuzzer reads the
bytes after the name as its choices of attrs and input values, so the
seeds start the fuzzer on every op with realistic value bytes. With
OPS_JSON (`weft ops --json`), every other op gets a seed of its name and a
few bytes too.
"""
import hashlib
import os
import sys
import tomllib

import numpy as np


def main():
    cases_toml, out_dir = sys.argv[1], sys.argv[2]
    with open(cases_toml, "rb") as f:
        cases = tomllib.load(f)["case"]
    base = os.path.dirname(cases_toml)
    os.makedirs(out_dir, exist_ok=True)
    per_op = {}
    for case in cases:
        op = case["op"]
        if per_op.get(op, 0) >= 3 or not case.get("inputs"):
            continue
        data = np.load(os.path.join(base, case["inputs"][0]["file"]), allow_pickle=False)
        payload = op.encode() + b"\0" + np.ascontiguousarray(data).tobytes()[:96]
        name = hashlib.sha1(payload).hexdigest()[:16]
        with open(os.path.join(out_dir, f"{op}-{name}"), "wb") as f:
            f.write(payload)
        per_op[op] = per_op.get(op, 0) + 1
    if len(sys.argv) > 3:
        import json
        with open(sys.argv[3]) as f:
            for entry in json.load(f):
                op = entry["name"]
                if op in per_op or op.startswith("_"):
                    continue
                payload = op.encode() + b"\0" + bytes(range(1, 33))
                with open(os.path.join(out_dir, f"{op}-plain"), "wb") as f:
                    f.write(payload)
                per_op[op] = 1
    print(f"wrote {sum(per_op.values())} seeds for {len(per_op)} ops to {out_dir}")


if __name__ == "__main__":
    main()
