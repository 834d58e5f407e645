// The CPU indexer reference (indexer_topk_cpu, indexer_logits_cpu): a hand-computed case, the
// scores against a naive triple loop, every adversarial case against the fp64 oracle, chunking and
// threading, and the two-chunk hot-sample inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/indexer_testing.h"
#include "litetopk/fp8_e4m3.h"
#include "cpu/indexer_cpu.h"
#include "litetopk/indexer.h"

namespace litetopk::testing {
namespace {

constexpr int32_t kSentinel = 0x5a5a5a5a;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::size_t size(int64_t n) { return static_cast<std::size_t>(n); }

struct Result {
  std::vector<int32_t> indices;
  std::vector<float> values;
};

// indexer_topk_cpu (or the chunked variant when max_chunk_floats > 0) with sentinel-filled
// outputs.
Result run_cpu(const IndexerCase& c, const HostIndexerInputs& in, bool with_values = true,
               int64_t max_chunk_floats = 0, int threads = 2) {
  const auto T = static_cast<int64_t>(in.ks.size());
  Result r;
  r.indices.assign(size(T * c.k), kSentinel);
  r.values.assign(size(T * c.k), 12345.0f);
  const IndexerProblem p =
      make_indexer_problem(c, in, r.indices.data(), with_values ? r.values.data() : nullptr);
  const Status status = max_chunk_floats > 0
                            ? cpu::indexer_topk_cpu_chunked(p, max_chunk_floats, threads)
                            : indexer_topk_cpu(p);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  return r;
}

// ---- a case small enough to work out by hand ----
//
// T = 2, S = 5, H = 32, D = 128; only dimensions 0 and 1 and a few heads are nonzero.
// kv rows (d0, d1): s0 (1, 0), s1 (-2, 3), s2 (0.5, 0.5), s3 (4, -1), s4 (1, 1.5);
// kv_scale = 1 except kv_scale[4] = 1.5.
// Query 0, range [0, 5): head 0 q = e0 (w 1), head 1 q = 2 e1 (w 0.5), other heads q = 0:
//   score = kv_scale * (relu(d0) + relu(d1)) = s0 1, s1 3, s2 1, s3 4, s4 1.5 * 2.5 = 3.75.
// Query 1, range [1, 4): head 5 q = -e0 (w -2), head 7 q = e1 (w 1):
//   score = kv_scale * (-2 relu(-d0) + relu(d1)) = s1 -4 + 3 = -1, s2 0.5, s3 0 + 0 = 0.
IndexerCase hand_case(int64_t k) {
  IndexerCase c;
  c.name = "Hand";
  c.T = 2;
  c.H = 32;
  c.S = 5;
  c.k = k;
  return c;
}

HostIndexerInputs hand_inputs() {
  const int64_t T = 2, H = 32, D = 128, S = 5;
  HostIndexerInputs in;
  in.q.assign(size(T * H * D), fp8::float_to_e4m3(0.0f));
  in.kv.assign(size(S * D), fp8::float_to_e4m3(0.0f));
  in.weights.assign(size(T * H), 0.0f);
  in.kv_scale = {1.0f, 1.0f, 1.0f, 1.0f, 1.5f};
  in.ks = {0, 1};
  in.ke = {5, 4};
  const float kv[5][2] = {{1, 0}, {-2, 3}, {0.5f, 0.5f}, {4, -1}, {1, 1.5f}};
  for (int s = 0; s < 5; ++s) {
    for (int d = 0; d < 2; ++d) in.kv[size(s * D + d)] = fp8::float_to_e4m3(kv[s][d]);
  }
  auto set_q = [&](int64_t t, int64_t h, int64_t d, float v) {
    in.q[size((t * H + h) * D + d)] = fp8::float_to_e4m3(v);
  };
  set_q(0, 0, 0, 1.0f);
  set_q(0, 1, 1, 2.0f);
  in.weights[size(0 * H + 0)] = 1.0f;
  in.weights[size(0 * H + 1)] = 0.5f;
  set_q(1, 5, 0, -1.0f);
  set_q(1, 7, 1, 1.0f);
  in.weights[size(1 * H + 5)] = -2.0f;
  in.weights[size(1 * H + 7)] = 1.0f;
  return in;
}

std::set<int32_t> row_set(const Result& r, int64_t t, int64_t k) {
  return {r.indices.begin() + t * k, r.indices.begin() + (t + 1) * k};
}

float value_of(const Result& r, int64_t t, int64_t k, int32_t index) {
  for (int64_t i = 0; i < k; ++i) {
    if (r.indices[size(t * k + i)] == index) return r.values[size(t * k + i)];
  }
  return std::numeric_limits<float>::quiet_NaN();
}

TEST(IndexerHandCase, TopTwo) {
  const IndexerCase c = hand_case(2);
  const HostIndexerInputs in = hand_inputs();
  const Result r = run_cpu(c, in);
  EXPECT_EQ(row_set(r, 0, 2), (std::set<int32_t>{3, 4}));
  EXPECT_EQ(value_of(r, 0, 2, 3), 4.0f);
  EXPECT_EQ(value_of(r, 0, 2, 4), 3.75f);
  EXPECT_EQ(row_set(r, 1, 2), (std::set<int32_t>{1, 2}));  // keys 2 and 3, relative to ks = 1
  EXPECT_EQ(value_of(r, 1, 2, 1), 0.5f);
  EXPECT_EQ(value_of(r, 1, 2, 2), 0.0f);
  EXPECT_TRUE(check_indexer_oracle(c, in, r.indices.data(), r.values.data()));
}

TEST(IndexerHandCase, TopFourWithTieAndShortRange) {
  const IndexerCase c = hand_case(4);
  const HostIndexerInputs in = hand_inputs();
  const Result r = run_cpu(c, in);
  // Query 0: 3 (4), 4 (3.75), 1 (3), then one of the two tied at 1: key 0 or key 2.
  const std::set<int32_t> q0 = row_set(r, 0, 4);
  EXPECT_EQ(q0.size(), 4u);
  EXPECT_TRUE(q0.count(3) && q0.count(4) && q0.count(1));
  EXPECT_TRUE(q0.count(0) != q0.count(2)) << "exactly one of the tied keys 0 and 2";
  // Query 1: its 3 keys, then -1.
  EXPECT_EQ(row_set(r, 1, 4), (std::set<int32_t>{-1, 0, 1, 2}));
  EXPECT_EQ(r.indices[7], -1);
  EXPECT_TRUE(std::isnan(r.values[7]));
  EXPECT_EQ(value_of(r, 1, 4, 0), -1.0f);
  EXPECT_TRUE(check_indexer_oracle(c, in, r.indices.data(), r.values.data()));
}

TEST(IndexerHandCase, Logits) {
  const IndexerCase c = hand_case(2);
  const HostIndexerInputs in = hand_inputs();
  const int64_t stride = 7;
  std::vector<float> logits(2 * stride, 99.0f);
  const IndexerProblem p = make_indexer_problem(c, in, nullptr, nullptr);  // no outputs needed
  ASSERT_TRUE(indexer_logits_cpu(p, logits.data(), stride).is_ok());
  const std::vector<float> expected = {1, 3, 1, 4, 3.75f, 99, 99, kNegInf, -1, 0.5f, 0, kNegInf,
                                       99, 99};
  EXPECT_EQ(logits, expected);
}

// ---- scores against a naive triple loop ----

// The score formula written out directly: decode, exact dot in double, relu keeping NaN, weight,
// head sum in order, kv_scale.
double naive_score(const IndexerCase& c, const HostIndexerInputs& in, int64_t t, int64_t s) {
  const int64_t H = c.H, D = c.D;
  double total = 0.0;
  for (int64_t h = 0; h < H; ++h) {
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d) {
      dot += static_cast<double>(fp8::e4m3_to_float(in.q[size((t * H + h) * D + d)])) *
             static_cast<double>(fp8::e4m3_to_float(in.kv[size(s * D + d)]));
    }
    const double relu = std::isnan(dot) ? dot : std::max(dot, 0.0);
    total += static_cast<double>(in.weights[size(t * H + h)]) * relu;
  }
  return static_cast<double>(in.kv_scale[size(s)]) * total;
}

TEST(IndexerLogits, MatchNaiveScoresBitwiseWithInfOutsideRanges) {
  for (IndexerPattern pattern : {IndexerPattern::kRandom, IndexerPattern::kNanInFp8,
                                 IndexerPattern::kZeroKvScales, IndexerPattern::kConcentrated}) {
    IndexerCase c;
    c.name = std::string("Logits_") + indexer_pattern_name(pattern);
    c.T = 15;
    c.H = pattern == IndexerPattern::kRandom ? 32 : 64;
    c.S = 150;  // not a multiple of the scorer's 16-key blocks
    c.k = 7;
    c.pattern = pattern;
    c.ranges = RangePattern::kRagged;
    c.seed = 5;
    const HostIndexerInputs in = make_indexer_inputs(c);
    const int64_t stride = c.S + 3;
    std::vector<float> logits(size(c.T * stride), 99.0f);
    const IndexerProblem p = make_indexer_problem(c, in, nullptr, nullptr);
    ASSERT_TRUE(indexer_logits_cpu(p, logits.data(), stride).is_ok());
    for (int64_t t = 0; t < c.T; ++t) {
      for (int64_t s = 0; s < stride; ++s) {
        const float got = logits[size(t * stride + s)];
        SCOPED_TRACE(c.name + " t " + std::to_string(t) + " s " + std::to_string(s));
        if (s >= c.S) {
          ASSERT_EQ(got, 99.0f) << "stride padding written";
        } else if (s < in.ks[size(t)] || s >= in.ke[size(t)]) {
          ASSERT_EQ(got, kNegInf);
        } else {
          const auto expected = static_cast<float>(naive_score(c, in, t, s));
          if (std::isnan(expected)) {
            ASSERT_TRUE(std::isnan(got));
          } else {
            ASSERT_EQ(got, expected);
          }
        }
      }
    }
  }
}

TEST(IndexerLogits, ZeroQueriesOrKeysWriteNothing) {
  IndexerCase c;
  c.name = "Empty";
  c.T = 3;
  c.S = 0;
  c.k = 4;
  const HostIndexerInputs in = make_indexer_inputs(c);
  const IndexerProblem p = make_indexer_problem(c, in, nullptr, nullptr);
  EXPECT_TRUE(indexer_logits_cpu(p, nullptr, 0).is_ok());
}

// ---- every adversarial case against the oracle ----

class IndexerReference : public ::testing::TestWithParam<IndexerCase> {};

TEST_P(IndexerReference, MatchesOracle) {
  const IndexerCase& c = GetParam();
  const HostIndexerInputs in = make_indexer_inputs(c);
  const Result r = run_cpu(c, in);
  EXPECT_TRUE(check_indexer_oracle(c, in, r.indices.data(), r.values.data()));
}

INSTANTIATE_TEST_SUITE_P(Cases, IndexerReference, ::testing::ValuesIn(indexer_cases()),
                         [](const ::testing::TestParamInfo<IndexerCase>& param_info) {
                           return param_info.param.name;
                         });

TEST(IndexerReferenceLarge, CausalT64S32768H64) {
  IndexerCase c;
  c.name = "Random_CausalChunk_T64_S32768_H64_k2048";
  c.T = 64;
  c.H = 64;
  c.S = 32768;
  c.k = 2048;
  c.seed = 77;
  const HostIndexerInputs in = make_indexer_inputs(c);
  const Result r = run_cpu(c, in);
  EXPECT_TRUE(check_indexer_oracle(c, in, r.indices.data(), r.values.data()));
}

// ---- chunking, threads, optional values ----

TEST(IndexerReferenceChunks, ChunkSizeAndThreadsDoNotChangeTheAnswer) {
  for (RangePattern ranges : {RangePattern::kRagged, RangePattern::kCausalChunk}) {
    IndexerCase c;
    c.name = std::string("Chunks_") + range_pattern_name(ranges);
    c.T = 21;
    c.H = 32;
    c.S = 3000;
    c.k = 64;
    c.pattern = IndexerPattern::kZeroKvScales;  // plenty of ties
    c.ranges = ranges;
    c.seed = 9;
    const HostIndexerInputs in = make_indexer_inputs(c);
    const Result whole = run_cpu(c, in);
    ASSERT_TRUE(check_indexer_oracle(c, in, whole.indices.data(), whole.values.data()));
    for (int64_t chunk : {int64_t{1}, int64_t{2999}, int64_t{3001}, int64_t{20000}}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE("max_chunk_floats " + std::to_string(chunk) + " threads " +
                     std::to_string(threads));
        const Result r = run_cpu(c, in, true, chunk, threads);
        EXPECT_TRUE(check_indexer_oracle(c, in, r.indices.data(), r.values.data()));
        EXPECT_TRUE(check_indexer_agreement(c, whole.indices.data(), whole.values.data(),
                                            r.indices.data(), r.values.data()));
      }
    }
  }
}

