#!/usr/bin/env bash
# The coordinator's command line and configuration: every mistake gives a
# non-zero exit (never a crash or a hang) and a message that names the file,
# key or flag and what was expected. The cluster spec (TF_CONFIG and
# --cluster FILE), the job file (--job) and its flags, the model against the
# data, the data directory; servers that never register, and a worker that
# registers with a task the coordinator's cluster does not have.
set -u
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
worker=${PS_WORKER:?PS_WORKER is not set}
data=${PS_DATA_DIR:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d /tmp/ps-coordinator-cli-XXXXXX)
background=""
cleanup () {
  for pid in $background; do kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
# Every process of the test runs secured, by one set of keys made here
# (README.md, Security), named by PS_KEYS.
"${PS_COORDINATOR:?PS_COORDINATOR is not set}" keygen --out "$work/keys" --ps 4 --workers 4 \
  --evaluator >/dev/null || { echo "FAIL: coordinator keygen"; exit 1; }
export PS_KEYS="$work/keys"
failures=0
unset TF_CONFIG

. "$(dirname "$0")/cli_lib.sh"

# A cluster spec with a chief, ps and worker on 127.0.0.1 (no task).
chief_port=$(free_port); ps_port=$(free_port); worker_port=$(free_port)
while [ "$ps_port" = "$chief_port" ]; do ps_port=$(free_port); done
while [ "$worker_port" = "$chief_port" ] || [ "$worker_port" = "$ps_port" ]; do
  worker_port=$(free_port)
done
cluster="{\"chief\": [\"127.0.0.1:$chief_port\"], \"ps\": [\"127.0.0.1:$ps_port\"], \
\"worker\": [\"127.0.0.1:$worker_port\"]}"
good="{\"cluster\": $cluster}"

# The job, model and data checks run with that cluster in TF_CONFIG rather
# than with --local, whose own choice of ports is checked once below: the
# checks come before anything is started either way.

# --- the command line ---------------------------------------------------------
expect "--help" 0 "--local|--cluster FILE|--resume" -- "$coordinator" --help
expect "unknown flag" 2 "frobnicate|usage" -- "$coordinator" --local --frobnicate
expect "stray argument" 2 "unexpected argument 'extra'" -- "$coordinator" --local extra
expect "--ps 0" 2 "--ps \"0\": expected a whole number in 1..256" -- "$coordinator" --local --ps 0
expect "--workers 0" 2 "--workers \"0\": expected a whole number in 1..256" -- \
  "$coordinator" --local --workers 0
expect "--ps x" 2 "--ps \"x\"|whole number" -- "$coordinator" --local --ps x
# ... and only that: "x" is not a number below 1.
if grep -qF "at least 1" "$work/out"; then
  fail "--ps x: a second, wrong message" \
    "says '--ps must be at least 1' for a value that is not a number"
else
  pass "--ps x: one message"
fi
expect "--ps 300" 2 "--ps \"300\"|1..256" -- "$coordinator" --local --ps 300
expect "--cores 0" 2 "--cores \"0\": expected a whole number in 1..4096" -- \
  "$coordinator" --local --cores 0
expect "--evaluator --no-evaluator" 2 "--evaluator and --no-evaluator: give one" -- \
  "$coordinator" --local --evaluator --no-evaluator
expect "--ps-memory-limit 1T" 2 "--ps-memory-limit \"1T\": expected a number of bytes" -- \
  "$coordinator" --local --ps-memory-limit 1T
expect "--epochs x" 2 "--epochs \"x\"|whole number" -- \
  env TF_CONFIG="$good" "$coordinator" --epochs x
# Numbers are decimal with nothing around them: no space, no sign, no hex.
# (Were one accepted, the coordinator would wait 300 ms for servers and
# exit 1.)
expect "--epochs \" 3\"" 2 "--epochs \" 3\"|whole number" -- \
  env TF_CONFIG="$good" "$coordinator" --epochs " 3" --register-timeout-ms 300
expect "--steps +5" 2 "--steps \"+5\"|whole number" -- \
  env TF_CONFIG="$good" "$coordinator" --steps +5 --register-timeout-ms 300
expect "--lr 0x10" 2 "--lr \"0x10\"|number" -- \
  env TF_CONFIG="$good" "$coordinator" --lr 0x10 --register-timeout-ms 300
expect "--lr \" 0.1\"" 2 "--lr \" 0.1\"|number" -- \
  env TF_CONFIG="$good" "$coordinator" --lr " 0.1" --register-timeout-ms 300
expect "--checkpoint-seconds -0" 2 "--checkpoint-seconds \"-0\"|number" -- \
  env TF_CONFIG="$good" "$coordinator" --checkpoint-seconds -0 --register-timeout-ms 300
# A value beyond its field is refused, not cut to the field's largest (which
# for --epochs is within its range: 2147483647 epochs).
expect "--epochs 99999999999" 2 "--epochs \"99999999999\": expected a whole number in 0..2147483647" -- \
  env TF_CONFIG="$good" "$coordinator" --epochs 99999999999 --register-timeout-ms 300
expect "--ps \" 2\"" 2 "--ps \" 2\"|whole number in 1..256" -- \
  "$coordinator" --local --ps " 2" --epochs 0
expect "--epochs 0" 2 "at /epochs|1 .. 2147483647|got 0" -- \
  env TF_CONFIG="$good" "$coordinator" --epochs 0
expect "--batch 1.5" 2 "--batch \"1.5\"|whole number" -- \
  env TF_CONFIG="$good" "$coordinator" --batch 1.5
expect "--batch 0" 2 "at /batch_size|got 0" -- env TF_CONFIG="$good" "$coordinator" --batch 0
expect "--limit 12x" 2 "--limit \"12x\"" -- env TF_CONFIG="$good" "$coordinator" --limit 12x
expect "--lr abc" 2 "--lr \"abc\"|number" -- env TF_CONFIG="$good" "$coordinator" --lr abc
expect "--lr 0" 2 "at /optimizer/lr|> 0|got 0" -- env TF_CONFIG="$good" "$coordinator" --lr 0
expect "--keep 0" 2 "at /checkpoint/keep|got 0" -- env TF_CONFIG="$good" "$coordinator" --keep 0
expect "--heartbeat-ms 0" 2 "at /heartbeat/interval_ms|got 0" -- \
  env TF_CONFIG="$good" "$coordinator" --heartbeat-ms 0
expect "heartbeat timeout below the interval" 2 "at /heartbeat/timeout_ms|interval_ms" -- \
  env TF_CONFIG="$good" "$coordinator" --heartbeat-ms 1000 --heartbeat-timeout-ms 500
expect "--register-timeout-ms abc" 2 "--register-timeout-ms \"abc\"" -- \
  env TF_CONFIG="$good" "$coordinator" --register-timeout-ms abc
expect "--device tpu" 2 "--device \"tpu\"|cpu, gpu or auto" -- \
  env TF_CONFIG="$good" "$coordinator" --device tpu
expect "--optimizer rmsprop" 2 "--optimizer|rmsprop" -- \
  env TF_CONFIG="$good" "$coordinator" --optimizer rmsprop
# The flags of a local cluster mean nothing to a cluster from TF_CONFIG or
# a file, which lists its own tasks: refused, not ignored. (Were they
# ignored, the coordinator would wait 300 ms for servers and exit 1.)
expect "--ps without --local" 2 "--ps is for --local" -- \
  env TF_CONFIG="$good" "$coordinator" --ps 3 --register-timeout-ms 300
expect "--ps-memory-limit without --local" 2 "--ps-memory-limit is for --local" -- \
  env TF_CONFIG="$good" "$coordinator" --ps-memory-limit 1G --register-timeout-ms 300
expect "--log-dir without --local" 2 "--log-dir is for --local" -- \
  env TF_CONFIG="$good" "$coordinator" --log-dir "$work/logs" --register-timeout-ms 300
expect "--no-restart without --local" 2 "--no-restart is for --local" -- \
  env TF_CONFIG="$good" "$coordinator" --no-restart --register-timeout-ms 300
echo "$good" >"$work/spec.json"
expect "--local with --cluster" 2 "--local and --cluster FILE" -- \
  "$coordinator" --local --cluster "$work/spec.json" --epochs 0
# --cluster-resolver slurm: its options, and a Slurm step's variables (one
# node, localhost, three tasks: chief, ps:0, worker:0) refused as wrong.
step=(SLURM_NTASKS=3 SLURM_JOB_NODELIST=localhost SLURM_TASKS_PER_NODE=3)
expect "--cluster-resolver kube" 2 "--cluster-resolver \"kube\"|expected slurm" -- \
  "$coordinator" --cluster-resolver kube
expect "--cluster-resolver outside Slurm" 2 "SLURM_PROCID is not set|srun" -- \
  env -u SLURM_PROCID "$coordinator" --cluster-resolver slurm
expect "--cluster-resolver with --cluster" 2 "--cluster FILE and --cluster-resolver" -- \
  "$coordinator" --cluster-resolver slurm --cluster "$work/spec.json"
expect "--cluster-resolver: bad node list" 2 "SLURM_JOB_NODELIST: node list \"n[1-\"" -- \
  env "${step[@]}" SLURM_PROCID=0 SLURM_JOB_NODELIST='n[1-' "$coordinator" --cluster-resolver slurm
expect "--cluster-resolver: not rank 0" 2 "--cluster-resolver|chief" -- \
  env "${step[@]}" SLURM_PROCID=1 "$coordinator" --cluster-resolver "slurm:port=$chief_port"
expect "--cluster-resolver without --checkpoint-dir" 2 "give --checkpoint-dir" -- \
  env "${step[@]}" SLURM_PROCID=0 "$coordinator" --cluster-resolver "slurm:port=$chief_port"
# --local picks a free port for every task; a large cluster must still get
# distinct ones (then it fails on --epochs 0, before starting anything).
expect "--local: 513 distinct ports" 2 "at /epochs|got 0" -- \
  "$coordinator" --local --ps 256 --workers 256 --epochs 0
# Mirrored mode waits for its workers (the servers listed are not used);
# none comes here, so it gives up after the registration timeout, naming
# the missing worker.
expect "--mode mirrored: no worker" 1 "0 of 1 workers registered|worker:0 at tcp://127.0.0.1" -- \
  env TF_CONFIG="$good" "$coordinator" --mode mirrored --register-timeout-ms 300
expect "--local --mode mirrored --ps 2" 2 "--ps|mirrored mode uses no servers" -- \
  "$coordinator" --local --mode mirrored --ps 2
expect "--local --mode mirrored --evaluator" 2 "--evaluator|the workers evaluate" -- \
  "$coordinator" --local --mode mirrored --evaluator
expect "--mode bsp" 2 "--mode|bsp|expected async, mirrored, ssp or sync" -- \
  env TF_CONFIG="$good" "$coordinator" --mode bsp
expect "--staleness soon" 2 "--staleness \"soon\"|or unbounded" -- \
  env TF_CONFIG="$good" "$coordinator" --mode ssp --staleness soon
expect "--staleness -1" 2 "--staleness \"-1\"|0..2147483647" -- \
  env TF_CONFIG="$good" "$coordinator" --mode ssp --staleness -1
expect "--data /nonexistent" 2 "/nonexistent/train-images-idx3-ubyte" -- \
  env TF_CONFIG="$good" "$coordinator" --data /nonexistent
expect "checkpoint interval without a directory" 2 "at /checkpoint/every_steps|checkpoint.dir" -- \
  env TF_CONFIG="$good" "$coordinator" --checkpoint-steps 10

# --- the cluster spec: TF_CONFIG ------------------------------------------------
expect "no TF_CONFIG" 2 "TF_CONFIG is not set|--cluster FILE|--local" -- "$coordinator"
expect "TF_CONFIG: bad JSON" 2 "TF_CONFIG|bad JSON|line 1" -- \
  env TF_CONFIG='{"cluster": {' "$coordinator"
expect "TF_CONFIG: unknown key" 2 "TF_CONFIG|cluster.bogus|chief, worker, ps or evaluator" -- \
  env TF_CONFIG="{\"cluster\": {\"chief\": [\"127.0.0.1:$chief_port\"], \"ps\": \
[\"127.0.0.1:$ps_port\"], \"worker\": [\"127.0.0.1:$worker_port\"], \"bogus\": [\"a:1\"]}}" \
  "$coordinator"
# Without a chief the coordinator's address is worker 0's port + 1
# (README.md, TF_CONFIG): here that is the ps task's, which is said.
expect "TF_CONFIG: no chief, its address taken" 2 \
  "TF_CONFIG|chief|127.0.0.1:$((worker_port + 1))|cluster.ps[0]" -- \
  env TF_CONFIG="{\"cluster\": {\"ps\": [\"127.0.0.1:$((worker_port + 1))\"], \
\"worker\": [\"127.0.0.1:$worker_port\"]}}" "$coordinator"
expect "TF_CONFIG: task without a type" 2 "TF_CONFIG|task.type" -- \
  env TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"index\": 0}}" "$coordinator"
expect "TF_CONFIG: task of another type" 2 "TF_CONFIG|\"worker\"|expected \"chief\"" -- \
  env TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
  "$coordinator"
expect "TF_CONFIG: index out of range" 2 "TF_CONFIG|task.index|3|cluster.worker" -- \
  env TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 3}}" \
  "$coordinator"
