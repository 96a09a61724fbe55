# Sourced by the cluster scripts run as `<script> WEFT_BINARY SOURCE_DIR`
# (cluster_mpi_test.sh, cluster_script_test.sh): strict mode, their two
# arguments as $weft and $source, a work folder $work that is removed at
# the end with every process whose command line names it, and fail().
set -euo pipefail
weft=$1
source=$2
work=$(mktemp -d)
trap 'pkill -KILL -f "$work/" 2>/dev/null || true; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
