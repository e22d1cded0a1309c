#!/usr/bin/python3
"""PyTorch's DistributedDataParallel over gloo: the peer of
`coordinator --local --mode mirrored` in tests/bench/bench_modes.py, which
runs it right after its mirrored run. Needs python3-torch; not part of the
test suite.

WORLD processes (--world, default 2) on this host join a torch.distributed
process group (backend gloo, init_method tcp://127.0.0.1:PORT on a free
port) and train torch_cnn.py's seed CNN (its keras variant: glorot kernels,
zero biases, Adam 1e-3 with eps 1e-7) wrapped in DistributedDataParallel,
on the schedule mirrored mode follows:

  - an epoch is the training set in a fresh shuffled order (the same on
    every rank), cut into batches of --batch (the last one shorter); the
    batches are numbered across epochs, and global step k hands batch
    k * WORLD + r to rank r (a final step may leave a rank without one);
  - one update per global step from the mean gradient over the examples
    of all its batches (each rank's summed loss is scaled by WORLD over the
    step's examples, since DDP averages over the ranks);
  - after a global step that completes batch number N, with N a multiple
    of --every or the end of an epoch, every rank evaluates its contiguous
    share of the test set and the counts are summed, while training waits
    (as mirrored mode's ring stops for its S_EVAL phase).

One compute thread per process, as the cluster's workers have: OMP and
OpenBLAS are capped before torch is imported (torch_allreduce.py does it),
and torch.set_num_threads(1); gloo's I/O threads are its own business.

Rank 0 prints one JSON line: torch's version, world, batch, epochs,
samples_per_s (every trained example over the wall time from the start of
training to its end, the evaluations included, as the coordinator's done
record counts), time_to_target_s (from the start of training to the moment
the first parameters that scored >= --target existed, the coordinator's
params_at_s; null when never reached), epoch_at_target, final_accuracy,
updates and evals (each evaluation's step, params_at_s and accuracy). When
torch cannot be imported, or has no gloo backend, it prints "peer none:
REASON" and exits 3.

Usage: /usr/bin/python3 tests/bench/torch_ddp.py [--world 2] [--epochs 5]
           [--batch 64] [--every 235] [--target 0.89] [--seed 1]
           [--limit N] [--test-limit N] [--data DIR]
"""
import argparse, json, os, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# torch_allreduce caps the compute threads and points gloo at loopback
# before it imports torch, and has the free-port helper; torch_cnn has the
# model, its initialisation, the data and the evaluation. Both print "peer
# none" and exit 3 when torch cannot be imported.
import torch_allreduce  # noqa: E402
import torch_cnn  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


def eval_due(before, after, every, per_epoch):
    """Whether a global step that took the batch count from `before` to
    `after` completed a multiple of every or an epoch."""
    for n in range(before + 1, after + 1):
        if (every > 0 and n % every == 0) or n % per_epoch == 0:
            return True
    return False


def shard_accuracy(model, x, y, rank, world):
    """The test set's accuracy, each rank scoring its contiguous share."""
    n = x.shape[0]
    lo, hi = n * rank // world, n * (rank + 1) // world
    _, accuracy = torch_cnn.evaluate(model, x[lo:hi], y[lo:hi])
    counts = torch.tensor([accuracy * (hi - lo), hi - lo], dtype=torch.float64)
    dist.all_reduce(counts)
    return float(counts[0] / counts[1])


def member(rank, a, port):
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    world = a.world
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=world)
    xtr, ytr = torch_cnn.load("train", a.data)
    xte, yte = torch_cnn.load("test", a.data)
    if a.limit:
        xtr, ytr = xtr[:a.limit], ytr[:a.limit]
    if a.test_limit:
        xte, yte = xte[:a.test_limit], yte[:a.test_limit]
    n = xtr.shape[0]
    per_epoch = (n + a.batch - 1) // a.batch
    total = per_epoch * a.epochs
    # The same initial replica everywhere (DDP also broadcasts rank 0's).
    torch.manual_seed(a.seed)
    model = torch_cnn.CNN()
    torch_cnn.keras_init(model)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    order = torch.Generator()
    perms = {}

    def batch(k):
        """Batch number k's indices, across epochs."""
        epoch, i = divmod(k, per_epoch)
        if epoch not in perms:
            perms.clear()
            order.manual_seed(a.seed * 1000 + epoch)
            perms[epoch] = torch.randperm(n, generator=order)
        return perms[epoch][i * a.batch:(i + 1) * a.batch]

    dist.barrier()
    start = time.perf_counter()
    evals, done, updates, samples = [], 0, 0, 0
    while done < total:
        mine = done + rank
        step_examples = sum(batch(k).numel() for k in range(done, min(done + world, total)))
        if mine < total:
            idx = batch(mine)
            out = ddp(xtr[idx])
            loss = F.cross_entropy(out, ytr[idx], reduction="sum") * (world / step_examples)
        else:
            # No batch for this rank in the last step: a zero gradient, so
            # that every rank still joins the step's all-reduce.
            loss = ddp(xtr[:1]).sum() * 0.0
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        updates += 1
        samples += step_examples
        before, done = done, min(done + world, total)
        if eval_due(before, done, a.every, per_epoch) or done == total:
            params_at = time.perf_counter() - start
            accuracy = shard_accuracy(model, xte, yte, rank, world)
            evals.append({"step": done, "params_at_s": params_at, "test_accuracy": accuracy})
    wall = time.perf_counter() - start
    dist.destroy_process_group()
    if rank != 0:
        return
    hit = next((e for e in evals if e["test_accuracy"] >= a.target), None)
    print(json.dumps({
        "torch": torch.__version__, "backend": "gloo", "world": world, "batch": a.batch,
        "epochs": a.epochs, "samples": samples, "wall_s": wall,
        "samples_per_s": samples / wall if wall > 0 else None, "target": a.target,
        "time_to_target_s": hit["params_at_s"] if hit else None,
        "epoch_at_target": hit["step"] / per_epoch if hit else None,
        "final_accuracy": evals[-1]["test_accuracy"], "updates": updates, "evals": evals,
    }), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--every", type=int, default=235)
    ap.add_argument("--target", type=float, default=0.89)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--test-limit", type=int, default=0)
    ap.add_argument("--data", default=torch_cnn.DATA)
    a = ap.parse_args()
    if a.world < 1 or a.epochs < 1 or a.batch < 1 or a.every < 0:
        ap.error("--world, --epochs and --batch must be positive, --every not negative")
    if not dist.is_available() or not dist.is_gloo_available():
        print("peer none: torch %s in %s has no gloo backend" % (torch.__version__,
              sys.executable), flush=True)
        sys.exit(3)
    # spawn: fresh interpreters, as torch_allreduce.py starts its members;
    # it raises if a member fails.
    mp.spawn(member, args=(a, torch_allreduce.free_port()), nprocs=a.world, join=True)


if __name__ == "__main__":
    main()