expect "TF_CONFIG: duplicate address" 2 "TF_CONFIG|127.0.0.1:$ps_port|twice" -- \
  env TF_CONFIG="{\"cluster\": {\"chief\": [\"127.0.0.1:$chief_port\"], \"ps\": \
[\"127.0.0.1:$ps_port\"], \"worker\": [\"127.0.0.1:$ps_port\"]}}" "$coordinator"
expect "TF_CONFIG: port out of range" 2 \
  "TF_CONFIG: 'cluster.chief[0]' is \"127.0.0.1:99999\": port \"99999\": expected a whole number in 1..65535" -- \
  env TF_CONFIG="{\"cluster\": {\"chief\": [\"127.0.0.1:99999\"], \"ps\": \
[\"127.0.0.1:$ps_port\"], \"worker\": [\"127.0.0.1:$worker_port\"]}}" "$coordinator"
expect "TF_CONFIG: a peer with no host" 2 "TF_CONFIG: 'cluster.worker[0]' is \":$worker_port\": no host" -- \
  env TF_CONFIG="{\"cluster\": {\"chief\": [\"127.0.0.1:$chief_port\"], \"ps\": \
[\"127.0.0.1:$ps_port\"], \"worker\": [\":$worker_port\"]}}" "$coordinator"
# Without ps the default mode is mirrored; a mode of the ps-servers is
# refused, saying so.
expect "TF_CONFIG: no ps, mode async" 2 "TF_CONFIG|lists no ps task|\"async\"|mirrored" -- \
  env TF_CONFIG="{\"cluster\": {\"chief\": [\"127.0.0.1:$chief_port\"], \"ps\": [], \
\"worker\": [\"127.0.0.1:$worker_port\"]}}" "$coordinator" --mode async
expect "TF_CONFIG: two evaluators" 2 "TF_CONFIG|2 evaluator|at most 1 evaluator" -- \
  env TF_CONFIG="{\"cluster\": {\"chief\": [\"127.0.0.1:$chief_port\"], \"ps\": \
[\"127.0.0.1:$ps_port\"], \"worker\": [\"127.0.0.1:$worker_port\"], \"evaluator\": \
[\"127.0.0.1:1\", \"127.0.0.1:2\"]}}" "$coordinator"

