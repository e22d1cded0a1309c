#!/usr/bin/python3
"""The include graph runs one way.

common/ is four layers (common/meson.build lists them in order: base,
model, wire, store). A file of a layer may include its own layer's headers
and those of the layers before it, never one after it; no file of common/
includes a header of ps/, worker/ or coordinator/. Every quoted include of
a ps_ header in common/ must name a header that exists in some layer, so a
header that moved cannot hide from the check.

Usage: test_include_graph.py SOURCE_ROOT
"""
import os
import re
import sys

LAYERS = ["base", "model", "wire", "store"]
# The wire codec is generated from schemas/protocol.json (schemas/gen_codec.py)
# into the build directory, and belongs to the wire layer.
GENERATED = {"ps_proto.h": "wire"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ["PS_SOURCE_ROOT"]
    common = os.path.join(root, "common")
    owner = {}
    for rank, layer in enumerate(LAYERS):
        for name in os.listdir(os.path.join(common, layer)):
            if name.endswith(".h"):
                owner[name] = rank
    # Headers generated at build time, by the layer they belong to.
    for name, layer in GENERATED.items():
        owner[name] = LAYERS.index(layer)
    loose = [n for n in os.listdir(common) if n.endswith((".c", ".h"))]
    upper = set()
    for program in ("ps", "worker", "coordinator"):
        for name in os.listdir(os.path.join(root, program)):
            if name.endswith(".h"):
                upper.add(name)
    bad = ["common/%s: not in a layer's folder" % n for n in loose]
    checked = 0
    for rank, layer in enumerate(LAYERS):
        folder = os.path.join(common, layer)
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(folder, name)) as f:
                text = f.read()
            for header in INCLUDE.findall(text):
                checked += 1
                where = "common/%s/%s includes %s" % (layer, name, header)
                if header in upper:
                    bad.append(where + ", a header of a program above common/")
                elif header in owner:
                    if owner[header] > rank:
                        bad.append(where + ", of the upper layer %s/" % LAYERS[owner[header]])
                elif header.startswith("ps_"):
                    bad.append(where + ", which is in no layer")
    for line in bad:
        print("FAIL: " + line)
    print("%d includes in common/'s %d layers checked, %d wrong" % (checked, len(LAYERS), len(bad)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