TEST(IndexerReferenceChunks, ValuesAreOptional) {
  IndexerCase c;
  c.name = "NoValues";
  c.T = 10;
  c.H = 64;
  c.S = 900;
  c.k = 50;
  c.pattern = IndexerPattern::kConcentrated;
  c.ranges = RangePattern::kEmpty;
  c.seed = 3;
  const HostIndexerInputs in = make_indexer_inputs(c);
  const Result with = run_cpu(c, in, true);
  const Result without = run_cpu(c, in, false);
  EXPECT_TRUE(check_indexer_oracle(c, in, without.indices.data(), nullptr));
  EXPECT_EQ(without.values, std::vector<float>(size(c.T * c.k), 12345.0f));
  EXPECT_TRUE(check_indexer_agreement(c, with.indices.data(), with.values.data(),
                                      without.indices.data(), nullptr));
}

TEST(IndexerReferenceChunks, ChunkedRejectsBadKnobs) {
  const IndexerCase c = hand_case(2);
  const HostIndexerInputs in = hand_inputs();
  std::vector<int32_t> indices(4, kSentinel);
  const IndexerProblem p = make_indexer_problem(c, in, indices.data(), nullptr);
  Status status = cpu::indexer_topk_cpu_chunked(p, 0, 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("max_chunk_floats must"), std::string::npos);
  status = cpu::indexer_topk_cpu_chunked(p, 100, 0);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("num_threads must"), std::string::npos);
  EXPECT_EQ(indices, std::vector<int32_t>(4, kSentinel));
}

