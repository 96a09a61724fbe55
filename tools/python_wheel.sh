#!/usr/bin/env bash
# Builds a wheel of the weft Python package from a build tree, with the
# standard tools (Debian's python3-wheel; pip installs it):
#
#   tools/python_wheel.sh [--no-build] [BUILD_DIR [OUT_DIR]]   # build, build/dist
#   pip install build/dist/weft-*.whl
#
# The wheel holds the package, its native module, libweft and the plugins
# (weft/lib, weft/lib/weft/plugins, found from the module's own folder),
# and is tagged for the interpreter the module was built for
# (cp311-cp311-linux_x86_64 on Debian 12). Like a .deb, it expects the
# libraries libweft links (oneDNN, OpenBLAS, Boost, Cap'n Proto, ...) from
# the system's packages (tools/setup.sh installs them): it is a wheel for
# machines set up as this one, not a manylinux wheel (docs/python.md,
# "Building and importing"). --no-build packs what the build tree holds
# (the python.wheel test, which runs after the build).
set -euo pipefail
build_first=1
if [[ "${1:-}" == "--no-build" ]]; then
  build_first=0
  shift
fi
build=$(realpath -m "${1:-build}")
out=$(realpath -m "${2:-$build/dist}")
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  echo "python_wheel.sh: $build is not a configured build tree (tools/setup.sh makes build/)" >&2
  exit 1
fi
python=$(sed -n 's/^WEFT_PYTHON_EXECUTABLE:INTERNAL=//p' "$build/CMakeCache.txt")
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt")
if [[ -z "$python" || -z "$version" ]]; then
  echo "python_wheel.sh: $build was configured without the Python module (docs/python.md, \"Building and importing\")" >&2
  exit 1
fi
if ! "$python" -c "import wheel" 2>/dev/null; then
  echo "python_wheel.sh: $python has no 'wheel' package (apt-get install python3-wheel)" >&2
  exit 1
fi
if ((build_first)); then
  cmake --build "$build" --target weft_python weft_plugins
fi
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# The module with its install RUNPATH ($ORIGIN/lib first) and the .py files.
cmake --install "$build" --component python --prefix "$stage/prefix" >/dev/null
package=$(find "$stage/prefix" -type f -name '__init__.py' -path '*/weft/__init__.py' | head -1)
if [[ -z "$package" ]]; then
  echo "python_wheel.sh: cmake --install --component python put no weft package under $stage/prefix" >&2
  exit 1
fi
tree=$stage/tree
mkdir -p "$tree"
cp -r "$(dirname "$package")" "$tree/weft"
mkdir -p "$tree/weft/lib/weft"
cp -a "$build"/lib/libweft.so* "$tree/weft/lib/"
cp -a "$build/lib/weft/plugins" "$tree/weft/lib/weft/"
tag=$("$python" -c 'import sys, sysconfig; v = "cp%d%d" % sys.version_info[:2]; print("%s-%s-%s" % (v, v, sysconfig.get_platform().replace("-", "_").replace(".", "_")))')
info=$tree/weft-$version.dist-info
mkdir -p "$info"
cat >"$info/METADATA" <<META
Metadata-Version: 2.1
Name: weft
Version: $version
Summary: Weft: dataflow graphs for machine learning on heterogeneous devices and clusters
Requires-Python: ==$("$python" -c 'import sys; print("%d.%d.*" % sys.version_info[:2])')
Requires-Dist: numpy
META
cat >"$info/WHEEL" <<META
Wheel-Version: 1.0
Generator: weft tools/python_wheel.sh
Root-Is-Purelib: false
Tag: $tag
META
mkdir -p "$out"
"$python" -m wheel pack "$tree" -d "$out" | sed 's/^/python_wheel.sh: /'
