#!/usr/bin/python3
"""PyTorch's torch.distributed.rpc parameter server: the peer of
`coordinator --local --model mlp --mode async` in tests/bench/bench_rpc.py.
Needs python3-torch; not part of the test suite.

One parameter-server process ("ps", rank 0) and --trainers trainer
processes (default 2) on this host join an RPC group (the TensorPipe
backend, init_method tcp://127.0.0.1:PORT on a free port), as in PyTorch's
tutorial "Implementing a Parameter Server Using Distributed RPC
Framework": the server holds ps-worker's "mlp" (schemas/models/mlp.json:
Flatten -> Dense(128, relu) -> Dense(10), torch_cnn.py's MLP with its keras
initialisation) and its Adam optimizer (lr 1e-3, eps 1e-7); each trainer,
on its own and without waiting for the others (async), in every step
fetches the parameters by rpc_sync, computes the gradient of one batch's
mean cross-entropy, and sends it by rpc_sync; the server applies Adam to it
under a lock, one gradient at a time.

The data: Fashion-MNIST (--limit and --test-limit take the first
examples), an epoch being the training set in a fresh shuffled order cut
into batches of --batch, the batches handed out in turn, trainer t taking
batches t, t + T, t + 2T, ... of every epoch (the cluster's workers ask for
the next batch instead: the same batches, in a different order).

One compute thread per process, as the cluster's workers and servers have:
OMP and OpenBLAS are capped before torch is imported (torch_allreduce.py
does it), and torch.set_num_threads(1); the RPC agent serves requests on a
pool of --rpc-threads threads (default: one per trainer and one more) and
TensorPipe moves bytes on its own threads, as ZeroMQ's I/O threads are the
cluster's.

The server prints one JSON line at the end: torch's version, trainers,
batch, epochs, steps, samples, train_s (from the first trainer's first
step to the last trainer's last), samples_per_s (samples / train_s) and
final_accuracy (the test set scored by the server once training is over,
outside the clock). When torch cannot be imported, or has no RPC, it prints
"peer none: REASON" and exits 3.

Usage: /usr/bin/python3 tests/bench/torch_rpc_ps.py [--trainers 2] [--epochs 2]
           [--batch 64] [--seed 1] [--limit N] [--test-limit N] [--data DIR]
           [--rpc-threads N]
"""
import argparse, json, os, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TP_SOCKET_IFNAME", "lo")
# torch_allreduce caps the compute threads before it imports torch, and has
# the free-port helper; torch_cnn has the MLP, its initialisation, the data
# and the evaluation. Both print "peer none" and exit 3 without torch.
import torch_allreduce  # noqa: E402
import torch_cnn  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
try:
    import torch.distributed.rpc as rpc
except ImportError as e:
    print("peer none: torch %s in %s has no torch.distributed.rpc (%s)"
          % (torch.__version__, sys.executable, e), flush=True)
    sys.exit(3)
import torch.nn.functional as F  # noqa: E402

PS = "ps"

# The server's state, in the server process only (the rpc functions below
# run there).
_server = None


class Server:
    """The model and its optimizer behind a lock: one gradient applied at
    a time, and a fetch never sees a half-applied update."""

    def __init__(self, seed):
        torch.manual_seed(seed)
        self.model = torch_cnn.MLP()
        torch_cnn.keras_init(self.model)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.Adam(self.params, lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
        self.lock = threading.Lock()
        self.steps = 0
        self.spans = []         # each trainer's (first step's start, last step's end, samples)
        self.finished = threading.Condition(self.lock)


def fetch():
    """rpc: the current parameters, copied under the lock (the reply is
    serialised after the lock is released, while updates go on)."""
    with _server.lock:
        return [p.detach().clone() for p in _server.params]


def push(grads):
    """rpc: apply one gradient with Adam."""
    with _server.lock:
        for p, g in zip(_server.params, grads):
            p.grad = g
        _server.opt.step()
        _server.steps += 1


def report(start, end, samples):
    """rpc: a trainer is done; its span on the monotonic clock (one clock
    for every process of this host) and the examples it trained."""
    with _server.finished:
        _server.spans.append((start, end, samples))
        _server.finished.notify_all()


def train(rank, a):
    """Trainer rank - 1 of a.trainers: its share of every epoch's batches."""
    t = rank - 1
    xtr, ytr = torch_cnn.load("train", a.data)
    if a.limit:
        xtr, ytr = xtr[:a.limit], ytr[:a.limit]
    n = xtr.shape[0]
    model = torch_cnn.MLP()
    params = list(model.parameters())
    order = torch.Generator()
    start, samples = None, 0
    for epoch in range(a.epochs):
        order.manual_seed(a.seed * 1000 + epoch)
        perm = torch.randperm(n, generator=order)
        for i in range(t * a.batch, n, a.trainers * a.batch):
            if start is None:
                start = time.monotonic()
            idx = perm[i:i + a.batch]
            with torch.no_grad():
                for p, v in zip(params, rpc.rpc_sync(PS, fetch)):
                    p.copy_(v)
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            grads = torch.autograd.grad(loss, params)
            rpc.rpc_sync(PS, push, args=(list(grads),))
            samples += idx.numel()
    rpc.rpc_sync(PS, report, args=(start or time.monotonic(), time.monotonic(), samples))


def member(rank, a, port):
    global _server
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method="tcp://127.0.0.1:%d" % port, num_worker_threads=a.rpc_threads,
        rpc_timeout=600)
    if rank == 0:
        # Before init_rpc: a trainer may call as soon as the group is up.
        _server = Server(a.seed)
        rpc.init_rpc(PS, rank=0, world_size=a.trainers + 1, rpc_backend_options=options)
        with _server.finished:
            while len(_server.spans) < a.trainers:
                _server.finished.wait()
        spans = list(_server.spans)
        rpc.shutdown()
        xte, yte = torch_cnn.load("test", a.data)
        if a.test_limit:
            xte, yte = xte[:a.test_limit], yte[:a.test_limit]
        _, accuracy = torch_cnn.evaluate(_server.model, xte, yte)
        samples = sum(s for _, _, s in spans)
        train_s = max(e for _, e, _ in spans) - min(s for s, _, _ in spans)
        print(json.dumps({
            "torch": torch.__version__, "backend": "tensorpipe", "trainers": a.trainers,
            "batch": a.batch, "epochs": a.epochs, "steps": _server.steps, "samples": samples,
            "train_s": train_s, "samples_per_s": samples / train_s if train_s > 0 else None,
            "final_accuracy": accuracy,
        }), flush=True)
        return
    rpc.init_rpc("trainer%d" % (rank - 1), rank=rank, world_size=a.trainers + 1,
                      rpc_backend_options=options)
    train(rank, a)
    rpc.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trainers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--test-limit", type=int, default=0)
    ap.add_argument("--data", default=torch_cnn.DATA)
    ap.add_argument("--rpc-threads", type=int, default=0,
                    help="the RPC agent's threads (default: trainers + 1)")
    a = ap.parse_args()
    if a.trainers < 1 or a.epochs < 1 or a.batch < 1 or a.rpc_threads < 0:
        ap.error("--trainers, --epochs and --batch must be positive")
    a.rpc_threads = a.rpc_threads or a.trainers + 1
    if not dist.is_available() or not rpc.is_available():
        print("peer none: torch %s in %s has no torch.distributed.rpc"
              % (torch.__version__, sys.executable), flush=True)
        sys.exit(3)
    mp.spawn(member, args=(a, torch_allreduce.free_port()), nprocs=a.trainers + 1, join=True)


if __name__ == "__main__":
    main()
