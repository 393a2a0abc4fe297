#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for habana_torch and installs it:
# system packages (compilers, CMake, OpenBLAS, OpenMPI, CUnit, valgrind), the CPU
# torch==2.13.0 wheel, then the package itself built against that torch.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake pkg-config libopenblas-dev openmpi-bin libopenmpi-dev
              libcunit1-dev iproute2 valgrind)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing system packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if ! $PY -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('2.13.0') else 1)" 2>/dev/null; then
  echo "== installing torch==2.13.0 (CPU)"
  $PY -m pip install -q torch==2.13.0
fi
$PY -m pip install -q -r requirements-dev.txt

echo "== building habana_torch (C core, HCCL, PyTorch shim)"
HPU_BUILD_JOBS=${HPU_BUILD_JOBS:-$(nproc)} $PY -m pip install -q --no-build-isolation . 
$PY -c "import torch, habana_torch; print('habana_torch ready:', torch.hpu.device_count(), 'hpu cards')"
