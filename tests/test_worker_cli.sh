#!/usr/bin/env bash
# ps-worker's command line: --help and --summary, every kind of bad option
# refused with a message that names it (and never a crash), cluster mode's
# mistakes in the cluster spec and the task refused the same way, SIGTERM
# while waiting for the coordinator, missing and damaged data files named,
# --device gpu refused where there is no GPU (and used where there is one),
# a quick real training run with its metrics file, evaluation every N steps
# (--eval-steps) and its "eval" metrics objects. The accuracy target of the
# full 3-epoch cnn run is a meson test of its own (test_worker_accuracy.sh).
set -u
worker=${PS_WORKER:?PS_WORKER is not set}
data=${PS_DATA_DIR:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d /tmp/ps-worker-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Every process of the test runs secured, by one set of keys made here
# (README.md, Security), named by PS_KEYS.
"${PS_COORDINATOR:?PS_COORDINATOR is not set}" keygen --out "$work/keys" --ps 4 --workers 4 \
  --evaluator >/dev/null || { echo "FAIL: coordinator keygen"; exit 1; }
export PS_KEYS="$work/keys"
failures=0

. "$(dirname "$0")/cli_lib.sh"

# --- help, summary, mode ---------------------------------------------------
expect "--help" 0 "--standalone|--cluster|--task|--job=FILE|schemas/job.md" -- "$worker" --help
expect "--summary (cnn)" 0 "total parameters: 347146|conv2d|dense_1" -- "$worker" --summary
expect "--summary --model mlp" 0 "total parameters: 101770" -- "$worker" --summary --model mlp
expect "-m mlp --summary" 0 "total parameters: 101770" -- "$worker" -m mlp --summary
expect "unknown option" 2 \
  "ps-worker: unrecognized option '--frobnicate'|Try \`ps-worker --help'" -- \
  "$worker" --standalone --frobnicate
expect "stray argument" 2 "ps-worker: unexpected argument 'extra'" -- \
  "$worker" --standalone extra
# --job is accepted (worker 0 of a cluster without a chief uses it; the
# others ignore it): it is no standalone option in cluster mode.
expect "--job in cluster mode" 2 "no cluster spec" -- \
  env -u TF_CONFIG "$worker" --job "$work/job.json"
# predict's own mistakes name the subcommand.
expect "predict without --weights" 2 "ps-worker predict: --weights FILE|DIR is required" -- \
  "$worker" predict --data "$data/t10k-images-idx3-ubyte.gz"
expect "predict without --data" 2 "ps-worker predict: --data FILE is required" -- \
  "$worker" predict -w "$work/none.safetensors"
expect "predict -b 0" 2 'ps-worker predict: --batch "0": expected a whole number' -- \
  "$worker" predict -w "$work/none.safetensors" -D "$data/t10k-images-idx3-ubyte.gz" -b 0

# --- cluster mode: the spec and the task ------------------------------------
# Without --standalone the worker needs a cluster spec with a chief (the
# coordinator) and a worker or evaluator task in range; every mistake exits
# 2 naming the source and the key. Nothing listens on these addresses.
chief_ok='"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]'
expect "no TF_CONFIG and no --cluster" 2 "TF_CONFIG|--cluster" -- env -u TF_CONFIG "$worker"
expect "standalone option in cluster mode" 2 "--data|--standalone" -- \
  env -u TF_CONFIG "$worker" --data "$data"
expect "--task with --standalone" 2 "--task|--standalone" -- \
  env -u TF_CONFIG "$worker" --standalone --task worker:0
# A cluster of workers only has its coordinator at worker 0's port + 1
# (README.md, TF_CONFIG); where another task has that address, it is said.
expect "TF_CONFIG without chief, coordinator address taken" 2 \
  "TF_CONFIG|chief|127.0.0.1:3|cluster.worker[1]" -- \
  env TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:2", "127.0.0.1:3"]}, "task": {"type": "worker", "index": 1}}' \
  "$worker"
expect "TF_CONFIG task type ps" 2 "\"ps\"|worker or an evaluator" -- \
  env TF_CONFIG="{\"cluster\": {$chief_ok}, \"task\": {\"type\": \"ps\", \"index\": 0}}" "$worker"
expect "--task ps:0" 2 "\"ps\"|worker or an evaluator" -- \
  env TF_CONFIG="{\"cluster\": {$chief_ok}}" "$worker" --task ps:0
expect "TF_CONFIG task index out of range" 2 "TF_CONFIG|task.index|cluster.worker" -- \
  env TF_CONFIG="{\"cluster\": {$chief_ok}, \"task\": {\"type\": \"worker\", \"index\": 3}}" \
  "$worker"
expect "--task index out of range" 2 "worker:3|out of range|cluster.worker" -- \
  env TF_CONFIG="{\"cluster\": {$chief_ok}}" "$worker" --task worker:3
# evaluator:0 is taken without evaluators (TensorFlow's side-car evaluator);
# no other index is.
expect "--task evaluator:1 without evaluators" 2 "evaluator:1|out of range" -- \
  env TF_CONFIG="{\"cluster\": {$chief_ok}}" "$worker" --task evaluator:1
expect "--task without index" 2 "--task|TYPE:INDEX" -- \
  env TF_CONFIG="{\"cluster\": {$chief_ok}}" "$worker" --task worker
expect "--task bad index" 2 "--task|worker:x" -- \
  env TF_CONFIG="{\"cluster\": {$chief_ok}}" "$worker" --task worker:x
expect "no task anywhere" 2 "task|--task" -- \
  env TF_CONFIG="{\"cluster\": {$chief_ok}}" "$worker"
expect "unreadable --cluster file" 2 "$work/nonexistent.json" -- \
  env -u TF_CONFIG "$worker" --cluster "$work/nonexistent.json" --task worker:0
printf '{"cluster": {"worker": ["127.0.0.1:2", "127.0.0.1:3"]}}\n' >"$work/nochief.json"
expect "--cluster file without chief, coordinator address taken" 2 \
  "nochief.json|chief|127.0.0.1:3|cluster.worker[1]" -- \
  env -u TF_CONFIG "$worker" --cluster "$work/nochief.json" --task worker:1
printf '{"cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},\n "task": 7}\n' \
  >"$work/badtask.json"
expect "--cluster file with a bad task" 2 "badtask.json|task" -- \
  env -u TF_CONFIG "$worker" --cluster "$work/badtask.json"

# Paths that are not regular files are refused at once, naming them: a
# FIFO nobody writes to would block the reader for ever.
mkfifo "$work/fifo"
expect "--cluster a FIFO" 2 "$work/fifo: a FIFO, not a regular file" -- \
  env -u TF_CONFIG "$worker" --cluster "$work/fifo" --task worker:0
expect "--summary --model a FIFO" 1 "$work/fifo: a FIFO, not a regular file" -- \
  "$worker" --summary --model "$work/fifo"
mkdir "$work/fifo-data"
cp "$data"/*-ubyte.gz "$work/fifo-data/"
rm "$work/fifo-data/train-images-idx3-ubyte.gz"
mkfifo "$work/fifo-data/train-images-idx3-ubyte"
expect "--data with a FIFO for a file" 1 \
  "$work/fifo-data/train-images-idx3-ubyte: a FIFO, not a regular file" -- \
  "$worker" --standalone --data "$work/fifo-data" --epochs 1

# Wait until file $1 holds the line $2, or background process $3 has
# ended, for at most 30 s (generous for a loaded machine): a signal is sent
# once the process says it is ready, not after a guessed while.
wait_for_line () {
  for _ in $(seq 300); do
    grep -qF "$2" "$1" && return
    kill -0 "$3" 2>/dev/null || return
    sleep 0.1
  done
}

# SIGTERM background process $1 and wait for it: 0 with its exit status in
# $status, or 1 (after SIGKILL) when it still ran 30 s later (generous for
# a loaded machine, where a process under SCHED_IDLE waits for a core).
term_and_wait () {
  kill -TERM "$1"
  for _ in $(seq 300); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then
    kill -KILL "$1"; wait "$1"
    return 1
  fi
  wait "$1"; status=$?
  return 0
}

# A worker whose coordinator is not there keeps registering; SIGTERM stops it
# cleanly (exit 0), which needs the signal blocked in every thread, the
# BLAS pool's included.
env TF_CONFIG="{\"cluster\": {$chief_ok}, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
  "$worker" >"$work/out" 2>&1 &
pid=$!
wait_for_line "$work/out" "registering with the coordinator" "$pid"
if ! term_and_wait "$pid"; then
  fail "SIGTERM while registering" "still running 30 s after SIGTERM"
elif [ "$status" = 0 ] && grep -qF "registering with the coordinator" "$work/out"; then
  pass "SIGTERM while registering (exit 0)"
else
  fail "SIGTERM while registering" "exit $status, expected 0 and a 'registering' line"
fi

# --idle-priority (an evaluator on cores it cannot have to itself): once
# its link runs, the worker's main thread, and every thread it starts after,
# computes under SCHED_IDLE (policy 5 in /proc/PID/task/TID/stat, field
# 41), while the link's threads, which send the heartbeats, keep the normal
# policy (0). Read while it waits for a coordinator that is not there; then
# SIGTERM still stops it cleanly.
env TF_CONFIG="{\"cluster\": {$chief_ok}, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
  "$worker" --idle-priority >"$work/out" 2>&1 &
pid=$!
wait_for_line "$work/out" "computing in the cores' idle time (SCHED_IDLE)" "$pid"
# The command name may hold spaces: the fields are counted after its ")".
policies=$(for t in /proc/"$pid"/task/*; do
  echo "$(basename "$t") $(sed 's/.*) //' "$t/stat" | cut -d' ' -f39)"
done 2>/dev/null)
main_policy=$(echo "$policies" | awk -v pid="$pid" '$1 == pid { print $2 }')
normal=$(echo "$policies" | awk '$2 == 0' | wc -l)
if ! term_and_wait "$pid"; then
  fail "--idle-priority" "still running 30 s after SIGTERM"
elif [ "$status" = 0 ] && [ "$main_policy" = 5 ] && [ "$normal" -ge 1 ] \
     && grep -qF "computing in the cores' idle time (SCHED_IDLE)" "$work/out"; then
  pass "--idle-priority: main thread SCHED_IDLE, $normal others (the link's) normal, exit 0"
else
  fail "--idle-priority" "exit $status (expected 0), main thread's policy '$main_policy'" \
    "(expected 5), $normal threads at 0 (expected >= 1); threads: $(echo "$policies" | tr '\n' ' ')" \
    "$(tail -3 "$work/out")"
fi
expect "--idle-priority with --standalone" 2 "--idle-priority are for cluster mode" -- \
  "$worker" --standalone --idle-priority --data "$data"

# --- bad option values ----------------------------------------------------
# Each names the option (or the model) and what was wrong with it.
expect "--epochs 0" nonzero "epochs|\"0\"" -- "$worker" --standalone --epochs 0 --data "$data"
expect "--epochs -3" nonzero "epochs" -- "$worker" --standalone --epochs -3 --data "$data"
expect "--batch x" nonzero "batch|\"x\"" -- "$worker" --standalone --batch x --data "$data"
expect "--batch 0" nonzero "batch" -- "$worker" --standalone --batch 0 --data "$data"
expect "--batch 1.5" nonzero "batch|whole number" -- "$worker" --standalone --batch 1.5 --data "$data"
expect "--seed 0x10" nonzero "seed|whole number" -- "$worker" --standalone --seed 0x10 --data "$data"
expect "--threads 0" nonzero "threads" -- "$worker" --standalone --threads 0 --data "$data"
# Numbers are decimal with nothing around them (exit 2 before any data is
# read: /nonexistent would fail with 1).
expect "--epochs \" 2\"" 2 '--epochs " 2": expected a whole number in 1..1000000' -- \
  "$worker" --standalone --epochs " 2" --data /nonexistent
expect "--progress \" 5\"" 2 '--progress " 5": expected a number in [0, 1e+06]' -- \
  "$worker" --standalone --progress " 5" --data /nonexistent
expect "--progress 0x5" 2 '--progress "0x5"' -- \
  "$worker" --standalone --progress 0x5 --data /nonexistent
expect "--progress -0" 2 '--progress "-0"' -- \
  "$worker" --standalone --progress -0 --data /nonexistent
expect "--lr 0x1p-10" 2 '--lr "0x1p-10"' -- \
  "$worker" --standalone --lr 0x1p-10 --data /nonexistent
expect "--threads 4 (cluster mode)" 2 '--threads "4 "' -- \
  env -u TF_CONFIG "$worker" --threads "4 "
expect "--lr 0" nonzero "lr" -- "$worker" --standalone --lr 0 --data "$data"
expect "-l 0" 2 '--lr "0"' -- "$worker" --standalone -l 0 --data "$data"
expect "-e0" 2 '--epochs "0"' -- "$worker" --standalone -e0 --data "$data"
expect "--device tpu" nonzero "device|tpu" -- "$worker" --standalone --device tpu --data "$data"
expect "--optimizer rmsprop" nonzero "optimizer|rmsprop" -- \
  "$worker" --standalone --optimizer rmsprop --data "$data"
expect "--model nosuch" nonzero "nosuch" -- "$worker" --standalone --model nosuch --data "$data"
expect "--summary --model nosuch" nonzero "nosuch" -- "$worker" --summary --model nosuch
# A spec file with an error: the message names the file and the field by its JSON pointer.
printf '{"input_shape": [28, 28, 1], "layers": [{"type": "Flatten"},\n {"type": "Dense", "unit": 10}]}\n' \
  >"$work/bad.json"
expect "--model bad spec file" nonzero "bad.json: at /layers/1/unit: unknown key \"unit\"" -- \
  "$worker" --standalone --model "$work/bad.json" --data "$data"

# --- data files -------------------------------------------------------------
expect "--data /nonexistent" 1 "/nonexistent/train-images-idx3-ubyte" -- \
  "$worker" --standalone --data /nonexistent --epochs 1
# A copy of the data with the training labels cut to half their length.
mkdir "$work/data"
cp "$data"/*-ubyte.gz "$work/data/"
labels="$work/data/train-labels-idx1-ubyte.gz"
truncate -s $(( $(stat -c %s "$labels") / 2 )) "$labels"
expect "truncated train-labels" 1 "train-labels-idx1-ubyte" -- \
  "$worker" --standalone --data "$work/data" --epochs 1

# --- device -----------------------------------------------------------------
# Without CUDA in the build, or without a device, --device gpu fails saying
# so ("built without CUDA" or "no CUDA device"). With a GPU it trains there,
# and says so: either way the option is checked, on every machine.
run 120 "$worker" --standalone --device gpu --data "$data" --epochs 1 --limit 640 \
  --test-limit 500 --progress 0
if [ "$status" = 0 ] && grep -qF "training on gpu (" "$work/out"; then
  pass "--device gpu trained on the GPU (exit 0)"
elif [ "$status" -ne 0 ] && [ "$status" -lt 124 ] && grep -qF "CUDA" "$work/out"; then
  pass "--device gpu refused (exit $status)"
else
  fail "--device gpu" "exit $status, expected a failure below 124 that mentions CUDA," \
    "or exit 0 and 'training on gpu ('"
fi

# --- a quick real run ---------------------------------------------------------
metrics="$work/quick.jsonl"
run 120 "$worker" --standalone --epochs 1 --limit 3200 --test-limit 1000 --threads 2 \
  --metrics "$metrics" --data "$data"
lines=$(grep -c "^epoch 1/1:" "$work/out")
# The epoch record and the done record (the run is too short for a
# progress record's window of 5 s to end on a fast machine).
rows=$(python3 -c 'import json, sys
rows = map(json.loads, open(sys.argv[1]))
print(" ".join(r["event"] for r in rows if r["event"] != "progress"))' \
  "$metrics" 2>/dev/null || echo "unreadable")
accuracy=$(metrics_field "$metrics" epoch test_accuracy 2>/dev/null || echo 0)
if [ "$status" = 0 ] && [ "$lines" = 1 ] && [ "$rows" = "epoch done" ] \
   && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0.6 else 1)" "$accuracy"; then
  pass "quick run: 1 epoch on 3200 examples, test accuracy $accuracy > 0.6"
else
  fail "quick run" "exit $status (124: timed out), $lines 'epoch 1/1:' lines," \
    "records '$rows', test accuracy $accuracy (expected 0, 1, 'epoch done', > 0.6)"
fi

# --- options in any order ------------------------------------------------------
# --optimizer sets its defaults and --lr the rate, whichever comes first:
# the training line says the optimizer and the rate it trains with.
tiny=(--standalone --device cpu --threads 1 --epochs 1 --limit 64 --test-limit 64 --progress 0
      --data "$data")
for order in "--optimizer momentum --lr 0.05" "--lr 0.05 --optimizer momentum" \
             "--lr=0.05 --optimizer=momentum" "-l 0.05 --opt momentum"; do
  # shellcheck disable=SC2086  # the options are words
  run 120 "$worker" "${tiny[@]}" $order
  if [ "$status" = 0 ] && grep -qF "momentum lr 0.05," "$work/out"; then
    pass "$order: momentum at lr 0.05"
  else
    fail "$order" "exit $status, expected 0 and 'momentum lr 0.05,' in the training line"
  fi
done
# --quiet: no log lines and no progress, only the last epoch's line (the
# result) on stdout.
run 120 "$worker" "${tiny[@]}" --epochs 2 --quiet
if [ "$status" = 0 ] && [ "$(wc -l <"$work/out")" = 1 ] && grep -q "^epoch 2/2:" "$work/out"
then
  pass "--quiet: only the last epoch's line"
else
  fail "--quiet" "exit $status, expected 0 and the one line 'epoch 2/2: ...'"
fi

# --- evaluation every N steps ---------------------------------------------------
# 2 epochs of 50 steps (3200 examples, batch 64) with --eval-steps 20: an
# evaluation after steps 20, 40, 60 and 80 and at each epoch's end (50, 100,
# where 100 is also a multiple of 20 but is evaluated once), so six "eval"
# records with every field, in order, beside the two epoch records, and one
# log line each.
metrics="$work/eval.jsonl"
run 120 "$worker" --standalone --epochs 2 --limit 3200 --test-limit 500 --threads 2 \
  --eval-steps 20 --progress 0 --metrics "$metrics" --data "$data"
logged=$(grep -c "evaluation after" "$work/out")
problem=$(python3 - "$metrics" <<'PY' 2>&1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evals = [r for r in rows if r.get("event") == "eval"]
epochs = [r for r in rows if r["event"] == "epoch"]
problems = []
if [r["epoch"] for r in epochs] != [1, 2]:
    problems.append("epoch objects %s, expected epochs [1, 2]" % [r.get("epoch") for r in epochs])
fields = ["event", "time_s", "epoch", "epoch_f", "step", "test_loss", "test_accuracy",
          "params_at_s", "train_s", "eval_ms"]
for r in evals:
    if sorted(r) != sorted(fields):
        problems.append("eval object with fields %s, expected %s" % (sorted(r), sorted(fields)))
        break
else:
    steps = [r["step"] for r in evals]
    if steps != [20, 40, 50, 60, 80, 100]:
        problems.append("eval steps %s, expected [20, 40, 50, 60, 80, 100]" % steps)
    elif [r["epoch"] for r in evals] != [0, 0, 1, 1, 1, 2]:
        problems.append("eval epochs %s, expected [0, 0, 1, 1, 1, 2]" % [r["epoch"] for r in evals])
    for r in evals:
        if abs(r["epoch_f"] - r["step"] / 50) > 1e-3 or not 0 <= r["test_accuracy"] <= 1 \
           or r["test_loss"] <= 0 or r["eval_ms"] <= 0 \
           or not 0 <= r["train_s"] <= r["params_at_s"] <= r["time_s"]:
            problems.append("bad values in %s" % r)
    for a, b in zip(evals, evals[1:]):
        if b["params_at_s"] < a["params_at_s"] + a["eval_ms"] / 1e3 - 1e-3 \
           or b["train_s"] < a["train_s"]:
            problems.append("times go backwards or overlap from %s to %s" % (a, b))
    # The epoch's end: the same evaluation as the epoch object's.
    for e in epochs:
        at = [r for r in evals if r["step"] == e["steps"]]
        if not at or abs(at[0]["test_accuracy"] - e["test_accuracy"]) > 1e-6:
            problems.append("no eval object matching epoch object %s" % e)
print("; ".join(problems))
PY
)
if [ "$status" = 0 ] && [ "$logged" = 6 ] && [ -z "$problem" ]; then
  pass "--eval-steps 20: 6 eval records and log lines, 2 epoch records"
else
  fail "--eval-steps 20" "exit $status (124: timed out), $logged 'evaluation after' lines" \
    "(expected 0 and 6)" "${problem:+metrics: $problem}"
fi
expect "--eval-steps x" nonzero "eval-steps|\"x\"" -- \
  "$worker" --standalone --eval-steps x --data "$data"
expect "--eval-steps in cluster mode" 2 "--eval-steps|--standalone" -- \
  env -u TF_CONFIG "$worker" --eval-steps 10
expect "--cluster-resolver outside Slurm" 2 "SLURM_PROCID is not set" -- \
  env -u SLURM_PROCID "$worker" --cluster-resolver slurm
expect "--cluster-resolver: rank 0" 2 "task type \"chief\"|ps-worker runs as a worker" -- \
  env SLURM_PROCID=0 SLURM_NTASKS=3 SLURM_JOB_NODELIST=localhost SLURM_TASKS_PER_NODE=3 \
  "$worker" --cluster-resolver slurm

# Standalone, the CPU engine's default threads are the cores the worker may
# use: pinned to one CPU (as in a cpuset of one), one thread however many
# are online.
if command -v taskset >/dev/null && [ "$(nproc --all)" -ge 2 ]; then
  cpu=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
  expect "--standalone pinned to CPU $cpu: 1 thread" 0 "(OpenBLAS, 1 thread)" -- \
    taskset -c "$cpu" "$worker" --standalone --device cpu --data "$data" --epochs 1 --limit 128
else
  echo "SKIP: no taskset or one CPU: the default threads by affinity are not checked"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
