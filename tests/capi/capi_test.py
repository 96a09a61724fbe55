#!/usr/bin/env python3
"""The C inference API end to end (capi/include/weft/weft_inference.h): tests/capi/capi_test.c, a C program that links
libweft_inference only, runs y = Relu(x @ W + b) on 5 rows and checks every refusal; this script makes the model,
compares the C program's output with NumPy (1e-6 relative) and with `weft run` of the same input (bit for bit).

    capi_test.py CAPI_TEST CAPI_CPP_TEST WEFT_CLI

The C program also gets the model saved with its weights in an external data file, which it must be refused to load
from memory (and may load from its file).

CAPI_CPP_TEST (tests/capi/capi_cpp_test.cc) runs the same through weft_inference.hpp; its output must equal the C
program's bit for bit.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serving"))
from serving_models import affine_ref, randn, write_affine  # noqa: E402


def main():
    capi_test, capi_cpp_test, cli = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as d:
        model = os.path.join(d, "affine.onnx")
        write_affine(model)
        # The same model with its weights in an external file: from memory it has no folder to find them in.
        import onnx
        external = os.path.join(d, "external.onnx")
        onnx.save_model(onnx.load(model), external, save_as_external_data=True, all_tensors_to_one_file=True,
                        location="external.bin", size_threshold=0)
        x = randn(7, 5, 4)
        x.astype("<f4").tofile(os.path.join(d, "x.bin"))
        run = subprocess.run([capi_test, model, os.path.join(d, "x.bin"), "5", os.path.join(d, "y.bin"), external],
                             capture_output=True, text=True, timeout=300)
        print(run.stdout + run.stderr, end="")
        assert run.returncode == 0, f"capi_test exit {run.returncode}"
        y = np.fromfile(os.path.join(d, "y.bin"), "<f4").reshape(5, 3)
        run = subprocess.run([capi_cpp_test, model, os.path.join(d, "x.bin"), "5", os.path.join(d, "y_cpp.bin")],
                             capture_output=True, text=True, timeout=300)
        print(run.stdout + run.stderr, end="")
        assert run.returncode == 0, f"capi_cpp_test exit {run.returncode}"
        y_cpp = np.fromfile(os.path.join(d, "y_cpp.bin"), "<f4").reshape(5, 3)
        assert np.array_equal(y_cpp.view(np.uint32), y.view(np.uint32)), f"C++ and C differ:\n{y_cpp}\n{y}"
        ref, scale = affine_ref(x, 1)
        err = np.abs(y - ref) / (np.asarray(scale) + 1e-30)
        assert np.all(err <= 1e-6), f"the C API's y differs from NumPy's by {err.max():.3g} relative"
        np.save(os.path.join(d, "x.npy"), x)
        by_run = subprocess.run([cli, "run", model, "--feed", f"x={os.path.join(d, 'x.npy')}", "--fetch", "y",
                                 "--out", d, "-q"], capture_output=True, text=True, timeout=300)
        assert by_run.returncode == 0, f"weft run: {by_run.stderr}"
        want = np.load(os.path.join(d, "y.npy"))
        assert want.shape == y.shape and np.array_equal(want.view(np.uint32), y.view(np.uint32)), \
            f"the C API's y differs from `weft run`'s:\n{y}\n{want}"
    print("capi: the C program's output equals NumPy's (1e-6) and `weft run`'s (bit for bit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
