#!/usr/bin/env bash
# Save and load storms from GPU memory on a lent GPU machine (the `device`
# tool; see README "Benchmarks"), in one prepared call:
#
#   scripts/device-storm.sh bundle      # here, after scripts/build.sh
#   device run: carry [".device"], command "bash scripts/device-storm.sh run"
#
# `bundle` gathers stripped copies of the ckptfs programs and the libraries
# they load into .device/ (git-ignored) with ../shared/tools/device-bundle
# (or $DEVICE_BUNDLE). `run` starts a local cluster there (1 metadata
# server, 4 storage servers, 1 copy of each chunk, as the VM's figures),
# mounts it, and runs against a plain directory on the same disk:
#   - tools/bench/torch_storm.py: torch.save, torch.load and
#     torch.distributed.checkpoint save/load of bf16 tensors on the GPU,
#     STORM_RANKS ranks x STORM_SIZE (default 8 x 1G), 3 repeats;
#   - ckptfs-bench's raw and torch storms (8 x 256M, 32 x 32M, 8 x 128M;
#     STORM_BENCH names which, "" none).
# Every table goes to stdout and, with the JSON reports and the cluster's
# logs, to $OUT (or STORM_OUT) when set. It stops and unmounts everything
# it started, also on failure. `run` works on any machine with the bundle
# or a build (CPU tensors where there is no GPU; STORM_* shrink it).
set -euo pipefail
cd "$(dirname "$0")/.."

bundle() {
  local tool=${DEVICE_BUNDLE:-../shared/tools/device-bundle}
  [ -x "$tool" ] || { echo "device-storm: no $tool (set DEVICE_BUNDLE)" >&2; exit 1; }
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  for name in ckptfs ckptfs-meta ckptfs-storage ckptfs-fuse ckptfs-bench; do
    strip -o "$tmp/$name" "build/bin/$name"
  done
  rm -rf .device
  "$tool" .device "$tmp"/*
  strip --strip-unneeded .device/lib/*.so* 2>/dev/null || true
  du -sh .device | awk '{print "stripped: " $1 " (a device call carries at most 64 MiB)"}'
}

cleanup() {
  ckptfs down --state-dir "$state" >/dev/null 2>&1 || true
  if [ -n "$out" ] && [ -d "$state/logs" ]; then
    tar -czf "$out/cluster-logs.tgz" -C "$state" logs 2>/dev/null || true
  fi
  rm -rf "$work"
}

run() {
  if [ -f .device/env.sh ]; then
    # shellcheck disable=SC1091
    . .device/env.sh
  else
    export PATH=$PWD/build/bin:$PATH
  fi
  # Globals: the EXIT trap reads them after run() returns.
  work=${STORM_WORK:-/tmp/ckptfs-storm}
  out=${STORM_OUT:-${OUT:-}}
  state=$work/cluster
  local ranks=${STORM_RANKS:-8} size=${STORM_SIZE:-1G} repeat=${STORM_REPEAT:-3}
  local mnt=$work/mnt plain=$work/plain python=${STORM_PYTHON:-python3}
  # The python with torch: the GPU machine's python3; here Debian's.
  "$python" -c 'import torch' 2>/dev/null || python=/usr/bin/python3
  [ -e "$work" ] && { echo "device-storm: $work exists; remove it or set STORM_WORK" >&2; exit 1; }
  mkdir -p "$work" "$plain"
  trap cleanup EXIT
  echo "== $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r)"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
  ckptfs up --state-dir "$state" --mountpoint "$mnt" --replicas 1 --orphan-grace-s 5 \
    --metrics-port 0 --no-repair --meta-port 27500 --storage-port 27501 | tail -3
  mkdir -p "$mnt/storm" "$mnt/bench"
  local json=${out:+--json $out/torch_storm.json}
  echo "== torch_storm: $ranks ranks x $size"
  # shellcheck disable=SC2086  # $json is two words or none
  "$python" tools/bench/torch_storm.py --dir "$mnt/storm" --baseline "$plain/storm" \
    --ranks "$ranks" --size "$size" --repeat "$repeat" $json
  local -A storms=([raw8]="--ranks 8 --size 256M" [raw32]="--ranks 32 --size 32M"
                   [torch8]="--workload torch --ranks 8 --size 128M")
  for name in ${STORM_BENCH-raw8 raw32 torch8}; do
    local args=${storms[$name]:?"STORM_BENCH: no storm $name (raw8, raw32, torch8)"}
    echo "== ckptfs-bench $name: $args"
    mkdir -p "$mnt/bench/$name" "$plain/bench/$name"
    # shellcheck disable=SC2086  # args are words on purpose
    ckptfs-bench --dir "$mnt/bench/$name" --baseline "$plain/bench/$name" $args \
      --phases save,load,bcast --repeat "$repeat" --progress off \
      ${out:+--json $out/bench-$name.json}
  done
}

case "${1:-}" in
  bundle) bundle ;;
  run) run ;;
  *) echo "usage: scripts/device-storm.sh bundle|run" >&2; exit 2 ;;
esac
