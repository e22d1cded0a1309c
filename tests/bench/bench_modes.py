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

Right after each mirrored run, its peer: PyTorch's DistributedDataParallel
over gloo (tests/bench/torch_ddp.py, under --python) with as many processes
as workers, on the same model, data, seed, batch per process, Adam 1e-3,
epochs and evaluation schedule, one thread per process. Its samples/s,
time to the target and final accuracy are the anchors of mirrored's
BENCHROW lines. --no-peer skips it; where torch cannot be imported, the
rows say why in their anchor column.

This machine has 2 cores: 4 workers (plus 2 servers in async mode) share
them, so the 4-worker rows measure contention more than scaling.

Usage: tests/bench/bench_modes.py [--quick] [--build DIR] [--epochs N] [--keep]
                                  [--modes LIST] [--workers LIST] [--staleness S]
                                  [--no-peer] [--python P]
  --quick     6,400 training and 1,000 test examples, 3 epochs, target 80%
  --modes     comma-separated, of async,mirrored,ssp,sync (default all four)
  --workers   comma-separated worker counts (default 2,4)
  --no-peer   do not run the DDP/gloo peer
  --python P  the Python that runs torch_ddp.py (default /usr/bin/python3)
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
HERE = os.path.dirname(os.path.abspath(__file__))
PEER = "PyTorch DDP/gloo"


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


def run_ddp(bench, workers, epochs, every, limit, timeout):
    """torch_ddp.py on the mirrored run's configuration: its JSON record
    with "mode" and "workers" added, or a string saying why there is none."""
    argv = [bench.args.python, os.path.join(HERE, "torch_ddp.py"), "--world", str(workers),
            "--epochs", str(epochs), "--batch", str(bc.BATCH), "--every", str(every),
            "--target", str(bench.target), "--seed", str(bc.SEED)] \
        + limit + bench.data_args()
    record = bc.run_json_peer(argv, "ddp %d" % workers, "DDP/gloo peer", timeout)
    if isinstance(record, str):
        return record
    record.update({"mode": "DDP/gloo", "workers": workers})
    return record


def peer_row(r):
    """A DDP/gloo record as a row of the modes' table."""
    return {
        "mode": r["mode"], "workers": r["workers"], "sps": r["samples_per_s"],
        "hit": r["time_to_target_s"], "epoch": r["epoch_at_target"], "final": r["final_accuracy"],
        "updates": r["updates"], "wall": r["wall_s"], "steps_ok": None, "equal": None,
        "staleness": "-",
    }


def peer_benchrows(workers, mirrored, peer):
    """Mirrored mode's samples/s, time to target and final accuracy against
    DDP/gloo's; where the peer did not run, rows that say why."""
    for what, key, peer_key, unit, better in (
            ("samples/s", "sps", "samples_per_s", "samples/s", "higher"),
            ("time to target", "hit", "time_to_target_s", "s", "lower"),
            ("final test accuracy", "final", "final_accuracy", "accuracy", "higher")):
        name = "%s, mirrored, %d workers" % (what, workers)
        if isinstance(peer, dict):
            benchrow.row("bench_modes", name, "%s, %d processes" % (PEER, workers),
                         peer[peer_key], mirrored[key], unit, better)
        else:
            benchrow.row("bench_modes", name, "%s: not run (%s)" % (PEER, peer), None,
                         mirrored[key], unit, better)


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
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--python", default="/usr/bin/python3")
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
    peers = {}                  # workers: DDP/gloo's record, or why there is none
    for workers in counts:
        for mode in modes:
            r = run_mode(bench, tmp, mode, workers, epochs, every, limit, timeout,
                         args.staleness)
            if r:
                rows.append(r)
            if mode == "mirrored":
                peers[workers] = ("--no-peer" if args.no_peer else
                                  run_ddp(bench, workers, epochs, every, limit, timeout))
    print("    " + bc.load_line())
    print()
    # Each DDP/gloo run right below the mirrored run it is the peer of.
    shown = []
    for r in rows:
        shown.append(r)
        peer = peers.get(r["workers"]) if r["mode"] == "mirrored" else None
        if isinstance(peer, dict):
            shown.append(peer_row(peer))
    bc.table(
        ["mode", "workers", "samples/s", "time to %.0f%% (s)" % (100 * bench.target),
         "epoch at target", "final accuracy", "updates", "wall (s)", "all steps once",
         "replicas equal", "ssp leads (steps: count)"],
        [[r["mode"], r["workers"], bc.f(r["sps"], ".0f"), bc.f(r["hit"], ".1f"),
          bc.f(r["epoch"], ".2f"), bc.f(r["final"], ".4f"), r["updates"], bc.f(r["wall"], ".1f"),
          "-" if r["steps_ok"] is None else ("yes" if r["steps_ok"] else "NO"),
          "-" if r["equal"] is None else ("yes" if r["equal"] else "NO"),
          r["staleness"]] for r in shown],
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
        if "mirrored" in same and workers in peers:
            peer = peers[workers]
            if isinstance(peer, dict):
                print("    %d workers: mirrored / %s: samples/s %s, time to target %s, "
                      "final accuracy %s against %s" % (
                          workers, PEER, bc.f(bc.ratio(same["mirrored"]["sps"],
                                                       peer["samples_per_s"]), ".2f"),
                          bc.f(bc.ratio(same["mirrored"]["hit"], peer["time_to_target_s"]),
                               ".2f"),
                          bc.f(same["mirrored"]["final"], ".4f"),
                          bc.f(peer["final_accuracy"], ".4f")))
            else:
                print("    %d workers: %s: not run (%s)" % (workers, PEER, peer))
            peer_benchrows(workers, same["mirrored"], peer)
    if args.keep:
        print("metrics and logs kept in " + tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bench.failures or len(rows) < len(modes) * len(counts) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
