#!/usr/bin/env python3
"""The generated wire codec is what we reviewed.

schemas/gen_codec.py turns schemas/protocol.json into ps_proto.h and
ps_proto.c at build time. tests/golden/ holds the output we expect for the
checked-in protocol.json; this test compares the build's output with it and
fails with a unified diff when they differ, so a change to the generator or
to the protocol cannot change the code silently.

To accept a change on purpose, regenerate the golden copy and commit it with
the change that caused it:

    python3 schemas/gen_codec.py schemas/protocol.json \\
        tests/golden/ps_proto.h tests/golden/ps_proto.c

Usage: test_codec_golden.py GOLDEN_DIR GENERATED_H GENERATED_C
"""

import difflib
import os
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    golden_dir = sys.argv[1]
    changed = 0
    for generated in sys.argv[2:]:
        name = os.path.basename(generated)
        golden = os.path.join(golden_dir, name)
        with open(golden) as f:
            want = f.readlines()
        with open(generated) as f:
            got = f.readlines()
        if want != got:
            changed += 1
            sys.stdout.writelines(difflib.unified_diff(want, got, "tests/golden/" + name,
                                                       "generated/" + name))
            print("FAIL: the generated %s differs from tests/golden/%s (diff above)" % (name, name))
        else:
            print("ok: %s is the golden copy (%d lines)" % (name, len(got)))
    if changed:
        print("If the change is intended, update the golden copy:")
        print("  python3 schemas/gen_codec.py schemas/protocol.json "
              "tests/golden/ps_proto.h tests/golden/ps_proto.c")
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
