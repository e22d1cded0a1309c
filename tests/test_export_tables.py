#!/usr/bin/python3
"""Export of a click-through-rate checkpoint's embedding tables, end to end.

A local cluster (2 servers, 1 worker) trains a small CTR model on gen_ctr's
data: one shared Embedding table of dim 4 whose capacity (512 rows per
server) is far below the ids the data holds, so rows are evicted all the
time, with a checkpoint every 10 steps, every third one full and the
others incremental. Then coordinator export writes the newest incremental
checkpoint, and the newest full one, as safetensors and as npz, and:

- every table is two tensors, TABLE/ids (uint64 [n], unique, ascending)
  and TABLE/embeddings (float32 [n, dim]), the same in both formats (the
  safetensors file parsed by hand, the npz by numpy.load), with the
  dense variables beside them and the tables' name, dim and rows in the
  metadata;
- the ids and rows equal those read independently here from the shard
  files, with a reader of schemas/checkpoint.md's "Embedding table
  shards" layout written from the document (CRC-32 checked): the base's
  full file of each shard, minus the ids its incremental file lists as
  evicted, with the incremental file's rows over it, every shard joined.
  The incremental checkpoint must hold a row that changed since its full
  file (the export has the new value) and an evicted id (the export does
  not have it): the test fails otherwise, as the capacity makes both
  certain;
- PyTorch (when it imports) loads a table as README.md shows: an
  nn.Embedding of the rows and a dict from id to row;
- bad input: an incremental checkpoint whose base is gone, and a shard
  file with a flipped byte, are refused with one line naming the base or
  the file (checksum), and an existing output file is left as it was.

Usage: test_export_tables.py GEN_CTR (PS_COORDINATOR from meson's
environment).
"""

import json
import os
import re
import shutil
import struct
import sys
import tempfile
import zlib

try:
    import numpy as np
except ImportError:
    print("SKIP: NumPy cannot be imported (apt-get install python3-numpy)")
    sys.exit(77)

COORDINATOR = os.environ["PS_COORDINATOR"]
GEN_CTR = sys.argv[1]

MODEL = {
    "name": "ctr_export",
    "inputs": {"dense": 13, "fields": 26},
    "optimizer": {"kind": "adam", "lr": 0.01},
    "layers": [
        {"type": "Embedding", "name": "emb", "dim": 4, "tables": "shared", "combine": "sum",
         "initializer": {"kind": "uniform", "low": -0.05, "high": 0.05},
         "optimizer": {"kind": "adagrad", "lr": 0.05, "initial_accumulator": 0.001},
         "eviction": {"capacity": 512}},
        {"type": "Concatenate"},
        {"type": "Dense", "units": 1},
    ],
}
TABLE, DIM = "emb/table", 4

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, failures, read_safetensors, run  # noqa: E402

# ---------------------------------------------------------------------------
# The shard file format, from schemas/checkpoint.md ("Embedding table
# shards"), independently of the C reader.

SLOTS = {0: 0, 1: 1, 2: 2, 3: 2}      # SGD, Adagrad, Adam (m, v), FTRL (z, n)


def read_table_file(path):
    """A shard file: {"full", "dim", "rows": {id: float32 [dim]}, "evicted":
    set of ids}, after checking magic, format, stripes and CRC-32."""
    with open(path, "rb") as f:
        b = f.read()
    assert b[:8] == b"\x89PSTBL\r\n", path + ": magic"
    fmt, kind = struct.unpack_from("<II", b, 8)
    assert fmt == 1, path + ": format"
    assert struct.unpack_from("<I", b, len(b) - 4)[0] == zlib.crc32(b[:-4]), path + ": CRC"
    (stripes,) = struct.unpack_from("<I", b, 28)
    assert stripes == 64
    name = b[32:160].split(b"\0")[0].decode()
    (dim,) = struct.unpack_from("<I", b, 160)
    (opt,) = struct.unpack_from("<I", b, 216)
    (width,) = struct.unpack_from("<I", b, 300)
    (ledger,) = struct.unpack_from("<Q", b, 344)
    row_bytes = 24 + 4 * dim * (1 + SLOTS[opt])
    at = 352 + ledger
    rows, evicted = {}, set()
    for _ in range(stripes):
        _sweep, e, r = struct.unpack_from("<QQQ", b, at)
        at += 24 + 4 * width
        evicted.update(struct.unpack_from("<%dQ" % e, b, at))
        at += 8 * e
        for i in range(r):
            row = at + i * row_bytes
            (rid,) = struct.unpack_from("<Q", b, row)
            assert rid not in rows, "%s: id %d twice" % (path, rid)
            rows[rid] = np.frombuffer(b, "<f4", dim, row + 24).copy()
        at += r * row_bytes
    assert at == len(b) - 4, path + ": sections do not fill the file"
    return {"name": name, "full": kind == 0, "dim": dim, "rows": rows, "evicted": evicted}


