#!/usr/bin/env bash
# A third party's view: install Weft to a prefix, build
# tests/sdk/example_device out of tree with find_package(Weft), and check
# that the installed `weft` lists and opens its device.
# Usage: out_of_tree_test.sh <source dir> <build dir> <make program>
set -euo pipefail
src=$1
build=$2
make_program=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$src/tests/sdk/example_device" -B "$work/build" -G Ninja \
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
echo "$listing" | grep -E "^example +device +1\.1 +1\.0\.0 +loaded +$plugin\$" >/dev/null \
  || { echo "FAIL: the installed weft does not list the example plugin as loaded"; exit 1; }
echo "$listing" | grep -E "^cpu +device +1\.1 .* loaded +$work/prefix/lib/weft/plugins/weft_device_cpu.so\$" >/dev/null \
  || { echo "FAIL: the installed weft does not find its own cpu plugin"; exit 1; }

devices=$(WEFT_PLUGIN_PATH="$(dirname "$plugin")" "$work/prefix/bin/weft" devices)
echo "$devices"
echo "$devices" | grep -q "^/device:EXAMPLE:0  (plugin example)$" \
  || { echo "FAIL: the example device does not open"; exit 1; }
echo "OK: built out of tree against $work/prefix and loaded by the installed weft"
