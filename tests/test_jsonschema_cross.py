#!/usr/bin/env python3
"""The configuration schemas against a second, independent validator.

schemas/job.schema.json and schemas/model.schema.json are checked by
ps-cluster's own validator (common/base/ps_jsonschema); users check their
files with any JSON Schema tool. This test makes sure the two agree:

1. both schemas are valid draft 2020-12 schemas by Debian's
   python3-jsonschema (Draft202012Validator.check_schema);
2. every file under schemas/jobs/ and schemas/models/, deploy's job file,
   and every JSON example of README.md, schemas/job.md and schemas/model.md
   is valid by both validators;
3. a set of good and bad documents, made by changing one key of a valid
   document at a time, gets the same verdict from both, and every bad one
   is refused by ps_jsonschema with the JSON pointer python3-jsonschema
   reports.

python3-jsonschema is installed by deploy/install-deps.sh, so its absence
is a failure with its reason, not a skip.

Usage: test_jsonschema_cross.py SOURCE_ROOT JSONSCHEMA_CHECK
"""

import copy
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
except ImportError as e:
    print("FAIL: python3-jsonschema is not installed (%s); deploy/install-deps.sh "
          "installs it" % e)
    sys.exit(1)

I64 = 2**63 - 1


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def json_blocks(path):
    """The ```json blocks of a Markdown file, parsed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [json.loads(b) for b in re.findall(r"```json\n(.*?)```", text, re.S)]


def c_verdicts(tool, schema_path, docs):
    """ps_jsonschema's verdict on each document: None (valid) or its message."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, doc in enumerate(docs):
            p = os.path.join(tmp, "%d.json" % i)
            with open(p, "w", encoding="utf-8") as f:
                json.dump(doc, f)
            paths.append(p)
        out = subprocess.run([tool, schema_path] + paths, capture_output=True, text=True,
                             check=False)
        if out.returncode != 0:
            raise SystemExit("FAIL: %s %s: exit %d: %s" % (tool, schema_path, out.returncode,
                                                          out.stderr.strip()))
        lines = out.stdout.splitlines()
        assert len(lines) == len(docs), out.stdout
        return [None if line == "valid" else line[len("invalid: "):] for line in lines]


def pointer(path):
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def variants(doc, changes):
    """doc with each (path, value) change applied alone; value DELETE removes."""
    out = []
    for path, value in changes:
        d = copy.deepcopy(doc)
        node = d
        for key in path[:-1]:
            node = node[key]
        if value is DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        out.append(("%s = %s" % (pointer(path), json.dumps(value) if value is not DELETE
                                 else "(removed)"), d))
    return out


DELETE = object()

JOB_CHANGES = [
    (["epochs"], 3), (["epochs"], 0), (["epochs"], 3.0), (["epochs"], 3.5), (["epochs"], "3"),
    (["epochs"], 2147483648), (["steps"], I64), (["steps"], -1), (["seed"], 0),
    (["batch_size"], 65536), (["batch_size"], 65537), (["batch_size"], True),
    (["model"], ""), (["model"], "x" * 1023), (["model"], "x" * 1024), (["model"], "é" * 1023),
    (["model"], None), (["mode"], "mirrored"), (["mode"], "sync"), (["device"], "tpu"),
    (["frob"], 1), (["optimizer", "lr"], 0), (["optimizer", "lr"], 1e-9),
    (["optimizer", "lrate"], 1), (["optimizer", "kind"], "rmsprop"),
    (["optimizer", "kind"], "sgd"), (["optimizer", "momentum"], 1),
    (["optimizer", "momentum"], 0.99), (["optimizer", "nesterov"], 1),
    (["optimizer", "beta2"], 0.999), (["optimizer", "clip_norm"], -0.5),
    (["optimizer"], 3), (["optimizer"], {}),
    (["lr_schedule", "kind"], "piecewise"), (["lr_schedule", "alpha"], 1.5),
    (["lr_schedule", "boundaries"], [0]), (["lr_schedule", "boundaries"], list(range(1, 18))),
    (["lr_schedule", "values"], [0.1, "x"]),
    (["partitioner"], {"kind": "fixed", "num_shards": 0}),
    (["partitioner"], {"kind": "fixed", "num_shards": 2}),
    (["partitioner"], {"kind": "fixed"}),
    (["partitioner"], {"num_shards": 0}),
    (["partitioner"], {"kind": "min_size", "max_shards": 0}),
    (["partitioner"], {"kind": "max_size", "max_shard_bytes": 0}),
    (["partitioner"], {"kind": "max_size", "max_shard_bytes": 4096, "max_shards": 0}),
    (["partitioner"], {"kind": "even"}),
    (["checkpoint", "keep"], 0), (["checkpoint", "every_seconds"], 31536001),
    (["heartbeat", "interval_ms"], 9), (["heartbeat", "kind"], "fast"),
    (["log_seconds"], 0), (["overlap"], "yes"), (["nonfinite_retries"], 101),
    (["step_retries"], 1000001), (["step_retries"], -1),
]

