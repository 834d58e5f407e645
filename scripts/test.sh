#!/usr/bin/env bash
# The litetopk tests: installs what is missing, builds everything, runs the CPU tests (every test
# without the `gpu` label), and the GPU tests too when nvidia-smi sees a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --preset cpu -j"$(nproc)"
if nvidia-smi >/dev/null 2>&1; then
  ctest --preset gpu
else
  echo "no GPU (nvidia-smi failed): GPU tests skipped"
fi
