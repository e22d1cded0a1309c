#!/bin/bash
# The coordinator's Prometheus endpoint, scraped by Debian's real
# prometheus server: a local cluster trains with --metrics-port 0 (any free
# port, which the coordinator logs); a scrape of /metrics passes
# `promtool check metrics` and has the families the README promises; a
# prometheus started here with a scrape config pointed at the coordinator
# answers queries for ps_steps_total, whose value increases between two
# queries, and for the per-worker counters and the step-time histogram.
#
# The run is far longer than the test: the coordinator is stopped with
# SIGTERM once the checks are done, and stops its cluster. Prints SKIP and
# exits 77 when prometheus or promtool is not installed
# (deploy/install-deps.sh installs them); anything else that goes wrong is
# a FAIL. Everything started is stopped by its pid, pass or fail.
#
# Environment: PS_COORDINATOR (set by meson).
set -u
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
data=${PS_DATA_DIR:-/usr/share/datasets/fashion-mnist}
for tool in prometheus promtool; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: test_prometheus: $tool is not installed (Debian's prometheus package;" \
      "deploy/install-deps.sh installs it)"
    exit 77
  fi
done
work=$(mktemp -d /tmp/ps-prometheus-XXXXXX)
coord_pid=""
prom_pid=""
# Stop what was started, by pid: the coordinator with SIGTERM (it stops
# its cluster's processes), prometheus too; then wait for both.
cleanup () {
  for pid in $prom_pid $coord_pid; do
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in $prom_pid $coord_pid; do
    timeout 60 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
. "$(dirname "$0")/cli_lib.sh"

# wait_for SECONDS COMMAND...: poll COMMAND every 0.2 s until it succeeds.
wait_for () {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}

# --- the coordinator -----------------------------------------------------------
"$coordinator" --local --ps 1 --workers 2 --epochs 20 --metrics-port 0 \
  --log-dir "$work/logs" --checkpoint-dir "$work/ckpt" --data "$data" \
  >"$work/coordinator.log" 2>&1 &
coord_pid=$!
endpoint () {
  url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/metrics' "$work/coordinator.log" | head -n 1)
  [ -n "$url" ]
}
# The endpoint is up before the cluster starts; the run's first steps take
# a while on a loaded machine, and a worker's series appears with its first
# step: the scrape checked below is one where both workers have stepped.
has_steps () {
  /usr/bin/python3 - "$url" "$work/scrape.txt" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
open(sys.argv[2], "w").write(text)
m = re.search(r"^ps_steps_total (\S+)$", text, re.M)
workers = all('ps_worker_steps_total{worker="%d"}' % w in text for w in (0, 1))
sys.exit(0 if m and float(m.group(1)) > 0 and workers else 1)
PY
}
if ! wait_for 60 endpoint || ! wait_for 120 has_steps; then
  cp "$work/coordinator.log" "$work/out"
  fail "the coordinator serves /metrics with steps" \
    "no endpoint logged in 60 s, or no step of both workers counted in 120 s more"
  exit 1
fi
pass "the coordinator serves $url"

# --- one scrape, checked by promtool --------------------------------------------
run 30 promtool check metrics <"$work/scrape.txt"
if [ "$status" = 0 ] && [ ! -s "$work/out" ]; then
  pass "promtool check metrics: no problem"
else
  fail "promtool check metrics" "exit $status, expected 0 and no lint"
fi
missing=""
for family in "# TYPE ps_steps_total counter" "# TYPE ps_samples_total counter" \
    "# TYPE ps_samples_per_second gauge" "# TYPE ps_loss gauge" "# TYPE ps_accuracy gauge" \
    "# TYPE ps_step_seconds histogram" 'ps_step_seconds_bucket{le="+Inf"}' \
    'ps_worker_steps_total{worker="0"}' 'ps_worker_steps_total{worker="1"}' \
    "# TYPE ps_failures_total counter" "# TYPE ps_recoveries_total counter" \
    "# TYPE ps_checkpoint_seconds histogram"; do
  grep -qF -- "$family" "$work/scrape.txt" || missing="$missing '$family'"
done
# At least once: a loaded machine may make the server's link register
# again after a silence, which counts.
grep -qE '^ps_server_registrations_total\{server="0"\} [1-9][0-9]*$' "$work/scrape.txt" \
  || missing="$missing 'ps_server_registrations_total{server=\"0\"} N >= 1'"
cp "$work/scrape.txt" "$work/out"
if [ -z "$missing" ]; then
  pass "the scrape has the step, sample, rate, loss, accuracy, failure, checkpoint and per-task families"
else
  fail "the scrape's families" "missing:$missing"
fi

# --- a real prometheus scraping it -------------------------------------------
target=${url#http://}
target=${target%/metrics}
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: ps-cluster
    static_configs:
      - targets: ["$target"]
EOF
# ready: prometheus answers on $port (status 2 at once when it has exited).
ready () {
  kill -0 "$prom_pid" 2>/dev/null || return 2
  /usr/bin/python3 -c 'import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/-/ready" % sys.argv[1], timeout=2)' "$port" \
    >/dev/null 2>&1
}
# A free port for prometheus is one the kernel hands out and the test
# releases; another program may take it in between, so a prometheus that
# exits at once is started again on another port (three tries).
for try in 1 2 3; do
  port=$(/usr/bin/python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb-$try" \
    --web.listen-address="127.0.0.1:$port" >"$work/prometheus.log" 2>&1 &
  prom_pid=$!
  deadline=$(( $(date +%s) + 60 ))
  until ready; do
    # Exited (status 2), or not ready in time: stopped, and another port.
    if [ $? = 2 ] || [ "$(date +%s)" -ge "$deadline" ]; then
      kill -TERM "$prom_pid" 2>/dev/null
      wait "$prom_pid" 2>/dev/null
      continue 2
    fi
    sleep 0.2
  done
  break
done
if ! ready; then
  cp "$work/prometheus.log" "$work/out"
  fail "prometheus starts" "it exited at once three times, or was not ready in 60 s"
  exit 1
fi
# query EXPR: the value of the instant query's first series, in $value.
query () {
  value=$(/usr/bin/python3 - "http://127.0.0.1:$port/api/v1/query" "$1" <<'PY' 2>/dev/null
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "?" + urllib.parse.urlencode({"query": sys.argv[2]})
answer = json.load(urllib.request.urlopen(url, timeout=5))
print(answer["data"]["result"][0]["value"][1] if answer["data"]["result"] else "")
PY
)
  [ -n "$value" ]
}
# Prometheus scrapes a new target about 5 s after it starts: polled.
if wait_for 60 query ps_steps_total; then
  first=$value
  increased () {
    query ps_steps_total && /usr/bin/python3 -c \
      'import sys; sys.exit(0 if float(sys.argv[2]) > float(sys.argv[1]) else 1)' "$first" "$value"
  }
  if wait_for 60 increased; then
    pass "prometheus: ps_steps_total went from $first to $value"
  else
    cp "$work/prometheus.log" "$work/out"
    fail "prometheus: ps_steps_total" "stayed at $first for 60 s"
  fi
else
  cp "$work/prometheus.log" "$work/out"
  fail "prometheus: ps_steps_total" "no series after 60 s"
fi
# The per-worker counters, the histogram's count and the target's health.
# The series of the latest scrape: a scrape that timed out on a loaded
# machine (up 0) is followed by others, so this waits for one that did not.
series () {
  query 'count(ps_worker_steps_total)' || value=none
  workers=$value
  query 'ps_step_seconds_count' || value=0
  observed=$value
  query 'up{job="ps-cluster"}' || value=none
  up=$value
  [ "$workers" = 2 ] && [ "$up" = 1 ] \
    && /usr/bin/python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$observed"
}
cp "$work/prometheus.log" "$work/out"
if wait_for 60 series; then
  pass "prometheus: 2 workers' step counters, $observed steps in the step-time histogram, target up"
else
  fail "prometheus: series" "count(ps_worker_steps_total) $workers, ps_step_seconds_count" \
    "$observed, up $up; expected 2, > 0 and 1"
fi

# --- SIGTERM stops the coordinator and its cluster -----------------------------
kill -TERM "$coord_pid"
if timeout 60 tail --pid="$coord_pid" -f /dev/null; then
  pass "the coordinator stopped on SIGTERM"
  coord_pid=""
else
  cp "$work/coordinator.log" "$work/out"
  fail "SIGTERM" "the coordinator was still running 60 s later"
fi

[ "$failures" = 0 ] || exit 1
