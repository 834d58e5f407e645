// The fused retrieval path's shape rules (heuristics/retrieval_heuristics.h): one block per SM,
// lists of k + slack slots within their memory bound, a sample of at least 4 k rows whose
// scores fit their bound, or none; and where kAuto takes the fused path.
#include <gtest/gtest.h>

#include <cstdint>

#include "heuristics/retrieval_heuristics.h"

namespace litetopk::heuristics {
namespace {

TEST(RetrievalHeuristics, OneQueryBlockTakesEverySm) {
  const FusedRetrievalShape s = fused_retrieval_shape(64, 1000000, 1024, 132);
  EXPECT_EQ(s.splits, 132);
  EXPECT_EQ(s.list_capacity, 1280);
  EXPECT_EQ(s.sample_stride, kFusedRetrievalSampleStride);
  EXPECT_EQ(s.sample_tiles, (7813 + 15) / 16);
}

TEST(RetrievalHeuristics, ManyQueryBlocksShareTheSms) {
  const FusedRetrievalShape s = fused_retrieval_shape(1024, 2000000, 1024, 132);
  EXPECT_EQ(s.splits, 132 / 16);
  // The sample's [1024, rows] fp32 scores stay within their bound: a wider stride.
  EXPECT_LE(static_cast<std::size_t>(s.sample_tiles * kFusedRetrievalTileRows) * 1024 * 4,
            kFusedRetrievalSampleBytes);
  EXPECT_GT(s.sample_stride, kFusedRetrievalSampleStride);
  const FusedRetrievalShape beyond = fused_retrieval_shape(20000, 1000000, 16, 132);
  EXPECT_EQ(beyond.splits, 1);  // more query blocks than SMs: several waves
}

TEST(RetrievalHeuristics, ListsStayWithinTheirBound) {
  const FusedRetrievalShape s = fused_retrieval_shape(64, 10000000, 8192, 132);
  EXPECT_EQ(s.list_capacity, 8448);
  EXPECT_LE(static_cast<std::size_t>(64 * kFusedRetrievalMathGroups * s.splits * s.list_capacity) * 8,
            kFusedRetrievalListBytes);
  EXPECT_GE(s.splits, 1);
}

TEST(RetrievalHeuristics, SmallCorporaHaveFewSplitsAndNoSample) {
  const FusedRetrievalShape tiny = fused_retrieval_shape(8, 300, 512, 132);
  EXPECT_EQ(tiny.splits, 1);  // three tiles: each math warpgroup at least one
  EXPECT_EQ(tiny.sample_stride, 0);
  EXPECT_EQ(tiny.sample_tiles, 0);
  // 20000 rows, k 8192: fewer than 4 k rows at any stride of 2 or more.
  EXPECT_EQ(fused_retrieval_shape(8, 20000, 8192, 132).sample_tiles, 0);
  // 3000 rows (24 tiles), k 64: stride 12, 2 sample tiles of 128 rows = 4 k.
  const FusedRetrievalShape small = fused_retrieval_shape(8, 3000, 64, 132);
  EXPECT_EQ(small.sample_stride, 12);
  EXPECT_EQ(small.sample_tiles, 2);
  EXPECT_EQ(small.splits, 12);
}

TEST(RetrievalHeuristics, AutoTakesTheFusedPathWhereItWasFaster) {
  EXPECT_TRUE(retrieval_prefers_fused(64, 5000000, 768, 1024));
  EXPECT_TRUE(retrieval_prefers_fused(64, 1000000, 768, 16));
  EXPECT_TRUE(retrieval_prefers_fused(64, 1000000, 768, 1024));
  EXPECT_FALSE(retrieval_prefers_fused(64, 999999, 768, 1024));
  EXPECT_FALSE(retrieval_prefers_fused(64, 1000000, 768, 2048));
  EXPECT_TRUE(retrieval_prefers_fused(64, 2000000, 768, 2048));
  EXPECT_FALSE(retrieval_prefers_fused(64, 1000000, 768, 8192));
  EXPECT_FALSE(retrieval_prefers_fused(1, 5000000, 768, 1024));
  EXPECT_FALSE(retrieval_prefers_fused(16, 5000000, 768, 1024));
  EXPECT_FALSE(retrieval_prefers_fused(128, 5000000, 768, 1024));
}

}  // namespace
}  // namespace litetopk::heuristics
