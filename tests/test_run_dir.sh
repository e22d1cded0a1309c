#!/usr/bin/env bash
# What a run keeps, said and tidied: a cluster started by hand without a
# checkpoint directory warns at start, in one line, that nothing will be
# kept; a local cluster's default run directory (/tmp/ps-cluster-PID: its
# children's logs and, without --checkpoint-dir, its checkpoints) is
# removed when the run completes, unless --keep-run-dir keeps it, and the
# last line says which and where the checkpoints are; one of that name
# left by an earlier run is neither used nor removed. Real coordinator,
# ps-server and ps-worker processes, on a small MLP run.
set -u
coordinator=${PS_COORDINATOR:?PS_COORDINATOR is not set}
work=$(mktemp -d /tmp/ps-run-dir-XXXXXX)
kept=""
trap 'rm -rf "$work" $kept' EXIT
failures=0

. "$(dirname "$0")/cli_lib.sh"

# run_dir: the run directory the local run in $work/out named.
run_dir () {
  sed -n 's/.*local cluster: .*; logs and checkpoints in \(\/tmp\/ps-cluster-[0-9A-Za-z-]*\).*/\1/p' \
    "$work/out" | head -1
}

small=(--local --model mlp --limit 640 --test-limit 100 --epochs 1)

# 1. By hand, without a checkpoint directory: one warning at the start.
# No server is started, so the run ends at the registration timeout.
p1=$(free_port); p2=$(free_port); p3=$(free_port)
cat >"$work/spec.json" <<EOF
{"cluster": {"chief": ["127.0.0.1:$p1"], "ps": ["127.0.0.1:$p2"], "worker": ["127.0.0.1:$p3"]}}
EOF
run 60 "$coordinator" --cluster "$work/spec.json" --insecure --register-timeout-ms 500 \
  --epochs 1
n=$(grep -c "no checkpoint directory .*nothing of this run will be kept" "$work/out")
if [ "$n" = 1 ] && [ "$status" != 0 ]; then
  pass "a cluster by hand without --checkpoint-dir warns once that nothing is kept"
else
  fail "a cluster by hand without --checkpoint-dir warns once" "$n warnings, exit $status"
fi
run 60 "$coordinator" --cluster "$work/spec.json" --insecure --register-timeout-ms 500 \
  --epochs 1 --checkpoint-dir "$work/by-hand"
if ! grep -q "no checkpoint directory" "$work/out"; then
  pass "with --checkpoint-dir it does not warn"
else
  fail "with --checkpoint-dir it does not warn"
fi

# 2. A completed local run removes its default run directory.
run 120 "$coordinator" "${small[@]}"
dir=$(run_dir)
if [ "$status" = 0 ] && [ -n "$dir" ] && [ ! -e "$dir" ] \
   && tail -1 "$work/out" | grep -q "removed the run directory $dir with its logs and checkpoints"
then
  pass "a completed local run removes $dir and says so last"
else
  fail "a completed local run removes its run directory" "exit $status, run directory '$dir'"
  kept="$kept $dir"
fi

# 3. --keep-run-dir keeps it, naming where the checkpoints are.
run 120 "$coordinator" "${small[@]}" --keep-run-dir
dir=$(run_dir)
kept="$kept $dir"
kept_dir=$dir
if [ "$status" = 0 ] && [ -n "$dir" ] && [ -f "$dir/worker0.log" ] \
   && ls -d "$dir"/checkpoints/ckpt-* >/dev/null 2>&1 \
   && tail -1 "$work/out" | grep -q "run directory $dir kept: logs, checkpoints in $dir/checkpoints"
then
  pass "--keep-run-dir keeps the logs and checkpoints and says where"
else
  fail "--keep-run-dir keeps the logs and checkpoints and says where" \
    "exit $status, run directory '$dir'"
fi

# 4. With --checkpoint-dir the run directory goes, the checkpoints stay.
run 120 "$coordinator" "${small[@]}" --checkpoint-dir "$work/ck"
dir=$(run_dir)
if [ "$status" = 0 ] && [ -n "$dir" ] && [ ! -e "$dir" ] \
   && ls -d "$work"/ck/ckpt-* >/dev/null 2>&1 \
   && tail -1 "$work/out" | grep -q "removed the run directory $dir with its logs; checkpoints in $work/ck"
then
  pass "--checkpoint-dir: the run directory removed, the checkpoints kept and named"
else
  fail "--checkpoint-dir: the run directory removed, the checkpoints kept" \
    "exit $status, run directory '$dir'"
  kept="$kept $dir"
fi

# 5. A directory of the default name left by an earlier run (process ids
# come round again: 32768 of them on a small machine) is neither used nor
# removed: the run makes one of its own. The earlier one is staged at the
# coordinator's pid, a copy of the run kept in 3 (its checkpoints and
# logs), by the shell that then becomes the coordinator (exec).
if [ -n "$kept_dir" ] && [ -d "$kept_dir" ]; then
  sum () { (cd "$1" && find . -type f | sort | xargs md5sum) 2>/dev/null; }
  run 120 bash -c 'stale=/tmp/ps-cluster-$$; mkdir "$stale" && echo "stale $stale" \
    && cp -a "$0"/. "$stale"/ && exec "$@"' "$kept_dir" "$coordinator" "${small[@]}"
  stale=$(sed -n 's/^stale \(.*\)/\1/p' "$work/out")
  [ -n "$stale" ] && kept="$kept $stale"
  dir=$(run_dir)
  if [ "$status" = 0 ] && [ -n "$stale" ] && [[ "$dir" == "$stale"-?????? ]] \
     && [ ! -e "$dir" ] && [ "$(sum "$stale")" = "$(sum "$kept_dir")" ] \
     && tail -1 "$work/out" | grep -q "removed the run directory $dir with its logs and checkpoints"
  then
    pass "a run directory left at the same pid is kept as it was; the run made $dir"
  else
    fail "a run directory left at the same pid is neither used nor removed" \
      "exit $status, the earlier one '$stale', the run's '$dir'"
    [ -n "$dir" ] && kept="$kept $dir"
  fi
else
  fail "a run directory left at the same pid: no run directory kept in 3 to stage"
fi

[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all checks passed"
