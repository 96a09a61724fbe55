#!/usr/bin/env bash
# Regenerates the sample graphs and inputs and checks they equal the checked-in ones:
# they must never drift from tools/modelgen.
# Usage: modelgen_up_to_date.sh <weft_modelgen> <configs/models>
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$1" --out "$work" >/dev/null
for f in "$work"/*.wgt "$work"/*.npy; do
  name=$(basename "$f")
  if ! cmp -s "$f" "$2/$name"; then
    echo "FAIL: $2/$name differs from what tools/modelgen writes; run: build/bin/weft_modelgen --out configs/models"
    exit 1
  fi
done
echo "OK: the sample graphs are up to date"
