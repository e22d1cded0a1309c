#!/usr/bin/env python3
"""The four consistency modes against each other.

The same model, data and seed (the seed cnn on all of Fashion-MNIST, seed 1,
batch 64 per worker, Adam 1e-3, 5 epochs, evaluated every 235 batches and at
each epoch's end) trained by `coordinator --local` in each mode, with 2 and
with 4 workers:

  async     2 ps-servers, the workers pull, compute and push on their own;
  mirrored  no servers, every worker a replica, one global step = one batch
            per worker (global batch 64 x workers), gradients summed by the
            ring all-reduce, every replica applying the same update;
  ssp       async, but no worker starts a step more than S (--staleness,
            default 3) steps ahead of the slowest; the table gives the leads
            the workers started their steps with (the staleness histogram);
  sync      2 ps-servers that sum one batch per worker and apply the mean
            once per round (global batch 64 x workers).

For each run: samples/s over the whole run (evaluations included), the time
from the start of training to the first parameters that score >= 89%, the
epoch at which that happened, the final test accuracy, and the updates the
model received; each mode's samples/s and time against async's are
BENCHROW lines (benchrow.py). Like every benchmark here it prints a table and never
passes or fails on a time; it exits 1 only when a run fails.

This machine has 2 cores: 4 workers (plus 2 servers in async mode) share
them, so the 4-worker rows measure contention more than scaling.

Usage: tests/bench/bench_modes.py [--quick] [--build DIR] [--epochs N] [--keep]
                                  [--modes LIST] [--workers LIST] [--staleness S]
  --quick     6,400 training and 1,000 test examples, 3 epochs, target 80%
  --modes     comma-separated, of async,mirrored,ssp,sync (default all four)
  --workers   comma-separated worker counts (default 2,4)
"""

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cluster as bc  # noqa: E402  (the Run class and table helpers)
import benchrow  # noqa: E402  (the BENCHROW lines run-all.sh collects)


MODES = ("async", "mirrored", "ssp", "sync")


def histogram_text(staleness):
    """ssp's done record: leads 0..bound as counts, e.g. '0:2347 1:463 ... (max 3)'."""
    if not staleness:
        return "-"
    counts = staleness["histogram"]
    return " ".join("%d:%d" % (d, c) for d, c in enumerate(counts) if c) + \
        " (max %d)" % staleness["max"]


def run_mode(bench, tmp, mode, workers, epochs, every, limit, timeout, staleness):
    metrics = os.path.join(tmp, "%s-%d.jsonl" % (mode, workers))
    log_dir = os.path.join(tmp, "%s-%d-logs" % (mode, workers))
    argv = [bench.coordinator, "--local", "--mode", mode, "--workers", str(workers),
            "--metrics", metrics, "--log-dir", log_dir, "--epochs", str(epochs),
            "--eval-steps", str(every)] + bench.job_args() + limit
    if mode == "ssp":
        argv += ["--staleness", str(staleness)]
    print("    $ " + bc.command_text(argv))
    run = bc.Run(argv, metrics, name="%s %d" % (mode, workers))
    run.finish(timeout)
    if not bench.check_exit(run, "%s with %d workers" % (mode, workers)):
        return None
    done = run.of("done")[-1]
    started = run.of("started")[0]
    evals = run.of("eval")
    hit = next((e for e in evals if e["test_accuracy"] >= bench.target), None)
    spe = started["steps_per_epoch"]
    return {
        "mode": mode, "workers": workers,
        "sps": done["samples_per_s"],
        "hit": hit["params_at_s"] if hit else None,
        "epoch": hit["step"] / spe if hit else None,
        "final": done["test_accuracy"],
        #  Mirrored counts its replicas' updates, sync its rounds; in the
        #  other modes every step is one update.
        "updates": done.get("updates", done.get("rounds", done["steps"])),
        "wall": done["wall_s"],
        "steps_ok": done["steps"] == done["total"],
        "equal": (done.get("replica_mismatches") == 0) if mode == "mirrored" else None,
        "staleness": histogram_text(done.get("staleness")),
    }


def main(argv):
    p = argparse.ArgumentParser(description="the four modes (see the module docstring)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--build", default="build")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--data", default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--workers", default="2,4")
    p.add_argument("--staleness", type=int, default=3)
    args = p.parse_args(argv)
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in MODES:
            p.error("--modes: unknown mode %r (expected some of %s)" % (mode, ",".join(MODES)))
    try:
        counts = [int(w) for w in args.workers.split(",")]
    except ValueError:
        p.error("--workers: expected comma-separated integers, got %r" % args.workers)
    args.quick = bool(args.quick)
    bench = bc.Bench(args)
    bench.target = 0.80 if args.quick else bc.TARGET
    epochs = args.epochs or (3 if args.quick else 5)
    every = 25 if args.quick else 235
    limit = ["--limit", "6400", "--test-limit", "1000"] if args.quick else []
    timeout = 180 if args.quick else 600
    for program in (bench.coordinator, bench.worker):
        if not os.access(program, os.X_OK):
            print("missing %s: build first (meson setup build && ninja -C build)" % program)
            return 1
    tmp = tempfile.mkdtemp(prefix="bench-modes-")
    print("%s: cnn, seed %d, batch %d per worker, Adam 1e-3, %d epochs, "
          "evaluated every %d batches; target %.0f%%%s" % (
              " vs ".join(modes), bc.SEED, bc.BATCH, epochs, every, 100 * bench.target,
              " (--quick: 6,400 / 1,000 examples)" if args.quick else
              " (all 60,000 / 10,000 examples)"))
    print("    " + bc.load_line())
    rows = []
    for workers in counts:
        for mode in modes:
            r = run_mode(bench, tmp, mode, workers, epochs, every, limit, timeout,
                         args.staleness)
            if r:
                rows.append(r)
    print("    " + bc.load_line())
    print()
    bc.table(
        ["mode", "workers", "samples/s", "time to %.0f%% (s)" % (100 * bench.target),
         "epoch at target", "final accuracy", "updates", "wall (s)", "all steps once",
         "replicas equal", "ssp leads (steps: count)"],
        [[r["mode"], r["workers"], bc.f(r["sps"], ".0f"), bc.f(r["hit"], ".1f"),
          bc.f(r["epoch"], ".2f"), bc.f(r["final"], ".4f"), r["updates"], bc.f(r["wall"], ".1f"),
          "yes" if r["steps_ok"] else "NO",
          "-" if r["equal"] is None else ("yes" if r["equal"] else "NO"),
          r["staleness"]] for r in rows],
        ["<"] + [">"] * 7 + ["<", "<", "<"])
    for workers in counts:
        same = {r["mode"]: r for r in rows if r["workers"] == workers}
        for mode in modes:
            if mode != "async" and "async" in same and mode in same:
                print("    %d workers: %s / async: samples/s %s, time to target %s" % (
                    workers, mode, bc.f(bc.ratio(same[mode]["sps"], same["async"]["sps"]), ".2f"),
                    bc.f(bc.ratio(same[mode]["hit"], same["async"]["hit"]), ".2f")))
                for what, key, unit, better in (("samples/s", "sps", "samples/s", "higher"),
                                                ("time to target", "hit", "s", "lower")):
                    benchrow.row("bench_modes", "%s, %s, %d workers" % (what, mode, workers),
                                 "async", same["async"][key], same[mode][key], unit, better)
    if args.keep:
        print("metrics and logs kept in " + tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bench.failures or len(rows) < len(modes) * len(counts) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
