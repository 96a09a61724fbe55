#!/usr/bin/env bash
# The layering guard: plugins see the SDK only.
#  1. No file under plugins/ includes a core/ (or tools/) header.
#  2. No built plugin links libweft.
#  3. Every built plugin exports exactly one symbol, its entry point.
# Usage: layering_test.sh <source dir> <built plugin dir>
#        layering_test.sh --self-test <source dir>  (must find the planted violations)
set -euo pipefail

check_includes() {  # <tree>: prints violations
  grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](core|tools)/' "$1" \
    --include='*.c' --include='*.cc' --include='*.cpp' --include='*.h' --include='*.hpp' \
    --include='*.cu' --include='*.cl' --include='*.hip' --include='*.inc' || true
}

check_library() {  # <plugin.so>: prints violations
  local so=$1
  if readelf -d "$so" | grep -E 'NEEDED.*\[libweft\.so' >/dev/null; then
    echo "$so links libweft: $(readelf -d "$so" | grep -E 'NEEDED.*libweft')"
  fi
  local exported
  exported=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TWDBRVu]$/ {print $3}' | sort -u)
  if [ "$exported" != "weft_plugin_init_v1" ]; then
    echo "$so exports more than its entry point: $(echo $exported)"
  fi
}

if [ "${1:-}" = "--self-test" ]; then
  src=$2
  found=$(check_includes "$src/tests/fixtures/layering_violation")
  if [ -z "$found" ]; then
    echo "FAIL: the guard missed the planted include in tests/fixtures/layering_violation"; exit 1
  fi
  echo "OK: the guard finds the planted violation:"; echo "$found"
  exit 0
fi

src=$1
plugin_dir=$2
violations=$(check_includes "$src/plugins")
count=0
for so in "$plugin_dir"/*.so; do
  [ -e "$so" ] || continue
  count=$((count + 1))
  violations+=$(check_library "$so")
done
if [ "$count" -eq 0 ]; then echo "FAIL: no plugins in $plugin_dir"; exit 1; fi
if [ -n "$violations" ]; then
  echo "FAIL: plugins must see the SDK only (docs/architecture.md, "Plugins see the SDK only"):"
  echo "$violations"
  exit 1
fi
echo "OK: plugins/ includes no core header; $count plugin(s) link no libweft and export only their entry"
