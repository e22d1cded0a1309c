#!/usr/bin/env python3
"""Worker memory at the data's size (issue 20, section 3, first bullet):
the peak resident memory of a ps-worker training the seed CNN on
Fashion-MNIST, against the issue's bound

    raw data + model + optimizer + 64 MiB

where the raw data is the four IDX files as stored, uncompressed (uint8
images and labels, train and test), the model the seed CNN's float32
parameters (counted here from schemas/models/cnn.json, independently of
the C code), and the optimizer Adam's two slots per parameter.

  1. `ps-worker --standalone --epochs 1 --threads 2`: its peak RSS is the
     kernel's account of the child (ru_maxrss).
  2. `coordinator --local --epochs 1` (2 servers, 2 workers): each
     worker's peak (VmHWM, sampled from /proc while it runs; the kernel's
     high-water mark, so no peak between samples is missed). A cluster
     worker holds no optimizer state, so the same bound is generous there.

It prints one row per process and the goal line. Like every benchmark
here it prints and never passes or fails on a figure; it exits 1 only
when a program or the data is missing or a run fails.

Usage: tests/bench/bench_memory.py [--build DIR] [--data DIR]
"""

import argparse
import gzip
import json
import os
import sys
import tempfile

import benchrow
from bench_ctr import ROOT, find_build, program, run, run_sampled, tail

MIB = 1024.0 * 1024.0
SLACK = 64 * MIB


def fail(msg):
    print("bench_memory: " + msg, file=sys.stderr)
    sys.exit(1)


def param_count(spec):
    """Parameters of a model of Conv2D (valid, stride 1), MaxPool2D, Flatten
    and Dense layers, as Keras counts them."""
    h, w, c = spec["input_shape"]
    flat, total = None, 0
    for layer in spec["layers"]:
        kind = layer["type"]
        if kind == "Conv2D":
            k, f = layer["kernel_size"], layer["filters"]
            total += k * k * c * f + f
            h, w, c = h - k + 1, w - k + 1, f
        elif kind == "MaxPool2D":
            p = layer["pool_size"]
            h, w = h // p, w // p
        elif kind == "Flatten":
            flat = h * w * c
        elif kind == "Dense":
            units = layer["units"]
            total += (flat if flat is not None else c) * units + units
            flat = units
        else:
            fail("no parameter count for a %s layer" % kind)
    return total


def raw_bytes(data_dir):
    """The four IDX files' uncompressed bytes."""
    total = 0
    for split in ("train", "t10k"):
        for part in ("images-idx3-ubyte", "labels-idx1-ubyte"):
            base = os.path.join(data_dir, "%s-%s" % (split, part))
            if os.path.exists(base):
                total += os.path.getsize(base)
            elif os.path.exists(base + ".gz"):
                with gzip.open(base + ".gz") as fh:
                    while True:
                        chunk = fh.read(1 << 20)
                        if not chunk:
                            break
                        total += len(chunk)
            else:
                fail("%s(.gz) is missing (apt-get install dataset-fashion-mnist)" % base)
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    build = find_build(args.build)
    worker = program(build, "worker/ps-worker")
    coordinator = program(build, "coordinator/coordinator")
    with open(os.path.join(ROOT, "schemas", "models", "cnn.json")) as fh:
        params = param_count(json.load(fh))
    data = raw_bytes(args.data)
    model, optimizer = 4 * params, 2 * 4 * params
    bound = data + model + optimizer + SLACK

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        log = os.path.join(tmp, "standalone.log")
        status, _, peak = run([worker, "--standalone", "--epochs", "1", "--threads", "2",
                               "--data", args.data, "--progress", "0"], log)
        if status != 0:
            fail("ps-worker --standalone exited %d:\n%s" % (status, tail(log)))
        rows.append(("ps-worker --standalone", peak))
        log = os.path.join(tmp, "cluster.log")
        status, _, tree = run_sampled([coordinator, "--local", "--epochs", "1",
                                       "--data", args.data,
                                       "--log-dir", os.path.join(tmp, "logs")],
                                      log, period=0.1, timeout=600)
        if status != 0 or tree.timed_out:
            fail("coordinator --local exited %s:\n%s" % (status, tail(log)))
        workers = sorted(p["hwm"] for p in tree.procs.values() if p["name"] == "ps-worker")
        if len(workers) != 2:
            fail("the local cluster ran %d ps-workers, not 2" % len(workers))
        rows += [("cluster ps-worker %d" % i, hwm) for i, hwm in enumerate(workers)]

    print("Worker memory, seed CNN on Fashion-MNIST (%s)" % args.data)
    print("  raw data (IDX, uncompressed)   %8.1f MiB" % (data / MIB))
    print("  model (%d float32)        %8.1f MiB" % (params, model / MIB))
    print("  Adam's two slots               %8.1f MiB" % (optimizer / MIB))
    print("  bound: those + 64 MiB          %8.1f MiB" % (bound / MIB))
    print()
    print("%-28s %12s %10s" % ("process", "peak RSS", "vs bound"))
    for name, peak in rows:
        print("%-28s %8.1f MiB %9.2fx" % (name, peak / MIB, peak / bound))
    worst = max(peak for _, peak in rows)
    print()
    print("Goal: worker peak RSS <= raw data + model + optimizer + 64 MiB: %.1f of %.1f MiB (%s)"
          % (worst / MIB, bound / MIB, "met" if worst <= bound else "NOT met"))
    for name, peak in rows:
        benchrow.row("bench_memory", "%s peak RSS, seed CNN" % name,
                     "raw data + model + Adam slots", (bound - SLACK) / MIB, peak / MIB, "MiB",
                     "lower", "ours <= anchor + 64 MiB", peak <= bound)


if __name__ == "__main__":
    main()
