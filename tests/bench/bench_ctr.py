#!/usr/bin/env python3
"""End-to-end click-through-rate benchmark (issue 17, section 3, second
bullet): ps-cluster's CTR models against PyTorch on the same Criteo-format
data, in one run.

  1. Data: the synthetic Criteo-format generator (tests/gen_ctr.c, built as
     BUILD/tests/gen_ctr; schemas/data.md) writes --rows training lines
     (2,000,000 by default) and a tenth as many test lines, from a planted
     model whose test AUC and log loss its planted.json gives; or --train
     and --test name existing files (the real Criteo files work unchanged).
  2. ps-cluster alone: `ps-worker --standalone --model lr|dlrm --data TRAIN
     --test-data TEST --batch 512 --epochs 1 --threads T --metrics FILE`;
     its examples/s, test AUC and log loss come from the metrics file's
     last record, its peak RSS from the kernel's account of the child.
  3. PyTorch, one process, tests/bench/torch_ctr.py on the same files,
     batch 512, the same threads (OPENBLAS_NUM_THREADS capped as
     tests/bench does); it is skipped, saying why, where /usr/bin/python3
     cannot import torch (python3-torch).
  4. A local cluster, with --cluster: `coordinator --local --ps 2 --workers
     2 --model M --data-format criteo --train-data TRAIN --test-data TEST
     --batch 512 --epochs 1 --threads 1 --data-plane plain --metrics FILE`
     (each worker's batch is 512, so an epoch is the same ceil (lines / 512)
     steps); its examples/s, test AUC and log loss come from the done
     record of the metrics file, its peak RSS is the sum of the peaks of
     the coordinator and every process under it (each one's VmHWM, sampled
     from /proc while it runs), and its time split from the workers' and
     servers' CPU seconds (their /proc stat at their last sample).

It prints a table per model: examples/s, AUC, log loss, peak RSS, and the
ratio of each ps-cluster row's examples/s to PyTorch's with the difference
of their AUCs, against the issue's goal (at least 2x the examples/s at an
AUC no worse than PyTorch's minus 0.002), those as BENCHROW lines too
(benchrow.py). Like every benchmark here it prints and
never passes or fails on a figure; it exits 1 only when a program is
missing or a run fails. Compare figures as ratios inside one run: the
machine is shared.

Usage: tests/bench/bench_ctr.py [--rows N] [--models lr,dlrm] [--threads T]
           [--cardinalities criteo|small]
           [--build DIR] [--train FILE --test FILE] [--keep] [--no-peer]
           [--cluster] [--no-standalone] [--python PATH]
  --rows N     training lines to generate (default 2,000,000; test: N / 10)
  --models M   which models, comma-separated (default lr,dlrm)
  --cardinalities C  the generator's per-field cardinalities, criteo (the
               Kaggle data set's, 3 to 10M) or small (3 to 3,000)
  --threads T  threads for both sides (default 2)
  --build DIR  the build directory (default build, relative to the current
               directory or else to the repository root)
  --train, --test  use these Criteo-format files instead of generating (a
               planted.json beside the training file gives the planted row)
  --keep       keep the data, metrics files and logs (printed at the end)
  --no-peer    do not run PyTorch
  --cluster    also the local cluster row (2 servers, 2 workers)
  --no-standalone  leave out the ps-worker --standalone row
  --python P   the Python that runs torch_ctr.py (default /usr/bin/python3)
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import benchrow

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BATCH = 512
SEED = 1


def fail(msg):
    print("bench_ctr: " + msg, file=sys.stderr)
    sys.exit(1)


def find_build(build):
    for base in (os.getcwd(), ROOT):
        path = os.path.join(base, build)
        if os.path.isdir(path):
            return path
    fail("no build directory %s (run meson setup and ninja first, or pass --build)" % build)


def program(build, rel):
    path = os.path.join(build, rel)
    if not os.access(path, os.X_OK):
        fail("%s is missing: build it with ninja -C %s" % (path, build))
    return path


def run(argv, log, env=None):
    """Run argv with its output in log; return (exit status, seconds, peak
    RSS in bytes) from the kernel's account of the child."""
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    # ru_maxrss is in KiB on Linux.
    return proc.returncode, time.monotonic() - start, usage.ru_maxrss * 1024


