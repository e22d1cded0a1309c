#!/usr/bin/python3
"""PyTorch peer of ps-cluster's click-through-rate models: bench_ctr.py runs
it on the same Criteo-format files as `ps-worker --standalone --model
lr|dlrm` and compares the two. Needs python3-torch; not part of the test
suite.

Data: Criteo's text format (Kaggle Display Advertising Challenge, Criteo
1TB logs), plain or gzip: one example per line, tab-separated, the label
(0/1), 13 integer features (empty = 0; a value becomes log(1 + max(x, 0)))
and 26 categorical features of 8 hex digits (possibly empty). A value
becomes ps-cluster's id of it (schemas/data.md: mix64(((f + 1) << 40) ^ v),
v = 2^32 for an empty one) and, as a PyTorch user hashes ids into a table
of fixed size, that id modulo --buckets (2^20) in its field's table. Lines with the wrong number of fields or a bad label, integer or
hex value are counted and skipped. The files are parsed into tensors
before anything is timed.

Models (binary cross-entropy on a sigmoid output, batch 512, one epoch in
file order):
  lr:   logistic regression: a sum of one weight per categorical id
        (nn.EmbeddingBag of width 1, sparse gradients) plus Linear(13) on
        the dense features; Adagrad 0.05 on everything.
  dlrm: per-field nn.Embedding of width 16 (sparse=True), concatenated with
        the 13 dense features into an MLP 256-128-1 with relu; Adagrad 0.05
        on the embeddings, Adam 1e-3 on the MLP.
OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are set to --threads before torch
is imported (Debian's torch ignores set_num_threads for BLAS).

It prints one JSON line (to --out as well, when given): examples_per_s
(training only), test auc and logloss, train_seconds, peak_rss_bytes, the
rows read and skipped, and torch's version. When torch cannot be imported
it prints "peer none: REASON" and exits 3.

Usage: /usr/bin/python3 tests/bench/torch_ctr.py --model lr|dlrm
           --train FILE --test FILE [--batch 512] [--threads 2]
           [--buckets 1048576] [--seed 1] [--out FILE]
"""
import argparse, gzip, json, os, resource, sys, time

NUM_INT, NUM_CAT = 13, 26
NUM_FIELDS = 1 + NUM_INT + NUM_CAT
CHUNK_LINES = 200_000


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["lr", "dlrm"], required=True)
    ap.add_argument("--train", required=True, help="Criteo-format training file (.gz or plain)")
    ap.add_argument("--test", required=True, help="Criteo-format test file")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--buckets", type=int, default=1 << 20, help="hash buckets per field")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", help="JSON-lines file to append the result to")
    return ap.parse_args()


args = parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
os.environ["OMP_NUM_THREADS"] = str(args.threads)
try:
    import numpy as np
    import torch
    import torch.nn as nn
except ImportError as e:
    print("peer none: %s cannot import numpy and torch (%s); install python3-torch"
          % (sys.executable, e), flush=True)
    sys.exit(3)

# Hex digit values by byte; -1 for a byte that is not one.
HEX = np.full(256, -1, dtype=np.int64)
for i, c in enumerate(b"0123456789abcdef"):
    HEX[c] = i
for i, c in enumerate(b"ABCDEF"):
    HEX[c] = 10 + i


def mix64(z):
    """The splitmix64 finalizer on a uint64 array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return z ^ (z >> np.uint64(31))


class Table:
    """A file's examples: labels, log1p dense features and each field's
    bucket, with the count of lines skipped and the first one's number."""

    def __init__(self):
        self.labels, self.dense, self.cats = [], [], []
        self.rows = self.skipped = 0
        self.first_bad = None

    def add_chunk(self, lines, first_line, buckets):
        fields = b"\t".join(lines).split(b"\t")
        if len(fields) != NUM_FIELDS * len(lines):
            # Some line has the wrong number of fields: keep the others.
            good = []
            for k, line in enumerate(lines):
                if line.count(b"\t") == NUM_FIELDS - 1:
                    good.append(line)
                else:
                    self.bad(first_line + k)
            lines = good
            if not lines:
                return
            fields = b"\t".join(lines).split(b"\t")
        arr = np.array(fields, dtype="S16").reshape(len(lines), NUM_FIELDS)
        ok = (arr[:, 0] == b"0") | (arr[:, 0] == b"1")
        ints = arr[:, 1:1 + NUM_INT]
        ints = np.where(ints == b"", b"0", ints)
        ok &= np.char.isdigit(np.char.lstrip(ints, b"-").astype("U16")).all(axis=1)
        cat = arr[:, 1 + NUM_INT:]
        width = np.char.str_len(cat)
        raw = np.frombuffer(cat.astype("S8").tobytes(), dtype=np.uint8).reshape(
            len(lines), NUM_CAT, 8)
        nib = HEX[raw]
        ok &= ((width == 0) | ((width == 8) & (nib >= 0).all(axis=2))).all(axis=1)
        for k in np.flatnonzero(~ok):
            self.bad(first_line + int(k))
        if not ok.any():
            return
        nib, width, ints = nib[ok], width[ok], ints[ok]
        value = np.zeros(nib.shape[:2], dtype=np.uint64)
        for d in range(8):
            value = (value << np.uint64(4)) | np.maximum(nib[:, :, d], 0).astype(np.uint64)
        # An empty value is 2^32, a value of its own, outside the 8 hex digits'.
        value = np.where(width == 0, np.uint64(1 << 32), value)
        # ps-cluster's id of (field, value) (schemas/data.md), then its bucket.
        salt = np.arange(1, NUM_CAT + 1, dtype=np.uint64) << np.uint64(40)
        bucket = mix64(value ^ salt[None, :]) % np.uint64(buckets)
        self.labels.append(arr[ok, 0].astype(np.float32))
        self.dense.append(np.log1p(np.maximum(ints.astype(np.float64), 0)).astype(np.float32))
        self.cats.append(bucket.astype(np.int64))
        self.rows += int(ok.sum())

    def bad(self, line_number):
        self.skipped += 1
        if self.first_bad is None:
            self.first_bad = line_number

    def tensors(self):
        return (torch.from_numpy(np.concatenate(self.labels)),
                torch.from_numpy(np.concatenate(self.dense)),
                torch.from_numpy(np.concatenate(self.cats)))


