# Sourced by the install-tree tests (tests/sdk/out_of_tree_test.sh,
# tests/capi/installed_test.sh): reads <source dir> <build dir> <make
# program> [python3 with numpy] into src, build, make_program and python,
# makes a scratch directory $work (removed on exit) and installs the build
# tree to $work/prefix.
set -euo pipefail
src=$1
build=$2
make_program=$3
python=${4:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
