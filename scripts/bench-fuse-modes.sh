#!/usr/bin/env bash
# bench-fuse-modes.sh: the FUSE data-path modes side by side. For
# each mode, mounts a running ckptfs cluster with ckptfs-fuse and those
# flags, runs the same ckptfs-bench storm against it and a plain directory
# (--baseline, alternating A B over --repeat), and prints one line per mode
# and phase: the median A/B ratio of GB/s, both GB/s, how busy the disk was
# for each, and the CPU seconds per GiB of ckptfs's daemons and of each
# side's ranks in the kernel (a plain directory's whole data path).
#
#   scripts/bench-fuse-modes.sh --meta 127.0.0.1:7000 --mountpoint /tmp/m \
#       --baseline /var/tmp/plain [--credential-file FILE] [--build build] [--workload raw]
#       [--ranks 8] [--size 256M] [--repeat 3] [--phases save,load] [--modes "name:flags;..."]
#       [--bench-args "..."]
#
# A cluster started by `ckptfs up` wants its credential: pass
# --credential-file STATE_DIR/credential. --bench-args go to ckptfs-bench
# as they are (e.g. "--tensor-size 16M").
# The mountpoint must exist and be unmounted; the script mounts and
# unmounts it once per mode and stops only the ckptfs-fuse it started.
set -euo pipefail

meta="" mnt="" baseline="" credential="" build="build" workload="raw" ranks=8 size=256M repeat=3
phases="save,load" bench_args=""
modes="default:;direct-io-reads:--direct_io_reads;no-direct-io:--direct_io_writes=false;writeback:--writeback_cache;splice:--splice;threads-4:--threads=4 --max_threads=4;bg-12:--max_background=12;bg-256:--max_background=256"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --meta) meta="$2"; shift 2 ;;
    --mountpoint) mnt="$2"; shift 2 ;;
    --baseline) baseline="$2"; shift 2 ;;
    --credential-file) credential="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --workload) workload="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --phases) phases="$2"; shift 2 ;;
    --bench-args) bench_args="$2"; shift 2 ;;
    *) echo "bench-fuse-modes.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [[ -z "$meta" || -z "$mnt" || -z "$baseline" ]]; then
  echo "usage: bench-fuse-modes.sh --meta HOST:PORT --mountpoint DIR --baseline DIR [...]" >&2
  exit 2
fi
if mountpoint -q "$mnt"; then
  echo "bench-fuse-modes.sh: $mnt is mounted; unmount it first" >&2
  exit 2
fi

fuse_pid=""
cleanup() {
  if [[ -n "$fuse_pid" ]]; then
    fusermount3 -u "$mnt" 2>/dev/null || true
    wait "$fuse_pid" 2>/dev/null || true
    fuse_pid=""
  fi
}
trap cleanup EXIT

printf '%-16s %-6s %8s %9s %9s %11s %9s %9s %9s\n' mode phase "A/B" A_GB/s B_GB/s busy%_A/B \
  A_daemons A_ranks_k B_ranks_k
IFS=';' read -ra entries <<< "$modes"
for entry in "${entries[@]}"; do
  name="${entry%%:*}"
  flags="${entry#*:}"
  # shellcheck disable=SC2086  # flags are words on purpose
  "$build/bin/ckptfs-fuse" --meta="$meta" --mountpoint="$mnt" --foreground \
      ${credential:+--credential_file="$credential"} $flags \
      2>"/tmp/bench-fuse-modes.$name.log" &
  fuse_pid=$!
  for _ in $(seq 100); do mountpoint -q "$mnt" && break; sleep 0.1; done
  mountpoint -q "$mnt" || { echo "mode $name: the mount did not come up" >&2; exit 1; }
  json="/tmp/bench-fuse-modes.$name.json"
  # shellcheck disable=SC2086  # bench_args are words on purpose
  "$build/bin/ckptfs-bench" --dir "$mnt" --baseline "$baseline" --workload "$workload" \
      --ranks "$ranks" --size "$size" --repeat "$repeat" --phases "$phases" \
      --progress off --json "$json" $bench_args >/dev/null
  python3 - "$json" "$name" "$phases" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
fig = {(s["phase"], s["figure"]): s for s in d["summary"]}
def get(phase, figure, key):
    s = fig.get((phase, figure))
    return s[key] if s and s.get(key) is not None else float("nan")
for phase in sys.argv[3].split(","):
    if (phase, "agg_gbps") not in fig:
        continue
    busy = f'{get(phase, "disk_busy_pct", "median_a"):.0f}/{get(phase, "disk_busy_pct", "median_b"):.0f}'
    print(f'{sys.argv[2]:<16} {phase:<6} {get(phase, "agg_gbps", "ratio_median"):7.2f}x '
          f'{get(phase, "agg_gbps", "median_a"):9.3f} {get(phase, "agg_gbps", "median_b"):9.3f} '
          f'{busy:>11} {get(phase, "target_cpu_s_per_gib", "median_a"):9.3f} '
          f'{get(phase, "rank_system_cpu_s_per_gib", "median_a"):9.3f} '
          f'{get(phase, "rank_system_cpu_s_per_gib", "median_b"):9.3f}')
EOF
  cleanup
done
