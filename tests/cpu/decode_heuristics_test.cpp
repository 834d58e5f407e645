// sparse_decode's dispatch from sizes (heuristics/decode_heuristics.h): the measured threshold
// below which every block is read without the scan, pinned at the shapes it was fitted to.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "heuristics/decode_heuristics.h"
#include "litetopk/sparse_decode.h"

namespace litetopk {
namespace {

using heuristics::sparse_decode_reads_all;

TEST(DecodeHeuristics, ReadsAllBelowTheMeasuredThreshold) {
  // Llama-3.1-8B shapes (8 KV heads): batch 1 reads everything up to 32K tokens of capacity,
  // scans from 32K; batch 8 scans from 4K.
  EXPECT_TRUE(sparse_decode_reads_all(1, 8, 16384));
  EXPECT_TRUE(sparse_decode_reads_all(1, 8, 32767));
  EXPECT_FALSE(sparse_decode_reads_all(1, 8, 32768));
  EXPECT_FALSE(sparse_decode_reads_all(1, 8, 131072));
  EXPECT_FALSE(sparse_decode_reads_all(1, 8, 262144));
  EXPECT_TRUE(sparse_decode_reads_all(8, 8, 4095));
  EXPECT_FALSE(sparse_decode_reads_all(8, 8, 4096));
  EXPECT_FALSE(sparse_decode_reads_all(8, 8, 16384));
  // The rule counts (sequence, KV head, token) slots: 2 KV heads need 4x the tokens of 8.
  EXPECT_TRUE(sparse_decode_reads_all(1, 2, 131071));
  EXPECT_FALSE(sparse_decode_reads_all(1, 2, 131072));
  EXPECT_EQ(heuristics::kSparseScanMinSlots, int64_t{1} << 18);
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
    EXPECT_TRUE(reads_all(128, true));    // 16K tokens
    EXPECT_FALSE(reads_all(128, false));
    EXPECT_FALSE(reads_all(256, true));   // 32K tokens
    EXPECT_FALSE(reads_all(2048, true));  // 256K tokens
    p.delta = INFINITY;
    p.mass_target = 0.0f;
    EXPECT_TRUE(reads_all(2048, false));
  }
}

}  // namespace
}  // namespace litetopk
