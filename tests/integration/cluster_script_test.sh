#!/usr/bin/env bash
# tools/cluster.sh on a cluster of one ps and two workers on loopback ports
# chosen here: `train` runs a short training of the sample MLP on every
# task and exits 0 with each task's log in its own file and nothing left
# running; `serve` + `stop` start and stop `weft serve` tasks; bad
# arguments are named. Every wait is bounded (cluster.sh's own timeouts).
#
#   cluster_script_test.sh WEFT_BINARY SOURCE_DIR
# shellcheck source=cluster_test_lib.sh
source "$(dirname "$0")/cluster_test_lib.sh"
export WEFT="$weft" WEFT_PLUGIN_PATH=""

if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "SKIP: dataset-fashion-mnist is not installed"
  exit 77
fi

read -r p0 p1 p2 < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
fashion=/usr/share/datasets/fashion-mnist
cat > "$work/c.toml" <<EOF
[cluster]
connect_timeout_ms = 30000
[cluster.jobs]
ps = ["127.0.0.1:$p0"]
worker = ["127.0.0.1:$p1", "127.0.0.1:$p2"]
EOF
cat "$source/tests/integration/fashion_mlp_40_steps.toml" >> "$work/c.toml"

echo "== train"
out=$("$source/tools/cluster.sh" train "$work/c.toml" "$source/configs/models/fashion_mlp.wgt" --logs "$work/logs" --timeout 300 2>&1) || fail "train exited $?: $out"
echo "$out"
grep -q "/job:worker/task:0 exited 0: final: step=40 " <<< "$out" || fail "no final line of the chief"
grep -q "/job:worker/task:1 exited 0: final: step=40 " <<< "$out" || fail "no final line of worker 1"
for t in ps-0 worker-0 worker-1; do [ -s "$work/logs/$t.log" ] || fail "no log $t.log"; done
grep -q "weft train: /job:ps/task:0 stopping (/job:worker/task:0: the chief ended the training run at step 40)" \
  "$work/logs/ps-0.log" || fail "the ps task did not stop at the chief's word: $(cat "$work/logs/ps-0.log")"
! pgrep -f "$work/c.toml" >/dev/null || fail "processes left running: $(pgrep -af "$work/c.toml")"

echo "== serve, devices, stop"
served=$("$source/tools/cluster.sh" serve "$work/c.toml" --logs "$work/served") || fail "serve failed: $served"
# The stop hint works as printed: with the --logs folder it was given.
grep -q "stop them with: tools/cluster.sh stop $work/c.toml --logs $work/served" <<< "$served" \
  || fail "the stop hint lacks --logs: $served"
[ "$(wc -l < "$work/served/pids")" = 3 ] || fail "serve did not record 3 tasks"
devices=$("$weft" devices --config "$work/c.toml") || fail "weft devices failed: $devices"
for t in /job:ps/task:0 /job:worker/task:0 /job:worker/task:1; do
  grep -q "$t/device:CPU:0" <<< "$devices" || fail "weft devices does not list $t: $devices"
done
"$source/tools/cluster.sh" stop "$work/c.toml" --logs "$work/served" | grep -q "stopped 3 task(s)" || fail "stop"
! pgrep -f "$work/c.toml" >/dev/null || fail "processes left after stop: $(pgrep -af "$work/c.toml")"

echo "== bad arguments"
msg=$("$source/tools/cluster.sh" train "$work/c.toml" "$work/nope.wgt" 2>&1) && fail "a missing model was accepted"
grep -q "cluster.sh: no model file $work/nope.wgt" <<< "$msg" || fail "missing model: $msg"
msg=$("$source/tools/cluster.sh" stop "$work/c.toml" --logs "$work/served" 2>&1) && fail "stop without a cluster"
grep -q "nothing to stop: no $work/served/pids" <<< "$msg" || fail "stop twice: $msg"
printf '[cluster]\nmembership = "mpi"\n[cluster.tasks]\nps = 1\nworker = "rest"\n' > "$work/mpi.toml"
msg=$("$source/tools/cluster.sh" serve "$work/mpi.toml" 2>&1) && fail "an mpi cluster was started"
grep -q "takes its tasks from mpi; start it with that launcher" <<< "$msg" || fail "mpi membership: $msg"
msg=$("$source/tools/cluster.sh" launch "$work/c.toml" 2>&1) && fail "an unknown mode was accepted"
grep -q "unknown mode 'launch'" <<< "$msg" || fail "unknown mode: $msg"
echo "PASS"
