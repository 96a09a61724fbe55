#!/usr/bin/env python3
"""Exports PyTorch models to ONNX, with an input and PyTorch's output for it.

    tools/onnx/export_models.py OUTDIR [--models mlp,cnn,...] [--opset 17] [--batch N]

For each model NAME it writes OUTDIR/NAME.onnx, OUTDIR/NAME.input.npy (a
seeded random input) and OUTDIR/NAME.expected.npy (what the PyTorch module
itself, under torch.no_grad() in eval mode, gives for that input). The
tests run each .onnx through `weft run` and compare with the .expected.npy;
the benchmarks time the same files (see docs/onnx.md).

Models (random weights, seeded):
  mlp           the sample MLP of configs/models/mnist_mlp.wgt: 784-64-10
  cnn           a Fashion-MNIST CNN: two 3x3 conv + 2x2 max-pool blocks, two dense
  resnet18      torchvision's ResNet-18, 3x224x224
  mobilenet_v2  torchvision's MobileNet-v2, 3x224x224
  lstm          a one-layer LSTM (16 -> 32, 10 steps) and a dense layer on its last step
  gru           a two-layer bidirectional GRU (16 -> 24, 8 steps) and a dense layer on its last step
  upsample      a small decoder: conv, bilinear and nearest 2x upsampling (Resize),
                a 1x1 channel mix by torch.einsum (Einsum), 3x8x8 -> 4x32x32
and, only when named (the benchmarks' larger models):
  efficientnet_b0  torchvision's EfficientNet-B0, 3x224x224
  bert_encoder     a 4-layer transformer encoder (hidden 256, 4 heads, GELU) over
                   128 embedded tokens, [batch, 128, 256]

The batch axis of every input and output is dynamic ("batch"), so one file
takes any batch size, except bert_encoder's (exported for --batch). Needs Debian's python3-torch and python3-torchvision
(tools/setup.sh installs them).
"""
import argparse
import os
import sys

import numpy as np


def build(name):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "mlp":
        return nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10)), (784,)
    if name == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)), (1, 28, 28)
    if name == "resnet18":
        import torchvision
        return torchvision.models.resnet18(weights=None), (3, 224, 224)
    if name == "mobilenet_v2":
        import torchvision
        return torchvision.models.mobilenet_v2(weights=None), (3, 224, 224)
    if name == "efficientnet_b0":
        import torchvision
        return torchvision.models.efficientnet_b0(weights=None), (3, 224, 224)
    if name == "bert_encoder":
        # A 4-layer transformer encoder, hidden 256, 4 heads, feed-forward
        # 1024, GELU, over 128 token embeddings (the input is the embedded
        # sequence: [batch, 128, 256]).
        layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.0,
                                           activation="gelu", batch_first=True)
        return nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False), (128, 256)
    if name == "lstm":

        class Lstm(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(16, 32, batch_first=True)
                self.dense = nn.Linear(32, 5)

            def forward(self, x):
                out, _ = self.lstm(x)
                return self.dense(out[:, -1, :])

        return Lstm(), (10, 16)
    if name == "gru":
        class Gru(nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = nn.GRU(16, 24, num_layers=2, bidirectional=True, batch_first=True)
                self.dense = nn.Linear(48, 5)

            def forward(self, x):
                out, _ = self.gru(x)
                return self.dense(out[:, -1, :])
        return Gru(), (8, 16)
    if name == "upsample":
        class Upsample(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3, padding=1)
                self.up1 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
                self.up2 = nn.Upsample(scale_factor=2, mode="nearest")
                self.mix = nn.Parameter(torch.randn(4, 8))

            def forward(self, x):
                y = self.up2(self.up1(torch.relu(self.conv(x))))
                return torch.einsum("bchw,oc->bohw", y, self.mix)
        return Upsample(), (3, 8, 8)
    raise SystemExit(f"export_models.py: no model {name!r}; the models are {', '.join(MODELS + EXTRA_MODELS)}")


MODELS = ["mlp", "cnn", "resnet18", "mobilenet_v2", "lstm", "gru", "upsample"]
# Exported when named (the benchmarks' larger models), not by default.
EXTRA_MODELS = ["efficientnet_b0", "bert_encoder"]


def export(name, outdir, opset, batch):
    import torch

    model, shape = build(name)
    model.eval()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch,) + shape).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    path = os.path.join(outdir, name + ".onnx")
    # The transformer's attention splits heads by shapes computed from the
    # input's; with an open batch those reach Slice as run-time values,
    # which Weft's importer does not take yet, so it is exported for the
    # batch it is given.
    dynamic = None if name == "bert_encoder" else {"input": {0: "batch"}, "output": {0: "batch"}}
    torch.onnx.export(model, torch.from_numpy(x), path, opset_version=opset, input_names=["input"],
                      output_names=["output"], dynamic_axes=dynamic, do_constant_folding=True)
    np.save(os.path.join(outdir, name + ".input.npy"), x)
    np.save(os.path.join(outdir, name + ".expected.npy"), expected)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, from: " + ", ".join(MODELS + EXTRA_MODELS))
    parser.add_argument("--opset", type=int, default=17)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        sys.exit("export_models.py: PyTorch is not installed (Debian's python3-torch; run tools/setup.sh)")
    os.makedirs(args.outdir, exist_ok=True)
    for name in args.models.split(","):
        print(export(name.strip(), args.outdir, args.opset, args.batch))


if __name__ == "__main__":
    main()