# --- the cluster spec: --cluster FILE -------------------------------------------
printf '{"cluster": {"chief": ["127.0.0.1:1"],\n "ps": ["127.0.0.1:2",]}}\n' >"$work/bad.json"
expect "--cluster: bad JSON" 2 "$work/bad.json|line 2" -- "$coordinator" --cluster "$work/bad.json"
expect "--cluster: missing file" nonzero "$work/none.json" -- \
  "$coordinator" --cluster "$work/none.json"
printf '{"cluster": %s, "extra": 1}\n' "$cluster" >"$work/unknown.json"
expect "--cluster: unknown key" 2 "$work/unknown.json|extra" -- \
  "$coordinator" --cluster "$work/unknown.json"
printf '{"cluster": %s, "task": {"type": "ps", "index": 0}}\n' "$cluster" >"$work/ps.json"
expect "--cluster: task ps" 2 "$work/ps.json|\"ps\"|expected \"chief\"" -- \
  "$coordinator" --cluster "$work/ps.json"
# The file wins over TF_CONFIG, which is not even read.
printf '{"cluster": {"ps": ["127.0.0.1:4"], "worker": ["127.0.0.1:3"]}}\n' >"$work/nochief.json"
expect "--cluster: no chief, its address taken (TF_CONFIG ignored)" 2 \
  "$work/nochief.json|chief|127.0.0.1:4|cluster.ps[0]" -- \
  env TF_CONFIG="$good" "$coordinator" --cluster "$work/nochief.json"

