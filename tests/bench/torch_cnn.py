#!/usr/bin/python3
"""PyTorch reference for ps-worker's "cnn" model on Fashion-MNIST: the
same recipe as `ps-worker --standalone --model cnn`, for comparing test
accuracy (as distributions over seeds: the two draw different random
numbers) and samples/s on the same machine or GPU. Needs python3-torch;
not part of the test suite.

With --bench it is bench_cnn's peer: instead of training to accuracy it
times training steps and evaluation the way bench_cnn times ps-worker's
engine (the same examples, batch, threads and repetitions; see
tests/bench/bench_cnn.c), and prints one machine-readable line per
measurement:

  peer train MODEL THREADS BATCH MEDIAN MIN MAX     (samples/s)
  peer eval MODEL THREADS BATCH MEDIAN MIN MAX

after a line "peer torch VERSION". When torch cannot be imported it prints
"peer none: REASON" and exits 3.

Model: Conv2D(32, 3x3, valid, relu) -> MaxPool(2) -> Flatten (NHWC order)
       -> Dense(64, relu) -> Dense(10); softmax cross-entropy; Adam lr 1e-3,
       batch 64 (last batch of an epoch: 32), reshuffled every epoch,
       pixels / 255, no other normalisation.

Variants:
  torch : PyTorch default init (kaiming_uniform a=sqrt(5), uniform biases),
          Adam eps 1e-8  -- what a plain PyTorch user gets
  keras : xavier_uniform_ kernels (= glorot_uniform), zero biases,
          Adam eps 1e-7 (Keras default)

Usage: /usr/bin/python3 tests/bench/torch_cnn.py --variant keras --seed 1
           [--epochs 3] [--batch 64] [--threads 2] [--device cpu|cuda]
           [--data DIR]
       /usr/bin/python3 tests/bench/torch_cnn.py --bench --model cnn|mlp
           [--threads 1,2] [--eval-threads 2] [--batch 64] [--eval-batch 500]
           [--limit 12800] [--reps 5] [--rep-seconds 1.0] [--warmup 0.3]
           [--data DIR] [--device cpu|cuda] [--host-data]

On a GPU (--device cuda) the --bench figures are bench_cnn --device gpu's
peers at the same batch (64 and 512 in the README's GPU measurements).
"""
import argparse, gzip, os, struct, sys, time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:
    # bench_cnn reads this line as the reason it has no peer figure.
    print("peer none: %s cannot import numpy and torch (%s); install python3-torch"
          % (sys.executable, e), flush=True)
    sys.exit(3)

DATA = "/usr/share/datasets/fashion-mnist"


def load_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split, data=DATA):
    pre = "train" if split == "train" else "t10k"
    x = load_idx(os.path.join(data, pre + "-images-idx3-ubyte.gz"))
    y = load_idx(os.path.join(data, pre + "-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)  # N,1,28,28
    y = torch.from_numpy(y.astype(np.int64))
    return x, y


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 32, 3)            # valid padding
        self.fc1 = nn.Linear(13 * 13 * 32, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv(x)), 2)    # N,32,13,13
        x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)  # NHWC flatten (Keras)
        x = F.relu(self.fc1(x))
        return self.fc2(x)


