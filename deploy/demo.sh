#!/usr/bin/env bash
# The demo: install what is missing, build, and exercise a local cluster.
# Until the coordinator and worker land (issues 3 and 4) the cluster is two
# ps-servers on loopback: one started from TF_CONFIG, one from --bind. A
# model is created on both, trained for a few SGD steps through the client
# library, snapshotted, and the quick network benchmark runs.
set -eu
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build

work=$(mktemp -d /tmp/ps-demo-XXXXXX)
pids=()
cleanup () { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:27400", "127.0.0.1:27401"]}, "task": {"type": "ps", "index": 0}}' \
  build/ps/ps-server --endpoint-file "$work/ps0" 2>"$work/ps0.log" &
pids+=($!)
build/ps/ps-server --bind tcp://127.0.0.1:0 --endpoint-file "$work/ps1" 2>"$work/ps1.log" &
pids+=($!)
for f in ps0 ps1; do
  for _ in $(seq 100); do [ -s "$work/$f" ] && break; sleep 0.1; done
done
echo "servers: $(cat "$work/ps0") $(cat "$work/ps1")"
build/tests/bench/bench_ps --quick
