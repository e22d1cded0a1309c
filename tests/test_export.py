#!/usr/bin/python3
"""Export and predict, end to end, with NumPy and PyTorch as the judges.

A local cluster trains the seed CNN for one epoch of a subset of
Fashion-MNIST into a checkpoint directory (and the run is checked to have
trained every step exactly once, by tests/faults/check_run.py). Then:

- coordinator export writes the checkpoint as safetensors and as npz. The
  safetensors file is parsed by hand (8-byte header length, JSON header,
  np.frombuffer), the npz by numpy.load; both hold every variable of the
  model spec under its name with the shape the spec gives (worked out
  here from the spec in the file's metadata, not taken from the program),
  the same values, and the spec itself.
- PyTorch rebuilds the CNN from the safetensors arrays (Keras's layouts
  turned into PyTorch's: conv kernels HWIO -> OIHW, dense kernels
  transposed, Flatten in NHWC order) and its accuracy on the test images
  the coordinator evaluated equals the coordinator's own evaluation of
  the checkpoint's weights (the "done" record: the evaluator's, which the
  cluster has with --cores 8) to 4 decimals.
- ps-worker predict on the export (CSV) and on the checkpoint directory
  (JSON lines): one well-formed row per test image, probabilities that
  sum to 1, and an argmax accuracy equal to the coordinator's.
- Bad input: no checkpoint, a corrupt and a missing partition file, a
  checkpoint with an embedding table the model does not have (refused,
  naming it; tests/test_export_tables.py exports real tables), an unknown
  format, an unwritable output; weights that lack a variable or
  hold it in another shape. Each exits non-zero with one line naming what
  is wrong (a usage error: that line and the hint to --help), and an
  existing output file is left as it was.

Without PyTorch (Debian's python3-torch; deploy/install-deps.sh) the
NumPy checks still run, and the test then says SKIP and exits 77.
Usage: test_export.py (PS_COORDINATOR, PS_WORKER, PS_SOURCE_ROOT from
meson's environment).
"""

import csv
import gzip
import importlib
import json
import os
import shutil
import struct
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIP: NumPy cannot be imported (apt-get install python3-numpy)")
    sys.exit(77)

COORDINATOR = os.environ["PS_COORDINATOR"]
WORKER = os.environ["PS_WORKER"]
ROOT = os.environ["PS_SOURCE_ROOT"]
DATA = "/usr/share/datasets/fashion-mnist"
TRAIN_LIMIT, TEST_LIMIT = 6000, 2000

sys.path.insert(0, os.path.join(ROOT, "tests", "faults"))
from check_run import check_run  # noqa: E402  (the exactly-once check)
sys.path.insert(0, os.path.join(ROOT, "tests"))
from checks import check, failures, read_safetensors, run  # noqa: E402

def spec_variables(spec):
    """Variable names and shapes of a Sequential image spec, from
    schemas/model.md: Keras's automatic names and layouts."""
    shape = spec["input_shape"]
    h, w, c = shape if len(shape) == 3 else (1, 1, shape[0])
    stems = {"Conv2D": "conv2d", "Dense": "dense", "MaxPool2D": "max_pooling2d",
             "ReLU": "re_lu", "Flatten": "flatten", "Dropout": "dropout"}
    seen, out = {}, []

    def size2(v):
        return (v, v) if isinstance(v, int) else tuple(v)

    def geometry(n, k, s, pad):
        return (n - k) // s + 1 if pad == "valid" else -(-n // s)
    for layer in spec["layers"]:
        t = layer["type"]
        name = layer.get("name")
        if name is None:
            k = seen.get(t, 0)
            name = stems[t] + ("_%d" % k if k else "")
            seen[t] = k + 1
        if t == "Conv2D":
            kh, kw = size2(layer["kernel_size"])
            sh, sw = size2(layer.get("strides", 1))
            pad = layer.get("padding", "valid")
            out.append((name + "/kernel", [kh, kw, c, layer["filters"]]))
            if layer.get("use_bias", True):
                out.append((name + "/bias", [layer["filters"]]))
            h, w, c = geometry(h, kh, sh, pad), geometry(w, kw, sw, pad), layer["filters"]
        elif t == "MaxPool2D":
            ph, pw = size2(layer.get("pool_size", 2))
            sh, sw = size2(layer.get("strides", layer.get("pool_size", 2)))
            pad = layer.get("padding", "valid")
            h, w = geometry(h, ph, sh, pad), geometry(w, pw, sw, pad)
        elif t == "Flatten":
            h, w, c = 1, 1, h * w * c
        elif t == "Dense":
            out.append((name + "/kernel", [h * w * c, layer["units"]]))
            if layer.get("use_bias", True):
                out.append((name + "/bias", [layer["units"]]))
            h, w, c = 1, 1, layer["units"]
    return out


