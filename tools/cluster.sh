#!/usr/bin/env bash
# Starts the tasks of a cluster config on this machine, for tests, demos and
# trying a cluster out before moving it to real machines (docs/distributed.md,
# "Launching").
#
#   tools/cluster.sh train CONFIG MODEL [--logs DIR] [--timeout SECONDS]
#       Every task of [cluster.jobs] runs `weft train MODEL --config CONFIG
#       --job J --task I`: the workers train (worker 0 is the chief), the
#       tasks of the other jobs serve the variables until the chief ends the
#       run. Waits for the workers (at most --timeout seconds, default 3600),
#       then for the others to stop; whatever still runs 30 s later is
#       stopped (SIGTERM, then SIGKILL). Exits 0 when every worker did.
#   tools/cluster.sh serve CONFIG [--logs DIR]
#       Every task runs `weft serve`; returns once each listens, leaving
#       them running (then: weft run GRAPH --config CONFIG ...).
#   tools/cluster.sh stop CONFIG [--logs DIR]
#       Stops the tasks `serve` started (SIGTERM, SIGKILL after 10 s).
#
# Each task's output goes to DIR/<job>-<task>.log (default:
# build/cluster/<config file name without .toml>/); `serve` records the
# process ids in DIR/pids. The config must list its tasks in [cluster.jobs]
# (static membership); clusters started by mpirun or srun are launched by
# those (docs/distributed.md).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
weft=${WEFT:-$here/build/bin/weft}

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "cluster.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] || { usage >&2; exit 1; }
case "$1" in -h|--help|help) usage; exit 0 ;; esac
mode=$1; shift
[ $# -ge 1 ] || die "$mode needs a config file (see --help)"
config=$1; shift
[ -f "$config" ] || die "no config file $config"
config=$(cd "$(dirname "$config")" && pwd)/$(basename "$config")
model=""
if [ "$mode" = train ]; then
  [ $# -ge 1 ] || die "train needs a model graph file after the config (see --help)"
  model=$1; shift
  [ -f "$model" ] || die "no model file $model"
fi
logs="$here/build/cluster/$(basename "$config" .toml)"
logs_given=""  # " --logs DIR" when given: the stop hints repeat it
timeout=3600
while [ $# -gt 0 ]; do
  case "$1" in
    --logs) logs=${2:?--logs needs a folder}; logs_given=" --logs $2"; shift 2 ;;
    --timeout) timeout=${2:?--timeout needs seconds}; shift 2 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
case "$mode" in train|serve|stop) ;; *) die "unknown mode '$mode': train, serve or stop (see --help)" ;; esac
[ -x "$weft" ] || die "$weft is not built: run tools/setup.sh first"
mkdir -p "$logs"

# "job task" per line, from [cluster.jobs] (Python's tomllib reads TOML).
tasks=$(python3 - "$config" <<'EOF'
import sys, tomllib
path = sys.argv[1]
try:
    with open(path, "rb") as f:
        doc = tomllib.load(f)
except Exception as e:
    sys.exit(f"cluster.sh: {path}: {e}")
cluster = doc.get("cluster")
if not isinstance(cluster, dict):
    sys.exit(f"cluster.sh: {path} has no [cluster] section")
if cluster.get("membership", "static") != "static":
    sys.exit(f"cluster.sh: {path} takes its tasks from {cluster['membership']}; start it with that launcher")
jobs = cluster.get("jobs")
if not isinstance(jobs, dict) or not jobs:
    sys.exit(f"cluster.sh: {path} has no [cluster.jobs]")
for job, addresses in jobs.items():
    for i in range(len(addresses)):
        print(job, i)
EOF
)

stop_pids() {  # pid... : SIGTERM, then SIGKILL after 10 s
  local pids=("$@") alive
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 1 100); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

if [ "$mode" = stop ]; then
  [ -f "$logs/pids" ] || die "nothing to stop: no $logs/pids (was the cluster started with 'serve'?)"
  mapfile -t pids < <(cut -d' ' -f3 "$logs/pids")
  stop_pids "${pids[@]}"
  rm -f "$logs/pids"
  echo "cluster.sh: stopped ${#pids[@]} task(s)"
  exit 0
fi

declare -A pid_of=()
started=()
cleanup() { [ ${#started[@]} -gt 0 ] && stop_pids "${started[@]}"; }

start_task() {  # job task command...
  local job=$1 task=$2; shift 2
  "$@" > "$logs/$job-$task.log" 2>&1 &
  pid_of["$job $task"]=$!
  started+=($!)
  echo "cluster.sh: /job:$job/task:$task (pid $!) → $logs/$job-$task.log"
}

wait_listening() {  # job task: until its log says it listens (60 s)
  local log="$logs/$1-$2.log" pid=${pid_of["$1 $2"]}
  for _ in $(seq 1 600); do
    grep -q "listening on" "$log" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; die "/job:$1/task:$2 exited before it listened (log above)"; }
    sleep 0.1
  done
  die "/job:$1/task:$2 did not listen within 60 s (see $log)"
}

if [ "$mode" = serve ]; then
  [ ! -f "$logs/pids" ] || die "$logs/pids exists: stop that cluster first (tools/cluster.sh stop $config$logs_given)"
  trap cleanup ERR INT TERM
  while read -r job task; do
    start_task "$job" "$task" "$weft" serve --config "$config" --job "$job" --task "$task"
  done <<< "$tasks"
  : > "$logs/pids"
  while read -r job task; do
    wait_listening "$job" "$task"
    echo "$job $task ${pid_of["$job $task"]}" >> "$logs/pids"
  done <<< "$tasks"
  trap - ERR INT TERM
  echo "cluster.sh: $(wc -l < "$logs/pids") task(s) serving; stop them with: tools/cluster.sh stop $config$logs_given"
  exit 0
fi

# train
trap cleanup EXIT
trap 'exit 130' INT TERM
while read -r job task; do
  start_task "$job" "$task" "$weft" train "$model" --config "$config" --job "$job" --task "$task"
done <<< "$tasks"
deadline=$(( $(date +%s) + timeout ))
status=0
while read -r job task; do
  [ "$job" = worker ] || continue
  pid=${pid_of["$job $task"]}
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "cluster.sh: /job:worker/task:$task still runs after $timeout s; stopping the cluster" >&2
      exit 124
    fi
    sleep 0.2
  done
  rc=0
  wait "$pid" || rc=$?
  final=$(grep "^final:" "$logs/$job-$task.log" | tail -n 1 || true)
  echo "cluster.sh: /job:worker/task:$task exited $rc${final:+: $final}"
  [ $rc -eq 0 ] || { [ $status -ne 0 ] || status=$rc; tail -n 5 "$logs/$job-$task.log" >&2; }
done <<< "$tasks"
# The chief stops the other tasks when the run ends; give them 30 s.
others=()
while read -r job task; do
  [ "$job" = worker ] || others+=("${pid_of["$job $task"]}")
done <<< "$tasks"
for _ in $(seq 1 300); do
  alive=0
  for p in "${others[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive = 0 ] && break
  sleep 0.1
done
leftover=0
for p in "${others[@]}"; do kill -0 "$p" 2>/dev/null && leftover=$((leftover + 1)); done
if [ $leftover -gt 0 ]; then
  echo "cluster.sh: $leftover task(s) still ran 30 s after the workers ended; stopping them" >&2
fi
exit $status
