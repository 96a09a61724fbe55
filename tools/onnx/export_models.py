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
  densenet121   torchvision's DenseNet-121, 3x64x64
  efficientnet_b0_64  torchvision's EfficientNet-B0 (SiLU, squeeze-excitation), 3x64x64
  vit           torchvision's VisionTransformer, small: 32x32 images, 8x8 patches, 2 layers,
                hidden 64, 4 heads
  transformer   a 2-layer transformer encoder (hidden 64, 4 heads) over 12 tokens
  conv1d        a 1-D CNN: two Conv1d (one dilated), max-pooling, batch norm, average pooling
  decoder       a DCGAN-like decoder: dense, two ConvTranspose2d (strides 2, output_padding), 32 -> 3x16x16
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
    if name == "densenet121":
        import torchvision
        return torchvision.models.densenet121(weights=None), (3, 64, 64)
    if name == "efficientnet_b0_64":
        import torchvision
        return torchvision.models.efficientnet_b0(weights=None), (3, 64, 64)
    if name == "vit":
        from torchvision.models.vision_transformer import VisionTransformer
        vit = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128,
                                num_classes=10)
        nn.init.normal_(vit.heads.head.weight, std=0.1)  # torchvision starts the head at zeros
        return vit, (3, 32, 32)
    if name == "transformer":
        layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
        return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), (12, 64)
    if name == "conv1d":
        return nn.Sequential(
            nn.Conv1d(4, 16, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 3, dilation=2), nn.BatchNorm1d(32), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(32, 6)), (4, 64)
    if name == "decoder":
        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.dense = nn.Linear(32, 16 * 4 * 4)
                self.up = nn.Sequential(
                    nn.ReLU(), nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                    nn.ConvTranspose2d(8, 3, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid())

            def forward(self, z):
                return self.up(self.dense(z).reshape(-1, 16, 4, 4))
        return Decoder(), (32,)
    raise SystemExit(f"export_models.py: no model {name!r}; the models are {', '.join(MODELS + EXTRA_MODELS)}")


MODELS = ["mlp", "cnn", "resnet18", "mobilenet_v2", "lstm", "gru", "upsample", "densenet121", "efficientnet_b0_64", "vit",
          "transformer", "conv1d", "decoder"]
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
    # input's; with an open batch those reach Slice as run-time values
    # (Weft's DynamicSlice). bert_encoder is exported for the batch it is
    # given, as the benchmarks have always timed it.
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