def idx(path):
    with gzip.open(path, "rb") as f:
        blob = f.read()
    rank = blob[3]
    dims = struct.unpack_from(">%dI" % rank, blob, 4)
    return np.frombuffer(blob, np.uint8, offset=4 + 4 * rank).reshape(dims)


def torch_accuracy(torch, t, images, labels):
    """The seed CNN in PyTorch with the exported weights: its accuracy."""
    nn = torch.nn
    conv = nn.Conv2d(1, 32, 3)
    dense, head = nn.Linear(5408, 64), nn.Linear(64, 10)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(t["conv2d/kernel"].copy()).permute(3, 2, 0, 1))
        conv.bias.copy_(torch.from_numpy(t["conv2d/bias"].copy()))
        dense.weight.copy_(torch.from_numpy(t["dense/kernel"].copy()).T)
        dense.bias.copy_(torch.from_numpy(t["dense/bias"].copy()))
        head.weight.copy_(torch.from_numpy(t["dense_1/kernel"].copy()).T)
        head.bias.copy_(torch.from_numpy(t["dense_1/bias"].copy()))
        # The same preprocessing as ps_dataset.c: p / 255.0f in float32.
        x = torch.from_numpy(images.astype(np.float32) / np.float32(255)).unsqueeze(1)
        y = torch.relu(conv(x))
        y = torch.nn.functional.max_pool2d(y, 2)
        # Our Flatten reads NHWC (channels last): permute before flattening.
        y = y.permute(0, 2, 3, 1).reshape(len(images), -1)
        logits = head(torch.relu(dense(y)))
        pred = logits.argmax(1).numpy()
    return float((pred == labels).mean())


