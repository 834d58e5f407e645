#!/usr/bin/env bash
# Installs the build dependencies that are missing (Debian/Ubuntu packages, and the Python
# packages the extension and the tests need), then configures and builds the release preset into
# build/release. Arguments are build targets (default: everything). The CUDA backend is built when
# nvcc is found; without it the build is CPU-only.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ make libgtest-dev libcli11-dev nlohmann-json3-dev python3)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing missing packages: ${missing[*]}"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
      echo "error: not root and no sudo: install these packages first: ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    "${missing[@]}"
fi

# Python packages: nanobind for the extension (before the configure, which looks for it), numpy
# for the package, pytest for the tests. Into the active venv when there is one.
missing=()
for module in nanobind numpy pytest; do
  python3 -c "import $module" >/dev/null 2>&1 || missing+=("$module")
done
if ((${#missing[@]})); then
  echo "installing missing Python packages: ${missing[*]}"
  python3 -m pip install --quiet --disable-pip-version-check "${missing[@]}" ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages \
      "${missing[@]}"
fi

cmake_version=$(cmake --version | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
if [ "$(printf '%s\n3.25\n' "$cmake_version" | sort -V | head -n 1)" != "3.25" ]; then
  echo "error: CMake >= 3.25 is needed, found $cmake_version (pip install cmake gives a newer one)" >&2
  exit 1
fi

if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if command -v nvcc >/dev/null; then
  echo "nvcc found ($(command -v nvcc)): building the CUDA backend (sm_90a) and the CPU backend"
else
  echo "note: nvcc not found: building the CPU backend only (install CUDA Toolkit 13 for the GPU backend)"
fi

cmake --preset release
if (($#)); then
  cmake --build --preset release -j"$(nproc)" --target "$@"
else
  cmake --build --preset release -j"$(nproc)"
fi
