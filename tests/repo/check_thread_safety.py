"""Checks the lock annotations: every C++ translation unit of the build,
compiled by clang with -Werror=thread-safety (syntax only).

The code marks what each mutex guards (ABSL_GUARDED_BY) and what a
function needs held (ABSL_EXCLUSIVE_LOCKS_REQUIRED, ABSL_LOCKS_EXCLUDED);
GCC, which builds ckptfs, ignores those marks and clang's analysis checks
them. This reads the build's compile_commands.json, keeps each command's
include paths, definitions and language standard, and runs clang on every
file in parallel; it fails listing each violation.

Usage: check_thread_safety.py BUILD_DIR/compile_commands.json [CLANG]
"""
import concurrent.futures
import json
import os
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
    with open(sys.argv[1]) as f:
        entries = [e for e in json.load(f) if e["file"].endswith(".cc")]
    workers = os.cpu_count() or 2
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        failures = [r for r in pool.map(lambda e: check(clang, e), entries) if r]
    print("%d translation units checked, %d with lock-annotation errors"
          % (len(entries), len(failures)))
    if failures:
        print("\n\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
