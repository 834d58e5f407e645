#!/usr/bin/env bash
# Everything litetopk measures and checks on the H200, in one go. Run from the repo root on the GPU
# machine, with the release build already in build/release (scripts/build.sh). Writes at most 11
# files into $OUT (default bench/results/h200_<date>):
#   gpu_tests.log   ctest --preset release-gpu
#   sanitizer.log   compute-sanitizer memcheck and racecheck on the GPU tests named *Small*
#   demo.log        litetopk info and litetopk demo
#   python.log      bench/python_h200.sh: pip install of the package (linking $BUILD), pytest
#                   tests/python, the example DSA indexer module; the benchmarks import it
#   bench.log       the output of the benchmarks (the indexer's, decode's and attention's markdown
#                   tables too) and of `litetopk dsa` (a DSA layer, 4096 x 128K, h_q 16)
#   select_h200.json, select_h200.md, select_h200.png   bench/select_bench.py
#   indexer_h200.json                                    bench/indexer_bench.py
#   decode_h200.json                                     bench/decode_bench.py
#   attention_h200.json                                  bench/attention_bench.py (with FlashMLA
#                                                        when its build is importable)
# Arguments go to select_bench.py (e.g. --iters 10, --shapes 8192x131072x2048); INDEXER_ARGS to
# indexer_bench.py (e.g. INDEXER_ARGS="--shapes-quick --peer deepgemm"); DECODE_ARGS to
# decode_bench.py; ATTENTION_ARGS to attention_bench.py (default "--algos auto,per-query"; add
# "--peer flashmla" with a FlashMLA build from its public source on PYTHONPATH). A failing
# step does not stop the others; the failed ones are listed at the end, before the tables.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench/results/h200_$(date +%F)}
BUILD=${BUILD:-build/release}  # a configured and built build folder
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PATH="$PATH:/usr/local/cuda/bin"
failed=()

# step NAME LOG COMMAND...: runs COMMAND, appending its output to LOG and to the terminal.
step() {
  local name=$1 log=$2
  shift 2
  echo "== $name" | tee -a "$log"
  "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    echo "== $name FAILED (exit $rc)" | tee -a "$log"
    failed+=("$name")
  fi
}

gpu_tests() {
  # CTest files hold the absolute paths of the folder the build was configured in.
  if [ "$BUILD" = build/release ] && grep -qF "$PWD/build/release" build/release/CTestTestfile.cmake; then
    ctest --preset release-gpu
  else
    "$BUILD"/litetopk_gpu_tests
  fi
}

step "GPU tests" "$OUT/gpu_tests.log" gpu_tests
for tool in memcheck racecheck; do
  step "compute-sanitizer $tool" "$OUT/sanitizer.log" compute-sanitizer --tool "$tool" \
    --error-exitcode 1 "$BUILD"/litetopk_gpu_tests --gtest_filter='*Small*'
done
step "litetopk info" "$OUT/demo.log" "$BUILD"/litetopk info
step "litetopk demo" "$OUT/demo.log" "$BUILD"/litetopk demo
OUT="$OUT" BUILD="$BUILD" bench/python_h200.sh || failed+=("Python package")
# torch's process wants the system libstdc++ first (shared/H200.md; DeepGEMM needs it).
step "select benchmark" "$OUT/bench.log" env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
  python3 bench/select_bench.py --out "$OUT/select_h200.json" --md "$OUT/select_h200.md" \
  --png "$OUT/select_h200.png" "$@"
# The indexer's and decode's markdown tables go to temporary files (they are also in bench.log),
# so that $OUT keeps to 10 files.
INDEXER_MD=$(mktemp)
# shellcheck disable=SC2086  # INDEXER_ARGS is a list of options
step "indexer benchmark" "$OUT/bench.log" env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
  python3 bench/indexer_bench.py --out "$OUT/indexer_h200.json" \
  --md "$INDEXER_MD" \
  ${INDEXER_ARGS:-}

DECODE_MD=$(mktemp)
trap 'rm -f "$INDEXER_MD" "$DECODE_MD"' EXIT
# shellcheck disable=SC2086  # DECODE_ARGS is a list of options
step "decode benchmark" "$OUT/bench.log" env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
  python3 bench/decode_bench.py --out "$OUT/decode_h200.json" \
  --md "$DECODE_MD" \
  ${DECODE_ARGS:-}

ATTENTION_MD=$(mktemp)
trap 'rm -f "$INDEXER_MD" "$DECODE_MD" "$ATTENTION_MD"' EXIT
# shellcheck disable=SC2086  # ATTENTION_ARGS is a list of options
step "attention benchmark" "$OUT/bench.log" env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 \
  python3 bench/attention_bench.py --json "$OUT/attention_h200.json" --md "$ATTENTION_MD" \
  ${ATTENTION_ARGS:---algos auto,per-query}
step "DSA layer" "$OUT/bench.log" "$BUILD"/litetopk dsa --device gpu --tokens 4096 \
  --context 131072 --heads 16

echo
if ((${#failed[@]})); then
  echo "FAILED steps: ${failed[*]} (logs in $OUT)"
else
  echo "all steps passed (logs in $OUT)"
fi
echo
[ -f "$OUT/select_h200.md" ] && cat "$OUT/select_h200.md"
[ -s "$INDEXER_MD" ] && { echo; cat "$INDEXER_MD"; }
[ -s "$DECODE_MD" ] && { echo; cat "$DECODE_MD"; }
[ -s "$ATTENTION_MD" ] && { echo; cat "$ATTENTION_MD"; }
((${#failed[@]} == 0))
