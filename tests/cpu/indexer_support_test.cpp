// The indexer test support itself: the case list and input patterns are what they claim, the
// oracle check rejects wrong results (so a passing GPU run means something), and the agreement
// check accepts exactly the tie differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/indexer_testing.h"
#include "litetopk/fp8_e4m3.h"
#include "api/indexer_validation.h"
#include "cpu/indexer_scores.h"
#include "litetopk/indexer.h"

namespace litetopk::testing {
namespace {

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

// ---- the case list and the patterns ----

TEST(IndexerCases, NamesUniqueAndEveryCombinationPresent) {
  const std::vector<IndexerCase> cases = indexer_cases();
  std::set<std::string> names;
  std::set<std::pair<int, int>> combinations;
  std::set<int64_t> ks, heads;
  bool k_above_range = false;
  for (const IndexerCase& c : cases) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate name " << c.name;
    for (char ch : c.name) {
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << c.name;
    }
    combinations.insert({static_cast<int>(c.pattern), static_cast<int>(c.ranges)});
    ks.insert(c.k);
    heads.insert(c.H);
    EXPECT_LE(c.T, 64) << c.name;
    EXPECT_LE(c.S, 20000) << c.name;
    if (c.k > c.S) k_above_range = true;
  }
  EXPECT_EQ(combinations.size(), 6u * 5u);
  for (int64_t k : {1, 7, 64, 2048}) EXPECT_TRUE(ks.count(k)) << "k " << k;
  EXPECT_EQ(heads, (std::set<int64_t>{32, 64}));
  EXPECT_TRUE(k_above_range);
}

TEST(IndexerCases, InputsHaveTheCaseShapesAndValidRanges) {
  int64_t index = 0;
  for (const IndexerCase& c : indexer_cases()) {
    const HostIndexerInputs in = make_indexer_inputs(c);
    ASSERT_EQ(in.q.size(), size(c.T * c.H * c.D)) << c.name;
    ASSERT_EQ(in.kv.size(), size(c.S * c.D)) << c.name;
    ASSERT_EQ(in.kv_scale.size(), size(c.S)) << c.name;
    ASSERT_EQ(in.weights.size(), size(c.T * c.H)) << c.name;
    ASSERT_EQ(in.ks.size(), size(c.T)) << c.name;
    ASSERT_EQ(in.ke.size(), size(c.T)) << c.name;
    std::vector<int32_t> indices(size(c.T * c.k));
    const IndexerProblem p = make_indexer_problem(c, in, indices.data(), nullptr);
    EXPECT_TRUE(validate_indexer_problem(p).is_ok()) << c.name;
    EXPECT_TRUE(validate_indexer_ranges(p, p.ks, p.ke).is_ok()) << c.name;
    if (index++ % 8 == 0) {  // deterministic (a sample of the cases, to keep this quick)
      const HostIndexerInputs again = make_indexer_inputs(c);
      EXPECT_TRUE(again.q == in.q && again.kv == in.kv && again.ke == in.ke) << c.name;
    }
  }
}

IndexerCase small_case(IndexerPattern pattern, RangePattern ranges, int64_t T = 30,
                       int64_t S = 600, int64_t k = 50) {
  IndexerCase c;
  c.name = std::string(indexer_pattern_name(pattern)) + "_" + range_pattern_name(ranges);
  c.T = T;
  c.H = 32;
  c.S = S;
  c.k = k;
  c.pattern = pattern;
  c.ranges = ranges;
  c.seed = 11;
  return c;
}

TEST(IndexerRanges, PatternsAreWhatTheySay) {
  {
    const IndexerCase c = small_case(IndexerPattern::kRandom, RangePattern::kCausalChunk);
    const HostIndexerInputs in = make_indexer_inputs(c);
    for (int64_t t = 0; t < c.T; ++t) {
      EXPECT_EQ(in.ks[size(t)], 0);
      EXPECT_EQ(in.ke[size(t)], c.S - c.T + t + 1);
    }
  }
  {
    const IndexerCase c =
        small_case(IndexerPattern::kRandom, RangePattern::kContextParallelHalves, 30, 600);
    const HostIndexerInputs in = make_indexer_inputs(c);
    // Two causal runs of 15 queries each, the second ending further along the sequence.
    for (int64_t t = 0; t < c.T; ++t) {
      EXPECT_EQ(in.ks[size(t)], 0);
      if (t % 15 != 0) {
        EXPECT_EQ(in.ke[size(t)], in.ke[size(t - 1)] + 1) << t;
      }
    }
    EXPECT_GT(in.ke[15], in.ke[14] + 15);
    EXPECT_LE(in.ke[29], c.S);
  }
  {
    const IndexerCase c = small_case(IndexerPattern::kRandom, RangePattern::kFewerThanK);
    const HostIndexerInputs in = make_indexer_inputs(c);
    for (int64_t t = 0; t < c.T; ++t) EXPECT_LT(in.ke[size(t)] - in.ks[size(t)], c.k);
  }
  {
    const IndexerCase c = small_case(IndexerPattern::kRandom, RangePattern::kEmpty);
    const HostIndexerInputs in = make_indexer_inputs(c);
    for (int64_t t = 0; t < c.T; t += 3) EXPECT_EQ(in.ke[size(t)], in.ks[size(t)]);
  }
  {
    const IndexerCase c = small_case(IndexerPattern::kRandom, RangePattern::kRagged);
    const HostIndexerInputs in = make_indexer_inputs(c);
    std::set<int32_t> starts;
    for (int64_t t = 0; t < c.T; ++t) starts.insert(in.ks[size(t)]);
    EXPECT_GT(starts.size(), 5u);
  }
}

TEST(IndexerPatterns, PatternsAreWhatTheySay) {
  {
    const HostIndexerInputs in = make_indexer_inputs(
        small_case(IndexerPattern::kNegativeWeights, RangePattern::kCausalChunk));
    for (float w : in.weights) EXPECT_LT(w, 0.0f);
  }
  {
    const HostIndexerInputs in = make_indexer_inputs(
        small_case(IndexerPattern::kZeroKvScales, RangePattern::kCausalChunk));
    const auto zeros = std::count(in.kv_scale.begin(), in.kv_scale.end(), 0.0f);
    EXPECT_GT(zeros, 600 / 5);
    EXPECT_LT(zeros, 600);
  }
  {
    const HostIndexerInputs in =
        make_indexer_inputs(small_case(IndexerPattern::kNanInFp8, RangePattern::kCausalChunk));
    int kv_nans = 0, q_nans = 0;
    for (uint8_t b : in.kv) kv_nans += fp8::e4m3_is_nan(b);
    for (uint8_t b : in.q) q_nans += fp8::e4m3_is_nan(b);
    EXPECT_GT(kv_nans, 3);
    EXPECT_EQ(q_nans, 4);  // queries 3, 10, 17, 24
  }
  {
    const IndexerCase c = small_case(IndexerPattern::kAllEqual, RangePattern::kCausalChunk);
    const HostIndexerInputs in = make_indexer_inputs(c);
    for (int64_t s = 1; s < c.S; ++s) {
      ASSERT_TRUE(std::equal(in.kv.begin(), in.kv.begin() + c.D, in.kv.begin() + s * c.D));
    }
  }
  {
    // Concentrated: the best score of a query is far above the median.
    const IndexerCase c =
        small_case(IndexerPattern::kConcentrated, RangePattern::kCausalChunk, 4, 2000);
    const HostIndexerInputs in = make_indexer_inputs(c);
    const cpu::IndexerScorer scorer(make_indexer_problem(c, in, nullptr, nullptr));
    std::vector<double> row(size(c.S));
    scorer.score_row(c.T - 1, 0, c.S, row.data());
    std::sort(row.begin(), row.end());
    EXPECT_GT(row.back(), 3.0 * row[row.size() / 2]);
  }
}

// ---- the oracle check rejects wrong results ----

class IndexerOracleCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    c_ = small_case(IndexerPattern::kRandom, RangePattern::kFewerThanK, 12, 400, 7);
    c_.ranges = RangePattern::kRagged;  // query 0 sees every key
    in_ = make_indexer_inputs(c_);
    in_.ks[1] = 10;  // and query 1 only 3 (< k)
    in_.ke[1] = 13;
    indices_.assign(size(c_.T * c_.k), 0);
    values_.assign(size(c_.T * c_.k), 0.0f);
    ASSERT_TRUE(indexer_topk_cpu(make_indexer_problem(c_, in_, indices_.data(), values_.data()))
                    .is_ok());
    ASSERT_TRUE(check_indexer_oracle(c_, in_, indices_.data(), values_.data()));
    scorer_.reset(new cpu::IndexerScorer(make_indexer_problem(c_, in_, nullptr, nullptr)));
  }

  // A query whose range has at least `min_len` keys.
  int64_t query_with_len(int64_t min_len) const {
    for (int64_t t = 0; t < c_.T; ++t) {
      if (in_.ke[size(t)] - in_.ks[size(t)] >= min_len) return t;
    }
    return -1;
  }

  // The relative index of the worst key of query t's range.
  int32_t worst_index(int64_t t) const {
    const int64_t begin = in_.ks[size(t)], end = in_.ke[size(t)];
    std::vector<double> scores(size(end - begin));
    scorer_->score_row(t, begin, end, scores.data());
    return static_cast<int32_t>(std::min_element(scores.begin(), scores.end()) - scores.begin());
  }

  ::testing::AssertionResult check() const {
    return check_indexer_oracle(c_, in_, indices_.data(), values_.data());
  }

  IndexerCase c_;
  HostIndexerInputs in_;
  std::vector<int32_t> indices_;
  std::vector<float> values_;
  std::unique_ptr<cpu::IndexerScorer> scorer_;
};

