#!/usr/bin/env bash
# Set-up (tools/setup.sh) plus the main job: train the CNN of
# configs/models/fashion_cnn.wgt on Fashion-MNIST (Debian's
# dataset-fashion-mnist) with configs/fashion_cnn.toml, from scratch. It
# ends with a line
#   final: step=<n> loss=<x> test_accuracy=<y> examples_per_sec=<z>
# Checkpoints and a JSONL of the metrics land in build/train/fashion_cnn/.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
step() { echo; echo "==> $*"; "$@"; }
step build/bin/weft plugins
step build/bin/weft devices
rm -rf build/train/fashion_cnn  # a fresh run, not a resumed one
step build/bin/weft train configs/models/fashion_cnn.wgt --config configs/fashion_cnn.toml
