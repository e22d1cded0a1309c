#!/usr/bin/env bash
# ps-server's command line: --help, bad options and bad TF_CONFIG give a
# clear message and exit 2, an unbindable address exits 1, and a server
# started from TF_CONFIG binds its task's address and exits 0 on SIGTERM.
set -u
server=${PS_SERVER:?PS_SERVER is not set}
work=$(mktemp -d /tmp/ps-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

# expect STATUS WORDS -- COMMAND...: run it, check the exit status and that
# stderr (or stdout for --help) contains WORDS.
expect () {
  local status=$1 words=$2; shift 3
  "$@" >"$work/out" 2>&1
  local got=$?
  if [ "$got" != "$status" ] || ! grep -qF -- "$words" "$work/out"; then
    echo "FAIL: $* -> exit $got (expected $status), output:"; cat "$work/out"
    echo "      expected it to say: $words"
    failures=$((failures + 1))
  else
    echo "ok: $* -> exit $got, says '$words'"
  fi
}

expect 0 "--bind ENDPOINT" -- "$server" --help
expect 2 "--threads 'lots'" -- "$server" --bind tcp://127.0.0.1:0 --threads lots
expect 2 "--max-message" -- "$server" --bind tcp://127.0.0.1:0 --max-message -3
expect 2 "--max-peer-pending 'lots': expected MiB > 0" -- "$server" --bind tcp://127.0.0.1:0 --max-peer-pending lots
printf 'a file' > "$work/file"
expect 1 "checkpoint root: directory $work/file: exists but is not a directory" -- \
  "$server" --bind tcp://127.0.0.1:0 --checkpoint-root "$work/file"
expect 2 "unexpected argument 'extra'" -- "$server" --bind tcp://127.0.0.1:0 extra
expect 2 "optimizer" -- "$server" --bind tcp://127.0.0.1:0 --optimizer rmsprop
expect 1 "cannot bind tcp://256.1.1.1:5" -- "$server" --bind tcp://256.1.1.1:5
expect 2 "TF_CONFIG is not set" -- env -u TF_CONFIG "$server"
expect 2 "TF_CONFIG: bad JSON" -- env TF_CONFIG='{"cluster": ' "$server"
expect 2 "unknown key 'cluster.gpu'" -- env TF_CONFIG='{"cluster": {"gpu": ["a:1"]}}' "$server"
expect 2 "task.type is \"worker\", expected \"ps\"" -- \
  env TF_CONFIG='{"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}' "$server"
expect 2 "'task.index' is 3" -- \
  env TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:1"]}, "task": {"type": "ps", "index": 3}}' "$server"

# A cluster file shared by every process names no task: --task gives it.
printf '{"cluster": {"ps": ["127.0.0.1:1", "127.0.0.1:2"]}}' > "$work/shared.json"
expect 2 "task ps:3 is out of range: cluster.ps has 2 addresses" -- "$server" --cluster "$work/shared.json" --task ps:3
expect 2 "is not TYPE:INDEX" -- "$server" --cluster "$work/shared.json" --task three
expect 2 "task worker:0 is out of range: cluster.worker has 0 addresses" -- \
  "$server" --cluster "$work/shared.json" --task worker:0
expect 2 "no 'task' given" -- "$server" --cluster "$work/shared.json"

# A server from TF_CONFIG binds its own task's address (index 1 here).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TF_CONFIG="{\"cluster\": {\"ps\": [\"127.0.0.1:1\", \"127.0.0.1:$port\"]}, \"task\": {\"type\": \"ps\", \"index\": 1}}" \
  "$server" --endpoint-file "$work/endpoint" >"$work/stdout" 2>"$work/stderr" &
pid=$!
for _ in $(seq 100); do [ -s "$work/endpoint" ] && break; sleep 0.05; done
if [ "$(cat "$work/endpoint" 2>/dev/null)" = "tcp://127.0.0.1:$port" ] \
   && grep -qF "ps-server listening on tcp://127.0.0.1:$port" "$work/stdout"; then
  echo "ok: TF_CONFIG task ps:1 bound tcp://127.0.0.1:$port"
else
  echo "FAIL: TF_CONFIG server endpoint is '$(cat "$work/endpoint" 2>/dev/null)', expected tcp://127.0.0.1:$port"
  cat "$work/stderr"
  failures=$((failures + 1))
fi
kill -TERM "$pid"
wait "$pid"
status=$?
if [ "$status" = 0 ]; then echo "ok: SIGTERM -> exit 0"; else echo "FAIL: SIGTERM -> exit $status"; failures=$((failures + 1)); fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
