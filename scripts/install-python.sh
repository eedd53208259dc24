#!/usr/bin/env bash
# Creates (or updates) the Python environment the demo and the tests use:
# ${BUILD_DIR:-build}/venv, a virtual environment of Python 3.11 holding the
# ckptfs package (python/, installed editable) and what it needs from PyPI,
# every version pinned by python/constraints.txt (torch 2.13.0, CPU build).
#
# Usage: scripts/install-python.sh demo|test
#   demo: torch and numpy (what scripts/run-demo.sh runs);
#   test: that plus pytest, safetensors and the training frameworks the
#         tests drive (Lightning, Hugging Face transformers and accelerate,
#         DeepSpeed, torchtitan, Megatron-Core, NVIDIA Resiliency Extension).
#
# Python: $PYTHON if set, else the first Python 3.11 among `python3.11` and
# `python3` on PATH, else Debian's /usr/bin/python3 (3.11 on Debian 12; its
# venv module comes with python3-venv, which scripts/install-deps.sh
# installs). Nothing is installed when the environment already holds the
# same pinned set (a stamp in the venv records it), so reruns need no
# network.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
VENV="$BUILD_DIR/venv"
SET=${1:-test}
case "$SET" in
  demo) REQUIREMENTS=(python/requirements-demo.txt) ;;
  test) REQUIREMENTS=(python/requirements-test.txt python/requirements-test-torch-build.txt
                     python/requirements-test-no-deps.txt) ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

pick_python() {
  local candidate version
  for candidate in ${PYTHON:-} python3.11 python3 /usr/bin/python3; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    version=$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
    if [ "$version" = "3.11" ]; then
      command -v "$candidate"
      return 0
    fi
  done
  return 1
}

if [ ! -x "$VENV/bin/python" ]; then
  if ! python=$(pick_python); then
    echo "install-python: no Python 3.11 found (looked at \$PYTHON, python3.11, python3," \
      "/usr/bin/python3); torch 2.13.0's CPU build needs 3.11. Set PYTHON=/path/to/python3.11." >&2
    exit 1
  fi
  echo "install-python: creating $VENV with $python"
  if ! "$python" -m venv "$VENV"; then
    echo "install-python: '$python -m venv' failed; on Debian install python3-venv" \
      "(scripts/install-deps.sh does)." >&2
    rm -rf "$VENV"
    exit 1
  fi
fi

# The stamp: which sets are installed, and the hash of every file that
# decides what they hold.
stamp="$VENV/.ckptfs-$SET"
want=$(cat python/constraints.txt python/pyproject.toml "${REQUIREMENTS[@]}" python/requirements-demo.txt |
  sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install-python: $VENV already holds the '$SET' set"
  exit 0
fi

pip=("$VENV/bin/python" -m pip install --disable-pip-version-check -q -c python/constraints.txt)
echo "install-python: installing the '$SET' set into $VENV"
"${pip[@]}" setuptools
"${pip[@]}" -r "${REQUIREMENTS[0]}"
for extra in "${REQUIREMENTS[@]:1}"; do
  case "$extra" in
    # These builds import torch: build them against the venv's own.
    *-torch-build.txt) DS_BUILD_OPS=0 "${pip[@]}" --no-build-isolation -r "$extra" ;;
    # Their declared dependencies are far more than the tests use.
    *-no-deps.txt) "${pip[@]}" --no-deps -r "$extra" ;;
  esac
done
"${pip[@]}" --no-build-isolation --no-deps -e python
echo "$want" >"$stamp"
"$VENV/bin/python" -c 'import torch, ckptfs; print("install-python: torch", torch.__version__, "and ckptfs", ckptfs.__version__, "ready")'
