#!/usr/bin/env bash
# ps-cluster on a real Slurm: starts munged, slurmctld and slurmd for a
# single node (configured in a temporary directory, on ports of its own),
# submits deploy/slurm/ps-cluster.sbatch with 1 coordinator + 2 servers +
# 2 workers, and checks the run's metrics: the training reached the
# accuracy such a run reaches and every step was applied exactly once
# (tests/faults/check_run.py). A second run kills worker:1's process
# (SIGKILL, the process of rank 4 of the job's first step) once training
# has begun, and then, once the relaunched worker:1 is back and another
# checkpoint is written, ps:1's (rank 2); it checks that the coordinator
# relaunched both into the job with srun, restored the server from a
# checkpoint, and that the run still completed with every step applied
# exactly once.
#
# Prints SKIP and exits 77 only when it does not run as root (slurmd and
# slurmctld must); anything else that stops it (Slurm or munge cannot be
# installed or started) is a FAIL. Every daemon is stopped by its pid and
# the temporary directory removed on exit, pass or fail; PS_SLURM_KEEP=1
# keeps the directory for a look.
#
# Environment (set by meson): PS_SOURCE_ROOT, PS_COORDINATOR, PS_SERVER,
# PS_WORKER.

# Functions called through trap look unreachable to shellcheck.
# shellcheck disable=SC2317
set -u