# --- the job file ---------------------------------------------------------------
printf '{"epochs": 2,\n "batch_size": 64,,}\n' >"$work/job-json.json"
expect "job: bad JSON" 2 "$work/job-json.json|bad JSON|line 2, column" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/job-json.json"
printf '{"epochs": 2, "frobnicate": 1}\n' >"$work/job-key.json"
expect "job: unknown key" 2 "$work/job-key.json: at /frobnicate: unknown key \"frobnicate\"|expected one of" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/job-key.json"
printf '{"optimizer": {"frob": 1}}\n' >"$work/job-nested.json"
expect "job: unknown nested key" 2 "$work/job-nested.json: at /optimizer/frob: unknown key \"frob\"" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/job-nested.json"
printf '{"epochs": "two"}\n' >"$work/job-type.json"
expect "job: wrong type" 2 "$work/job-type.json: at /epochs|integer|\"two\"" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/job-type.json"
printf '{"optimizer": {"lr": -1}}\n' >"$work/job-lr.json"
expect "job: lr out of range" 2 "$work/job-lr.json: at /optimizer/lr|> 0|-1" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/job-lr.json"
printf '{"optimizer": {"kind": "rmsprop"}}\n' >"$work/job-enum.json"
expect "job: bad enum" 2 "$work/job-enum.json: at /optimizer/kind|\"adam\"|\"rmsprop\"" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/job-enum.json"
printf '{"mode": "mirrored"}\n' >"$work/job-mirrored.json"
expect "job: mode mirrored, no worker" 1 "0 of 1 workers registered" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/job-mirrored.json" --register-timeout-ms 300
printf '{"epochs": 2,\n "steps": 9223372036854775808}\n' >"$work/job-big.json"
expect "job: an integer beyond 64 bits" 2 \
  "$work/job-big.json: at /steps: expected an integer in 0 .. 9223372036854775807, got 9223372036854775808" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/job-big.json"
