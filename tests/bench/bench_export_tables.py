#!/usr/bin/python3
"""Memory and time of exporting a large embedding table (issue 19, section 1).

A one-server local cluster trains a few steps of a CTR model with one
shared table of dim 16 (Adagrad: value and one slot per row) and writes a
full checkpoint. Its shard file is then replaced by one of --rows rows
(10,000,000 by default) written here from schemas/checkpoint.md's layout,
keeping the real file's header and ledger, and `coordinator export`
writes the checkpoint as safetensors and as npz. For each it prints the
wall time, the output's size, and the export process's peak memory,
sampled from /proc every 20 ms: anonymous memory (RssAnon: what the
export allocates) and all of its resident set (VmHWM, which also counts
the pages of the mapped shard file it has read; those are the page
cache's, clean, and given back under memory pressure). A spot check of
ids and rows against the file written is printed too, and the peak
RssAnon against the output tables' size and the wall time as BENCHROW
lines after the table (benchrow.py). Nothing passes or fails on a number.

Usage: bench_export_tables.py BUILD_DIR [--rows N] [--work DIR]
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

import benchrow

DIM = 16
MODEL = {
    "name": "bench_export",
    "inputs": {"dense": 13, "fields": 26},
    "layers": [
        {"type": "Embedding", "name": "emb", "dim": DIM, "tables": "shared", "combine": "sum",
         "optimizer": {"kind": "adagrad", "lr": 0.05, "initial_accumulator": 0.001}},
        {"type": "Concatenate"},
        {"type": "Dense", "units": 1},
    ],
}
M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


def stripe_of(ids):
    """ps_sparse_stripe_of: the top 6 bits of mix64 (mix64 (id) ^ C)."""
    return (mix64(mix64(ids) ^ np.uint64(0x5851f42d4c957f2d)) >> np.uint64(58)).astype(np.int64)


def value_of(ids):
    """The row written for each id: a function of the id, to spot-check."""
    base = (ids % np.uint64(100003)).astype(np.float32) / np.float32(100003)
    return base[:, None] + np.arange(DIM, dtype=np.float32)[None, :]


def write_table(real, path, rows, seed):
    """A full shard file of rows rows, with real's header and ledger."""
    with open(real, "rb") as f:
        head = f.read()
    (width,) = struct.unpack_from("<I", head, 300)
    (ledger,) = struct.unpack_from("<Q", head, 344)
    assert struct.unpack_from("<I", head, 160)[0] == DIM and width == 0
    (newest,) = struct.unpack_from("<Q", head, 336)
    rng = np.random.default_rng(seed)
    ids = np.unique(rng.integers(1, 2 ** 63, size=rows + rows // 100, dtype=np.uint64))[:rows]
    rng.shuffle(ids)
    stripes = stripe_of(ids)
    order = np.argsort(stripes, kind="stable")
    ids, stripes = ids[order], stripes[order]
    counts = np.bincount(stripes, minlength=64)
    row = np.dtype([("id", "<u8"), ("last", "<u8"), ("count", "<u8"), ("v", "<f4", DIM),
                    ("slot", "<f4", DIM)])
    crc = 0
    with open(path, "wb") as f:
        def put(b):
            nonlocal crc
            crc = zlib.crc32(b, crc)
            f.write(b)
        put(head[:352 + ledger])
        at = 0
        for s in range(64):
            n = int(counts[s])
            put(struct.pack("<QQQ", 0, 0, n))
            chunk = np.zeros(n, row)
            chunk["id"] = ids[at:at + n]
            chunk["last"] = max(newest, 1)
            chunk["count"] = 1
            chunk["v"] = value_of(ids[at:at + n])
            chunk["slot"] = 0.5
            put(chunk.tobytes())
            at += n
        f.write(struct.pack("<I", crc))
    return ids


def peak_of(pid, done):
    """Peak RssAnon and VmHWM (kB) of pid, sampled until done() holds."""
    anon = hwm = 0
    while not done():
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        anon = max(anon, int(line.split()[1]))
                    elif line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]))
        except OSError:
            break
        time.sleep(0.02)
    return anon, hwm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--work")
    args = ap.parse_args()
    coordinator = os.path.join(args.build, "coordinator", "coordinator")
    gen_ctr = os.path.join(args.build, "tests", "gen_ctr")
    work = tempfile.mkdtemp(prefix="bench_export_tables.", dir=args.work)
    try:
        data = os.path.join(work, "data")
        subprocess.run([gen_ctr, "--out", data, "--train-rows", "1000", "--test-rows", "100",
                        "--seed", "1", "--cardinalities", "small"], check=True,
                       stdout=subprocess.DEVNULL)
        spec = os.path.join(work, "model.json")
        with open(spec, "w") as f:
            json.dump(MODEL, f)
        root = os.path.join(work, "ckpt")
        subprocess.run([coordinator, "--local", "--ps", "1", "--workers", "1", "--model", spec,
                        "--data-format", "criteo", "--train-data", os.path.join(data, "train.txt"),
                        "--test-data", os.path.join(data, "test.txt"), "--batch", "100",
                        "--epochs", "1", "--checkpoint-dir", root, "--checkpoint-steps", "100",
                        "--log-dir", os.path.join(work, "logs")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        newest = sorted(d for d in os.listdir(root) if d.startswith("ckpt-"))[-1]
        ckpt = os.path.join(root, newest)
        with open(os.path.join(ckpt, "MANIFEST.json")) as f:
            manifest = json.load(f)
        assert "base" not in manifest, "expected a full checkpoint"
        (entry,) = manifest["tables"]["files"]
        table = os.path.join(ckpt, entry["file"])
        t0 = time.time()
        ids = write_table(table, table + ".new", args.rows, 1)
        os.replace(table + ".new", table)
        size = os.path.getsize(table)
        print("shard file: %d rows of dim %d (Adagrad), %.0f MB, written in %.1f s"
              % (len(ids), DIM, size / 1e6, time.time() - t0))
        out_mb = len(ids) * (8 + 4 * DIM) / 1e6
        print("output tables: %.0f MB (8 + 4 * %d bytes a row)\n" % (out_mb, DIM))
        print("| format | wall s | file MB | peak RssAnon MB | peak VmHWM MB |")
        print("|---|---|---|---|---|")
        sample = np.sort(ids[:: max(1, len(ids) // 1000)])
        figures = []    # printed as BENCHROW lines after the table, not inside it
        for fmt in ("safetensors", "npz"):
            out = os.path.join(work, "out." + fmt)
            t0 = time.time()
            p = subprocess.Popen([coordinator, "export", "--checkpoint", ckpt, "--format", fmt,
                                  "--out", out], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            anon, hwm = peak_of(p.pid, lambda: p.poll() is not None)
            text = p.communicate()[0].decode()
            wall = time.time() - t0
            if p.returncode != 0:
                print("export failed: " + text)
                return 1
            print("| %s | %.1f | %.0f | %.0f | %.0f |" % (fmt, wall, os.path.getsize(out) / 1e6,
                                                         anon / 1024, hwm / 1024))
            figures.append((fmt, wall, anon / 1024))
            if fmt == "npz":
                with np.load(out, mmap_mode=None) as w:
                    got_ids = w["emb/table/ids"]
                    emb = w["emb/table/embeddings"]
                    rows = np.searchsorted(got_ids, sample)
                    ok = (len(got_ids) == len(ids) and bool(np.all(got_ids[1:] > got_ids[:-1]))
                          and bool(np.all(got_ids[rows] == sample))
                          and np.array_equal(emb[rows], value_of(sample)))
                print("\nspot check of %d ids and rows in the npz: %s"
                      % (len(sample), "as written" if ok else "DIFFERENT"))
            os.remove(out)
        for fmt, wall, anon_mb in figures:
            benchrow.row("bench_export_tables", "export to %s, %d rows, peak RssAnon"
                         % (fmt, len(ids)), "output tables", out_mb, anon_mb, "MB", "lower")
            benchrow.row("bench_export_tables", "export to %s, %d rows, wall" % (fmt, len(ids)),
                         None, None, wall, "s", "lower")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


sys.exit(main())
