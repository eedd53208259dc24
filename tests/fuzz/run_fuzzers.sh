#!/usr/bin/env bash
# Bounded libFuzzer run of ckptfs's fuzz targets.
#
# Builds tests/fuzz/libfuzzer/ with clang-14 (ASan + UBSan + libFuzzer) in
# its own build directory, then runs each target for SECONDS seconds on a
# scratch copy of its corpus (tests/fuzz/corpus/<target>: seeds and the
# crash inputs kept as regressions). Fails when a target crashes, leaks,
# times out or runs out of memory, printing the reproducer's path and the
# command that replays it.
#
# Usage: tests/fuzz/run_fuzzers.sh [--keep] [target...]
#   targets: frame storage meta (default: all)
#   --keep   merge inputs that found new coverage into tests/fuzz/corpus/
# Environment:
#   CKPTFS_FUZZ_SECONDS  per target (default 20)
#   CKPTFS_FUZZ_BUILD    the clang build directory (default build-fuzz-clang
#                        in the repository root)
#   CKPTFS_FUZZ_JOBS     build parallelism (default 2)
#   CKPTFS_FUZZ_GATE     when set (CTest sets it), do nothing and exit 77
#                        (skipped) unless CKPTFS_FUZZ=1
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SECONDS_PER_TARGET=${CKPTFS_FUZZ_SECONDS:-20}
BUILD=${CKPTFS_FUZZ_BUILD:-$ROOT/build-fuzz-clang}
JOBS=${CKPTFS_FUZZ_JOBS:-2}
KEEP=0
TARGETS=()
for arg in "$@"; do
  case "$arg" in
    --keep) KEEP=1 ;;
    frame|storage|meta) TARGETS+=("$arg") ;;
    *) echo "usage: $0 [--keep] [frame|storage|meta ...]" >&2; exit 2 ;;
  esac
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(frame storage meta)

if [ -n "${CKPTFS_FUZZ_GATE:-}" ] && [ "${CKPTFS_FUZZ:-0}" != 1 ]; then
  echo "run_fuzzers: skipped (set CKPTFS_FUZZ=1 to run the libFuzzer targets)"
  exit 77
fi

if ! command -v clang++-14 >/dev/null; then
  echo "run_fuzzers: clang++-14 missing (scripts/install-deps.sh installs clang-14 and libclang-rt-14-dev)" >&2
  exit 1
fi

start=$(date +%s)
echo "run_fuzzers: building in $BUILD"
cmake -S "$ROOT/tests/fuzz/libfuzzer" -B "$BUILD" -G Ninja \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target $(printf '%s_fuzzer ' "${TARGETS[@]}")
built=$(date +%s)
echo "run_fuzzers: build took $((built - start)) s"

failed=()
for target in "${TARGETS[@]}"; do
  corpus="$BUILD/run/$target/corpus"
  artifacts="$BUILD/run/$target/artifacts"
  rm -rf "$BUILD/run/$target"
  mkdir -p "$corpus" "$artifacts"
  cp "$ROOT/tests/fuzz/corpus/$target/"* "$corpus/" 2>/dev/null || true
  log="$BUILD/run/$target/fuzz.log"
  echo "run_fuzzers: $target for ${SECONDS_PER_TARGET} s"
  set +e
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    "$BUILD/${target}_fuzzer" -max_total_time="$SECONDS_PER_TARGET" -timeout=30 \
    -rss_limit_mb=4096 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1
  rc=$?
  set -e
  # The summary lines: the last status line and the final stats.
  grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$log" | tail -1 || true
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' "$log" || true
  if [ $rc -ne 0 ]; then
    failed+=("$target")
    echo "run_fuzzers: $target FAILED (exit $rc); the end of $log:"
    tail -40 "$log"
    for f in "$artifacts"/*; do
      [ -e "$f" ] || continue
      echo "run_fuzzers: reproducer $f"
      echo "  replay: $BUILD/${target}_fuzzer $f"
      echo "  keep it: cp $f $ROOT/tests/fuzz/corpus/$target/crash-<what>"
    done
  elif [ $KEEP -eq 1 ]; then
    "$BUILD/${target}_fuzzer" -merge=1 "$ROOT/tests/fuzz/corpus/$target" "$corpus" \
      >"$BUILD/run/$target/merge.log" 2>&1
    echo "run_fuzzers: merged new coverage into tests/fuzz/corpus/$target"
  fi
done

echo "run_fuzzers: total $(( $(date +%s) - start )) s (build $((built - start)) s)"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzzers: FAILED: ${failed[*]}"
  exit 1
fi
echo "run_fuzzers: all targets ran clean"
