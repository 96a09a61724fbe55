#!/usr/bin/env bash
# A cluster across real network interfaces: two network namespaces joined
# by a veth pair (made here, as root, and removed at the end), a parameter
# server in one and a worker in the other, each a `weft serve` process on
# its own interface; the client runs in the first namespace. The sample
# MLP split across them (dense1 on the ps) must give the bytes one process
# gives. Then 1 ps + 2 workers train the sample MLP across the namespaces
# (the chief in the second, the others in the first) and end by themselves.
# Then, in a namespace whose resolver is its own loopback (nothing answers
# there), an address that does not resolve must be named.
#
#   cluster_netns_test.sh WEFT_BINARY SOURCE_DIR
#
# Exits 77 (CTest: skipped) with a message where namespaces are not
# permitted. Traffic stays inside the namespaces (192.0.2.0/24 is
# TEST-NET-1, never routed); every wait is bounded.
set -euo pipefail
weft=$1
source=$2
id="weft-t$$"
a="${id}a"
b="${id}b"
work=$(mktemp -d)
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "/etc/netns/$a" "$work"
}
trap cleanup EXIT

if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: network namespaces need root and iproute2 (ip)"
  exit 77
fi
if ! ip netns add "$a" 2>"$work/err"; then
  echo "SKIP: cannot create a network namespace here: $(cat "$work/err")"
  exit 77
fi
ip netns add "$b"
ip link add "${id}x" type veth peer name "${id}y"
ip link set "${id}x" netns "$a"
ip link set "${id}y" netns "$b"
ip -n "$a" addr add 192.0.2.1/24 dev "${id}x"
ip -n "$b" addr add 192.0.2.2/24 dev "${id}y"
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
done
ip -n "$a" link set "${id}x" up
ip -n "$b" link set "${id}y" up

cat >"$work/cluster.toml" <<EOF
[cluster]
transport = "tcp"
connect_timeout_ms = 20000
rpc_timeout_ms = 30000
[cluster.jobs]
ps = ["192.0.2.1:7070"]
worker = ["192.0.2.2:7071"]
[placement.pins]
"dense1/*" = "/job:ps/task:0"
"*" = "/job:worker/task:0"
EOF

wait_listening() {  # LOG PID
  for _ in $(seq 1 300); do
    grep -q "listening on" "$1" && return 0
    kill -0 "$2" 2>/dev/null || { echo "FAIL: the task exited:"; cat "$1"; exit 1; }
    sleep 0.1
  done
  echo "FAIL: the task did not start within 30 s:"; cat "$1"; exit 1
}

export WEFT_PLUGIN_PATH=
ip netns exec "$a" "$weft" serve --config "$work/cluster.toml" --job ps --task 0 >"$work/ps.log" 2>&1 &
pids+=($!)
wait_listening "$work/ps.log" "${pids[-1]}"
ip netns exec "$b" "$weft" serve --config "$work/cluster.toml" --job worker --task 0 >"$work/worker.log" 2>&1 &
pids+=($!)
wait_listening "$work/worker.log" "${pids[-1]}"

model="$source/configs/models/mnist_mlp.wgt"
feed="images=$source/configs/models/sample_digits_784.npy"
ip netns exec "$a" timeout 120 "$weft" run "$model" --config "$work/cluster.toml" --feed "$feed" \
  --fetch logits --fetch dense1/Relu --out "$work/cluster" --quiet 2>"$work/run.err" ||
  { echo "FAIL: weft run on the cluster:"; cat "$work/run.err"; exit 1; }
timeout 120 "$weft" run "$model" --feed "$feed" --fetch logits --fetch dense1/Relu --out "$work/local" --quiet
for f in logits.npy dense1_Relu.npy; do
  cmp "$work/cluster/$f" "$work/local/$f" || { echo "FAIL: $f differs between the cluster and one process"; exit 1; }
done
ip netns exec "$a" timeout 60 "$weft" place "$model" --config "$work/cluster.toml" >"$work/place.out"
grep -q "/job:ps/task:0/device:CPU:0" "$work/place.out" || { echo "FAIL: nothing placed on the ps"; cat "$work/place.out"; exit 1; }
grep -q "/job:worker/task:0/device:CPU:0" "$work/place.out" || { echo "FAIL: nothing on the worker"; exit 1; }
echo "ok: the MLP split across two namespaces over veth matches one process bit for bit"

# Training across the namespaces: the ps and worker 1 in one, the chief in
# the other, every task running `weft train` (the ps task serves until the
# chief ends the run). 40 steps each; both workers and the ps must end by
# themselves.
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  cat >"$work/train.toml" <<EOF
[cluster]
transport = "tcp"
connect_timeout_ms = 20000
rpc_timeout_ms = 30000
[cluster.jobs]
ps = ["192.0.2.1:7080"]
worker = ["192.0.2.2:7081", "192.0.2.1:7082"]
EOF
  cat "$source/tests/integration/fashion_mlp_40_steps.toml" >>"$work/train.toml"
  mlp="$source/configs/models/fashion_mlp.wgt"
  train_pids=()
  for spec in "$a ps 0" "$b worker 0" "$a worker 1"; do
    read -r ns job task <<<"$spec"
    ip netns exec "$ns" timeout 300 "$weft" train "$mlp" --config "$work/train.toml" --job "$job" --task "$task" \
      >"$work/train-$job-$task.log" 2>&1 &
    train_pids+=($!)
    pids+=($!)
  done
  for i in 0 1 2; do
    wait "${train_pids[$i]}" || { echo "FAIL: training task $i exited $?:"; cat "$work"/train-*.log; exit 1; }
  done
  grep -q "^final: step=40 .*test_accuracy=0\." "$work/train-worker-0.log" ||
    { echo "FAIL: the chief's final line:"; cat "$work/train-worker-0.log"; exit 1; }
  grep -q "^final: step=40 " "$work/train-worker-1.log" ||
    { echo "FAIL: worker 1's final line:"; cat "$work/train-worker-1.log"; exit 1; }
  grep -q "stopping (/job:worker/task:0: the chief ended the training run at step 40)" "$work/train-ps-0.log" ||
    { echo "FAIL: the ps task was not stopped by the chief:"; cat "$work/train-ps-0.log"; exit 1; }
  echo "ok: 1 ps + 2 workers trained across the namespaces: $(grep '^final:' "$work/train-worker-0.log")"
else
  echo "note: dataset-fashion-mnist is not installed; the training across namespaces was skipped"
fi

# An address that does not resolve: the namespace's resolver is its own
# loopback, where nothing answers, so the lookup fails at once.
mkdir -p "/etc/netns/$a"
echo "nameserver 127.0.0.1" >"/etc/netns/$a/resolv.conf"
cat >"$work/unresolvable.toml" <<EOF
[cluster]
connect_timeout_ms = 3000
[cluster.jobs]
ps = ["no-such-task.invalid:7070"]
EOF
set +e
ip netns exec "$a" timeout 60 "$weft" devices --config "$work/unresolvable.toml" >"$work/dns.out" 2>&1
status=$?
set -e
if [ "$status" -ne 1 ] || ! grep -q "cannot resolve host 'no-such-task.invalid'" "$work/dns.out"; then
  echo "FAIL: an unresolvable task address (exit $status):"; cat "$work/dns.out"; exit 1
fi
grep -q "/job:ps/task:0" "$work/dns.out" || { echo "FAIL: the task is not named:"; cat "$work/dns.out"; exit 1; }
echo "ok: an unresolvable address is named: $(head -1 "$work/dns.out")"