expect "job: missing file" 2 "$work/none-job.json" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/none-job.json"

# --- paths that are not regular files -----------------------------------------------
# A FIFO nobody writes to would block the reader for ever, a directory
# cannot be parsed: each is refused at once, naming the path.
mkfifo "$work/fifo"
expect "--job a FIFO" 2 "$work/fifo: a FIFO, not a regular file" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work/fifo"
expect "--job a directory" 2 "$work: a directory, not a regular file" -- \
  env TF_CONFIG="$good" "$coordinator" --job "$work"
expect "--cluster a FIFO" 2 "$work/fifo: a FIFO, not a regular file" -- \
  "$coordinator" --cluster "$work/fifo"
expect "--model a FIFO" 2 "$work/fifo: a FIFO, not a regular file" -- \
  env TF_CONFIG="$good" "$coordinator" --model "$work/fifo"

# --- the model and the data ------------------------------------------------------
printf '{"input_shape": [32, 32, 3], "layers": [{"type": "Flatten"},\n' >"$work/rgb.json"
printf ' {"type": "Dense", "units": 10}]}\n' >>"$work/rgb.json"
expect "model for 32x32x3 images" 2 "$work/rgb.json|does not fit|32x32x3|28x28x1" -- \
  env TF_CONFIG="$good" "$coordinator" --model "$work/rgb.json"
printf '{"input_shape": [28, 28, 1], "layers": [{"type": "Flatten"},\n' >"$work/seven.json"
printf ' {"type": "Dense", "units": 7}]}\n' >>"$work/seven.json"
expect "model with 7 classes" 2 "$work/seven.json|does not fit|7 classes|10 classes" -- \
  env TF_CONFIG="$good" "$coordinator" --model "$work/seven.json"
# A flat input of 784 values takes the 28x28 images as they are, for the
# coordinator as for the workers: it trains.
printf '{"input_shape": [784], "layers": [{"type": "Dense", "units": 10}]}\n' >"$work/flat.json"
expect "flat model trains" 0 "training done" -- \
  "$coordinator" --local --model "$work/flat.json" --steps 20 --limit 1280 --test-limit 200 \
  --log-dir "$work/flat-logs"
# A run without evaluation says so, not "test accuracy nan".
expect "no evaluation" 0 "training done: 20 steps|, not evaluated" -- \
  "$coordinator" --local --model "$work/flat.json" --steps 20 --limit 1280 --eval-epochs 0 \
  --log-dir "$work/noeval-logs"