class ProcTree(threading.Thread):
    """Samples a process and every process under it from /proc every period
    seconds while it runs: each one's program name, peak RSS (VmHWM, the
    kernel's own high-water mark, so a peak between two samples is not
    missed), the first and the largest data segment sampled (VmData, what
    RLIMIT_DATA bounds), CPU seconds, and the RSS of each at each sample (samples, a
    list of (seconds since the start, {pid: RSS bytes})). stop() ends it."""

    def __init__(self, root, period=0.25):
        super().__init__(daemon=True)
        self.root, self.period = root, period
        self.start_time = time.monotonic()
        self.procs = {}
        self.samples = []
        self.halt = threading.Event()

    @staticmethod
    def _children():
        parent = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % entry) as fh:
                    stat = fh.read()
            except OSError:
                continue
            # The name in parentheses may hold spaces: fields follow its ")".
            fields = stat[stat.rindex(")") + 2:].split()
            parent[int(entry)] = (int(fields[1]), fields)
        return parent

    def _sample(self):
        parent = self._children()
        tree, grew = {self.root}, True
        while grew:
            grew = False
            for pid, (ppid, _) in parent.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        now = {}
        tick = os.sysconf("SC_CLK_TCK")
        for pid in tree:
            try:
                with open("/proc/%d/status" % pid) as fh:
                    status = dict(line.split(":", 1) for line in fh if ":" in line)
                with open("/proc/%d/cmdline" % pid, "rb") as fh:
                    argv0 = fh.read().split(b"\0")[0].decode(errors="replace")
            except (OSError, ValueError):
                continue
            if "VmHWM" not in status or pid not in parent:
                continue
            fields = parent[pid][1]
            rss = int(status["VmRSS"].split()[0]) * 1024
            data = int(status["VmData"].split()[0]) * 1024
            name = os.path.basename(argv0)
            info = self.procs.get(pid)
            if info is None or info["name"] != name:
                # New, or a new program (a wrapper's exec): its own figures.
                info = self.procs[pid] = {"name": name, "hwm": 0}
            info["hwm"] = max(info["hwm"], int(status["VmHWM"].split()[0]) * 1024)
            # utime and stime, fields 14 and 15 of stat (11 and 12 after the name).
            info["cpu_s"] = (int(fields[11]) + int(fields[12])) / tick
            info.setdefault("data_first", data)
            info["data_max"] = max(info.get("data_max", 0), data)
            now[pid] = rss
        self.samples.append((time.monotonic() - self.start_time, now))

    def run(self):
        while not self.halt.is_set():
            self._sample()
            self.halt.wait(self.period)

    def stop(self):
        self.halt.set()
        self.join()

    def peak_bytes(self):
        """The sum of every process's peak: a bound on the tree's peak."""
        return sum(p["hwm"] for p in self.procs.values())

    def by_name(self, key):
        """{program name: sum over its processes of key}."""
        out = {}
        for p in self.procs.values():
            out[p["name"]] = out.get(p["name"], 0) + p.get(key, 0)
        return out


def run_sampled(argv, log, env=None, period=0.25, timeout=None):
    """As run(), the process tree sampled meanwhile: (exit status, seconds,
    the ProcTree). Past timeout seconds the process gets SIGTERM (a
    coordinator then stops its children), and SIGKILL 30 s later; the
    ProcTree's timed_out says so."""
    start = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        tree = ProcTree(proc.pid, period)
        tree.start()
        # The coordinator stops its children before it exits, so the
        # samples up to its exit cover them all.
        tree.timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            tree.timed_out = True
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        tree.stop()
    return proc.returncode, time.monotonic() - start, tree


