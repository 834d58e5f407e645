#!/usr/bin/env bash
# The litetopk demo: installs what is missing, builds, runs `litetopk demo` (on the GPU when
# there is one, else on the CPU). Extra arguments go to the demo (e.g. --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh litetopk_cli
build/release/litetopk info
echo
build/release/litetopk demo "$@"
