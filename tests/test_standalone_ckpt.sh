#!/usr/bin/env bash
# Standalone training's checkpoints (ps-worker --standalone --checkpoint-dir,
# --checkpoint-every, --resume): the cluster's checkpoint format, and a
# resume that trains every remaining step exactly once.
#
# A straight run of 2 epochs is the reference. A run stopped at the end of
# its first epoch and resumed for the second, and a run that lost its
# newest checkpoints (as a crash after the checkpoint of step 80 leaves
# it: epoch 2, mid-way) and resumed from step 80, both end with a final
# checkpoint whose snapshot files are byte for byte the reference's:
# values, optimizer slots, update counters and the ledger of the batch ids
# applied (a step applied twice would fail the run, one left out would
# change the ledger). The manifests say every step is done, coordinator
# export reads the checkpoint, and the mistakes (a resume with nothing to
# resume, another batch size, a fresh run into a directory that holds
# checkpoints) are refused naming what is wrong.
set -u
worker=${PS_WORKER:?PS_WORKER is not set}
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
work=$(mktemp -d /tmp/ps-standalone-ckpt-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

. "$(dirname "$0")/cli_lib.sh"

# One thread on the CPU: the same arithmetic in the same order in every run.
train=("$worker" --standalone --device cpu --threads 1 --limit 3000 --test-limit 500
       --progress 0)
# 2 epochs of ceil (3000 / 64) = 47 steps: the final checkpoint is of step 94.

# same_state NAME DIR: the final checkpoint in DIR is the reference's, file
# for file.
same_state () {
  local name=$1 dir=$2 ref=$work/straight/ckpt-000000000094 f diff=""
  [ -d "$dir/ckpt-000000000094" ] || { fail "$name" "no checkpoint of step 94 in $dir"; return; }
  for f in "$ref"/*.snap; do
    cmp -s "$f" "$dir/ckpt-000000000094/${f##*/}" || diff="$diff ${f##*/}"
  done
  if [ -z "$diff" ]; then pass "$name"; else fail "$name" "differs:$diff"; fi
}

# manifest_done DIR: watermark, total_steps and updates of DIR's manifest.
manifest_done () {
  python3 -c 'import json, sys
m = json.load(open(sys.argv[1] + "/MANIFEST.json"))
print(m["done"]["watermark"], m["total_steps"], m["updates"], m["mode"], m["data_cursor"]["finished"])' "$1"
}

run 300 "${train[@]}" --epochs 2 --checkpoint-dir "$work/straight" --checkpoint-every 10
if [ "$status" = 0 ] && [ -d "$work/straight/ckpt-000000000080" ] \
   && [ -d "$work/straight/ckpt-000000000094" ]; then
  pass "a straight run checkpoints every 10 steps and at the end"
else
  fail "a straight run checkpoints every 10 steps and at the end" "exit $status"
fi
got=$(manifest_done "$work/straight/ckpt-000000000094")
if [ "$got" = "94 94 94 standalone True" ]; then
  pass "its manifest: every step done, one update each ($got)"
else
  fail "its manifest: every step done" "watermark, total, updates, mode, finished: $got"
fi

# Stopped at the end of epoch 1, resumed for epoch 2.
run 300 "${train[@]}" --epochs 1 --checkpoint-dir "$work/epoch"
run 300 "${train[@]}" --epochs 2 --checkpoint-dir "$work/epoch" --resume
if [ "$status" = 0 ] && grep -q "resuming from .*ckpt-000000000047: 47 steps done" "$work/out"; then
  pass "a resume after epoch 1 starts at step 48"
else
  fail "a resume after epoch 1 starts at step 48" "exit $status"
fi
same_state "epoch 1, then a resume: the state of the straight run" "$work/epoch"

# A crash mid-way through epoch 2, after the checkpoint of step 80.
mkdir "$work/crash"
cp -r "$work/straight/ckpt-000000000080" "$work/crash/"
run 300 "${train[@]}" --epochs 2 --checkpoint-dir "$work/crash" --resume
if [ "$status" = 0 ] && grep -q "resuming from .*ckpt-000000000080: 80 steps done" "$work/out"; then
  pass "a resume from step 80 (mid-epoch) starts at step 81"
else
  fail "a resume from step 80 (mid-epoch) starts at step 81" "exit $status"
fi
same_state "a crash at step 80, then a resume: the state of the straight run" "$work/crash"

expect "coordinator export reads a standalone checkpoint" 0 \
  "exported 6 variables|ckpt-000000000094 (step 94)" -- \
  "$coordinator" export --checkpoint "$work/straight" --format npz --out "$work/w.npz"

# Mistakes.
mkdir "$work/empty"
expect "--resume without --checkpoint-dir" 2 "--resume needs --checkpoint-dir" -- \
  "${train[@]}" --resume
expect "--resume with no checkpoint" nonzero "no usable checkpoint|$work/empty" -- \
  "${train[@]}" --checkpoint-dir "$work/empty" --resume
expect "--resume with another batch size" nonzero "batch_size 64|32" -- \
  "${train[@]}" --checkpoint-dir "$work/crash" --resume --batch 32
expect "a fresh run into a directory with checkpoints" nonzero "--resume|$work/epoch" -- \
  "${train[@]}" --checkpoint-dir "$work/epoch"
expect "--checkpoint-dir with a click-through-rate model" 2 "--checkpoint-dir" -- \
  "$worker" --standalone --model lr --checkpoint-dir "$work/ctr"

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
