#!/usr/bin/env bash
# Session 4 first call: all GPU tests and the sanitizers on HEAD, the demo, and a CLI timing check.
set -u
B=build/h200_s3
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$OUT"
nvidia-smi -L
git log -1 --oneline 2>/dev/null
echo "== GPU tests"
timeout 200 $B/litetopk_gpu_tests > "$OUT/gpu_tests.log" 2>&1; echo "gpu tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" "$OUT/gpu_tests.log" | head -20
echo "== sanitizers"
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*IndexerGpuSmall*' > "$OUT/sanitizer.log" 2>&1; echo "memcheck rc=$?"
timeout 100 compute-sanitizer --tool synccheck --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*FusedUnderSanitizer*:*ColdSampleRetries*:*HotSampleOfMinusInfinity*' >> "$OUT/sanitizer.log" 2>&1; echo "synccheck rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer.log" | head
echo "== demo"
timeout 120 $B/litetopk demo > "$OUT/demo.log" 2>&1; echo "demo rc=$?"
tail -15 "$OUT/demo.log"
echo "== CLI timing"
for S in 131072 1048576; do
  $B/litetopk indexer --T 8192 --S $S --algo fused --bench --iters 3 --warmup 1 > "$OUT/cli_$S.log" 2>&1
  grep -E "^T=|^fused:" "$OUT/cli_$S.log"
done
