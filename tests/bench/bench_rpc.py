#!/usr/bin/env python3
"""The async parameter server against PyTorch's torch.distributed.rpc one.

The same model, data, seed, batch and epochs trained two ways on this host:

  ps-cluster  `coordinator --local --model mlp --mode async --workers 2
              --ps 2` (2 ps-servers, 2 workers of one thread each), Adam
              1e-3, batch 64 per worker, evaluated once, at the end
              (--eval-epochs set to the epochs);
  PyTorch     tests/bench/torch_rpc_ps.py under --python: one server
              process and 2 trainers over torch.distributed.rpc
              (TensorPipe), each trainer fetching the parameters, computing
              one batch's gradient and sending it, the server applying Adam
              under a lock (PyTorch's parameter-server tutorial), one
              compute thread per process.

For each: samples/s over training (the coordinator's done record: its
training wall, the final evaluation included; the peer's: from the first
trainer's first step to the last one's last, its evaluation outside), the
final test accuracy, the updates, and for the cluster whether every
partition applied every step once. With --rounds R the two alternate R
times (the load of a shared machine drifts) and the medians are compared.
The ratios are BENCHROW lines (benchrow.py): samples/s against the rpc
server's, and the final accuracy of both, so that a faster run that
learned less shows. Like every benchmark here it prints a table and never
passes or fails on a time; it exits 1 only when the cluster's run fails.
Where torch cannot be imported the rows say why in their anchor column.

Usage: tests/bench/bench_rpc.py [--quick] [--build DIR] [--data DIR] [--epochs N]
                                [--rounds R] [--no-peer] [--python P] [--keep]
  --quick     6,400 training and 1,000 test examples, 1 epoch
  --epochs N  epochs of each run (default 3; 1 with --quick)
  --rounds R  runs of each, alternated (default 3; 1 with --quick)
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cluster as bc  # noqa: E402  (the Run class and table helpers)
import benchrow  # noqa: E402  (the BENCHROW lines run-all.sh collects)

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = "PyTorch torch.distributed.rpc PS, 2 trainers"
WORKERS = 2
SERVERS = 2


def run_cluster(bench, tmp, tag, epochs, limit, timeout):
    """The async cluster's run: a dict of its figures, or None (a failure,
    recorded in bench.failures)."""
    metrics = os.path.join(tmp, "cluster-%s.jsonl" % tag)
    argv = [bench.coordinator, "--local", "--mode", "async", "--workers", str(WORKERS),
            "--ps", str(SERVERS), "--metrics", metrics,
            "--log-dir", os.path.join(tmp, "cluster-%s-logs" % tag),
            "--model", "mlp", "--seed", str(bc.SEED), "--batch", str(bc.BATCH),
            "--optimizer", "adam", "--lr", "0.001", "--epochs", str(epochs),
            "--eval-epochs", str(epochs)] + limit + bench.data_args()
    print("    $ " + bc.command_text(argv))
    run = bc.Run(argv, metrics, name="cluster")
    run.finish(timeout)
    if not bench.check_exit(run, "the async cluster"):
        return None
    steps, parts, ok = bench.sanity(run)
    if not ok:
        bench.failures.append("the async cluster: steps %s, partitions %s" % (steps, parts))
        print("    the async cluster did not apply every step once: steps %s, partitions %s"
              % (steps, parts))
        return None
    done = run.of("done")[-1]
    return {"sps": done["samples_per_s"], "train_s": done["wall_s"],
            "final": done["test_accuracy"], "updates": done["steps"], "once": parts}


def run_peer(bench, epochs, limit, timeout):
    """torch_rpc_ps.py's figures, or a string saying why there are none."""
    argv = [bench.args.python, os.path.join(HERE, "torch_rpc_ps.py"),
            "--trainers", str(WORKERS), "--epochs", str(epochs), "--batch", str(bc.BATCH),
            "--seed", str(bc.SEED)] + limit + bench.data_args()
    record = bc.run_json_peer(argv, "rpc", "rpc peer", timeout)
    if isinstance(record, str):
        return record
    return {"sps": record["samples_per_s"], "train_s": record["train_s"],
            "final": record["final_accuracy"], "updates": record["steps"], "once": "-",
            "torch": record["torch"]}


