# The session's last H200 run: every GPU test, the sanitizers, the demo, the hot-sample runs and
# the indexer benchmark.
B=build/h200_final
export PATH=$PATH:/usr/local/cuda/bin
s=$(date +%s)
echo "== GPU tests"; timeout 100 $B/litetopk_gpu_tests > $OUT/gpu_tests.log 2>&1; echo "rc $?"; grep -E "^\[  (PASSED|FAILED)|hot sample" $OUT/gpu_tests.log | head -20; echo "t=$(( $(date +%s)-s ))"
echo "== sanitizers"; for tool in memcheck racecheck; do timeout 40 compute-sanitizer --tool $tool --error-exitcode 1 $B/litetopk_gpu_tests --gtest_filter='*Small*' > $OUT/sanitizer_$tool.log 2>&1; echo "$tool rc $?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/sanitizer_$tool.log | head -3; grep -E "Race reported" $OUT/sanitizer_$tool.log | grep -v decode | head -3; done; echo "t=$(( $(date +%s)-s ))"
echo "== hot sample (litetopk indexer --state: later runs reuse the sample of the same chunk)"
for S in 131072 1048576; do for st in "" "--state"; do timeout 40 $B/litetopk indexer --T 8192 --S $S --algo fused $st --bench --iters 3 --warmup 1 --json $OUT/tmp.json 2>&1 | tail -1; cat $OUT/tmp.json >> $OUT/indexer_state.jsonl; echo >> $OUT/indexer_state.jsonl; done; done; rm -f $OUT/tmp.json; echo "t=$(( $(date +%s)-s ))"
echo "== indexer bench"; LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libstdc++.so.6 timeout 110 python3 bench/indexer_bench.py --lib $B/liblitetopk_c.so --iters 3 --warmup 1 --out $OUT/indexer_h200.json --md $OUT/indexer_h200.md > $OUT/indexer_bench.log 2>&1; echo "rc $?"; echo "t=$(( $(date +%s)-s ))"
echo "== demo"; (timeout 90 $B/litetopk info; timeout 90 $B/litetopk demo --quick) > $OUT/demo.log 2>&1; echo "rc $?"; grep -E "indexer|decode .*(dense|sparse)|all results" $OUT/demo.log | tail -8; echo "t=$(( $(date +%s)-s ))"
cat $OUT/indexer_h200.md
