#!/usr/bin/python3
"""Hand-written code reads messages through the generated codec.

The programs, their tests and the fuzz targets read a message's fields
from its struct of the generated codec (schemas/gen_codec.py; README,
Requests), as in msg->work.step, and dispatch on msg->type; they must not
slip back to reading the msgpack header by string key, packing headers by
hand through the helpers that did it, or comparing type names. (A test
that sends malformed headers on purpose packs them with msgpack-c itself.)
This test fails, naming the file and line, when a source does any of that.

Usage: test_typed_messages.py SOURCE_ROOT
"""
import os
import re
import sys

CONVERTED = ["ps", "worker", "coordinator", "tests", "tests/fuzz"]
FORBIDDEN = [
    (re.compile(r"\bps_obj_\w+\s*\("), "reads a header by string key (ps_obj_*)"),
    (re.compile(r"\bps_msg_header\s*\("), "reads the raw msgpack header"),
    (re.compile(r"\bps_pack_\w+\s*\("), "packs a header by hand (ps_pack_*)"),
    (re.compile(r"\bps_writer_reset\s*\("), "starts a header by hand (ps_writer_reset)"),
    (re.compile(r"\bps_plan_unpack\s*\("), "reads the plan by string key (ps_plan_unpack)"),
    (re.compile(r"\bstrcmp\s*\([^;]*\bps_msg_type\s*\("),
     "dispatches on the type's name (strcmp on ps_msg_type)"),
]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ["PS_SOURCE_ROOT"]
    problems = []
    checked = 0
    for program in CONVERTED:
        folder = os.path.join(root, program)
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h", ".cu")):
                continue
            checked += 1
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    for pattern, why in FORBIDDEN:
                        if pattern.search(line):
                            problems.append("%s/%s:%d: %s: %s"
                                            % (program, name, number, why, line.strip()))
    if checked == 0:
        print("no sources found under %s in %s" % (", ".join(CONVERTED), root))
        return 1
    for problem in problems:
        print(problem)
    if problems:
        print("%d reads or writes outside the generated codec; use the structs of "
              "ps_proto.h (msg->type, msg->work.step, ps_writer_encode)" % len(problems))
        return 1
    print("%d files of %s use the generated codec only" % (checked, ", ".join(CONVERTED)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
