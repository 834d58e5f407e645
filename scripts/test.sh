#!/usr/bin/env bash
# The litetopk tests: installs what is missing, builds everything, runs the C++ CPU tests (every
# ctest without the `gpu` label), the GPU tests too when nvidia-smi sees a GPU, then the Python
# tests (tests/python, pytest) against the package in python/ with the extension the build wrote
# there (torch tests are skipped when torch is not installed, GPU ones without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."

# Python packages for the extension's build (nanobind) and the tests (pytest, numpy).
missing=()
for module in nanobind pytest numpy; do
  python3 -c "import $module" >/dev/null 2>&1 || missing+=("$module")
done
if ((${#missing[@]})); then
  echo "installing missing Python packages: ${missing[*]}"
  python3 -m pip install --quiet --disable-pip-version-check "${missing[@]}" ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages \
      "${missing[@]}"
fi

scripts/build.sh
ctest --preset cpu -j"$(nproc)"
if nvidia-smi >/dev/null 2>&1; then
  ctest --preset gpu
else
  echo "no GPU (nvidia-smi failed): GPU tests skipped"
fi
PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -q tests/python
