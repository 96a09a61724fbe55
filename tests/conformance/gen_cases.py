#!/usr/bin/python3
"""Writes the conformance cases: inputs and expected outputs computed by NumPy.

Usage: gen_cases.py OUT_DIR

Each module in cases/ defines `cases(g)` and calls g.add(...) per case.
The runner (conformance_test) builds a one-op graph per case, runs it on
every device that has a kernel, and compares with the expected values.
The expected values come from NumPy (or hand derivation in the modules),
never from Weft.
"""
import importlib
import os
import pkgutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cases as case_modules  # noqa: E402

# Default tolerances by dtype: |got - want| <= atol + rtol * |want|.
TOLERANCE = {
    "f64": (1e-12, 1e-12),
    "f32": (2e-6, 1e-6),
    "f16": (2e-3, 1e-3),
    "bf16": (1.6e-2, 1e-2),
}

NUMPY_DTYPE = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16, "bf16": np.float32,
    "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8, "bool": np.bool_,
}


def to_bf16(x):
    """Rounds float32 values to the nearest bfloat16 (ties to even), kept as float32."""
    x = np.asarray(x, dtype=np.float32)
    shape = x.shape
    x = x.reshape(-1)
    u = x.view(np.uint32).astype(np.uint64)
    s16 = np.uint64(16)
    rounded = ((u + np.uint64(0x7FFF) + ((u >> s16) & np.uint64(1))) >> s16) << s16
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out).astype(np.float32).reshape(shape)


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if np.isnan(v):
            return "nan"
        if np.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(e) for e in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


class Generator:
    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.lines = []
        self.names = set()

    def _save(self, name, i, kind, array, dtype):
        file = f"{name.replace('/', '__')}.{kind}{i}.npy"
        if dtype == "bf16":
            array = to_bf16(array)
        elif dtype is not None:
            array = np.asarray(array, dtype=NUMPY_DTYPE[dtype])
        # np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray makes them [1]).
        np.save(os.path.join(self.out_dir, file), np.asarray(array, order="C"), allow_pickle=False)
        return file

    def add(self, name, op, inputs, attrs=None, outputs=None, error=None, rtol=None, atol=None,
            input_dtypes=None, output_dtypes=None, signed_zeros=False):
        """One case.

        inputs: NumPy arrays (bf16 given as float32 and named in input_dtypes).
        outputs: expected NumPy arrays, or None with error='message substring'.
        signed_zeros: a zero expected must come out with the same sign.
        """
        if name in self.names:
            raise ValueError(f"duplicate case {name}")
        self.names.add(name)
        attrs = attrs or {}
        # bf16 has no NumPy dtype: its values travel as float32 files marked
        # bf16, for the inputs and outputs of a bf16-typed op.
        src_bf16 = "bf16" in (attrs.get("T"), attrs.get("SrcT"), attrs.get("dtype"))
        dst_bf16 = "bf16" in (attrs.get("T"), attrs.get("DstT"), attrs.get("dtype"))
        if input_dtypes is None:
            input_dtypes = ["bf16" if src_bf16 and np.asarray(a).dtype == np.float32 else None for a in inputs]
        if outputs is not None and output_dtypes is None:
            output_dtypes = ["bf16" if dst_bf16 and np.asarray(a).dtype == np.float32 else None for a in outputs]
        self.lines.append("[[case]]")
        self.lines.append(f"name = {toml_value(name)}")
        self.lines.append(f"op = {toml_value(op)}")
        files = [self._save(name, i, "in", a, d) for i, (a, d) in enumerate(zip(inputs, input_dtypes))]
        specs = [f"{{ file = {toml_value(f)}, dtype = {toml_value(d)} }}" if d == "bf16" else f"{{ file = {toml_value(f)} }}"
                 for f, d in zip(files, input_dtypes)]
        self.lines.append(f"inputs = [{', '.join(specs)}]")
        if error is not None:
            self.lines.append(f"error = {toml_value(error)}")
        else:
            output_dtypes = output_dtypes or [None] * len(outputs)
            files = [self._save(name, i, "out", a, d) for i, (a, d) in enumerate(zip(outputs, output_dtypes))]
            specs = [f"{{ file = {toml_value(f)}, dtype = {toml_value(d)} }}" if d == "bf16" else f"{{ file = {toml_value(f)} }}"
                     for f, d in zip(files, output_dtypes)]
            self.lines.append(f"outputs = [{', '.join(specs)}]")
            if rtol is not None:
                self.lines.append(f"rtol = {toml_value(float(rtol))}")
            if atol is not None:
                self.lines.append(f"atol = {toml_value(float(atol))}")
            if signed_zeros:
                self.lines.append("signed_zeros = true")
        if attrs:
            self.lines.append("[case.attrs]")
            for key, value in attrs.items():
                self.lines.append(f"{key} = {toml_value(value)}")
        self.lines.append("")


def open_generator(out_dir):
    """A Generator writing into |out_dir|, emptied of the .npy files of an earlier run."""
    os.makedirs(out_dir, exist_ok=True)
    for old in os.listdir(out_dir):
        if old.endswith(".npy"):
            os.remove(os.path.join(out_dir, old))
    g = Generator(out_dir)
    g.tolerance = TOLERANCE
    g.to_bf16 = to_bf16
    return g


def write_cases(out_dir, lines, script):
    """Writes |lines| as out_dir/cases.toml, atomically."""
    with open(os.path.join(out_dir, "cases.toml.tmp"), "w") as f:
        f.write(f"# Generated by tests/conformance/{script}; do not edit.\n\n")
        f.write("\n".join(lines))
    os.replace(os.path.join(out_dir, "cases.toml.tmp"), os.path.join(out_dir, "cases.toml"))


def main():
    out_dir = sys.argv[1]
    g = open_generator(out_dir)
    for info in sorted(pkgutil.iter_modules(case_modules.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"cases.{info.name}")
        module.cases(g)
    write_cases(out_dir, g.lines, "gen_cases.py")
    print(f"wrote {len(g.names)} conformance cases to {out_dir}")


if __name__ == "__main__":
    main()