root=${PS_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
sbatch_file=$root/deploy/slurm/ps-cluster.sbatch
checker=$root/tests/faults/check_run.py
# A short run: 100 steps an epoch (6400 examples, batch 64). The first
# run trains 3 epochs, to a test accuracy of about 0.8 on 1000 examples;
# the second 12 epochs, long enough that a worker and then a server can be
# killed well before the end (here at about steps 100 and 450 of 1200). A
# heartbeat timeout of 2 s makes each relaunch quick.
min_accuracy=0.70
job_flags="--limit 6400 --test-limit 1000 --heartbeat-ms 200 --heartbeat-timeout-ms 2000 \
--checkpoint-steps 50 --keep 100"
t_start=$(date +%s)
say () { echo "[test_slurm $(( $(date +%s) - t_start ))s] $*"; }
skip () { echo "SKIP: test_slurm: $*"; exit 77; }
fail () { say "$*"; echo "FAIL test_slurm: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (slurmctld and slurmd run as root)"

# ---- Slurm and munge ------------------------------------------------------

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
   || ! command -v sbatch >/dev/null || ! [ -x /usr/sbin/munged ]; then
    say "installing slurm-wlm and munge"
    { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
          slurm-wlm munge; } >/dev/null 2>&1 \
        || fail "slurm-wlm and munge are not installed and apt-get could not install them" \
                "(deploy/install-deps.sh lists them)"
fi
for p in "$PS_COORDINATOR" "$PS_SERVER" "$PS_WORKER"; do
    [ -x "$p" ] || fail "$p is not built"
done
node=$(hostname)
getent hosts "$node" >/dev/null || fail "this machine's name $node does not resolve (/etc/hosts)"

tmp=$(mktemp -d /tmp/ps-slurm-XXXXXX) || fail "mktemp"
# munged runs as munge and slurmstepd reads the job's files: the directory
# must be traversable.
chmod 755 "$tmp"
pids=()
jobs_submitted=()
cleanup () {
    local status=$?
    if [ "${#jobs_submitted[@]}" -gt 0 ]; then
        scancel "${jobs_submitted[@]}" 2>/dev/null
        # The jobs' processes end with their job; give slurmd the moment
        # it takes to kill them before it is stopped itself.
        for _ in $(seq 50); do
            [ -z "$(squeue -h 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    if [ "${PS_SLURM_KEEP:-0}" = 1 ]; then
        echo "kept $tmp"
    else
        rm -rf "$tmp"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# A munge key made for this test, and munged on a socket of its own.
# The socket directory must be searchable by every user (munged checks);
# the key in it is readable by munge alone.
mkdir -m 0755 "$tmp/munge"
head -c 1024 /dev/urandom > "$tmp/munge/munge.key"
chmod 0400 "$tmp/munge/munge.key"
chown -R munge:munge "$tmp/munge"
socket=$tmp/munge/munge.socket
setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged --foreground \
    --socket="$socket" --key-file="$tmp/munge/munge.key" --pid-file="$tmp/munge/munged.pid" \
    --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" \
    >"$tmp/munge/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
    munge --socket="$socket" -n 2>/dev/null | unmunge --socket="$socket" >/dev/null 2>&1 && break
    sleep 0.1
done
munge --socket="$socket" -n | unmunge --socket="$socket" >/dev/null 2>&1 \
    || fail "munged did not start: $(cat "$tmp/munge/munged.out" "$tmp/munge/munged.log" 2>/dev/null)"

# One node that claims 8 CPUs (config_overrides) in a partition that
# shares them (OverSubscribe=FORCE), so that the five tasks and the
# relaunched ones fit on a small machine. Ports of its own: other work on
# the machine may run a Slurm of its own.
port=$(( 20000 + ($$ % 2000) * 4 ))
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/log"
cat > "$tmp/slurm.conf" <<EOF
ClusterName=pstest$$
SlurmctldHost=$node
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=$node CPUs=8 State=UNKNOWN
PartitionName=pstest Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -D -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 150); do
    [ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ] && break
    sleep 0.2
done
[ "$(sinfo -h -n "$node" -o %t 2>/dev/null)" = idle ] \
    || fail "the Slurm node did not become idle: $(sinfo 2>&1; tail -5 "$tmp"/log/*.log)"
say "munged, slurmctld and slurmd up (ports $port, $((port + 1)))"

# ---- the runs ---------------------------------------------------------------

# The programs, in one directory for the sbatch file's PS_BIN.
mkdir "$tmp/bin"
ln -s "$PS_COORDINATOR" "$PS_SERVER" "$PS_WORKER" "$tmp/bin/"

# submit NAME EPOCHS: submit the sbatch file from $tmp/NAME (its submit
# directory), 1 node and 5 tasks; prints the job id.
submit () {
    mkdir "$tmp/$1"
    (cd "$tmp/$1" && PS_BIN=$tmp/bin PS_SERVERS=2 PS_EPOCHS=$2 PS_JOB_FLAGS=$job_flags \
         PS_PORT_BASE=$((port + 2)) PS_METRICS=$tmp/$1/metrics.jsonl \
         PS_CHECKPOINT_DIR=$tmp/$1/checkpoints \
         sbatch --parsable --nodes=1 --ntasks=5 --output="$tmp/$1/job.out" "$sbatch_file")
}

# finish NAME JOB: wait (up to 120 s) for the job to end, and check that
# it completed with the coordinator's exit status 0.
finish () {
    for _ in $(seq 600); do
        [ -z "$(squeue -h -j "$2" 2>/dev/null)" ] && break
        sleep 0.2
    done
    [ -z "$(squeue -h -j "$2" 2>/dev/null)" ] \
        || fail "$1: job $2 still runs after 120 s: $(tail -20 "$tmp/$1/job.out")"
    local state
    state=$(scontrol show job "$2" 2>/dev/null | grep -o 'JobState=[A-Z]*')
    if [ "$state" != JobState=COMPLETED ] \
       || ! grep -q "coordinator exit status 0" "$tmp/$1/job.out"; then
        fail "$1: job $2 ended with $state: $(tail -30 "$tmp/$1/job.out")"
    fi
    [ ! -e "$tmp/$1/.ps-cluster-$2" ] || fail "$1: the job's key directory was left behind"
}

# check NAME TOTAL: the run trained every one of TOTAL steps exactly once
# (its ledgers, the schedule, the workers' counts) to min_accuracy.
check () {
    /usr/bin/python3 "$checker" --metrics "$tmp/$1/metrics.jsonl" --total "$2" --servers 2 \
        --checkpoint-dir "$tmp/$1/checkpoints" \
        || fail "$1: the run's check failed (violations above)"
    local accuracy
    accuracy=$(/usr/bin/python3 -c 'import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(rows[-1]["test_accuracy"] if rows[-1].get("event") == "done" else 0)' \
        "$tmp/$1/metrics.jsonl")
    /usr/bin/python3 -c 'import sys; sys.exit(float(sys.argv[1]) < float(sys.argv[2]))' \
        "$accuracy" "$min_accuracy" \
        || fail "$1: test accuracy $accuracy, expected at least $min_accuracy"
    grep -q -- "--insecure\|UNSECURED" "$tmp/$1/job.out" && fail "$1: a task ran without CurveZMQ"
    say "$1: $2 steps, each applied once, test accuracy $accuracy"
}

# Metrics events of the run NAME that match EVENT and KEY=VALUE pairs.
count () {
    /usr/bin/python3 - "$tmp/$1/metrics.jsonl" "${@:2}" <<'PY'
import json, sys
rows = []
try:
    for line in open(sys.argv[1], encoding="utf-8"):
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass        # a line being written
except OSError:
    pass
event, kv = sys.argv[2], [a.split("=", 1) for a in sys.argv[3:]]
print(sum(1 for r in rows if r.get("event") == event
          and all(str(r.get(k)).lower() == v.lower() for k, v in kv)))
PY
}

job=$(submit plain 3) || fail "sbatch refused the job"
jobs_submitted+=("$job")
finish plain "$job"
check plain 300

# rank_pid JOB RANK: the pid of rank RANK of the job's first step.
rank_pid () {
    local pid env
    for pid in $(pgrep -x ps-worker) $(pgrep -x ps-server); do
        env=$(tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null)
        if grep -qx "SLURM_JOB_ID=$1" <<<"$env" && grep -qx "SLURM_PROCID=$2" <<<"$env" \
           && grep -qx "SLURM_STEP_ID=0" <<<"$env"; then
            echo "$pid"
        fi
    done
}

# wait_events NAME N EVENT [KEY=VALUE...]: wait up to 60 s for N events.
wait_events () {
    local name=$1 n=$2
    shift 2
    for _ in $(seq 600); do
        [ "$(count "$name" "$@")" -ge "$n" ] && return 0
        sleep 0.1
    done
    fail "$name: no $n $* events within 60 s: $(tail -20 "$tmp/$name/job.out")"
}

# kill_rank NAME JOB RANK TASK: kill the process of rank RANK (task TASK)
# while the run is still going.
kill_rank () {
    local victim
    victim=$(rank_pid "$2" "$3")
    [ -n "$victim" ] || fail "$1: no process of rank $3 ($4) in job $2"
    [ "$(count "$1" "done")" = 0 ] || fail "$1: the run was over before $4 could be killed"
    kill -9 "$victim"
    say "$1: $4 (rank $3, pid $victim) killed"
}

# The second run: worker:1 is rank 4 of the job's first step, ps:1 rank 2.
# A checkpoint after step 0 shows that training has begun.
job=$(submit killed 12) || fail "sbatch refused the job"
jobs_submitted+=("$job")
wait_events killed 2 checkpoint
kill_rank killed "$job" 4 worker:1
wait_events killed 1 registered role=worker task=1 restarted=true
checkpoints=$(count killed checkpoint)
wait_events killed $((checkpoints + 1)) checkpoint
kill_rank killed "$job" 2 ps:1
finish killed "$job"
[ "$(count killed worker_failed role=worker task=1)" -ge 1 ] \
    || fail "killed: no worker_failed event for worker:1"
[ "$(count killed server_failed task=1)" -ge 1 ] || fail "killed: no server_failed event for ps:1"
[ "$(count killed recovered)" -ge 1 ] || fail "killed: no recovered event (ps:1 not restored)"
[ "$(count killed registered role=ps task=1 restarted=true)" -ge 1 ] \
    || fail "killed: ps:1 did not register again as a new process"
for task in worker:1 ps:1; do
    grep -q "relaunched $task into Slurm job $job" "$tmp/killed/job.out" \
        || fail "killed: the coordinator's log does not say it relaunched $task"
done
check killed 1200

say "PASS in $(( $(date +%s) - t_start ))s"
echo "PASS test_slurm"
exit 0
