#!/usr/bin/env bash
# Set-up (tools/setup.sh) plus the whole test suite through CTest. Extra
# arguments go to ctest (e.g. -L unit, -R Config). Ends with CTest's
# summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
echo "==> Running the tests"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
ctest --preset release -j "$(nproc)" "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# CTest prints its summary before the label timings; repeat it last.
summary=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -n 1 || true)
echo
echo "${summary:-CTest printed no summary (exit status $status)}"
exit "$status"