TEST_F(IndexerOracleCheck, RejectsANonTopIndex) {
  const int64_t t = query_with_len(100);
  ASSERT_GE(t, 0);
  indices_[size(t * c_.k + 2)] = worst_index(t);
  values_[size(t * c_.k + 2)] = std::numeric_limits<float>::quiet_NaN();  // not judged by value
  EXPECT_FALSE(check_indexer_oracle(c_, in_, indices_.data(), nullptr));
}

TEST_F(IndexerOracleCheck, RejectsADuplicate) {
  const int64_t t = query_with_len(100);
  indices_[size(t * c_.k + 1)] = indices_[size(t * c_.k)];
  values_[size(t * c_.k + 1)] = values_[size(t * c_.k)];
  EXPECT_FALSE(check());
}

TEST_F(IndexerOracleCheck, RejectsMissingPadding) {
  // A query with fewer selectable keys than k: fill its first padded slot.
  int64_t t = -1;
  for (int64_t q = 0; q < c_.T; ++q) {
    const int64_t len = in_.ke[size(q)] - in_.ks[size(q)];
    if (len > 0 && len < c_.k) t = q;
  }
  ASSERT_GE(t, 0) << "the case needs a query with 0 < range < k";
  const int64_t len = in_.ke[size(t)] - in_.ks[size(t)];
  indices_[size(t * c_.k + len)] = 0;
  EXPECT_FALSE(check());
}

