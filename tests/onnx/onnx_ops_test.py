#!/usr/bin/env python3
"""The ONNX importer op by op: single-node ONNX models (built with onnx.helper)
run through `weft run`, compared with NumPy computing the ONNX operator's
definition directly (the expected values never come from Weft).

    onnx_ops_test.py WEFT_CLI [--keep DIR] [-k SUBSTRING]

Cases of one opset go into one model (one node per case, its own inputs and
outputs), run by one `weft run`; when the model does not import, each case
runs alone so that the failure names the case. Then each opset's model goes
through `weft import --freeze`, `weft export` and `weft run` of the export,
which must give the same answers (all but the cases ONNX cannot hold).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx_refs import (conv2d, conv_transpose2d, gru_ref, lstm_ref, pool2d, resize_ref, rnn_ref, sigmoid, softmax,
                       softmax_legacy)

rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# --- Cases --------------------------------------------------------------------------


class Case:
    def __init__(self, name, op, inputs, expected, attrs=None, opset=17, consts=None, rtol=1e-5, atol=1e-5,
                 outputs=None, node_inputs=None):
        self.name, self.op, self.inputs, self.attrs, self.opset = name, op, inputs, attrs or {}, opset
        self.expected = expected if isinstance(expected, list) else [expected]
        self.consts = consts or {}  # input index -> array given as an initializer
        self.rtol, self.atol = rtol, atol
        self.outputs = outputs  # output slots to name (None: one per expected)
        # How many of the inputs the node takes; the rest are graph inputs its subgraphs read by name.
        self.node_inputs = node_inputs


def cases():
    c = []
    x = f32(2, 3, 4)
    for op, fn in [("Relu", lambda a: np.maximum(a, 0)), ("Sigmoid", sigmoid), ("Tanh", np.tanh),
                   ("Exp", np.exp), ("Abs", np.abs), ("Neg", np.negative), ("Floor", np.floor),
                   ("Ceil", np.ceil), ("Sin", np.sin), ("Cos", np.cos), ("Sign", np.sign),
                   ("Softplus", lambda a: np.log1p(np.exp(a))), ("Softsign", lambda a: a / (1 + np.abs(a)))]:
        c.append(Case(op.lower(), op, [x], fn(x).astype(np.float32)))
    pos = np.abs(f32(3, 4)) + 0.1
    c.append(Case("log", "Log", [pos], np.log(pos)))
    c.append(Case("sqrt", "Sqrt", [pos], np.sqrt(pos)))
    c.append(Case("reciprocal", "Reciprocal", [pos], 1 / pos))
    r = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.4], np.float32)
    c.append(Case("round_half_even", "Round", [r], np.round(r)))
    c.append(Case("leaky_relu", "LeakyRelu", [x], np.where(x > 0, x, 0.1 * x), {"alpha": 0.1}))
    c.append(Case("elu_alpha", "Elu", [x], np.where(x > 0, x, 0.5 * np.expm1(x)), {"alpha": 0.5}))
    c.append(Case("elu", "Elu", [x], np.where(x > 0, x, np.expm1(x))))
    c.append(Case("selu", "Selu", [x], np.where(x > 0, 1.0507009873554805 * x,
                                                1.0507009873554805 * 1.6732632423543772 * np.expm1(x)), rtol=1e-5))
    c.append(Case("hard_sigmoid", "HardSigmoid", [x], np.clip(0.2 * x + 0.5, 0, 1)))
    c.append(Case("hard_swish", "HardSwish", [x], x * np.clip(x / 6 + 0.5, 0, 1), opset=14))
    slope = f32(3, 1)
    c.append(Case("prelu", "PRelu", [x, slope], np.where(x > 0, x, x * slope)))
    a, b = f32(2, 3, 4), f32(3, 1)
    for op, fn in [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)]:
        c.append(Case(op.lower() + "_broadcast", op, [a, b], fn(a, b).astype(np.float32)))
    c.append(Case("pow", "Pow", [pos, np.float32(1.7)], np.power(pos, 1.7).astype(np.float32), consts={1: None}))
    c.append(Case("pow_square", "Pow", [x, np.float32(2)], x * x, consts={1: None}))
    ia, ib = np.array([7, -7, 7, -7], np.int64), np.array([3, 3, -3, -3], np.int64)
    c.append(Case("mod_int", "Mod", [ia, ib], np.mod(ia, ib)))
    c.append(Case("mod_fmod", "Mod", [a, b], np.fmod(a, b).astype(np.float32), {"fmod": 1}))
    # fmod exactly, where x - y * trunc(x / y) is not (1e8 = 33333333 * 3 + 1 in f32), and with infinite y.
    fx = np.array([1e8, -7, 7, -5.5, 5.5, -0.0, 16777215, -3], np.float32)
    fy = np.array([3, 3, -3, 2, -np.inf, 3, 7, np.inf], np.float32)
    c.append(Case("mod_fmod_exact", "Mod", [fx, fy], np.fmod(fx, fy), {"fmod": 1}, rtol=0, atol=0))
    c3 = f32(4)
    c.append(Case("max3", "Max", [a, b, c3], np.maximum(np.maximum(a, b), c3)))
    c.append(Case("min2", "Min", [a, b], np.minimum(a, b)))
    c.append(Case("mean2", "Mean", [a, b], ((a + b) / 2).astype(np.float32)))
    c.append(Case("sum3", "Sum", [a, b, a], (a + b + a).astype(np.float32)))
    for op, fn in [("Equal", np.equal), ("Less", np.less), ("Greater", np.greater),
                   ("LessOrEqual", np.less_equal), ("GreaterOrEqual", np.greater_equal)]:
        ra, rb = np.round(a), np.round(b)
        c.append(Case(op.lower(), op, [ra, rb], fn(ra, rb)))
    ba, bb = a > 0, b > 0
    c.append(Case("and", "And", [ba, bb], ba & bb))
    c.append(Case("xor", "Xor", [ba, bb], ba ^ bb))
    c.append(Case("not", "Not", [ba], ~ba))
    c.append(Case("where", "Where", [ba, a, b], np.where(ba, a, b)))
    c.append(Case("clip_inputs", "Clip", [x, np.float32(-0.5), np.float32(0.7)], np.clip(x, -0.5, 0.7),
                  consts={1: None, 2: None}))
    c.append(Case("clip_relu6", "Clip", [x * 4, np.float32(0), np.float32(6)], np.clip(x * 4, 0, 6),
                  consts={1: None, 2: None}))
    c.append(Case("clip_min_only", "Clip", [x, np.float32(0.1)], np.maximum(x, 0.1), consts={1: None}))
    c.append(Case("clip_attrs", "Clip", [x], np.clip(x, -0.2, 0.3), {"min": -0.2, "max": 0.3}, opset=10))
    # Quantization: ties round to even, values beyond int8 saturate, a
    # per-channel scale and zero point along axis 1.
    xq = np.array([[-300.0, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 300.0]], np.float32)
    c.append(Case("quantize_int8_saturate", "QuantizeLinear", [xq, np.float32(1.0), np.int8(-3)],
                  np.clip(np.round(xq / 1.0) - 3, -128, 127).astype(np.int8), consts={1: None, 2: None}, rtol=0, atol=0))
    xc, sc, zc = f32(2, 3, 4) * 50, np.array([0.5, 2.0, 0.25], np.float32), np.array([10, 128, 250], np.uint8)
    c.append(Case("quantize_per_channel", "QuantizeLinear", [xc, sc, zc],
                  np.clip(np.round(xc / sc[None, :, None]) + zc[None, :, None].astype(np.float32), 0, 255).astype(np.uint8),
                  consts={1: None, 2: None}, rtol=0, atol=0))
    qi = np.array([-128, -1, 0, 1, 127], np.int8)
    c.append(Case("dequantize_int8", "DequantizeLinear", [qi, np.float32(0.25), np.int8(-1)],
                  ((qi.astype(np.float32) + 1) * 0.25).astype(np.float32), consts={1: None, 2: None}))
    # Det of 3x3 matrices (the node tests have 2x2), ScatterND add, GatherND.
    m3 = f32(4, 3, 3)
    c.append(Case("det_3x3", "Det", [m3], np.linalg.det(m3.astype(np.float64)).astype(np.float32), rtol=1e-4,
                  atol=1e-5))
    dn, ind, upd = f32(4, 3), np.array([[1], [3], [1]], np.int64), f32(3, 3)
    want = dn.copy()
    np.add.at(want, ind[:, 0], upd)
    c.append(Case("scatternd_add_repeated", "ScatterND", [dn, ind, upd], want, {"reduction": "add"}, opset=16))
    want_mul = dn.copy()
    np.multiply.at(want_mul, ind[:, 0], upd)
    c.append(Case("scatternd_mul_repeated", "ScatterND", [dn, ind, upd], want_mul, {"reduction": "mul"}, opset=16,
                  rtol=1e-5, atol=1e-6))
    c.append(Case("gathernd_pairs", "GatherND", [dn, np.array([[0, 2], [3, 1]], np.int64)], dn[[0, 3], [2, 1]]))
    # DFT: onesided of a real signal, and a complex one along axis 2 (NumPy's FFTs).
    sig = f32(2, 8, 3, 1)
    c.append(Case("dft_onesided", "DFT", [sig], np.stack([np.fft.rfft(sig[..., 0], axis=1).real,
                                                         np.fft.rfft(sig[..., 0], axis=1).imag], -1).astype(np.float32),
                  {"onesided": 1}, rtol=1e-4, atol=1e-5))
    zc = f32(2, 3, 5, 2)
    spec = np.fft.fft(zc[..., 0] + 1j * zc[..., 1], axis=2)
    c.append(Case("dft_complex_axis2", "DFT", [zc], np.stack([spec.real, spec.imag], -1).astype(np.float32),
                  {"axis": 2}, rtol=1e-4, atol=1e-5))
    # Opsets before 7 through ONNX's version converter.
    c.append(Case("relu_opset6", "Relu", [x], np.maximum(x, 0), opset=6))
    c.append(Case("elu_opset6", "Elu", [x], np.where(x > 0, x, 0.5 * (np.exp(x) - 1)).astype(np.float32),
                  {"alpha": 0.5}, opset=6))
    c.append(Case("softsign_opset1", "Softsign", [x], (x / (1 + np.abs(x))).astype(np.float32), opset=1))
    # Integer Clip without a bound keeps the dtype's whole range (a float
    # bound once wrapped to -1 for int8: test_clip_default_int8_*).
    for dt in (np.int8, np.uint8, np.int32, np.int64):
        info = np.iinfo(dt)
        xi = np.array([info.min, info.min + 1, 0, 1, info.max - 1, info.max], dt)
        c.append(Case(f"clip_default_{dt.__name__}", "Clip", [xi], xi.copy(), rtol=0, atol=0))
        c.append(Case(f"clip_min_only_{dt.__name__}", "Clip", [xi, dt(1)], np.maximum(xi, dt(1)), consts={1: None},
                      rtol=0, atol=0))
    c.append(Case("cast_f_to_i", "Cast", [x * 3], (x * 3).astype(np.int32), {"to": TensorProto.INT32}))
    c.append(Case("isnan", "IsNaN", [np.array([1, np.nan, np.inf], np.float32)], np.array([0, 1, 0], bool)))
    c.append(Case("isinf_pos", "IsInf", [np.array([1, -np.inf, np.inf], np.float32)], np.array([0, 0, 1], bool),
                  {"detect_negative": 0}))
    # Matrix products.
    m1, m2 = f32(3, 4), f32(4, 5)
    c.append(Case("matmul_2d", "MatMul", [m1, m2], m1 @ m2))
    b3, m3 = f32(2, 3, 4), f32(2, 4, 5)
    c.append(Case("matmul_batch", "MatMul", [b3, m3], b3 @ m3))
    c.append(Case("matmul_3d_2d", "MatMul", [b3, m2], b3 @ m2))
    v = f32(4)
    c.append(Case("matmul_1d_right", "MatMul", [m1, v], m1 @ v))
    c.append(Case("matmul_1d_left", "MatMul", [f32(3), m1], None))
    c[-1].expected = [c[-1].inputs[0] @ m1]
    ga, gb, gc = f32(4, 3), f32(5, 4), f32(5)
    c.append(Case("gemm_trans", "Gemm", [ga, gb, gc], (0.5 * ga.T @ gb.T + 2.0 * gc).astype(np.float32),
                  {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}))
    gm = f32(3, 5)
    c.append(Case("gemm_matrix_c", "Gemm", [f32(3, 4), m2, gm], None))
    c[-1].expected = [c[-1].inputs[0] @ m2 + gm]
    # Convolution and pooling.
    xi = f32(2, 3, 9, 8)
    wc = f32(4, 3, 3, 3)
    bc = f32(4)
    c.append(Case("conv_same", "Conv", [xi, wc, bc], conv2d(xi, wc, bc, pads=(1, 1, 1, 1)),
                  {"pads": [1, 1, 1, 1]}, consts={1: None, 2: None}, rtol=1e-4, atol=1e-4))
    c.append(Case("conv_stride2_pads", "Conv", [xi, wc], conv2d(xi, wc, strides=(2, 2), pads=(1, 2, 1, 0)),
                  {"pads": [1, 2, 1, 0], "strides": [2, 2]}, consts={1: None}, rtol=1e-4, atol=1e-4))
    c.append(Case("conv_dilated", "Conv", [xi, wc], conv2d(xi, wc, dilations=(2, 1)),
                  {"dilations": [2, 1]}, consts={1: None}, rtol=1e-4, atol=1e-4))
    c.append(Case("conv_computed_weights", "Conv", [xi, wc], conv2d(xi, wc), {}, rtol=1e-4, atol=1e-4))
    xg = f32(1, 4, 6, 6)
    wg = f32(6, 2, 3, 3)
    c.append(Case("conv_groups", "Conv", [xg, wg], conv2d(xg, wg, group=2), {"group": 2}, consts={1: None},
                  rtol=1e-4, atol=1e-4))
    wd = f32(8, 1, 3, 3)
    c.append(Case("conv_depthwise", "Conv", [xg, wd], conv2d(xg, wd, pads=(1, 1, 1, 1), group=4),
                  {"group": 4, "pads": [1, 1, 1, 1]}, consts={1: None}, rtol=1e-4, atol=1e-4))
    c.append(Case("conv_auto_pad_same_lower", "Conv", [xi, wc[:, :, :2, :2]], None,
                  {"auto_pad": "SAME_LOWER"}, consts={1: None}, rtol=1e-4, atol=1e-4))
    c[-1].expected = [conv2d(xi, wc[:, :, :2, :2], pads=(1, 1, 0, 0))]
    x1 = f32(2, 3, 10)
    w1 = f32(4, 3, 3)
    c.append(Case("conv_1d", "Conv", [x1, w1], conv2d(x1[:, :, None, :], w1[:, :, None, :], pads=(0, 1, 0, 1))[:, :, 0, :],
                  {"pads": [1, 1]}, consts={1: None}, rtol=1e-4, atol=1e-4))
    # ConvTranspose (decoders): strides, pads, output_padding, dilations,
    # groups with a bias, 1-D; weights as initializers and as inputs.
    xt, wt, bt = f32(2, 4, 5, 6), f32(4, 3, 3, 3), f32(3)
    c.append(Case("convtranspose_stride_pads", "ConvTranspose", [xt, wt, bt],
                  conv_transpose2d(xt, wt, bt, strides=(2, 2), pads=(1, 0, 1, 2), output_padding=(1, 0)),
                  {"strides": [2, 2], "pads": [1, 0, 1, 2], "output_padding": [1, 0]}, consts={1: None, 2: None},
                  rtol=1e-4, atol=1e-4))
    c.append(Case("convtranspose_dilated", "ConvTranspose", [xt, wt],
                  conv_transpose2d(xt, wt, dilations=(2, 1)), {"dilations": [2, 1]}, rtol=1e-4, atol=1e-4))
    wtg = f32(4, 2, 3, 2)
    c.append(Case("convtranspose_groups", "ConvTranspose", [xt, wtg, f32(4)],
                  None, {"group": 2, "strides": [1, 2]}, consts={1: None}, rtol=1e-4, atol=1e-4))
    c[-1].expected = [conv_transpose2d(xt, wtg, c[-1].inputs[2], strides=(1, 2), group=2)]
    xt1, wt1 = f32(2, 3, 7), f32(3, 2, 4)
    c.append(Case("convtranspose_1d", "ConvTranspose", [xt1, wt1],
                  conv_transpose2d(xt1[:, :, None, :], wt1[:, :, None, :], strides=(1, 3), pads=(0, 1, 0, 1))[:, :, 0, :],
                  {"strides": [3], "pads": [1, 1]}, consts={1: None}, rtol=1e-4, atol=1e-4))
    c.append(Case("maxpool_pads", "MaxPool", [xi], pool2d(xi, (3, 3), (2, 2), (1, 1, 1, 1)),
                  {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}))
    c.append(Case("maxpool_ceil", "MaxPool", [xi], pool2d(xi, (2, 2), (2, 2), ceil=True),
                  {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}))
    c.append(Case("avgpool", "AveragePool", [xi], pool2d(xi, (2, 2), (2, 2), mode="avg"),
                  {"kernel_shape": [2, 2], "strides": [2, 2]}))
    c.append(Case("avgpool_include_pad", "AveragePool", [xi],
                  pool2d(xi, (3, 3), (1, 1), (1, 1, 1, 1), mode="avg", count_include_pad=True),
                  {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}))
    c.append(Case("avgpool_same_exclude_pad", "AveragePool", [xi],
                  pool2d(xi, (3, 3), (1, 1), (1, 1, 1, 1), mode="avg", count_include_pad=False),
                  {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}))
    c.append(Case("global_avg", "GlobalAveragePool", [xi], xi.mean(axis=(2, 3), keepdims=True)))
    c.append(Case("global_max", "GlobalMaxPool", [xi], xi.max(axis=(2, 3), keepdims=True)))
    scale, bias, mean, var = f32(3), f32(3), f32(3), np.abs(f32(3)) + 0.5
    bn = (xi - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-3) * scale.reshape(1, 3, 1, 1) + \
        bias.reshape(1, 3, 1, 1)
    c.append(Case("batchnorm", "BatchNormalization", [xi, scale, bias, mean, var], bn.astype(np.float32),
                  {"epsilon": 1e-3}, consts={1: None, 2: None, 3: None, 4: None}, rtol=1e-4, atol=1e-5))
    m_ = xi.mean(axis=(2, 3), keepdims=True)
    v_ = xi.var(axis=(2, 3), keepdims=True)
    inorm = (xi - m_) / np.sqrt(v_ + 1e-5) * scale.reshape(1, 3, 1, 1) + bias.reshape(1, 3, 1, 1)
    c.append(Case("instance_norm", "InstanceNormalization", [xi, scale, bias], inorm.astype(np.float32),
                  rtol=1e-4, atol=1e-4))
    sq = np.pad(xi.astype(np.float64) ** 2, ((0, 0), (2, 2), (0, 0), (0, 0)))
    sums = sum(sq[:, k:k + 3] for k in range(5))
    c.append(Case("lrn", "LRN", [xi], (xi / (2.0 + 0.5 / 5 * sums) ** 0.6).astype(np.float32),
                  {"size": 5, "alpha": 0.5, "beta": 0.6, "bias": 2.0}, rtol=1e-5, atol=1e-6))
    sq2 = np.pad(xi.astype(np.float64) ** 2, ((0, 0), (0, 1), (0, 0), (0, 0)))
    c.append(Case("lrn_even_size", "LRN", [xi], (xi / (1.0 + 1e-4 / 2 * (sq2[:, 0:3] + sq2[:, 1:4])) ** 0.75)
                  .astype(np.float32), {"size": 2}, rtol=1e-5, atol=1e-6))
    ln_s, ln_b = f32(4), f32(4)
    lm, lv = x.mean(axis=-1, keepdims=True), x.var(axis=-1, keepdims=True)
    c.append(Case("layer_norm", "LayerNormalization", [x, ln_s, ln_b],
                  ((x - lm) / np.sqrt(lv + 1e-5) * ln_s + ln_b).astype(np.float32), rtol=1e-4, atol=1e-4))
    # Softmax: opset 13 one axis; before, the input flattened to 2-D at axis.
    c.append(Case("softmax_13", "Softmax", [x], softmax(x, 1), {"axis": 1}, opset=13))
    c.append(Case("softmax_11_axis1", "Softmax", [x], softmax_legacy(x, 1), {"axis": 1}, opset=11))
    c.append(Case("logsoftmax_11_default", "LogSoftmax", [x], softmax_legacy(x, 1, log=True), opset=11))
    c.append(Case("logsoftmax", "LogSoftmax", [x], np.log(softmax(x, -1))))
    # Shapes.
    c.append(Case("flatten", "Flatten", [xi], xi.reshape(2, -1)))
    c.append(Case("flatten_axis2", "Flatten", [xi], xi.reshape(6, -1), {"axis": 2}))
    c.append(Case("reshape_zero_minus1", "Reshape", [xi, np.array([0, -1, 8], np.int64)], xi.reshape(2, -1, 8),
                  consts={1: None}))
    c.append(Case("transpose", "Transpose", [xi], xi.transpose(0, 2, 3, 1), {"perm": [0, 2, 3, 1]}))
    c.append(Case("transpose_default", "Transpose", [x], x.transpose()))
    c.append(Case("unsqueeze_13", "Unsqueeze", [x, np.array([0, -1], np.int64)], x[None, ..., None],
                  consts={1: None}))
    c.append(Case("unsqueeze_11", "Unsqueeze", [x], x[:, None], {"axes": [1]}, opset=11))
    sq = f32(1, 3, 1, 2)
    c.append(Case("squeeze_13", "Squeeze", [sq, np.array([2], np.int64)], sq[:, :, 0], consts={1: None}))
    c.append(Case("squeeze_all", "Squeeze", [sq], sq.reshape(3, 2)))
    c.append(Case("squeeze_11", "Squeeze", [sq], sq[0], {"axes": [0]}, opset=11))
    c.append(Case("concat", "Concat", [a, f32(2, 1, 4)], None, {"axis": -2}))
    c[-1].expected = [np.concatenate([a, c[-1].inputs[1]], axis=-2)]
    c.append(Case("slice_13", "Slice", [xi, np.array([1, -1], np.int64), np.array([1000, -9], np.int64),
                                        np.array([2, 3], np.int64), np.array([1, -2], np.int64)],
                  xi[:, :, 1:1000, -1:-9:-2], consts={1: None, 2: None, 3: None, 4: None}))
    c.append(Case("slice_9", "Slice", [xi], xi[:, 1:2, :, -3:], {"starts": [1, -3], "ends": [2, 100], "axes": [1, 3]},
                  opset=9))
    c.append(Case("split_13", "Split", [xi, np.array([2, 6], np.int64)], [xi[:, :, :, :2], xi[:, :, :, 2:]],
                  {"axis": 3}, consts={1: None}))
    c.append(Case("split_equal", "Split", [xi], [xi[:, :, :, :4], xi[:, :, :, 4:]], {"axis": -1}))
    c.append(Case("split_11_attr", "Split", [xi], [xi[:, :1], xi[:, 1:]], {"axis": 1, "split": [1, 2]}, opset=11))
    g_idx = np.array([[0, -1], [1, 0]], np.int64)
    c.append(Case("gather", "Gather", [xi, g_idx], np.take(xi, g_idx, axis=1), {"axis": 1}, consts={1: None}))
    c.append(Case("gather_runtime_indices", "Gather", [x, np.array([2, 0], np.int64)], np.take(x, [2, 0], axis=2),
                  {"axis": 2}))
    c.append(Case("shape", "Shape", [xi], np.array(xi.shape, np.int64)))
    c.append(Case("shape_slice", "Shape", [xi], np.array(xi.shape[1:3], np.int64), {"start": 1, "end": -1},
                  opset=15))
    c.append(Case("size", "Size", [xi], np.array(xi.size, np.int64)))
    # Reshape to a shape fed at run time (not known at import), longer than the input's rank, with a 0 (copy).
    x23 = f32(2, 3)
    c.append(Case("reshape_computed_longer", "Reshape", [x23, np.array([0, 1, 3], np.int64)], x23.reshape(2, 1, 3)))
    c.append(Case("expand", "Expand", [b, np.array([2, 1, 5], np.int64)], np.broadcast_to(b, (2, 3, 5)),
                  consts={1: None}))
    c.append(Case("tile", "Tile", [a, np.array([1, 2, 1], np.int64)], np.tile(a, (1, 2, 1)), consts={1: None}))
    c.append(Case("pad_constant", "Pad", [x, np.array([0, 1, 2, 0, 0, 1], np.int64), np.float32(1.5)],
                  np.pad(x, ((0, 0), (1, 0), (2, 1)), constant_values=1.5), consts={1: None, 2: None}))
    c.append(Case("pad_reflect", "Pad", [x, np.array([0, 0, 2, 0, 0, 1], np.int64)],
                  np.pad(x, ((0, 0), (0, 0), (2, 1)), mode="reflect"), {"mode": "reflect"}, consts={1: None}))
    c.append(Case("pad_edge", "Pad", [x, np.array([0, 1, 1, 0, 1, 1], np.int64)],
                  np.pad(x, ((0, 0), (1, 1), (1, 1)), mode="edge"), {"mode": "edge"}, consts={1: None}))
    # Cropping (negative pads) and edge padding of more than one element go
    # through DynamicPad; pads, repeats, axes and slice bounds fed at run
    # time through the Dynamic* ops.
    c.append(Case("pad_crop", "Pad", [x, np.array([0, -1, 2, 0, 1, -1], np.int64)],
                  np.pad(x[:, 1:, :-1], ((0, 0), (0, 1), (2, 0))), consts={1: None}))
    c.append(Case("pad_edge_wide", "Pad", [x, np.array([0, 3, 1, 0, 2, 4], np.int64)],
                  np.pad(x, ((0, 0), (3, 2), (1, 4)), mode="edge"), {"mode": "edge"}, consts={1: None}))
    c.append(Case("pad_fed", "Pad", [x, np.array([1, 0, 2, 0, 1, 0], np.int64), np.float32(-2)],
                  np.pad(x, ((1, 0), (0, 1), (2, 0)), constant_values=-2)))
    c.append(Case("tile_fed", "Tile", [a, np.array([2, 1, 3], np.int64)], np.tile(a, (2, 1, 3))))
    c.append(Case("slice_fed", "Slice", [x, np.array([-1, 0], np.int64), np.array([-1000, 9], np.int64),
                                         np.array([2, 1], np.int64), np.array([-2, 2], np.int64)],
                  x[:, 0:9:2, -1:-1000:-2]))
    c.append(Case("reduce_sum_fed", "ReduceSum", [x, np.array([-1, 0], np.int64)], x.sum(axis=(0, 2))[None, :, None]))
    c.append(Case("unsqueeze_fed", "Unsqueeze", [a, np.array([-1, 1], np.int64)], a[:, None, :, :, None]))
    c.append(Case("pad_10_attr", "Pad", [x], np.pad(x, ((0, 0), (1, 0), (0, 2))), {"pads": [0, 1, 0, 0, 0, 2]},
                  opset=10))
    c.append(Case("constant_of_shape", "ConstantOfShape", [np.array([2, 3], np.int64)], np.full((2, 3), 7, np.int64),
                  {"value": numpy_helper.from_array(np.array([7], np.int64))}, consts={0: None}))
    c.append(Case("range", "Range", [np.int64(1), np.int64(10), np.int64(3)], np.arange(1, 10, 3)))
    c.append(Case("cumsum_reverse_exclusive", "CumSum", [x, np.int64(2)],
                  np.flip(np.cumsum(np.flip(x, 2), 2), 2) - x, {"reverse": 1, "exclusive": 1}, consts={1: None}))
    for op, fn in [("ReduceMean", np.mean), ("ReduceMax", np.max), ("ReduceMin", np.min), ("ReduceProd", np.prod)]:
        c.append(Case(op.lower(), op, [x], fn(x, axis=(0, 2), keepdims=True), {"axes": [0, -1]}))
    c.append(Case("reducesum_13", "ReduceSum", [x, np.array([1], np.int64)], x.sum(axis=1), {"keepdims": 0},
                  consts={1: None}))
    c.append(Case("reducesum_11", "ReduceSum", [x], x.sum(axis=1, keepdims=True), {"axes": [1]}, opset=11))
    c.append(Case("reducesum_all", "ReduceSum", [x], x.sum(keepdims=True)))
    c.append(Case("reducel2", "ReduceL2", [x], np.sqrt((x * x).sum(axis=2, keepdims=True)), {"axes": [2]}))
    c.append(Case("reducel1", "ReduceL1", [x], np.abs(x).sum(axis=2), {"axes": [2], "keepdims": 0}))
    c.append(Case("reducelogsumexp", "ReduceLogSumExp", [x * 30],
                  np.log(np.exp(x * 30 - (x * 30).max(2, keepdims=True)).sum(2)) + (x * 30).max(2),
                  {"axes": [2], "keepdims": 0}, rtol=1e-5, atol=1e-4))
    c.append(Case("argmax_keep", "ArgMax", [x], np.argmax(x, axis=1)[:, None], {"axis": 1}))
    ties = np.array([[1, 3, 3, 0], [2, 2, 1, 2]], np.float32)
    c.append(Case("argmax_last", "ArgMax", [ties], np.array([2, 3]), {"axis": 1, "keepdims": 0,
                                                                      "select_last_index": 1}))
    c.append(Case("argmin", "ArgMin", [x], np.argmin(x, axis=2), {"axis": -1, "keepdims": 0}))
    c.append(Case("identity", "Identity", [x], x))
    c.append(Case("dropout_inference", "Dropout", [x], x))
    # LSTM, forward and bidirectional, with and without initial states.
    t, bsz, inp, hid = 4, 2, 3, 5
    lx = f32(t, bsz, inp)
    lw, lr, lb = f32(1, 4 * hid, inp), f32(1, 4 * hid, hid), f32(1, 8 * hid)
    y, yh, yc = lstm_ref(lx, lw[0], lr[0], lb[0], np.zeros((bsz, hid), np.float32), np.zeros((bsz, hid), np.float32))
    c.append(Case("lstm", "LSTM", [lx, lw, lr, lb], [y[:, None].astype(np.float32), yh[None].astype(np.float32),
                                                     yc[None].astype(np.float32)],
                  {"hidden_size": hid}, consts={1: None, 2: None, 3: None}, rtol=1e-4, atol=1e-5))
    lw2, lr2, lb2 = f32(2, 4 * hid, inp), f32(2, 4 * hid, hid), f32(2, 8 * hid)
    h0, c0 = f32(2, bsz, hid), f32(2, bsz, hid)
    yf, hf, cf = lstm_ref(lx, lw2[0], lr2[0], lb2[0], h0[0], c0[0])
    yb, hb, cb = lstm_ref(lx, lw2[1], lr2[1], lb2[1], h0[1], c0[1], reverse=True)
    c.append(Case("lstm_bidirectional", "LSTM", [lx, lw2, lr2, lb2, None, h0, c0],
                  [np.stack([yf, yb], 1).astype(np.float32), np.stack([hf, hb]).astype(np.float32)],
                  {"hidden_size": hid, "direction": "bidirectional"}, consts={1: None, 2: None, 3: None},
                  rtol=1e-4, atol=1e-5))
    return c

# --- Control flow: If, Loop, Scan (subgraphs read the case's inputs by name) -------------


def vi(name, arr_or_dtype, shape=None):
    if shape is None:
        arr = np.asarray(arr_or_dtype)
        return helper.make_tensor_value_info(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[arr.dtype], arr.shape)
    return helper.make_tensor_value_info(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(arr_or_dtype)], shape)


def control_flow_cases():
    c = []
    x = f32(2, 3)
    # If: the branches read the node's outer input x; a Constant inside one.
    for tag, flag in [("true", True), ("false", False)]:
        name = f"if_{tag}"
        xin = f"{name}_in1"
        then_g = helper.make_graph(
            [helper.make_node("Constant", [], [f"{name}_two"], value=numpy_helper.from_array(np.float32(2))),
             helper.make_node("Mul", [xin, f"{name}_two"], [f"{name}_t"])], f"{name}_then", [],
            [vi(f"{name}_t", np.float32, (2, 3))])
        else_g = helper.make_graph([helper.make_node("Neg", [xin], [f"{name}_e"])], f"{name}_else", [],
                                   [vi(f"{name}_e", np.float32, (2, 3))])
        c.append(Case(name, "If", [np.array([flag]), x], x * 2 if flag else -x,
                      {"then_branch": then_g, "else_branch": else_g}, node_inputs=1))
    # If whose condition is an initializer: imported as the chosen branch only.
    name = "if_known"
    then_g = helper.make_graph([helper.make_node("Abs", [f"{name}_in1"], [f"{name}_t"])], f"{name}_then", [],
                               [vi(f"{name}_t", np.float32, (2, 3))])
    else_g = helper.make_graph([helper.make_node("Neg", [f"{name}_in1"], [f"{name}_e"])], f"{name}_else", [],
                               [vi(f"{name}_e", np.float32, (2, 3))])
    c.append(Case(name, "If", [np.array(True), x], np.abs(x), {"then_branch": then_g, "else_branch": else_g},
                  consts={0: None}, node_inputs=1))
    # Loop with a trip count: v += x (read from outside) 5 times; the scan output stacks each v.
    name = "loop_trips"
    v0 = f32(2, 3)
    body = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_cond"], [f"{name}_cond_out"]),
         helper.make_node("Add", [f"{name}_v", f"{name}_in3"], [f"{name}_v_out"]),
         helper.make_node("Identity", [f"{name}_v_out"], [f"{name}_scan"])], f"{name}_body",
        [vi(f"{name}_i", np.int64, ()), vi(f"{name}_cond", np.bool_, ()), vi(f"{name}_v", np.float32, (2, 3))],
        [vi(f"{name}_cond_out", np.bool_, ()), vi(f"{name}_v_out", np.float32, (2, 3)),
         vi(f"{name}_scan", np.float32, (2, 3))])
    steps = [v0 + (i + 1) * x for i in range(5)]
    c.append(Case(name, "Loop", [np.int64(5), None, v0, x], [steps[-1], np.stack(steps)], {"body": body},
                  consts={0: None}, node_inputs=3))
    # Loop with a condition and no trip count: double v while its sum stays under 100; the iteration
    # number is a second loop-carried value's source.
    name = "loop_cond"
    v0 = np.abs(f32(3)) + 0.5
    body = helper.make_graph(
        [helper.make_node("Mul", [f"{name}_v", f"{name}_two"], [f"{name}_v_out"]),
         helper.make_node("ReduceSum", [f"{name}_v_out"], [f"{name}_sum"], keepdims=0),
         helper.make_node("Less", [f"{name}_sum", f"{name}_limit"], [f"{name}_cond_out"]),
         helper.make_node("Identity", [f"{name}_i"], [f"{name}_n_out"])], f"{name}_body",
        [vi(f"{name}_i", np.int64, ()), vi(f"{name}_cond", np.bool_, ()), vi(f"{name}_v", np.float32, (3,)),
         vi(f"{name}_n", np.int64, ())],
        [vi(f"{name}_cond_out", np.bool_, ()), vi(f"{name}_v_out", np.float32, (3,)),
         vi(f"{name}_n_out", np.int64, ())],
        [numpy_helper.from_array(np.float32(2), f"{name}_two"), numpy_helper.from_array(np.float32(100), f"{name}_limit")])
    v, n, i = v0.copy(), np.int64(-1), 0
    while True:
        v = v * 2
        n = np.int64(i)
        i += 1
        if not v.sum() < 100:
            break
    c.append(Case(name, "Loop", [None, np.array(True), v0, np.int64(-1)], [v.astype(np.float32), n],
                  {"body": body}))
    # A loop-carried value whose body output declares no shape may change size: a row appended per iteration.
    name = "loop_growing"
    row = f32(1, 4)
    body = helper.make_graph(
        [helper.make_node("Identity", [f"{name}_cond"], [f"{name}_cond_out"]),
         helper.make_node("Concat", [f"{name}_acc", f"{name}_in3"], [f"{name}_acc_out"], axis=0)], f"{name}_body",
        [vi(f"{name}_i", np.int64, ()), vi(f"{name}_cond", np.bool_, ()), vi(f"{name}_acc", np.float32, (None, 4))],
        [vi(f"{name}_cond_out", np.bool_, ()),
         helper.make_tensor_value_info(f"{name}_acc_out", TensorProto.FLOAT, None)])
    c.append(Case(name, "Loop", [np.int64(5), None, np.zeros((0, 4), np.float32), row], np.repeat(row, 5, 0),
                  {"body": body}, consts={0: None}, node_inputs=3))
    # Scan: a running sum over the rows of X (the state), and the sums stacked.
    name = "scan_cumsum"
    xs = f32(4, 3)
    s0 = f32(3)
    body = helper.make_graph(
        [helper.make_node("Add", [f"{name}_s", f"{name}_x"], [f"{name}_s_out"]),
         helper.make_node("Identity", [f"{name}_s_out"], [f"{name}_y"])], f"{name}_body",
        [vi(f"{name}_s", np.float32, (3,)), vi(f"{name}_x", np.float32, (3,))],
        [vi(f"{name}_s_out", np.float32, (3,)), vi(f"{name}_y", np.float32, (3,))])
    run = s0 + np.cumsum(xs, 0)
    c.append(Case(name, "Scan", [s0, xs], [run[-1], run], {"body": body, "num_scan_inputs": 1}))
    # Scan over axis 1, backwards, the outputs stacked on axis 1 and prepended.
    name = "scan_axes"
    xs = f32(3, 5)
    body = helper.make_graph(
        [helper.make_node("Add", [f"{name}_s", f"{name}_x"], [f"{name}_s_out"]),
         helper.make_node("Mul", [f"{name}_s_out", f"{name}_x"], [f"{name}_y"])], f"{name}_body",
        [vi(f"{name}_s", np.float32, (3,)), vi(f"{name}_x", np.float32, (3,))],
        [vi(f"{name}_s_out", np.float32, (3,)), vi(f"{name}_y", np.float32, (3,))])
    s, ys = np.zeros(3, np.float32), []
    for t in range(4, -1, -1):
        s = s + xs[:, t]
        ys.append(s * xs[:, t])
    # Prepending: the last iteration's output comes first.
    y = np.stack(ys[::-1], axis=1)
    c.append(Case(name, "Scan", [np.zeros(3, np.float32), xs], [s, y],
                  {"body": body, "num_scan_inputs": 1, "scan_input_axes": [1], "scan_input_directions": [1],
                   "scan_output_axes": [-1], "scan_output_directions": [1]}))
    return c

def einsum_cases():
    c = []
    specs = [
        ("matmul", "ij,jk->ik", [(3, 4), (4, 5)]),
        ("batch_matmul", "bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("transpose", "ij->ji", [(3, 4)]),
        ("sum_all", "ij->", [(3, 4)]),
        ("sum_axis", "ijk->ik", [(2, 3, 4)]),
        ("dot", "i,i->", [(5,), (5,)]),
        ("outer", "i,j->ij", [(3,), (4,)]),
        ("attention", "bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
        ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
        ("implicit", "ij,jk", [(3, 4), (4, 5)]),
        ("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
        ("one_side_sum", "ij,kl->ik", [(2, 3), (4, 5)]),
        ("mixed", "abc,cbd->da", [(2, 3, 4), (4, 3, 5)]),
    ]
    for tag, eq, shapes in specs:
        ins = [f32(*sh) for sh in shapes]
        c.append(Case(f"einsum_{tag}", "Einsum", ins, np.einsum(eq, *ins).astype(np.float32), {"equation": eq},
                      opset=12, rtol=1e-4, atol=1e-5))
    return c

def resize_cases():
    c = []
    x = f32(1, 2, 4, 5)
    empty_roi = np.zeros(0, np.float32)
    specs = [
        ("nearest_up_asym_floor", {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                   "nearest_mode": "floor"}, [1, 1, 2, 2], None),
        ("nearest_default", {}, [1, 1, 1.5, 2.5], None),
        ("nearest_ceil", {"nearest_mode": "ceil"}, [1, 1, 1.75, 0.6], None),
        ("linear_half_pixel", {"mode": "linear"}, [1, 1, 2, 2], None),
        ("linear_align_corners", {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
         [1, 1, 2, 1.6], None),
        ("linear_down_sizes", {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}, None,
         [1, 2, 3, 1]),
        ("cubic", {"mode": "cubic"}, [1, 1, 2, 2], None),
        ("cubic_exclude", {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, [1, 1, 0.75, 1.5], None),
        ("nearest_tf_half_pixel", {"coordinate_transformation_mode": "tf_half_pixel_for_nn"}, [1, 1, 0.5, 1.4],
         None),
    ]
    for tag, attrs, scales, sizes in specs:
        if sizes is None:
            sc = np.array(scales, np.float32)
            out = [int(np.floor(np.float32(d) * s)) for d, s in zip(x.shape, sc)]  # in f32, as ONNX
            inputs, consts = [x, empty_roi, sc], {1: None, 2: None}
            eff = [float(s) for s in sc]
        else:
            out = sizes
            inputs, consts = [x, empty_roi, np.zeros(0, np.float32), np.array(sizes, np.int64)], {1: None, 2: None,
                                                                                                   3: None}
            eff = [o / d for o, d in zip(sizes, x.shape)]
        want = resize_ref(x, out, eff, attrs.get("mode", "nearest"),
                          attrs.get("coordinate_transformation_mode", "half_pixel"),
                          attrs.get("nearest_mode", "round_prefer_floor"), attrs.get("cubic_coeff_a", -0.75),
                          bool(attrs.get("exclude_outside", 0)))
        c.append(Case(f"resize_{tag}", "Resize", inputs, want, attrs, opset=13, consts=consts, rtol=1e-5, atol=1e-5))
        # The same with scales or sizes fed at run time: Weft's Resize op.
        c.append(Case(f"resize_{tag}_fed", "Resize", inputs, want, attrs, opset=13, consts={1: None}, rtol=1e-5,
                      atol=1e-5))
    return c


def rnn_cases():
    c = []
    t, bsz, inp, hid = 4, 2, 3, 5
    lx = f32(t, bsz, inp)
    # GRU (both reset forms), bidirectional with initial state, and RNN.
    gw, gr, gb = f32(1, 3 * hid, inp), f32(1, 3 * hid, hid), f32(1, 6 * hid)
    zeros = np.zeros((bsz, hid), np.float32)
    for lbr in (0, 1):
        y, yh = gru_ref(lx, gw[0], gr[0], gb[0], zeros, linear_before_reset=lbr)
        c.append(Case(f"gru_lbr{lbr}", "GRU", [lx, gw, gr, gb], [y[:, None].astype(np.float32), yh[None].astype(np.float32)],
                      {"hidden_size": hid, "linear_before_reset": lbr}, consts={1: None, 2: None, 3: None},
                      rtol=1e-4, atol=1e-5))
    gw2, gr2, gb2, gh0 = f32(2, 3 * hid, inp), f32(2, 3 * hid, hid), f32(2, 6 * hid), f32(2, bsz, hid)
    yf, hf = gru_ref(lx, gw2[0], gr2[0], gb2[0], gh0[0], True)
    yb, hb = gru_ref(lx, gw2[1], gr2[1], gb2[1], gh0[1], True, reverse=True)
    c.append(Case("gru_bidirectional", "GRU", [lx, gw2, gr2, gb2, None, gh0],
                  [np.stack([yf, yb], 1).astype(np.float32), np.stack([hf, hb]).astype(np.float32)],
                  {"hidden_size": hid, "direction": "bidirectional", "linear_before_reset": 1},
                  consts={1: None, 2: None, 3: None}, rtol=1e-4, atol=1e-5))
    rw, rr, rb = f32(1, hid, inp), f32(1, hid, hid), f32(1, 2 * hid)
    y, yh = rnn_ref(lx, rw[0], rr[0], rb[0], zeros, reverse=True)
    c.append(Case("rnn_reverse", "RNN", [lx, rw, rr, rb], [y[:, None].astype(np.float32), yh[None].astype(np.float32)],
                  {"hidden_size": hid, "direction": "reverse"}, consts={1: None, 2: None, 3: None},
                  rtol=1e-4, atol=1e-5))
    # Batch-major (layout 1) with an initial state [batch, directions, hidden].
    gh0 = f32(bsz, 1, hid)
    y, yh = gru_ref(lx, gw[0], gr[0], gb[0], gh0[:, 0], linear_before_reset=True)
    c.append(Case("gru_layout1_initial", "GRU", [np.transpose(lx, (1, 0, 2)).copy(), gw, gr, gb, None, gh0],
                  [np.transpose(y[:, None], (2, 0, 1, 3)).astype(np.float32),
                   np.transpose(yh[None], (1, 0, 2)).astype(np.float32)],
                  {"hidden_size": hid, "layout": 1, "linear_before_reset": 1}, consts={1: None, 2: None, 3: None},
                  opset=14, rtol=1e-4, atol=1e-5))
    # Batch-major (layout 1), no bias.
    y, yh = rnn_ref(lx, rw[0], rr[0], np.zeros(2 * hid, np.float32), zeros)
    c.append(Case("rnn_layout1", "RNN", [np.transpose(lx, (1, 0, 2)).copy(), rw, rr],
                  [np.transpose(y[:, None], (2, 0, 1, 3)).astype(np.float32),
                   np.transpose(yh[None], (1, 0, 2)).astype(np.float32)],
                  {"hidden_size": hid, "layout": 1}, consts={1: None, 2: None}, opset=14, rtol=1e-4, atol=1e-5))
    return c


def indexing_cases():
    c = []
    x = f32(3, 5)
    order = np.argsort(-x, axis=1, kind="stable")[:, :3]
    c.append(Case("topk_largest", "TopK", [x, np.array([3], np.int64)],
                  [np.take_along_axis(x, order, 1), order.astype(np.int64)], consts={1: None}))
    order = np.argsort(x, axis=0, kind="stable")[:2]
    c.append(Case("topk_smallest_axis0", "TopK", [x, np.array([2], np.int64)],
                  [np.take_along_axis(x, order, 0), order.astype(np.int64)], {"axis": 0, "largest": 0},
                  consts={1: None}))
    order = np.argsort(-x, axis=-1, kind="stable")[:, :2]
    c.append(Case("topk_opset9_attr", "TopK", [x], [np.take_along_axis(x, order, 1), order.astype(np.int64)],
                  {"k": 2}, opset=9))
    ties = np.array([[1, 3, 3, 2], [5, 5, 5, 5]], np.float32)
    c.append(Case("topk_ties", "TopK", [ties, np.array([2], np.int64)],
                  [np.array([[3, 3], [5, 5]], np.float32), np.array([[1, 2], [0, 1]], np.int64)], consts={1: None}))
    # K fed at run time (not known at import).
    order = np.argsort(-x, axis=1, kind="stable")[:, :4]
    c.append(Case("topk_fed_k", "TopK", [x, np.array([4], np.int64)],
                  [np.take_along_axis(x, order, 1), order.astype(np.int64)]))
    data = f32(3, 4)
    idx = np.array([[0, 2, 1, 0], [2, -1, 0, 1]], np.int64)
    c.append(Case("gather_elements_axis0", "GatherElements", [data, idx],
                  np.take_along_axis(data, np.where(idx < 0, idx + 3, idx), 0)))
    idx1 = np.array([[3, 0], [1, 1], [0, 2]], np.int32)
    c.append(Case("gather_elements_axis1", "GatherElements", [data, idx1], np.take_along_axis(data, idx1, 1),
                  {"axis": 1}))
    upd = f32(2, 4)
    sidx = np.array([[1, 0, 2, 1], [2, 2, 0, 0]], np.int64)

    def scatter(d, i, u, axis, reduction):
        out = d.copy()
        for pos in np.ndindex(*i.shape):
            tgt = list(pos)
            tgt[axis] = i[pos]
            tgt = tuple(tgt)
            if reduction == "add":
                out[tgt] += u[pos]
            elif reduction == "mul":
                out[tgt] *= u[pos]
            else:
                out[tgt] = u[pos]
        return out

    c.append(Case("scatter_elements", "ScatterElements", [data, sidx, upd], scatter(data, sidx, upd, 0, "none")))
    dup = np.array([[1, 1, 0, 2], [1, 1, 0, 2]], np.int64)
    c.append(Case("scatter_elements_add", "ScatterElements", [data, dup, upd], scatter(data, dup, upd, 0, "add"),
                  {"reduction": "add"}, opset=16))
    c.append(Case("scatter_elements_mul", "ScatterElements", [data, dup, upd], scatter(data, dup, upd, 0, "mul"),
                  {"reduction": "mul"}, opset=16))
    sidx1 = np.array([[3], [0], [1]], np.int64)
    upd1 = f32(3, 1)
    c.append(Case("scatter_opset9", "Scatter", [data, sidx1, upd1], scatter(data, sidx1, upd1, 1, "none"),
                  {"axis": 1}, opset=9))
    nz = np.array([[0, 1.5, 0], [-2, 0, 0.1]], np.float32)
    c.append(Case("nonzero", "NonZero", [nz], np.array(np.nonzero(nz), np.int64)))
    nzb = np.array([True, False, True, True])
    c.append(Case("nonzero_bool", "NonZero", [nzb], np.array(np.nonzero(nzb), np.int64)))
    return c


FLOOR_MOD_WGT = """( producer = 1, minConsumer = 1, nodes = [
  ( name = "x", op = "Placeholder", inputs = [], device = "",
    attrs = [ (name = "dtype", value = (type = f32)), (name = "shape", value = (shape = (unknownRank = false, dims = [7]))) ] ),
  ( name = "y", op = "Placeholder", inputs = [], device = "",
    attrs = [ (name = "dtype", value = (type = f32)), (name = "shape", value = (shape = (unknownRank = false, dims = [7]))) ] ),
  ( name = "m", op = "FloorMod", inputs = ["x", "y"], device = "", attrs = [ (name = "T", value = (type = f32)) ] ) ] )
