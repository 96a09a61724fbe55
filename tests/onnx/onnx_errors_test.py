#!/usr/bin/env python3
"""Bad ONNX models through `weft import`: each must exit 1 with a message that
names the file and what is wrong (the node, the op, the missing file), and
write nothing.

    onnx_errors_test.py WEFT_CLI
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "bad", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx_errors_test")
    m.ir_version = 8
    return m


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def relu_model(opset=17):
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 3])], [vi("y", [2, 3])],
                 opset=opset)


def cases(workdir):
    """(name, file bytes or ModelProto, [substrings the error must contain])"""
    good = relu_model().SerializeToString()
    c = []
    c.append(("garbage", b"\x08\x07this is not protobuf \xff\xfe" * 8, ["garbage.onnx", "not an ONNX model"]))
    c.append(("empty", b"", ["empty.onnx", "the file is empty"]))
    big = model([helper.make_node("Gemm", ["x", "w"], ["y"], name="dense")], [vi("x", [2, 64])], [vi("y", [2, 64])],
                [numpy_helper.from_array(np.ones((64, 64), np.float32), "w")]).SerializeToString()
    c.append(("truncated", big[: len(big) // 2], ["truncated.onnx", "not an ONNX model", "truncated"]))
    c.append(("opset18", relu_model(18), ["opset18.onnx", "ONNX opset 18 is not supported", "opsets 7 to 17"]))
    c.append(("opset6", relu_model(6), ["opset6.onnx", "ONNX opset 6 is not supported"]))
    gemm = helper.make_node("Gemm", ["x", "w"], ["y"], name="dense", alpha=2)  # an INT where a FLOAT belongs
    c.append(("attr_type", model([gemm], [vi("x", [2, 3]), vi("w", [3, 4])], [vi("y", [2, 4])]),
              ["attr_type.onnx", "checker", "alpha", "dense"]))
    c.append(("dangling", model([helper.make_node("Relu", ["nowhere"], ["y"], name="relu")], [vi("x", [2, 3])],
                                [vi("y", [2, 3])]), ["dangling.onnx", "nowhere", "relu"]))
    c.append(("shapes", model([helper.make_node("Add", ["a", "b"], ["y"], name="sum")],
                              [vi("a", [2, 3]), vi("b", [4, 5])], [vi("y", [2, 3])]),
              ["shapes.onnx", "shape inference", "sum"]))
    unsupported = [helper.make_node("Det", ["x"], ["d1"], name="det_a"),
                   helper.make_node("Det", ["x"], ["d2"], name="det_b"),
                   helper.make_node("Relu", ["x"], ["r"], name="fine"),
                   helper.make_node("StringNormalizer", ["s"], ["s2"], name="norm"),
                   helper.make_node("FusedThing", ["x"], ["f"], name="custom", domain="com.example")]
    m = model(unsupported, [vi("x", [3, 3]), vi("s", [2], TensorProto.STRING)],
              [vi("d1", []), vi("d2", []), vi("r", [3, 3]), vi("s2", [2], TensorProto.STRING), vi("f", [3, 3])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    c.append(("unsupported", m, ["unsupported.onnx", "3 op types (4 nodes) cannot be imported",
                                 "Det x2 (first: node \"det_a\")", "StringNormalizer x1 (first: node \"norm\")",
                                 "com.example::FusedThing x1 (first: node \"custom\")", "docs/onnx.md"]))
    w = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="weights.bin")
    ext = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [2, 3])], [vi("y", [2, 4])], [w])
    c.append(("external", ext, ["external.onnx", "weights.bin", "doesn't exist"]))
    short = numpy_helper.from_array(np.ones((3, 4), np.float32), "w")
    short.raw_data = short.raw_data[:20]
    c.append(("short_initializer", model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [vi("x", [2, 3])],
                                         [vi("y", [2, 4])], [short]),
              ["short_initializer.onnx", "\"w\"", "20 bytes", "needs 48"]))
    lstm = helper.make_node("LSTM", ["x", "W", "R"], ["y"], name="rnn", hidden_size=2, clip=1.0)
    c.append(("lstm_clip", model([lstm], [vi("x", [3, 1, 2])], [vi("y", [3, 1, 1, 2])],
                                 [numpy_helper.from_array(np.ones((1, 8, 2), np.float32), "W"),
                                  numpy_helper.from_array(np.ones((1, 8, 2), np.float32), "R")]),
              ["lstm_clip.onnx", "node \"rnn\" (LSTM", "clip"]))
    seq = helper.make_tensor_sequence_value_info("xs", TensorProto.FLOAT, None)
    c.append(("sequence_input", model([helper.make_node("Identity", ["xs"], ["y"], name="id")], [seq],
                                      [helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, None)]),
              ["sequence_input.onnx", "graph input \"xs\"", "not a tensor"]))
    reshape = helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")
    c.append(("reshape_unknown_length", model([reshape], [vi("x", [2, 3]), vi("s", [None], TensorProto.INT64)],
                                              [vi("y", [None, None])]),
              ["reshape_unknown_length.onnx", "node \"reshape\" (Reshape", "unknown length"]))
    return c


def main():
    cli = sys.argv[1]
    workdir = tempfile.mkdtemp(prefix="onnx_errors_")
    failures = 0
    all_cases = cases(workdir)
    for name, content, expect in all_cases:
        path = os.path.join(workdir, name + ".onnx")
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.SerializeToString())
        out = os.path.join(workdir, name + ".wg")
        proc = subprocess.run([cli, "import", path, "-o", out], capture_output=True, text=True, timeout=120)
        err = proc.stderr.replace(workdir + "/", "")
        missing = [e for e in expect if e not in err]
        bad = proc.returncode != 1 or missing or os.path.exists(out)
        if bad:
            failures += 1
            print(f"FAIL {name}: exit {proc.returncode}, wrote {os.path.exists(out)}, missing {missing}\n  {err.strip()}")
        else:
            print(f"ok   {name}: {err.strip().splitlines()[0][:150]}")
    print(f"{len(all_cases)} bad models, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
