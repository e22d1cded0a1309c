#!/usr/bin/env python3
"""Tests of check_run.py's checkpoint invariant on real files: a run whose
coordinator loaded a checkpoint passes only when that checkpoint is there
and verifies, so the invariant cannot pass by not being checked.

Each case writes a metrics file (JSON lines, as the coordinator writes
them) for a small async run whose coordinator loaded a checkpoint, and a
checkpoint in the format of schemas/checkpoint.md, then runs check_run.py
as the harness and the compose test do: the library call and the command.
Exits 0 when every case holds, 1 with what failed.
"""

import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_run  # noqa: E402

TOTAL = 4


def write_checkpoint(root, step):
    """A version 1 checkpoint of one snapshot file at root/ckpt-<step>."""
    ckpt = os.path.join(root, "ckpt-%012d" % step)
    os.makedirs(ckpt)
    body = b"partition bytes of step %d" % step
    data = body + struct.pack("<I", zlib.crc32(body))
    with open(os.path.join(ckpt, "ps-0.snap"), "wb") as f:
        f.write(data)
    manifest = {"format": "ps-cluster-checkpoint", "version": 1, "step": step,
                "files": [{"file": "ps-0.snap", "bytes": len(data),
                           "crc32": zlib.crc32(body)}]}
    with open(os.path.join(ckpt, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f)
    return ckpt


def write_metrics(path, loaded):
    """The events of a good async run of TOTAL steps on one server whose
    coordinator restored it from checkpoint loaded at step 2."""
    part = {"var": "w", "part": 0, "updates": TOTAL}
    rows = [{"event": "started", "total": TOTAL},
            {"event": "recovered", "reason": "ps:0 failed", "checkpoint": loaded,
             "step": 2, "steps_lost": 1},
            {"event": "done", "steps": TOTAL, "total": TOTAL, "mode": "async",
             "servers": [{"task": 0, "partitions": [part]}], "worker_steps": [TOTAL + 1],
             "checkpoints": 0, "test_accuracy": 0.5}]
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def violations(metrics, ckpt_dir=None):
    """check_run's violations, from the library and from the command,
    which must agree."""
    lib = check_run.check_run([metrics], total=TOTAL, nservers=1, mode="async",
                              ckpt_dir=ckpt_dir)
    argv = [sys.executable, os.path.join(HERE, "check_run.py"), "--metrics", metrics,
            "--total", str(TOTAL), "--servers", "1", "--mode", "async"]
    if ckpt_dir:
        argv += ["--checkpoint-dir", ckpt_dir]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if (r.returncode != 0) != bool(lib):
        raise AssertionError("check_run.py exited %d, the library found %r:\n%s"
                             % (r.returncode, lib, r.stdout))
    return lib


def main():
    failures = []

    def expect(name, bad, want):
        hit = [b for b in bad if want in b] if want else bad
        ok = bool(hit) if want else not bad
        print("%s %s: %s" % ("ok  " if ok else "FAIL", name, bad or "no violation"))
        if not ok:
            failures.append(name)

    with tempfile.TemporaryDirectory(prefix="test-check-run-") as d:
        root = os.path.join(d, "checkpoints")
        os.makedirs(root)
        good = write_checkpoint(root, 2)
        metrics = os.path.join(d, "metrics.jsonl")

        write_metrics(metrics, good)
        expect("a loaded checkpoint that verifies", violations(metrics), None)

        # The coordinator saw the checkpoints at another path (a
        # container's): they are looked up by name in the directory given.
        write_metrics(metrics, "/var/lib/ps-cluster/checkpoints/" + os.path.basename(good))
        expect("a loaded checkpoint found by name in --checkpoint-dir",
               violations(metrics, ckpt_dir=root), None)
        expect("a loaded checkpoint at a path that is not there", violations(metrics),
               "is gone")

        gone = os.path.join(root, "ckpt-%012d" % 1)
        write_metrics(metrics, gone)
        expect("a loaded checkpoint removed after the load (pruned)", violations(metrics),
               "is gone")

        bad = write_checkpoint(root, 3)
        with open(os.path.join(bad, "ps-0.snap"), "r+b") as f:
            f.seek(3)
            f.write(b"X")
        write_metrics(metrics, bad)
        expect("a loaded checkpoint with a flipped byte", violations(metrics),
               "fails verification")

    if failures:
        print("test_check_run: %d case(s) failed: %s" % (len(failures), ", ".join(failures)))
        return 1
    print("test_check_run: every case holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
