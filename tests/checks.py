"""What the Python system tests share: a check that prints PASS or FAIL
and keeps the failures, a run of a program that a time-out cannot leave
behind, and a safetensors reader written from the format's description
alone (an 8-byte header length, a JSON header, raw data), independent of
the C writer it checks."""

import json
import os
import signal
import struct
import subprocess

failures = []


def check(ok, what, detail=""):
    """Print PASS or FAIL for what; a failure is kept in failures, and
    shows detail."""
    print("%s: %s%s" % ("PASS" if ok else "FAIL", what, "" if ok else "\n      " + str(detail)))
    if not ok:
        failures.append(what)


def run(args, limit=300):
    """Run a program in a session of its own (so that a time-out stops its
    children too); returns (status, output), status 124 after a time-out."""
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, text=True)
    try:
        out, _ = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, out
    return p.returncode, out


def read_safetensors(path):
    """The tensors (NumPy arrays of F32 or U64) and the metadata of a
    safetensors file, and the tensor names in the header's order."""
    import numpy as np
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    dtypes = {"F32": "<f4", "U64": "<u8"}
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        tensors[name] = np.frombuffer(data[b:end], dtype=dtypes[e["dtype"]]).reshape(e["shape"])
    return tensors, meta, list(header)
