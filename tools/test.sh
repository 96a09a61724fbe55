#!/usr/bin/env bash
# Set-up (tools/setup.sh) plus the whole test suite through CTest, then the
# lite build's tests (tests/lite/run.sh; not when ctest is given arguments,
# nor with WEFT_TEST_SKIP_LITE=1, which CI sets to time them as a stage of
# their own). Extra arguments go to ctest (e.g. -L unit, -R Config). Ends
# with CTest's summary line.
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
lite_status=0
if [ $# -eq 0 ] && [ "${WEFT_TEST_SKIP_LITE:-0}" != 1 ]; then
  echo "==> The lite build and its tests (tests/lite/run.sh)"
  tests/lite/run.sh build lite || lite_status=$?
fi
echo
echo "${summary:-CTest printed no summary (exit status $status)}"
[ "$lite_status" -eq 0 ] || echo "The lite build's tests FAILED (exit status $lite_status)"
[ "$status" -ne 0 ] && exit "$status"
exit "$lite_status"
