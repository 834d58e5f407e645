// select_topk's dispatch rule (src/heuristics/select_heuristics.cpp) on the shape classes it
// separates, from the planners' facts (no device needed).
#include <gtest/gtest.h>

#include "heuristics/select_heuristics.h"

namespace litetopk::heuristics {
namespace {

constexpr int32_t kSms = 132;  // an H200

SelectShapeFacts facts(int64_t batch, int64_t n, int64_t k, int32_t segments,
                       int32_t grid_segments, int32_t element_bytes = 4,
                       int32_t sieve_segments = 0) {
  SelectShapeFacts f;
  f.batch = batch;
  f.sm_count = kSms;
  f.n = n;
  f.k = k;
  f.element_bytes = element_bytes;
  f.sample_filter_segments = segments;
  f.grid_radix_segments = grid_segments;
  f.sieve_segments = sieve_segments;
  return f;
}

TEST(SelectDispatch, ABlockPerRowStreamsOnce) {
  EXPECT_EQ(choose_select_algo(facts(4096, 200000, 1024, 1, 0)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(256, 524288, 256, 1, 1)), SelectAlgo::kSampleFilter);
}

TEST(SelectDispatch, SplitRowsThatDoNotFillTheDeviceGoElsewhere) {
  // One row of 32768 in 2 segments, 8 rows of 65536 in 4: short streams beside the estimates
  // and the merge.
  EXPECT_EQ(choose_select_algo(facts(1, 32768, 2048, 2, 4, 4, 8)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(8, 65536, 2048, 4, 8, 4, 12)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(8, 65536, 2048, 4, 8)), SelectAlgo::kGridRadix);
}

TEST(SelectDispatch, SplitRowsThatFillTheDeviceStreamOnce) {
  // 16 x 131072 in 8 segments, 32 x 131072 in 4 (fp32 and bf16), 8 x 2^20 at k 4096 in 16,
  // 64 x 65536 and 64 x 2^20 in 2: 128 blocks, about the device; 44 rows in 3 (synthetic facts:
  // the planner keeps rows of up to 1 MB whole from 44 rows on).
  EXPECT_EQ(choose_select_algo(facts(16, 131072, 2048, 8, 16, 4, 16)), SelectAlgo::kSampleFilter);
  // Segments of two wide tiles (64 KB) or more only: 16 x 131072 bf16 in 8 (one tile each) goes
  // to the sieve, 32 x 131072 bf16 in 4 streams; so would 3 segments of 65536 bf16, not fp32.
  EXPECT_EQ(choose_select_algo(facts(16, 131072, 2048, 8, 16, 2, 16)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(44, 65536, 2048, 3, 6, 2, 12)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(32, 131072, 2048, 4, 8)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(32, 131072, 2048, 4, 8, 2, 16)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(8, 1 << 20, 4096, 16, 32, 2)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(64, 65536, 2048, 2, 4, 4, 8)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(64, 1 << 20, 2048, 2, 4)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(44, 65536, 2048, 3, 6, 4, 12)), SelectAlgo::kSampleFilter);
  // Half the device or less: 8 x 131072 in 8 segments, one row of 2^20 in 64.
  EXPECT_EQ(choose_select_algo(facts(8, 131072, 2048, 8, 16, 4, 16)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(1, 1 << 20, 2048, 64, 128)), SelectAlgo::kGridRadix);
  // More than 16 segments a row: 2 x 2^20 in 64, one row of 2^24 in 132.
  EXPECT_EQ(choose_select_algo(facts(2, 1 << 20, 2048, 64, 128, 4, 64)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(1, 1 << 24, 1024, 132, 264)), SelectAlgo::kGridRadix);
}

TEST(SelectDispatch, SplitRowsSieve) {
  // 1 x 131072 (8 segments): sieve for bf16, grid-radix for fp32 (128 sieve segments).
  EXPECT_EQ(choose_select_algo(facts(1, 131072, 2048, 8, 64, 2, 128)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(1, 131072, 2048, 8, 64, 4, 128)), SelectAlgo::kGridRadix);
  // fp32 at 64 sieve segments or fewer (8 x 131072: 16).
  EXPECT_EQ(choose_select_algo(facts(8, 131072, 2048, 8, 16, 4, 33)), SelectAlgo::kSieve);
  // Survivors that do not fit: grid-radix; nothing resident at once: radix.
  EXPECT_EQ(choose_select_algo(facts(1, 131072, 2048, 8, 64, 2, 0)), SelectAlgo::kGridRadix);
  EXPECT_EQ(choose_select_algo(facts(1, 1 << 24, 1024, 64, 0)), SelectAlgo::kRadix);
}

// The facts with clusters of `cluster_size` CTAs of which `resident` run at once (by default
// one CTA a SM).
SelectShapeFacts with_cluster(SelectShapeFacts f, int32_t cluster_size, int64_t resident = -1) {
  f.cluster_size = cluster_size;
  f.resident_clusters = resident >= 0 ? resident : cluster_size > 0 ? kSms / cluster_size : 0;
  return f;
}

TEST(SelectDispatch, ManyRowsOf8KTo32KRunInClusters) {
  // 64 x 16384 (2 CTAs a row), 32 x 32768 (4), 16 x 16384: every cluster at once.
  EXPECT_EQ(choose_select_algo(with_cluster(facts(64, 16384, 256, 2, 2, 4, 1), 2)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(32, 32768, 2048, 2, 4, 2, 2), 4)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(16, 16384, 2048, 2, 8, 4, 2), 2)),
            SelectAlgo::kCluster);
  // Fewer rows, longer or shorter rows, larger k, or more clusters than SMs: the other rules.
  EXPECT_EQ(choose_select_algo(with_cluster(facts(8, 16384, 2048, 2, 16, 4, 2), 2)),
            SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(128, 8192, 256, 1, 1), 1)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(128, 4096, 64, 1, 1), 1)),
            SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(64, 16384, 4096, 2, 2, 4, 1), 2)),
            SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(128, 32768, 2048, 2, 1, 4, 1), 4)),
            SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(64, 16384, 256, 2, 2, 4, 1), 0)),
            SelectAlgo::kSieve);
}