"""


def floor_mod_export(cli, workdir):
    """A Weft graph's float FloorMod through weft export: exact, as NumPy's mod, even where x / y is not."""
    wgt, exported = os.path.join(workdir, "floor_mod.wgt"), os.path.join(workdir, "floor_mod.onnx")
    with open(wgt, "w") as f:
        f.write(FLOOR_MOD_WGT)
    proc = subprocess.run([cli, "export", wgt, "-o", exported, "--output", "m"], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        return [f"float FloorMod export: weft export failed:\n    {proc.stderr.strip()}"]
    x = np.array([1e8, -7, 7, 5.5, -5.5, 0, 16777215], np.float32)
    y = np.array([3, 3, -3, 2, 2, -3, 7], np.float32)
    proc = run(cli, exported, {"x": x, "y": y}, ["m"], workdir, "floor_mod")
    if proc.returncode != 0:
        return [f"float FloorMod export: weft run failed:\n    {proc.stderr.strip()}"]
    got, want = np.load(os.path.join(workdir, "floor_mod", "m.npy")), np.mod(x, y)
    return [] if np.array_equal(got, want) else [f"float FloorMod export: {got} != NumPy's {want}"]


def subgraph_sharing(cli, workdir):
    """Initializers shared by the main graph and subgraphs: one variable, in the layout each use needs."""
    failures = []
    x = f32(2, 8)
    w = f32(8, 8)
    # An If with a known condition reads W, and so does the main graph: one variable, not two.
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"])], "then", [], [vi("t", np.float32, (2, 8))])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", np.float32, (2, 8))])
    g = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True))),
         helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
         helper.make_node("MatMul", ["y", "w"], ["z"])], "shared", [vi("x", x)], [vi("z", np.float32, (2, 8))],
        [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(workdir, "shared_if.onnx")
    onnx.save(m, path)
    proc = subprocess.run([cli, "import", path, "-o", os.path.join(workdir, "shared_if.wgt")], capture_output=True,
                          text=True, timeout=120)
    if proc.returncode != 0 or "1 variables" not in proc.stdout:
        failures.append(f"known If sharing an initializer: expected 1 variable:\n    {proc.stdout}{proc.stderr}")
    proc = run(cli, path, {"x": x}, ["z"], workdir, "shared_if")
    if proc.returncode != 0:
        failures.append(f"known If sharing an initializer: weft run failed: {proc.stderr.strip()}")
    elif not np.allclose(np.load(os.path.join(workdir, "shared_if", "z.npy")), (x @ w) @ w, rtol=1e-4, atol=1e-5):
        failures.append("known If sharing an initializer: wrong values")
    # A Conv's weights (stored HWIO for it) returned as they are by an If branch: ONNX's [O, I, kh, kw].
    img, k = f32(1, 3, 5, 5), f32(4, 3, 3, 3)
    then_g = helper.make_graph([helper.make_node("Neg", ["k"], ["nk"])], "then", [], [vi("nk", np.float32, k.shape)])
    else_g = helper.make_graph([], "else", [], [vi("k", np.float32, k.shape)])
    g = helper.make_graph(
        [helper.make_node("Conv", ["img", "k"], ["conv"], pads=[1, 1, 1, 1]),
         helper.make_node("If", ["p"], ["kernel"], then_branch=then_g, else_branch=else_g)],
        "conv_and_if", [vi("img", img), vi("p", np.bool_, ())],
        [vi("conv", np.float32, (1, 4, 5, 5)), vi("kernel", np.float32, k.shape)], [numpy_helper.from_array(k, "k")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = os.path.join(workdir, "conv_and_if.onnx")
    onnx.save(m, path)
    proc = run(cli, path, {"img": img, "p": np.array(False)}, ["conv", "kernel"], workdir, "conv_and_if")
    if proc.returncode != 0:
        failures.append(f"a Conv's weights returned by an If: weft run failed: {proc.stderr.strip()}")
    else:
        got_k = np.load(os.path.join(workdir, "conv_and_if", "kernel.npy"))
        got_conv = np.load(os.path.join(workdir, "conv_and_if", "conv.npy"))
        if got_k.shape != k.shape or not np.array_equal(got_k, k):
            failures.append(f"a Conv's weights returned by an If: shape {got_k.shape}, expected {k.shape} as stored")
        if not np.allclose(got_conv, conv2d(img, k, pads=(1, 1, 1, 1)), rtol=1e-4, atol=1e-4):
            failures.append("a Conv's weights returned by an If: the Conv's values are wrong")
    return failures


# --- Building and running ----------------------------------------------------------------


def add_case(case, nodes, inputs, inits, outputs, feeds, fetches):
    names = []
    for i, value in enumerate(case.inputs):
        if value is None:
            names.append("")
            continue
        name = f"{case.name}_in{i}"
        names.append(name)
        arr = np.asarray(value)
        if i in case.consts:
            inits.append(numpy_helper.from_array(arr, name))
        else:
            inputs.append(helper.make_tensor_value_info(name, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(arr.dtype)], arr.shape))
            feeds[name] = arr
    if case.node_inputs is not None:
        names = names[:case.node_inputs]
    while names and names[-1] == "":
        names.pop()
    outs = [f"{case.name}_out{i}" for i in range(len(case.expected))]
    nodes.append(helper.make_node(case.op, names, outs, name=case.name, **case.attrs))
    for i, o in enumerate(outs):
        e = np.asarray(case.expected[i])
        outputs.append(helper.make_tensor_value_info(o, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(e.dtype)], e.shape))
        fetches.append((o, case, i))


def write_model(batch, opset, workdir, tag):
    nodes, inputs, inits, outputs, feeds, fetches = [], [], [], [], {}, []
    for case in batch:
        add_case(case, nodes, inputs, inits, outputs, feeds, fetches)
    graph = helper.make_graph(nodes, f"ops_{tag}", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx_ops_test")
    model.ir_version = 8
    path = os.path.join(workdir, f"{tag}.onnx")
    onnx.save(model, path)
    return path, feeds, fetches


def run(cli, path, feeds, fetch_names, workdir, tag):
    args = [cli, "run", path, "-q", "--out", os.path.join(workdir, tag)]
    for name, arr in feeds.items():
        f = os.path.join(workdir, f"{name}.npy")
        np.save(f, arr)
        args += ["--feed", f"{name}={f}"]
    for o in fetch_names:
        args += ["--fetch", o]
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def run_model(cli, batch, opset, workdir, tag):
    path, feeds, fetches = write_model(batch, opset, workdir, tag)
    return run(cli, path, feeds, [o for o, _, _ in fetches], workdir, tag), fetches


# Cases whose Weft graph ONNX cannot hold: cond and while frames, and Pad's
# edge mode (Weft's SYMMETRIC for pads <= 1).
NOT_EXPORTED = {"If", "Loop", "Scan"}


def round_trip(cli, batch, opset, workdir):
    """Imports the opset's model, exports it with `weft export`, runs the export: the same answers."""
    batch = [c for c in batch if c.op not in NOT_EXPORTED and c.name != "pad_edge"]
    if not batch:
        return []
    tag = f"roundtrip{opset}"
    path, feeds, fetches = write_model(batch, opset, workdir, tag)
    wg, exported = os.path.join(workdir, tag + ".wg"), os.path.join(workdir, tag + ".exported.onnx")
    for step in (["import", path, "-o", wg, "--freeze"], ["export", wg, "-o", exported]):
        proc = subprocess.run([cli] + step, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            return [f"round trip of opset {opset}: weft {step[0]} failed:\n    {proc.stderr.strip()}"]
    # Exported outputs keep their names, or gain a "_N" where a name was taken.
    names = [o.name for o in onnx.load(exported).graph.output]
    mapped = []
    for o, case, i in fetches:
        match = [n for n in names if n == o or re.fullmatch(re.escape(o) + r"_\d+", n)]
        if len(match) != 1:
            return [f"round trip of opset {opset}: output {o} is not among the exported outputs {names}"]
        mapped.append((match[0], case, i))
    # Inputs the export no longer reads (a shape folded at import) are not fed.
    kept = {i.name for i in onnx.load(exported).graph.input}
    proc = run(cli, exported, {k: v for k, v in feeds.items() if k in kept}, [m for m, _, _ in mapped], workdir, tag)
    if proc.returncode != 0:
        return [f"round trip of opset {opset}: weft run of the export failed:\n    {proc.stderr.strip()}"]
    return [f"(round trip) {f}" for f in compare(workdir, tag, mapped)]


def compare(workdir, tag, fetches):
    failures = []
    for o, case, i in fetches:
        got = np.load(os.path.join(workdir, tag, o + ".npy"))
        want = np.asarray(case.expected[i])
        if got.shape != want.shape:
            failures.append(f"{case.name} output {i}: shape {got.shape}, expected {want.shape}")
        elif want.dtype == bool or np.issubdtype(want.dtype, np.integer):
            if not np.array_equal(got, want):
                failures.append(f"{case.name} output {i}: {got.ravel()[:8]} != {want.ravel()[:8]}")
        elif not np.allclose(got, want, rtol=case.rtol, atol=case.atol, equal_nan=True):
            err = np.nanmax(np.abs(got.astype(np.float64) - want))
            failures.append(f"{case.name} output {i}: max abs error {err:.3g} (rtol {case.rtol}, atol {case.atol})")
    return failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cli")
    parser.add_argument("--keep")
    parser.add_argument("-k", default="")
    args = parser.parse_args()
    all_cases = [c for c in cases() + control_flow_cases() + einsum_cases() + resize_cases() + rnn_cases() + indexing_cases() if args.k in c.name]
    workdir = args.keep or tempfile.mkdtemp(prefix="onnx_ops_")
    os.makedirs(workdir, exist_ok=True)
    by_opset = {}
    for c in all_cases:
        by_opset.setdefault(c.opset, []).append(c)
    failures = []
    for opset, batch in sorted(by_opset.items()):
        proc, fetches = run_model(args.cli, batch, opset, workdir, f"opset{opset}")
        if proc.returncode == 0:
            failures += compare(workdir, f"opset{opset}", fetches)
            continue
        # Find the cases that fail alone.
        for case in batch:
            proc1, fetches1 = run_model(args.cli, [case], opset, workdir, case.name)
            if proc1.returncode != 0:
                failures.append(f"{case.name} (opset {opset}): weft run failed:\n    {proc1.stderr.strip()}")
            else:
                failures += compare(workdir, case.name, fetches1)
    exported = 0
    if not args.k:
        failures += floor_mod_export(args.cli, workdir)
        failures += subgraph_sharing(args.cli, workdir)
    for opset, batch in sorted(by_opset.items()):
        failures += round_trip(args.cli, batch, opset, workdir)
        exported += len([c for c in batch if c.op not in NOT_EXPORTED and c.name != "pad_edge"])
    print(f"{len(all_cases)} cases in {len(by_opset)} opsets ({', '.join(map(str, sorted(by_opset)))}), "
          f"{exported} of them also through weft export and back, {len(failures)} failed")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