def tail(log, lines=5):
    try:
        with open(log) as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError as e:
        return str(e)


def jsonl(path):
    rows = []
    try:
        with open(path) as fh:
            for line in fh:
                if line.strip():
                    rows.append(json.loads(line))
    except (OSError, ValueError):
        pass
    return rows


def first_key(row, *keys):
    for key in keys:
        if key in row:
            return row[key]
    return None


# ---------------------------------------------------------------------------
# The three sides

def generate(build, rows, cardinalities, tmp):
    """The generator's training and test files and what planted.json says
    of the planted model on the test split, or fail."""
    gen = program(build, "tests/gen_ctr")
    test_rows = max(rows // 10, 1000)
    log = os.path.join(tmp, "gen.log")
    argv = [gen, "--out", tmp, "--train-rows", str(rows), "--test-rows", str(test_rows),
            "--seed", str(SEED), "--cardinalities", cardinalities]
    print("bench_ctr: generating %d + %d lines: %s" % (rows, test_rows, " ".join(argv)),
          flush=True)
    status, seconds, _ = run(argv, log)
    if status != 0:
        fail("%s exited %d:\n%s" % (gen, status, tail(log)))
    try:
        with open(os.path.join(tmp, "planted.json")) as fh:
            planted = json.load(fh)["splits"]["test"]
    except (OSError, ValueError, KeyError) as e:
        fail("%s wrote no readable planted.json (%s)" % (gen, e))
    print("bench_ctr: generated in %.1f s" % seconds, flush=True)
    return os.path.join(tmp, "train.txt"), os.path.join(tmp, "test.txt"), planted


def planted_beside(train):
    """What a planted.json next to the training file (the generator's) says
    of the test split, or {}."""
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(train)), "planted.json")) as fh:
            return json.load(fh)["splits"]["test"]
    except (OSError, ValueError, KeyError):
        return {}


def ours(build, model, train, test, threads, tmp):
    worker = program(build, "worker/ps-worker")
    metrics = os.path.join(tmp, "ps-%s.jsonl" % model)
    log = os.path.join(tmp, "ps-%s.log" % model)
    argv = [worker, "--standalone", "--model", model, "--data", train, "--test-data", test,
            "--batch", str(BATCH), "--epochs", "1", "--threads", str(threads),
            "--seed", str(SEED), "--metrics", metrics, "--progress", "0"]
    print("bench_ctr: %s" % " ".join(argv), flush=True)
    status, seconds, rss = run(argv, log)
    if status != 0:
        fail("ps-worker --standalone --model %s exited %d:\n%s" % (model, status, tail(log)))
    # The "done" record, else the last one that has the test AUC.
    rows = [r for r in jsonl(metrics) if first_key(r, "auc", "test_auc") is not None]
    rows.sort(key=lambda r: r.get("event") == "done")
    if not rows:
        fail("%s holds no record with the test AUC:\n%s" % (metrics, tail(log)))
    last = rows[-1]
    return {
        "examples_per_s": first_key(last, "examples_per_s", "samples_per_s"),
        "auc": first_key(last, "auc", "test_auc"),
        "logloss": first_key(last, "logloss", "test_logloss", "test_loss"),
        "peak_rss_bytes": rss, "wall_s": seconds,
    }


def done_record(metrics, log, what):
    """The done record of a coordinator's metrics file, or fail."""
    rows = [r for r in jsonl(metrics) if r.get("event") == "done"]
    if not rows:
        fail("%s: %s holds no done record:\n%s" % (what, metrics, tail(log)))
    return rows[-1]


