#!/usr/bin/env python3
"""End-to-end benchmark of ps-cluster: the real programs, timed from outside.

Runs build/worker/ps-worker and build/coordinator/coordinator (a local
cluster: the coordinator starts the ps-servers and ps-workers as children)
and prints four tables, and their goals and ratios as BENCHROW lines
(benchrow.py) for tests/bench/run-all.sh. Python 3 standard library only.
Like every benchmark here it prints and never passes or fails on a time; it exits 1
only when a program is missing or a run fails (a non-zero exit, a time-out,
or a run that did not train every step).

  a. Time to accuracy: the seed cnn on all of Fashion-MNIST, seed 1, batch
     64, Adam 1e-3, up to 3 epochs, evaluated every 235 steps (a quarter
     epoch of one worker) and at each epoch's end, (1) alone,
     `ps-worker --standalone --threads 2 --eval-steps 235`, and (2) on the
     local async cluster, `coordinator --local --eval-steps 235` (2 servers,
     2 workers of 1 thread; its steps are global steps, so the granularity
     in samples is the same), and (3) the same cluster with one worker,
     whose steps to 89% set beside (1)'s and (2)'s tell async staleness's
     cost from any other difference. The time to 89% is from launch to the moment
     the first parameters that score >= 0.89 existed: standalone, its
     "training on" log line (stamped here) plus the eval event's params_at_s;
     cluster, the "started" event (stamped here when it appears in the
     metrics file) plus the eval event's params_at_s. Then the same less
     evaluation time, samples/s, final accuracy, the epoch at 89%, the
     accuracy timeline side by side, and where the cluster's time went (the
     workers' "% of the time computing" log lines, the coordinator's
     progress events, evaluations, checkpoints, CPU seconds).
  b. Throughput with 1, 2 and 4 workers (2 servers) on a 25,600-example
     subset, 2 epochs, no evaluation; standalone with 1 and 2 threads on the
     same subset as references; and what security costs: 2 workers secured
     as by default (CurveZMQ, whose same-host plane is PLAIN over a
     private ipc socket), by CurveZMQ over tcp alone (PS_SAME_HOST=tcp, as
     between hosts), over a PLAIN data plane, and with --insecure, twice
     each, interleaved.
  c. Checkpoint pause: a cluster run with --checkpoint-steps 200; per
     checkpoint pause_ms and write_ms against the mean step time.
  e. (on request) The async cluster's defaults against the alternatives, for
     the decision on each: with --overlap and --no-overlap (the default),
     with --no-evaluator (a worker evaluates, and stops training meanwhile,
     against the default's evaluator: on 2 cores it computes in their idle
     time), and on 8 cores (--cores 8: an evaluator of 2 threads of its
     own), as section a measures time to 89% (the first eval record >=
     0.89: its step and params_at_s), the evaluations done, the final
     accuracy and samples/s; --rounds rounds, the variants interleaved in
     each.
  d. Failure detection: SIGSTOP a worker (found by the heartbeat timeout)
     and kill -9 one (seen by the supervisor at once), with the default
     heartbeats (500 / 3000 ms) and with 100 / 1000 ms; each run must still
     complete, and every partition must have applied every step once.

The machine is shared and has few cores: compare figures as ratios inside
one run. The load average is printed at the start and end of each section.

Usage: tests/bench/bench_cluster.py [--quick] [--build DIR] [--data DIR] [--keep]
                                   [--sections abcde] [--rounds N]
  --quick      small subsets and fewer epochs: the whole script in < 1 min
               (section a then aims at 80% on 6,400 examples)
  --build DIR  the build directory (default build, relative to the current
               directory or else to the repository root)
  --data DIR   the Fashion-MNIST IDX files (default: the programs' own)
  --keep       keep the metrics files and logs (a temporary directory)
  --sections S run only these sections, in this order (default abcd)
  --rounds N   section e's rounds (default 2)
"""

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import benchrow

TARGET = 0.89
SEED = 1
BATCH = 64


# ---------------------------------------------------------------------------
# Running a program and watching it

