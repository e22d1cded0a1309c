#!/usr/bin/env bash
# The checkpoint directory must be shared: a cluster started by hand whose
# servers write their snapshots somewhere other than the coordinator's
# --checkpoint-dir (each machine its own disk, or a mistyped
# --checkpoint-root) is refused at start, before anything is trained or
# restored, naming the server, the directory it writes to and what to do;
# so is a server started without a checkpoint root. A cluster whose
# servers share the directory starts training, and the probe files leave
# nothing behind in it. Real coordinator and ps-server processes on
# 127.0.0.1 (no worker is needed: the check comes when the servers have
# registered).
set -u
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
server=${PS_SERVER:?PS_SERVER is not set}
work=$(mktemp -d /tmp/ps-shared-root-XXXXXX)
servers=()
cleanup () {
  local pid
  for pid in "${servers[@]}"; do kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
failures=0
. "$(dirname "$0")/cli_lib.sh"

# start_servers ROOT0 ROOT1: two servers of a fresh cluster ("" = no
# --checkpoint-root), its spec in $spec; waits until both serve.
start_servers () {
  local s root pid ports=()
  for pid in "${servers[@]}"; do kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  servers=()
  for _ in 0 1 2 3; do ports+=("$(free_port)"); done
  spec="{\"chief\": [\"127.0.0.1:${ports[0]}\"], \"ps\": [\"127.0.0.1:${ports[1]}\", \
\"127.0.0.1:${ports[2]}\"], \"worker\": [\"127.0.0.1:${ports[3]}\"]}"
  for s in 0 1; do
    root=$1; shift
    TF_CONFIG="{\"cluster\": $spec, \"task\": {\"type\": \"ps\", \"index\": $s}}" \
      "$server" --insecure ${root:+--checkpoint-root "$root"} >"$work/ps$s.log" 2>&1 &
    servers+=("$!")
  done
  for s in 0 1; do
    for _ in $(seq 1 300); do
      grep -q "serving tcp://127.0.0.1:${ports[$((s + 1))]}" "$work/ps$s.log" && break
      sleep 0.1
    done
  done
  ps1="tcp://127.0.0.1:${ports[2]}"
}

# coordinate DIR: the chief of $spec with checkpoint directory DIR.
coordinate () {
  run 60 env TF_CONFIG="{\"cluster\": $spec, \"task\": {\"type\": \"chief\", \"index\": 0}}" \
    "$coordinator" --insecure --checkpoint-dir "$1" --epochs 1 --limit 640 --test-limit 100 \
    --model mlp --register-timeout-ms 3000
}

# ps:1 writes into a directory of its own.
start_servers "$work/shared" "$work/elsewhere"
coordinate "$work/shared"
if [ "$status" = 1 ] \
   && grep -qF "ps:1 at $ps1 writes its checkpoints into $work/elsewhere on its machine, which is not this coordinator's checkpoint directory $work/shared" "$work/out" \
   && grep -qF "start every ps-server with --checkpoint-root set to the coordinator's --checkpoint-dir" "$work/out" \
   && ! grep -q "all [0-9]* workers registered\|training done" "$work/out" \
   && [ -z "$(find "$work/shared" -mindepth 1 -maxdepth 1 ! -name 'ckpt*')" ]; then
  pass "a server writing elsewhere is refused at start, named, with what to do"
else
  fail "a server writing elsewhere is refused at start, named" "exit $status"
fi

# ps:1 has no checkpoint root at all.
start_servers "$work/shared2" ""
coordinate "$work/shared2"
if [ "$status" = 1 ] && grep -qF "ps:1 at $ps1 cannot write a file into a checkpoint directory" \
   "$work/out" && grep -qF "this server has no checkpoint root" "$work/out"; then
  pass "a server without --checkpoint-root is refused at start, named"
else
  fail "a server without --checkpoint-root is refused at start, named" "exit $status"
fi

# Both share it: the run gets past the check to its first checkpoint (it
# then waits for a worker, which this test does not start), and no probe
# file is left behind.
start_servers "$work/shared3" "$work/shared3"
coordinate "$work/shared3"
probes=$(find "$work/shared3" -mindepth 1 -maxdepth 1 -name '.probe*' | wc -l)
if [ -d "$work/shared3/ckpt-000000000000" ] && [ "$probes" = 0 ] \
   && ! grep -q "writes its checkpoints into" "$work/out"; then
  pass "servers sharing the directory pass the check, leaving no probe file"
else
  fail "servers sharing the directory pass the check" "exit $status, $probes probe files"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
