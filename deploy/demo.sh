#!/usr/bin/env bash
# The demo: install what is missing, build, and train the Fashion-MNIST CNN
# (Conv2D 32 3x3 relu, MaxPool 2, Dense 64 relu, Dense 10; Adam 1e-3, batch
# 64, 3 epochs) with ps-worker. Until the coordinator issue brings the local
# cluster (coordinator, 2 servers, 2 workers on loopback), the training runs
# standalone in one process: the single-process baseline the cluster will be
# compared against. Extra arguments go to ps-worker (see --help).
set -eu
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
build/worker/ps-worker --standalone --model cnn --epochs 3 "$@"