MODEL_CHANGES = [
    (["name"], 7), (["input_shape"], [28, 28]), (["input_shape"], [784]),
    (["input_shape"], [28, 28, 1, 1]), (["input_shape"], [0, 28, 1]),
    (["input_shape"], [28.0, 28, 1]), (["input_shape"], DELETE), (["layers"], []),
    (["layers"], DELETE), (["layer"], []), (["layers", 0], 3), (["layers", 0], {"units": 2}),
    (["layers", 0, "type"], "Conv3D"), (["layers", 0, "type"], 5),
    (["layers", 0, "filters"], 0), (["layers", 0, "filters"], 65537),
    (["layers", 0, "filter"], 2), (["layers", 0, "filters"], DELETE),
    (["layers", 0, "kernel_size"], [3]), (["layers", 0, "kernel_size"], [3, 3]),
    (["layers", 0, "kernel_size"], [3, 0]), (["layers", 0, "kernel_size"], 65),
    (["layers", 0, "strides"], [1, 2]), (["layers", 0, "padding"], "full"),
    (["layers", 0, "activation"], "tanh"), (["layers", 0, "use_bias"], 1),
    (["layers", 0, "name"], "a/b"), (["layers", 0, "name"], ""), (["layers", 0, "name"], "x" * 112),
    (["layers", 0, "name"], "x" * 113), (["layers", 0, "units"], 3),
    (["layers", 1], {"type": "MaxPool2D", "strides": None}),
    (["layers", 1], {"type": "MaxPool2D", "pool_size": [2, 3], "strides": 1}),
    (["layers", 1], {"type": "Dropout", "rate": 1}), (["layers", 1], {"type": "Dropout"}),
    (["layers", 1], {"type": "Dropout", "rate": 0.5}), (["layers", 1], {"type": "ReLU", "x": 1}),
]

# The click-through-rate parts, changed one at a time in dlrm.json.
CTR_CHANGES = [
    (["inputs"], DELETE), (["inputs", "fields"], 0), (["inputs", "fields"], 257),
    (["inputs", "fields"], DELETE), (["inputs", "dense"], -1), (["inputs", "sparse"], 1),
    (["optimizer", "kind"], "ftrl"), (["optimizer", "lr"], 0), (["optimizer"], {}),
    (["input_shape"], [4]), (["layers", 0, "dim"], 0), (["layers", 0, "dim"], 4097),
    (["layers", 0, "dim"], DELETE), (["layers", 0, "fields"], []),
    (["layers", 0, "fields"], [0, 256]), (["layers", 0, "fields"], [1, 0]),
    (["layers", 0, "tables"], "one"), (["layers", 0, "pooling"], "max"),
    (["layers", 0, "combine"], "mean"), (["layers", 0, "wide"], "yes"),
    (["layers", 0, "units"], 3), (["layers", 0, "initializer"], {"kind": "glorot_uniform"}),
    (["layers", 0, "initializer"], {"kind": "normal", "stddev": -1}),
    (["layers", 0, "initializer"], {"kind": "uniform", "seed": -1}),
    (["layers", 0, "optimizer"], {"kind": "adam", "beta1": 1}),
    (["layers", 0, "optimizer"], {"kind": "ftrl", "lr_power": 0.5, "l1": 0.1}),
    (["layers", 0, "optimizer"], {"kind": "adagrad", "momentum": 0.9}),
    (["layers", 0, "admission"], {"count": 3, "probability": 0}),
    (["layers", 0, "admission"], {"count": 256}),
    (["layers", 0, "eviction"], {"capacity": 1000, "ttl": 50, "policy": "lfu"}),
    (["layers", 0, "eviction"], {"policy": "fifo"}),
    (["layers", 1], {"type": "Concatenate", "axis": 1}),
    (["layers", 1], {"type": "Concatenate", "name": "cat"}),
]


