#!/usr/bin/env bash
# A stop signal never loses the model: SIGINT (Ctrl-C) or SIGTERM to the
# coordinator, or to standalone training, writes a final checkpoint of the
# steps done and then stops every process cleanly; a second signal stops
# at once. Real processes throughout:
#
# - a local cluster signalled mid-run (after its first progress record)
#   exits 130, its metrics file ends with a "stopped" record whose
#   checkpoint is of the steps it had reached, its children have all
#   exited, coordinator export reads that checkpoint, and --resume
#   completes the run with every step applied exactly once
#   (tests/faults/check_run.py over both metrics files);
# - a local cluster signalled twice, its workers frozen (SIGSTOP) so that
#   the final checkpoint cannot drain, exits 130 within seconds, saying it
#   stopped at once, and leaves no process behind;
# - standalone training signalled mid-run exits 130 after the checkpoint
#   of the steps it had done, and --resume trains the rest, each step once
#   (the final manifest's watermark, total and updates agree);
# - a cluster whose every process gets SIGTERM at once, as docker compose
#   stop, scancel or a deleted Kubernetes Job do (a local cluster without
#   restarts stands in for them): the servers serve on until the
#   coordinator's final checkpoint is written and it tells them to stop,
#   so the coordinator exits 143 with that checkpoint, and every process
#   exits;
# - a signal while evaluations keep the evaluator busy (one after every
#   step, on the whole test set), in every mode: no step is
#   handed out once the signal has come, so the run stops at the
#   checkpoint it wrote, and the stopped record, the message and the
#   checkpoint name the same step (before, workers trained on while the
#   stop waited for the evaluation: "after 82 of 141 steps; the
#   checkpoint of step 55", or the run went on to its end and exited 0).
set -u
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
worker=${PS_WORKER:?PS_WORKER is not set}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/ps-stop-signal-XXXXXX)
started=()
cleanup () {
  # Everything this test started, by pid: the coordinators and standalone
  # runs, and the children the coordinators' logs name (thawed first).
  local pid
  for pid in "${started[@]}" $(children "$work"/*.out); do
    kill -CONT "$pid" 2>/dev/null
    kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
failures=0

. "$here/cli_lib.sh"

# children FILE...: the pids of the children a coordinator's log says it
# started.
children () {
  sed -n 's/.*supervisor: started .* (pid \([0-9]*\)).*/\1/p' "$@" 2>/dev/null
}

# wait_for FILE PATTERN: wait (up to 120 s) until FILE holds PATTERN.
wait_for () {
  for _ in $(seq 1 1200); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# wait_exit PID LIMIT: wait up to LIMIT seconds for background job PID to
# end; its status in $status (124 when it did not).
wait_exit () {
  local pid=$1 limit=$2
  for _ in $(seq 1 $((limit * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then status=124; return; fi
  wait "$pid"
  status=$?
}

# orphans FILE: the children named in a coordinator's log that still run.
orphans () {
  local pid left=""
  for pid in $(children "$1"); do
    kill -0 "$pid" 2>/dev/null && left="$left $pid"
  done
  echo "$left"
}

# last_field FILE FIELD: field FIELD of the last record of metrics FILE.
last_field () {
  python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(rows[-1].get(sys.argv[2]))' "$1" "$2"
}

# signal_run SIGNAL OUT METRICS PATTERN CMD...: start CMD in the
# background (output in OUT), send SIGNAL to it once METRICS holds
# PATTERN (with $to_children set, also to the children OUT names then),
# and wait up to 120 s for it to end. Leaves its exit status in $status
# (none: PATTERN never came), its output in $work/out, and its metrics
# file's last record's event, steps and checkpoint_step in $event, $steps
# and $at.
to_children=""
signal_run () {
  local signal=$1 out=$2 metrics=$3 pattern=$4 pid kids=()
  shift 4
  "$@" >"$out" 2>&1 &
  pid=$!
  started+=("$pid")
  status=none
  if wait_for "$metrics" "$pattern"; then
    [ -n "$to_children" ] && mapfile -t kids < <(children "$out")
    kill -"$signal" "$pid" "${kids[@]}"
    wait_exit "$pid" 120
  fi
  cp "$out" "$work/out"
  event=$(last_field "$metrics" event 2>/dev/null)
  steps=$(last_field "$metrics" steps 2>/dev/null)
  at=$(last_field "$metrics" checkpoint_step 2>/dev/null)
}

echo '{"log_seconds": 0.5}' >"$work/job.json"
cluster=("$coordinator" --local --job "$work/job.json" --limit 3000 --test-limit 500
         --epochs 3)
total=141   # 3 epochs of ceil (3000 / 64) = 47 steps

# 1. A local cluster stopped by SIGINT mid-run, then resumed.
signal_run INT "$work/c1.out" "$work/m1.jsonl" '"event":"progress"' \
  "${cluster[@]}" --metrics "$work/m1.jsonl" --checkpoint-dir "$work/ck" --log-dir "$work/logs"
ckpt=$(printf '%s/ck/ckpt-%012d' "$work" "${at:-0}" 2>/dev/null)
if [ "$status" = 130 ] && [ "$event" = stopped ] && [ "$at" = "$steps" ] \
   && [ "$steps" -gt 0 ] && [ "$steps" -lt "$total" ] && [ -f "$ckpt/MANIFEST.json" ] \
   && grep -q "stopped by SIGINT after $steps of $total steps" "$work/out"; then
  pass "SIGINT: exit 130, the checkpoint of step $steps (of $total), a stopped record"
else
  fail "SIGINT: exit 130, a checkpoint of the steps reached, a stopped record" \
    "exit $status, last record $event, steps $steps, checkpoint_step $at"
fi
left=$(orphans "$work/c1.out")
if [ -z "$left" ] && [ -n "$(children "$work/c1.out")" ]; then
  pass "SIGINT: every child of the local cluster has exited"
else
  fail "SIGINT: every child of the local cluster has exited" "still running:$left"
fi
run 60 "$coordinator" export --checkpoint "$ckpt" --format npz --out "$work/model.npz"
if [ "$status" = 0 ] && [ -s "$work/model.npz" ]; then
  pass "coordinator export reads the checkpoint the signal wrote"
else
  fail "coordinator export reads the checkpoint the signal wrote" "exit $status"
fi
run 300 "${cluster[@]}" --metrics "$work/m2.jsonl" --checkpoint-dir "$work/ck" \
  --log-dir "$work/logs" --resume
if [ "$status" = 0 ] && grep -q "restored every server from .*ckpt-0*$steps (step $steps)" \
   "$work/out"; then
  pass "--resume continues from step $steps and completes"
else
  fail "--resume continues from step $steps and completes" "exit $status"
fi
if /usr/bin/python3 "$here/faults/check_run.py" --metrics "$work/m1.jsonl" \
   --metrics "$work/m2.jsonl" --total "$total" --servers 2 >"$work/out" 2>&1; then
  pass "stopped and resumed: every step applied exactly once"
else
  fail "stopped and resumed: every step applied exactly once"
fi

# 2. A second signal while the final checkpoint waits on frozen workers.
# Their silence is never judged (the timeout is a minute), so the
# checkpoint waits for their steps until the second signal, however late
# a loaded machine lets it come.
"${cluster[@]}" --heartbeat-timeout-ms 60000 --metrics "$work/m3.jsonl" \
  --checkpoint-dir "$work/ck3" --log-dir "$work/logs3" >"$work/c3.out" 2>&1 &
pid=$!
started+=("$pid")
status=none
if wait_for "$work/m3.jsonl" '"event":"progress"'; then
  for w in $(sed -n 's/.*supervisor: started worker:.* (pid \([0-9]*\)).*/\1/p' "$work/c3.out"); do
    kill -STOP "$w"
  done
  kill -INT "$pid"
  if wait_for "$work/c3.out" "writing a final checkpoint"; then
    kill -INT "$pid"
    # The supervisor gives each child 5 s to stop before SIGKILL.
    wait_exit "$pid" 30
  fi
fi
cp "$work/c3.out" "$work/out"
left=$(orphans "$work/c3.out")
if [ "$status" = 130 ] && grep -q "SIGINT: stopping at once" "$work/out" \
   && [ "$(last_field "$work/m3.jsonl" event)" = failed ] && [ -z "$left" ]; then
  pass "a second SIGINT stops at once (exit 130), no process left"
else
  fail "a second SIGINT stops at once (exit 130), no process left" \
    "exit $status, still running:$left"
fi

# 3. Standalone training stopped by SIGTERM mid-run, then resumed.
standalone=("$worker" --standalone --device cpu --threads 1 --limit 3000 --test-limit 500
            --progress 0)
signal_run TERM "$work/s1.out" "$work/s1.jsonl" '"event":"epoch"' \
  "${standalone[@]}" --epochs 50 --checkpoint-dir "$work/sck" --metrics "$work/s1.jsonl"
sckpt=$(printf '%s/sck/ckpt-%012d' "$work" "${steps:-0}" 2>/dev/null)
if [ "$status" = 143 ] && [ "$event" = stopped ] && [ "$steps" -ge 47 ] \
   && [ "$steps" -lt 2350 ] && [ -f "$sckpt/MANIFEST.json" ] \
   && grep -q "stopped by SIGTERM after $steps of 2350 steps" "$work/out"; then
  pass "standalone SIGTERM: exit 143, the checkpoint of step $steps, a stopped record"
else
  fail "standalone SIGTERM: exit 143, the checkpoint of the steps done" \
    "exit $status, last record $event, steps $steps"
fi
epochs=$(( ${steps:-0} / 47 + 1 ))
run 300 "${standalone[@]}" --epochs "$epochs" --checkpoint-dir "$work/sck" --resume
final=$(printf '%s/sck/ckpt-%012d' "$work" $((epochs * 47)))
got=$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1] + "/MANIFEST.json"))
print(m["done"]["watermark"], m["total_steps"], m["updates"])' "$final" 2>/dev/null)
want="$((epochs * 47)) $((epochs * 47)) $((epochs * 47))"
if [ "$status" = 0 ] && grep -q "resuming from .*ckpt-0*$steps: $steps steps done" "$work/out" \
   && [ "$got" = "$want" ]; then
  pass "standalone --resume from step $steps: every step of $epochs epochs applied once"
else
  fail "standalone --resume: every step applied once" \
    "exit $status; watermark, total, updates: $got (expected $want)"
fi

# 4. SIGTERM to every process at once.
to_children=yes
signal_run TERM "$work/c4.out" "$work/m4.jsonl" '"event":"progress"' \
  "${cluster[@]}" --no-restart --metrics "$work/m4.jsonl" --checkpoint-dir "$work/ck4" \
  --log-dir "$work/logs4"
to_children=""
left=$(orphans "$work/c4.out")
if [ "$status" = 143 ] && [ "$event" = stopped ] && [ "$at" = "$steps" ] \
   && [ -f "$(printf '%s/ck4/ckpt-%012d' "$work" "${at:-0}")/MANIFEST.json" ] && [ -z "$left" ]; then
  pass "SIGTERM to every process: the servers outlive the final checkpoint (step $at)"
else
  fail "SIGTERM to every process: the final checkpoint is written, every process exits" \
    "exit $status, last record $event, steps $steps, checkpoint_step $at, still running:$left"
fi

# 5. A signal while an evaluation is in flight.
for mode in async ssp sync mirrored; do
  echo "{\"log_seconds\": 0.5, \"mode\": \"$mode\", \"eval\": {\"every_steps\": 1}}" \
    >"$work/job5.json"
  signal_run TERM "$work/c5-$mode.out" "$work/m5-$mode.jsonl" '"event":"progress"' \
    "$coordinator" --local --job "$work/job5.json" --limit 3000 --test-limit 10000 --epochs 5 \
    --metrics "$work/m5-$mode.jsonl" --checkpoint-dir "$work/ck5-$mode" \
    --log-dir "$work/logs5-$mode"
  if [ "$status" = 143 ] && [ "$event" = stopped ] && [ "$at" = "$steps" ] \
     && [ "$steps" -gt 0 ] && [ "$steps" -lt 235 ] \
     && [ -f "$(printf '%s/ck5-%s/ckpt-%012d' "$work" "$mode" "${at:-0}")/MANIFEST.json" ] \
     && grep -q "stopped by SIGTERM after $steps of 235 steps; the checkpoint of step $steps " \
          "$work/out"; then
    pass "$mode: a signal during an evaluation stops at its checkpoint (step $steps)"
  else
    fail "$mode: a signal during an evaluation stops at its checkpoint, no step after it" \
      "exit $status, last record $event, steps $steps, checkpoint_step $at"
  fi
done

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
