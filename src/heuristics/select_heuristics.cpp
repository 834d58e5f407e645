// select_topk's dispatch rule. Sample-filter reads the scores once; radix reads them 4 to 7 times
// but spreads a row over many blocks in every pass, and grid-radix runs radix's passes in one
// launch where the rows' blocks fit on the device at once. Sieve reads split rows once at their
// own width: for 16-bit scores it beats grid-radix (which reads them at a quarter of its fp32
// rate) wherever its survivors fit; for fp32 rows it wins by 5-10% while a row has at most
// kMaxFp32SieveSegments segments, and loses beyond (one row of 128K or more: many segments, so
// many survivors for the last block to merge). Sample-filter wins whenever each row gets a
// block of its own. When rows are split, its segments aim at their share of k and the last
// block merges what they kept: that pays when the split rows' blocks fill most of the device in
// at most kMaxFilledSegments segments a row (16 x 131072 in 8 segments: 0.026 ms fp32 against
// the sieve's 0.028; 8 x 2^20, k 4096, in 16: 0.037 against grid-radix's 0.049). With fewer
// blocks (1 to 8 rows of 131072, one row of 32768 in 2) each segment's stream is short beside
// the estimates, the compactions and the merge, which run one after another; with more segments
// (one row of 2^24 in 132: 0.117 against grid-radix's 0.071) the merge of their estimates'
// survivors is long: the sieve or grid-radix wins. A split segment also needs two wide tiles
// (kMinFilledSegmentBytes) or more: then its estimate does not come from the row's first or last
// tile (unless its two tiles are both), where sinks and recent windows put a row's best (16 x
// 131072 bf16, one tile a segment: a sink-window row 0.086 ms against 0.024 for a normal one,
// the row read again after an estimate too high) (docs/select.md, "Dispatch"; the measurements
// in docs/BENCHMARKS.md).
#include "heuristics/select_heuristics.h"

