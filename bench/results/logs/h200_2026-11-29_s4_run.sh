#!/usr/bin/env bash
# Session 4 final: all GPU tests, sanitizers on the small fused cases, demo, the indexer benchmark.
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
echo "== demo"
timeout 60 $B/litetopk demo > "$OUT/demo.log" 2>&1; echo "demo rc=$?"
grep -E "indexer" "$OUT/demo.log" | head -4
echo "== indexer benchmark"
LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 timeout 250 python3 bench/indexer_bench.py --lib $B/liblitetopk_c.so \
  --iters 3 --warmup 1 --out "$OUT/indexer_h200.json" --md "$OUT/indexer_h200.md" > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
cut -d'|' -f2,5,7,11,15 "$OUT/indexer_h200.md" | tail -14
echo "== fused counters (CLI, H=64 and 32)"
for H in 64 32; do for S in 131072 524288 1048576; do
  r=$(timeout 30 $B/litetopk indexer --T 8192 --S $S --H $H --algo fused --bench --iters 3 --warmup 1 2>&1); echo "$r" >> "$OUT/cli.log"
  echo "H=$H S=$S $(echo "$r" | grep -E '^T=' | awk '{print $7, $13}') $(echo "$r" | grep -E '^fused:' | awk '{print $2, $7}')"
done; done
