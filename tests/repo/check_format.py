"""Checks that every tracked C++ file is formatted as .clang-format says
(clang-format --dry-run -Werror), listing the files that are not and how
to fix them.

Usage: check_format.py [CLANG_FORMAT]
"""
import concurrent.futures
import os
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def tracked_cpp_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "*.cc", "*.h"], check=True,
                         capture_output=True, text=True).stdout
    return out.splitlines()


def main():
    tool = sys.argv[1] if len(sys.argv) > 1 else "clang-format-14"
    if shutil.which(tool) is None:
        sys.exit("%s not found: install Debian's clang-format-14 (scripts/install-deps.sh does)"
                 % tool)
    files = tracked_cpp_files()

    def unformatted(name):
        result = subprocess.run([tool, "--style=file", "--dry-run", "-Werror", name], cwd=ROOT,
                                capture_output=True, text=True)
        return name if result.returncode != 0 else None

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        bad = [name for name in pool.map(unformatted, files) if name]
    print("%d files checked, %d not formatted" % (len(files), len(bad)))
    if bad:
        print("format them with: %s -i --style=file FILE...\n  %s" % (tool, "\n  ".join(bad)))
        sys.exit(1)


if __name__ == "__main__":
    main()
