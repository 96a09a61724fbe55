"""The models tests/serving/model_server_test.py serves, built with onnx.helper from seeded weights, and what
NumPy says each computes (the tests' expected values)."""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SLOW_WIDTH, SLOW_DEPTH = 512, 30


def randn(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def save_model(path, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="model_server_test")
    m.ir_version = 8
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(m, path)


def vi(name, dims, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, dims)


def affine_weights(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)


def write_affine(path, seed=1):
    """y = Relu(x @ W + b), x [batch, 4] -> y [batch, 3]."""
    w, b = affine_weights(seed)
    save_model(path, [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["z"]),
                      helper.make_node("Relu", ["z"], ["y"])],
               [vi("x", ["batch", 4])], [vi("y", ["batch", 3])], {"W": w, "b": b})


def affine_ref(x, seed):
    w, b = affine_weights(seed)
    x = np.asarray(x, np.float64)
    return np.maximum(x @ w + b, 0), np.abs(x) @ np.abs(w) + np.abs(b)  # value, scale of its rounding


MULTI_W = randn(7, 3, 2)


def write_multi(path):
    """s = a + b [batch, 3]; p = (a * b) @ W [batch, 2]."""
    save_model(path, [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["a", "b"], ["ab"]),
                      helper.make_node("MatMul", ["ab", "W"], ["p"])],
               [vi("a", ["batch", 3]), vi("b", ["batch", 3])], [vi("s", ["batch", 3]), vi("p", ["batch", 2])],
               {"W": MULTI_W})


def multi_ref(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a + b, (a * b) @ MULTI_W, np.abs(a * b) @ np.abs(MULTI_W)


def write_counter(path):
    """y = x * 7 + (-3), int64 [batch, 2]."""
    save_model(path, [helper.make_node("Mul", ["x", "k"], ["x7"]), helper.make_node("Add", ["x7", "c"], ["y"])],
               [vi("x", ["batch", 2], TensorProto.INT64)], [vi("y", ["batch", 2], TensorProto.INT64)],
               {"k": np.array(7, np.int64), "c": np.array(-3, np.int64)})


SLOW_W = randn(11, SLOW_WIDTH, SLOW_WIDTH) / np.float32(np.sqrt(SLOW_WIDTH))
SLOW_OUT = randn(12, SLOW_WIDTH, 4)


def write_slow(path):
    """30 x (MatMul 512x512, Tanh), then MatMul 512x4: a row costs a few ms."""
    nodes, last = [], "x"
    for i in range(SLOW_DEPTH):
        nodes += [helper.make_node("MatMul", [last, "W"], [f"m{i}"]), helper.make_node("Tanh", [f"m{i}"], [f"t{i}"])]
        last = f"t{i}"
    nodes.append(helper.make_node("MatMul", [last, "Wout"], ["y"]))
    save_model(path, nodes, [vi("x", ["batch", SLOW_WIDTH])], [vi("y", ["batch", 4])], {"W": SLOW_W, "Wout": SLOW_OUT})


def slow_ref(x):
    h = np.asarray(x, np.float64)
    for _ in range(SLOW_DEPTH):
        h = np.tanh(h @ SLOW_W)
    return h @ SLOW_OUT
