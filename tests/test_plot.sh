#!/bin/bash
# coordinator plot on a real metrics file: a local cluster trains 400 steps
# with progress windows of 0.2 s and an evaluation every 50 steps, and one
# of its workers is killed (SIGKILL) once 100 steps are done, so that the
# file has a failure and, when the supervisor has restarted the worker, a
# recovery. The plot is a PNG (its signature) of the size asked for (the
# IHDR chunk's width and height) with the failure and the recovery marked;
# an empty file, a file that is not JSON lines and a missing gnuplot are
# refused with a clear message and exit 2, and gnuplot's own failure (an
# output directory that does not exist) is reported with its message.
#
# Prints SKIP and exits 77 when gnuplot is not installed (Debian's
# gnuplot-nox; deploy/install-deps.sh installs it). The cluster is stopped
# by its pid, pass or fail.
#
# Environment: PS_COORDINATOR (set by meson).
set -u
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
data=${PS_DATA_DIR:-/usr/share/datasets/fashion-mnist}
if ! command -v gnuplot >/dev/null; then
  echo "SKIP: test_plot: gnuplot is not installed (Debian's gnuplot-nox;" \
    "deploy/install-deps.sh installs it)"
  exit 77
fi
work=$(mktemp -d /tmp/ps-plot-XXXXXX)
coord_pid=""
cleanup () {
  if [ -n "$coord_pid" ]; then
    kill -TERM "$coord_pid" 2>/dev/null
    timeout 60 tail --pid="$coord_pid" -f /dev/null 2>/dev/null || kill -KILL "$coord_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
. "$(dirname "$0")/cli_lib.sh"

# wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds.
wait_for () {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.1
  done
}

# --- a run with a worker killed in the middle --------------------------------
metrics="$work/run.jsonl"
# The one failure is the worker's SIGKILL, which the supervisor sees at
# once; a long heartbeat timeout keeps a loaded machine's slow heartbeats
# (a server once went 3.3 s unheard under ASan at a load of 8) from
# adding failures of their own to the plot's count.
echo '{"log_seconds": 0.2, "heartbeat": {"timeout_ms": 30000}}' >"$work/job.json"
"$coordinator" --local --ps 1 --workers 2 --job "$work/job.json" --epochs 1 --limit 25600 \
  --test-limit 500 --eval-steps 50 --log-dir "$work/logs" --checkpoint-dir "$work/ckpt" \
  --data "$data" --metrics "$metrics" >"$work/coordinator.log" 2>&1 &
coord_pid=$!
# The step of the last progress record, or 0.
step_reached () {
  /usr/bin/python3 -c 'import json, sys
steps = [r["step"] for r in map(json.loads, open(sys.argv[1])) if r["event"] == "progress"]
sys.exit(0 if steps and steps[-1] >= 100 else 1)' "$metrics" 2>/dev/null
}
if wait_for 180 step_reached; then
  worker_pid=$(sed -n 's/.*started worker:1 (pid \([0-9]*\)).*/\1/p' "$work/coordinator.log" | head -n 1)
  kill -KILL "$worker_pid"
fi
timeout 300 tail --pid="$coord_pid" -f /dev/null
wait "$coord_pid"
status=$?
coord_pid=""
cp "$work/coordinator.log" "$work/out"
events=$(/usr/bin/python3 -c 'import json, sys
print(" ".join(r["event"] for r in map(json.loads, open(sys.argv[1]))
               if r["event"] in ("worker_failed", "done")))' "$metrics" 2>&1)
# Every batch trained exactly once, by the check the failure-injection
# harness and the compose test use.
checked=$(/usr/bin/python3 "$(dirname "$0")/faults/check_run.py" --metrics "$metrics" \
  --total 400 --servers 1 --mode async --checkpoint-dir "$work/ckpt" 2>&1)
checker=$?
if [ "$status" = 0 ] && [ "$events" = "worker_failed done" ] && [ "$checker" = 0 ]; then
  pass "a run with worker 1 killed at step 100 or later: worker_failed, then done, every step once"
else
  fail "the run" "exit $status, events '$events', check_run.py exit $checker: $checked" \
    "expected 0, 'worker_failed done' and 0"
fi

# --- the plot -------------------------------------------------------------------
run 60 "$coordinator" plot "$metrics" --out "$work/curves.png" --width 640 --height 480
size=$(/usr/bin/python3 -c 'import struct, sys
head = open(sys.argv[1], "rb").read(24)
ok = head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
print("%dx%d" % struct.unpack(">II", head[16:24]) if ok else "not a PNG")' "$work/curves.png" 2>&1)
if [ "$status" = 0 ] && [ "$size" = 640x480 ] \
   && grep -qE "1 failures and [1-9][0-9]* recoveries marked" "$work/out"; then
  pass "plot: a 640x480 PNG with the failure and the recovery marked"
else
  fail "plot" "exit $status, image $size, expected 0, 640x480 and '1 failures and N recoveries marked'"
fi

# --- what plot refuses -----------------------------------------------------------
: >"$work/empty.jsonl"
expect "plot of an empty file" 2 "empty.jsonl has no records" -- \
  "$coordinator" plot "$work/empty.jsonl" --out "$work/x.png"
echo "not json" >"$work/bad.jsonl"
expect "plot of a file that is not JSON lines" 2 "bad.jsonl: line 1: expected a JSON object" -- \
  "$coordinator" plot "$work/bad.jsonl" --out "$work/x.png"
expect "plot of a missing file" 2 "nonexistent.jsonl" -- \
  "$coordinator" plot "$work/nonexistent.jsonl" --out "$work/x.png"
expect "plot without --out" 2 "--out FILE is required" -- "$coordinator" plot "$metrics"
expect "plot without gnuplot" 2 "gnuplot is not installed" -- \
  env PATH=/nonexistent "$coordinator" plot "$metrics" --out "$work/x.png"
expect "plot into a missing directory" 1 "gnuplot failed|cannot open file" -- \
  "$coordinator" plot "$metrics" --out "$work/nonexistent/x.png"

[ "$failures" = 0 ] || exit 1
