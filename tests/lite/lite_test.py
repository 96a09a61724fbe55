#!/usr/bin/env python3
"""The lite build (docs/lite.md), driven from outside: weft-lite and the C
API built for the sample MLP, the sample CNN and MobileNet-v2 (selective
registration), run on PyTorch's inputs and compared with PyTorch's outputs
and with the full build's `weft run` of the same .wg; its size against the
issue's 4 MiB; and every refusal with its message.

    tests/lite/lite_test.py LITE_BUILD FULL_BUILD MODELS_DIR

MODELS_DIR holds NAME.wg (optimized by the full build's `weft optimize`),
NAME.input.npy and NAME.expected.npy for mlp, cnn and mobilenet_v2, and
lstm.wg, a model whose ops the build left out (tests/lite/run.sh makes it).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

LITE, FULL, MODELS = sys.argv[1:4]
# A cross build (lite-arm64) runs under the emulator tests/lite/run.sh
# names, its binaries are read with the cross binutils, and its libraries
# are found in the sysroot.
EMULATOR = os.environ.get("WEFT_LITE_EMULATOR", "").split()
TOOLS = os.environ.get("WEFT_LITE_TOOL_PREFIX", "")
LIB_DIRS = os.environ.get("WEFT_LITE_LIB_DIRS", "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu").split(":")
RUNNER = os.path.join(LITE, "bin", "weft-lite")
CAPI_TEST = os.path.join(LITE, "bin", "weft_lite_capi_test")
WEFT = os.path.join(FULL, "bin", "weft")
SIZE_LIMIT = 4 << 20  # the bound for weft-lite and what it loads
# The C and C++ runtimes, which the bound leaves out.
RUNTIMES = ("linux-vdso", "libc.so", "libm.so", "libstdc++", "libgcc_s", "ld-linux", "libpthread.so", "libdl.so")

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kw)


def run_lite(args):
    """A program of the lite build, under the emulator when cross-built."""
    return run(EMULATOR + args)


def model(name):
    return os.path.join(MODELS, name + ".wg")


def close(got, want, what):
    """Within 1e-5 of the largest magnitude: XNNPACK sums in another order
    than PyTorch and oneDNN."""
    scale = max(float(np.abs(want).max()), 1e-30)
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) / scale
    check(got.shape == want.shape and err <= 1e-5, f"{what}: shape {got.shape}, max error {err:.2e} of the largest")


def outputs(tmp, name):
    """weft-lite's and the full build's outputs for model |name|."""
    out_lite = os.path.join(tmp, "lite_" + name)
    r = run_lite([RUNNER, model(name), os.path.join(MODELS, name + ".input.npy"), "-o", out_lite])
    check(r.returncode == 0, f"weft-lite runs {name}" + ("" if r.returncode == 0 else ": " + r.stderr))
    out_full = os.path.join(tmp, "full_" + name)
    r = run([WEFT, "run", model(name), "--feed", f"input={os.path.join(MODELS, name + '.input.npy')}",
             "--fetch", "output", "--optimize", "0", "--out", out_full, "-q"], env=dict(os.environ, WEFT_PLUGIN_PATH=""))
    check(r.returncode == 0, f"weft run runs {name}" + ("" if r.returncode == 0 else ": " + r.stderr))
    return np.load(os.path.join(out_lite, "output.npy")), np.load(os.path.join(out_full, "output.npy"))


def test_models(tmp):
    for name in ("mlp", "cnn", "mobilenet_v2"):
        lite, full = outputs(tmp, name)
        close(lite, np.load(os.path.join(MODELS, name + ".expected.npy")), f"{name}: weft-lite against PyTorch")
        close(lite, full, f"{name}: weft-lite against the full build's weft run")
    # The int8 CNN (_QConv2D, _QMatMul on the direct loops): the full
    # build's values (the same integer sums; where the full build runs
    # oneDNN a requantized value may land one step away, hence 1e-5), and
    # PyTorch's f32 values within the quantization's error.
    lite, full = outputs(tmp, "cnn_int8")
    close(lite, full, "cnn_int8: weft-lite against the full build's weft run")
    want = np.load(os.path.join(MODELS, "cnn.expected.npy"))
    err = float(np.abs(lite.astype(np.float64) - want).max() / np.abs(want).max())
    check(lite.shape == want.shape and err <= 0.05, f"cnn_int8: weft-lite against PyTorch's f32 CNN: max error "
                                                     f"{err:.2e} of the largest (quantization), <= 5e-2")


def test_capi(tmp):
    x = np.load(os.path.join(MODELS, "mlp.input.npy")).astype("<f4")
    x.tofile(os.path.join(tmp, "mlp.f32"))
    out = os.path.join(tmp, "capi.f32")
    r = run_lite([CAPI_TEST, model("mlp"), os.path.join(tmp, "mlp.f32"), str(x.shape[0]), str(x.shape[1]), out])
    print(r.stdout, end="")
    check(r.returncode == 0, "the lite C API refuses what the lite build lacks, each with its message, and runs")
    if r.returncode == 0:
        want = np.load(os.path.join(tmp, "lite_mlp", "output.npy"))
        got = np.fromfile(out, "<f4").reshape(want.shape)
        check(np.array_equal(got, want), "the C API on the caller's buffer gives weft-lite's output bit for bit")


def needed(path):
    """The shared libraries |path| names (DT_NEEDED)."""
    out = run(["readelf", "-dW", path]).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def loaded_libraries(path):
    """Every library the dynamic loader would map for |path| beyond the C
    and C++ runtimes, found in LIB_DIRS, transitively."""
    found, todo = {}, needed(path)
    while todo:
        name = todo.pop()
        if name in found or any(name.startswith(r) for r in RUNTIMES):
            continue
        where = next((os.path.join(d, name) for d in LIB_DIRS if os.path.exists(os.path.join(d, name))), None)
        check(where is not None, f"{name}, which weft-lite loads, is in {':'.join(LIB_DIRS)}")
        if where is None:
            continue
        found[name] = os.path.realpath(where)
        todo.extend(needed(found[name]))
    return found


def test_size():
    stripped = os.path.join(tempfile.mkdtemp(), "weft-lite")
    subprocess.run([TOOLS + "strip", "-o", stripped, RUNNER], check=True)
    total = os.path.getsize(stripped)
    parts = [f"weft-lite {total}"]
    for name, path in sorted(loaded_libraries(RUNNER).items()):
        total += os.path.getsize(path)
        parts.append(f"{name} {os.path.getsize(path)}")
    check(total <= SIZE_LIMIT, f"stripped weft-lite and its libraries: {total} bytes <= {SIZE_LIMIT} ({', '.join(parts)})")
    imports = run([TOOLS + "nm", "-D", "--undefined-only", RUNNER]).stdout
    check("dlopen" not in imports, "weft-lite cannot load plugin files (no dlopen)")
    symbols = run([TOOLS + "nm", "-C", RUNNER]).stdout
    check("toml::" not in symbols and "onnx::" not in symbols, "weft-lite has no TOML parser and no ONNX importer")


def expect_error(args, code, parts, what):
    r = run_lite([RUNNER] + args)
    text = r.stderr + r.stdout
    ok = r.returncode == code and all(p in text for p in parts)
    check(ok, what + ("" if ok else f": exit {r.returncode}, {text.strip()}"))


def test_errors(tmp):
    mlp_in = os.path.join(MODELS, "mlp.input.npy")
    r = run_lite([RUNNER, "--help"])
    check(r.returncode == 0 and "Usage: weft-lite MODEL.wg" in r.stdout, "--help")
    r = run_lite([RUNNER, model("mlp"), "--info"])
    check(r.returncode == 0 and "input  input f32 [-1,784]" in r.stdout and "output output f32" in r.stdout,
          "--info lists the inputs and outputs: " + r.stdout.strip().replace("\n", "; "))
    expect_error([], 2, ["no model given"], "no model")
    expect_error([model("mlp"), "--bogus"], 2, ["unknown option --bogus"], "an unknown option")
    expect_error([model("mlp"), "--repeat", "0"], 2, ["--repeat takes a whole number from 1"], "--repeat 0")
    expect_error([os.path.join(MODELS, "mlp.onnx"), mlp_in], 1,
                 ["lite build, which reads .wg graphs only", "weft optimize"], "an .onnx model")
    expect_error([model("no_such_model"), mlp_in], 1, ["no_such_model.wg"], "a missing model")
    expect_error([model("mlp"), "missing.npy"], 1, ["missing.npy"], "a missing input file")
    expect_error([model("mlp"), "images=" + mlp_in], 1, ['no input "images"', 'its inputs: "input"'], "an unknown input name")
    wrong = os.path.join(tmp, "f64.npy")
    np.save(wrong, np.load(mlp_in).astype(np.float64))
    expect_error([model("mlp"), wrong], 1, ['input "input" is f32, not f64'], "a feed of the wrong dtype")
    short = os.path.join(tmp, "short.npy")
    np.save(short, np.zeros((2, 10), np.float32))
    expect_error([model("mlp"), short], 1, ['input "input": shape [2,10] does not fit', "[?,784]"], "a feed of the wrong shape")
    garbage = os.path.join(tmp, "garbage.wg")
    with open(garbage, "wb") as f:
        f.write(b"\x01\x02\x03\x04" * 10)
    expect_error([garbage, mlp_in], 1, ["garbage.wg", "not a valid .wg graph file"], "a malformed .wg")
    # An op the build left out: the error names it and how to rebuild.
    lstm_in = os.path.join(MODELS, "lstm.input.npy")
    expect_error([model("lstm"), lstm_in], 1,
                 ["no CPU kernel for", "this lite build has the kernels of", "cnn.wg", "mlp.wg", "mobilenet_v2.wg",
                  "cmake --preset lite -DWEFT_LITE_MODELS="], "a model with an op the build left out")


def test_ops_tool(tmp):
    """weft-lite-ops, which lists a build's kernels: from an op list as
    `weft optimize --list-ops` writes it, and its refusals."""
    tool = os.path.join(LITE, "bin", "weft-lite-ops")
    ops = os.path.join(tmp, "ops.txt")
    r = run([WEFT, "optimize", model("mlp"), "--list-ops", "--level", "0", "-o", ops],
            env=dict(os.environ, WEFT_PLUGIN_PATH=""))
    check(r.returncode == 0, "weft optimize --list-ops writes the MLP's op list")
    header = os.path.join(tmp, "kernels.h")
    r = run_lite([tool, "--header", header, ops])
    text = open(header).read() if r.returncode == 0 else ""
    check(r.returncode == 0 and '{"_FusedMatMul", static_cast<weft_dtype_t>(1)},  // f32' in text,
          "weft-lite-ops reads an op list: " + (r.stdout.strip() or r.stderr.strip()))
    bad = os.path.join(tmp, "bad.txt")
    with open(bad, "w") as f:
        f.write("# a comment\nConv2D T=q9\n")
    r = run_lite([tool, "--header", header, bad])
    check(r.returncode == 1 and 'bad.txt:2: "q9" is not a dtype' in r.stderr, "weft-lite-ops: a bad dtype, by line")
    r = run_lite([tool, "--header", header, os.path.join(tmp, "none.wg")])
    check(r.returncode == 1 and "none.wg" in r.stderr, "weft-lite-ops: a missing model")
    r = run_lite([tool])
    check(r.returncode == 2 and "give --header OUT.h and at least one INPUT" in r.stderr, "weft-lite-ops: no input")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_models(tmp)
        test_capi(tmp)
        test_size()
        test_errors(tmp)
        test_ops_tool(tmp)
    if failures:
        print(f"{len(failures)} FAILED")
        sys.exit(1)
    print("all lite tests passed")


if __name__ == "__main__":
    main()
