#!/usr/bin/env bash
# The litetopk tests: installs what is missing and builds everything (scripts/build.sh), runs the
# C++ CPU tests (every ctest without the `gpu` label), the GPU tests too when nvidia-smi sees a
# GPU, then the Python tests (tests/python, pytest) against the package in python/ with the
# extension the build wrote into build/release/python/litetopk (torch tests are skipped when torch
# is not installed, GPU ones without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
ctest --preset release -j"$(nproc)"
if nvidia-smi >/dev/null 2>&1; then
  ctest --preset release-gpu
else
  echo "no GPU (nvidia-smi failed): GPU tests skipped"
fi
PYTHONPATH="$PWD/python:$PWD/build/release/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q tests/python