if grep -q "nan" "$work/out"; then fail "no evaluation: no nan" "the output says nan"; fi
# Options in any order give the same run: a rate on the command line wins
# over the defaults of the optimizer named, before or after it. The servers
# log the optimizer they were set (a run this short has no progress record
# in its metrics, which would carry the rate).
for order in "--lr 0.1 --optimizer sgd" "--optimizer sgd --lr 0.1"; do
  dir="$work/order-${order// /}"
  # shellcheck disable=SC2086  # the order is four words
  run 120 "$coordinator" --local --model "$work/flat.json" --steps 2 --limit 256 \
    --test-limit 100 --log-dir "$dir" $order
  if [ "$status" = 0 ] && grep -rqF "optimizer sgd lr 0.1 on" "$dir" \
     && ! grep -rF "ps-server info: optimizer" "$dir" | grep -qvF "optimizer sgd lr 0.1 on"; then
    pass "$order: sgd at lr 0.1"
  else
    fail "$order" "expected exit 0 and the servers set to sgd at lr 0.1; they logged:" \
      "$(grep -rhF "optimizer" "$dir" 2>/dev/null | head -2)"
  fi
done
printf '{"input_shape": [28, 28, 1], "layers": [{"type": "Flatten"},\n' >"$work/typo.json"
printf ' {"type": "Dense", "unit": 10}]}\n' >>"$work/typo.json"
expect "model spec with an unknown field" 2 "$work/typo.json: at /layers/1/unit: unknown key \"unit\"" -- \
  env TF_CONFIG="$good" "$coordinator" --model "$work/typo.json"
expect "--model nosuch" 2 "\"nosuch\"|cnn, cnn2, mlp" -- \
  env TF_CONFIG="$good" "$coordinator" --model nosuch
mkdir "$work/empty"
expect "data directory without the files" 2 "$work/empty/train-images-idx3-ubyte" -- \
  env TF_CONFIG="$good" "$coordinator" --data "$work/empty"

# --- checkpoints, checked before anything registers -------------------------------
# A checkpoint directory that cannot be one, and a --resume with nothing to
# resume from, are refused at once (exit 2), not after every process has
# registered: nobody serves the ps address here, so a check that came later
# would make the coordinator wait 3 s for the servers and exit 1.
late="--register-timeout-ms 3000"
touch "$work/a-file"
expect "--checkpoint-dir a file" 2 "checkpoint directory $work/a-file: not a directory" -- \
  env TF_CONFIG="$good" "$coordinator" --checkpoint-dir "$work/a-file" $late
expect "--checkpoint-dir under a file" 2 "checkpoint directory $work/a-file/ckpt" -- \
  env TF_CONFIG="$good" "$coordinator" --checkpoint-dir "$work/a-file/ckpt" $late
expect "--resume without a checkpoint directory" 2 \
  "--resume needs a checkpoint directory (--checkpoint-dir, or checkpoint.dir in the job)" -- \
  env TF_CONFIG="$good" "$coordinator" --resume $late
expect "--resume from a directory that does not exist" 2 \
  "checkpoint directory $work/no-ckpt: does not exist, so there is nothing to resume" -- \
  env TF_CONFIG="$good" "$coordinator" --checkpoint-dir "$work/no-ckpt" --resume $late
mkdir "$work/empty-ckpt"
expect "--resume from an empty directory" 2 \
  "checkpoint directory $work/empty-ckpt: no usable checkpoint to resume from" -- \
  env TF_CONFIG="$good" "$coordinator" --checkpoint-dir "$work/empty-ckpt" --resume $late
mkdir -p "$work/bad-ckpt/ckpt-000000000005"
echo '{"format": "ps-cluster-checkpoint", "version": 1, "step": 5' \
  >"$work/bad-ckpt/ckpt-000000000005/MANIFEST.json"
expect "--resume from a damaged checkpoint" 2 \
  "ckpt-000000000005 is not usable|$work/bad-ckpt: no usable checkpoint to resume from" -- \
  env TF_CONFIG="$good" "$coordinator" --checkpoint-dir "$work/bad-ckpt" --resume $late
expect "--local --resume with a new log directory" 2 \
  "checkpoint directory $work/new-logs/checkpoints: does not exist" -- \
  "$coordinator" --local --resume --log-dir "$work/new-logs" $late
if [ -e "$work/new-logs/ps0.log" ]; then
  fail "--local --resume with a new log directory" "started a server before refusing"
