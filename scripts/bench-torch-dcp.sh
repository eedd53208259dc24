#!/usr/bin/env bash
# bench-torch-dcp.sh: torch.distributed.checkpoint (DCP) and torch.save on a
# ckptfs mount against a plain directory on the same disk, in one run on
# this machine (docs/benchmarks-torch.md explains how to read it).
#
# Starts a local cluster (1 metadata server, 4 storage servers, 1 copy of
# each chunk) under --work on free ports below the kernel's ephemeral
# range, mounts it, and runs bench/torch_storm.py, --ranks x --size,
# --repeat alternating repeats (ckptfs, plain, ckptfs, plain, ...), once per
# --runs entry:
#   torch   torch.save / torch.load
#   stock   DCP save/load, FileSystemWriter as DCP ships it (an fsync per file)
#   nosync  DCP save/load, FileSystemWriter(sync_files=False), for reference
#   ckptfs  DCP save/load, ckptfs.dcp.CkptfsWriter/CkptfsReader: each save a
#           committed checkpoint (no fsync; one sync per storage server),
#           removed after its repeat; on the plain directory the writer
#           falls back to the stock fsync per file
# Each run's JSON report and output go to --out, then one table of them
# all (also --out/summary.txt). A failed run is reported and the next one
# runs (exit status 1 then). The cluster is stopped, the mount unmounted
# and --work removed at the end, also on failure or interrupt.
#
#   scripts/bench-torch-dcp.sh [--ranks 8] [--size 256M] [--repeat 3]
#       [--runs torch,stock,nosync,ckptfs] [--dcp-thread-count N]
#       [--tensors N] [--dcp-file-per-tensor]
#       [--work /var/tmp/ckptfs-torch-dcp.XXXXXX] [--out DIR] [--build build]
#       [--python build/venv/bin/python] [--phase-timeout 600]
set -euo pipefail
cd "$(dirname "$0")/.."

ranks=8 size=256M repeat=3 runs=torch,stock,nosync,ckptfs threads="" build=build
tensors="" per_tensor=""
python="" work="" out="" phase_timeout=600
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) ranks="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --dcp-thread-count) threads="$2"; shift 2 ;;
    --tensors) tensors="$2"; shift 2 ;;
    --dcp-file-per-tensor) per_tensor=1; shift ;;
    --work) work="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --phase-timeout) phase_timeout="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-torch-dcp.sh: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done
IFS=, read -r -a run_list <<< "$runs"
for run in "${run_list[@]}"; do
  case "$run" in
    torch|stock|nosync|ckptfs) ;;
    *) echo "bench-torch-dcp.sh: --runs: no run $run (torch, stock, nosync, ckptfs)" >&2; exit 2 ;;
  esac
done
bin="$(cd "$build/bin" && pwd)"
python=${python:-$build/venv/bin/python}
"$python" -c 'import torch.distributed.checkpoint, ckptfs.dcp' 2>/dev/null || {
  echo "bench-torch-dcp.sh: $python cannot import torch.distributed.checkpoint and ckptfs.dcp" \
       "(scripts/install-python.sh makes the build's venv)" >&2
  exit 1
}
work=${work:-$(mktemp -d /var/tmp/ckptfs-torch-dcp.XXXXXX)}
out=${out:-/var/tmp/bench-torch-dcp.$(date +%Y%m%d-%H%M%S)}
mkdir -p "$work" "$out"
out="$(cd "$out" && pwd)"
mnt=$work/mnt plain=$work/plain state=$work/cluster

# Stops the cluster this run started, unmounts what is still mounted under
# $work and removes $work, never crossing into another file system.
cleanup() {
  local rc=$?
  if [[ -f "$state/cluster.state" ]]; then
    "$bin/ckptfs" down --state-dir "$state" >/dev/null 2>&1 || true
    tar -czf "$out/cluster-logs.tgz" -C "$state" logs 2>/dev/null || true
  fi
  if mountpoint -q "$mnt" 2>/dev/null; then
    fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  fi
  if mountpoint -q "$mnt" 2>/dev/null; then
    echo "bench-torch-dcp.sh: $mnt is still mounted; $work left in place" >&2
  else
    rm -rf --one-file-system "$work"
  fi
  exit "$rc"
}
# The storm runs in the background, so that a signal reaches this script
# while it waits: the storm is stopped (SIGTERM: it stops its ranks and
# removes its step directories), then cleanup runs.
storm_pid=""
on_signal() {
  echo "bench-torch-dcp.sh: interrupted; stopping the storm and the cluster" >&2
  if [[ -n "$storm_pid" ]]; then
    kill -TERM "$storm_pid" 2>/dev/null || true
    wait "$storm_pid" 2>/dev/null || true
  fi
  exit 130
}
trap cleanup EXIT
trap on_signal INT TERM

if [[ "$(stat -f -c %T "$work")" == tmpfs ]]; then
  echo "bench-torch-dcp.sh: $work is on tmpfs, not a disk; pass --work" >&2
  exit 1
fi

