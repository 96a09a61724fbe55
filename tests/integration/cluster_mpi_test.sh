#!/usr/bin/env bash
# A training cluster started by Open MPI: `mpirun -np 3` runs `weft train`
# on every rank of one host (rank 0 the ps task, ranks 1 and 2 the
# workers, from [cluster.tasks] and OMPI_COMM_WORLD_*), on ports chosen
# free here. The run must end by itself with mpirun exiting 0, both
# workers' final lines printed, the ps task stopped by the chief, and no
# process left behind.
#
#   cluster_mpi_test.sh WEFT_BINARY SOURCE_DIR
#
# Exits 77 (CTest: skipped) where mpirun (Debian's openmpi-bin) or the
# data set is missing. Bounded by timeout(1).
# shellcheck source=cluster_test_lib.sh
source "$(dirname "$0")/cluster_test_lib.sh"

command -v mpirun >/dev/null || { echo "SKIP: mpirun is not installed (Debian's openmpi-bin)"; exit 77; }
fashion=/usr/share/datasets/fashion-mnist
[ -f "$fashion/train-images-idx3-ubyte.gz" ] || { echo "SKIP: dataset-fashion-mnist is not installed"; exit 77; }

# Three consecutive free ports: rank r listens on base_port + r.
base=$(python3 -c '
import socket, random
for _ in range(200):
    base = random.randrange(20000, 60000)
    socks = []
    try:
        for p in range(base, base + 3):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
')
cat > "$work/mpi.toml" <<EOF
[cluster]
membership = "mpi"
mpi_host = "127.0.0.1"
base_port = $base
connect_timeout_ms = 30000
[cluster.tasks]
ps = 1
worker = "rest"
EOF
cat "$source/tests/integration/fashion_mlp_40_steps.toml" >> "$work/mpi.toml"

set +e
out=$(WEFT_PLUGIN_PATH="" timeout 300 mpirun --allow-run-as-root --oversubscribe -np 3 \
  "$weft" train "$source/configs/models/fashion_mlp.wgt" --config "$work/mpi.toml" 2>&1)
rc=$?
set -e
# mpirun gives the ranks a terminal, so progress lines are redrawn in place
# (ESC [K): one line per report here.
out=$(sed 's/\x1b\[K/\n/g' <<< "$out")
echo "$out"
[ $rc -eq 0 ] || fail "mpirun exited $rc"
[ "$(grep -c '^final: step=40 ' <<< "$out")" = 2 ] || fail "expected the final line of both workers"
grep -q "test_accuracy=0\.[0-9]" <<< "$out" || fail "the chief printed no test accuracy"
grep -q "weft train: /job:ps/task:0 stopping (/job:worker/task:0: the chief ended the training run at step 40)" \
  <<< "$out" || fail "the ps task was not stopped by the chief"
sleep 0.5
! pgrep -f "$work/mpi.toml" >/dev/null || fail "processes left behind: $(pgrep -af "$work/mpi.toml")"
echo "PASS"