def machine_busy_s():
    """CPU seconds the whole machine has been busy (every process, ours and
    others', from /proc/stat), or None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as fh:
            ticks = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal ...: idle and iowait
    # are not busy.
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class Run:
    """A program started now, its output lines and metrics-file lines each
    stamped with time.monotonic() when they appear here."""

    def __init__(self, argv, metrics=None, poll_s=0.01, name=None, env=None):
        self.argv = [str(a) for a in argv]
        self.name = name or os.path.basename(self.argv[0])
        self.metrics_path = metrics
        self.poll_s = poll_s
        self.lines = []             # (t, text)
        self.events = []            # (t, dict)
        self.cond = threading.Condition()
        self.rc = None
        self.cpu_s = None
        self.wall_s = None
        self.others = None          # cores the rest of the machine kept busy
        self._usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._busy = machine_busy_s()
        self.launch = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE,
                                     env=dict(os.environ, **env) if env else None,
                                     stderr=subprocess.STDOUT, text=True,
                                     errors="replace", bufsize=1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._poller = None
        if metrics:
            self._poller = threading.Thread(target=self._poll, daemon=True)
            self._poller.start()

    def _read(self):
        for line in self.proc.stdout:
            t = time.monotonic()
            with self.cond:
                self.lines.append((t, line.rstrip("\n")))
                self.cond.notify_all()

    def _poll(self):
        f = None
        pending = ""
        while True:
            exited = self.proc.poll() is not None
            if f is None:
                try:
                    f = open(self.metrics_path, "r")
                except FileNotFoundError:
                    pass
            if f is not None:
                chunk = f.read()
                t = time.monotonic()
                if chunk:
                    pending += chunk
                    *complete, pending = pending.split("\n")
                    with self.cond:
                        for text in complete:
                            if text.strip():
                                try:
                                    self.events.append((t, json.loads(text)))
                                except ValueError:
                                    self.events.append((t, {"unparsed": text}))
                        self.cond.notify_all()
            if exited:
                # One more read after the exit catches the last lines.
                if getattr(self, "_last_pass", False):
                    break
                self._last_pass = True
                continue
            time.sleep(self.poll_s)
        if f is not None:
            f.close()
        with self.cond:
            self.cond.notify_all()

    def wait_for(self, predicate, timeout, after=None):
        """The first metrics event (t, ev) that predicate accepts (and that
        appeared after time `after`), waiting up to timeout seconds; None
        when it does not come or the run ends."""
        deadline = time.monotonic() + timeout
        with self.cond:
            seen = 0
            while True:
                for t, ev in self.events[seen:]:
                    if (after is None or t >= after) and predicate(ev):
                        return t, ev
                seen = len(self.events)
                left = deadline - time.monotonic()
                poller_done = self._poller is None or not self._poller.is_alive()
                if left <= 0 or poller_done:
                    return None
                self.cond.wait(min(left, 0.05))

    def line_time(self, text):
        """When the first output line containing text appeared, or None."""
        with self.cond:
            for t, line in self.lines:
                if text in line:
                    return t
        return None

    def finish(self, timeout):
        """Wait for the exit (stopping the run after timeout seconds) and
        return the exit status; 124 when it had to be stopped."""
        try:
            self.rc = self.proc.wait(timeout=max(1.0, timeout - (time.monotonic() - self.launch)))
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.rc = 124
        self.wall_s = time.monotonic() - self.launch
        self._reader.join(timeout=5)
        if self._poller:
            self._poller.join(timeout=5)
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu_s = (usage.ru_utime - self._usage.ru_utime
                      + usage.ru_stime - self._usage.ru_stime)
        busy = machine_busy_s()
        if busy is not None and self._busy is not None and self.wall_s > 0:
            # Less this script's own threads, which are mostly asleep.
            self.others = max(0.0, (busy - self._busy - self.cpu_s) / self.wall_s)
        return self.rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def of(self, kind):
        """The metrics events of one kind ("eval", "done", ...), in order."""
        with self.cond:
            return [ev for _, ev in self.events if ev.get("event") == kind]

    def stamped(self, kind):
        with self.cond:
            return [(t, ev) for t, ev in self.events if ev.get("event") == kind]

    def tail(self, n=15):
        with self.cond:
            return "\n".join("        " + line for _, line in self.lines[-n:])


def wait_file_line(path, text, timeout, poll_s=0.01):
    """Wait until a line of the file at path contains text; the time it was
    seen, or None after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path, errors="replace") as fh:
                if any(text in line for line in fh):
                    return time.monotonic()
        except FileNotFoundError:
            pass
        time.sleep(poll_s)
    return None


# ---------------------------------------------------------------------------
# Output helpers

def load_line():
    one, five, fifteen = os.getloadavg()
    return "load average %.2f %.2f %.2f (1, 5, 15 min) on %d cores" % (
        one, five, fifteen, os.cpu_count() or 0)


def table(headers, rows, aligns=None):
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    aligns = aligns or ["<"] + [">"] * (len(headers) - 1)

    def fmt(row):
        return "  ".join(("{:%s%d}" % (a, w)).format(c) for c, a, w in zip(row, aligns, widths))
    out = [fmt(cells[0]), "  ".join("-" * w for w in widths)]
    out += [fmt(r) for r in cells[1:]]
    print("\n".join("  " + line for line in out))


def f(value, spec=".1f", missing="-"):
    if value is None:
        return missing
    return format(value, spec)


def ratio(a, b):
    return a / b if a is not None and b else None


def command_text(argv):
    return " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv))


def run_json_peer(argv, name, what, timeout):
    """Run a PyTorch peer (argv: its Python and script, then arguments) and
    return its last JSON line as a dict, or a string saying why there is
    none: the peer's own "peer none: WHY" line (no torch), or its exit."""
    print("    $ " + command_text(argv))
    try:
        run = Run(argv, name=name)
    except OSError as e:
        return "cannot run %s: %s" % (argv[0], e)
    run.finish(timeout)
    lines = [text for _, text in run.lines]
    for text in lines:
        if text.startswith("peer none:"):
            return text[len("peer none:"):].strip()
    record = None
    for text in reversed(lines):
        if text.startswith("{"):
            try:
                record = json.loads(text)
            except ValueError:
                continue
            break
    if run.rc != 0 or record is None:
        print("    %s FAILED: exit %s; last output:\n%s" % (what, run.rc, run.tail()))
        return "%s exited %s%s" % (os.path.basename(argv[1]), run.rc,
                                   " (timed out)" if run.rc == 124 else "")
    return record