class MLP(nn.Module):
    """ps-worker's "mlp": Flatten -> Dense(128, relu) -> Dense(10)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(28 * 28, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.reshape(x.shape[0], -1))))


def keras_init(m):
    for mod in m.children():
        # xavier_uniform_ on a conv weight [out,in,kh,kw] uses
        # fan_in = in*kh*kw, fan_out = out*kh*kw -- same as Keras glorot_uniform.
        nn.init.xavier_uniform_(mod.weight)
        nn.init.zeros_(mod.bias)


@torch.no_grad()
def evaluate(model, x, y, bs=1000):
    model.eval()
    loss_sum, correct = 0.0, 0
    for i in range(0, x.shape[0], bs):
        out = model(x[i:i + bs])
        loss_sum += F.cross_entropy(out, y[i:i + bs], reduction="sum").item()
        correct += (out.argmax(1) == y[i:i + bs]).sum().item()
    model.train()
    return loss_sum / x.shape[0], correct / x.shape[0]


def timed_reps(step, reps, rep_s, warmup_s):
    """Median, min and max over reps of examples / busy seconds of step(),
    which runs one batch and returns its examples, after warmup_s of busy
    time (at least 3 steps) -- bench_cnn's s_measure_train."""
    busy, warm = 0.0, 0
    while busy < warmup_s or warm < 3:
        t0 = time.perf_counter()
        step()
        busy += time.perf_counter() - t0
        warm += 1
    rates = []
    for _ in range(reps):
        busy, examples = 0.0, 0
        while busy < rep_s or examples == 0:
            t0 = time.perf_counter()
            examples += step()
            busy += time.perf_counter() - t0
        rates.append(examples / busy)
    rates.sort()
    n = len(rates)
    median = rates[n // 2] if n % 2 else (rates[n // 2 - 1] + rates[n // 2]) / 2
    return median, rates[0], rates[-1]


def bench(a):
    """bench_cnn's measurements, on PyTorch: training steps (forward,
    backward, Adam with Keras's defaults) on the first --limit training
    examples in a fresh shuffled order each epoch, then forward-only
    evaluation over the test set in file order. With --device cuda the
    data, model and optimizer live on the GPU and every step ends with a
    synchronisation, so a step's time is its whole time on the device."""
    print("peer torch %s" % torch.__version__, flush=True)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    # --host-data keeps the examples in host memory and copies each batch
    # to the device inside the timed step, as ps-worker's engine does;
    # otherwise the whole data set is on the device before timing starts.
    home = torch.device("cpu") if a.host_data else dev
    xtr, ytr = load("train", a.data)
    xtr, ytr = xtr[:a.limit].to(home), ytr[:a.limit].to(home)
    xte, yte = [t.to(home) for t in load("test", a.data)]
    threads = [int(t) for t in a.threads.split(",")]
    for t in threads:
        torch.set_num_threads(t)
        model = CNN() if a.model == "cnn" else MLP()
        keras_init(model)
        model.to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
        order = {"perm": torch.randperm(xtr.shape[0], device=home), "next": 0}

        def train_step():
            if order["next"] >= xtr.shape[0]:
                order["perm"] = torch.randperm(xtr.shape[0], device=home)
                order["next"] = 0
            idx = order["perm"][order["next"]:order["next"] + a.batch]
            order["next"] += a.batch
            loss = F.cross_entropy(model(xtr[idx].to(dev)), ytr[idx].to(dev))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sync()
            return idx.numel()

        print("peer train %s %d %d %.1f %.1f %.1f" % ((a.model, t, a.batch)
              + timed_reps(train_step, a.reps, a.rep_seconds, a.warmup)), flush=True)
        if t != a.eval_threads:
            continue
        at = {"next": 0}

        @torch.no_grad()
        def eval_step():
            if at["next"] >= xte.shape[0]:
                at["next"] = 0
            i = at["next"]
            out = model(xte[i:i + a.eval_batch].to(dev))
            (out.argmax(1) == yte[i:i + a.eval_batch].to(dev)).sum().item()
            at["next"] += out.shape[0]
            return out.shape[0]

        model.eval()
        print("peer eval %s %d %d %.1f %.1f %.1f" % ((a.model, t, a.eval_batch)
              + timed_reps(eval_step, a.reps, a.rep_seconds, a.warmup)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=["torch", "keras"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", default="2")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--bench", action="store_true",
                    help="time steps as bench_cnn does and print 'peer' lines")
    ap.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    ap.add_argument("--eval-threads", type=int, default=2)
    ap.add_argument("--eval-batch", type=int, default=500)
    ap.add_argument("--limit", type=int, default=12800)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rep-seconds", type=float, default=1.0)
    ap.add_argument("--warmup", type=float, default=0.3)
    ap.add_argument("--host-data", action="store_true",
                    help="--bench on a GPU: copy each batch from host memory in the step")
    a = ap.parse_args()
    if a.bench:
        bench(a)
        return
    if a.variant is None:
        ap.error("--variant is needed unless --bench")

    torch.set_num_threads(int(a.threads))
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    xtr, ytr = [t.to(dev) for t in load("train", a.data)]
    xte, yte = [t.to(dev) for t in load("test", a.data)]

    model = CNN().to(dev)
    if a.variant == "keras":
        keras_init(model)
    eps = 1e-7 if a.variant == "keras" else 1e-8
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=eps)

    n = xtr.shape[0]
    for ep in range(1, a.epochs + 1):
        t0 = time.time()
        perm = torch.randperm(n, device=dev)
        tot, cnt = 0.0, 0
        for i in range(0, n, a.batch):          # last batch: 60000 % 64 = 32
            idx = perm[i:i + a.batch]
            out = model(xtr[idx])
            loss = F.cross_entropy(out, ytr[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            tot += loss.detach() * idx.numel()
            cnt += idx.numel()
        tot = tot.item()                        # synchronises a GPU
        ttrain = time.time() - t0
        tl, ta = evaluate(model, xte, yte)
        print(f"variant {a.variant} seed {a.seed} epoch {ep}/{a.epochs}: "
              f"train loss {tot / cnt:.4f}, test loss {tl:.4f}, "
              f"test accuracy {ta:.4f}, {cnt / ttrain:.0f} samples/s "
              f"(train {ttrain:.1f} s, {a.device})", flush=True)


if __name__ == "__main__":
    main()
