#!/usr/bin/env bash
# bench-meta-backends.sh: the RocksDB vs etcd metadata benchmark, in one
# run on this machine. Starts, in a temporary directory on
# 127.0.0.1:
#   - ckptfs-meta on RocksDB, with one storage server;
#   - a 3-member etcd cluster and ckptfs-meta on it, with one storage server;
# then runs ckptfs-meta-bench against both (create+close, stat, readdir of
# --files entries; alternating, median of --repeat) and ckptfs-barrier-bench
# --ranks 1024 against each (commit latency p50/p99, the metadata server's
# CPU and peak memory; for etcd also the etcd members' CPU), and stops
# everything it started (by PID) and removes the directory.
#
#   scripts/bench-meta-backends.sh [--build build] [--files 10000] [--threads 16]
#                                  [--repeat 3] [--ranks 1024]
set -euo pipefail

build="build" files=10000 threads=16 repeat=3 ranks=1024
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --files) files="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    *) echo "bench-meta-backends.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin="$(cd "$build/bin" && pwd)"
command -v etcd >/dev/null || { echo "etcd is not installed (apt-get install etcd-server)" >&2; exit 1; }
dir="$(mktemp -d "${TMPDIR:-/tmp}/ckptfs-meta-bench.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n "${KEEP_DIR:-}" ]]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
trap cleanup EXIT

# A free port on 127.0.0.1.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_log() {  # FILE TEXT
  for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for \"$2\" in $1:" >&2; tail -20 "$1" >&2; return 1
}
cpu_ticks() {  # PID...: utime+stime of the processes, in clock ticks
  local total=0
  for pid in "$@"; do
    read -r -a f < "/proc/$pid/stat"
    total=$((total + f[13] + f[14]))
  done
  echo "$total"
}

# etcd: 3 members, configured as ckptfs needs (large transactions).
cluster="" endpoints=""
declare -a cports pports
for i in 0 1 2; do cports[$i]=$(free_port); pports[$i]=$(free_port); done
for i in 0 1 2; do
  cluster+="${cluster:+,}m$i=http://127.0.0.1:${pports[$i]}"
  endpoints+="${endpoints:+,}127.0.0.1:${cports[$i]}"
done
etcd_pids=()
for i in 0 1 2; do
  etcd --name "m$i" --data-dir "$dir/etcd$i" \
    --listen-client-urls "http://127.0.0.1:${cports[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${cports[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${pports[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${pports[$i]}" \
    --initial-cluster "$cluster" --initial-cluster-state new \
    --initial-cluster-token "bench-$$" --max-txn-ops 100000 \
    --max-request-bytes 67108864 --logger zap --log-level warn \
    >"$dir/etcd$i.log" 2>&1 &
  pids+=($!) etcd_pids+=($!)
done

start_meta() {  # NAME FLAGS...: starts ckptfs-meta and one storage server
  local name="$1"; shift
  local port sport
  port=$(free_port) sport=$(free_port)
  mkdir -p "$dir/$name-storage"
  "$bin/ckptfs-meta" --listen="127.0.0.1:$port" --orphan_grace_s=0 --replicas=1 "$@" >"$dir/$name-meta.log" 2>&1 &
  pids+=($!)
  eval "${name}_meta=127.0.0.1:$port ${name}_pid=$!"
  wait_log "$dir/$name-meta.log" "serving on"
  "$bin/ckptfs-storage" --listen="127.0.0.1:$sport" --data_dir="$dir/$name-storage" \
    --meta="127.0.0.1:$port" --buffer_pool_mb=65 >"$dir/$name-storage.log" 2>&1 &
  pids+=($!)
  wait_log "$dir/$name-meta.log" "registered"
}
start_meta rocksdb --data_dir="$dir/rocksdb-meta"
start_meta etcd --kv_backend=etcd --etcd_endpoints="$endpoints" --etcd_prefix=/bench/
sleep 3  # storage heartbeats: both servers alive

echo "== metadata operations ($files files in one directory, $threads threads, median of $repeat)"
"$bin/ckptfs-meta-bench" --meta "rocksdb=$rocksdb_meta" --meta "etcd=$etcd_meta" \
  --files "$files" --threads "$threads" --repeat "$repeat"

for name in rocksdb etcd; do
  meta_var="${name}_meta" pid_var="${name}_pid"
  echo "== commit barrier, $ranks ranks, $name backend"
  before=$(cpu_ticks "${etcd_pids[@]}")
  "$bin/ckptfs-barrier-bench" --meta "${!meta_var}" --meta-pid "${!pid_var}" --ranks "$ranks"
  after=$(cpu_ticks "${etcd_pids[@]}")
  if [[ $name == etcd ]]; then
    echo "etcd members' CPU during the run: $(( (after - before) * 1000 / $(getconf CLK_TCK) )) ms"
  fi
done