class Bench:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        build = args.build
        if not os.path.isabs(build) and not os.path.isdir(build):
            build = os.path.join(root, build)
        self.worker = os.path.join(build, "worker", "ps-worker")
        self.coordinator = os.path.join(build, "coordinator", "coordinator")
        self.tmp = None
        self.failures = []
        self.counter = 0
        self.cores = os.cpu_count() or 1

    def path(self, name):
        self.counter += 1
        return os.path.join(self.tmp, "%02d-%s" % (self.counter, name))

    def data_args(self):
        return ["--data", self.args.data] if self.args.data else []

    def job_args(self):
        return ["--model", "cnn", "--seed", str(SEED), "--batch", str(BATCH),
                "--optimizer", "adam", "--lr", "0.001"] + self.data_args()

    def standalone(self, threads, extra, metrics, timeout):
        argv = [self.worker, "--standalone", "--device", "cpu", "--threads", str(threads),
                "--metrics", metrics] + self.job_args() + extra
        print("    $ " + command_text(argv))
        run = Run(argv, metrics, name="standalone %dT" % threads)
        run.finish(timeout)
        self.check_exit(run, "standalone %d thread%s" % (threads, "" if threads == 1 else "s"))
        return run

    def cluster_start(self, extra, metrics, log_dir, poll_s=0.01, env=None):
        argv = [self.coordinator, "--local", "--metrics", metrics, "--log-dir", log_dir] \
            + self.job_args() + extra
        print("    $ " + "".join("%s=%s " % kv for kv in (env or {}).items())
              + command_text(argv))
        return Run(argv, metrics, poll_s=poll_s, name="cluster", env=env)

    def check_exit(self, run, what):
        if run.rc != 0:
            self.failures.append("%s: exit %s" % (what, run.rc))
            print("    %s FAILED: exit %s%s; last output:\n%s" % (
                what, run.rc, " (timed out)" if run.rc == 124 else "", run.tail()))
            return False
        return True

    def sanity(self, run):
        """(steps/total text, partitions-ok text, ok) from the done record."""
        done = run.of("done")
        if not done:
            return "no done record", "-", False
        d = done[-1]
        steps_text = "%d/%d" % (d["steps"], d["total"])
        bad = []
        parts = 0
        for server in d.get("servers", []):
            if "error" in server:
                bad.append("ps:%s %s" % (server.get("task"), server["error"]))
                continue
            for p in server.get("partitions", []):
                parts += 1
                if p["updates"] != d["total"]:
                    bad.append("%s/%s %d" % (p["var"], p["part"], p["updates"]))
        ok = d["steps"] == d["total"] and not bad and parts > 0
        parts_text = ("all %d == %d" % (parts, d["total"])) if ok else ("NO: " + ", ".join(bad))
        return steps_text, parts_text, ok

    # -----------------------------------------------------------------------
    # a. Time to accuracy

    def section_a(self):
        q = self.quick
        target = 0.80 if q else TARGET
        every = 25 if q else 235
        limit = ["--limit", "6400", "--test-limit", "1000"] if q else []
        epochs = 2 if q else 3
        print("a. Time to %.0f%% test accuracy: cnn, seed %d, batch %d, Adam 1e-3, up to %d "
              "epochs,\n   evaluated every %d steps and at each epoch's end%s" % (
                  100 * target, SEED, BATCH, epochs, every,
                  " (--quick: 6,400 training and 1,000 test examples, target 80%)" if q
                  else " (all 60,000 training and 10,000 test examples)"))
        print("   " + load_line())
        timeout = 120 if q else 420

        s_metrics = self.path("standalone.jsonl")
        s = self.standalone(2, ["--epochs", str(epochs), "--eval-steps", str(every)] + limit,
                            s_metrics, timeout)
        c_metrics = self.path("cluster.jsonl")
        log_dir = self.path("cluster-logs")
        c = self.cluster_start(["--epochs", str(epochs), "--eval-steps", str(every)] + limit,
                               c_metrics, log_dir)
        c.finish(timeout)
        self.check_exit(c, "cluster")
        # The same cluster with one worker computes every gradient on the
        # parameters of the step before, as standalone does: set beside the
        # two workers' run, it tells the cost of async staleness (a worker's
        # gradient computed while the other's update lands) from any other
        # difference between the cluster's training and standalone's.
        c1 = self.cluster_start(["--workers", "1", "--epochs", str(epochs), "--eval-steps",
                                 str(every)] + limit, self.path("cluster-1w.jsonl"),
                                self.path("cluster-1w-logs"))
        c1.finish(timeout)
        self.check_exit(c1, "cluster of 1 worker")

        # Standalone.
        s_start = s.line_time("training on")
        s_boot = s_start - s.launch if s_start else None
        s_evals = s.of("eval")
        s_epochs = [ev for _, ev in s.events if ev.get("event") == "epoch"]
        s_hit = next((e for e in s_evals if e["test_accuracy"] >= target), None)
        s_samples = sum(e["samples_per_s"] * e["train_s"] for e in s_epochs)
        s_busy = sum(e["train_s"] for e in s_epochs)
        s_last = s_evals[-1] if s_evals else None
        s_row = {
            "boot": s_boot,
            "hit": s_boot + s_hit["params_at_s"] if s_hit and s_boot is not None else None,
            "hit_excl": s_boot + s_hit["train_s"] if s_hit and s_boot is not None else None,
            "epoch": s_hit["epoch_f"] if s_hit else None,
            "acc_at": s_hit["test_accuracy"] if s_hit else None,
            "sps": (s_samples / s_last["params_at_s"]
                    if s_last and s_last["params_at_s"] > 0 else None),
            "sps_excl": s_samples / s_last["train_s"] if s_last and s_last["train_s"] > 0 else None,
            "sps_busy": s_samples / s_busy if s_busy else None,
            "final": s_epochs[-1]["test_accuracy"] if s_epochs else None,
            # Every evaluation has an eval event, the epoch ends' included.
            "evals": len(s_evals),
            "eval_s": sum(e["eval_ms"] for e in s_evals) / 1e3,
            "train_wall": s_last["params_at_s"] if s_last else None,
        }

        # Cluster.
        started = c.stamped("started")
        c_boot = started[0][0] - c.launch if started else None
        c_evals = c.of("eval")
        c_hit = next((e for e in c_evals if e["test_accuracy"] >= target), None)
        done = c.of("done")
        d = done[-1] if done else None
        spe = started[0][1]["steps_per_epoch"] if started else None
        nworkers = started[0][1]["workers"] if started else 2
        c_row = {"boot": c_boot, "hit": None, "hit_excl": None, "epoch": None, "acc_at": None}
        if c_hit and c_boot is not None:
            at = c_hit["params_at_s"]
            # An evaluation on a worker stops its training while the others
            # train: the time it took from training is about its overlap
            # with [0, at] divided among the workers. The evaluator's (in
            # the cores' idle time on a small machine) take none.
            overlap = sum(max(0.0, min(e["params_at_s"] + e["eval_ms"] / 1e3, at)
                              - e["params_at_s"]) for e in c_evals if e["role"] == "worker")
            c_row.update(hit=c_boot + at, hit_excl=c_boot + at - overlap / nworkers,
                         epoch=c_hit["step"] / spe, acc_at=c_hit["test_accuracy"])
        c_row.update(
            sps=d["samples_per_s"] if d else None, sps_excl=None, sps_busy=None,
            final=d["test_accuracy"] if d else None, evals=len(c_evals),
            eval_s=sum(e["eval_ms"] for e in c_evals) / 1e3,
            train_wall=d["wall_s"] if d else None)
        checkpoints = c.of("checkpoint")
        c1_evals = c1.of("eval")
        c1_hit = next((e for e in c1_evals if e["test_accuracy"] >= target), None)
        # Issue 20's goals: time to target <= 1.05 x standalone's, samples/s
        # >= 0.95 x, both on the same machine in this run.
        name = "time to %.0f%%, launch -> params, 2 servers + 2 workers" % (100 * target)
        both = c_row["hit"] is not None and s_row["hit"] is not None
        benchrow.row("bench_cluster", name, "standalone --threads 2", s_row["hit"], c_row["hit"],
                     "s", "lower", "ours <= 1.05 x anchor",
                     c_row["hit"] <= 1.05 * s_row["hit"] if both else None)
        both = c_row["sps"] is not None and s_row["sps"] is not None
        benchrow.row("bench_cluster", "samples/s over the training wall, 2 servers + 2 workers",
                     "standalone --threads 2", s_row["sps"], c_row["sps"], "samples/s",
                     "higher", "ratio >= 0.95",
                     c_row["sps"] >= 0.95 * s_row["sps"] if both else None)

        rows = [
            ("launch -> training start (s)", f(s_row["boot"], ".2f"), f(c_row["boot"], ".2f"),
             f(ratio(c_row["boot"], s_row["boot"]), ".2f")),
            ("time to %.0f%%: launch -> params (s)" % (100 * target), f(s_row["hit"], ".1f",
             "not reached"), f(c_row["hit"], ".1f", "not reached"),
             f(ratio(c_row["hit"], s_row["hit"]), ".2f")),
            ("  the same less evaluation (s)", f(s_row["hit_excl"], ".1f", "-"),
             ("~" + f(c_row["hit_excl"], ".1f")) if c_row["hit_excl"] else "-",
             f(ratio(c_row["hit_excl"], s_row["hit_excl"]), ".2f")),
            ("  epoch there (fractional)", f(s_row["epoch"], ".2f"), f(c_row["epoch"], ".2f"),
             f(ratio(c_row["epoch"], s_row["epoch"]), ".2f")),
            ("  test accuracy there", f(s_row["acc_at"], ".4f"), f(c_row["acc_at"], ".4f"), ""),
            ("training wall, start -> last step (s)", f(s_row["train_wall"], ".1f"),
             f(c_row["train_wall"], ".1f"), f(ratio(c_row["train_wall"], s_row["train_wall"]),
                                              ".2f")),
            ("samples/s over that wall", f(s_row["sps"], ".0f"), f(c_row["sps"], ".0f"),
             f(ratio(c_row["sps"], s_row["sps"]), ".2f")),
            ("samples/s less evaluation", f(s_row["sps_excl"], ".0f"), "-", ""),
            ("samples/s in steps only (epoch lines)", f(s_row["sps_busy"], ".0f"), "-", ""),
            ("final test accuracy (%d epochs)" % epochs, f(s_row["final"], ".4f"),
             f(c_row["final"], ".4f"), ""),
            ("evaluations: count", s_row["evals"], c_row["evals"], ""),
            ("evaluations: total s (mean ms)", "%s (%s)" % (
                f(s_row["eval_s"], ".1f"), f(1e3 * s_row["eval_s"] / max(1, s_row["evals"]), ".0f")),
             "%s (%s)" % (f(c_row["eval_s"], ".1f"),
                          f(1e3 * c_row["eval_s"] / max(1, c_row["evals"]), ".0f")), ""),
            ("checkpoints: count, total pause ms", "-", "%d, %s" % (
                len(checkpoints), f(sum(e["pause_ms"] for e in checkpoints), ".0f")), ""),
            ("process wall, launch -> exit (s)", f(s.wall_s, ".1f"), f(c.wall_s, ".1f"),
             f(ratio(c.wall_s, s.wall_s), ".2f")),
            ("CPU s (all processes), cores busy", "%s, %s" % (
                f(s.cpu_s, ".1f"), f(s.cpu_s / s.wall_s if s.wall_s else None, ".2f")),
             "%s, %s" % (f(c.cpu_s, ".1f"), f(c.cpu_s / c.wall_s if c.wall_s else None, ".2f")),
             f(ratio(c.cpu_s, s.cpu_s), ".2f")),
            ("other load on the machine meanwhile (cores)", f(s.others, ".2f"),
             f(c.others, ".2f"), ""),
        ]
        print()
        table(["measure", "standalone 2T", "cluster 2ps+2w", "cluster/standalone"], rows)
        print("   cluster 'less evaluation' is an estimate: an evaluation on one of the "
              "%d workers takes\n   about 1/%d of its time from training, the evaluator's "
              "none; time to accuracy counts\n   the params' time (standalone: the eval's "
              "start; cluster: when the task read them)." % (nworkers, nworkers))

        # The timeline, side by side by step.
        by_step = {}
        for k, evals in enumerate((s_evals, c_evals, c1_evals)):
            for e in evals:
                by_step.setdefault(e["step"], [None, None, None])[k] = e
        print()
        rows = []
        for step in sorted(by_step):
            se, ce, c1e = by_step[step]
            rows.append((step, f(step / spe if spe else None, ".2f"),
                         f(se["test_accuracy"] if se else None, ".4f"),
                         f(s_boot + se["params_at_s"] if se and s_boot is not None else None,
                           ".1f"),
                         f(ce["test_accuracy"] if ce else None, ".4f"),
                         f(c_boot + ce["params_at_s"] if ce and c_boot is not None else None,
                           ".1f"),
                         f(ce["eval_ms"] if ce else None, ".0f"),
                         f(c1e["test_accuracy"] if c1e else None, ".4f")))
        table(["step", "epoch", "standalone acc", "at s", "cluster acc", "at s",
               "cluster eval ms", "1 worker acc"], rows)
        def steps_at(hit):
            return hit["step"] if hit else "not reached"
        print("   steps to %.0f%%: standalone %s, a cluster of 1 worker %s, of %d workers %s."
              "\n   One worker makes standalone's updates in standalone's order (up to float"
              " rounding, which\n   training then amplifies); the steps %d workers need"
              " beyond it are the cost of async\n   staleness (each gradient computed while"
              " the others' updates land)."
              % (100 * target, steps_at(s_hit), steps_at(c1_hit), nworkers, steps_at(c_hit),
                 nworkers))

        # Where the cluster's time went.
        print()
        print("   the cluster's run, from its logs and metrics:")
        progress = c.of("progress")
        if progress:
            rates = [p["samples_per_s"] for p in progress]
            print("   coordinator progress windows (samples/s): " + ", ".join(
                "%.0f" % r for r in rates))
        if d:
            print("   steps per worker: %s; done record %.0f samples/s over %.1f s" % (
                d.get("worker_steps"), d["samples_per_s"], d["wall_s"]))
        rows = []
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
            if not name.startswith("worker"):
                continue
            computing, rates = [], []
            with open(os.path.join(log_dir, name), errors="replace") as fh:
                for line in fh:
                    if "% of the time computing" in line:
                        try:
                            computing.append(float(line.rsplit("%", 1)[0].rsplit(" ", 1)[1]))
                            rates.append(float(line.split(" samples/s")[0].rsplit(" ", 1)[1]))
                        except (IndexError, ValueError):
                            pass
            rows.append((name.split(".")[0], len(computing),
                         f(min(computing) if computing else None, ".0f"),
                         f(sum(computing) / len(computing) if computing else None, ".0f"),
                         f(max(computing) if computing else None, ".0f"),
                         f(sum(rates) / len(rates) if rates else None, ".0f")))
        if rows:
            table(["worker log", "windows", "% computing min", "mean", "max",
                   "samples/s mean"], rows)
        print("   " + load_line())
        return s_row, c_row

    # -----------------------------------------------------------------------
    # b. Throughput

    def section_b(self):
        q = self.quick
        limit, epochs = (3200, 1) if q else (25600, 2)
        steps = -(-limit // BATCH) * epochs
        print("b. Throughput: %d training examples x %d epoch%s = %d steps of %d, no evaluation "
              "(standalone: 500 test\n   examples per epoch, timed apart)" % (
                  limit, epochs, "" if epochs == 1 else "s", steps, BATCH))
        print("   " + load_line())
        print("   note: this machine has %d cores (os.cpu_count()); 2 servers + 4 workers "
              "oversubscribe it, and so do 2 + 2" % self.cores if self.cores <= 2 else
              "   note: this machine has %d cores (os.cpu_count())" % self.cores)
        timeout = 120 if q else 300
        results = []
        for threads in (1, 2):
            m = self.path("standalone-%dT.jsonl" % threads)
            # --eval-steps beyond the run: an eval event (params_at_s, train_s) at
            # each epoch's end only.
            run = self.standalone(threads, ["--limit", str(limit), "--test-limit", "500",
                                            "--epochs", str(epochs), "--eval-steps", "1000000000",
                                            "--progress", "0"], m, timeout)
            ep = [ev for _, ev in run.events if ev.get("event") == "epoch"]
            ev = run.of("eval")
            samples = sum(e["samples_per_s"] * e["train_s"] for e in ep)
            busy = sum(e["train_s"] for e in ep)
            last = ev[-1] if ev else None
            results.append(dict(name="standalone, %d thread%s" % (threads, "" if threads == 1
                                                                   else "s"),
                                steps=ep[-1]["steps"] if ep else None,
                                wall=last["train_s"] if last else None,
                                sps=samples / last["train_s"] if last and last["train_s"] else None,
                                busy_sps=samples / busy if busy else None,
                                cpu=run.cpu_s / run.wall_s if run.wall_s else None,
                                others=run.others, sanity="exit %s" % run.rc, computing=None))
        # What security costs: 2 workers secured as by default (CurveZMQ,
        # with the same-host plane), by CurveZMQ over tcp alone, over a
        # PLAIN data plane, and with --insecure, twice each, interleaved,
        # so that a change in the machine's load hits all alike.
        configs = [(1, None), (2, None), (2, "tcp"), (2, "plain"), (2, "insecure"), (2, None),
                   (2, "tcp"), (2, "plain"), (2, "insecure"), (4, None)]
        by_security = {None: [], "tcp": [], "plain": [], "insecure": []}
        names = {None: "", "tcp": ", CurveZMQ over tcp alone (PS_SAME_HOST=tcp)",
                 "plain": ", --data-plane plain", "insecure": ", --insecure"}
        for workers, security in configs:
            tag = "%dw%s-%d" % (workers, "-" + security if security else "", len(results))
            m = self.path("cluster-%s.jsonl" % tag)
            log_dir = self.path("cluster-%s-logs" % tag)
            run = self.cluster_start(["--workers", str(workers), "--limit", str(limit),
                                      "--test-limit", "500", "--epochs", str(epochs),
                                      "--eval-epochs", "0"]
                                     + {None: [], "tcp": [], "plain": ["--data-plane", "plain"],
                                        "insecure": ["--insecure"]}[security], m, log_dir,
                                     env={"PS_SAME_HOST": "tcp"} if security == "tcp" else None)
            run.finish(timeout)
            self.check_exit(run, "cluster, %d workers" % workers)
            done = run.of("done")
            d = done[-1] if done else None
            steps_text, parts_text, ok = self.sanity(run)
            if run.rc == 0 and not ok:
                self.failures.append("cluster, %d workers: %s, %s" % (workers, steps_text,
                                                                      parts_text))
            computing = []
            for name in os.listdir(log_dir) if os.path.isdir(log_dir) else []:
                if name.startswith("worker"):
                    with open(os.path.join(log_dir, name), errors="replace") as fh:
                        for line in fh:
                            if "% of the time computing" in line:
                                try:
                                    computing.append(float(line.rsplit("%", 1)[0]
                                                           .rsplit(" ", 1)[1]))
                                except (IndexError, ValueError):
                                    pass
            if workers == 2 and d:
                by_security[security].append(d["samples_per_s"])
            results.append(dict(name="cluster, 2 servers, %d worker%s%s" % (
                                    workers, "" if workers == 1 else "s", names[security]),
                                steps=d["steps"] if d else None,
                                wall=d["wall_s"] if d else None,
                                sps=d["samples_per_s"] if d else None, busy_sps=None,
                                cpu=run.cpu_s / run.wall_s if run.wall_s else None,
                                others=run.others,
                                sanity="%s, partitions %s" % (steps_text, parts_text),
                                computing=sum(computing) / len(computing) if computing else None))
        ref = results[1]["sps"]
        seen = {}
        for r in results[:1] + results[2:]:
            # The secured and insecure runs are interleaved rounds: number them.
            seen[r["name"]] = seen.get(r["name"], 0) + 1
            benchrow.row("bench_cluster", "samples/s, %s, round %d" % (r["name"], seen[r["name"]]),
                         results[1]["name"], ref, r["sps"], "samples/s", "higher")
        rows = [(r["name"], r["steps"], f(r["wall"], ".2f"), f(r["sps"], ".0f"),
                 f(r["busy_sps"], ".0f"), f(ratio(r["sps"], ref), ".2f"), f(r["cpu"], ".2f"),
                 f(r["others"], ".2f"), f(r["computing"], ".0f"), r["sanity"]) for r in results]
        print()
        if all(by_security.values()):
            mean = {k: sum(v) / len(v) for k, v in by_security.items()}
            print("   security, 2 workers (samples/s): default %s, CurveZMQ over tcp %s, "
                  "PLAIN data plane %s, --insecure %s; / insecure: default %.3f, CurveZMQ over "
                  "tcp %.3f, PLAIN %.3f" % (
                      ", ".join("%.0f" % v for v in by_security[None]),
                      ", ".join("%.0f" % v for v in by_security["tcp"]),
                      ", ".join("%.0f" % v for v in by_security["plain"]),
                      ", ".join("%.0f" % v for v in by_security["insecure"]),
                      mean[None] / mean["insecure"], mean["tcp"] / mean["insecure"],
                      mean["plain"] / mean["insecure"]))
        table(["run", "steps", "wall s", "samples/s", "in steps", "/ standalone 2T",
               "cores busy", "others", "% computing", "sanity"], rows,
              ["<", ">", ">", ">", ">", ">", ">", ">", ">", "<"])
        print("   wall: standalone, from the start of training to the last step less the "
              "epoch evaluations;\n   cluster, the done record's wall_s (from \"started\"); "
              "'in steps' counts only the timed steps;\n   cores busy: CPU seconds of every "
              "process of the run / its launch-to-exit wall; others: the\n   cores the rest "
              "of the machine kept busy meanwhile (/proc/stat less the run's CPU);\n   "
              "% computing: the mean of the workers' log lines")
        print("   " + load_line())

    # -----------------------------------------------------------------------
    # c. Checkpoint pause

    def section_c(self):
        q = self.quick
        limit, epochs, every = (6400, 1, 25) if q else (25600, 2, 200)
        print("c. Checkpoint pause: 2 servers, 2 workers, %d examples x %d epoch%s, "
              "--checkpoint-steps %d, no evaluation" % (limit, epochs, "" if epochs == 1
                                                       else "s", every))
        print("   " + load_line())
        m = self.path("checkpoint.jsonl")
        run = self.cluster_start(["--limit", str(limit), "--test-limit", "500", "--epochs",
                                  str(epochs), "--eval-epochs", "0", "--checkpoint-steps",
                                  str(every), "--checkpoint-dir", self.path("checkpoints")],
                                 m, self.path("checkpoint-logs"))
        run.finish(120 if q else 300)
        self.check_exit(run, "checkpoint run")
        done = run.of("done")
        d = done[-1] if done else None
        steps_text, parts_text, ok = self.sanity(run)
        if run.rc == 0 and not ok:
            self.failures.append("checkpoint run: %s, %s" % (steps_text, parts_text))
        workers = 2
        step_ms = 1e3 * BATCH * workers / d["samples_per_s"] if d and d["samples_per_s"] else None
        rows = []
        within = 0
        worst = None
        checkpoints = run.of("checkpoint")
        for e in checkpoints:
            initial = e["step"] == 0
            bound = (step_ms or 0) + e["write_ms"]
            good = e["pause_ms"] <= bound
            within += good
            excess = e["pause_ms"] - bound
            if worst is None or excess > worst[0]:
                worst = (excess, e)
            rows.append((e["step"], f(e["write_ms"], ".1f"), f(e["pause_ms"], ".1f"),
                         f(e["pause_ms"] - e["write_ms"], ".1f"), f(step_ms, ".1f"),
                         f(e["bytes"] / 1e6, ".1f"),
                         ("yes" if good else "NO") + (" (initial, before \"started\")"
                                                      if initial else "")))
        print()
        table(["step", "write ms", "pause ms", "pause - write", "step ms", "MB",
               "pause <= step + write"], rows, [">", ">", ">", ">", ">", ">", "<"])
        if checkpoints:
            benchrow.row("bench_cluster", "checkpoints pausing <= one step + the write",
                         "checkpoints", len(checkpoints), within, "count", "higher",
                         "ratio >= 1", within == len(checkpoints))
            print("   %d of %d checkpoints paused dispatch no longer than one step + the write; "
                  "worst case: step %d, pause %.1f ms = step + write %+.1f ms" % (
                      within, len(checkpoints), worst[1]["step"], worst[1]["pause_ms"], worst[0]))
        print("   step ms = %d x %d workers / the done record's samples/s (%s); sanity: steps "
              "%s, partitions %s;\n   other load on the machine meanwhile: %s cores" % (
                  BATCH, workers, f(d["samples_per_s"] if d else None, ".0f"), steps_text,
                  parts_text, f(run.others, ".2f")))
        print("   " + load_line())

    # -----------------------------------------------------------------------
    # d. Failure detection

    def failure_run(self, how, heartbeat, timeout_ms, limit, epochs):
        m = self.path("failure-%s-%d.jsonl" % (how, heartbeat))
        extra = ["--limit", str(limit), "--test-limit", "500", "--epochs", str(epochs),
                 "--eval-epochs", "0"]
        if heartbeat != 500 or timeout_ms != 3000:
            extra += ["--heartbeat-ms", str(heartbeat), "--heartbeat-timeout-ms",
                      str(timeout_ms)]
        log_dir = self.path("failure-logs")
        run = self.cluster_start(extra, m, log_dir, poll_s=0.002)
        row = dict(how=how, hb="%d / %d" % (heartbeat, timeout_ms), bound=timeout_ms + heartbeat,
                   poll=None, event=None, silent=None, reason="-", after="-")
        stopped = False
        pid = None
        try:
            got = run.wait_for(lambda e: e.get("event") == "started", 60)
            reg = run.wait_for(lambda e: e.get("event") == "registered"
                               and e.get("role") == "worker" and e.get("task") == 1, 5)
            if not got or not reg:
                row["reason"] = "no started/registered event"
            else:
                pid = reg[1]["pid"]
                # Let the worker load its data and train a while first.
                ready = wait_file_line(os.path.join(log_dir, "worker1.log"),
                                       "registered with the coordinator", 60)
                if not ready:
                    row["reason"] = "worker:1 never got its plan"
                    raise RuntimeError(row["reason"])
                time.sleep(1.0 if not self.quick else 0.5)
                t_signal = time.monotonic()
                os.kill(pid, signal.SIGSTOP if how == "SIGSTOP" else signal.SIGKILL)
                stopped = how == "SIGSTOP"
                failed = run.wait_for(lambda e: e.get("event") == "worker_failed"
                                      and e.get("task") == 1, timeout_ms / 1e3 + 30)
                if failed:
                    t_seen, ev = failed
                    row["poll"] = 1e3 * (t_seen - t_signal)
                    # The coordinator's clock on ours: its start is the
                    # earliest of (stamp - time_s) over "started" and the
                    # events after it in the file (those before count from
                    # the coordinator's own start), each seen here a little
                    # after it was written.
                    with run.cond:
                        at = next(i for i, (_, e) in enumerate(run.events)
                                  if e.get("event") == "started")
                        later = run.events[at:]
                    start = min(t - e["time_s"] for t, e in later if "time_s" in e)
                    row["event"] = 1e3 * (ev["time_s"] - (t_signal - start))
                    row["silent"] = ev.get("silent_ms")
                    row["reason"] = ev.get("reason", "-")
                    if run.of("done"):
                        row["reason"] += " (after training ended: the run is too short)"
                else:
                    row["reason"] = "no worker_failed event"
                if stopped:
                    t_cont = time.monotonic()
                    os.kill(pid, signal.SIGCONT)
                    stopped = False
                    # Back either by its next message ("rejoined") or, when
                    # it found the coordinator silent too, by registering
                    # again with the same incarnation.
                    back = run.wait_for(lambda e: e.get("event") in ("rejoined", "registered")
                                        and e.get("role") == "worker" and e.get("task") == 1,
                                        30, after=t_cont)
                    row["after"] = ("SIGCONT; %s after %.0f ms" % (
                        "rejoined" if back[1]["event"] == "rejoined" else "registered again",
                        1e3 * (back[0] - t_cont)) if back else "SIGCONT; did not come back")
                else:
                    back = run.wait_for(lambda e: e.get("event") == "registered"
                                        and e.get("role") == "worker" and e.get("task") == 1
                                        and e.get("restarted"), 30, after=t_signal)
                    row["after"] = ("restarted, registered %.2f s after the kill" % (
                        back[0] - t_signal) if back else "not restarted")
        except RuntimeError:
            run.kill()
        finally:
            if stopped and pid:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        run.finish(120 if self.quick else 240)
        self.check_exit(run, "%s run (heartbeats %s)" % (how, row["hb"]))
        steps_text, parts_text, ok = self.sanity(run)
        if run.rc == 0 and not ok:
            self.failures.append("%s run: %s, %s" % (how, steps_text, parts_text))
        d = run.of("done")
        dup = None
        if d:
            dup = sum(s.get("duplicates", 0) for s in d[-1].get("servers", []))
        row.update(rc=run.rc, steps=steps_text, parts=parts_text, dup=dup)
        return row

    def section_e(self):
        q = self.quick
        target = 0.80 if q else TARGET
        every = 25 if q else 235
        limit = ["--limit", "6400", "--test-limit", "1000"] if q else []
        epochs = 2 if q else 3
        variants = [("overlap", ["--overlap"]), ("no overlap (default)", ["--no-overlap"]),
                    ("no evaluator", ["--no-evaluator"]),
                    ("evaluator, --cores 8", ["--cores", "8"])]
        print("e. The async cluster's defaults against the alternatives: time to %.0f%%, %d "
              "rounds, interleaved" % (100 * target, self.args.rounds))
        print("   " + load_line())
        results = {name: [] for name, _ in variants}
        for r in range(self.args.rounds):
            for v, (name, extra) in enumerate(variants):
                tag = "e-%d-%d" % (r, v)
                run = self.cluster_start(["--epochs", str(epochs), "--eval-steps", str(every)]
                                         + limit + extra, self.path(tag + ".jsonl"),
                                         self.path(tag + "-logs"))
                run.finish(420 if not q else 120)
                if not self.check_exit(run, "section e, " + name):
                    continue
                evals = run.of("eval")
                hit = next((e for e in evals if e["test_accuracy"] >= target), None)
                done = run.of("done")
                d = done[-1] if done else {}
                results[name].append((hit["params_at_s"] if hit else None,
                                      hit["step"] if hit else None, len(evals),
                                      d.get("test_accuracy"), d.get("samples_per_s"),
                                      run.others))
        rows = []
        for name, _ in variants:
            for i, (hit_s, step, nevals, final, sps, others) in enumerate(results[name]):
                rows.append((name, i + 1, f(hit_s, ".1f", "not reached"),
                             step if step else "-", nevals, f(final, ".4f"), f(sps, ".0f"),
                             f(others, ".2f")))
        print()
        table(["variant", "round", "time to %.0f%% (s)" % (100 * target), "step there",
               "evaluations", "final accuracy", "samples/s", "other load"], rows)
        print("   " + load_line())

    def section_d(self):
        q = self.quick
        limit, epochs = (12800, 3) if q else (25600, 3)
        print("d. Failure detection: 2 servers, 2 workers, %d examples x %d epochs, no "
              "evaluation; worker:1 is\n   signalled %s s after it has its plan and data "
              "(its log says \"registered\"); SIGSTOP is\n   followed by SIGCONT once the "
              "failure is seen" % (limit, epochs, "0.5" if q else "1"))
        print("   " + load_line())
        rows = []
        for heartbeat, timeout_ms in ((500, 3000), (100, 1000)):
            for how in ("SIGSTOP", "SIGKILL"):
                r = self.failure_run(how, heartbeat, timeout_ms, limit, epochs)
                within = None
                if how == "SIGSTOP" and r["event"] is not None:
                    within = "yes" if r["event"] <= r["bound"] else "NO"
                name = "failure seen, %s, heartbeat / timeout %s ms" % (r["how"], r["hb"])
                if how == "SIGSTOP":
                    benchrow.row("bench_cluster", name, "timeout + interval", r["bound"],
                                 r["event"], "ms", "lower", "ours <= anchor",
                                 r["event"] <= r["bound"] if r["event"] is not None else None)
                else:
                    benchrow.row("bench_cluster", name, None, None, r["event"], "ms", "lower")
                rows.append((r["how"], r["hb"], f(r["poll"], ".0f"), f(r["event"], ".0f"),
                             f(r["silent"], ".0f"),
                             ("<= %d: %s" % (r["bound"], within)) if within else "-",
                             r["reason"], r["after"], r["rc"], r["steps"], r["parts"],
                             f(r["dup"], "d")))
        print()
        table(["signal", "heartbeat / timeout ms", "seen here ms", "event ms", "silent ms",
               "within timeout + interval", "reason", "then", "exit", "steps", "updates per "
               "partition", "dups"], rows,
              ["<", "<", ">", ">", ">", "<", "<", "<", ">", ">", "<", ">"])
        print("   seen here: from the signal to the worker_failed line appearing in the "
              "metrics file (polled\n   every 2 ms); event: the event's time_s less the "
              "signal's time on the coordinator's clock\n   (placed by the earliest "
              "stamp - time_s of its events); silent: how long the worker had\n   been "
              "silent then; dups: pushes the servers' ledgers refused as already applied "
              "(a step\n   whose push landed but whose report did not is trained again)")
        print("   " + load_line())

    def main(self):
        for program in (self.worker, self.coordinator):
            if not os.access(program, os.X_OK):
                print("bench_cluster: %s is not there or not executable (build with ninja -C "
                      "build, or give --build DIR)" % program, file=sys.stderr)
                return 1
        self.tmp = tempfile.mkdtemp(prefix="bench-cluster-")
        t0 = time.monotonic()
        print("bench_cluster%s: %s, %s" % (" --quick" if self.quick else "", self.worker,
                                            self.coordinator))
        print("machine: %d cores; " % self.cores + load_line())
        print()
        try:
            sections = {"a": self.section_a, "b": self.section_b, "c": self.section_c,
                        "d": self.section_d, "e": self.section_e}
            for name in self.args.sections:
                sections[name]()
                print()
        finally:
            if not self.args.keep:
                shutil.rmtree(self.tmp, ignore_errors=True)
        print()
        print("total %.0f s; %s" % (time.monotonic() - t0, load_line()))
        if self.args.keep:
            print("metrics and logs kept in %s" % self.tmp)
        if self.failures:
            print("runs that failed (not timings): " + "; ".join(self.failures))
            return 1
        return 0


def parse_args(argv):
    p = argparse.ArgumentParser(description="End-to-end cluster benchmark (see the module "
                                            "docstring).")
    p.add_argument("--quick", action="store_true", help="small subsets: under a minute")
    p.add_argument("--build", default="build", help="build directory (default build)")
    p.add_argument("--data", default=None, help="Fashion-MNIST directory")
    p.add_argument("--keep", action="store_true", help="keep the metrics files and logs")
    p.add_argument("--sections", default="abcd",
                   help="which sections to run, in order (default abcd; e on request)")
    p.add_argument("--rounds", type=int, default=2, help="section e's rounds (default 2)")
    args = p.parse_args(argv)
    if not args.sections or any(c not in "abcde" for c in args.sections):
        p.error("--sections: letters among a, b, c, d and e, e.g. b or ad")
    return args


if __name__ == "__main__":
    sys.exit(Bench(parse_args(sys.argv[1:])).main())
