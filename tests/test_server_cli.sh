#!/usr/bin/env bash
# ps-server's command line: --help, bad options and bad TF_CONFIG give a
# clear message and exit 2, an unbindable address exits 1, and a server
# started from TF_CONFIG binds its task's address and exits 0 on SIGTERM.
set -u
server=${PS_SERVER:?PS_SERVER is not set}
work=$(mktemp -d /tmp/ps-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Every process of the test runs secured, by one set of keys made here
# (README.md, Security), named by PS_KEYS.
"${PS_COORDINATOR:?PS_COORDINATOR is not set}" keygen --out "$work/keys" --ps 4 --workers 4 \
  --evaluator >/dev/null || { echo "FAIL: coordinator keygen"; exit 1; }
export PS_KEYS="$work/keys"
failures=0

# expect STATUS WORDS -- COMMAND...: run it, check the exit status and that
# stderr (or stdout for --help) contains WORDS. A server that starts when it
# should have refused would serve for ever: the time limit makes that exit
# 124 instead.
expect () {
  local status=$1 words=$2; shift 3
  timeout 30 "$@" >"$work/out" 2>&1
  local got=$?
  if [ "$got" != "$status" ] || ! grep -qF -- "$words" "$work/out"; then
    echo "FAIL: $* -> exit $got (expected $status), output:"; cat "$work/out"
    echo "      expected it to say: $words"
    failures=$((failures + 1))
  else
    echo "ok: $* -> exit $got, says '$words'"
  fi
}

expect 0 "--bind=ENDPOINT" -- "$server" --help
expect 2 '--threads "lots"' -- "$server" --bind tcp://127.0.0.1:0 --threads lots
expect 2 "--max-message" -- "$server" --bind tcp://127.0.0.1:0 --max-message -3
expect 2 '--max-peer-pending "lots": expected a number' -- "$server" --bind tcp://127.0.0.1:0 --max-peer-pending lots
printf 'a file' > "$work/file"
expect 1 "checkpoint root: directory $work/file: exists but is not a directory" -- \
  "$server" --bind tcp://127.0.0.1:0 --checkpoint-root "$work/file"
expect 2 "unexpected argument 'extra'" -- "$server" --bind tcp://127.0.0.1:0 extra
expect 2 "optimizer" -- "$server" --bind tcp://127.0.0.1:0 --optimizer rmsprop
expect 2 '--stop-grace "-1": expected a whole number in 0..86400' -- \
  "$server" --bind tcp://127.0.0.1:0 --stop-grace -1
# A well-formed address this machine does not have: the bind fails (exit 1).
expect 1 "cannot bind tcp://192.0.2.1:5" -- "$server" --bind tcp://192.0.2.1:5

# Addresses are checked before anything is bound: a port out of range is
# never wrapped (70000 would bind 4464), and no host means no bind, never
# every interface.
expect 2 '--bind "tcp://127.0.0.1:70000": port "70000": expected a whole number in 0..65535' -- \
  "$server" --bind tcp://127.0.0.1:70000
expect 2 '--bind "tcp://127.0.0.1:-1": port "-1"' -- "$server" --bind tcp://127.0.0.1:-1
expect 2 '--bind "tcp://:5555": no host' -- "$server" --bind tcp://:5555
expect 2 '--bind "tcp://256.1.1.1:5": host "256.1.1.1"' -- "$server" --bind tcp://256.1.1.1:5
expect 2 '--bind "127.0.0.1:5555": expected tcp://HOST:PORT or ipc://PATH' -- \
  "$server" --bind 127.0.0.1:5555
expect 2 "TF_CONFIG: 'cluster.ps[0]' is \"127.0.0.1:70000\": port \"70000\": expected a whole number in 1..65535" -- \
  env TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:70000"]}, "task": {"type": "ps", "index": 0}}' "$server"
expect 2 "TF_CONFIG: 'cluster.ps[0]' is \":2222\": no host" -- \
  env TF_CONFIG='{"cluster": {"ps": [":2222"]}, "task": {"type": "ps", "index": 0}}' "$server"
expect 2 "TF_CONFIG: cluster.ps[0]: host no-such-host.invalid does not resolve" -- \
  env TF_CONFIG='{"cluster": {"ps": ["no-such-host.invalid:2222"]}, "task": {"type": "ps", "index": 0}}' "$server"

# Numbers are decimal, with nothing around them: no space, no sign on a
# count, no hex, no inf or nan. Each is refused naming the flag and range.
expect 2 '--threads " 3": expected a whole number in 0..256' -- \
  "$server" --bind tcp://127.0.0.1:0 --threads " 3"
expect 2 '--threads "-0": expected a whole number in 0..256' -- \
  "$server" --bind tcp://127.0.0.1:0 --threads -0
expect 2 '--threads "0x4"' -- "$server" --bind tcp://127.0.0.1:0 --threads 0x4
expect 2 '--max-message "0x10": expected a number in (0, 1e+07]' -- \
  "$server" --bind tcp://127.0.0.1:0 --max-message 0x10
expect 2 '--max-pending "64 "' -- "$server" --bind tcp://127.0.0.1:0 --max-pending "64 "
expect 2 '--lr " 0.1"' -- "$server" --bind tcp://127.0.0.1:0 --lr " 0.1"
expect 2 '--lr "inf"' -- "$server" --bind tcp://127.0.0.1:0 --lr inf
expect 2 '--lr "1e999"' -- "$server" --bind tcp://127.0.0.1:0 --lr 1e999
expect 2 "TF_CONFIG is not set" -- env -u TF_CONFIG "$server"
expect 2 "TF_CONFIG: bad JSON" -- env TF_CONFIG='{"cluster": ' "$server"
# With --bind, a TF_CONFIG that is set still names the coordinator to
# register with: a broken one is refused, not ignored. A lone server's
# --task (which names its key) must be a ps task.
expect 2 "TF_CONFIG: bad JSON" -- env TF_CONFIG='{"cluster": ' "$server" --bind tcp://127.0.0.1:0
expect 2 '--task worker:0: expected ps:N' -- env -u TF_CONFIG "$server" --bind tcp://127.0.0.1:0 --task worker:0 --insecure
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
mkfifo "$work/fifo"
expect 2 "$work/fifo: a FIFO, not a regular file" -- "$server" --cluster "$work/fifo" --task ps:0

# A server from TF_CONFIG binds its own task's address (index 1 here).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
TF_CONFIG="{\"cluster\": {\"ps\": [\"127.0.0.1:1\", \"127.0.0.1:$port\"]}, \"task\": {\"type\": \"ps\", \"index\": 1}}" \
  "$server" --endpoint-file "$work/endpoint" >"$work/stdout" 2>"$work/stderr" &
pid=$!
for _ in $(seq 600); do [ -s "$work/endpoint" ] && break; sleep 0.05; done
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

# A host name in TF_CONFIG binds the address the name resolves to (and says
# so), not every interface. The example must resolve on every machine (this
# machine's own name need not): "localhost" is bound as 127.0.0.1 without
# asking the resolver, but host names are case-insensitive, so "LOCALHOST"
# is looked up in /etc/hosts as any other name is.
host=LOCALHOST
address=$(python3 -c 'import socket, sys
try:
    print(socket.getaddrinfo(sys.argv[1], None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0])
except OSError as e:
    print(e, file=sys.stderr)' "$host")
if [ -z "$address" ]; then
  echo "FAIL: $host does not resolve here: /etc/hosts has no localhost"
  failures=$((failures + 1))
else
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -f "$work/endpoint"
  TF_CONFIG="{\"cluster\": {\"ps\": [\"$host:$port\"]}, \"task\": {\"type\": \"ps\", \"index\": 0}}" \
    "$server" --endpoint-file "$work/endpoint" >"$work/stdout" 2>"$work/stderr" &
  pid=$!
  for _ in $(seq 600); do [ -s "$work/endpoint" ] && break; sleep 0.05; done
  if [ "$(cat "$work/endpoint" 2>/dev/null)" = "tcp://$address:$port" ] \
     && grep -qF "$host resolves to $address" "$work/stderr"; then
    echo "ok: TF_CONFIG host $host bound its address tcp://$address:$port"
  else
    echo "FAIL: TF_CONFIG host $host: endpoint '$(cat "$work/endpoint" 2>/dev/null)', expected tcp://$address:$port and a log line"
    cat "$work/stderr"
    failures=$((failures + 1))
  fi
  kill -TERM "$pid"
  wait "$pid"
fi

# Keys (README.md, Security): without --keys, PS_KEYS or --insecure a
# server refuses to start; --keys and --insecure together contradict; a
# secret certificate others may read, a directory without public/, and a
# task without a secret file are refused, naming the file.
expect 2 "secured with CurveZMQ: pass --keys DIR" -- \
  env -u PS_KEYS "$server" --bind tcp://127.0.0.1:0
expect 2 "--keys and --insecure contradict" -- \
  "$server" --bind tcp://127.0.0.1:0 --keys "$PS_KEYS" --insecure
cp -r "$PS_KEYS" "$work/loose"
chmod 644 "$work/loose/ps-0.cert_secret"
expect 2 "accessible by others (mode 0644): run chmod 600 $work/loose/ps-0.cert_secret" -- \
  "$server" --bind tcp://127.0.0.1:0 --keys "$work/loose"
mkdir -p "$work/nopublic"
expect 2 "has no public/ directory" -- "$server" --bind tcp://127.0.0.1:0 --keys "$work/nopublic"
expect 2 "no secret certificate for ps:7: $PS_KEYS/ps-7.cert_secret" -- \
  "$server" --bind tcp://127.0.0.1:0 --task ps:7
expect 2 '--cluster-resolver "slurm:ps=x": ps "x"' -- "$server" --cluster-resolver slurm:ps=x
expect 2 '--cluster-resolver: task.type is "worker", expected "ps"' -- \
  env SLURM_PROCID=2 SLURM_NTASKS=3 SLURM_JOB_NODELIST=localhost SLURM_TASKS_PER_NODE=3 \
  "$server" --cluster-resolver slurm

# The default apply pool is the cores the server may use: pinned to one
# CPU (as in a cpuset of one), it has one thread however many are online.
if command -v taskset >/dev/null && [ "$(nproc --all)" -ge 2 ]; then
  cpu=$(python3 -c 'import os; print(min(os.sched_getaffinity(0)))')
  rm -f "$work/endpoint"
  taskset -c "$cpu" "$server" --bind tcp://127.0.0.1:0 --endpoint-file "$work/endpoint" \
    >"$work/stdout" 2>"$work/stderr" &
  pid=$!
  for _ in $(seq 600); do [ -s "$work/endpoint" ] && break; sleep 0.05; done
  if grep -qF "with 1 apply threads" "$work/stderr"; then
    echo "ok: a server pinned to CPU $cpu serves with 1 apply thread"
  else
    echo "FAIL: a server pinned to CPU $cpu, expected 1 apply thread:"; cat "$work/stderr"
    failures=$((failures + 1))
  fi
  kill -TERM "$pid"
  wait "$pid"
else
  echo "SKIP: no taskset or one CPU: the pool's size by affinity is not checked"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