def cluster(build, model, train, test, servers, workers, tmp, tag=None, env=None,
            timeout=None, extra=()):
    """A local cluster's run: its figures from the done record, the peak RSS
    of its processes and their CPU seconds by program; where the coordinator
    fails, a dict whose "failed" says how. env: its environment (the local
    launcher runs $PS_SERVER as the servers when set); extra: more
    coordinator arguments."""
    coordinator = program(build, "coordinator/coordinator")
    tag = tag or "%s-%dps" % (os.path.basename(model).split(".")[0], servers)
    metrics = os.path.join(tmp, "cluster-%s.jsonl" % tag)
    log = os.path.join(tmp, "cluster-%s.log" % tag)
    argv = [coordinator, "--local", "--ps", str(servers), "--workers", str(workers),
            "--model", model, "--data-format", "criteo", "--train-data", os.path.abspath(train),
            "--test-data", os.path.abspath(test), "--batch", str(BATCH), "--epochs", "1",
            "--threads", "1", "--seed", str(SEED), "--data-plane", "plain",
            "--log-dir", os.path.join(tmp, "logs-" + tag), "--metrics", metrics] + list(extra)
    print("bench_ctr: %s" % " ".join(argv), flush=True)
    status, seconds, tree = run_sampled(argv, log, env, timeout=timeout)
    if status != 0:
        how = ("was stopped after %.0f s" % timeout if tree.timed_out
               else "exited %d" % status)
        return {"failed": "the coordinator " + how, "log": log, "tree": tree,
                "wall_s": seconds, "log_dir": os.path.join(tmp, "logs-" + tag)}
    done = done_record(metrics, log, "coordinator --local --model %s" % model)
    return {
        "examples_per_s": done.get("samples_per_s"), "auc": done.get("test_auc"),
        "logloss": done.get("test_logloss"), "peak_rss_bytes": tree.peak_bytes(),
        "wall_s": seconds, "train_s": done.get("wall_s"), "done": done, "tree": tree,
        "cpu_s": tree.by_name("cpu_s"),
    }


def peer(python, model, train, test, threads, tmp):
    """torch_ctr.py's result, or a string saying why there is none."""
    out = os.path.join(tmp, "torch-%s.jsonl" % model)
    log = os.path.join(tmp, "torch-%s.log" % model)
    argv = [python, os.path.join(HERE, "torch_ctr.py"), "--model", model, "--train", train,
            "--test", test, "--batch", str(BATCH), "--threads", str(threads),
            "--seed", str(SEED), "--out", out]
    print("bench_ctr: %s" % " ".join(argv), flush=True)
    try:
        status, seconds, _ = run(argv, log)
    except OSError as e:
        return "cannot run %s: %s" % (python, e)
    rows = jsonl(out)
    if status != 0 or not rows:
        return "%s exited %d (%s)" % (argv[1], status, tail(log, 1).strip() or "no output")
    rows[-1]["wall_s"] = seconds
    return rows[-1]


# ---------------------------------------------------------------------------
# Report

def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def report(model, mine, local, theirs, planted):
    print("\nModel %s, batch %d, one epoch:" % (model, BATCH))
    print("%-30s %12s %8s %9s %12s" % ("", "examples/s", "AUC", "log loss", "peak RSS MiB"))
    rows = []
    if mine:
        rows.append(("ps-cluster, standalone", mine))
    if local:
        rows.append(("ps-cluster, 2 ps + 2 workers", local))
    if isinstance(theirs, dict):
        rows.append(("PyTorch %s, 1 process" % theirs.get("torch", "?"), theirs))
    for name, r in rows:
        print("%-30s %12s %8s %9s %12s" % (
            name, fmt(r["examples_per_s"], ",.0f"), fmt(r["auc"], ".4f"),
            fmt(r["logloss"], ".4f"), fmt(r["peak_rss_bytes"] / 2**20, ",.0f")))
    if planted:
        print("%-30s %12s %8s %9s" % ("planted model (the generator)", "-",
                                      fmt(first_key(planted, "auc", "test_auc"), ".4f"),
                                      fmt(first_key(planted, "logloss", "test_logloss"),
                                          ".4f")))
    if local:
        report_cluster(local)
    if not isinstance(theirs, dict):
        print("PyTorch: no figure: %s" % theirs)
        # A row that says the peer is missing, rather than no row at all.
        for name, r in rows:
            benchrow.row("bench_ctr", "%s, %s, examples/s" % (model, name),
                         "PyTorch: not run (%s)" % theirs, None, r["examples_per_s"],
                         "examples/s", "higher")
        return
    for name, r in rows[:-1]:
        ratio = r["examples_per_s"] / theirs["examples_per_s"]
        gap = r["auc"] - theirs["auc"]
        met = ratio >= 2 and gap >= -0.002
        print("%s / PyTorch: %.2fx the examples/s, AUC %+.4f (goal: >= 2x at an AUC no worse "
              "than -0.002: %s)" % (name, ratio, gap, "met" if met else "NOT met"))
        benchrow.row("bench_ctr", "%s, %s, examples/s" % (model, name), "PyTorch, 1 process",
                     theirs["examples_per_s"], r["examples_per_s"], "examples/s", "higher",
                     "ratio >= 2 at an AUC >= PyTorch's - 0.002", met)
        benchrow.row("bench_ctr", "%s, %s, test AUC" % (model, name), "PyTorch, 1 process",
                     theirs["auc"], r["auc"], "AUC", "higher")


