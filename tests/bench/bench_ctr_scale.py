#!/usr/bin/env python3
"""Scale runs of ps-cluster's embedding tables (issue 17, section 3, third
bullet), on a local cluster and the generator's Criteo-format data.

  1. Rows spread over the servers: a run whose tables hold more rows than
     one server's memory limit completes because the servers share them.
     A first run of `dlrm` (2 servers, 2 workers, no limit) measures a
     server's data segment (VmData, sampled from /proc) at its start and
     at its largest. The same run is then made with 1, 2 and 3 servers,
     each with its tables under a memory limit (coordinator
     --ps-memory-limit, each server's --memory-limit): --limit-mib, or by
     default 1.25 times what a server's data segment grew by in the
     calibration run (its share of the tables, and a little more): one
     server, holding every row, needs twice its share and cannot; two or
     three can. As a backstop the servers also run under RLIMIT_DATA (set
     by prlimit in a wrapper that the local launcher runs as $PS_SERVER)
     of their segment at the start plus twice the growth. One server must
     fail cleanly: the coordinator exits at once, naming the server and
     its limit. For each it prints whether the coordinator completed (and
     in how long), the rows the tables hold and the id gradients dropped
     before admission or lost for want of memory, and the coordinator's
     error where the run failed.
  2. Eviction holds memory flat: `dlrm` with a capacity per table on each
     server (a model spec file written beside the data: schemas/models/
     dlrm.json with "eviction": {"capacity": C}), 2 servers and 2 workers,
     while the power-law fields keep bringing new ids to the end of the
     file. It prints the servers' RSS at the start, middle and end of
     training, with and without the capacity (the latter from the
     calibration run of part 1), and the done record's evicted counts.

The servers' peak RSS under the limit and their RSS late in the eviction
run are BENCHROW lines too (benchrow.py). Like every benchmark here it
prints and never passes or fails on a figure; it exits 1 only when a
program is missing or a run that must complete does not. It takes a few
minutes on two cores.

Usage: tests/bench/bench_ctr_scale.py [--rows N] [--limit-mib M]
           [--capacity C] [--build DIR] [--keep]
  --rows N       training lines to generate (default 1,000,000; criteo
                 cardinalities; test: N / 10)
  --limit-mib M  each server's --memory-limit for its tables in MiB
                 (default: 1.25 x a server's data segment growth in the
                 calibration run)
  --capacity C   rows per table on each server in part 2 (default 4096)
  --build DIR    the build directory (default build)
  --keep         keep the data, metrics files and logs (printed at the end)
"""

import argparse
import json
import os
import shutil
import stat
import tempfile

import benchrow
from bench_ctr import ROOT, cluster, fail, find_build, generate, program, tail

MIB = 2**20
# The calibration and eviction runs must finish within this long.
RUN_TIMEOUT_S = 600
# A run under the limits that takes this many times the calibration run
# (and at least MIN_STUCK_S) is stuck: should a server run out of memory
# outside its tables' --memory-limit (RLIMIT_DATA), refusing every request
# and every checkpoint would keep the coordinator waiting, so it is stopped
# and reported as such.
STUCK_FACTOR, MIN_STUCK_S = 3, 120


def servers_of(run):
    """The ps-server processes of a run: {pid: the ProcTree's record}."""
    return {pid: p for pid, p in run["tree"].procs.items() if p["name"] == "ps-server"}


def server_rss_series(run):
    """[(seconds, the servers' RSS summed)] over the samples where a server
    ran."""
    pids = servers_of(run)
    series = []
    for t, rss in run["tree"].samples:
        held = [rss[pid] for pid in pids if pid in rss]
        if held:
            series.append((t, sum(held)))
    return series


def at_fraction(series, fraction):
    return series[min(int(fraction * (len(series) - 1)), len(series) - 1)]


