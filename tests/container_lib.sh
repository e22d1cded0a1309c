# Helpers shared by the container tests (test_compose.sh, test_kube.sh),
# sourced by them after they set $root (the source tree) and $test (their
# name). They run under rootful podman, which deploy/podman-env.sh sets up.
#
#   say TEXT, skip REASON, fail_setup REASON   report (skip: exit 77)
#   container_setup        can this machine run containers? Installs and
#                          sets up podman (podman-env.sh), or skips/fails
#   container_build_image  build the image of deploy/Dockerfile, the one
#                          way both tests build it: docker-compose build of
#                          deploy/docker-compose.yml through podman's API
#                          socket (layers cached: the second test reuses
#                          the first's). Needs $work and fail
#   fail REASON            report and exit 1 (the test's trap cleans up)
#   state NAME FORMAT, running NAME, restarted NAME, exited NAME
#                          the container the test knows as NAME, in its
#                          associative array containers (podman inspect)
#   step_at_least N        the run's step (query) has reached N
#   query CMD...           read the coordinator's metrics file $metrics
#   wait_for LIMIT WHAT COMMAND...   wait for COMMAND to succeed
#
# SKIP (exit 77) for two reasons only: not root, or podman cannot be
# installed on this system (no apt-get, or apt knows no such package:
# podman-env.sh's exit status 3). Anything else is a FAIL.

# shellcheck shell=bash
# The sourcing test sets test, root, work, metrics, total and containers.
# shellcheck disable=SC2154

t_start=$(date +%s)
say () { echo "[$test $(( $(date +%s) - t_start ))s] $*"; }
skip () { echo "SKIP: $test: $*"; exit 77; }
# Before the containers exist (each test's fail takes them down).
fail_setup () { echo "FAIL $test: $*"; exit 1; }
# Once they may exist: the test's EXIT trap takes them down.
fail () {
    say "$*"
    echo "FAIL $test: $*"
    exit 1
}

state () { podman inspect -f "$2" "${containers[$1]}" 2>/dev/null; }
running () { [ "$(state "$1" '{{.State.Status}}')" = running ]; }
restarted () { running "$1" && [ "$(state "$1" '{{.RestartCount}}')" -ge 1 ]; }
exited () { [ "$(state "$1" '{{.State.Status}}')" = exited ]; }
step_at_least () { [ "$(query step)" -ge "$1" ]; }

container_setup () {
    [ "$(id -u)" -eq 0 ] || skip "needs root (it runs containers under rootful podman)"
    command -v apt-get >/dev/null || command -v podman >/dev/null \
        || skip "podman cannot be installed here: no podman, and no apt-get to install it"
    if ! grep -qw overlay /proc/filesystems && ! modprobe overlay 2>/dev/null; then
        fail_setup "the kernel has no overlay file system (podman's storage driver)"
    fi
    command -v python3 >/dev/null || fail_setup "no python3 to read the metrics"

    local had_base=0 t0 setup_log setup_status reason out
    podman image exists docker.io/library/debian:bookworm-slim 2>/dev/null && had_base=1
    t0=$(date +%s)
    setup_log=$(mktemp "/tmp/$test-setup.XXXXXX")
    # Installs what is missing, makes the base image, starts the API service,
    # exports DOCKER_HOST, CONTAINERS_CONF and PS_PODMAN_STARTED.
    # shellcheck source=../deploy/podman-env.sh
    source "$root/deploy/podman-env.sh" 2>"$setup_log"
    setup_status=$?
    if [ $setup_status -ne 0 ]; then
        cat "$setup_log"
        reason=$(grep 'podman-env:' "$setup_log" | tail -n 1)
        rm -f "$setup_log"
        [ $setup_status -eq 3 ] && skip "podman cannot be installed here: ${reason#podman-env: }"
        fail_setup "deploy/podman-env.sh failed with exit status $setup_status${reason:+: $reason}" \
            "(its log is above)"
    fi
    rm -f "$setup_log"
    t_setup=$(( $(date +%s) - t0 ))
    say "set-up: ${t_setup}s ($( [ $had_base -eq 1 ] && echo "base image cached" || echo "base image made with debootstrap"))"
    if ! out=$(podman run --rm docker.io/library/debian:bookworm-slim true 2>&1); then
        echo "$out"
        [ "${PS_PODMAN_STARTED:-0}" = 1 ] && "$root/deploy/podman-env.sh" --stop
        fail_setup "podman cannot run a container here (its output is above)"
    fi
}

container_build_image () {
    local t0 cached
    say "building the image (docker-compose build, through podman's API socket)"
    t0=$(date +%s)
    if ! docker-compose -f "$root/deploy/docker-compose.yml" -p "ps$test$$" build \
         >"$work/build.log" 2>&1; then
        tail -n 40 "$work/build.log"
        fail "the image did not build (log above)"
    fi
    t_build=$(( $(date +%s) - t0 ))
    cached=$(grep -c 'Using cache' "$work/build.log")
    say "build: ${t_build}s ($cached steps from the cache); image $(podman image inspect -f '{{.Size}}' ps-cluster:latest | awk '{printf "%.0f MB", $1 / 1e6}')"
}

# Queries on the metrics file (JSON lines).
#   total                 the started event's total, or nothing
#   step                  the newest step reported (checkpoint or progress)
#   has EVENT [K=V ...]   exit 0 when an event with those fields is there
#   count EVENT           how many there are
query () {
    python3 - "$metrics" "$@" <<'PY'
import json, sys
path, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
try:
    for line in open(path, encoding="utf-8"):
        try:
            rows.append(json.loads(line))
        except ValueError:
            pass        # a line being written
except OSError:
    pass
def match(r, event, kv):
    if r.get("event") != event:
        return False
    for k, v in kv:
        if str(r.get(k)).lower() != v.lower():
            return False
    return True
if cmd == "total":
    for r in rows:
        if r.get("event") == "started":
            print(r["total"]); break
elif cmd == "step":
    step = 0
    for r in rows:
        if r.get("event") in ("checkpoint", "progress", "recovered"):
            step = r.get("step", step)
    print(step)
elif cmd in ("has", "count"):
    kv = [a.split("=", 1) for a in args[1:]]
    n = sum(1 for r in rows if match(r, args[0], kv))
    if cmd == "count":
        print(n)
    sys.exit(0 if n else 1)
PY
}

# Wait up to $1 seconds for the command after it to succeed, saying what
# it waits for every 10 s. Returns 1 on timeout.
wait_for () {
    local limit=$1 what=$2 t0 last=0
    shift 2
    t0=$(date +%s)
    while ! "$@" >/dev/null 2>&1; do
        local now=$(( $(date +%s) - t0 ))
        [ "$now" -ge "$limit" ] && return 1
        if [ $((now - last)) -ge 10 ]; then
            say "waiting for $what (${now}s; step $(query step)/$total)"
            last=$now
        fi
        sleep 0.2
    done
}
