#!/usr/bin/env bash
# Save and load storms from GPU memory on a lent GPU machine (the `device`
# tool; see docs/benchmarks.md), in one prepared call:
#
#   scripts/device-storm.sh bundle      # here, after scripts/build.sh
#   device run: carry [".device"], command "bash scripts/device-storm.sh run"
#
# `bundle` gathers stripped copies of the ckptfs programs and the libraries
# they load into .device/ (git-ignored) with ../shared/tools/device-bundle
# (or $DEVICE_BUNDLE). `run` starts a local cluster there (1 metadata
# server, 4 storage servers, 1 copy of each chunk, as the VM's figures),
# mounts it, and runs against a plain directory on the same disk:
#   - bench/torch_storm.py: torch.save, torch.load and
#     torch.distributed.checkpoint save/load of bf16 tensors on the GPU,
#     STORM_RANKS ranks x STORM_SIZE (default 8 x 512M: 4 GiB a storm,
#     within its time limit), 3 repeats;
#   - ckptfs-bench's raw and torch storms (8 x 256M, 32 x 32M, 8 x 128M;
#     STORM_BENCH names which, "" none).
# Every table goes to stdout and, with the JSON reports and the cluster's
# logs, to $OUT (or STORM_OUT) when set. Each step has a time limit
# (STORM_TORCH_LIMIT 240 s, STORM_BENCH_LIMIT 100 s each), so the whole run
# fits one 10-minute device call; a failed step is reported and the next
# one runs (exit status 1 then). Everything lives under STORM_WORK
# (/var/tmp/ckptfs-storm, on the disk), which it stops, unmounts and
# removes at the end, also on failure, and at the start when a killed run
# left it. `run` works on any machine with the bundle or a build (CPU
# tensors where there is no GPU; STORM_* shrink it).
set -euo pipefail
cd "$(dirname "$0")/.."

bundle() (
  local tool=${DEVICE_BUNDLE:-../shared/tools/device-bundle}
  [ -x "$tool" ] || { echo "device-storm: no $tool (set DEVICE_BUNDLE)" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for name in ckptfs ckptfs-meta ckptfs-storage ckptfs-fuse ckptfs-bench; do
    strip -o "$tmp/$name" "build/bin/$name"
  done
  rm -rf .device
  "$tool" .device "$tmp"/*
  strip --strip-unneeded .device/lib/*.so* 2>/dev/null || true
  du -sh .device | awk '{print "stripped: " $1 " (a device call carries at most 64 MiB)"}'
)

# Stops the cluster under $work (from this run or one a killed run left),
# unmounts what is still mounted there and removes $work, never crossing
# into another file system.
cleanup() {
  if [ -d "$work/cluster" ]; then
    ckptfs down --state-dir "$work/cluster" >/dev/null 2>&1 || true
    if [ -n "$out" ] && [ -d "$work/cluster/logs" ]; then
      tar -czf "$out/cluster-logs.tgz" -C "$work/cluster" logs 2>/dev/null || true
    fi
  fi
  if mountpoint -q "$work/mnt" 2>/dev/null; then
    fusermount3 -uz "$work/mnt" 2>/dev/null || umount -l "$work/mnt" 2>/dev/null || true
  fi
  if mountpoint -q "$work/mnt" 2>/dev/null; then
    echo "device-storm: $work/mnt is still mounted; $work left in place" >&2
  else
    rm -rf --one-file-system "$work"
  fi
}

# Runs "$@" for at most $1 seconds; a failure or timeout is reported and
# counted, and the run goes on with the next step.
step() {
  local limit=$1
  shift
  if ! timeout --kill-after=10 "$limit" "$@"; then
    echo "device-storm: step failed or ran past ${limit} s: $*" >&2
    failed=1
  fi
}

run() {
  if [ -f .device/env.sh ]; then
    # shellcheck disable=SC1091
    . .device/env.sh
  else
    export PATH=$PWD/build/bin:$PATH
  fi
  # Globals: the EXIT trap reads them after run() returns.
  work=${STORM_WORK:-/var/tmp/ckptfs-storm}
  out=${STORM_OUT:-${OUT:-}}
  failed=0
  local ranks=${STORM_RANKS:-8} size=${STORM_SIZE:-512M} repeat=${STORM_REPEAT:-3}
  local mnt=$work/mnt plain=$work/plain python=${STORM_PYTHON:-python3}
  # The python with torch: the GPU machine's python3; here Debian's.
  "$python" -c 'import torch' 2>/dev/null || python=/usr/bin/python3
  trap cleanup EXIT
  cleanup  # what a killed run left
  mkdir -p "$plain"
  if [ "$(stat -f -c %T "$work")" = tmpfs ]; then
    echo "device-storm: $work is on tmpfs, not a disk; set STORM_WORK" >&2
    exit 1
  fi
  echo "== $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r)"
  echo "== baseline $plain on: $(df --output=source,fstype "$plain" | tail -1)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  ckptfs up --state-dir "$work/cluster" --mountpoint "$mnt" --replicas 1 --orphan-grace-s 5 \
    --metrics-port 0 --no-repair --meta-port 27500 --storage-port 27501 | tail -3
  mkdir -p "$mnt/storm" "$mnt/bench"
  local json=${out:+--json $out/torch_storm.json}
  echo "== torch_storm: $ranks ranks x $size"
  # shellcheck disable=SC2086  # $json is two words or none
  step "${STORM_TORCH_LIMIT:-240}" "$python" bench/torch_storm.py --dir "$mnt/storm" \
    --baseline "$plain/storm" --ranks "$ranks" --size "$size" --repeat "$repeat" \
    --phase-timeout 60 $json
  local -A storms=([raw8]="--ranks 8 --size 256M" [raw32]="--ranks 32 --size 32M"
                   [torch8]="--workload torch --ranks 8 --size 128M")
  for name in ${STORM_BENCH-raw8 raw32 torch8}; do
    local args=${storms[$name]:?"STORM_BENCH: no storm $name (raw8, raw32, torch8)"}
    echo "== ckptfs-bench $name: $args"
    mkdir -p "$mnt/bench/$name" "$plain/bench/$name"
    # shellcheck disable=SC2086  # args are words on purpose
    step "${STORM_BENCH_LIMIT:-100}" ckptfs-bench --dir "$mnt/bench/$name" \
      --baseline "$plain/bench/$name" $args --phases save,load,bcast --repeat "$repeat" \
      --progress off --phase-timeout 60 ${out:+--json $out/bench-$name.json}
  done
  return "$failed"
}

case "${1:-}" in
  bundle) bundle ;;
  run) run ;;
  *) echo "usage: scripts/device-storm.sh bundle|run" >&2; exit 2 ;;
esac
