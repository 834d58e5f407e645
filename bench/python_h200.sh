#!/usr/bin/env bash
# The Python package on the GPU machine: `pip install` of litetopk linking the library already
# built in $BUILD (default build/release: only the binding compiles), then pytest tests/python
# (every op against its reference on the GPU, torch.compile fullgraph, CUDA graphs, fake tensors,
# the host time per eager call) and the example DSA indexer module (eager, compiled, in a CUDA
# graph). Run from the repo root; writes $OUT/python.log (default OUT=bench/results/h200_<date>).
# A failing step does not stop the others; the script exits non-zero when one failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench/results/h200_$(date +%F)}
BUILD=${BUILD:-build/release}
mkdir -p "$OUT"
LOG="$OUT/python.log"
export PYTHONUNBUFFERED=1
export PATH="$PATH:/usr/local/cuda/bin"
# The system libstdc++ first in a torch process (shared/H200.md); the extension carries its own.
if [ -f /usr/lib/x86_64-linux-gnu/libstdc++.so.6 ]; then
  export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6
fi
failed=()

step() {
  local name=$1
  shift
  echo "== $name" | tee -a "$LOG"
  "$@" 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "== $name FAILED (exit $rc)" | tee -a "$LOG"
    failed+=("$name")
  fi
}

# build/python keeps scikit-build-core's build folder, so that a second install is incremental.
step "pip install" python3 -m pip install --no-build-isolation --no-deps \
  --disable-pip-version-check . -C cmake.define.LITETOPK_PREBUILT_DIR="$BUILD" \
  -C build-dir=build/python
step "import" python3 -c "import litetopk, torch; print(litetopk.__file__, litetopk.build_info(),
torch.__version__, torch.cuda.get_device_name())"
step "pytest" python3 -m pytest -q -rs tests/python
step "example, eager" python3 examples/dsa_indexer.py --tokens 8192 --topk 2048
step "example, torch.compile fullgraph" python3 examples/dsa_indexer.py --tokens 8192 \
  --topk 2048 --compile
step "example, CUDA graph" python3 examples/dsa_indexer.py --tokens 8192 --topk 2048 --graph
step "example, compiled in a CUDA graph" python3 examples/dsa_indexer.py --tokens 8192 \
  --topk 2048 --compile --graph

echo
if ((${#failed[@]})); then
  echo "FAILED steps: ${failed[*]} (log: $LOG)" | tee -a "$LOG"
  exit 1
fi
echo "all Python steps passed (log: $LOG)" | tee -a "$LOG"
