#!/usr/bin/env python3
"""Writes a small image data set as IDX or .npy files, for the tests of own data.

Each image is H x W pixels of C channels (IDX [N, H, W, C], or [N, H, W]
with one channel) on a dim noisy background, with one bright square in
one quadrant. With one channel, class k's square is in quadrant k % 4;
with 3, it is in quadrant (k // 3) % 4 and lights channel k % 3 only, so
that classes 0, 1 and 2 differ by their colour alone. A small
convolutional model learns the classes in a few epochs.

--format idx (the default) writes DIR/NAME-images.idx.gz and
DIR/NAME-labels.idx.gz, gzipped IDX with the standard library only (the
labels [N] bytes). --format npy-u8 and npy-f32 write DIR/NAME-images.npy
(uint8, or float32 scaled to [0, 1]) and DIR/NAME-labels.npy (int64) with
NumPy's own numpy.save; --flat makes the features [N, H * W * C].
--format csv writes DIR/NAME.csv.gz: a header row (p0, p1, ... and the
label column "class" in the middle), then one line per image of its
values scaled to [0, 1] and its class, with the standard library only.

Usage: gen_images.py --out DIR [--count N] [--size S] [--channels C]
                     [--classes K] [--seed N] [--prefix NAME]
                     [--format idx|npy-u8|npy-f32|csv] [--flat]
"""

import argparse
import gzip
import os
import random
import struct


def idx_bytes(dims, data):
    """An unsigned-byte IDX file: magic 0 0 8 rank, big-endian dims, data."""
    return struct.pack(">BBBB", 0, 0, 8, len(dims)) + \
        b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


def image(label, size, channels, rng):
    """The pixels of one image of class label, row-major HWC."""
    half = size // 2
    quadrant = label % 4 if channels == 1 else (label // 3) % 4
    top = half if quadrant >= 2 else 0
    left = half if quadrant % 2 else 0
    pixels = []
    for y in range(size):
        for x in range(size):
            inside = top <= y < top + half and left <= x < left + half
            for c in range(channels):
                on = inside and (channels == 1 or c == label % 3)
                pixels.append(rng.randint(190, 255) if on else rng.randint(0, 60))
    return pixels


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=512)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--prefix", default="train")
    parser.add_argument("--format", choices=["idx", "npy-u8", "npy-f32", "csv"],
                        default="idx")
    parser.add_argument("--flat", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    labels = [i % args.classes for i in range(args.count)]
    rng.shuffle(labels)
    pixels = []
    for label in labels:
        pixels += image(label, args.size, args.channels, rng)
    dims = [args.count, args.size, args.size]
    if args.channels != 1:
        dims.append(args.channels)
    os.makedirs(args.out, exist_ok=True)
    if args.format == "csv":
        size = len(pixels) // args.count
        middle = size // 2
        names = ["p%d" % i for i in range(size)]
        lines = [",".join(names[:middle] + ["class"] + names[middle:])]
        for i, label in enumerate(labels):
            values = ["%.4f" % (p / 255) for p in pixels[i * size:(i + 1) * size]]
            lines.append(",".join(values[:middle] + [str(label)] + values[middle:]))
        with gzip.open(os.path.join(args.out, args.prefix + ".csv.gz"), "wt") as f:
            f.write("\n".join(lines) + "\n")
        return
    if args.format != "idx":
        import numpy
        images = numpy.array(pixels, dtype=numpy.uint8).reshape(dims)
        if args.flat:
            images = images.reshape(args.count, -1)
        if args.format == "npy-f32":
            images = images.astype(numpy.float32) / numpy.float32(255)
        numpy.save(os.path.join(args.out, args.prefix + "-images.npy"), images)
        numpy.save(os.path.join(args.out, args.prefix + "-labels.npy"),
                   numpy.array(labels, dtype=numpy.int64))
        return
    for name, content in (("images", idx_bytes(dims, pixels)),
                          ("labels", idx_bytes([args.count], labels))):
        with gzip.open(os.path.join(args.out, "%s-%s.idx.gz" % (args.prefix, name)), "wb") as f:
            f.write(content)


if __name__ == "__main__":
    main()
