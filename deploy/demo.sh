#!/usr/bin/env bash
# The demo: install what is missing, build, and exercise ps-server. Until the
# coordinator and worker land (the worker and coordinator issues), it runs
# the quick network benchmark: real ps-server processes on loopback, one and
# two of them, created, set to SGD and Adam, pushed to and pulled from
# through the client library, compared with raw ZeroMQ in the same run.
set -eu
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
build/tests/bench/bench_ps --quick
