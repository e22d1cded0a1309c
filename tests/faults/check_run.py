#!/usr/bin/env python3
"""Checks that a training run of ps-cluster trained every batch exactly once.

A run is judged from the coordinator's metrics files (JSON lines, one file
per coordinator incarnation, oldest first) and from its checkpoints:

- the last incarnation ends with one "done" record and nothing after it;
- the schedule counted every step: done.steps == done.total == the
  expected total;
- async mode: every partition of every variable is held by one server, and
  each partition's ledger recorded every step exactly once (its "updates"
  equal the total: a ledger applies a step id once and counts a second push
  of it as a duplicate, so the count cannot include a repeat);
- async mode: the workers of the last incarnation completed total + the
  steps its recoveries rewound - the steps its resume found done;
- mirrored mode: every member of the final ring recorded every batch once
  in its replica's ledger and refused none as a repeat, and every
  evaluation found the replicas bitwise equal;
- every checkpoint a coordinator loaded ("recovered" events) passes an
  independent check of its files' sizes and CRC-32s against its manifest
  (schemas/checkpoint.md). A loaded checkpoint that is gone is a
  violation too, since it cannot be checked: the run must keep what it
  loads (a checkpoint.keep above the number of checkpoints it writes, as
  netfault.py's runs have). Where the processes saw the checkpoint
  directory at another path (a container's volume), --checkpoint-dir
  names it on this machine and each checkpoint is looked up there by name.

It is used by the failure-injection harness (netfault.py) and by the
compose test; run alone it prints each violation and exits 1, or exits 0.
"""

import argparse
import json
import os
import re
import struct
import sys
import zlib


def load_events(path):
    """The events of one metrics file, in order; a torn last line (the
    coordinator was killed while writing it) is dropped."""
    rows = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            if n < len(lines) - 2:
                raise ValueError("%s:%d: not JSON: %r" % (path, n + 1, line[:80]))
    return rows


def _unique_keys(pairs):
    if len({key for key, _ in pairs}) != len(pairs):
        raise ValueError("duplicate key")
    return dict(pairs)


