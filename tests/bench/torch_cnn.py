#!/usr/bin/python3
"""PyTorch reference for ps-worker's "cnn" model on Fashion-MNIST: the
same recipe as `ps-worker --standalone --model cnn`, for comparing test
accuracy (as distributions over seeds: the two draw different random
numbers) and samples/s on the same machine or GPU. Needs python3-torch;
not part of the test suite.

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
"""
import argparse, gzip, os, struct, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def load_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(split):
    pre = "train" if split == "train" else "t10k"
    x = load_idx(os.path.join(DATA, pre + "-images-idx3-ubyte.gz"))
    y = load_idx(os.path.join(DATA, pre + "-labels-idx1-ubyte.gz"))
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


def keras_init(m):
    for mod in (m.conv, m.fc1, m.fc2):
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", choices=["torch", "keras"], required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    xtr, ytr = [t.to(dev) for t in load("train")]
    xte, yte = [t.to(dev) for t in load("test")]

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
