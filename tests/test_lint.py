#!/usr/bin/python3
"""Every Python file of the source tree passes pyflakes, and every shell
script shellcheck.

The test harnesses, benchmarks, generators, deployment scripts and the
test command itself are Python and bash (tests/, schemas/, deploy/,
.ci/): an unused import or variable, a name never defined, an unquoted
expansion that splits or a `cd` whose failure is ignored is a mistake
there as in C, and nothing else would find the ones on paths a run rarely
takes (an error branch, a benchmark's peer). Debian's pyflakes3 and
shellcheck (deploy/install-deps.sh) read each file without running it;
shellcheck at its warning level, following the files a script sources.

Usage: test_lint.py pyflakes|shellcheck SOURCE_ROOT. Exits 0 when every
file is clean, 1 listing the findings, 77 (SKIP) when the tool is not
installed.
"""
import os
import shutil
import subprocess
import sys

# Outside a git checkout: directories that hold no sources of ours.
SKIP_DIRS = {".git", "__pycache__"}


def first_line(path):
    try:
        with open(path, "rb") as f:
            return f.readline(200).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def shell_script(path):
    """A .sh file, or one without the suffix whose #! line runs a shell."""
    if path.endswith(".sh"):
        return True
    first = first_line(path)
    return first.startswith("#!") and ("bash" in first or first.endswith("/sh"))


# Each tool: its program and arguments, and which files it reads.
TOOLS = {
    "pyflakes": (["pyflakes3"], lambda path: path.endswith(".py")),
    "shellcheck": (["shellcheck", "--external-sources", "--source-path=SCRIPTDIR",
                    "--severity=warning"], shell_script),
}


def tree(root):
    """The files of root's git checkout; outside one (a release tarball),
    the files under root but for build directories (any holding
    meson-private). In a stable order."""
    if os.path.isdir(os.path.join(root, ".git")) and shutil.which("git"):
        r = subprocess.run(["git", "-C", root, "ls-files", "-z"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode == 0:
            return sorted(os.path.join(root, f) for f in r.stdout.decode().split("\0") if f)
    found = []
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS
                         and not os.path.isdir(os.path.join(top, d, "meson-private")))
        found.extend(os.path.join(top, f) for f in sorted(files))
    return found


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in TOOLS:
        print("usage: test_lint.py pyflakes|shellcheck [SOURCE_ROOT]")
        return 1
    command, wanted = TOOLS[sys.argv[1]]
    root = sys.argv[2] if len(sys.argv) > 2 else os.environ["PS_SOURCE_ROOT"]
    # The program, not a module: it runs under Debian's own interpreter
    # whichever python3 runs this script.
    program = shutil.which(command[0])
    if not program:
        print("SKIP: no %s on PATH; apt-get install %s (deploy/install-deps.sh)"
              % (command[0], command[0]))
        return 77
    files = [p for p in tree(root) if os.path.isfile(p) and wanted(p)]
    if not files:
        print("FAIL: no file for %s found under %s" % (command[0], root))
        return 1
    r = subprocess.run([program] + command[1:] + files, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0 or r.stdout.strip():
        print(r.stdout, end="")
        print("FAIL: %s exited %d on the %d files, with the findings above"
              % (command[0], r.returncode, len(files)))
        return 1
    print("%s: %d files, no problems" % (command[0], len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
