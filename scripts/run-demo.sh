#!/usr/bin/env bash
# The main job: installs what is missing (Debian packages; torch 2.13 CPU
# and the ckptfs Python package into the build's virtual environment),
# builds the programs (not the tests), starts a local ckptfs cluster (1
# metadata server on RocksDB, 4 storage servers, all on 127.0.0.1, state
# under $STATE_DIR), mounts it at $MOUNTPOINT, saves and loads a checkpoint
# with torch.save/torch.load, saves one with two ranks through
# torch.distributed.checkpoint and ckptfs.dcp.CkptfsWriter (committed for
# both ranks at once), loads it back from the run directory's latest, and
# shows the result.
# The cluster stays up; the last lines say how to stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE_DIR=${STATE_DIR:-/var/tmp/ckptfs}
MOUNTPOINT=${MOUNTPOINT:-/checkpoints}
BUILD_DIR=${BUILD_DIR:-build}
CKPTFS="$BUILD_DIR/bin/ckptfs"
PYTHON="$BUILD_DIR/venv/bin/python"

bash scripts/install-deps.sh
# The Python environment is made while the programs build (pip mostly waits
# on the disk, the compiler on the CPU); its output follows the build's.
mkdir -p "$BUILD_DIR"
PY_LOG="$BUILD_DIR/install-python.log"
bash scripts/install-python.sh demo >"$PY_LOG" 2>&1 &
py_pid=$!
trap 'wait "$py_pid" 2>/dev/null || true' EXIT  # should the build fail
BUILD_TARGETS="ckptfs ckptfs-meta ckptfs-storage ckptfs-fuse" bash scripts/build.sh
if ! wait "$py_pid"; then
  cat "$PY_LOG" >&2
  echo "run-demo: making the Python environment failed (above; also in $PY_LOG)" >&2
  exit 1
fi
trap - EXIT
cat "$PY_LOG"

if grep -qE " $MOUNTPOINT fuse\.ckptfs " /proc/mounts; then
  echo "== ckptfs is already mounted at $MOUNTPOINT; using it"
else
  echo "== starting a local cluster (state in $STATE_DIR), mounting $MOUNTPOINT"
  "$CKPTFS" up --state-dir "$STATE_DIR" --mountpoint "$MOUNTPOINT"
fi

CKPT="$MOUNTPOINT/run1/step_1000/rank_00017.pt"
mkdir -p "$(dirname "$CKPT")"
echo "== torch.save -> $CKPT, then torch.load"
"$PYTHON" - "$CKPT" <<'PY'
import os, sys, time, torch
path = sys.argv[1]
state = {f"layer{i}.weight": torch.randn(1024, 1024 + 17 * i) for i in range(8)}
state["step"] = torch.tensor(1000)
t0 = time.time(); torch.save(state, path); t1 = time.time()
back = torch.load(path); t2 = time.time()
assert all(torch.equal(state[k], back[k]) for k in state), "checkpoint differs after load"
mb = os.stat(path).st_size / 1e6
print(f"saved {mb:.1f} MB in {t1 - t0:.2f} s, loaded in {t2 - t1:.2f} s: equal")
PY
echo "== what is on the mount"
ls -l "$(dirname "$CKPT")"

RUN="$MOUNTPOINT/run1"
STEP="$RUN/step_$(date +%s)"
echo "== torch.distributed.checkpoint: 2 ranks save $STEP with CkptfsWriter"
"$CKPTFS" ckpt keep "$RUN" 3 >/dev/null   # reruns keep the 3 newest
"$PYTHON" scripts/demo_dcp.py "$STEP"
"$CKPTFS" ckpt ls "$RUN" --all
"$PYTHON" -c 'import sys, ckptfs; print("resume from:", ckptfs.latest(sys.argv[1]))' "$RUN"
df -h "$MOUNTPOINT"
echo
echo "ckptfs is mounted at $MOUNTPOINT. Stop it with:"
echo "  $CKPTFS down --state-dir $STATE_DIR"