def limited_server(build, limit_bytes, tmp):
    """A script that runs ps-server under RLIMIT_DATA limit_bytes, for
    $PS_SERVER; prlimit execs the server, so its pid is the server's."""
    prlimit = shutil.which("prlimit")
    if not prlimit:
        fail("prlimit (util-linux) is missing: it sets the servers' memory limit")
    server = program(build, "ps/ps-server")
    path = os.path.join(tmp, "ps-server-limited")
    with open(path, "w") as fh:
        fh.write("#!/bin/sh\nexec %s --data=%d:%d -- %s \"$@\"\n"
                 % (prlimit, limit_bytes, limit_bytes, server))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


def table_totals(done):
    tables = done.get("tables", [])
    return {k: sum(t.get(k, 0) for t in tables) for k in ("rows", "created", "evicted",
                                                          "dropped", "oom")}


def why_failed(run):
    """What a failed run's logs say: the coordinator's last error (or, for a
    run stopped as stuck, its last warning), how many times a server died,
    how many requests the first server refused, and its last complaint."""
    error, warning, deaths = "", "", 0
    try:
        with open(run["log"]) as fh:
            for line in fh:
                # What the benchmark's own SIGTERM makes it say is no cause.
                if "signal" in line and ("stopping on" in line or "interrupted" in line):
                    continue
                if " error: " in line:
                    error = line.split(" error: ", 1)[1].strip()
                elif " warn: " in line:
                    warning = line.split(" warn: ", 1)[1].strip()
                if "supervisor: ps:" in line and "killed by signal" in line:
                    deaths += 1
    except OSError:
        pass
    refused, last = 0, ""
    try:
        with open(os.path.join(run.get("log_dir", ""), "ps0.log")) as fh:
            for line in fh:
                refused += " refused: " in line
                if " warn: " in line or " error: " in line or "FATAL" in line:
                    last = line.strip()
    except OSError:
        pass
    return error or "(no error; its last warning) " + warning, deaths, refused, last


def spread(build, train, test, limit_mib, tmp):
    print("\n1. Rows spread over the servers under a memory limit", flush=True)
    calib = cluster(build, "dlrm", train, test, 2, 2, tmp, tag="calibrate", timeout=RUN_TIMEOUT_S)
    if "failed" in calib:
        fail("the calibration run (2 servers, no limit): %s:\n%s"
             % (calib["failed"], tail(calib["log"])))
    servers = servers_of(calib).values()
    data_first = max(p["data_first"] for p in servers)
    growth = max(p["data_max"] - p["data_first"] for p in servers)
    totals = table_totals(calib["done"])
    limit = limit_mib * MIB if limit_mib else int(1.25 * growth)
    backstop = int(data_first + max(2 * growth, limit + growth))
    print("calibration (2 servers, no limit): %d table rows; a server's data segment %.0f MiB "
          "at its start, %.0f MiB more at its largest, peak RSS %.0f MiB; limits for what "
          "follows: --memory-limit %.0f MiB per server for its tables, RLIMIT_DATA %.0f MiB"
          % (totals["rows"], data_first / MIB, growth / MIB,
             max(p["hwm"] for p in servers) / MIB, limit / MIB, backstop / MIB), flush=True)
    env = dict(os.environ, PS_SERVER=limited_server(build, backstop, tmp))
    stuck_s = max(MIN_STUCK_S, STUCK_FACTOR * calib["wall_s"])
    results = []
    for n in (1, 2, 3):
        run = cluster(build, "dlrm", train, test, n, 2, tmp, tag="limited-%dps" % n, env=env,
                      timeout=stuck_s, extra=["--ps-memory-limit", str(limit)])
        results.append((n, run))
    print("\n%-10s %-44s %10s %10s %10s %12s" % ("servers", "outcome", "rows", "dropped",
                                                 "oom", "server MiB"))
    figures = []
    for n, run in results:
        peak = max((p["hwm"] for p in servers_of(run).values()), default=0) / MIB
        if "failed" in run:
            error, deaths, refused, last = why_failed(run)
            print("%-10d %-44s %10s %10s %10s %12.0f" % (n, "%s after %.0f s" % (
                run["failed"], run["wall_s"]), "-", "-", "-", peak))
            print("           the coordinator: %s" % error)
            print("           servers died %d times; ps:0 refused %d requests, its last complaint: %s"
                  % (deaths, refused, last))
            figures.append(("dlrm, %d server%s under the limit: %s"
                            % (n, "" if n == 1 else "s", run["failed"]), peak, False))
            continue
        t = table_totals(run["done"])
        outcome = ("completed, every row held" if t["dropped"] == 0 and t["oom"] == 0
                   else "completed, updates lost for want of memory")
        print("%-10d %-44s %10d %10d %10d %12.0f" % (n, outcome, t["rows"], t["dropped"],
                                                      t["oom"], peak))
        figures.append(("dlrm, %d server%s under the limit" % (n, "" if n == 1 else "s"), peak,
                        t["dropped"] == 0 and t["oom"] == 0))
    # After the table, not inside it. The limit is a setting, not a figure
    # measured in this run, so it is in the goal rather than the anchor.
    for name, peak, held in figures:
        benchrow.row("bench_ctr_scale", name, None, None, peak, "MiB peak RSS", "lower",
                     "completes, every row held, --ps-memory-limit %.0f MiB" % (limit / MIB),
                     held)
    return calib


