#!/usr/bin/env bash
# The test command: installs what is missing (Debian packages, then the
# build's Python environment with torch 2.13 and the frameworks the tests
# drive, pinned), builds, and runs every test (unit and integration; C++ and
# Python) with CTest. Needs root for apt-get and FUSE mounts. Ends with the
# wall time of each phase, also when one fails.
# Usage: scripts/run-tests.sh [extra ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}

phases=()
phase_start=$SECONDS
run_phase() {  # run_phase NAME COMMAND...: runs it and records its wall time
  local name=$1 start=$SECONDS
  shift
  "$@"
  phases+=("$(printf '%-16s %5d s' "$name" $((SECONDS - start)))")
}

# Integration tests leave nothing behind on success or failure; should a test
# binary be killed outright, unmount whatever it left under the temp dir.
cleanup() {
  local m
  wait 2>/dev/null || true  # a Python install still running beside a failed build
  for m in $(awk '$3 == "fuse.ckptfs" {print $2}' /proc/mounts | grep -E '/ckptfs-(it|cli)-' || true); do
    fusermount3 -u -z "$m" || true
  done
  # A test cluster's own storage disk (a tmpfs under its temp dir).
  for m in $(awk '$3 == "tmpfs" {print $2}' /proc/mounts | grep -E '/ckptfs-it-[^/]*/disk$' || true); do
    umount -l "$m" || true
  done
  echo "== wall time per phase"
  local line
  for line in "${phases[@]}"; do echo "  $line"; done
  printf '  %-16s %5d s\n' total $((SECONDS - phase_start))
}
trap cleanup EXIT

run_phase install-deps bash scripts/install-deps.sh
# The Python environment is made while the build runs (pip mostly waits on
# the disk and the network, the compiler on the CPU); its output follows
# the build's.
mkdir -p "$BUILD_DIR"
PY_LOG="$BUILD_DIR/install-python.log"
(start=$SECONDS
 bash scripts/install-python.sh test
 echo $((SECONDS - start)) >"$BUILD_DIR/install-python.seconds") >"$PY_LOG" 2>&1 &
py_pid=$!
run_phase build bash scripts/build.sh
if ! wait "$py_pid"; then
  cat "$PY_LOG" >&2
  echo "run-tests: making the Python environment failed (above; also in $PY_LOG)" >&2
  exit 1
fi
cat "$PY_LOG"
phases+=("$(printf '%-16s %5d s (beside the build)' install-python \
  "$(cat "$BUILD_DIR/install-python.seconds")")")
cd "$BUILD_DIR"
# One test more than there are cores: many integration tests spend part of
# their time waiting (a daemon's start, a timeout they check), and the
# extra one uses the core they leave.
run_phase ctest ctest --output-on-failure -j "$(($(nproc) + 1))" --timeout 900 "$@"