TEST_F(IndexerOracleCheck, RejectsEarlyPadding) {
  const int64_t t = query_with_len(100);
  indices_[size(t * c_.k + c_.k - 1)] = -1;
  values_[size(t * c_.k + c_.k - 1)] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(check());
}

TEST_F(IndexerOracleCheck, RejectsAnIndexOutsideTheRange) {
  const int64_t t = query_with_len(100);
  indices_[size(t * c_.k)] = in_.ke[size(t)] - in_.ks[size(t)];
  EXPECT_FALSE(check());
}

TEST_F(IndexerOracleCheck, RejectsAWrongValue) {
  const int64_t t = query_with_len(100);
  float& value = values_[size(t * c_.k)];
  value += 1e3f * (1.0f + std::fabs(value));  // far beyond any tolerance
  EXPECT_FALSE(check());
  value = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(check());
}

TEST_F(IndexerOracleCheck, RejectsAPaddedValueThatIsNotNan) {
  int64_t t = -1;
  for (int64_t q = 0; q < c_.T; ++q) {
    if (in_.ke[size(q)] - in_.ks[size(q)] < c_.k) t = q;
  }
  ASSERT_GE(t, 0) << "the case needs a query with range < k";
  values_[size(t * c_.k + c_.k - 1)] = 0.0f;
  EXPECT_FALSE(check());
}

TEST_F(IndexerOracleCheck, AcceptsAPermutedRow) {
  const int64_t t = query_with_len(100);
  std::swap(indices_[size(t * c_.k)], indices_[size(t * c_.k + 3)]);
  std::swap(values_[size(t * c_.k)], values_[size(t * c_.k + 3)]);
  EXPECT_TRUE(check());
}

TEST(IndexerOracleCheckNan, RejectsSelectingANanScore) {
  IndexerCase c = small_case(IndexerPattern::kNanInFp8, RangePattern::kCausalChunk, 8, 400, 7);
  const HostIndexerInputs in = make_indexer_inputs(c);
  std::vector<int32_t> indices(size(c.T * c.k));
  ASSERT_TRUE(indexer_topk_cpu(make_indexer_problem(c, in, indices.data(), nullptr)).is_ok());
  ASSERT_TRUE(check_indexer_oracle(c, in, indices.data(), nullptr));
  // Query 3 has a NaN in q: nothing is selectable.
  for (int64_t i = 0; i < c.k; ++i) EXPECT_EQ(indices[size(3 * c.k + i)], -1);
  // A key with a NaN byte in kv, visible to query 0.
  int64_t nan_key = -1;
  for (int64_t s = 0; s < in.ke[0] && nan_key < 0; ++s) {
    for (int64_t d = 0; d < c.D; ++d) {
      if (fp8::e4m3_is_nan(in.kv[size(s * c.D + d)])) nan_key = s;
    }
  }
  ASSERT_GE(nan_key, 0);
  indices[0] = static_cast<int32_t>(nan_key);
  EXPECT_FALSE(check_indexer_oracle(c, in, indices.data(), nullptr));
}