# The first of 5 consecutive free ports on 127.0.0.1 (metadata + 4 storage
# servers), below the kernel's ephemeral range.
port=$(python3 - <<'EOF'
import random, socket
def free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
for _ in range(200):
    base = random.randrange(20000, 32000 - 5)
    if all(free(base + i) for i in range(5)):
        print(base)
        break
else:
    raise SystemExit("no 5 consecutive free ports in [20000, 32000)")
EOF
)

{
  echo "== $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, kernel $(uname -r)," \
       "ckptfs $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "== work $work on: $(df --output=source,fstype "$work" | tail -1)"
  echo "== $("$python" -c 'import torch; print("torch", torch.__version__)')," \
       "$ranks ranks x $size, $repeat repeats, runs $runs"
} | tee "$out/env.txt"
if ! "$bin/ckptfs" up --state-dir "$state" --mountpoint "$mnt" --replicas 1 --orphan-grace-s 5 \
    --metrics-port 0 --no-repair --host 127.0.0.1 --meta-port "$port" \
    --storage-port "$((port + 1))" >"$out/up.log" 2>&1; then
  cat "$out/up.log" >&2
  exit 1
fi
echo "== cluster: metadata on 127.0.0.1:$port, 4 storage servers, 1 copy, mounted at $mnt"
mkdir -p "$plain"

failed=0
reports=()
for run in "${run_list[@]}"; do
  args=(--ranks "$ranks" --size "$size" --repeat "$repeat" --phase-timeout "$phase_timeout")
  [[ -n "$tensors" ]] && args+=(--tensors "$tensors")
  if [[ $run == torch ]]; then
    args+=(--phases save,load)
  else
    args+=(--phases dcp_save,dcp_load --dcp-writer "$run")
    [[ -n "$threads" ]] && args+=(--dcp-thread-count "$threads")
    [[ -n "$per_tensor" ]] && args+=(--dcp-file-per-tensor)
  fi
  echo
  echo "== $run: torch_storm.py ${args[*]}"
  exec {log}> >(tee "$out/$run.log")
  tee_pid=$!
  "$python" bench/torch_storm.py --dir "$mnt/$run" --baseline "$plain/$run" \
    "${args[@]}" --json "$out/$run.json" >&"$log" 2>&1 &
  storm_pid=$!
  status=0
  wait "$storm_pid" || status=$?
  storm_pid=""
  exec {log}>&-
  wait "$tee_pid" || true  # all of the run's output shown before what follows
  if [[ $status -eq 0 ]]; then
    reports+=("$out/$run.json")
  else
    echo "bench-torch-dcp.sh: run $run failed (its output: $out/$run.log)" >&2
    failed=1
  fi
done

echo
if [[ ${#reports[@]} -gt 0 ]]; then
  python3 - "${reports[@]}" <<'EOF' | tee "$out/summary.txt"
import json, os, sys

def fmt(x, width, digits=3):
    return f"{x:{width}.{digits}f}" if isinstance(x, (int, float)) else f"{'-':>{width}s}"

print("Medians of the repeats; GB/s = 1e9 bytes/s; CPU in seconds per GiB moved.")
print("ckptfs CPU = its daemons (fuse, meta, storage) + the ranks; plain CPU = the ranks.")
print()
print(f"{'run':7s} {'phase':9s} {'writer ckptfs/plain':23s} {'ckptfs':>7s} {'plain':>7s} "
      f"{'ratio':>6s} {'daemons':>8s} {'ranks':>7s} {'total':>7s} {'plain':>7s}")
print(f"{'':7s} {'':9s} {'':23s} {'GB/s':>7s} {'GB/s':>7s} {'':>6s} "
      f"{'CPU':>8s} {'CPU':>7s} {'CPU':>7s} {'CPU':>7s}")
for path in sys.argv[1:]:
    d = json.load(open(path))
    run = os.path.splitext(os.path.basename(path))[0]
    writers = d.get("dcp_writers") or {}
    for row in d["summary"]:
        a, b = row.get("A", {}), row.get("B", {})
        if row["phase"].startswith("dcp_"):
            writer = f"{writers.get('A', '?')}/{writers.get('B', '?')}"
        else:
            writer = "torch.save/load"
        daemons, ranks = a.get("daemon_cpu_s_per_gib"), a.get("rank_cpu_s_per_gib")
        total = daemons + ranks if daemons is not None and ranks is not None else None
        ratio = row.get("ratio")
        print(f"{run:7s} {row['phase']:9s} {writer:23s} {fmt(a.get('gbps'), 7)} "
              f"{fmt(b.get('gbps'), 7)} {fmt(ratio, 5, 2)}x {fmt(daemons, 8)} {fmt(ranks, 7)} "
              f"{fmt(total, 7)} {fmt(b.get('rank_cpu_s_per_gib'), 7)}")
    done = [c for c in d.get("checkpoints", []) if c.get("state") == "committed"
            and c.get("arrived") == d["ranks"] and c.get("removed")]
    if d.get("checkpoints"):
        print(f"  {run}: {len(done)} of {len(d['checkpoints'])} DCP saves on ckptfs committed "
              f"by all {d['ranks']} ranks and removed afterwards")
    for note in d.get("notes", []):
        print(f"  {run}: {note}")
EOF
fi
echo "reports in $out"
exit "$failed"