def report_cluster(local):
    """Where the local cluster's time went: the training seconds of the done
    record against each program's CPU seconds (on a machine of few cores a
    program's CPU seconds are what it took from the others), and what the
    tables hold."""
    done = local["done"]
    train_s = done.get("wall_s") or 0
    cpu = ", ".join("%s %.1f" % (name, sec) for name, sec in sorted(local["cpu_s"].items()))
    print("  local cluster: %d steps, %.1f s training (%.1f s in all, with start and the "
          "last evaluation), %d checkpoints; CPU seconds: %s; %d cores"
          % (done.get("steps", 0), train_s, local["wall_s"], done.get("checkpoints", 0), cpu,
             os.cpu_count()))
    tables = done.get("tables", [])
    total = {k: sum(t.get(k, 0) for t in tables) for k in ("rows", "created", "evicted",
                                                          "dropped")}
    exact = all(s == done.get("steps") for t in tables for s in t.get("shard_steps", []))
    print("  %d tables: %d rows, %d created, %d evicted, %d dropped; every shard's ledger "
          "holds every step: %s" % (len(tables), total["rows"], total["created"],
                                    total["evicted"], total["dropped"],
                                    "yes" if exact else "NO"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--models", default="lr,dlrm")
    ap.add_argument("--cardinalities", choices=["criteo", "small"], default="criteo")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build", default="build")
    ap.add_argument("--train")
    ap.add_argument("--test")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--cluster", action="store_true")
    ap.add_argument("--no-standalone", action="store_true")
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in ("lr", "dlrm"):
            ap.error("unknown model %r: lr or dlrm" % m)
    if bool(a.train) != bool(a.test):
        ap.error("--train and --test go together")
    build = find_build(a.build)
    tmp = tempfile.mkdtemp(prefix="bench_ctr.")
    try:
        with open("/proc/loadavg") as fh:
            print("bench_ctr: load average at the start: %s" % " ".join(fh.read().split()[:3]))
        if a.train:
            train, test, planted = a.train, a.test, planted_beside(a.train)
        else:
            train, test, planted = generate(build, a.rows, a.cardinalities, tmp)
        for model in models:
            mine = None if a.no_standalone else ours(build, model, train, test, a.threads, tmp)
            local = None
            if a.cluster:
                local = cluster(build, model, train, test, 2, 2, tmp)
                if "failed" in local:
                    fail("the local cluster (model %s): %s:\n%s"
                         % (model, local["failed"], tail(local["log"])))
            theirs = "not run (--no-peer)" if a.no_peer else peer(a.python, model, train, test,
                                                                 a.threads, tmp)
            report(model, mine, local, theirs, planted)
        with open("/proc/loadavg") as fh:
            print("\nbench_ctr: load average at the end: %s" % " ".join(fh.read().split()[:3]))
    finally:
        if a.keep:
            print("bench_ctr: files kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
