// The sparse attention workload generator (testkit/sparse_attention_workload.h): deterministic in
// its seed, rows made of the promised numbers of distinct valid tokens, out-of-range entries and
// trailing -1, a measured neighbour overlap equal to the one asked for (groups of G sharing X%,
// the chunk's edge included) or at the chance level for random rows; and the group-union metric
// on hand-made rows.
#include "testkit/sparse_attention_workload.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace litetopk::testkit {
namespace {

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

SparseAttentionSpec grouped(double shared, int64_t group, uint64_t seed) {
  SparseAttentionSpec spec;
  spec.s_q = 64;
  spec.s_kv = 2000;
  spec.h_q = 16;
  spec.d_qk = 512;
  spec.topk = 200;
  spec.pattern = IndexPattern::kGroupShared;
  spec.group = group;
  spec.shared_fraction = shared;
  spec.seed = seed;
  return spec;
}

TEST(SparseAttentionWorkload, SameSeedSameBytesOtherSeedOtherBytes) {
  SparseAttentionSpec spec = grouped(0.5, 8, 1);
  spec.padding_fraction = 0.1;
  spec.out_of_range_fraction = 0.05;
  const SparseAttentionWorkload a = make_sparse_attention_workload(spec);
  const SparseAttentionWorkload b = make_sparse_attention_workload(spec);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.kv, b.kv);
  EXPECT_EQ(a.indices, b.indices);
  spec.seed = 2;
  const SparseAttentionWorkload c = make_sparse_attention_workload(spec);
  EXPECT_NE(a.q, c.q);
  EXPECT_NE(a.kv, c.kv);
  EXPECT_NE(a.indices, c.indices);
  EXPECT_EQ(a.q.size(), size(64 * 16 * 512));
  EXPECT_EQ(a.kv.size(), size(2000 * 512));
  EXPECT_EQ(make_sparse_attention_indices(spec), c.indices);
  EXPECT_FLOAT_EQ(a.sm_scale, 1.0f / std::sqrt(512.0f));
}

TEST(SparseAttentionWorkload, RowsHoldDistinctValidTokensOutOfRangeEntriesThenPadding) {
  for (IndexPattern pattern : {IndexPattern::kRandom, IndexPattern::kGroupShared}) {
    SparseAttentionSpec spec = grouped(0.8, 4, 5);
    spec.pattern = pattern;
    spec.s_q = 13;
    spec.s_kv = 3000;
    spec.topk = 101;
    spec.padding_fraction = 0.2;       // 20 trailing -1
    spec.out_of_range_fraction = 0.1;  // 10 entries outside [0, s_kv), not -1
    const SparseAttentionWorkload w = make_sparse_attention_workload(spec);
    std::set<int32_t> out_of_range_seen;
    for (int64_t s = 0; s < spec.s_q; ++s) {
      const int32_t* row = w.indices.data() + s * spec.topk;
      std::set<int32_t> valid;
      int64_t out_of_range = 0;
      for (int64_t j = 0; j < 81; ++j) {
        if (row[j] >= 0 && row[j] < spec.s_kv) {
          valid.insert(row[j]);
        } else {
          EXPECT_NE(row[j], -1) << "-1 only as trailing padding";
          out_of_range_seen.insert(row[j]);
          ++out_of_range;
        }
      }
      EXPECT_EQ(valid.size(), 71u) << "distinct valid tokens of query " << s;
      EXPECT_EQ(out_of_range, 10);
      for (int64_t j = 81; j < spec.topk; ++j) EXPECT_EQ(row[j], -1);
    }
    EXPECT_GE(out_of_range_seen.size(), 10u) << "varied out-of-range values";
    EXPECT_EQ(w.valid_pairs(), 13 * 71);
    EXPECT_DOUBLE_EQ(w.flops(), 2.0 * 13 * 71 * 16 * (512 + 512));
  }
}

// What the benchmark asks for (50%, 80%, 100% of G = 8) and more, with and without skipped
// entries: the measured overlap is the shared count over the valid count, the union of a full
// group is n_shared + G * (n_valid - n_shared).
TEST(SparseAttentionWorkload, MeasuredOverlapIsTheOneAsked) {
  for (double shared : {0.0, 0.25, 0.5, 0.8, 1.0}) {
    for (int64_t group : {2, 4, 8}) {
      for (bool skipped : {false, true}) {
        SparseAttentionSpec spec = grouped(shared, group, 9);
        if (skipped) {
          spec.padding_fraction = 0.1;
          spec.out_of_range_fraction = 0.05;
        }
        const std::vector<int32_t> indices = make_sparse_attention_indices(spec);
        const int64_t valid = skipped ? 170 : 200;
        const auto valid_d = static_cast<double>(valid);
        const auto n_shared = static_cast<int64_t>(std::llround(shared * valid_d));
        const GroupUnionStats stats =
            measure_group_unions(indices.data(), spec.s_q, spec.topk, spec.s_kv, group);
        SCOPED_TRACE(sparse_attention_shape_label(spec));
        ASSERT_EQ(stats.unions.size(), size(64 / group));
        for (int64_t u : stats.unions) EXPECT_EQ(u, n_shared + group * (valid - n_shared));
        EXPECT_NEAR(stats.mean_overlap, shared, 0.5 / valid_d);
        EXPECT_EQ(stats.overlap_groups, 64 / group);
        EXPECT_EQ(stats.total_distinct, 64 * valid);
        EXPECT_NEAR(stats.reuse(),
                    static_cast<double>(group * valid) /
                        static_cast<double>(n_shared + group * (valid - n_shared)),
                    1e-12);
      }
    }
  }
}

