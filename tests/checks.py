"""What the Python system tests share: a check that prints PASS or FAIL
and keeps the failures, and a run of a program that a time-out cannot
leave behind."""

import os
import signal
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