def read_criteo(path, buckets):
    opener = gzip.open if path.endswith(".gz") else open
    table, chunk, first = Table(), [], 1
    with opener(path, "rb") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            if not chunk:
                first = number
            chunk.append(line)
            if len(chunk) == CHUNK_LINES:
                table.add_chunk(chunk, first, buckets)
                chunk = []
    if chunk:
        table.add_chunk(chunk, first, buckets)
    if table.skipped:
        print("torch_ctr: %s: %d malformed lines skipped, the first at line %d"
              % (path, table.skipped, table.first_bad), file=sys.stderr)
    if table.rows == 0 or table.skipped > table.rows:
        sys.exit("torch_ctr: %s: %d good lines and %d malformed ones: not Criteo's format "
                 "(label, 13 integers, 26 categorical hex values, tab-separated)"
                 % (path, table.rows, table.skipped))
    return table


class LR(nn.Module):
    def __init__(self, buckets):
        super().__init__()
        self.buckets = buckets
        self.emb = nn.EmbeddingBag(NUM_CAT * buckets, 1, mode="sum", sparse=True)
        nn.init.zeros_(self.emb.weight)
        self.dense = nn.Linear(NUM_INT, 1)
        self.offset = torch.arange(NUM_CAT, dtype=torch.int64) * buckets

    def forward(self, dense, cats):
        return (self.emb(cats + self.offset) + self.dense(dense)).squeeze(1)

    def optimizers(self):
        return [torch.optim.Adagrad(self.parameters(), lr=0.05)]


class DLRM(nn.Module):
    def __init__(self, buckets, dim=16):
        super().__init__()
        self.embs = nn.ModuleList(nn.Embedding(buckets, dim, sparse=True)
                                  for _ in range(NUM_CAT))
        for e in self.embs:
            nn.init.uniform_(e.weight, -0.05, 0.05)
        self.mlp = nn.Sequential(nn.Linear(NUM_CAT * dim + NUM_INT, 256), nn.ReLU(),
                                 nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 1))

    def forward(self, dense, cats):
        x = torch.cat([e(cats[:, f]) for f, e in enumerate(self.embs)] + [dense], dim=1)
        return self.mlp(x).squeeze(1)

    def optimizers(self):
        return [torch.optim.Adagrad(self.embs.parameters(), lr=0.05),
                torch.optim.Adam(self.mlp.parameters(), lr=1e-3)]


def auc(labels, scores):
    """Area under the ROC curve: the Mann-Whitney statistic, ties counted
    as one half (each tied group gets its average rank)."""
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    _, start, counts = np.unique(s, return_index=True, return_counts=True)
    avg = start + (counts + 1) / 2.0            # 1-based average rank per group
    ranks = np.repeat(avg, counts)
    pos = labels[order] > 0.5
    npos = pos.sum()
    nneg = len(labels) - npos
    if npos == 0 or nneg == 0:
        return float("nan")
    return float((ranks[pos].sum() - npos * (npos + 1) / 2.0) / (npos * nneg))


def main():
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    train = read_criteo(args.train, args.buckets)
    test = read_criteo(args.test, args.buckets)
    y, dense, cats = train.tensors()
    ty, tdense, tcats = test.tensors()
    parse_s = time.perf_counter() - t0
    model = LR(args.buckets) if args.model == "lr" else DLRM(args.buckets)
    opts = model.optimizers()
    loss_fn = nn.BCEWithLogitsLoss()

    n = len(y)
    start = time.perf_counter()
    for first in range(0, n, args.batch):
        last = min(first + args.batch, n)
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(dense[first:last], cats[first:last]), y[first:last])
        loss.backward()
        for opt in opts:
            opt.step()
    train_s = time.perf_counter() - start

    with torch.no_grad():
        logits = torch.cat([model(tdense[i:i + 8192], tcats[i:i + 8192])
                            for i in range(0, len(ty), 8192)])
        logloss = float(nn.functional.binary_cross_entropy_with_logits(logits, ty))
    result = {
        "peer": "torch", "torch": torch.__version__, "model": args.model,
        "threads": args.threads, "batch": args.batch, "buckets": args.buckets,
        "train_rows": n, "test_rows": len(ty),
        "skipped_lines": train.skipped + test.skipped,
        "parse_seconds": parse_s, "train_seconds": train_s,
        "examples_per_s": n / train_s,
        "auc": auc(ty.numpy(), torch.sigmoid(logits).numpy()), "logloss": logloss,
        # ru_maxrss is in KiB on Linux.
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    line = json.dumps(result)
    print(line, flush=True)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
