#!/usr/bin/env bash
# Session 4, last: the lane-0-bin aggregation reverted, the count_above pass still dropped. All GPU
# tests, sanitizers, and this build against commit ed165e9's kernel (litetopk_prev) side by side.
set -u
B=build/h200_s3
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$OUT"
timeout 100 $B/litetopk_gpu_tests > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" "$OUT/gpu_tests.log" | head -20
timeout 50 compute-sanitizer --tool memcheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*IndexerGpuSmall*' > "$OUT/sanitizer.log" 2>&1; echo "memcheck rc=$?"
timeout 40 compute-sanitizer --tool synccheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*FusedUnderSanitizer*:*ColdSampleRetries*:*HotSampleOfMinusInfinity*' >> "$OUT/sanitizer.log" 2>&1; echo "synccheck rc=$?"
grep -E "ERROR SUMMARY" "$OUT/sanitizer.log" | head
for shape in "131072 64" "262144 64" "1048576 64" "1048576 32"; do
  set -- $shape
  for bin in litetopk_prev litetopk litetopk_prev litetopk; do
    r=$(timeout 20 $B/$bin indexer --T 8192 --S $1 --H $2 --algo fused --bench --iters 3 --warmup 1 2>&1); echo "$r" >> "$OUT/ab.log"
    echo "S=$1 H=$2 $bin $(echo "$r" | grep -E '^T=' | awk '{print $7, $13}')"
  done
done
