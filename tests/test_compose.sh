#!/usr/bin/env bash
# The compose demo for real, under rootful podman: build the image of
# deploy/Dockerfile, bring up deploy/docker-compose.yml (a coordinator, 2
# ps-servers, 3 workers) with a short job, crash a worker and then a server
# mid-run, and check that the restart policy brings each back, that the
# coordinator recovers and finishes (exit 0), and that every batch was
# trained exactly once (tests/faults/check_run.py on the metrics file).
#
# Prints SKIP and exits 77 for two reasons only: it does not run as root,
# or podman cannot be installed on this system (no apt-get, or apt knows no
# such package: deploy/podman-env.sh's exit status 3). Anything else that
# stops it (a failed installation, no overlay file system, no Debian mirror
# for the base image, podman unable to run a container, a bug in
# podman-env.sh) is a FAIL with its log. Ends with PASS (exit 0) or FAIL
# (exit 1). The base image and the built image layers stay in podman's
# store for the next run; containers, the network and the volume of the
# run are removed, pass or fail.
#
# Crashes are a SIGKILL of the container's main process from the host:
# `podman kill` / `docker kill` would mark the container stopped by the
# user, and no restart policy restarts such a container (Docker and podman
# alike).
#
# Environment: PS_SOURCE_ROOT (set by meson), PS_COMPOSE_KEEP=1 keeps the
# containers and the volume after the run for a look.

# Functions called through trap and wait_for look unreachable to shellcheck.
# shellcheck disable=SC2317
set -u

