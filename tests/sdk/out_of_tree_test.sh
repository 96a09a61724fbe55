#!/usr/bin/env bash
# A third party's view: install Weft to a prefix, build
# tests/sdk/example_device out of tree with find_package(Weft), and check
# that the installed `weft` lists and opens its device.
# Then run the sample MLP with its dense layers pinned to the example
# device and compare the logits with the CPU's.
# Usage: out_of_tree_test.sh <source dir> <build dir> <make program> [python3 with numpy]
set -euo pipefail
source "$(dirname "$0")/../support/install_prefix.sh"
# The examples come with the install: build the installed copy.
examples="$work/prefix/share/weft/sdk/examples"
for f in example_device/example_device.cc example_device/CMakeLists.txt add_device/add_device.cc \
         add_device/CMakeLists.txt; do
  [ -f "$examples/$f" ] || { echo "FAIL: the install has no $examples/$f"; exit 1; }
done
[ -f "$work/prefix/share/weft/sdk/docs/plugins.md" ] || { echo "FAIL: the install has no docs/plugins.md"; exit 1; }
[ -f "$work/prefix/share/weft/conformance/cases.toml" ] || { echo "FAIL: the install has no conformance cases"; exit 1; }
cmake -S "$examples/example_device" -B "$work/build" -G Ninja \
  -DCMAKE_MAKE_PROGRAM="$make_program" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/build" >/dev/null

# It saw the SDK only: no path into the source tree's core.
if grep -q "$src/core" "$work/build/compile_commands.json" 2>/dev/null; then
  echo "FAIL: the out-of-tree build could see $src/core"; exit 1
fi

plugin=$(find "$work/build" -name 'weft_device_example.so' | head -n 1)
[ -n "$plugin" ] || { echo "FAIL: no weft_device_example.so was built"; exit 1; }

listing=$(WEFT_PLUGIN_PATH="$(dirname "$plugin")" "$work/prefix/bin/weft" plugins)
echo "$listing"
echo "$listing" | grep -E "^example +device +1\.[0-9]+ +1\.0\.0 +loaded +$plugin\$" >/dev/null \
  || { echo "FAIL: the installed weft does not list the example plugin as loaded"; exit 1; }
echo "$listing" | grep -E "^cpu +device +1\.[0-9]+ .* loaded +$work/prefix/lib/weft/plugins/weft_device_cpu.so\$" >/dev/null \
  || { echo "FAIL: the installed weft does not find its own cpu plugin"; exit 1; }

devices=$(WEFT_PLUGIN_PATH="$(dirname "$plugin")" "$work/prefix/bin/weft" devices)
echo "$devices"
echo "$devices" | grep -q "^/device:EXAMPLE:0  (plugin example)$" \
  || { echo "FAIL: the example device does not open"; exit 1; }

# Its kernels: the sample MLP with its dense layers pinned to the example
# device (inputs and weights copied to its own memory, results back) gives
# what the CPU gives. The reference is the CPU plugin, a separate
# implementation (oneDNN); the example's loops sum in another order, so the
# logits agree to float rounding, not bit for bit.
cat > "$work/pinned.toml" <<EOF
[placement]
soft = false
[placement.pins]
"dense*/MatMul" = "/device:EXAMPLE:0"
"dense*/BiasAdd" = "/device:EXAMPLE:0"
"dense1/Relu" = "/device:EXAMPLE:0"
EOF
weft="$work/prefix/bin/weft"
model="$src/configs/models/mnist_mlp.wgt"
images="$src/configs/models/sample_digits_784.npy"
placement=$(WEFT_PLUGIN_PATH="$(dirname "$plugin")" "$weft" --config "$work/pinned.toml" place --explain "$model")
echo "$placement" | grep -E "dense1/MatMul.*EXAMPLE:0" >/dev/null \
  || { echo "FAIL: dense1/MatMul is not placed on the example device:"; echo "$placement"; exit 1; }
mkdir -p "$work/example" "$work/cpu"
WEFT_PLUGIN_PATH="$(dirname "$plugin")" "$weft" --config "$work/pinned.toml" run "$model" \
  --feed "images=$images" --fetch logits --out "$work/example" -q
"$weft" run "$model" --feed "images=$images" --fetch logits --out "$work/cpu" -q
"$python" - "$work/example/logits.npy" "$work/cpu/logits.npy" <<'PYEOF2'
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.shape == want.shape and got.shape[1] == 10, (got.shape, want.shape)
err = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-3)))
print(f"MLP logits {got.shape} on the example device vs the CPU: max relative error {err:.2e}")
assert err < 1e-4, err
assert (got.argmax(1) == want.argmax(1)).all()
PYEOF2

# The conformance kit, as the author would run it before shipping: the
# installed weft with its installed cases (no Python, no source tree).
report=$("$weft" conformance --plugin "$plugin") || { echo "$report"; echo "FAIL: weft conformance failed"; exit 1; }
echo "$report" | tail -n 1
echo "$report" | grep -E "^  (MatMul|BiasAdd|Relu|Mul|Add) +/device:EXAMPLE:0 +[1-9][0-9]* +0 " | wc -l | grep -qx 5 \
  || { echo "$report"; echo "FAIL: the kit did not pass Add, Mul, Relu, MatMul and BiasAdd on the example"; exit 1; }

# The smallest device (add_device), from the installed copy, through the kit too.
cmake -S "$examples/add_device" -B "$work/add" -G Ninja -DCMAKE_MAKE_PROGRAM="$make_program" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/add" >/dev/null
"$weft" conformance --plugin "$work/add/weft_device_add.so" | tail -n 1

echo "OK: built out of tree against $work/prefix and loaded by the installed weft; its kernels run the MLP" \
  "and pass the conformance kit"