def expected_table(root, ckpt, name):
    """Table name as a resume restores it, read from the shard files here:
    {id: row}, and per shard the full and the incremental file read."""
    with open(os.path.join(root, ckpt, "MANIFEST.json")) as f:
        manifest = json.load(f)
    base = None
    if "base" in manifest:
        with open(os.path.join(root, manifest["base"], "MANIFEST.json")) as f:
            base = json.load(f)
    table, shards = {}, []
    for entry in manifest["tables"]["files"]:
        if entry["table"] != name:
            continue
        if entry["full"]:
            full, incr = read_table_file(os.path.join(root, ckpt, entry["file"])), None
        else:
            (b,) = [e for e in base["tables"]["files"]
                    if e["table"] == name and e["shard"] == entry["shard"] and e["full"]]
            full = read_table_file(os.path.join(root, manifest["base"], b["file"]))
            incr = read_table_file(os.path.join(root, ckpt, entry["file"]))
        rows = dict(full["rows"])
        if incr:
            for rid in incr["evicted"]:
                rows.pop(rid, None)
            rows.update(incr["rows"])
        assert not set(rows) & set(table), "an id in two shards"
        table.update(rows)
        shards.append((full, incr))
    return table, shards, manifest


# ---------------------------------------------------------------------------
# The export, read back.

def read_npz(path):
    with np.load(path) as z:
        tensors = {k: z[k] for k in z.files if k != "__metadata__.json"}
        meta = json.loads(bytes(z["__metadata__.json"]))
    return tensors, meta


def export(ckpt, fmt, out):
    return run([COORDINATOR, "export", "--checkpoint", ckpt, "--format", fmt, "--out", out])


def check_export(work, root, ckpt, label):
    """Export ckpt in both formats and check them against the files."""
    table, shards, manifest = expected_table(root, ckpt, TABLE)
    got = {}
    for fmt, reader in (("safetensors", lambda p: read_safetensors(p)[:2]), ("npz", read_npz)):
        out = os.path.join(work, "%s.%s" % (ckpt, fmt))
        status, text = export(os.path.join(root, ckpt), fmt, out)
        check(status == 0 and re.search(r"exported \d+ variables and 1 embedding table "
                                        r"\(%d rows\)" % len(table), text),
              "%s: exported as %s, saying how many rows" % (label, fmt), text)
        if status != 0:
            return None
        got[fmt] = reader(out)
    (st, st_meta), (nz, nz_meta) = got["safetensors"], got["npz"]
    ids, emb = st.get(TABLE + "/ids"), st.get(TABLE + "/embeddings")
    check(ids is not None and emb is not None, "%s: %s/ids and %s/embeddings are there"
          % (label, TABLE, TABLE), sorted(st))
    if ids is None or emb is None:
        return None
    check(ids.dtype == np.dtype("<u8") and emb.dtype == np.dtype("<f4"),
          "%s: ids are uint64, embeddings float32" % label, (ids.dtype, emb.dtype))
    check(ids.shape == (len(table),) and emb.shape == (len(table), DIM),
          "%s: shapes [n] and [n, %d], n = %d live rows" % (label, DIM, len(table)),
          (ids.shape, emb.shape))
    check(bool(np.all(ids[1:] > ids[:-1])), "%s: ids unique and ascending" % label)
    check(set(ids.tolist()) == set(table), "%s: the ids are the shards' live rows" % label,
          (len(set(ids.tolist()) - set(table)), len(set(table) - set(ids.tolist()))))
    same = all(np.array_equal(emb[i], table.get(int(ids[i]), np.zeros(0)))
               for i in range(len(ids)))
    check(same, "%s: row i is the embedding of ids[i], bit for bit" % label)
    check(set(st) == set(nz) and all(np.array_equal(st[k], nz[k]) for k in st),
          "%s: npz holds the same tensors as safetensors" % label, (sorted(st), sorted(nz)))
    check("dense/kernel" in st and st["dense/kernel"].shape == (17, 1) and "dense/bias" in st,
          "%s: the dense variables are there" % label, sorted(st))
    tables = json.loads(st_meta.get("tables", "null"))
    check(tables == [{"name": TABLE, "dim": DIM, "rows": len(table)}]
          and json.loads(nz_meta["tables"]) == tables and st_meta.get("step")
          == str(manifest["step"]) and json.loads(st_meta["model"])["name"] == MODEL["name"],
          "%s: metadata names the table, its dim and rows, the step and the model" % label,
          st_meta)
    return ids, emb, shards


