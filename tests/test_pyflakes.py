#!/usr/bin/python3
"""Every Python file of the source tree passes pyflakes.

The test harnesses, benchmarks and generators are Python (tests/,
schemas/, deploy/): an unused import or local, a name never defined or a
redefinition is a mistake there as in C, and nothing else would find the
ones on paths a run rarely takes (an error branch, a benchmark's peer).
Debian's pyflakes3 (deploy/install-deps.sh) reads each file without
running it.

Usage: test_pyflakes.py SOURCE_ROOT. Exits 0 when every file is clean, 1
listing the findings, 77 (SKIP) when pyflakes3 is not installed.
"""
import os
import shutil
import subprocess
import sys

# Outside a git checkout: directories that hold no sources of ours.
SKIP_DIRS = {".git", "__pycache__"}


def sources(root):
    """The tracked .py files of root's git checkout; outside one (a
    release tarball), the .py files under root but for build directories
    (any holding meson-private). In a stable order."""
    if os.path.isdir(os.path.join(root, ".git")) and shutil.which("git"):
        r = subprocess.run(["git", "-C", root, "ls-files", "-z", "--", "*.py"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode == 0:
            return sorted(os.path.join(root, f) for f in r.stdout.decode().split("\0") if f)
    found = []
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and not os.path.isdir(os.path.join(top, d, "meson-private")))
        found.extend(os.path.join(top, f) for f in sorted(files) if f.endswith(".py"))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.environ["PS_SOURCE_ROOT"]
    # The program, not the module: it runs under Debian's own Python
    # whichever python3 runs this script.
    program = shutil.which("pyflakes3")
    if not program:
        print("SKIP: no pyflakes3 on PATH; apt-get install pyflakes3 (deploy/install-deps.sh)")
        return 77
    files = sources(root)
    if not files:
        print("FAIL: no Python file found under %s" % root)
        return 1
    r = subprocess.run([program] + files, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if r.returncode != 0 or r.stdout.strip():
        print(r.stdout, end="")
        print("FAIL: pyflakes3 exited %d on the %d Python files, with the findings above"
              % (r.returncode, len(files)))
        return 1
    print("pyflakes3: %d Python files, no problems" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
