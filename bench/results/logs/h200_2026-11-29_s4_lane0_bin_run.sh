#!/usr/bin/env bash
# Session 4, second change: histogram passes aggregate lane 0's bin; the select drops its
# count_above pass. All GPU tests, sanitizers, this build against the previous one (litetopk_prev,
# commit bb2053d) side by side, then the indexer benchmark.
set -u
B=build/h200_s3
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$OUT"
echo "== GPU tests"
timeout 150 $B/litetopk_gpu_tests > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" "$OUT/gpu_tests.log" | head -20
echo "== sanitizers"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*IndexerGpuSmall*' > "$OUT/sanitizer.log" 2>&1; echo "memcheck rc=$?"
timeout 80 compute-sanitizer --tool synccheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*FusedUnderSanitizer*:*ColdSampleRetries*:*HotSampleOfMinusInfinity*' >> "$OUT/sanitizer.log" 2>&1; echo "synccheck rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log" | head
echo "== this build (new) against the previous (prev), fused, side by side"
for shape in "131072 64" "262144 64" "1048576 64" "131072 32" "1048576 32"; do
  set -- $shape
  for bin in litetopk_prev litetopk litetopk_prev litetopk; do
    r=$(timeout 30 $B/$bin indexer --T 8192 --S $1 --H $2 --algo fused --bench --iters 3 --warmup 1 2>&1); echo "$r" >> "$OUT/ab.log"
    echo "S=$1 H=$2 $bin $(echo "$r" | grep -E '^T=' | awk '{print $7, $13}') $(echo "$r" | grep -E '^fused:' | awk '{print $2, $7}')"
  done
done
echo "== demo"
timeout 60 $B/litetopk demo > "$OUT/demo.log" 2>&1; echo "demo rc=$?"
echo "== indexer benchmark"
LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 timeout 250 python3 bench/indexer_bench.py --lib $B/liblitetopk_c.so \
  --iters 3 --warmup 1 --out "$OUT/indexer_h200.json" --md "$OUT/indexer_h200.md" > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
cut -d'|' -f2,5,7,11,15 "$OUT/indexer_h200.md" | tail -14