TEST(SelectDispatch, EightOrMoreRowsOf16KTo64KRunInClusters) {
  // 8 x 32768 (4 CTAs a row), 8 x 65536 (8), 16 x 65536 (128 CTAs): clustered.
  EXPECT_EQ(choose_select_algo(with_cluster(facts(8, 32768, 2048, 2, 8, 4, 4), 4)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(8, 65536, 2048, 4, 8, 2, 12), 8)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(16, 65536, 2048, 4, 8, 4, 12), 8)),
            SelectAlgo::kCluster);
  // 8 x 16384 (2 CTAs), 7 x 65536, 9 x 65537, 17 x 65536 (136 CTAs) and k 4096: the other
  // rules.
  EXPECT_EQ(choose_select_algo(with_cluster(facts(8, 16384, 2048, 1, 16, 4, 2), 2)),
            SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(7, 65536, 2048, 4, 8, 4, 12), 8)),
            SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(9, 65537, 2048, 4, 8, 4, 12), 16)),
            SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(17, 65536, 2048, 4, 8, 4, 12), 8)),
            SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(8, 65536, 4096, 4, 8, 4, 12), 8)),
            SelectAlgo::kSieve);
  // 32 x 65536 in clusters of 4 CTAs of 16K keys, of which 28 run at once: not clustered.
  EXPECT_EQ(choose_select_algo(with_cluster(facts(32, 65536, 2048, 1, 4, 4, 8), 4, 28)),
            SelectAlgo::kSampleFilter);
}

TEST(SelectDispatch, UpToEightRowsOf64KTo128KRunInClusters) {
  // 1, 4 and 8 x 131072, fp32 and bf16 (16 CTAs a row, 8 at 8 rows), and 1 x 65537.
  EXPECT_EQ(choose_select_algo(with_cluster(facts(1, 131072, 2048, 8, 64, 4, 128), 16)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(1, 131072, 2048, 8, 64, 2, 16), 16)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(4, 131072, 2048, 8, 32, 4, 64), 16)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(8, 131072, 2048, 8, 16, 4, 33), 8)),
            SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(1, 65537, 2048, 4, 32, 4, 64), 16)),
            SelectAlgo::kCluster);
  // 9 rows, rows of 131073 or 524288, k 4096, or clusters that do not all run at once: the
  // other rules.
  EXPECT_EQ(choose_select_algo(with_cluster(facts(9, 131072, 2048, 8, 16, 4, 33), 8)),
            SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(1, 131073, 2048, 8, 64, 4, 128), 16)),
            SelectAlgo::kGridRadix);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(1, 524288, 2048, 32, 128, 4, 128), 16)),
            SelectAlgo::kGridRadix);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(1, 131072, 4096, 8, 64, 4, 128), 16)),
            SelectAlgo::kGridRadix);
  EXPECT_EQ(choose_select_algo(with_cluster(facts(8, 131072, 2048, 8, 16, 4, 33), 8, 7)),
            SelectAlgo::kSieve);
}

