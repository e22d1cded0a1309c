#!/usr/bin/python3
"""PyTorch's side of the sparse embedding table micro-anchor: bench_sparse's
peer (tests/bench/bench_sparse.c), which runs it in the same run on the same
requests. Needs python3-torch; not part of the test suite.

On a table of ROWS x DIM float32 it times, over requests of ids:
  gather:  table.index_select(0, ids) over all of a request's ids;
  Adagrad: torch.optim.Adagrad on a sparse gradient (a sparse COO tensor of
           the request's ids and one gradient row each; the optimizer
           coalesces the duplicates), lr 0.05, initial accumulator 0.1,
           eps 1e-7, as bench_sparse's table.
Each is warmed up over every request once, then timed in REPS repetitions
of about REP_SECONDS each; the figure is the fastest repetition's, as
in bench_sparse (the one other work on the machine disturbed least). One
thread, as bench_sparse's paths: OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are set
before torch is imported (Debian's torch ignores set_num_threads for BLAS,
see tests/bench/torch_cnn.py).

The requests come from --ids, a file of uint64 row indexes in this
machine's byte order, REQUEST per request (bench_sparse writes it), or,
without --ids, are drawn here from the same law (Zipf with exponent --zipf
over the rows, sent to rows by the same multiplicative permutation; the
draws themselves differ from bench_sparse's).

It writes one JSON line to --out (or stdout): torch's version, the figures
as gather_ids_per_s, adagrad_ids_per_s and adagrad_unique_per_s, and the
mean unique rows per request. When torch cannot be imported it prints
"peer none: REASON" and exits 3.

Usage: /usr/bin/python3 tests/bench/torch_sparse.py [--rows 10000000]
           [--dim 16] [--request 13312] [--ids FILE] [--zipf 1.1]
           [--batches 32] [--reps 5] [--rep-seconds 1.0] [--out FILE]
"""
import argparse, json, math, os, sys, time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
try:
    import numpy as np
    import torch
except ImportError as e:
    print("peer none: %s cannot import numpy and torch (%s); install python3-torch"
          % (sys.executable, e), flush=True)
    sys.exit(3)


def draw_requests(rows, request, batches, zipf, seed=17):
    """Zipf ranks by inverting the continuous law's CDF on [1, rows + 1),
    sent to rows by bench_sparse's permutation (rank * stride mod rows)."""
    rng = np.random.default_rng(seed)
    stride = 2654435761 % rows
    while stride == 0 or math.gcd(stride, rows) != 1:
        stride += 1
    u = rng.random((batches, request))
    if abs(zipf - 1) < 1e-9:
        x = np.exp(u * math.log(rows + 1))
    else:
        x = ((float(rows + 1) ** (1 - zipf) - 1) * u + 1) ** (1 / (1 - zipf))
    rank = np.minimum(np.floor(x).astype(np.uint64) - 1, rows - 1)
    # rank * stride can pass 2^64: reduce the product by parts.
    ids = [(int(r) * stride) % rows for r in rank.reshape(-1)]
    return np.array(ids, dtype=np.int64).reshape(batches, request)


def timed(step, requests, reps, rep_seconds):
    """Median seconds per request of step(i) over the requests in turn,
    after one warm-up pass over all of them."""
    for i in range(len(requests)):
        step(i)
    times, nxt = [], 0
    for _ in range(reps):
        count, start = 0, time.perf_counter()
        while True:
            step(nxt)
            nxt = (nxt + 1) % len(requests)
            count += 1
            elapsed = time.perf_counter() - start
            if elapsed >= rep_seconds:
                break
        times.append(elapsed / count)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--request", type=int, default=26 * 512, help="ids per request")
    ap.add_argument("--ids", help="requests' row indexes, uint64, REQUEST per request")
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--batches", type=int, default=32, help="requests drawn without --ids")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rep-seconds", type=float, default=1.0)
    ap.add_argument("--out", help="JSON-lines file to append the result to (default stdout)")
    args = ap.parse_args()
    torch.set_num_threads(1)

    if args.ids:
        raw = np.fromfile(args.ids, dtype=np.uint64)
        if raw.size == 0 or raw.size % args.request:
            sys.exit("torch_sparse: %s holds %d ids, not a whole number of requests of %d"
                     % (args.ids, raw.size, args.request))
        if raw.max() >= args.rows:
            sys.exit("torch_sparse: %s holds id %d, beyond the table's %d rows"
                     % (args.ids, int(raw.max()), args.rows))
        ids = raw.astype(np.int64).reshape(-1, args.request)
    else:
        ids = draw_requests(args.rows, args.request, args.batches, args.zipf)
    requests = [torch.from_numpy(np.ascontiguousarray(r)) for r in ids]
    unique = float(np.mean([len(np.unique(r)) for r in ids]))
    gen = torch.Generator().manual_seed(17)
    grads = [torch.rand(args.request, args.dim, generator=gen) * 0.02 - 0.01
             for _ in requests]

    table = torch.nn.Parameter(torch.rand(args.rows, args.dim, generator=gen) * 0.1 - 0.05)
    opt = torch.optim.Adagrad([table], lr=0.05, initial_accumulator_value=0.1, eps=1e-7)
    shape = (args.rows, args.dim)

    def gather(i):
        with torch.no_grad():
            table.index_select(0, requests[i])

    def adagrad(i):
        table.grad = torch.sparse_coo_tensor(requests[i].unsqueeze(0), grads[i], shape)
        opt.step()

    t_gather = timed(gather, requests, args.reps, args.rep_seconds)
    t_adagrad = timed(adagrad, requests, args.reps, args.rep_seconds)
    result = {
        "torch": torch.__version__, "threads": torch.get_num_threads(),
        "rows": args.rows, "dim": args.dim, "request": args.request,
        "unique_per_request": unique,
        "gather_ids_per_s": args.request / t_gather,
        "adagrad_ids_per_s": args.request / t_adagrad,
        "adagrad_unique_per_s": unique / t_adagrad,
    }
    line = json.dumps(result)
    if args.out:
        with open(args.out, "a") as f:
            f.write(line + "\n")
    else:
        print(line, flush=True)


if __name__ == "__main__":
    main()
