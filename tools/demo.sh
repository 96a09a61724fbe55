#!/usr/bin/env bash
# Set-up (tools/setup.sh) plus the main job: what this machine offers Weft
# (plugins, devices), then the sample models of configs/models/ run on four
# sample digits. Their weights are a fixed random draw, not trained, so the
# probabilities show the models run, not that they recognise digits.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
out=build/demo  # the fetched .npy files and a Chrome trace of the LeNet step
step() { echo; echo "==> $*"; "$@"; }
step build/bin/weft plugins
step build/bin/weft devices
step build/bin/weft inspect configs/models/mnist_lenet.wgt
step build/bin/weft run configs/models/mnist_mlp.wgt \
  --feed images=configs/models/sample_digits_784.npy --fetch probabilities --out "$out/mlp"
step build/bin/weft run configs/models/mnist_lenet.wgt \
  --feed images=configs/models/sample_digits_28x28.npy --fetch probabilities --out "$out/lenet" --trace "$out/lenet/trace.json"
