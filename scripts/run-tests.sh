#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages, then the
# build's Python environment with torch 2.13 and the frameworks the tests
# drive, pinned), builds, and runs every test (unit and integration; C++ and
# Python) with CTest. Needs root for apt-get and FUSE mounts.
# Usage: scripts/run-tests.sh [extra ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

bash scripts/install-deps.sh
bash scripts/install-python.sh test
bash scripts/build.sh

# Integration tests leave nothing behind on success or failure; should a test
# binary be killed outright, unmount whatever it left under the temp dir.
cleanup() {
  local m
  for m in $(awk '$3 == "fuse.ckptfs" {print $2}' /proc/mounts | grep -E '/ckptfs-(it|cli)-' || true); do
    fusermount3 -u -z "$m" || true
  done
}
trap cleanup EXIT

cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" --timeout 900 "$@"
