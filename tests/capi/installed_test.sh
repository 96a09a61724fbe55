#!/usr/bin/env bash
# An application's view of the C inference API: install Weft to a prefix,
# build docs/examples/embed/weft_classify.c from the install with
# find_package(Weft) and with a bare `cc -lweft_inference`, run both on the
# sample MLP's digits and compare the logits with the installed `weft run`
# (bit for bit: the same kernels on the same input); then the same with
# MobileNet-v2 exported from PyTorch.
# Usage: installed_test.sh <source dir> <build dir> <make program> [python3 with numpy]
set -euo pipefail
source "$(dirname "$0")/../support/install_prefix.sh"
prefix="$work/prefix"
for f in include/weft/weft_inference.h lib/libweft_inference.so share/weft/examples/embed/weft_classify.c; do
  [ -e "$prefix/$f" ] || { echo "FAIL: the install has no $f"; exit 1; }
done
# Only the C API's functions leave the library.
others=$(nm -D --defined-only "$prefix/lib/libweft_inference.so" | awk '{print $3}' | grep -v '^weft_' || true)
[ -z "$others" ] || { echo "FAIL: libweft_inference exports more than weft_*:"; echo "$others" | head; exit 1; }

cmake -S "$prefix/share/weft/examples/embed" -B "$work/cmake" -G Ninja -DCMAKE_MAKE_PROGRAM="$make_program" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake" >/dev/null
if grep -q "$src/core\|$src/capi\|$build" "$work/cmake/build.ninja"; then
  echo "FAIL: the example's build could see the source or build tree"; exit 1
fi
cc -std=c11 -Wall -Wextra -Werror -I"$prefix/include" "$prefix/share/weft/examples/embed/weft_classify.c" \
  -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lweft_inference -o "$work/weft_classify_cc"

model="$src/configs/models/mnist_mlp.wgt"
"$python" -c "import numpy as np, sys; np.load(sys.argv[1]).astype('<f4').tofile(sys.argv[2])" \
  "$src/configs/models/sample_digits_784.npy" "$work/digits.f32"
WEFT_PLUGIN_PATH= "$work/cmake/weft_classify" "$model" "$work/digits.f32" "$work/cmake.f32"
WEFT_PLUGIN_PATH= "$work/weft_classify_cc" "$model" "$work/digits.f32" "$work/cc.f32" >/dev/null
WEFT_PLUGIN_PATH= "$prefix/bin/weft" run "$model" --feed "images=$src/configs/models/sample_digits_784.npy" \
  --fetch logits --out "$work" -q
"$python" - "$work/cmake.f32" "$work/cc.f32" "$work/logits.npy" <<'PYEOF'
import sys
import numpy as np
want = np.load(sys.argv[3])
for path in sys.argv[1:3]:
    got = np.fromfile(path, "<f4").reshape(want.shape)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"{path} differs from weft run's logits"
print(f"weft_classify (find_package and cc) gives weft run's logits {want.shape} bit for bit")
PYEOF

# MobileNet-v2 from PyTorch (random weights, seeded): the sample against
# `weft run` on the same image, bit for bit.
"$python" "$src/tools/onnx/export_models.py" "$work/onnx" --models mobilenet_v2 --batch 1 >/dev/null
mobilenet="$work/onnx/mobilenet_v2.onnx"
"$python" -c "import numpy as np, sys; np.load(sys.argv[1]).astype('<f4').tofile(sys.argv[2])" \
  "$work/onnx/mobilenet_v2.input.npy" "$work/image.f32"
WEFT_PLUGIN_PATH= "$work/cmake/weft_classify" "$mobilenet" "$work/image.f32" "$work/mobilenet.f32"
WEFT_PLUGIN_PATH= "$prefix/bin/weft" run "$mobilenet" --feed "input=$work/onnx/mobilenet_v2.input.npy" \
  --fetch output --out "$work/run" -q
"$python" - "$work/mobilenet.f32" "$work/run/output.npy" <<'PYEOF'
import sys
import numpy as np
want = np.load(sys.argv[2])
got = np.fromfile(sys.argv[1], "<f4").reshape(want.shape)
assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), \
    f"MobileNet-v2 through the C API differs from weft run by {np.abs(got - want).max():.3g}"
print(f"MobileNet-v2 {want.shape} through weft_classify gives weft run's output bit for bit")
PYEOF
