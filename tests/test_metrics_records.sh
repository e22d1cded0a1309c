#!/bin/bash
# The metrics files of standalone training (ps-worker --standalone
# --metrics, of the CNN and of a click-through-rate model) and of a local
# cluster (coordinator --metrics) have one record format: every line of
# each validates against schemas/metrics.schema.json with two validators
# (Debian's python3-jsonschema and our common/base/ps_jsonschema, through
# tests/jsonschema_check), and their progress records carry sane learning
# rates, step times and wait times: the cluster's rate follows its
# piecewise schedule step by step, its workers wait on the servers, and a
# standalone step waits on nothing. The cluster trains every step exactly
# once (tests/faults/check_run.py).
#
# Usage: test_metrics_records.sh JSONSCHEMA_CHECK GEN_CTR (the test tools'
# paths), with PS_WORKER, PS_COORDINATOR and PS_SOURCE_ROOT set
# (tests/meson.build).
set -u
check_tool=${1:?usage: test_metrics_records.sh JSONSCHEMA_CHECK GEN_CTR}
gen=${2:?usage: test_metrics_records.sh JSONSCHEMA_CHECK GEN_CTR}
worker=${PS_WORKER:?PS_WORKER is not set}
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
schema="${PS_SOURCE_ROOT:?PS_SOURCE_ROOT is not set}/schemas/metrics.schema.json"
data=${PS_DATA_DIR:-/usr/share/datasets/fashion-mnist}
work=$(mktemp -d /tmp/ps-metrics-records-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
. "$(dirname "$0")/cli_lib.sh"

# Standalone: 50 steps of batch 64 at lr 0.002, a progress window every
# 0.1 s, an evaluation every 25 steps.
run 120 "$worker" --standalone --epochs 1 --limit 3200 --test-limit 500 \
  --threads 1 --lr 0.002 --progress 0.1 --eval-steps 25 --metrics "$work/standalone.jsonl" \
  --data "$data"
if [ "$status" = 0 ]; then
  pass "standalone run (exit 0)"
else
  fail "standalone run" "exit $status (124: timed out), expected 0"
fi

# A click-through-rate model standalone: lr on 20000 generated Criteo
# lines, 40 steps of batch 512, a progress window every 0.01 s (its steps
# take a millisecond or so).
run 60 "$gen" --out "$work/ctr" --train-rows 20000 --test-rows 2000 --seed 1 \
  --cardinalities small
[ "$status" = 0 ] || fail "gen_ctr" "exit $status"
run 120 "$worker" --standalone --model lr --data "$work/ctr/train.txt" \
  --test-data "$work/ctr/test.txt" --progress 0.01 --metrics "$work/ctr.jsonl"
if [ "$status" = 0 ]; then
  pass "standalone CTR run (exit 0)"
else
  fail "standalone CTR run" "exit $status (124: timed out), expected 0"
fi

# A local cluster: the same 50 steps over 2 workers and 1 server, with the
# rate 0.002 for the first half epoch and 0.0005 after (PiecewiseConstant
# at 0.5 epochs), and progress windows of 0.1 s.
cat >"$work/job.json" <<'EOF'
{"log_seconds": 0.1,
 "lr_schedule": {"kind": "piecewise", "boundaries": [0.5], "values": [0.002, 0.0005]}}
EOF
run 180 "$coordinator" --local --ps 1 --workers 2 --job "$work/job.json" \
  --epochs 1 --limit 3200 --test-limit 500 --log-dir "$work/logs" \
  --checkpoint-dir "$work/ckpt" --metrics "$work/cluster.jsonl" --data "$data"
if [ "$status" = 0 ]; then
  pass "local cluster run (exit 0)"
else
  fail "local cluster run" "exit $status (124: timed out), expected 0"
fi
# It logs how it split this machine's cores (coordinator/ps_cores.h), and its
# servers and workers run with the threads it chose.
split=$(grep -o "local cluster on [0-9]* cores ([a-zA-Z ]*): 2 workers of [0-9]* compute threads, \
1 servers of [0-9]* apply threads.*, 1 ZeroMQ I/O thread per process" "$work/out")
wthreads=$(echo "$split" | sed -n 's/.*2 workers of \([0-9]*\) compute.*/\1/p')
sthreads=$(echo "$split" | sed -n 's/.*1 servers of \([0-9]*\) apply.*/\1/p')
if [ -n "$wthreads" ] && [ -n "$sthreads" ] \
   && grep -q "with $sthreads apply threads" "$work/logs/ps0.log"; then
  pass "local cluster logs its split of the cores ($wthreads + $sthreads threads)"
else
  fail "local cluster logs its split of the cores" "no split line, or ps0 does not use it: \
$(grep -i "cores\|apply threads" "$work/out" "$work/logs/ps0.log")"
fi

# A local cluster's 50-step run with an evaluator, of metrics file $1 and
# checkpoints in $4: prints how many evaluations, or exits 1 saying what is
# wrong. At least $2 of them, the last of the final step; both workers
# trained; check_run.py finds every batch applied once. $3 "idle": the
# evaluator computes in the cores' idle time, so a worker does the final
# evaluation (ps_coord.h, idle_evaluator).
evaluator_run () {
  local checked
  checked=$(/usr/bin/python3 "$(dirname "$0")/faults/check_run.py" --metrics "$1" --total 50 \
    --servers 1 --mode async --checkpoint-dir "$4" 2>&1) || { echo "check_run.py: $checked"; return 1; }
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
evals = [r for r in rows if r["event"] == "eval"]
idle = sys.argv[3] == "idle"
# The launcher starts the evaluator last, and the coordinator waits for it
# (ps_mode_ps.c, s_evaluator_coming) until it registers, or every step is
# handed out (the newest evaluation asked for is then after step 40 of 50),
# or the registration timeout (60 s) has passed since the start. A worker
# may evaluate only so: before the evaluator came (whose registration goes
# unrecorded if it comes after the done record) and for one of those two
# reasons.
# The hand-out's time is the record's (time_s counts from the metrics
# file's opening) less the evaluation's; params_at_s counts from the
# "started" record, as the registration timeout does, and is when the
# task read the parameters: after the hand-out, by at least the request's
# round trip and the pull (0.1 ms is far less), and before the result.
started = [r["time_s"] for r in rows if r["event"] == "started"]
came = [r["time_s"] for r in rows if r["event"] == "registered" and r["role"] == "evaluator"]
came0 = came[0] if came else float("inf")
def handed(r):
    return r["time_s"] - r["eval_ms"] / 1e3
if not started:
    sys.exit("no started record")
read = [r for r in evals if not handed(r) + 1e-4 < started[0] + r["params_at_s"] <= r["time_s"]]
if read:
    sys.exit("params_at_s not between the hand-out and the result: %s" % read[0])
final = evals[-1] if evals else None
bad = [r for r in evals if r["role"] != "evaluator"
       and not (idle and r is final)
       and not (handed(r) < came0
                and (r["step"] >= 40 or handed(r) - started[0] >= 60))]
done = [r for r in rows if r["event"] == "done"]
# Evaluations asked for while one runs supersede the one waiting: how many
# are done depends on the evaluator's speed, but never the final one.
if (len(evals) < int(sys.argv[2]) or bad or not done or done[-1]["steps"] != 50
        or final["step"] != 50 or (idle and final["role"] != "worker")
        or not all(n > 0 for n in done[-1]["worker_steps"])):
    sys.exit("%d evaluations, by %s, the last of step %s; done %s" % (
        len(evals), sorted({r["role"] for r in evals}), evals[-1]["step"] if evals else None,
        done[-1:]))
print(len(evals))
PY
}

# Where the cores leave 2 after a core for each worker and server (--cores 8
# says so on any machine), a local cluster starts an evaluator, which does
# every evaluation once it has registered: no worker is handed one after
# that, so no training step waits for it. Every batch is still applied
# exactly once.
run 180 "$coordinator" --local --cores 8 --ps 1 --workers 2 --epochs 1 --limit 3200 \
  --test-limit 500 --eval-steps 10 --log-dir "$work/elogs" --checkpoint-dir "$work/eckpt" \
  --metrics "$work/evaluator.jsonl" --data "$data"
if [ "$status" != 0 ]; then
  fail "local cluster with an evaluator by default" "exit $status (124: timed out), expected 0"
elif ! grep -q "local cluster on 8 cores (--cores): 2 workers of 2 compute threads, 1 servers \
of 1 apply threads, an evaluator of 2 compute threads" "$work/out"; then
  fail "local cluster with an evaluator by default" "no split line with an evaluator: \
$(grep "cores" "$work/out")"
elif ! evals=$(evaluator_run "$work/evaluator.jsonl" 2 own "$work/eckpt" 2>&1); then
  fail "local cluster with an evaluator by default" "$evals"
else
  pass "a local cluster with cores to spare evaluates on an evaluator ($evals evaluations)"
fi

# Where the cores leave nothing to spare (--cores 2 says so on any machine),
# the evaluator computes in their idle time (ps-worker --idle-priority,
# SCHED_IDLE): it does every evaluation while steps are left, once it has
# registered, so no worker stops training for one; an evaluation asked for
# while it computes supersedes the one waiting. The final one a worker
# does, idle by then, so that the run's end never waits for idle CPU.
# Every batch is applied once.
run 180 "$coordinator" --local --cores 2 --ps 1 --workers 2 --epochs 1 --limit 3200 \
  --test-limit 500 --eval-steps 10 --log-dir "$work/ilogs" --checkpoint-dir "$work/ickpt" \
  --metrics "$work/idle.jsonl" --data "$data"
if [ "$status" != 0 ]; then
  fail "local cluster on 2 cores: an evaluator in the idle time" \
    "exit $status (124: timed out), expected 0"
elif ! grep -q "local cluster on 2 cores (--cores): 2 workers of 1 compute threads, 1 servers \
of 0 apply threads, an evaluator of 2 compute threads in the cores' idle time" "$work/out"; then
  fail "local cluster on 2 cores: an evaluator in the idle time" "no split line with one: \
$(grep "cores" "$work/out")"
elif ! grep -qF "computing in the cores' idle time (SCHED_IDLE)" "$work/ilogs/evaluator0.log"; then
  fail "local cluster on 2 cores: an evaluator in the idle time" "the evaluator did not take \
SCHED_IDLE: $(tail -3 "$work/ilogs/evaluator0.log")"
elif ! ievals=$(evaluator_run "$work/idle.jsonl" 1 idle "$work/ickpt" 2>&1); then
  fail "local cluster on 2 cores: an evaluator in the idle time" "$ievals"
else
  pass "a local cluster on 2 cores evaluates on an evaluator in their idle time \
($ievals evaluations, the final one by a worker)"
fi

# The evaluator killed once it has evaluated: as today, its evaluation
# waits again for the next task that asks (a worker, while the supervisor
# restarts it), the run completes, and every batch is applied once.
"$coordinator" --local --cores 8 --ps 1 --workers 2 --epochs 4 --limit 3200 --test-limit 500 \
  --eval-steps 5 --log-dir "$work/klogs" --checkpoint-dir "$work/kckpt" \
  --metrics "$work/killed.jsonl" --data "$data" >"$work/kout" 2>&1 &
kcoord=$!
for _ in $(seq 1 600); do
  grep -q '"event":"eval".*"role":"evaluator"' "$work/killed.jsonl" 2>/dev/null && break
  kill -0 "$kcoord" 2>/dev/null || break
  sleep 0.1
done
kpid=$(grep -o "started evaluator:0 (pid [0-9]*" "$work/kout" | grep -o "[0-9]*$")
killed=no
[ -n "$kpid" ] && kill -9 "$kpid" 2>/dev/null && killed=yes
wait "$kcoord"
kstatus=$?
if [ "$killed" != yes ]; then
  fail "evaluator killed mid-run" "no evaluator to kill (pid '$kpid'); the run exited $kstatus"
elif [ "$kstatus" != 0 ]; then
  fail "evaluator killed mid-run" "exit $kstatus, expected 0: $(tail -5 "$work/kout")"
elif ! grep -q "evaluator:0 failed" "$work/kout" \
     || ! kproblem=$(/usr/bin/python3 - "$work/killed.jsonl" <<'PY' 2>&1
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
done = rows[-1]
evals = [r for r in rows if r["event"] == "eval"]
if done["event"] != "done" or done["steps"] != done["total"] or evals[-1]["step"] != done["total"]:
    sys.exit("done %s, last evaluation of step %s" % (done.get("steps"), evals[-1]["step"]))
PY
); then
  fail "evaluator killed mid-run" "no failure logged, or $kproblem"
elif ! checked=$(/usr/bin/python3 "$(dirname "$0")/faults/check_run.py" \
    --metrics "$work/killed.jsonl" --total 200 --servers 1 --mode async \
    --checkpoint-dir "$work/kckpt" 2>&1); then
  fail "evaluator killed mid-run" "check_run.py: $checked"
else
  pass "an evaluator killed mid-run: the run completes, evaluated to its last step, \
every batch once"
fi

problem=$(/usr/bin/python3 - "$schema" "$check_tool" "$work" <<'PY' 2>&1
import json, os, subprocess, sys
import jsonschema

schema_path, check_tool, work = sys.argv[1:]
schema = json.load(open(schema_path))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
problems = []
files = {name: os.path.join(work, name + ".jsonl") for name in ("standalone", "ctr", "cluster")}
records = {}
for name, path in files.items():
    lines = [l for l in open(path) if l.strip()]
    records[name] = [json.loads(l) for l in lines]
    # Every line by python3-jsonschema, then by ps_jsonschema: one file per line.
    docs = []
    for i, (line, record) in enumerate(zip(lines, records[name])):
        for error in validator.iter_errors(record):
            problems.append("%s line %d: python3-jsonschema: %s" % (name, i + 1, error.message))
        docs.append(os.path.join(work, "%s-%d.json" % (name, i + 1)))
        with open(docs[-1], "w") as f:
            f.write(line)
    verdicts = subprocess.run([check_tool, schema_path] + docs, capture_output=True,
                              text=True).stdout.splitlines()
    if len(verdicts) != len(docs):
        problems.append("%s: jsonschema_check gave %d verdicts for %d lines"
                        % (name, len(verdicts), len(docs)))
    for i, verdict in enumerate(verdicts):
        if verdict != "valid":
            problems.append("%s line %d: ps_jsonschema: %s" % (name, i + 1, verdict))
    if not records[name] or records[name][-1]["event"] != "done" \
       or [r["event"] for r in records[name]].count("done") != 1:
        problems.append("%s: does not end with its one done record" % name)
    progress = [r for r in records[name] if r["event"] == "progress"]
    if not progress:
        problems.append("%s: no progress record" % name)
    for r in progress:
        if not r["step_ms"] > 0 or not 0 <= r["wait_ms"] <= r["step_ms"]:
            problems.append("%s: step_ms %g and wait_ms %g, expected 0 < step_ms and "
                            "0 <= wait_ms <= step_ms" % (name, r["step_ms"], r["wait_ms"]))

# Standalone: the constant rate, and steps that wait on nothing.
for r in (r for r in records["standalone"] if r["event"] == "progress"):
    if abs(r["lr"] - 0.002) > 1e-12 or r["wait_ms"] != 0:
        problems.append("standalone progress at step %d: lr %g and wait_ms %g, expected "
                        "0.002 and 0" % (r["step"], r["lr"], r["wait_ms"]))
# The CTR model: its optimizer's rate, steps that wait on nothing, and a
# done record of the standalone mode.
for r in (r for r in records["ctr"] if r["event"] == "progress"):
    if not r["lr"] > 0 or r["wait_ms"] != 0:
        problems.append("ctr progress at step %d: lr %g and wait_ms %g, expected > 0 and 0"
                        % (r["step"], r["lr"], r["wait_ms"]))
for name in ("standalone", "ctr"):
    if records[name] and records[name][-1].get("mode") != "standalone":
        problems.append("%s: done record's mode %s, expected standalone"
                        % (name, records[name][-1].get("mode")))
# The cluster: the schedule's rate for the next step (25 steps at 0.002,
# then 0.0005; the last step's once all 50 are done), and workers that
# waited on the servers.
progress = [r for r in records["cluster"] if r["event"] == "progress"]
for r in progress:
    want = 0.002 if min(r["step"] + 1, 50) <= 25 else 0.0005
    if abs(r["lr"] - want) > 1e-12:
        problems.append("cluster progress at step %d: lr %g, expected %g"
                        % (r["step"], r["lr"], want))
if progress and not any(r["wait_ms"] > 0 for r in progress):
    problems.append("cluster: no progress record with wait_ms > 0")
print("; ".join(problems))
PY
)
# The cluster trained every batch exactly once, by the check the
# failure-injection harness and the compose test use.
if ! checked=$(/usr/bin/python3 "$(dirname "$0")/faults/check_run.py" \
    --metrics "$work/cluster.jsonl" --total 50 --servers 1 --mode async \
    --checkpoint-dir "$work/ckpt" 2>&1); then
  problem="${problem:+$problem; }check_run.py: $checked"
fi
if [ -z "$problem" ]; then
  pass "both metrics files validate against schemas/metrics.schema.json, with sane lr, step_ms and wait_ms"
else
  fail "metrics records" "$problem"
fi

[ "$failures" = 0 ] || exit 1