def main():
    work = tempfile.mkdtemp(prefix="test_export_tables.")
    try:
        data = os.path.join(work, "data")
        status, out = run([GEN_CTR, "--out", data, "--train-rows", "4000", "--test-rows",
                           "500", "--seed", "1", "--cardinalities", "small"])
        check(status == 0, "gen_ctr wrote the data", out)
        spec = os.path.join(work, "model.json")
        with open(spec, "w") as f:
            json.dump(MODEL, f)
        root = os.path.join(work, "ckpt")
        status, out = run([COORDINATOR, "--local", "--ps", "2", "--workers", "1", "--model", spec,
                           "--data-format", "criteo", "--train-data",
                           os.path.join(data, "train.txt"), "--test-data",
                           os.path.join(data, "test.txt"), "--batch", "64", "--epochs", "1",
                           "--checkpoint-dir", root, "--checkpoint-steps", "10", "--full-every",
                           "3", "--keep", "100", "--log-dir", os.path.join(work, "logs")], 240)
        check(status == 0, "the cluster trained the CTR model with checkpoints", out[-2000:])
        if status != 0:
            return
        ckpts = sorted(d for d in os.listdir(root) if d.startswith("ckpt-"))
        manifests = {}
        for d in ckpts:
            with open(os.path.join(root, d, "MANIFEST.json")) as f:
                manifests[d] = json.load(f)
        incr = [d for d in ckpts if "base" in manifests[d]]
        full = [d for d in ckpts if "base" not in manifests[d] and manifests[d]["step"] > 0]
        check(incr and full, "the run wrote incremental and full checkpoints", ckpts)
        if not incr or not full:
            return

        newest_incr = incr[-1]
        result = check_export(work, root, newest_incr, "incremental " + newest_incr)
        if result:
            ids, emb, shards = result
            exported = dict(zip(ids.tolist(), emb))
            changed = [(rid, row) for f_, i_ in shards for rid, row in i_["rows"].items()
                       if rid in f_["rows"] and not np.array_equal(row, f_["rows"][rid])]
            check(len(changed) > 0 and all(np.array_equal(exported[rid], row)
                                           for rid, row in changed),
                  "incremental: %d rows changed since the full file, each exported with its "
                  "new value" % len(changed))
            evicted = [rid for f_, i_ in shards for rid in i_["evicted"]]
            check(len(evicted) > 0 and all(rid not in exported for rid in evicted)
                  and all(rid in f_["rows"] for f_, i_ in shards for rid in i_["evicted"]),
                  "incremental: %d ids of the full file evicted since, none exported"
                  % len(evicted))
            try:
                import torch
            except ImportError:
                torch = None
            if torch is not None:
                # README.md, "Export and predict": the table in PyTorch.
                w = np.load(os.path.join(work, newest_incr + ".npz"))
                table = torch.nn.Embedding.from_pretrained(
                    torch.from_numpy(w[TABLE + "/embeddings"]))
                row_of = {int(i): r for r, i in enumerate(w[TABLE + "/ids"])}
                some = ids[:: max(1, len(ids) // 7)].tolist()
                looked = table(torch.tensor([row_of[i] for i in some])).detach().numpy()
                check(np.array_equal(looked, np.stack([exported[i] for i in some])),
                      "PyTorch: nn.Embedding rows looked up by id equal the export")
            else:
                print("SKIP: PyTorch cannot be imported; its check did not run")
        check_export(work, root, full[-1], "full " + full[-1])

        # Bad input: the base of an incremental checkpoint gone, a corrupt
        # shard file. One line naming it, the output left as it was.
        target = os.path.join(work, "keep.npz")
        with open(target, "wb") as f:
            f.write(b"untouched")

        def refused(what, ckpt, words):
            status, out = export(ckpt, "npz", target)
            with open(target, "rb") as f:
                kept = f.read() == b"untouched"
            check(status == 1 and len(out.strip().splitlines()) == 1 and kept
                  and all(w in out for w in words), what + " is refused, naming it", out)

        lone = os.path.join(work, "lone")
        os.mkdir(lone)
        shutil.copytree(os.path.join(root, newest_incr), os.path.join(lone, newest_incr))
        refused("an incremental checkpoint without its base",
                os.path.join(lone, newest_incr), [manifests[newest_incr]["base"]])
        broken = os.path.join(work, "broken")
        os.mkdir(broken)
        shutil.copytree(os.path.join(root, full[-1]), os.path.join(broken, full[-1]))
        entry = manifests[full[-1]]["tables"]["files"][0]["file"]
        with open(os.path.join(broken, full[-1], entry), "r+b") as f:
            f.seek(400)
            b = f.read(1)
            f.seek(400)
            f.write(bytes([b[0] ^ 0xFF]))
        refused("a corrupt shard file", os.path.join(broken, full[-1]), [entry, "checksum"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


main()
if failures:
    print("%d check(s) failed: %s" % (len(failures), "; ".join(failures)))
    sys.exit(1)
print("all checks passed")
