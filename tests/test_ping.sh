#!/usr/bin/env bash
# coordinator ping, the servers' probe of deploy/k8s's liveness and
# readiness checks, against a real ps-server on 127.0.0.1 secured by a set
# of keys made here: the server's own identity and a worker's get ping_ok
# (exit 0); a client with another cluster's keys gets no answer and exits
# 1 within its timeout; so does every ping once the server is stopped; and
# each usage mistake exits 2 naming what was wrong and what was expected.
set -u
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
server=${PS_SERVER:?PS_SERVER is not set}
work=$(mktemp -d /tmp/ps-ping-XXXXXX)
server_pid=""
cleanup () {
  [ -n "$server_pid" ] && { kill -9 "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
. "$(dirname "$0")/cli_lib.sh"

"$coordinator" keygen --out "$work/keys" --ps 1 --workers 1 >/dev/null \
  || { echo "FAIL: coordinator keygen"; exit 1; }
"$coordinator" keygen --out "$work/stranger" --ps 1 --workers 1 >/dev/null \
  || { echo "FAIL: coordinator keygen (the stranger's keys)"; exit 1; }
export PS_KEYS="$work/keys"
chief_port=$(free_port); ps_port=$(free_port)
while [ "$ps_port" = "$chief_port" ]; do ps_port=$(free_port); done
cluster="\"cluster\": {\"chief\": [\"127.0.0.1:$chief_port\"], \"ps\": [\"127.0.0.1:$ps_port\"], \
\"worker\": [\"127.0.0.1:$(free_port)\"]}"
export TF_CONFIG="{$cluster}"

# --- usage mistakes: exit 2, naming what was wrong ----------------------------
expect "no target" 2 "expected one target, ps:INDEX or ps" -- "$coordinator" ping --as ps:0
expect "a worker as the target" 2 "target \"worker:0\": expected ps:INDEX or ps" -- \
  "$coordinator" ping worker:0 --as ps:0
expect "a server the cluster lacks" 2 "no task ps:3 (it has 1 ps task)" -- \
  "$coordinator" ping ps:3 --as worker:0
expect "no identity" 2 "names no task, and no --as" -- "$coordinator" ping ps:0
expect "--as a task the cluster lacks" 2 "--as|worker:7" -- "$coordinator" ping ps:0 --as worker:7
expect "--timeout-ms 0" 2 "--timeout-ms \"0\": expected a whole number in 1..600000" -- \
  "$coordinator" ping ps:0 --as ps:0 --timeout-ms 0
expect "no cluster spec" 2 "TF_CONFIG is not set" -- env -u TF_CONFIG "$coordinator" ping ps:0

# --- a real server -------------------------------------------------------------
TF_CONFIG="{$cluster, \"task\": {\"type\": \"ps\", \"index\": 0}}" \
  "$server" --checkpoint-root "$work" >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
  grep -q "serving tcp://127.0.0.1:$ps_port" "$work/server.log" && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "serving tcp://127.0.0.1:$ps_port" "$work/server.log" \
  || { echo "FAIL: ps-server did not start:"; cat "$work/server.log"; exit 1; }

expect "the server's own identity" 0 "ps:0: ping_ok" -- \
  env TF_CONFIG="{$cluster, \"task\": {\"type\": \"ps\", \"index\": 0}}" \
  "$coordinator" ping ps:0 --timeout-ms 10000
expect "a worker's identity, every server" 0 "ps: ping_ok" -- \
  "$coordinator" ping ps --as worker:0 --timeout-ms 10000
# Another cluster's keys are not trusted: the server does not answer at all.
expect "another cluster's keys" 1 "ps:0 (tcp://127.0.0.1:$ps_port)|did not answer within 1000 ms" -- \
  "$coordinator" ping ps:0 --as worker:0 --keys "$work/stranger" --timeout-ms 1000
expect "no keys" 1 "did not answer within 1000 ms" -- \
  env -u PS_KEYS "$coordinator" ping ps:0 --as worker:0 --insecure --timeout-ms 1000

# --- the server stopped: no answer, exit 1 in the timeout --------------------------
kill "$server_pid"; wait "$server_pid" 2>/dev/null; server_pid=""
expect "a stopped server" 1 "ps:0 (tcp://127.0.0.1:$ps_port)|did not answer within 1000 ms" -- \
  "$coordinator" ping ps:0 --as worker:0 --timeout-ms 1000

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "PASS: every check"