else
  pass "--local --resume with a new log directory: nothing started"
fi
# Not writable: a directory in which nobody may create a file. Permissions
# do not stop root, and a read-only mount needs a mount namespace, which not
# every machine gives; /proc takes no new files from anyone, root included,
# on every Linux machine.
expect "--checkpoint-dir not writable" 2 "checkpoint directory /proc: cannot create a file in it" -- \
  env TF_CONFIG="$good" "$coordinator" --checkpoint-dir /proc $late

# --- servers that never register ---------------------------------------------------
# Nobody serves the ps address: the coordinator gives up after the
# registration timeout, naming the missing server and its address.
started=$(date +%s%N)
expect "servers never register" 1 \
  "0 of 1 servers registered within 1500 ms|ps:0|127.0.0.1:$ps_port" -- \
  \
  env TF_CONFIG="$good" "$coordinator" --register-timeout-ms 1500 --limit 640 --data "$data"
took=$(( ($(date +%s%N) - started) / 1000000 ))
# Not before the 1500 ms, and well before the default of 60 s; the rest is
# what a loaded machine adds (the coordinator starts and reads its data).
if [ "$took" -lt 1500 ] || [ "$took" -gt 20000 ]; then
  fail "servers never register: gave up after $took ms" "expected 1500 to 20000 ms"
else
  pass "servers never register: gave up after $took ms"
fi

# --- a task the coordinator's cluster does not have --------------------------------
# The coordinator knows 1 worker and no evaluator, and waits (for a server
# nobody serves); a ps-worker whose own spec lists 2 workers registers as
# worker:1: it is refused, and exits non-zero with the coordinator's
# words. An evaluator:0 is taken although the coordinator's spec lists
# none (TensorFlow's side-car evaluator, tests/test_tfconfig_compat.sh).
# Its register timeout outlasts every step below, however slow the
# machine: it exits only on the SIGTERM that ends the section.
TF_CONFIG="$good" "$coordinator" --register-timeout-ms 600000 --limit 640 --data "$data" \
  >"$work/coordinator.log" 2>&1 &
coordinator_pid=$!
background="$coordinator_pid"
wide="{\"chief\": [\"127.0.0.1:$chief_port\"], \"ps\": [\"127.0.0.1:$ps_port\"], \
\"worker\": [\"127.0.0.1:$worker_port\", \"127.0.0.1:$(free_port)\"], \
\"evaluator\": [\"127.0.0.1:$(free_port)\"]}"
expect "worker index beyond the coordinator's cluster" 1 \
  "refused to register worker 1|unknown task worker:1|the cluster has 1 worker task" -- \
  env TF_CONFIG="{\"cluster\": $wide, \"task\": {\"type\": \"worker\", \"index\": 1}}" "$worker"
TF_CONFIG="{\"cluster\": $wide, \"task\": {\"type\": \"evaluator\", \"index\": 0}}" "$worker" \
  >"$work/evaluator.log" 2>&1 &
evaluator_pid=$!
for ((i = 0; i < 300; i++)); do
  grep -qF "evaluator:0 registered" "$work/coordinator.log" && break
  sleep 0.1
done
kill -TERM "$evaluator_pid" 2>/dev/null
wait "$evaluator_pid"
if grep -qF "evaluator:0 registered" "$work/coordinator.log"; then
  pass "evaluator the coordinator's cluster lacks: taken as evaluator:0"
else
  cp "$work/evaluator.log" "$work/out"
  fail "evaluator the coordinator's cluster lacks: taken as evaluator:0"
fi
# ps-worker's own checks come before it ever talks to the coordinator.
expect "ps-worker: index beyond its own spec" 2 "TF_CONFIG|task.index|5|cluster.worker" -- \
  env TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 5}}" "$worker"
echo "$good" >"$work/good.json"
expect "ps-worker: --task of type ps" 2 "\"ps\"|worker or an evaluator" -- \
  "$worker" --cluster "$work/good.json" --task ps:0
kill -TERM "$coordinator_pid" 2>/dev/null
wait "$coordinator_pid"
coordinator_status=$?
background=""
# Stopped by a signal, it exits as a shell reports that: 128 + 15.
if [ "$coordinator_status" = 143 ] \
   && grep -qF "refused a registration: unknown task worker:1" "$work/coordinator.log"; then
  pass "the coordinator logged the refusals and stopped on SIGTERM (exit 143)"