TEST(SparseAttentionWorkload, ChunkEdgeGroupIsShorter) {
  SparseAttentionSpec spec = grouped(0.5, 8, 4);
  spec.s_q = 19;  // groups of 8, 8, 3
  const SparseAttentionWorkload w = make_sparse_attention_workload(spec);
  const GroupUnionStats stats = measure_group_unions(w.indices.data(), 19, 200, spec.s_kv, 8);
  ASSERT_EQ(stats.unions.size(), 3u);
  EXPECT_EQ(stats.unions[0], 100 + 8 * 100);
  EXPECT_EQ(stats.unions[1], 100 + 8 * 100);
  EXPECT_EQ(stats.unions[2], 100 + 3 * 100);
  EXPECT_DOUBLE_EQ(stats.mean_overlap, 0.5);
  // Measured with another G the groups cut across the generator's: the overlap drops.
  const GroupUnionStats misaligned = measure_group_unions(w.indices.data(), 19, 200, spec.s_kv, 6);
  EXPECT_LT(misaligned.mean_overlap, 0.5);
}

TEST(SparseAttentionWorkload, RandomRowsOverlapOnlyByChance) {
  SparseAttentionSpec spec;
  spec.s_q = 512;
  spec.s_kv = 100000;
  spec.h_q = 16;
  spec.d_qk = 512;
  spec.topk = 256;
  spec.pattern = IndexPattern::kRandom;
  spec.seed = 6;
  const std::vector<int32_t> indices = make_sparse_attention_indices(spec);
  const GroupUnionStats stats = measure_group_unions(indices.data(), 512, 256, 100000, 8);
  // G random k-subsets of N: E[union] = N (1 - (1 - k/N)^G) = 2029.7 of 2048, about 18 chance
  // collisions per group (standard deviation about 4.3, 0.54 for the mean of 64 groups): overlap
  // about 18 / (2048 - 256) = 0.01.
  const double expected = 100000.0 * (1.0 - std::pow(1.0 - 256.0 / 100000.0, 8));
  EXPECT_NEAR(stats.mean_union, expected, 2.5);
  EXPECT_LT(stats.mean_overlap, 0.02);
  EXPECT_EQ(stats.total_distinct, 512 * 256);
}

TEST(SparseAttentionWorkload, GroupUnionsOfHandMadeRows) {
  // s_kv = 10, topk = 4, groups of 2. Repeats and entries outside [0, 10) do not count.
  const int32_t rows[] = {1,  2,  3,  -1,   //
                          3,  2,  2,  40,   // group 0: {1, 2, 3} and {2, 3}: U 3, overlap 2/2
                          5,  6,  -7, 10,   //
                          7,  8,  9,  -1,   // group 1: {5, 6} and {7, 8, 9}: U 5, overlap 0
                          -1, -1, -1, -1};  // group 2: one empty query: overlap undefined
  const GroupUnionStats stats = measure_group_unions(rows, 5, 4, 10, 2);
  ASSERT_EQ(stats.unions.size(), 3u);
  EXPECT_EQ(stats.unions[0], 3);
  EXPECT_EQ(stats.unions[1], 5);
  EXPECT_EQ(stats.unions[2], 0);
  EXPECT_EQ(stats.overlap_groups, 2);
  EXPECT_DOUBLE_EQ(stats.mean_overlap, 0.5);
  EXPECT_EQ(stats.total_union, 8);
  EXPECT_EQ(stats.total_distinct, 10);
  EXPECT_DOUBLE_EQ(stats.mean_union, 8.0 / 3.0);
  EXPECT_DOUBLE_EQ(stats.reuse(), 10.0 / 8.0);
}

TEST(SparseAttentionWorkload, SpecErrorsAndLabels) {
  SparseAttentionSpec spec = grouped(0.5, 8, 0);
  EXPECT_EQ(sparse_attention_spec_error(spec), "");
  EXPECT_EQ(sparse_attention_shape_label(spec),
            "s_q=64 s_kv=2000 h_q=16 d_qk=512 topk=200 groups of 8, 50% shared");
  spec.s_kv = 899;  // a group's union needs 100 + 8 * 100 = 900
  EXPECT_NE(sparse_attention_spec_error(spec).find("900 distinct tokens"), std::string::npos);
  spec.s_kv = 900;
  EXPECT_EQ(sparse_attention_spec_error(spec), "");
  spec.s_q = 3;  // only 3 queries: one group of 3 needs 100 + 3 * 100
  spec.s_kv = 400;
  EXPECT_EQ(sparse_attention_spec_error(spec), "");
  spec.shared_fraction = 1.5;
  EXPECT_NE(sparse_attention_spec_error(spec), "");
  spec.shared_fraction = 0.5;
  spec.padding_fraction = 0.7;
  spec.out_of_range_fraction = 0.4;
  EXPECT_NE(sparse_attention_spec_error(spec).find("must be <= topk"), std::string::npos);
  spec = grouped(0.0, 8, 0);
  spec.pattern = IndexPattern::kRandom;
  spec.s_kv = 199;
  spec.padding_fraction = 0.25;
  spec.out_of_range_fraction = 0.01;
  EXPECT_EQ(sparse_attention_spec_error(spec), "") << "a random row needs 148 tokens";
  EXPECT_EQ(sparse_attention_shape_label(spec),
            "s_q=64 s_kv=199 h_q=16 d_qk=512 topk=200 random, 25% padding, 1% out of range");
  spec.topk = 0;
  EXPECT_NE(sparse_attention_spec_error(spec), "");
  // s_kv = INT32_MAX is fine for the out-of-range values (no overflow past it).
  spec = grouped(0.0, 1, 3);
  spec.pattern = IndexPattern::kRandom;
  spec.s_q = 0;
  spec.s_kv = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(sparse_attention_spec_error(spec), "");
}

}  // namespace
}  // namespace litetopk::testkit