// ---- the two-chunk inputs of the hot-sample tests ----

// Absolute key positions chosen by any query of a result.
std::set<int64_t> chosen_keys(const HostIndexerInputs& in, const Result& r, int64_t k) {
  std::set<int64_t> keys;
  for (std::size_t t = 0; t < in.ks.size(); ++t) {
    for (int64_t i = 0; i < k; ++i) {
      const int32_t index = r.indices[t * size(k) + size(i)];
      if (index >= 0) keys.insert(in.ks[t] + index);
    }
  }
  return keys;
}

TEST(IndexerChunkPair, HotKeysOverlapOrAreDisjoint) {
  IndexerCase c;
  c.name = "ChunkPair";
  c.T = 16;
  c.H = 64;
  c.S = 2000;
  c.k = 64;
  c.seed = 21;
  for (bool disjoint : {false, true}) {
    SCOPED_TRACE(disjoint ? "disjoint" : "overlapping");
    const auto [first, second] = make_chunk_pair(c, disjoint);
    ASSERT_EQ(first.ks.size(), size(c.T));
    ASSERT_EQ(first.kv_scale.size(), size(c.S - c.T));
    ASSERT_EQ(second.kv_scale.size(), size(c.S));
    EXPECT_TRUE(std::equal(first.kv.begin(), first.kv.end(), second.kv.begin()));
    const Result r1 = run_cpu(c, first);
    const Result r2 = run_cpu(c, second);
    ASSERT_TRUE(check_indexer_oracle(c, first, r1.indices.data(), r1.values.data()));
    ASSERT_TRUE(check_indexer_oracle(c, second, r2.indices.data(), r2.values.data()));
    const std::set<int64_t> keys1 = chosen_keys(first, r1, c.k);
    const std::set<int64_t> keys2 = chosen_keys(second, r2, c.k);
    EXPECT_EQ(keys1.size(), size(c.k)) << "every query of chunk 1 picks the same hot keys";
    std::vector<int64_t> common;
    std::set_intersection(keys1.begin(), keys1.end(), keys2.begin(), keys2.end(),
                          std::back_inserter(common));
    if (disjoint) {
      EXPECT_TRUE(common.empty()) << common.size() << " keys in common";
    } else {
      EXPECT_EQ(keys1, keys2);
    }
  }
}

}  // namespace
}  // namespace litetopk::testing