else
  cp "$work/coordinator.log" "$work/out"
  fail "coordinator with refused registrations" "exit $coordinator_status, expected 143 after SIGTERM"
fi

# coordinator keygen: a cluster's keys from its spec or from counts, a
# private directory, public certificates that name their tasks; never over
# existing keys, and a clear word for what is missing.
echo "$good" >"$work/keygen-cluster.json"
expect "keygen from a cluster spec" 0 "keys for chief:0, 1 ps, 1 worker and 0 evaluator" -- \
  "$coordinator" keygen --out "$work/kg" --cluster "$work/keygen-cluster.json"
if [ "$(stat -c %a "$work/kg")" = 700 ] && [ "$(stat -c %a "$work/kg/worker-0.cert_secret")" = 600 ] \
   && grep -qF 'task = "ps:0"' "$work/kg/public/ps-0.cert" \
   && [ "$(ls "$work/kg/public" | tr '\n' ' ')" = "chief-0.cert ps-0.cert worker-0.cert " ]; then
  pass "keygen: a 0700 directory, 0600 secrets, public certificates naming their tasks"
else
  ls -la "$work/kg" "$work/kg/public" >"$work/out" 2>&1
  fail "keygen: the key directory" "modes or files are not as documented"
fi
expect "keygen over existing keys" 1 "is not empty" -- \
  "$coordinator" keygen --out "$work/kg" --ps 1 --workers 1
expect "keygen without --out" 2 "--out DIR is required" -- "$coordinator" keygen --ps 1 --workers 1
expect "keygen without workers" 2 "--workers N (1 or more)" -- \
  "$coordinator" keygen --out "$work/kg2" --ps 1
expect "keygen, a PLAIN data plane" 0 "keys for chief:0, 1 ps, 1 worker" -- \
  "$coordinator" keygen --out "$work/kg-plain" --ps 1 --workers 1 --data-plane plain
if [ "$(stat -c %a "$work/kg-plain/passwords")" = 600 ] \
   && [ "$(stat -c %a "$work/kg-plain/worker-0.password")" = 600 ] \
   && grep -qF 'data-plane = "plain"' "$work/kg-plain/public/ps-0.cert" \
   && grep -q '^worker:0=[0-9a-f]\{64\}$' "$work/kg-plain/passwords"; then
  pass "keygen --data-plane plain: private passwords, certificates that say so"
else
  ls -la "$work/kg-plain" >"$work/out" 2>&1
  fail "keygen --data-plane plain" "the password files are not as documented"
fi
expect "--data-plane bogus" 2 "--data-plane \"bogus\": expected curve or plain" -- \
  "$coordinator" keygen --out "$work/kg3" --ps 1 --workers 1 --data-plane bogus
expect "--data-plane plain with --keys" 2 "with --keys the keys decide" -- \
  "$coordinator" --local --keys "$PS_KEYS" --data-plane plain
expect "no keys" 2 "secured with CurveZMQ: pass --keys DIR" -- \
  env -u PS_KEYS TF_CONFIG="$good" "$coordinator" --register-timeout-ms 300
expect "--keys and --insecure" 2 "--keys and --insecure contradict" -- \
  env TF_CONFIG="$good" "$coordinator" --keys "$PS_KEYS" --insecure --register-timeout-ms 300

# The Prometheus endpoint's options: refused before anything starts.
expect "--metrics-port 70000" 2 "--metrics-port \"70000\": expected a whole number in 0..65535" -- \
  "$coordinator" --local --metrics-port 70000
expect "--metrics-addr alone" 2 "it needs --metrics-port" -- \
  "$coordinator" --local --metrics-addr 127.0.0.1
expect "--metrics-addr bogus" 2 "--metrics-addr \"bogus\": expected an IPv4 or IPv6 address" -- \
  env TF_CONFIG="$good" "$coordinator" --metrics-port 0 --metrics-addr bogus \
  --register-timeout-ms 300
expect "--metrics-port in use" 2 "cannot listen on 127.0.0.1 port|Address already in use" -- \
  env TF_CONFIG="$good" /usr/bin/python3 -c 'import socket, subprocess, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
sys.exit(subprocess.run([sys.argv[1], "--metrics-port", str(s.getsockname()[1]),
                         "--register-timeout-ms", "300"]).returncode)' "$coordinator"

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
