#!/usr/bin/env bash
# The lite build (docs/lite.md), end to end, as CI runs it: export the
# sample MLP and CNN, MobileNet-v2 and an LSTM from PyTorch
# (tools/onnx/export_models.py), optimize them with the full build's
# `weft optimize`, build the lite preset for the first three
# (-DWEFT_LITE_MODELS: selective registration), and test it
# (tests/lite/lite_test.py), the LSTM being the model whose ops it lacks.
# With the lite-arm64 preset the lite build is cross-compiled for aarch64
# and every lite program runs under qemu-user; the comparisons are the same
# (the x86 full build's `weft run` is the reference).
# Usage: tests/lite/run.sh [FULL_BUILD_DIR (build)] [LITE_PRESET (lite or lite-arm64)]
set -euo pipefail
cd "$(dirname "$0")/../.."
full=${1:-build}
preset=${2:-lite}
python=/usr/bin/python3  # Debian's, with numpy and torch (tools/setup.sh)
[ -x "$full/bin/weft" ] || { echo "tests/lite/run.sh: no $full/bin/weft; build the release preset first" >&2; exit 1; }
# The preset's packages (the cross toolchain, qemu-user and the arm64
# sysroot for lite-arm64); nothing is built here.
tools/setup.sh --preset "$preset" --packages-only >/dev/null
# The models stay in the build folder, which the build's cache names
# (WEFT_LITE_MODELS), so that a later rebuild there still finds them.
work=$PWD/build-$preset/test-models
rm -rf "$work"
mkdir -p "$work"

"$python" tools/onnx/export_models.py "$work" --models mlp,cnn,mobilenet_v2,lstm --batch 2 >/dev/null
for m in mlp cnn mobilenet_v2 lstm; do
  WEFT_PLUGIN_PATH= "$full/bin/weft" optimize "$work/$m.onnx" -o "$work/$m.wg" >/dev/null
done
# The CNN quantized to int8 (docs/quantization.md) on 64 seeded normal
# samples (as its inputs are),
# then fused by the optimizer (_QConv2D, _QMatMul): the lite build runs
# optimized graphs.
"$python" -c "import numpy as np; np.save('$work/calib.npy', np.random.RandomState(0).randn(64, 1, 28, 28).astype(np.float32))"
WEFT_PLUGIN_PATH= "$full/bin/weft" quantize "$work/cnn.onnx" --calibrate "input=$work/calib.npy" \
  -o "$work/cnn_int8_qdq.wg" >/dev/null 2>&1
WEFT_PLUGIN_PATH= "$full/bin/weft" optimize "$work/cnn_int8_qdq.wg" -o "$work/cnn_int8.wg" >/dev/null
cp "$work/cnn.input.npy" "$work/cnn_int8.input.npy"
cmake --preset "$preset" -DWEFT_LITE_MODELS="$work/mlp.wg;$work/cnn.wg;$work/mobilenet_v2.wg;$work/cnn_int8.wg" >/dev/null
cmake --build --preset "$preset"
if [ "$preset" = lite-arm64 ]; then
  # Cross-built: run under qemu-user with the cross toolchain's runtimes and
  # the sysroot's libraries (cmake/toolchains/aarch64-linux-gnu.cmake).
  lib=$PWD/build-sysroot-arm64/usr/lib/aarch64-linux-gnu
  export WEFT_LITE_EMULATOR="qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib:$lib"
  export WEFT_LITE_TOOL_PREFIX=aarch64-linux-gnu-
  export WEFT_LITE_LIB_DIRS=$lib
fi
"$python" tests/lite/lite_test.py "build-$preset" "$full" "$work"  # the preset's binaryDir
