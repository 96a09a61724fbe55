#!/usr/bin/env python3
"""Bad ONNX models through `weft import`: each must exit 1 with a message that
names the file and what is wrong (the node, the op, the missing file), and
write nothing. Then the refusals of `weft export`, `weft run --checkpoint` and
`weft train` with [model] output, each with its message.

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
    c.append(("opset18", relu_model(18), ["opset18.onnx", "ONNX opset 18 is not supported", "opsets 1 to 17"]))
    # Opsets before 7 go through ONNX's version converter first (an opset-6
    # model imports: onnx_ops_test.py).
    # A malformed old model is refused by ONNX's checker before the version
    # converter sees it (a node without an op type crashed the converter).
    c.append(("opset2_undefined_output", model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 3])],
                                               [vi("j", [2, 3])], opset=2),
              ["opset2_undefined_output.onnx", "graph output \"j\" is produced by no node"]))
    c.append(("opset1_no_op_type", model([helper.make_node("", ["x"], ["y"], name="blank")], [vi("x", [2, 3])],
                                         [vi("y", [2, 3])], opset=1),
              ["opset1_no_op_type.onnx", "ONNX's checker refuses the model", "op_type"]))
    gemm = helper.make_node("Gemm", ["x", "w"], ["y"], name="dense", alpha=2)  # an INT where a FLOAT belongs
    c.append(("attr_type", model([gemm], [vi("x", [2, 3]), vi("w", [3, 4])], [vi("y", [2, 4])]),
              ["attr_type.onnx", "checker", "alpha", "dense"]))
    c.append(("dangling", model([helper.make_node("Relu", ["nowhere"], ["y"], name="relu")], [vi("x", [2, 3])],
                                [vi("y", [2, 3])]), ["dangling.onnx", "nowhere", "relu"]))
    c.append(("shapes", model([helper.make_node("Add", ["a", "b"], ["y"], name="sum")],
                              [vi("a", [2, 3]), vi("b", [4, 5])], [vi("y", [2, 3])]),
              ["shapes.onnx", "node \"sum\" (Add", "[2,3] and [4,5] cannot be broadcast"]))
    c.append(("declared_shape", model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 3])],
                                      [vi("y", [4, 5])]),
              ["declared_shape.onnx", "ONNX's shape inference refuses the model", "relu"]))
    # Found by the fuzzer: ONNX 1.12's own shape inference crashes on these.
    w4 = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "w")
    c.append(("conv_rank", model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], [vi("x", [65, 8, 8])],
                                 [vi("y", [1, 2, 6, 6])], [w4]),
              ["conv_rank.onnx", "node \"conv\" (Conv", "a 2-D Conv takes an input of rank 4"]))
    c.append(("conv_stride0", model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[0, 1])],
                                    [vi("x", [1, 3, 8, 8])], [vi("y", [1, 2, 6, 6])], [w4]),
              ["conv_stride0.onnx", "node \"conv\" (Conv): attr \"strides\" must be positive"]))
    unsupported = [helper.make_node("LpNormalization", ["x"], ["d1"], name="lp_a"),
                   helper.make_node("LpNormalization", ["x"], ["d2"], name="lp_b"),
                   helper.make_node("Relu", ["x"], ["r"], name="fine"),
                   helper.make_node("StringNormalizer", ["s"], ["s2"], name="norm"),
                   helper.make_node("FusedThing", ["x"], ["f"], name="custom", domain="com.example")]
    m = model(unsupported, [vi("x", [3, 3]), vi("s", [2], TensorProto.STRING)],
              [vi("d1", [3, 3]), vi("d2", [3, 3]), vi("r", [3, 3]), vi("s2", [2], TensorProto.STRING), vi("f", [3, 3])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    c.append(("unsupported", m, ["unsupported.onnx", "3 op types (4 nodes) cannot be imported",
                                 "LpNormalization x2 (first: node \"lp_a\")", "StringNormalizer x1 (first: node \"norm\")",
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
    # Control flow, Einsum and Resize: what the importer refuses, by name.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Relu", ["v"], ["v_out"]),
         helper.make_node("Identity", ["v_out"], ["scan"])], "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("v", [2, 3])],
        [vi("cond_out", [], TensorProto.BOOL), vi("v_out", [2, 3]), vi("scan", [None, 3])])
    loop = helper.make_node("Loop", ["m", "", "x"], ["v_final", "scans"], name="loop", body=body)
    c.append(("loop_scan_shape", model([loop], [vi("x", [2, 3])], [vi("v_final", [2, 3]), vi("scans", [None, 2, 3])],
                                       [numpy_helper.from_array(np.int64(3), "m")]),
              ["loop_scan_shape.onnx", "node \"loop\" (Loop", "scan output \"scan\"", "[?,3]",
               "needs every dimension of the body's output declared"]))
    bad_body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
                                 [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL)],
                                 [vi("cond_out", [], TensorProto.BOOL)])
    inner = helper.make_node("Loop", ["m", "", "x"], ["v_final"], name="loop", body=bad_body)
    c.append(("loop_body_arity", model([inner], [vi("x", [2, 3])], [vi("v_final", [2, 3])],
                                       [numpy_helper.from_array(np.int64(3), "m")]),
              ["loop_body_arity.onnx", "node \"loop\" (Loop", "the body has 2 inputs and 1 outputs; with 1 loop-carried values it needs 3 inputs"]))
    sub_bad = helper.make_graph([helper.make_node("Add", ["x", "nothing"], ["t"], name="inner_add")], "then", [],
                                [vi("t", [2, 3])])
    sub_ok = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="inner_neg")], "else", [], [vi("e", [2, 3])])
    c.append(("if_dangling", model([helper.make_node("If", ["p"], ["y"], name="branch", then_branch=sub_bad,
                                                     else_branch=sub_ok)],
                                   [vi("p", [], TensorProto.BOOL), vi("x", [2, 3])], [vi("y", [2, 3])]),
              ["if_dangling.onnx", "nothing"]))
    diag_then = helper.make_graph([helper.make_node("Einsum", ["x"], ["t"], name="diag", equation="ii->i")], "then", [],
                                  [vi("t", [3])])
    neg_else = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], name="rows", keepdims=0,
                                                   axes=[1])], "else", [], [vi("e", [3])])
    c.append(("if_nested_error", model([helper.make_node("If", ["p"], ["y"], name="branch", then_branch=diag_then,
                                                         else_branch=neg_else)],
                                       [vi("p", [], TensorProto.BOOL), vi("x", [3, 3])], [vi("y", [3])], opset=12),
              ["if_nested_error.onnx", "node \"branch\" (If, 1 of 1)", "node \"diag\" (Einsum, 1 of 1) of subgraph \"then\"",
               "(a diagonal)"]))
    # Found in review: a recurrent layer's weights inside a Loop body cannot be variables; B of the wrong
    # direction count; a Reshape 0 past the input's rank.
    gru_body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("GRU", ["step_x", "W", "R"], ["", "h_next"], name="decoder", hidden_size=4,
                          initial_h="h"),
         helper.make_node("Reshape", ["h_next", "h_shape"], ["h_out"])], "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("h", [1, 1, 4])],
        [vi("cond_out", [], TensorProto.BOOL), vi("h_out", [1, 1, 4])])
    for node in gru_body.node:
        if node.op_type == "GRU":
            del node.input[:]
            node.input.extend(["step_x", "W", "R", "", "", "h"])
            del node.attribute[:]
            node.attribute.extend([helper.make_attribute("hidden_size", 4)])
    c.append(("loop_gru_variables",
              model([helper.make_node("Loop", ["m", "", "h0"], ["h_final"], name="decode", body=gru_body)],
                    [vi("h0", [1, 1, 4]), vi("step_x", [1, 1, 3])], [vi("h_final", [1, 1, 4])],
                    [numpy_helper.from_array(np.int64(3), "m"),
                     numpy_helper.from_array(np.ones((1, 12, 3), np.float32), "W"),
                     numpy_helper.from_array(np.ones((1, 12, 4), np.float32), "R"),
                     numpy_helper.from_array(np.array([1, 1, 4], np.int64), "h_shape")]),
              ["loop_gru_variables.onnx", "node \"decode\" (Loop", "node \"decoder\" (GRU, 2 of 3) of subgraph \"body\"",
               "inside an If, Loop or Scan body can only be constants", "--freeze"]))
    gru = helper.make_node("GRU", ["x", "W", "R", "B"], ["y"], name="rnn", hidden_size=4, direction="bidirectional")
    c.append(("gru_bias_dirs", model([gru], [vi("x", [2, 1, 3])], [vi("y", [2, 2, 1, 4])],
                                     [numpy_helper.from_array(np.ones((2, 12, 3), np.float32), "W"),
                                      numpy_helper.from_array(np.ones((2, 12, 4), np.float32), "R"),
                                      numpy_helper.from_array(np.ones((1, 24), np.float32), "B")]),
              ["gru_bias_dirs.onnx", "node \"rnn\" (GRU", "B [1,24] do not fit hidden_size 4 and 2 direction(s)"]))
    reshape0 = helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")
    c.append(("reshape_zero_past_rank", model([reshape0], [vi("x", [None, 6])], [vi("y", [None, None, None])],
                                              [numpy_helper.from_array(np.array([0, -1, 0], np.int64), "s")]),
              ["reshape_zero_past_rank.onnx", "node \"reshape\" (Reshape", "shape[2] is 0",
               "has rank 2 (set allowzero for an empty dimension)"]))
    c.append(("einsum_diagonal", model([helper.make_node("Einsum", ["x"], ["y"], name="diag", equation="ii->i")],
                                       [vi("x", [3, 3])], [vi("y", [3])], opset=12),
              ["einsum_diagonal.onnx", "node \"diag\" (Einsum", "twice in one operand (a diagonal)"]))
    c.append(("einsum_rank", model([helper.make_node("Einsum", ["x", "w"], ["y"], name="mix", equation="ij,jk->ik")],
                                   [vi("x", [3, 3, 3]), vi("w", [3, 4])], [vi("y", [3, 4])], opset=12),
              ["einsum_rank.onnx", "node \"mix\" (Einsum", "names 2 axes; the input has rank 3"]))
    # Found by the fuzzer: operands whose contracted sizes differ, and a scale that overflows.
    c.append(("einsum_sizes", model([helper.make_node("Einsum", ["a", "b", "d"], ["y"], name="chain",
                                                      equation="ij,jk,kl->il")],
                                    [vi("a", [2, 35]), vi("b", [3, 4]), vi("d", [4, 5])], [vi("y", [2, 5])], opset=12),
              ["einsum_sizes.onnx", "node \"chain\" (Einsum", "35", "3"]))
    roi = numpy_helper.from_array(np.zeros(0, np.float32), "roi")
    crop = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], name="resize",
                            coordinate_transformation_mode="tf_crop_and_resize")
    c.append(("resize_crop", model([crop], [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 8, 8])],
                                   [roi, numpy_helper.from_array(np.float32([1, 1, 2, 2]), "scales")], opset=13),
              ["resize_crop.onnx", "node \"resize\" (Resize", "tf_crop_and_resize"]))
    c.append(("resize_huge", model([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], name="resize")],
                                   [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 4, None])],
                                   [roi, numpy_helper.from_array(np.float32([1, 1, 1, 1e20]), "scales")], opset=13),
              ["resize_huge.onnx", "node \"resize\" (Resize", "interpolation matrix", "at most 16777216"]))
    c.append(("resize_mode", model([helper.make_node("Resize", ["x", "roi", "scales"], ["y"], name="resize",
                                                     mode="area")],
                                   [vi("x", [1, 1, 4, 4])], [vi("y", [1, 1, 8, 8])],
                                   [roi, numpy_helper.from_array(np.float32([1, 1, 2, 2]), "scales")], opset=13),
              ["resize_mode.onnx", "node \"resize\" (Resize", "mode \"area\" is not one of nearest, linear, cubic"]))
    return c


def main():
    cli = os.path.abspath(sys.argv[1])
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
    failures += other_errors(cli, workdir)
    print(f"{len(all_cases)} bad models and the export, restore and loss errors: {failures} failed")
    return 1 if failures else 0


ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODELS = os.path.join(ROOT, "configs", "models")


def other_errors(cli, workdir):
    """`weft export`, `weft run --checkpoint`, `weft train` with [model] output."""
    onnx.save(model([helper.make_node("Gemm", ["x", "w"], ["logits"], name="dense"),
                     helper.make_node("ReduceSum", ["logits", "axes"], ["sums"], name="sum", keepdims=0)],
                    [vi("x", [None, 4])], [vi("logits", [None, 3]), vi("sums", [None])],
                    [numpy_helper.from_array(np.ones((4, 3), np.float32), "w"),
                     numpy_helper.from_array(np.array([1], np.int64), "axes")]),
              os.path.join(workdir, "dense.onnx"))
    np.save(os.path.join(workdir, "x.npy"), np.ones((5, 4), np.float32))
    np.save(os.path.join(workdir, "y.npy"), np.zeros(5, np.int64))

    def config(name, model_section):
        path = os.path.join(workdir, name + ".toml")
        with open(path, "w") as f:
            f.write(f"""[model]\n{model_section}\ninit = "init"\n[data]\nformat = "npy"\n"""
                    f"""train_images = "x.npy"\ntrain_labels = "y.npy"\n[training]\nbatch_size = 5\nsteps = 1\n"""
                    f"""[optimizer]\nname = "sgd"\nlearning_rate = 0.01\n[checkpoint]\ndir = "ckpt_{name}"\n""")
        return path

    cases = [
        ("export to a file that is not .onnx", ["export", os.path.join(MODELS, "mnist_mlp.wgt"), "-o",
                                                 os.path.join(workdir, "mlp.txt")], ["must end in .onnx"]),
        ("export of ops ONNX does not have", ["export", os.path.join(MODELS, "char_lstm.wgt"), "-o",
                                              os.path.join(workdir, "lstm.onnx")],
         ["9 op types of the graph cannot be exported", "Enter x12 (first: node \"lstm/Enter\")",
          "Switch x4", "name the ones to export with --output"]),
        ("export of variables without values", ["export", os.path.join(MODELS, "fashion_cnn.wgt"), "--output",
                                                "logits", "-o", os.path.join(workdir, "cnn.onnx")],
         ["8 variables have no value to export", "conv1/kernel", "--checkpoint DIR"]),
        ("export of a tensor that does not exist", ["export", os.path.join(MODELS, "mnist_mlp.wgt"), "--output",
                                                    "logit", "-o", os.path.join(workdir, "mlp.onnx")],
         ["no node \"logit\"", "did you mean \"logits\""]),
        ("export with a checkpoint that does not exist", ["export", os.path.join(workdir, "dense.onnx"),
                                                          "--checkpoint", os.path.join(workdir, "nowhere"), "-o",
                                                          os.path.join(workdir, "d.onnx")],
         ["--checkpoint", "nowhere", "not found"]),
        ("run with a checkpoint that does not exist", ["run", os.path.join(workdir, "dense.onnx"), "--checkpoint",
                                                       os.path.join(workdir, "nowhere"), "--fetch", "logits"],
         ["--checkpoint", "nowhere", "not found"]),
        ("train with a loss Weft does not build",
         ["train", os.path.join(workdir, "dense.onnx"), "--config",
          config("hinge", 'images = "x"\noutput = "logits"\nloss = "hinge"')],
         ["[model] loss = \"hinge\" must name a built-in loss", "softmax_cross_entropy", "mse"]),
        ("train over an output that does not exist",
         ["train", os.path.join(workdir, "dense.onnx"), "--config",
          config("nope", 'images = "x"\noutput = "logit"\nloss = "softmax_cross_entropy"')],
         ["[model] output = \"logit\"", "did you mean \"logits\""]),
        ("train softmax_cross_entropy over a vector",
         ["train", os.path.join(workdir, "dense.onnx"), "--config",
          config("rank", 'images = "x"\noutput = "sums"\nloss = "softmax_cross_entropy"')],
         ["softmax_cross_entropy needs logits of shape [batch, classes]", "the output is [?]"]),
        ("train over a variable",
         ["train", os.path.join(workdir, "dense.onnx"), "--config",
          config("resource", 'images = "x"\noutput = "w"\nloss = "mse"')],
         ["[model] output = \"w\"", "the output is resource; a loss needs f32 or f64"]),
    ]
    failures = 0
    for label, args, expect in cases:
        proc = subprocess.run([cli] + args, capture_output=True, text=True, timeout=300, cwd=workdir)
        err = proc.stderr.replace(workdir + "/", "")
        missing = [e for e in expect if e not in err]
        if proc.returncode != 1 or missing:
            failures += 1
            print(f"FAIL {label}: exit {proc.returncode}, missing {missing}\n  {err.strip()}")
        else:
            print(f"ok   {label}: {err.strip().splitlines()[0][:150]}")
    return failures


if __name__ == "__main__":
    sys.exit(main())