root=${PS_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
compose_file=$root/deploy/docker-compose.yml
project=pscompose$$
# The test's job: 2400 steps on a fifth of the data. A worker is crashed
# at step 300 (three checkpoints in) and a server once the worker is back
# and 100 more steps are done, each when the metrics show its moment; the
# run is only as long as that takes on a fast machine, with room to spare
# (on the 2-core development machine the server is crashed near step 650
# of 2400, and the run takes about 40 s; the waits for the worker's
# failure and restart, not the steps, set the moment, so a machine that
# trains four times as fast crashes it near 70%, still before the 80% the
# test checks).
# A checkpoint every 100 steps and a heartbeat timeout of 2 s
# so recovery is quick. Every checkpoint is kept (24 of about 4 MB), so
# the one a recovery loads is still there for check_run.py to verify.
steps_per_epoch=200
epochs=12
crash_worker_at=300
export PS_DEMO_ARGS="--limit $((steps_per_epoch * 64)) --test-limit 1000 --epochs $epochs \
--checkpoint-steps 100 --keep 100 --heartbeat-ms 200 --heartbeat-timeout-ms 2000 \
--register-timeout-ms 60000"
total=$((steps_per_epoch * epochs))
# The project's own /24 (the compose file gives each service a fixed
# address in it), away from the demo's default 10.213.7.
export PS_NET="10.213.$(( $$ % 200 + 20 ))"

test=test_compose
# shellcheck source=container_lib.sh
source "$root/tests/container_lib.sh"

# ---- can this machine run it? --------------------------------------------

container_setup

# ---- from here on, a problem is a failure --------------------------------

work=$(mktemp -d /tmp/test_compose.XXXXXX)
# Each service's container (a restart keeps it), looked up once after up:
# docker-compose takes a second to start.
services=(coordinator ps-0 ps-1 worker-0 worker-1 worker-2)
declare -A containers=()
compose () { docker-compose -f "$compose_file" -p "$project" "$@"; }
result=FAIL

# The script's own stdout and stderr, for the traps: a signal can come
# while a command's output is sent elsewhere (wait_for's >/dev/null).
exec 3>&1 4>&2
cleanup () {
    local rc=$?
    exec 1>&3 2>&4
    trap - EXIT INT TERM
    if [ "$result" != PASS ]; then
        if [ ${#containers[@]} -gt 0 ]; then
            for s in "${services[@]}"; do
                [ -n "${containers[$s]:-}" ] || continue
                echo "---- $s (last lines of its log) ----"
                podman logs --tail 12 "${containers[$s]}" 2>&1 | grep -v 'snapshot of' | tail -n 10
            done
        else
            echo "---- container logs (last lines) ----"
            compose logs --no-color --tail 25 2>&1 | tail -n 150
        fi
        if [ -n "${metrics:-}" ] && [ -f "$metrics" ]; then
            echo "---- metrics (last events but checkpoints) ----"
            grep -v '"event":"checkpoint"' "$metrics" | tail -n 12
        fi
    fi
    if [ "${PS_COMPOSE_KEEP:-0}" = 1 ]; then
        say "PS_COMPOSE_KEEP=1: leaving project $project up (docker-compose -p $project down -v)"
    else
        compose down -v --remove-orphans -t 5 >"$work/down.log" 2>&1 \
            || { echo "docker-compose down failed:"; tail -n 5 "$work/down.log"; }
        # Whatever down left behind.
        podman ps -a -q --filter "label=com.docker.compose.project=$project" \
            | xargs -r podman rm -f >/dev/null 2>&1
        podman volume rm -f "${project}_state" "${project}_keys" >/dev/null 2>&1
        podman network rm -f "${project}_default" >/dev/null 2>&1
    fi
    [ "${PS_PODMAN_STARTED:-0}" = 1 ] && "$root/deploy/podman-env.sh" --stop
    if [ "$result" = PASS ]; then
        rm -rf "$work"
    else
        echo "logs in $work"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "interrupted" >&3; exit 1' INT TERM

all_exited () {
    local s
    for s in "${services[@]}"; do
        exited "$s" || return 1
    done
}

# A crash: SIGKILL to the container's main process from the host. The
# container exits 137 and its restart policy applies.
crash () {
    local pid
    pid=$(state "$1" '{{.State.Pid}}')
    [ "${pid:-0}" -gt 0 ] 2>/dev/null || fail "$1 has no running process to kill"
    say "crashing $1: kill -9 of its process $pid at step $(query step)/$total"
    kill -9 "$pid" || fail "kill -9 $pid ($1) failed"
}

# ---- build -----------------------------------------------------------------

container_build_image

# ---- run, with a worker and a server crashed -------------------------------

t0=$(date +%s)
say "starting project $project on $PS_NET.0/24: $PS_DEMO_ARGS"
compose up -d >"$work/up.log" 2>&1 || { cat "$work/up.log"; fail "docker-compose up failed"; }
while read -r id service; do
    containers[$service]=$id
done < <(podman ps -a --filter "label=com.docker.compose.project=$project" \
             --format '{{.ID}} {{index .Labels "com.docker.compose.service"}}')
for s in "${services[@]}"; do
    [ -n "${containers[$s]:-}" ] || fail "docker-compose up made no container for $s"
done
volume=$(podman volume inspect -f '{{.Mountpoint}}' "${project}_state") \
    || fail "no volume ${project}_state"
metrics=$volume/metrics.jsonl

wait_for 120 "the coordinator to start training" query has started \
    || fail "training did not start within 120 s"
got=$(query total)
[ "$got" = "$total" ] || fail "the run has $got steps, expected $total"
say "training started: $total steps"

wait_for 120 "step $crash_worker_at" step_at_least $crash_worker_at \
    || fail "no progress to step $crash_worker_at"
crash worker-1
wait_for 30 "the coordinator to declare worker:1 failed" query has worker_failed role=worker task=1 \
    || fail "the coordinator did not notice worker:1's crash within 30 s"
wait_for 60 "worker-1 to be restarted" restarted worker-1 \
    || fail "worker-1 was not restarted by its restart policy"
wait_for 30 "worker:1 to register again" query has registered role=worker task=1 restarted=true \
    || fail "the restarted worker-1 did not register within 30 s"
say "worker-1 restarted and registered again; step $(query step)/$total"

step=$(query step)
[ "$step" -lt $((total * 80 / 100)) ] \
    || fail "the run reached step $step/$total before the server could be crashed (too fast a machine for this job?)"
wait_for 60 "step $((step + 100))" step_at_least $((step + 100)) \
    || fail "no progress after worker-1 came back"
crash ps-1
wait_for 30 "the coordinator to declare ps:1 failed" query has server_failed task=1 \
    || fail "the coordinator did not notice ps:1's crash within 30 s"
wait_for 60 "ps-1 to be restarted" restarted ps-1 \
    || fail "ps-1 was not restarted by its restart policy"
wait_for 60 "the servers to be restored from a checkpoint" query has recovered \
    || fail "the coordinator did not recover from ps:1's crash within 60 s"
say "ps-1 restarted; every server restored from the newest checkpoint; step $(query step)/$total"

wait_for 600 "the coordinator to finish" exited coordinator \
    || fail "the coordinator did not finish within 600 s"
t_run=$(( $(date +%s) - t0 ))
code=$(state coordinator '{{.State.ExitCode}}')
restarts=$(state coordinator '{{.RestartCount}}')
say "the coordinator exited with status $code after ${t_run}s (restarts: $restarts)"
[ "$code" = 0 ] || fail "the coordinator exited with status $code"
[ "$restarts" = 0 ] || fail "the coordinator was restarted $restarts times"

# Told to stop, the servers and workers exit 0 and stay down.
if ! wait_for 30 "every container to exit" all_exited; then
    left=""
    for s in "${services[@]}"; do exited "$s" || left="$left $s"; done
    fail "still running 30 s after the coordinator finished:$left (a worker never told to stop waits for the coordinator forever)"
fi
for s in ps-0 ps-1 worker-0 worker-1 worker-2; do
    c=$(state "$s" '{{.State.ExitCode}}')
    [ "$c" = 0 ] || fail "$s exited with status $c after training finished"
done

# The cluster ran secured by the keys service's keys: every server and worker
# said so when it started, and none ran unsecured. The containers' logs
# (every start of each) come straight from podman, which is quicker than
# docker-compose's way through the API socket.
for s in "${services[@]}"; do
    podman logs "${containers[$s]}" >"$work/$s.log" 2>&1 || fail "no log of $s (podman logs)"
done
for s in ps-0 ps-1; do
    grep -q 'CurveZMQ' "$work/$s.log" || fail "$s did not serve with CurveZMQ"
done
for s in "${services[@]}"; do
    if grep -q -- '--insecure\|UNSECURED' "$work/$s.log"; then
        fail "$s ran without CurveZMQ"
    fi
done
say "every process ran secured (CurveZMQ, keys from the keys service)"

# ---- the run's record --------------------------------------------------------

query has worker_failed role=worker task=1 || fail "no worker_failed event"
query has server_failed task=1 || fail "no server_failed event"
query has recovered || fail "no recovered event"
checker=$root/tests/faults/check_run.py
[ -f "$checker" ] || fail "$checker is missing"
python3 "$checker" --metrics "$metrics" --total "$total" --servers 2 \
    --checkpoint-dir "$volume/checkpoints" \
    || fail "the run's check failed (violations above)"
say "$(python3 -c '
import json, sys
d = [json.loads(l) for l in open(sys.argv[1]) if "\"done\"" in l][-1]
print("done: %d/%d steps in %.1f s, test accuracy %.4f, %d checkpoints, %d worker failures, %d recoveries"
      % (d["steps"], d["total"], d["wall_s"], d["test_accuracy"], d["checkpoints"],
         d["worker_failures"], d["recoveries"]))' "$metrics")"

result=PASS
say "timings: set-up ${t_setup}s, build ${t_build}s, run ${t_run}s, total $(( $(date +%s) - t_start ))s"
echo "PASS test_compose"
exit 0