def evict(build, train, test, capacity, calib, tmp):
    print("\n2. Eviction holds memory flat (capacity %d rows per table on each server)"
          % capacity, flush=True)
    with open(os.path.join(ROOT, "schemas", "models", "dlrm.json")) as fh:
        spec = json.load(fh)
    for layer in spec["layers"]:
        if layer["type"] == "Embedding":
            layer["eviction"] = {"capacity": capacity, "policy": "lru"}
    spec["name"] = "dlrm-evict"
    path = os.path.join(tmp, "dlrm-evict.json")
    with open(path, "w") as fh:
        json.dump(spec, fh)
    run = cluster(build, path, train, test, 2, 2, tmp, tag="evict", timeout=RUN_TIMEOUT_S)
    if "failed" in run:
        fail("the eviction run: %s:\n%s" % (run["failed"], tail(run["log"])))
    print("\n%-26s %12s %12s %12s %12s %10s" % ("servers' RSS, MiB", "start (10%)", "middle",
                                               "end (90%)", "rows", "evicted"))
    figures = []
    for name, r in (("no eviction", calib), ("capacity %d" % capacity, run)):
        series = server_rss_series(r)
        t = table_totals(r["done"])
        print("%-26s %12.0f %12.0f %12.0f %12d %10d" % (
            name, at_fraction(series, 0.1)[1] / MIB, at_fraction(series, 0.5)[1] / MIB,
            at_fraction(series, 0.9)[1] / MIB, t["rows"], t["evicted"]))
        figures.append(("servers' RSS at 90%% of the run, %s" % name,
                        at_fraction(series, 0.1)[1] / MIB, at_fraction(series, 0.9)[1] / MIB))
    for name, start, end in figures:
        benchrow.row("bench_ctr_scale", name, "at 10%", start, end, "MiB", "lower")
    print("test AUC: %.4f without eviction, %.4f with it"
          % (calib["done"].get("test_auc", float("nan")), run["done"].get("test_auc",
                                                                          float("nan"))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--limit-mib", type=int)
    ap.add_argument("--capacity", type=int, default=4096)
    ap.add_argument("--build", default="build")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    build = find_build(a.build)
    tmp = tempfile.mkdtemp(prefix="bench_ctr_scale.")
    try:
        with open("/proc/loadavg") as fh:
            print("bench_ctr_scale: load average at the start: %s"
                  % " ".join(fh.read().split()[:3]))
        train, test, _ = generate(build, a.rows, "criteo", tmp)
        calib = spread(build, train, test, a.limit_mib, tmp)
        evict(build, train, test, a.capacity, calib, tmp)
    finally:
        if a.keep:
            print("bench_ctr_scale: files kept in %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
