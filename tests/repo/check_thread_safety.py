"""Checks the lock annotations: every C++ translation unit of the build,
compiled by clang with -Werror=thread-safety (syntax only).

The code marks what each mutex guards (ABSL_GUARDED_BY) and what a
function needs held (ABSL_EXCLUSIVE_LOCKS_REQUIRED, ABSL_LOCKS_EXCLUDED);
GCC, which builds ckptfs, ignores those marks and clang's analysis checks
them. This reads the build's compile_commands.json, keeps each command's
include paths, definitions and language standard, and runs clang in
parallel on every translation unit that can hold a violation: one whose
own file takes a lock or carries a lock annotation, or that includes
directly a header that does (the header's inline functions are analyzed
there, and so are the unit's calls of its annotated functions). The others
cannot break a rule the analysis checks, so they are skipped to keep the
check cheap; it fails listing each violation.

Usage: check_thread_safety.py BUILD_DIR/compile_commands.json [CLANG]
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

KEPT_WITH_VALUE = ("-I", "-D", "-isystem")
KEPT_PREFIXES = ("-I", "-D", "-isystem", "-std=", "-pthread")


def clang_command(clang, entry):
    args = shlex.split(entry["command"])[1:]
    kept = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in KEPT_WITH_VALUE and i + 1 < len(args):
            kept += [arg, args[i + 1]]
            i += 2
            continue
        if arg.startswith(KEPT_PREFIXES):
            kept.append(arg)
        i += 1
    return [clang, "-fsyntax-only", "-Wno-everything", "-Wthread-safety",
            "-Werror=thread-safety"] + kept + [entry["file"]]


LOCKING = re.compile(r"Mutex|CondVar|GUARDED_BY|LOCKS_REQUIRED|LOCKS_EXCLUDED|LOCK_RETURNED|"
                     r"ACQUIRE|RELEASE|AssertHeld|ReaderLock|WriterLock|SCOPED_LOCKABLE")
INCLUDE = re.compile(r'^#include "([^"]+)"', re.MULTILINE)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def can_violate(source, root, locking_headers):
    text = read(source)
    if LOCKING.search(text):
        return True
    return any(name in locking_headers for name in INCLUDE.findall(text))


def locking_headers(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "*.h"], check=True,
                         capture_output=True, text=True).stdout.split()
    return {name for name in out if LOCKING.search(read(os.path.join(root, name)))}


def check(clang, entry):
    result = subprocess.run(clang_command(clang, entry), cwd=entry["directory"],
                            capture_output=True, text=True)
    if result.returncode == 0:
        return None
    return entry["file"] + ":\n" + result.stderr.strip()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    clang = sys.argv[2] if len(sys.argv) > 2 else "clang++-14"
    if shutil.which(clang) is None:
        sys.exit("%s not found: install Debian's clang-14 (scripts/install-deps.sh does)" % clang)
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    headers = locking_headers(root)
    with open(sys.argv[1]) as f:
        units = [e for e in json.load(f) if e["file"].endswith(".cc")]
    entries = [e for e in units if can_violate(e["file"], root, headers)]
    workers = os.cpu_count() or 2
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        failures = [r for r in pool.map(lambda e: check(clang, e), entries) if r]
    print("%d of %d translation units checked (the others take no lock and include no "
          "annotated header), %d with lock-annotation errors"
          % (len(entries), len(units), len(failures)))
    if failures:
        print("\n\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