namespace litetopk::heuristics {

namespace {
// Split rows stream with sample-filter once their blocks reach 3/4 of the SMs.
constexpr int64_t kFilledNumerator = 3;
constexpr int64_t kFilledDenominator = 4;
constexpr int32_t kMaxFilledSegments = 16;
constexpr int64_t kMinFilledSegmentBytes = 2 * 32768;  // two tiles of a wide block
constexpr int32_t kMaxFp32SieveSegments = 64;
// The cluster select takes 16 or more rows of 4K to 32K entries whose clusters all run at once
// (64 and 128 rows of 8192, 16 to 64 of 16K, 32 of 32K: up to 1.8x the best other, bf16); with
// fewer or longer rows its per-digit cluster barriers cost more than sieve's or grid-radix's
// passes.
constexpr int64_t kMinClusterBatch = 16;
constexpr int64_t kMinClusterN = 4096;
// Fewer rows than this, of more than kMinClusterN entries, leave a whole-row sample-filter block
// per row most of the device idle: 8 x 16384 ran 0.031 ms against the sieve's 0.016.
constexpr int64_t kMinWholeRowBatch = 16;
constexpr int64_t kMaxClusterN = 32768;
constexpr int64_t kMaxClusterK = 2048;
// From 8 rows, rows of 16K to 64K entries (clusters of 4 or 8 CTAs) also run clustered: 8 x
// 32768 and 8 x 65536 took 0.0153 / 0.0165 ms fp32 and 0.0149 / 0.0160 bf16 as graph replays
// against the sieve's 0.0154 / 0.0172 and 0.0158 / 0.0170, 16 x 65536 bf16 0.022 against 0.026;
// at 8 x 16384 (2 CTAs) the sieve wins (0.0133 against 0.0149 fp32). Clusters that do not all run
// at once lose a wave: 32 x 65536, 32 clusters of 4 CTAs of 16K keys, took 0.039 ms against
// sample-filter's 0.026.
constexpr int64_t kMinMediumClusterBatch = 8;
constexpr int64_t kMinMediumClusterN = 16384;
constexpr int64_t kMaxMediumClusterN = 65536;
// Up to 8 rows of 64K to 128K entries (clusters of 16 CTAs of 8K keys, or 8 of 16K) run clustered
// too: graph replays, fp32 / bf16, 1 x 131072 0.0137 / 0.0132 ms against grid-radix's 0.0141 and
// the sieve's 0.0152; 4 x 131072 0.0143 against grid-radix's 0.0165; 8 x 131072 0.0178 / 0.0166
// against the sieve's 0.0187 / 0.0190. One row of 524288 (16 CTAs of 32K keys) stays on
// grid-radix: 0.0247 against 0.0153.
constexpr int64_t kMaxFewRowsClusterBatch = 8;
constexpr int64_t kMaxFewRowsClusterN = 131072;
// The register select (a CTA a row, the row's keys in registers) takes rows of up to 8K entries
// at any batch and k: graph replays, fp32 / bf16, 128 x 8192 0.010 / 0.009 ms against the cluster
// select's 0.014 / 0.013; 512 x 4096 (k 1024) 0.015 / 0.014 against sample-filter's 0.030 /
// 0.034; 1024 x 8192 0.045 / 0.041 against the cluster's 0.068 / 0.065; 8 x 8192 0.008 against
// the sieve's 0.013; 4096 x 1024 (k 64) 0.086 / 0.084 and 16384 x 64 (k 8) 0.312 / 0.308 against
// sample-filter's 0.120 / 0.124 and 0.337 / 0.358. Rows of 8K to 16K (32 keys a thread, one CTA
// an SM) only from 128 rows (64 x 16384 fp32: 0.016 against the cluster's 0.014; 128 x 16384:
// 0.016 / 0.013 against 0.020 / 0.018), and fp32 ones below 256 rows, from which a streaming
// block a row reads them faster (256 x 16384: sample-filter 0.027 against 0.030; 4096 x 16384:
// 0.369 against 0.433); bf16 ones at any batch from 128 (4096 x 16384: 0.370 against the
// cluster's 0.493 and the sieve's 0.571).
constexpr int32_t kMaxShortRegisterKeys = 16;  // keys a thread: rows of up to 8192
constexpr int64_t kMinLongRegisterBatch = 128;
constexpr int64_t kMaxLongRegisterFp32Batch = 255;
}  // namespace

SelectAlgo choose_select_algo(const SelectShapeFacts& facts) {
  if (facts.register_keys_per_thread > 0) {
    const bool short_rows = facts.register_keys_per_thread <= kMaxShortRegisterKeys;
    const bool many_rows = facts.batch >= kMinLongRegisterBatch &&
                           (facts.element_bytes < 4 || facts.batch <= kMaxLongRegisterFp32Batch);
    if (short_rows || many_rows) return SelectAlgo::kRegister;
  }
  const bool clusters_fit = facts.cluster_size > 0 && facts.k <= kMaxClusterK &&
                            facts.batch <= facts.resident_clusters;
  const bool many_short_rows = clusters_fit && facts.batch >= kMinClusterBatch &&
                               facts.n > kMinClusterN && facts.n <= kMaxClusterN;
  const bool medium_rows = clusters_fit && facts.batch >= kMinMediumClusterBatch &&
                           facts.n > kMinMediumClusterN && facts.n <= kMaxMediumClusterN;
  const bool few_long_rows = clusters_fit && facts.batch <= kMaxFewRowsClusterBatch &&
                             facts.n > kMaxMediumClusterN && facts.n <= kMaxFewRowsClusterN;
  if (many_short_rows || medium_rows || few_long_rows) return SelectAlgo::kCluster;
  if (facts.k <= kSampleFilterMaxK) {
    const int32_t segments = facts.sample_filter_segments;
    const bool few_whole_rows = facts.batch < kMinWholeRowBatch && facts.n > kMinClusterN &&
                                facts.grid_radix_segments > 0;
    if (segments == 1 && !few_whole_rows) return SelectAlgo::kSampleFilter;
    const bool fills_device =
        segments > 0 && segments <= kMaxFilledSegments && facts.sm_count > 0 &&
        facts.batch * segments * kFilledDenominator >= int64_t{facts.sm_count} * kFilledNumerator &&
        facts.n * facts.element_bytes >= kMinFilledSegmentBytes * segments;
    if (fills_device) return SelectAlgo::kSampleFilter;
  }
  if (facts.grid_radix_segments > 0) {
    const bool sieve_pays = facts.element_bytes < 4 ||
                            facts.sieve_segments <= kMaxFp32SieveSegments;
    return facts.sieve_segments > 0 && sieve_pays ? SelectAlgo::kSieve : SelectAlgo::kGridRadix;
  }
  return SelectAlgo::kRadix;
}

}  // namespace litetopk::heuristics