TEST(IndexerOracleCheckTolerance, IsTheFp32Bound) {
  const double u = std::ldexp(1.0, -24);
  EXPECT_NEAR(indexer_tolerance_rel(128, 64), 194 * u, 1e-9);  // gamma(n) = nu / (1 - nu)
  EXPECT_NEAR(indexer_tolerance_rel(128, 32), 162 * u, 1e-9);
  EXPECT_LT(indexer_tolerance_rel(128, 64), 1.2e-5);
}

// ---- the agreement check ----

TEST(IndexerAgreementCheck, AcceptsTieSwapsOnly) {
  // All-equal scores: every selection of k keys is right, and any two agree.
  IndexerCase c = small_case(IndexerPattern::kAllEqual, RangePattern::kCausalChunk, 3, 50, 5);
  const HostIndexerInputs in = make_indexer_inputs(c);
  std::vector<int32_t> a(size(c.T * c.k));
  std::vector<float> av(a.size());
  ASSERT_TRUE(indexer_topk_cpu(make_indexer_problem(c, in, a.data(), av.data())).is_ok());
  std::vector<int32_t> b = a;
  std::vector<float> bv = av;
  // Replace one index of query 0 by an unselected (tied) key.
  std::set<int32_t> chosen(a.begin(), a.begin() + c.k);
  int32_t other = 0;
  while (chosen.count(other)) ++other;
  b[0] = other;
  EXPECT_TRUE(check_indexer_agreement(c, a.data(), av.data(), b.data(), bv.data()));
  EXPECT_TRUE(check_indexer_oracle(c, in, b.data(), bv.data()));
  EXPECT_FALSE(check_indexer_agreement(c, a.data(), nullptr, b.data(), nullptr))
      << "without values the sets must be equal";
  std::reverse(b.begin(), b.begin() + c.k);  // order does not matter
  std::reverse(bv.begin(), bv.begin() + c.k);
  EXPECT_TRUE(check_indexer_agreement(c, a.data(), av.data(), b.data(), bv.data()));
}

TEST(IndexerAgreementCheck, RejectsRealDifferences) {
  IndexerCase c = small_case(IndexerPattern::kRandom, RangePattern::kCausalChunk, 4, 300, 8);
  const HostIndexerInputs in = make_indexer_inputs(c);
  std::vector<int32_t> a(size(c.T * c.k));
  std::vector<float> av(a.size());
  ASSERT_TRUE(indexer_topk_cpu(make_indexer_problem(c, in, a.data(), av.data())).is_ok());
  EXPECT_TRUE(check_indexer_agreement(c, a.data(), av.data(), a.data(), av.data()));
  EXPECT_TRUE(check_indexer_agreement(c, a.data(), nullptr, a.data(), nullptr));

  const cpu::IndexerScorer scorer(make_indexer_problem(c, in, nullptr, nullptr));
  {
    // Swap a selected key for an unselected one with its own (lower) value.
    std::vector<int32_t> b = a;
    std::vector<float> bv = av;
    std::set<int32_t> chosen(a.begin(), a.begin() + c.k);
    int32_t other = 0;
    while (chosen.count(other)) ++other;
    float score = 0.0f;
    scorer.score_row_f32(0, in.ks[0] + other, in.ks[0] + other + 1, &score);
    b[0] = other;
    bv[0] = score;
    EXPECT_FALSE(check_indexer_agreement(c, a.data(), av.data(), b.data(), bv.data()));
  }
  {
    std::vector<float> bv = av;  // same indices, a different value
    bv[3] = std::nextafter(bv[3], std::numeric_limits<float>::infinity());
    EXPECT_FALSE(check_indexer_agreement(c, a.data(), av.data(), a.data(), bv.data()));
  }
  {
    std::vector<int32_t> b = a;  // a missing entry (count differs)
    std::vector<float> bv = av;
    b[size(c.k - 1)] = -1;
    bv[size(c.k - 1)] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_FALSE(check_indexer_agreement(c, a.data(), av.data(), b.data(), bv.data()));
  }
  {
    std::vector<int32_t> b = a;  // a duplicate
    b[1] = b[0];
    EXPECT_FALSE(check_indexer_agreement(c, a.data(), av.data(), b.data(), av.data()));
  }
  {
    std::vector<int32_t> b = a;  // an index after padding began
    b[size(c.k - 2)] = -1;
    EXPECT_FALSE(check_indexer_agreement(c, a.data(), av.data(), b.data(), av.data()));
  }
}

}  // namespace
}  // namespace litetopk::testing
