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

Most of clang's time would go to parsing the same system headers (the
standard library, Abseil, Protobuf, gRPC, GoogleTest) in every unit, so
they are parsed once into two precompiled headers, one with GoogleTest for
the units that use it and one without, each made with only the options
every unit shares; a unit adds its own include paths and definitions on
top. The headers' text is the same either way, so the analysis is too.

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
import tempfile

KEPT_WITH_VALUE = ("-I", "-D", "-isystem")
KEPT_PREFIXES = ("-I", "-D", "-isystem", "-std=", "-pthread")
TEST_DEFINITION = "-DGTEST_HAS_PTHREAD=1"


def precompiled_headers(root):
    """What nearly every unit includes: the build's own list of system
    headers to precompile (CKPTFS_PCH_BASE_HEADERS in
    cmake/CkptfsBuildCost.cmake; Debian's packages only, never a ckptfs or
    generated header, which a unit's own definitions could change)."""
    text = read(os.path.join(root, "cmake", "CkptfsBuildCost.cmake"))
    block = re.search(r"set\(CKPTFS_PCH_BASE_HEADERS(.*?)\)", text, re.DOTALL)
    return re.findall(r"<([^>]+)>", block.group(1)) if block else []


def analysis_flags():
    return ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]


def shared_options(units):
    """The language standard, -pthread and the definitions that every unit
    has (NDEBUG): what a precompiled header may be made with. Include paths
    stay out, so that the headers resolve to the system's copies."""
    common = None
    for entry in units:
        options = [o for o in kept_options(entry) if o.startswith(("-std=", "-pthread", "-D"))
                   and o != "-D"]
        common = options if common is None else [o for o in common if o in options]
    return common or []


def make_precompiled(clang, directory, name, headers, options):
    """Returns the -include-pch arguments for a header of HEADERS made in
    DIRECTORY, or [] (units then parse the headers themselves) when clang
    cannot make it."""
    source = os.path.join(directory, name + ".h")
    with open(source, "w") as f:
        f.write("".join("#include <%s>\n" % h for h in headers))
    output = source + ".pch"
    result = subprocess.run([clang, "-x", "c++-header"] + options +
                            ["-Wno-everything", source, "-o", output],
                            capture_output=True, text=True)
    if result.returncode != 0:
        print("precompiled header %s not made, parsing in every unit instead:\n%s"
              % (name, result.stderr.strip()))
        return []
    return ["-include-pch", output]


def clang_command(clang, entry, precompiled=()):
    return [clang] + analysis_flags() + list(precompiled) + kept_options(entry) + [entry["file"]]


def kept_options(entry):
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
    return kept


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


def check(clang, entry, precompiled):
    uses_gtest = bool(precompiled[True]) and TEST_DEFINITION in kept_options(entry)
    result = subprocess.run(clang_command(clang, entry, precompiled[uses_gtest]),
                            cwd=entry["directory"], capture_output=True, text=True)
    if result.returncode == 0:
        return None
    return entry["file"] + ":\n" + result.stderr.strip()


# A violation the analysis must report: checked first, with the units'
# precompiled headers and options, so that a setting that silenced the
# analysis fails the check instead of passing every unit.
PLANTED_VIOLATION = """#include "absl/synchronization/mutex.h"
struct Counter {
  absl::Mutex mu;
  int n ABSL_GUARDED_BY(mu) = 0;
  void Bump() { ++n; }
};
"""


def analysis_reports_planted_violation(clang, scratch, sample, precompiled):
    source = os.path.join(scratch, "planted_violation.cc")
    with open(source, "w") as f:
        f.write(PLANTED_VIOLATION)
    for uses_gtest in (False, True):
        entry = dict(sample, file=source)
        options = [o for o in kept_options(sample) if o != TEST_DEFINITION]
        if uses_gtest:
            options.append(TEST_DEFINITION)
        command = [clang] + analysis_flags() + precompiled[uses_gtest] + options + [source]
        result = subprocess.run(command, cwd=entry["directory"], capture_output=True, text=True)
        if "requires holding mutex" not in result.stderr:
            print("clang did not report the planted violation (%s):\n%s"
                  % (" ".join(command), result.stderr.strip()))
            return False
    return True


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
    with tempfile.TemporaryDirectory(prefix="ckptfs-thread-safety-") as scratch:
        options = shared_options(entries)
        headers = precompiled_headers(root)
        precompiled = {
            False: make_precompiled(clang, scratch, "base", headers, options),
            True: make_precompiled(clang, scratch, "test", headers + ["gtest/gtest.h"],
                                   options + [TEST_DEFINITION]),
        }
        if entries and not analysis_reports_planted_violation(clang, scratch, entries[0],
                                                              precompiled):
            sys.exit(1)
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            failures = [r for r in pool.map(lambda e: check(clang, e, precompiled), entries)
                        if r]
    print("%d of %d translation units checked (the others take no lock and include no "
          "annotated header), %d with lock-annotation errors"
          % (len(entries), len(units), len(failures)))
    if failures:
        print("\n\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