def main():
    root, tool = sys.argv[1], sys.argv[2]
    failures = []
    cases = 0
    for name, bases, files in (
            ("job", [(None, JOB_CHANGES)],
             [os.path.join(root, "schemas", "jobs", f)
              for f in sorted(os.listdir(os.path.join(root, "schemas", "jobs")))]
             + [os.path.join(root, "deploy", "compose-job.json")]),
            ("model", [(None, MODEL_CHANGES), ("dlrm.json", CTR_CHANGES)],
             [os.path.join(root, "schemas", "models", f)
              for f in sorted(os.listdir(os.path.join(root, "schemas", "models")))])):
        schema_path = os.path.join(root, "schemas", name + ".schema.json")
        schema = load(schema_path)
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            failures.append("%s is not a valid 2020-12 schema: %s" % (schema_path, e.message))
            continue
        validator = jsonschema.Draft202012Validator(schema)

        # The files and the documentation's examples: valid by both.
        docs = [(f, load(f)) for f in files]
        for md in ("README.md", os.path.join("schemas", name + ".md")):
            for i, block in enumerate(json_blocks(os.path.join(root, md))):
                is_model = isinstance(block, dict) and ("input_shape" in block
                                                        or "inputs" in block)
                if is_model == (name == "model"):
                    docs.append(("%s, JSON example %d" % (md, i + 1), block))
        if len(docs) < 2:
            failures.append("%s: no example files found" % name)
        verdicts = c_verdicts(tool, schema_path, [d for _, d in docs])
        for (label, doc), c in zip(docs, verdicts):
            cases += 1
            errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
            if errors:
                failures.append("%s: python3-jsonschema refuses it: %s at %s"
                                % (label, errors[0].message, pointer(errors[0].absolute_path)))
            if c is not None:
                failures.append("%s: ps_jsonschema refuses it: %s" % (label, c))

        # One change at a time to the first file (or the one named): the
        # same verdicts, and the pointer of a refusal is one
        # python3-jsonschema names.
        cases_of = []
        for base_name, changes in bases:
            base = [d for f, d in docs if base_name is None or f.endswith("/" + base_name)][0]
            cases_of += variants(base, changes)
        verdicts = c_verdicts(tool, schema_path, [d for _, d in cases_of])
        for (label, doc), c in zip(cases_of, verdicts):
            cases += 1
            errors = list(validator.iter_errors(doc))
            if bool(errors) != (c is not None):
                failures.append("%s %s: python3-jsonschema says %s, ps_jsonschema says %s"
                                % (name, label, "invalid (%s)" % errors[0].message if errors
                                   else "valid", "invalid (%s)" % c if c else "valid"))
                continue
            if c is None:
                print("ok   %s %s: valid" % (name, label))
                continue
            # Where python3-jsonschema sees errors, deepest first (its
            # best_match picks the same kind of error we report).
            where = {pointer(e.absolute_path) for e in errors}
            for e in errors:
                for sub in e.context or []:
                    where.add(pointer(sub.absolute_path))
            m = re.match(r"at (/\S*|the top level):", c)
            at = "" if m and m.group(1) == "the top level" else (m.group(1) if m else None)
            # An unknown key is named at its own pointer by ps_jsonschema, at
            # its object by python3-jsonschema.
            if at is not None and at not in where and at.rsplit("/", 1)[0] in where \
                    and "unknown key" in c:
                at = at.rsplit("/", 1)[0]
            if at not in where:
                failures.append("%s %s: ps_jsonschema names %s (%s), python3-jsonschema %s"
                                % (name, label, at, c, sorted(where)))
                continue
            print("ok   %s %s: invalid: %s" % (name, label, c))
    for f in failures:
        print("FAIL:", f)
    print("%d documents, %d failures" % (cases, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
