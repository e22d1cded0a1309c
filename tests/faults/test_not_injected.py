#!/usr/bin/env python3
"""The fault harness fails a run whose required fault was not injected.

netfault.py runs a chosen scenario (required, as the short version's
faults are) whose fault cannot happen: a corrupted checkpoint in a job
that writes no checkpoint between its initial one and its final one
(--ckpt-steps above the job's length). The harness never corrupts the
final one (the job ends as it is written), so there is never one to
corrupt with one before it, however the processes are scheduled.
The harness must exit 1 and name the fault as not injected; a pass would
mean a schedule that misses can still report green. A small, short job
keeps this to two runs of a few seconds.

Exits 0 when the harness failed as it must, 77 (SKIP, with netfault's
reason) where the harness cannot run here (not root, no namespaces), and
1 otherwise.
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    # The harness keeps the directory of a run with violations: this one's
    # goes with the test's own.
    with tempfile.TemporaryDirectory(prefix="test-not-injected-") as workdir:
        argv = [sys.executable, os.path.join(HERE, "netfault.py"),
                "--scenario", "async:corrupt:server:1@0.3", "--ckpt-steps", "100000",
                "--limit", "3840", "--epochs", "1", "--test-limit", "500",
                "--workdir", workdir]
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(r.stdout, end="")
    if r.returncode == 77:
        return 77
    want = "was not injected: no checkpoint was written after step"
    if r.returncode == 1 and want in r.stdout:
        print("test_not_injected: the harness failed the run whose fault it could not "
              "inject, as it must")
        return 0
    print("test_not_injected: netfault.py exited %d; expected 1 with a violation "
          "containing %r" % (r.returncode, want))
    return 1


if __name__ == "__main__":
    sys.exit(main())
