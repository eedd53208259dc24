#!/usr/bin/env bash
# Configures and builds ckptfs into ${BUILD_DIR:-build} with every core:
# everything (programs and tests), or only the targets named in
# $BUILD_TARGETS (e.g. "ckptfs ckptfs-meta ckptfs-storage ckptfs-fuse", what
# the demo runs). Uses the first `cmake` on PATH (3.25 or newer).
# Usage: scripts/build.sh [extra cmake configure args...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
targets=()
for target in ${BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
