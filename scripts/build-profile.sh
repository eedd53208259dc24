#!/usr/bin/env bash
# Where the build's CPU goes: configures a fresh build directory
# (${BUILD_DIR:-build-profile}, removed first) with this script as the
# compiler and linker launcher, builds everything (or the targets named in
# $BUILD_TARGETS) with make -j2, and prints the user+sys seconds of the
# whole make, of compiling, precompiling headers and linking, and of the
# costliest steps (${TOP:-20}). Each step's times are in
# BUILD_DIR/build-times.log ("wall user sys kind output", one a line).
# mold finishes a link in a child process that the launcher does not wait
# for: add -DCMAKE_EXE_LINKER_FLAGS=-Wl,--no-fork to count all of its time.
# Usage: scripts/build-profile.sh [extra cmake configure args...]
#   e.g. scripts/build-profile.sh -DCKPTFS_PCH=OFF -DCKPTFS_DEBUG_LEVEL=2
set -euo pipefail

# As the launcher: run the compiler or linker, timed into the log.
if [ "${1:-}" = "--launch" ]; then
  shift
  out="" prev="" kind=link
  for arg in "$@"; do
    [ "$prev" = "-o" ] && out=$arg
    [ "$arg" = "-c" ] && kind=compile
    prev=$arg
  done
  case "$out" in *.gch) kind=pch ;; esac
  exec /usr/bin/time -a -o "$CKPTFS_BUILD_TIMES" -f "%e %U %S $kind $PWD/$out" "$@"
fi

cd "$(dirname "$0")/.."
[ -x /usr/bin/time ] || { echo "build-profile: needs /usr/bin/time (Debian's time)" >&2; exit 1; }
BUILD_DIR=${BUILD_DIR:-build-profile}
self="$(pwd)/scripts/build-profile.sh"
rm -rf "$BUILD_DIR"
mkdir -p "$BUILD_DIR"
export CKPTFS_BUILD_TIMES="$(cd "$BUILD_DIR" && pwd)/build-times.log"
: > "$CKPTFS_BUILD_TIMES"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} \
  "-DCMAKE_CXX_COMPILER_LAUNCHER=$self;--launch" "-DCMAKE_CXX_LINKER_LAUNCHER=$self;--launch" \
  "$@" >/dev/null
echo "build-profile: load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086 # BUILD_TARGETS is a list of names
/usr/bin/time -o "$BUILD_DIR/make-time.txt" -f "%U %S %e" \
  make -C "$BUILD_DIR" -j2 ${BUILD_TARGETS:-} >"$BUILD_DIR/make.log" 2>&1 ||
  { tail -30 "$BUILD_DIR/make.log"; exit 1; }
echo "build-profile: load after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r user sys wall <"$BUILD_DIR/make-time.txt"
awk -v u="$user" -v s="$sys" -v w="$wall" \
  'BEGIN { printf "make -j2: user+sys %.1f s, wall %.1f s\n", u + s, w }'
awk 'NF >= 5 && $1 ~ /^[0-9.]+$/ {
       n[$4]++; cpu[$4] += $2 + $3; total += $2 + $3
     }
     END {
       for (k in n) printf "%-8s %4d steps, user+sys %7.1f s\n", k, n[k], cpu[k]
       printf "steps in all: user+sys %.1f s\n", total
     }' "$CKPTFS_BUILD_TIMES"
echo "costliest steps (user+sys s):"
awk 'NF >= 5 && $1 ~ /^[0-9.]+$/ { printf "%7.1f %-7s %s\n", $2 + $3, $4, $5 }' \
  "$CKPTFS_BUILD_TIMES" | sort -rn | head -"${TOP:-20}"
