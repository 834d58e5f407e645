#!/usr/bin/env bash
# Session 3 final: all GPU tests, sanitizers on the small fused cases, demo, the indexer benchmark
# on every default shape, and the fused kernel's candidates with and without the cold sample.
set -u
B=build/h200_s3
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$OUT"
nvidia-smi -L
echo "== GPU tests"
timeout 300 $B/litetopk_gpu_tests > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|cold sample|hot sample \(" "$OUT/gpu_tests.log" | head -20
echo "== sanitizers"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*IndexerGpuSmall*' > "$OUT/sanitizer.log" 2>&1; echo "memcheck rc=$?"
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*FusedUnderSanitizer*:*ColdSampleRetries*' >> "$OUT/sanitizer.log" 2>&1; echo "racecheck rc=$?"
timeout 100 compute-sanitizer --tool synccheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*FusedUnderSanitizer*:*ColdSampleRetries*' >> "$OUT/sanitizer.log" 2>&1; echo "synccheck rc=$?"
grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log" | head
echo "== demo"
timeout 120 $B/litetopk demo > "$OUT/demo.log" 2>&1; echo "demo rc=$?"
echo "== cold sample (CLI)"
for S in 131072 1048576; do
  for tiles in default 0 128; do
    if [ $tiles = default ]; then e=LITETOPK_UNUSED=1; else e=LITETOPK_COLD_SAMPLE_TILES=$tiles; fi
    out=$(env $e $B/litetopk indexer --T 8192 --S $S --algo fused --bench --iters 3 --warmup 1 2>&1)
    echo "$out" >> "$OUT/cli.log"
    echo "S=$S tiles=$tiles | $(echo "$out" | grep -E "^T=" | awk '{print $7, $13}') | $(echo "$out" | grep -E "^fused:" | awk '{print $2, $7}')"
  done
done
echo "== indexer benchmark"
LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 timeout 400 python3 bench/indexer_bench.py --lib $B/liblitetopk_c.so \
  --out "$OUT/indexer_h200.json" --md "$OUT/indexer_h200.md" > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
cut -d'|' -f2,5,7,11,15 "$OUT/indexer_h200.md" | tail -16
