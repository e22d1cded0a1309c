#!/usr/bin/env python3
"""Writes small data sets of known linear structure, for the regression tests.

Each example has F features drawn uniformly from [-1, 1]. A regression
set's targets are y_j = sum_i W[i][j] x_i + B[j] + noise, the noise
Gaussian of standard deviation --noise, so that a linear model's test
mean squared error can go no lower than about noise^2 and should come
close to it. A binary set's label is 1 when W[.][0] . x + B[0] + noise > 0:
the noise makes the classes overlap, so that its AUC is below 1 and a
check of it against an independent computation means something.

Written with the standard library only (no NumPy):
  DIR/NAME.csv          header x0, ..., the target column "y" in the middle
                        (the first target, or the label); one line an example
  DIR/NAME-x.npy        float32 [N, F], the same features
  DIR/NAME-y.npy        the targets: float64 [N, K] (--outputs K > 1), else
                        float32 [N]; or int64 [N] labels with --binary
  DIR/coefficients.json {"W": [[...] per feature], "B": [...]}

Usage: gen_regression.py --out DIR [--prefix NAME] [--count N] [--features F]
                         [--outputs K] [--noise S] [--seed N] [--binary]
"""

import argparse
import json
import os
import random
import struct


def npy_bytes(descr, shape, values, fmt):
    """A .npy file (format 1.0) of the values, packed with struct format fmt."""
    shape_text = "(%s)" % (", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else ""))
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    # The data starts at a multiple of 64 bytes, the header ending in \n.
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    data = struct.pack("<%d%s" % (len(values), fmt), *values)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--prefix", default="train")
    ap.add_argument("--count", type=int, default=512)
    ap.add_argument("--features", type=int, default=4)
    ap.add_argument("--outputs", type=int, default=1)
    ap.add_argument("--noise", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    # The coefficients are the same for every prefix (seeded apart from the
    # examples), so that a training and a test set share them.
    coef = random.Random(12345)
    W = [[round(coef.uniform(-3, 3), 3) for _ in range(args.outputs)]
         for _ in range(args.features)]
    B = [round(coef.uniform(-1, 1), 3) for _ in range(args.outputs)]
    rng = random.Random(args.seed)
    xs, ys = [], []
    for _ in range(args.count):
        x = [rng.uniform(-1, 1) for _ in range(args.features)]
        y = [sum(W[i][j] * x[i] for i in range(args.features)) + B[j] + rng.gauss(0, args.noise)
             for j in range(args.outputs)]
        xs.append(x)
        ys.append([1 if y[0] > 0 else 0] if args.binary else y)

    base = os.path.join(args.out, args.prefix)
    middle = args.features // 2
    names = ["x%d" % i for i in range(args.features)]
    names.insert(middle, "y")
    with open(base + ".csv", "w") as f:
        f.write(",".join(names) + "\n")
        for x, y in zip(xs, ys):
            cells = ["%.9g" % v for v in x]
            cells.insert(middle, "%d" % y[0] if args.binary else "%.9g" % y[0])
            f.write(",".join(cells) + "\n")
    flat = [v for x in xs for v in x]
    with open(base + "-x.npy", "wb") as f:
        f.write(npy_bytes("<f4", (args.count, args.features), flat, "f"))
    with open(base + "-y.npy", "wb") as f:
        if args.binary:
            f.write(npy_bytes("<i8", (args.count,), [y[0] for y in ys], "q"))
        elif args.outputs > 1:
            f.write(npy_bytes("<f8", (args.count, args.outputs), [v for y in ys for v in y], "d"))
        else:
            f.write(npy_bytes("<f4", (args.count,), [y[0] for y in ys], "f"))
    with open(os.path.join(args.out, "coefficients.json"), "w") as f:
        json.dump({"W": W, "B": B}, f)


if __name__ == "__main__":
    main()
