#!/usr/bin/env bash
# TF_CONFIG as TensorFlow's documentation writes it, run by the real
# programs on 127.0.0.1 (README.md, TF_CONFIG):
#  (a) MultiWorkerMirroredStrategy's cluster of two workers and no chief,
#      started as two ps-worker processes with TF_CONFIG only (and the same
#      command line, --job included): worker 0 starts the coordinator at
#      worker 0's port + 1, both train mirrored and exit 0, the run reports
#      its steps and an accuracy, and no process is left (nor when worker
#      0 is stopped or killed while its coordinator waits); each TF_CONFIG
#      also carries TensorFlow's "rpc_layer": "grpc", which is ignored
#      with a line saying so (c);
#  (b) ParameterServerStrategy's side-car evaluator: chief, ps and worker
#      started by hand, secured by `coordinator keygen --evaluator`, and an
#      evaluator whose TF_CONFIG lists no evaluator, which registers and
#      evaluates (an "eval" record of role evaluator);
#  and the mistakes: a PS mode for a cluster without ps, an rpc_layer that
#  is not a string. Every wait is on a file or a process, with a generous
#  limit; no sleep decides an outcome.
set -u
worker=${PS_WORKER:?PS_WORKER is not set}
server=${PS_SERVER:?PS_SERVER is not set}
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
data=${PS_DATA_DIR:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d /tmp/ps-tfcompat-XXXXXX)
pids=()
cleanup () {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
failures=0

. "$(dirname "$0")/cli_lib.sh"

# wait_for FILE TEXT SECONDS: until FILE holds TEXT; 1 when it never does.
wait_for () {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -qF -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# wait_exit PID SECONDS: the exit status of background process PID, or 124
# (and the process killed) when it is still running after SECONDS.
wait_exit () {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || { wait "$1"; return $?; }
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null
  wait "$1" 2>/dev/null
  return 124
}

# alive PID: the process runs (a zombie, which a container's init may
# never reap, has ended).
alive () {
  kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# A tiny run: 640 examples in batches of 32, one epoch, 200 to evaluate.
printf '{"model": "mlp", "epochs": 1, "batch_size": 32, "train_limit": 640, "test_limit": 200, "data_dir": "%s"}\n' \
  "$data" >"$work/job.json"

# --- (a) + (c): two workers, no chief ---------------------------------------
# TensorFlow's tutorial's TF_CONFIG, verbatim but for the ports (and the
# rpc_layer its MultiWorkerMirroredStrategy docs add). Worker 0's port + 1
# must be free too: it is the coordinator's.
p0=$(python3 -c 'import socket
while True:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    try:
        socket.socket().bind(("127.0.0.1", p + 1)); print(p); break
    except OSError:
        pass')
while p1=$(free_port); [ "$p1" = "$p0" ] || [ "$p1" = $((p0 + 1)) ]; do :; done
cluster="{\"worker\": [\"localhost:$p0\", \"localhost:$p1\"]}"
for i in 0 1; do
  TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": $i}, \"rpc_layer\": \"grpc\"}" \
    "$worker" --insecure --job "$work/job.json" >"$work/w$i.log" 2>&1 &
  pids+=($!)
  wpids[$i]=$!
done
wait_exit "${wpids[0]}" 90; s0=$?
wait_exit "${wpids[1]}" 30; s1=$?
cp "$work/w0.log" "$work/out"
child=$(sed -n 's/.*started the coordinator (pid \([0-9]*\)).*/\1/p' "$work/w0.log" | head -n 1)
if [ "$s0" = 0 ] && [ "$s1" = 0 ]; then
  pass "chiefless: both workers exit 0"
else
  fail "chiefless: both workers exit 0" "worker 0 exit $s0, worker 1 exit $s1" \
    "worker 1 said: $(tail -n 3 "$work/w1.log")"
fi
if [ -n "$child" ] && grep -q "coordinator on tcp://127.0.0.1:$((p0 + 1))" "$work/w0.log"; then
  pass "chiefless: worker 0 started the coordinator at worker 0's port + 1"
else
  fail "chiefless: worker 0 started the coordinator at worker 0's port + 1"
fi
if grep -q "mirrored mode" "$work/w0.log" \
&& grep -q "training done: 20 steps.*test accuracy 0\.[0-9]" "$work/w0.log" \
&& grep -q "joined ring" "$work/w1.log"; then
  pass "chiefless: trained mirrored, 20 steps and an accuracy"
else
  fail "chiefless: trained mirrored, 20 steps and an accuracy"
fi
if [ -n "$child" ] && ! alive "$child"; then
  pass "chiefless: no process left"
else
  fail "chiefless: no process left" "coordinator pid '${child}' still runs"
fi
if grep -q 'rpc_layer "grpc" ignored' "$work/w1.log"; then
  pass "rpc_layer \"grpc\" accepted and ignored"
else
  cp "$work/w1.log" "$work/out"
  fail "rpc_layer \"grpc\" accepted and ignored"
fi

# Worker 0 stopped or killed while its coordinator waits for worker 1: the
# coordinator goes too (SIGTERM passed on: the run's status, 143; SIGKILL:
# the kernel's PR_SET_PDEATHSIG).
for sig in TERM KILL; do
  log="$work/w0-$sig.log"
  TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
    "$worker" --insecure --job "$work/job.json" >"$log" 2>&1 &
  pids+=($!)
  w0=$!
  wait_for "$log" "waiting for workers" 30
  child=$(sed -n 's/.*started the coordinator (pid \([0-9]*\)).*/\1/p' "$log" | head -n 1)
  kill -"$sig" "$w0"
  wait_exit "$w0" 30; s0=$?
  gone=0
  for ((i = 0; i < 300; i++)); do
    [ -n "$child" ] && ! alive "$child" && { gone=1; break; }
    sleep 0.1
  done
  want=$([ "$sig" = TERM ] && echo 143 || echo 137)
  cp "$log" "$work/out"
  if [ "$gone" = 1 ] && [ "$s0" = "$want" ]; then
    pass "chiefless: worker 0 given SIG$sig exits $want and its coordinator goes too"
  else
    [ -n "$child" ] && kill -9 "$child" 2>/dev/null
    fail "chiefless: worker 0 given SIG$sig exits $want and its coordinator goes too" \
      "worker 0 exit $s0; coordinator pid '$child' gone: $gone"
  fi
done

# --- mistakes ----------------------------------------------------------------
printf '{"mode": "async"}\n' >"$work/async.json"
expect "chiefless: a PS mode without ps refused" 2 \
  "lists no ps task|\"async\"|mirrored" -- \
  env TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
  "$worker" --insecure --job "$work/async.json"
expect "rpc_layer not a string" 2 "'rpc_layer' is not a string" -- \
  env TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 1}, \"rpc_layer\": 1}" \
  "$worker" --insecure

# --- (b) an evaluator its cluster does not list --------------------------------
# ParameterServerStrategy's docs: chief, workers and ps in the cluster, and
# the evaluator started with that cluster and task evaluator:0. Its key
# comes from `coordinator keygen --evaluator` (README.md, Security).
"$coordinator" keygen --out "$work/keys" --ps 1 --workers 1 --evaluator >/dev/null \
  || { echo "FAIL: coordinator keygen"; exit 1; }
c=$(free_port); s=$(free_port); w=$(free_port)
cluster="{\"chief\": [\"localhost:$c\"], \"worker\": [\"localhost:$w\"], \"ps\": [\"localhost:$s\"]}"
tf () { echo "{\"cluster\": $cluster, \"task\": {\"type\": \"$1\", \"index\": 0}}"; }
TF_CONFIG="$(tf chief)" "$coordinator" --keys "$work/keys" --job "$work/job.json" \
  --metrics "$work/metrics.jsonl" >"$work/chief.log" 2>&1 &
pids+=($!); chief=$!
TF_CONFIG="$(tf ps)" "$server" --keys "$work/keys" >"$work/ps.log" 2>&1 &
pids+=($!); ps=$!
TF_CONFIG="$(tf evaluator)" "$worker" --keys "$work/keys" >"$work/evaluator.log" 2>&1 &
pids+=($!); evaluator=$!
# The worker starts once the evaluator is in, so that the evaluation is
# the evaluator's (a worker evaluates while no evaluator is alive).
wait_for "$work/chief.log" "evaluator:0 registered" 30
TF_CONFIG="$(tf worker)" "$worker" --keys "$work/keys" >"$work/worker.log" 2>&1 &
pids+=($!); trainer=$!
wait_exit "$chief" 60; sc=$?
wait_exit "$trainer" 30; sw=$?
wait_exit "$evaluator" 30; se=$?
wait_exit "$ps" 30; sp=$?
cp "$work/chief.log" "$work/out"
if [ "$sc$sw$se$sp" = 0000 ]; then
  pass "evaluator outside the cluster: every process exits 0"
else
  fail "evaluator outside the cluster: every process exits 0" \
    "coordinator $sc, worker $sw, evaluator $se, ps $sp" \
    "evaluator said: $(tail -n 3 "$work/evaluator.log")"
fi
if python3 - "$work/metrics.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evals = [r for r in rows if r["event"] == "eval" and r.get("role") == "evaluator"]
sys.exit(0 if evals and 0 < evals[0]["test_accuracy"] <= 1 else 1)
EOF
then
  pass "evaluator outside the cluster: it evaluated (an eval record of role evaluator)"
else
  fail "evaluator outside the cluster: it evaluated (an eval record of role evaluator)"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