def median_of(runs, key):
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def main(argv):
    p = argparse.ArgumentParser(description="async PS vs torch.distributed.rpc (see the "
                                "module docstring)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--build", default="build")
    p.add_argument("--data", default=None)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--no-peer", action="store_true")
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--keep", action="store_true")
    args = p.parse_args(argv)
    args.rounds = args.rounds if args.rounds is not None else 1 if args.quick else 3
    if args.rounds < 1 or (args.epochs is not None and args.epochs < 1):
        p.error("--rounds and --epochs must be positive")
    bench = bc.Bench(args)
    epochs = args.epochs or (1 if args.quick else 3)
    limit = ["--limit", "6400", "--test-limit", "1000"] if args.quick else []
    timeout = 180 if args.quick else 600
    if not os.access(bench.coordinator, os.X_OK):
        print("missing %s: build first (meson setup build && ninja -C build)" % bench.coordinator)
        return 1
    tmp = tempfile.mkdtemp(prefix="bench-rpc-")
    print("async mlp, 2 servers + 2 workers vs %s: seed %d, batch %d per worker, Adam 1e-3, "
          "%d epoch%s%s" % (PEER, bc.SEED, bc.BATCH, epochs, "" if epochs == 1 else "s",
                            " (--quick: 6,400 / 1,000 examples)" if args.quick else
                            " (all 60,000 / 10,000 examples)"))
    print("    " + bc.load_line())
    ours, theirs, why = [], [], None
    for r in range(args.rounds):
        mine = run_cluster(bench, tmp, str(r), epochs, limit, timeout)
        if mine:
            ours.append(mine)
        if args.no_peer:
            why = "--no-peer"
        elif why is None:
            peer = run_peer(bench, epochs, limit, timeout)
            if isinstance(peer, dict):
                theirs.append(peer)
            else:
                why = peer
    print("    " + bc.load_line())
    print()
    rows = [["ps-cluster async, %d ps + %d workers" % (SERVERS, WORKERS), r] for r in ours]
    rows += [["PyTorch %s rpc, 1 ps + %d trainers" % (r["torch"], WORKERS), r] for r in theirs]
    bc.table(["run", "samples/s", "train (s)", "final accuracy", "updates",
              "every step applied once"],
             [[name, bc.f(r["sps"], ".0f"), bc.f(r["train_s"], ".1f"), bc.f(r["final"], ".4f"),
               r["updates"], r["once"]] for name, r in rows],
             ["<", ">", ">", ">", ">", "<"])
    if not theirs:
        print("    %s: not run (%s)" % (PEER, why))
    mine = {k: median_of(ours, k) for k in ("sps", "final")}
    peer = {k: median_of(theirs, k) for k in ("sps", "final")}
    if ours and theirs:
        print("    ps-cluster / rpc: samples/s %s (medians of %d and %d runs), final accuracy "
              "%s against %s" % (bc.f(bc.ratio(mine["sps"], peer["sps"]), ".2f"), len(ours),
                                 len(theirs), bc.f(mine["final"], ".4f"),
                                 bc.f(peer["final"], ".4f")))
    for what, key, unit in (("samples/s", "sps", "samples/s"),
                            ("final test accuracy", "final", "accuracy")):
        name = "async mlp %s, %d ps + %d workers" % (what, SERVERS, WORKERS)
        if theirs:
            benchrow.row("bench_rpc", name, PEER, peer[key], mine[key], unit, "higher")
        else:
            benchrow.row("bench_rpc", name, "%s: not run (%s)" % (PEER, why), None, mine[key],
                         unit, "higher")
    if args.keep:
        print("metrics and logs kept in " + tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if bench.failures or not ours else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