def verify_checkpoint(ckpt):
    """None when the checkpoint's files match its manifest, else what is
    wrong: the reader of schemas/checkpoint.md, written independently of
    the C code."""
    try:
        with open(os.path.join(ckpt, "MANIFEST.json"), "rb") as f:
            m = json.loads(f.read(), object_pairs_hook=_unique_keys)
        if m.get("format") != "ps-cluster-checkpoint" or m.get("version") != 1:
            return "not a version 1 checkpoint manifest"
        base = os.path.basename(os.path.normpath(ckpt))
        name = re.fullmatch(r"ckpt-(\d+)", base)
        if name and int(name.group(1)) != m["step"]:
            return "step %d does not match the directory" % m["step"]
        for e in m["files"]:
            if "/" in e["file"] or e["file"] in ("", ".", ".."):
                return "bad file name %r" % e["file"]
            with open(os.path.join(ckpt, e["file"]), "rb") as f:
                data = f.read()
            if len(data) < 4:
                return "file %s is truncated" % e["file"]
            trailer = struct.unpack_from("<I", data, len(data) - 4)[0]
            if len(data) != e["bytes"] or trailer != e["crc32"] \
                    or zlib.crc32(data[:-4]) != trailer:
                return "file %s fails its checksum" % e["file"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return str(e)
    return None


def _count(rows, event):
    return sum(1 for r in rows if r.get("event") == event)


def check_run(paths, total=None, nservers=None, mode=None, members=None, ckpt_dir=None):
    """The violations of a run whose metrics files are paths (oldest
    first): a list of strings, empty when the run is good. total, nservers,
    mode and members are what the caller expects, or None to take the
    run's own word for them. ckpt_dir is where the run's checkpoints are
    on this machine, when not at the paths its events name."""
    bad = []
    incarnations = [load_events(p) for p in paths]
    if not incarnations or not incarnations[-1]:
        return ["no events in %s" % (paths[-1] if paths else "(no metrics file)")]
    rows = incarnations[-1]
    done = [r for r in rows if r.get("event") == "done"]
    failed = [r for r in rows if r.get("event") == "failed"]
    for r in failed:
        bad.append("the coordinator failed: %s" % r.get("error"))
    if len(done) != 1:
        bad.append("%d done records in the last incarnation, expected 1" % len(done))
        return bad
    done = done[0]
    if rows[-1] is not done:
        bad.append("events follow the done record")
    started = [r for r in rows if r.get("event") == "started"]
    if total is None:
        total = started[0]["total"] if started else done["total"]
    if done["steps"] != total or done["total"] != total:
        bad.append("the schedule counted %d of %d steps (expected %d)"
                   % (done["steps"], done["total"], total))
    run_mode = done.get("mode", "async")
    if mode is not None and run_mode != mode:
        bad.append("the run was %s, expected %s" % (run_mode, mode))

    if run_mode == "async":
        servers = done.get("servers", [])
        if nservers is not None and len(servers) != nservers:
            bad.append("%d servers in the done record, expected %d" % (len(servers), nservers))
        held = {}
        for s in servers:
            if "error" in s:
                bad.append("ps:%s: %s" % (s.get("task"), s["error"]))
                continue
            for p in s.get("partitions", []):
                key = (p["var"], p["part"])
                held[key] = held.get(key, 0) + 1
                if p["updates"] != total:
                    bad.append("ps:%d %s part %d: its ledger recorded %d steps, expected %d "
                               "(every step applied exactly once)"
                               % (s["task"], p["var"], p["part"], p["updates"], total))
        byvar = {}
        for (var, part), n in held.items():
            if n != 1:
                bad.append("%s part %d is held by %d servers" % (var, part, n))
            byvar.setdefault(var, set()).add(part)
        for var, parts in byvar.items():
            if parts != set(range(len(parts))):
                bad.append("%s is missing partitions: holds %s" % (var, sorted(parts)))
        if not held and not bad:
            bad.append("no server reported a partition")
        lost = sum(r.get("steps_lost", 0) for r in rows
                   if r.get("event") == "recovered" and r.get("reason") != "resuming")
        resumed = sum(r.get("step", 0) for r in rows
                      if r.get("event") == "recovered" and r.get("reason") == "resuming")
        trained = sum(done.get("worker_steps", []))
        if trained != total + lost - resumed:
            bad.append("the workers completed %d steps, expected %d (total %d + %d rewound - "
                       "%d resumed)" % (trained, total + lost - resumed, total, lost, resumed))
    else:
        replicas = done.get("replicas", [])
        if members is not None and len(replicas) != members:
            bad.append("the final ring has %d members, expected %d" % (len(replicas), members))
        if not replicas:
            bad.append("no replica in the done record")
        for r in replicas:
            if r["recorded"] != total or r["duplicates"] != 0:
                bad.append("worker:%d's replica recorded %d batches and refused %d repeats, "
                           "expected %d and 0" % (r["task"], r["recorded"], r["duplicates"],
                                                  total))
        if done.get("replica_mismatches", 0) != 0:
            bad.append("%d evaluations found the replicas unequal"
                       % done["replica_mismatches"])
        for r in rows:
            if r.get("event") == "replicas" and not r.get("equal"):
                bad.append("replicas differ at step %s" % r.get("step"))

    if done.get("checkpoints") != _count(rows, "checkpoint"):
        bad.append("done counts %s checkpoints, the events %d"
                   % (done.get("checkpoints"), _count(rows, "checkpoint")))
    acc = done.get("test_accuracy")
    if acc is None or not 0 < acc <= 1:
        bad.append("no test accuracy in the done record")

    # Every checkpoint any incarnation loaded must be there and verify.
    loaded = []
    for inc in incarnations:
        for r in inc:
            if r.get("event") == "recovered" and r.get("checkpoint") \
                    and r["checkpoint"] not in loaded:
                loaded.append(r["checkpoint"])
    for named in loaded:
        ckpt = named
        if ckpt_dir:
            ckpt = os.path.join(ckpt_dir, os.path.basename(os.path.normpath(named)))
        if not os.path.isdir(ckpt):
            bad.append("loaded checkpoint %s is gone%s, so it cannot be verified: keep every "
                       "checkpoint a run may load (checkpoint.keep), or name where they are "
                       "(--checkpoint-dir)" % (named, " (looked for %s)" % ckpt
                                               if ckpt != named else ""))
            continue
        why = verify_checkpoint(ckpt)
        if why:
            bad.append("loaded checkpoint %s fails verification: %s" % (ckpt, why))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metrics", action="append", required=True,
                    help="a coordinator's metrics file; repeat, oldest first")
    ap.add_argument("--total", type=int, help="the steps the run must train")
    ap.add_argument("--servers", type=int, help="ps-servers (async mode)")
    ap.add_argument("--mode", choices=["async", "mirrored"])
    ap.add_argument("--members", type=int, help="workers in the final ring (mirrored)")
    ap.add_argument("--checkpoint-dir", help="the run's checkpoint directory on this machine, "
                    "when its processes saw it at another path (a container's volume)")
    a = ap.parse_args()
    try:
        bad = check_run(a.metrics, a.total, a.servers, a.mode, a.members, a.checkpoint_dir)
    except (OSError, ValueError) as e:
        bad = [str(e)]
    for b in bad:
        print("violation: %s" % b)
    if not bad:
        print("run checked: every batch trained exactly once")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
