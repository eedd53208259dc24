#!/usr/bin/env bash
# Installs exactly the Debian 12 packages ckptfs needs that are not yet
# installed. Safe to run repeatedly; runs `apt-get update` first only when
# something is missing. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libfuse3-dev fuse3 liburing-dev libabsl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libgtest-dev libgmock-dev librocksdb-dev libisal-dev
  etcd-server
  # the certificates of the local etcd members (tools/local_etcd.h)
  openssl
  python3 python3-venv python3-torch python3-numpy
  strace
  # tests/fuzz/run_fuzzers.sh (libFuzzer) and the lock-annotation check
  # (tests/repo); the runtime library is named because
  # --no-install-recommends would leave it out.
  clang-14 libclang-rt-14-dev
  # the format check (tests/repo)
  clang-format-14
  # the linker the build takes when present (cmake/CkptfsBuildCost.cmake)
  mold
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -q
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