def main():
    work = tempfile.mkdtemp(prefix="test_export.")
    try:
        body(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("FAIL: %d check(s): %s" % (len(failures), "; ".join(failures)))
        return 1
    try:
        importlib.import_module("torch")
    except ImportError as e:
        print("SKIP: PyTorch cannot be imported (%s); apt-get install python3-torch "
              "(deploy/install-deps.sh) to rebuild the model from the export" % e)
        return 77
    return 0


def body(work):
    ckpt = os.path.join(work, "ckpt")
    metrics = os.path.join(work, "run.jsonl")
    # --cores 8: on any machine the cluster has an evaluator (coordinator/
    # ps_cores.h), whose evaluation of the final parameters, off the
    # training path, is the one compared below with PyTorch's and with
    # ps-worker predict's of the same weights.
    status, out = run([COORDINATOR, "--local", "--cores", "8", "--epochs", "1",
                       "--limit", str(TRAIN_LIMIT),
                       "--test-limit", str(TEST_LIMIT), "--checkpoint-dir", ckpt,
                       "--metrics", metrics, "--log-dir", os.path.join(work, "logs")])
    check(status == 0, "the cluster trained", "exit %d:\n%s" % (status, out[-3000:]))
    if status != 0:
        return
    bad = check_run([metrics], nservers=2)
    check(not bad, "every step was trained exactly once", "; ".join(bad))
    done = [json.loads(l) for l in open(metrics) if '"done"' in l][-1]
    accuracy = done["test_accuracy"]
    final = [r for r in map(json.loads, open(metrics)) if r["event"] == "eval"][-1]
    check(final["role"] == "evaluator" and final["step"] == done["steps"],
          "the evaluator evaluated the final parameters (step %d)" % done["steps"],
          "the last eval record: %s" % final)
    check(accuracy > 0.5, "the run's test accuracy %.4f is well above chance" % accuracy)

    st, npz = os.path.join(work, "cnn.safetensors"), os.path.join(work, "cnn.npz")
    for fmt, path in (("safetensors", st), ("npz", npz)):
        status, out = run([COORDINATOR, "export", "--checkpoint", ckpt, "--format", fmt,
                           "--out", path])
        check(status == 0 and "exported 6 variables" in out,
              "export --format %s" % fmt, "exit %d: %s" % (status, out))
    left = [f for f in os.listdir(work) if ".tmp" in f]
    check(not left, "no temporary file is left", " ".join(left))

    tensors, meta, order = read_safetensors(st)
    check(all(t.dtype == np.float32 for t in tensors.values()),
          "safetensors: every variable is float32", str({n: t.dtype for n, t in tensors.items()}))
    spec = json.loads(meta["model"])
    with open(os.path.join(ROOT, "schemas", "models", "cnn.json")) as f:
        builtin = json.load(f)
    check(spec["layers"] == builtin["layers"] and spec["input_shape"] == builtin["input_shape"],
          "the safetensors metadata holds the cnn spec", meta.get("model", ""))
    check(meta.get("step") == str(done["steps"]), "the metadata names the step",
          str(meta))
    want = spec_variables(spec)
    check([(n, list(tensors[n].shape)) for n in order] == want,
          "safetensors: every variable of the spec, in order, with its shape",
          "%s vs %s" % ([(n, list(tensors[n].shape)) for n in order], want))
    z = np.load(npz)
    arrays = [f for f in z.files if f != "__metadata__.json"]
    check([(n, list(z[n].shape)) for n in arrays] == want and
          all(z[n].dtype == np.float32 and np.array_equal(z[n], tensors[n]) for n in arrays),
          "npz: the same variables, shapes and values", str(z.files))
    check(json.loads(z["__metadata__.json"].decode()) == meta,
          "npz: the same metadata as __metadata__.json")

    images = idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"))
    labels = idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz"))
    try:
        import torch
        torch.set_num_threads(1)
        acc = torch_accuracy(torch, tensors, images[:TEST_LIMIT], labels[:TEST_LIMIT])
        check(round(acc, 4) == round(accuracy, 4),
              "PyTorch's accuracy of the export %.4f is the coordinator's %.4f"
              % (acc, accuracy))
    except ImportError:
        print("(PyTorch cannot be imported: the model is not rebuilt)")

    # ps-worker predict, on the export and on the checkpoint itself.
    subset = os.path.join(work, "test-images.idx")
    with open(subset, "wb") as f:
        f.write(struct.pack(">I3I", 0x803, TEST_LIMIT, 28, 28))
        f.write(images[:TEST_LIMIT].tobytes())
    pcsv, pjsonl = os.path.join(work, "p.csv"), os.path.join(work, "p.jsonl")
    status, out = run([WORKER, "predict", "--weights", st, "--data", subset, "--out", pcsv,
                       "--batch", "300"])
    check(status == 0, "predict --weights FILE.safetensors --out FILE.csv", out)
    status, out = run([WORKER, "predict", "--weights", ckpt, "--data", subset, "--out", pjsonl])
    check(status == 0, "predict --weights CHECKPOINT_DIR --out FILE.jsonl", out)
    if status == 0:
        with open(pcsv) as f:
            rows = list(csv.reader(f))
        header = ["index", "predicted"] + ["p%d" % k for k in range(10)]
        check(rows[0] == header and len(rows) == TEST_LIMIT + 1
              and all(len(r) == 12 and int(r[0]) == i for i, r in enumerate(rows[1:])),
              "the CSV has its header and one row of 12 fields per image", str(rows[:2]))
        probs = np.array([[float(v) for v in r[2:]] for r in rows[1:]])
        pred = np.array([int(r[1]) for r in rows[1:]])
        check(np.allclose(probs.sum(1), 1, atol=1e-5) and (probs.argmax(1) == pred).all(),
              "each row's probabilities sum to 1 and its prediction is their argmax")
        acc = float((pred == labels[:TEST_LIMIT]).mean())
        check(round(acc, 4) == round(accuracy, 4),
              "predict's accuracy %.4f is the coordinator's %.4f" % (acc, accuracy))
        with open(pjsonl) as f:
            lines = [json.loads(l) for l in f]
        check(len(lines) == TEST_LIMIT
              and all(l["index"] == i and l["predicted"] == pred[i]
                      and len(l["probabilities"]) == 10 for i, l in enumerate(lines)),
              "the JSON lines: one object per image, the same predictions as from the export")

    # Bad input: one line naming what is wrong, a non-zero exit, and an
    # existing output file untouched.
    target = os.path.join(work, "keep.safetensors")
    with open(target, "w") as f:
        f.write("before")
    newest = sorted(d for d in os.listdir(ckpt) if d.startswith("ckpt-"))[-1]
    broken = os.path.join(work, "broken")
    shutil.copytree(os.path.join(ckpt, newest), broken)
    part = [f for f in os.listdir(broken) if f.endswith(".snap")][0]

    def refused(what, args, words, status_want=None):
        status, out = run(args, 60)
        lines = [l for l in out.splitlines() if l.strip()]
        # A usage error (exit 2) is the line, then the hint to --help.
        hint = "Try `coordinator export --help' or `coordinator export --usage' for more " \
            "information."
        if status_want == 2 and len(lines) == 2 and lines[1] == hint:
            lines = lines[:1]
        ok = status != 0 and status < 124 and (status_want is None or status == status_want) \
            and len(lines) == 1 and all(w in lines[0] for w in words)
        check(ok, "%s is refused (exit %d)" % (what, status), out)
        with open(target) as f:
            check(f.read() == "before", "%s leaves the output as it was" % what)

    export = [COORDINATOR, "export", "--format", "safetensors", "--out", target, "--checkpoint"]
    empty = os.path.join(work, "empty")
    os.mkdir(empty)
    refused("a directory without a checkpoint", export + [empty], [empty, "no MANIFEST.json"])
    with open(os.path.join(broken, part), "r+b") as f:
        f.seek(400)
        b = f.read(1)
        f.seek(400)
        f.write(bytes([b[0] ^ 0xFF]))
    refused("a corrupt partition file", export + [broken], [part, "checksum"])
    os.remove(os.path.join(broken, part))
    refused("a missing partition file", export + [broken], [part])
    # A checkpoint with a table the model does not have (the CNN has none).
    tables = os.path.join(work, "tables")
    shutil.copytree(os.path.join(ckpt, newest), tables)
    with open(os.path.join(tables, "MANIFEST.json")) as f:
        manifest = json.load(f)
    manifest["tables"] = {"shards": 2, "specs": [{"name": "embedding/f0"}], "files": []}
    with open(os.path.join(tables, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f)
    refused("a checkpoint with an embedding table the model lacks", export + [tables],
            ["embedding/f0", "does not have"])
    refused("an unknown format", [COORDINATOR, "export", "--checkpoint", ckpt, "--format",
                                  "onnx", "--out", target], ["onnx", "safetensors or npz"], 2)
    status, out = run([COORDINATOR, "export", "--checkpoint", ckpt, "--format", "npz",
                       "--out", os.path.join(target, "x.npz")], 60)
    check(status == 1 and len(out.strip().splitlines()) == 1 and "x.npz" in out,
          "an output that cannot be written is refused, naming it", out)

    # Weights that do not fit: a variable missing, a variable of another
    # shape (a spec with a narrower hidden layer).
    t = dict(tensors)
    del t["dense/bias"]
    missing = os.path.join(work, "missing.safetensors")
    write_safetensors(missing, t, meta)
    status, out = run([WORKER, "predict", "--weights", missing, "--data", subset], 60)
    check(status == 1 and "dense/bias" in out and "[64]" in out and "missing" in out,
          "weights without a variable are refused, naming it and its shape", out)
    narrow = dict(builtin)
    narrow["layers"] = [dict(l) for l in builtin["layers"]]
    narrow["layers"][3]["units"] = 32
    spec_path = os.path.join(work, "narrow.json")
    with open(spec_path, "w") as f:
        json.dump(narrow, f)
    status, out = run([WORKER, "predict", "--model", spec_path, "--weights", st, "--data",
                       subset], 60)
    check(status == 1 and "dense/kernel" in out and "[5408,64]" in out and "[5408,32]" in out,
          "weights of another shape are refused, naming the variable and both shapes", out)


def write_safetensors(path, tensors, meta):
    """A safetensors file written here, independently of the exporter."""
    header, blobs, at = {"__metadata__": meta}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":
    sys.exit(main())
