#!/usr/bin/env bash
# `--device gpu` on a machine without a usable GPU fails at once with one
# clear line, never a silent wait: ps-worker --standalone, ps-worker in a
# cluster (before it registers) and ps-worker predict exit 69
# (PS_EXIT_UNUSABLE) saying why (a build without CUDA, or no device);
# coordinator --local --device gpu does not restart the workers, and ends
# within seconds printing the worker's own line. Real processes; on a
# machine whose GPU works the test has nothing to check and skips.
set -u
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
worker=${PS_WORKER:?PS_WORKER is not set}
work=$(mktemp -d /tmp/ps-no-gpu-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

. "$(dirname "$0")/cli_lib.sh"

why="--device gpu: no usable GPU"
run 120 "$worker" --standalone --device gpu --limit 64 --test-limit 64 --epochs 1 --progress 0
if [ "$status" = 0 ]; then
  echo "SKIP: this machine has a usable GPU; the failure without one cannot be shown here"
  exit 77
fi

# one_line WORDS: the output is one line, and says WORDS and why.
one_line () {
  [ "$(grep -c . "$work/out")" = 1 ] && grep -qF -- "$1" "$work/out" \
    && grep -qE "no CUDA support|no CUDA device" "$work/out"
}

if [ "$status" = 69 ] && one_line "ps-worker: $why"; then
  pass "ps-worker --standalone --device gpu: exit 69, one line"
else
  fail "ps-worker --standalone --device gpu: exit 69, one line" "exit $status"
fi

# A cluster worker says it before registering: no coordinator is there.
p1=$(free_port); p2=$(free_port)
run 30 env TF_CONFIG="{\"cluster\": {\"chief\": [\"127.0.0.1:$p1\"], \"worker\": [\"127.0.0.1:$p2\"]},
\"task\": {\"type\": \"worker\", \"index\": 0}}" "$worker" --insecure --device gpu
if [ "$status" = 69 ] && one_line "ps-worker: $why"; then
  pass "ps-worker --device gpu in a cluster: exit 69 before registering, one line"
else
  fail "ps-worker --device gpu in a cluster: exit 69 before registering" "exit $status"
fi

printf 'label,pixel\n' >"$work/data.csv"
run 30 "$worker" predict --weights "$work/none.safetensors" --data "$work/data.csv" --device gpu
if [ "$status" = 69 ] && one_line "ps-worker: predict: $why"; then
  pass "ps-worker predict --device gpu: exit 69, one line"
else
  fail "ps-worker predict --device gpu: exit 69, one line" "exit $status"
fi

# The local cluster: no restarts, the worker's line, over in seconds (the
# registration timeout it would otherwise wait out is 60 s). The evaluator
# is a ps-worker with --device gpu too, and whichever of them exits first
# is the one the coordinator names: the evaluator on a loaded machine.
start=$(date +%s)
run 60 "$coordinator" --local --device gpu --epochs 1 --limit 640 --log-dir "$work/logs"
took=$(( $(date +%s) - start ))
if [ "$status" = 1 ] && [ "$took" -lt 30 ] \
   && grep -qE "(worker:[01]|evaluator:0) cannot run: ps-worker: $why" "$work/out" \
   && grep -qE "no CUDA support|no CUDA device" "$work/out" \
   && ! grep -q "restarting in" "$work/out"; then
  pass "coordinator --local --device gpu: exit 1 in ${took} s, no restart, the worker's line"
else
  fail "coordinator --local --device gpu: ends at once with the worker's line" \
    "exit $status after ${took} s"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
