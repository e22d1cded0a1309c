#!/usr/bin/python3
"""gloo's side of the all-reduce anchor: bench_allreduce's peer
(tests/bench/bench_allreduce.c), which runs it in the same run, between
its own rows. Needs python3-torch; not part of the test suite.

Two processes on this host join a torch.distributed process group (backend
gloo, init_method tcp://127.0.0.1:PORT on a free port, world 2) and
all-reduce (SUM) float32 tensors of each size in --bytes as bench_allreduce
times its ring: per iteration the tensor is refilled with small integers
(so the sum is exact and checked after the last one, and the tensor is in
the cache state a fresh gradient would be in), a one-float all-reduce
lines the two up, and then the timed all-reduce runs; WARMUP iterations
first, then ITERS timed ones. An iteration's time is the slower member's;
the figure is the median. algbw = bytes / time and busbw = algbw * 2 (n -
1) / n, bench_allreduce's (NCCL's) definition.

One compute thread per process, as the ring's members have: OMP and
OpenBLAS threads are capped before torch is imported and
torch.set_num_threads(1) is called (gloo's own I/O threads are its
business, as ZeroMQ's are the ring's). GLOO_SOCKET_IFNAME defaults to lo,
so gloo's pairs connect over loopback as the ring's tcp rows do.

It writes one JSON line per size to --out (or stdout): torch's version,
world, bytes, iters, median_ms, algbw_gbs, busbw_gbs and times_ms (each
timed iteration's time, so that bench_allreduce can pool the times of
several runs). When torch cannot be imported, or has no gloo backend, it
prints "peer none: REASON" and exits 3.

Usage: /usr/bin/python3 tests/bench/torch_allreduce.py [--bytes 16777216 ...]
           [--warmup 5] [--iters 41] [--out FILE]
"""
import argparse, json, os, socket, statistics, sys, time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:
    print("peer none: %s cannot import torch.distributed (%s); install python3-torch"
          % (sys.executable, e), flush=True)
    sys.exit(3)

WORLD = 2


def free_port():
    """A TCP port on 127.0.0.1 that is free now (the store binds it next)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def member(rank, args, port):
    """One member: times the all-reduces; rank 0 writes the results."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=WORLD)
    lines = []
    one = torch.ones(1)
    for size in args.bytes:
        count = size // 4
        # bench_allreduce's values: rank + 1 + (i & 7), whose sum is exact.
        pattern = (torch.arange(count, dtype=torch.int64) & 7).to(torch.float32)
        source = pattern + (rank + 1)
        data = torch.empty(count, dtype=torch.float32)
        times = []
        for it in range(args.warmup + args.iters):
            data.copy_(source)
            dist.all_reduce(one)
            start = time.perf_counter()
            dist.all_reduce(data)
            elapsed = (time.perf_counter() - start) * 1e3
            if it >= args.warmup:
                times.append(elapsed)
        expected = pattern * WORLD + WORLD * (WORLD + 1) / 2
        if not torch.equal(data, expected):
            bad = int((data != expected).nonzero()[0])
            sys.exit("torch_allreduce: rank %d: element %d is %g, expected %g"
                     % (rank, bad, float(data[bad]), float(expected[bad])))
        # The slower member's time per iteration.
        mine = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        slowest = mine.tolist()
        median = statistics.median(slowest)
        algbw = size / (median * 1e6)
        lines.append(json.dumps({
            "torch": torch.__version__, "backend": "gloo", "world": WORLD, "bytes": size,
            "iters": args.iters, "median_ms": median, "algbw_gbs": algbw,
            "busbw_gbs": algbw * 2 * (WORLD - 1) / WORLD, "times_ms": slowest,
        }))
    dist.destroy_process_group()
    if rank == 0:
        text = "".join(line + "\n" for line in lines)
        if args.out:
            with open(args.out, "a") as f:
                f.write(text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bytes", type=int, nargs="+", default=[16 * 1024 * 1024],
                    help="sizes to all-reduce, each a multiple of 4")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=41)
    ap.add_argument("--out", help="JSON-lines file to append the results to (default stdout)")
    args = ap.parse_args()
    if any(size <= 0 or size % 4 for size in args.bytes) or args.iters < 1 or args.warmup < 0:
        sys.exit("torch_allreduce: --bytes must be positive multiples of 4, --iters >= 1 "
                 "and --warmup >= 0")
    if not dist.is_available() or not dist.is_gloo_available():
        print("peer none: torch %s in %s has no gloo backend" % (torch.__version__,
              sys.executable), flush=True)
        sys.exit(3)
    # spawn: each member starts a fresh interpreter, so neither inherits a
    # thread pool or lock state from this one; it raises if a member fails.
    mp.spawn(member, args=(args, free_port()), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main()