TEST(SelectDispatch, FewWholeRowsOfMoreThan4KGoToSieve) {
  // 8 and 1 rows of 16384 fit one sample-filter block each, which leaves the device idle.
  EXPECT_EQ(choose_select_algo(facts(8, 16384, 2048, 1, 16, 4, 2)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(1, 16384, 2048, 1, 16, 4, 2)), SelectAlgo::kSieve);
  // One row of 4096 is one tile: sample-filter.
  EXPECT_EQ(choose_select_algo(facts(1, 4096, 64, 1, 4, 4, 1)), SelectAlgo::kSampleFilter);
}

TEST(SelectDispatch, KBeyondSampleFilterNeverPicksIt) {
  EXPECT_EQ(choose_select_algo(facts(8, 100000, 20000, 1, 0)), SelectAlgo::kRadix);
  EXPECT_EQ(choose_select_algo(facts(8, 100000, 20000, 1, 2)), SelectAlgo::kGridRadix);
}

// The facts with the register select holding a row in `keys` keys a thread.
SelectShapeFacts with_register(SelectShapeFacts f, int32_t keys) {
  f.register_keys_per_thread = keys;
  return f;
}

TEST(SelectDispatch, RowsOfUpTo8KRunInRegisters) {
  // 128 x 8192 (16 keys a thread), 512 x 4096 (8), 8 x 8192, 1024 x 8192 bf16, 4096 x 1024 and
  // 16384 x 64; whatever the cluster select would do.
  EXPECT_EQ(choose_select_algo(with_register(with_cluster(facts(128, 8192, 2048, 1, 1), 1), 16)),
            SelectAlgo::kRegister);
  EXPECT_EQ(choose_select_algo(with_register(facts(512, 4096, 1024, 1, 0), 8)),
            SelectAlgo::kRegister);
  EXPECT_EQ(choose_select_algo(with_register(facts(8, 8192, 2048, 1, 4, 4, 1), 16)),
            SelectAlgo::kRegister);
  EXPECT_EQ(choose_select_algo(with_register(facts(1024, 8192, 2048, 1, 0, 2), 16)),
            SelectAlgo::kRegister);
  EXPECT_EQ(choose_select_algo(with_register(facts(4096, 1024, 64, 1, 0), 8)),
            SelectAlgo::kRegister);
  EXPECT_EQ(choose_select_algo(with_register(facts(16384, 64, 8, 1, 0, 2), 8)),
            SelectAlgo::kRegister);
}

TEST(SelectDispatch, RowsOf8KTo16KRunInRegistersFrom128Rows) {
  // 128 x 16384 fp32 and bf16, 4096 x 16384 bf16: registers; 64 x 16384 (clusters of 2) and
  // 256 and 4096 x 16384 fp32 (a streaming block a row): not.
  EXPECT_EQ(choose_select_algo(with_register(with_cluster(facts(128, 16384, 2048, 1, 1), 2), 32)),
            SelectAlgo::kRegister);
  EXPECT_EQ(
      choose_select_algo(with_register(with_cluster(facts(128, 16384, 2048, 1, 1, 2), 2), 32)),
      SelectAlgo::kRegister);
  EXPECT_EQ(choose_select_algo(with_register(facts(4096, 16384, 2048, 1, 0, 2), 32)),
            SelectAlgo::kRegister);
  EXPECT_EQ(
      choose_select_algo(with_register(with_cluster(facts(64, 16384, 256, 2, 2, 4, 1), 2), 32)),
      SelectAlgo::kCluster);
  EXPECT_EQ(choose_select_algo(with_register(facts(255, 16384, 2048, 1, 0), 32)),
            SelectAlgo::kRegister);
  EXPECT_EQ(choose_select_algo(with_register(facts(256, 16384, 2048, 1, 0), 32)),
            SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(with_register(facts(4096, 16384, 2048, 1, 0), 32)),
            SelectAlgo::kSampleFilter);
  // Longer rows do not fit.
  EXPECT_EQ(choose_select_algo(with_register(facts(4096, 16385, 2048, 1, 0), 0)),
            SelectAlgo::kSampleFilter);
}

}  // namespace
}  // namespace litetopk::heuristics
