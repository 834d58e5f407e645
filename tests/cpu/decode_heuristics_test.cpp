// The decode kernels' choices from sizes (heuristics/decode_heuristics.h), pinned at the shapes
// they were fitted to: the split plan, and the threshold below which sparse_decode reads every
// block without the scan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "heuristics/decode_heuristics.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

using heuristics::sparse_decode_reads_all;

TEST(DecodeHeuristics, ReadsAllBelowTheMeasuredThreshold) {
  // Llama-3.1-8B shapes (8 KV heads): batch 1 reads everything below 16K tokens of capacity,
  // scans from 16K; batch 8 scans from 2K.
  EXPECT_TRUE(sparse_decode_reads_all(1, 8, 8192));
  EXPECT_TRUE(sparse_decode_reads_all(1, 8, 16383));
  EXPECT_FALSE(sparse_decode_reads_all(1, 8, 16384));
  EXPECT_FALSE(sparse_decode_reads_all(1, 8, 32768));
  EXPECT_FALSE(sparse_decode_reads_all(1, 8, 262144));
  EXPECT_TRUE(sparse_decode_reads_all(8, 8, 2047));
  EXPECT_FALSE(sparse_decode_reads_all(8, 8, 2048));
  EXPECT_FALSE(sparse_decode_reads_all(8, 8, 16384));
  // The rule counts (sequence, KV head, token) slots: 2 KV heads need 4x the tokens of 8.
  EXPECT_TRUE(sparse_decode_reads_all(1, 2, 65535));
  EXPECT_FALSE(sparse_decode_reads_all(1, 2, 65536));
  EXPECT_EQ(heuristics::kSparseScanMinSlots, int64_t{1} << 17);
}

// Llama-3.1-8B shapes (8 KV heads) on 132 SMs: one CTA per SM over the pairs for dense, two for
// sparse, never a split shorter than kDecodeMinSplitTokens; the option wins; the result stays in
// [1, min(units, cap)].
TEST(DecodeHeuristics, SplitPlan) {
  using heuristics::DecodeSplitShape;
  using heuristics::decode_units_per_split;
  const auto per = [](int64_t units, int64_t unit_tokens, int64_t pairs, int64_t ctas_per_sm,
                      int64_t option = 0, int64_t cap = int64_t{1} << 24) {
    DecodeSplitShape shape;
    shape.units = units;
    shape.unit_tokens = unit_tokens;
    shape.pairs = pairs;
    shape.sm_count = 132;
    shape.ctas_per_sm = ctas_per_sm;
    return decode_units_per_split(shape, option, cap);
  };
  const int64_t dense = heuristics::kDenseDecodeCtasPerSm, sparse = heuristics::kSparseDecodeCtasPerSm;
  EXPECT_EQ(dense, 1);
  EXPECT_EQ(sparse, 2);
  const int64_t floor_tiles = heuristics::kDecodeMinSplitTokens / 64;
  const int64_t floor_blocks = heuristics::kDecodeMinSplitTokens / 128;
  // Dense (64-token tiles), batch 1: 16 splits per pair (128 CTAs) where the floor allows.
  EXPECT_EQ(per(4096, 64, 8, dense), 256);  // 256K
  EXPECT_EQ(per(2048, 64, 8, dense), 128);  // 128K
  EXPECT_EQ(per(256, 64, 8, dense), std::max<int64_t>(16, floor_tiles));  // 16K
  EXPECT_EQ(per(64, 64, 8, dense), std::min<int64_t>(64, std::max<int64_t>(4, floor_tiles)));  // 4K
  // Batch 8: 2 splits per pair.
  EXPECT_EQ(per(4096, 64, 64, dense), 2048);
  // Sparse (128-token blocks), batch 1: 33 splits per pair.
  EXPECT_EQ(per(2048, 128, 8, sparse), 63);
  EXPECT_EQ(per(128, 128, 8, sparse), std::max<int64_t>(4, floor_blocks));
  // The option, clamped; the cap; a tiny capacity.
  EXPECT_EQ(per(2048, 128, 8, sparse, 3), 3);
  EXPECT_EQ(per(10, 128, 8, sparse, 50), 10);
  EXPECT_EQ(per(1 << 20, 128, 1, sparse, 0, 1024), 1024);
  EXPECT_EQ(per(1, 64, 1, dense), 1);
  EXPECT_EQ(per(0, 64, 1, dense), 1);
}

TEST(DecodeHeuristics, DegenerateSizesReadAll) {
  EXPECT_TRUE(sparse_decode_reads_all(0, 8, 262144));
  EXPECT_TRUE(sparse_decode_reads_all(1, 0, 262144));
  EXPECT_TRUE(sparse_decode_reads_all(1, 8, 0));
  EXPECT_FALSE(sparse_decode_reads_all(int64_t{1} << 20, 64, int64_t{1} << 30));  // no overflow
}

// The plan records the dispatch: the rule as asked above the threshold, every block below it
// (unless options.read_all_when_small is off), and always for delta = inf and mass_target = 0.
TEST(DecodeHeuristics, PlanRecordsTheDispatch) {
  SparseDecodeProblem p;  // shapes only
  p.cache.batch = 1;
  p.cache.num_kv_heads = 8;
  p.cache.block_size = 128;
  p.num_q_heads = 32;
  const auto reads_all = [&](int64_t max_blocks, bool when_small) {
    p.cache.max_blocks = max_blocks;
    DecodeOptions options;
    options.read_all_when_small = when_small;
    SparseDecodePlan plan;
    EXPECT_TRUE(sparse_decode_plan(p, options, &plan).is_ok());
    return plan.reads_all;
  };
  for (const SparseSelection rule : {SparseSelection::kDelta, SparseSelection::kMass}) {
    p.selection = rule;
    p.delta = 5.0f;
    p.mass_target = 0.01f;
    EXPECT_TRUE(reads_all(64, true));     // 8K tokens
    EXPECT_FALSE(reads_all(64, false));
    EXPECT_FALSE(reads_all(128, true));   // 16K tokens
    EXPECT_FALSE(reads_all(2048, true));  // 256K tokens
    p.delta = INFINITY;
    p.mass_target = 0.0f;
    EXPECT_TRUE(reads_all(2048, false));
  }
}

}  // namespace
}  // namespace litetopk
