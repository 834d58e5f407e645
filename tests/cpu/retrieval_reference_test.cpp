// retrieval_topk_cpu against a plain sort-based oracle (tests/common/retrieval_testing.h): every
// workload kind, metric and corpus format (fp16, bf16, fp8 with row scales), l2 as the negative
// squared distance, ties, NaN rows, k = 1 and 8192, k > n, short and empty ranges, the corpus
// bitmap (all off, all on, sparse, with ranges), and retrieval_corpus_norms_cpu.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/retrieval_testing.h"
#include "litetopk/float_bits.h"
#include "litetopk/retrieval.h"
#include "testkit/retrieval_workload.h"

namespace litetopk {
namespace {

using testkit::RetrievalKind;

struct Result {
  std::vector<int32_t> indices;
  std::vector<float> scores;
};

// Runs the CPU reference on `p` (indices and scores set here) and checks it slot for slot against
// the oracle.
Result run_and_check(RetrievalProblem p) {
  Result r;
  r.indices.assign(static_cast<std::size_t>(p.batch * p.k), 12345);
  r.scores.assign(static_cast<std::size_t>(p.batch * p.k), 12345.0f);
  p.indices = r.indices.data();
  p.scores = r.scores.data();
  const Status status = retrieval_topk_cpu(p, 2);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  const testing::ExpectedTopk expected =
      testing::sorted_topk(testing::retrieval_scores(p), p.batch, p.n, p.k);
  EXPECT_TRUE(testing::same_topk(expected, r.indices.data(), r.scores.data(), p.batch, p.k));
  return r;
}

testkit::RetrievalSpec small_spec(RetrievalKind kind, RetrievalMetric metric, DType dtype) {
  testkit::RetrievalSpec spec;
  spec.batch = 6;
  spec.n = 300;
  spec.dim = 64;
  spec.k = 17;
  spec.dtype = dtype;
  spec.metric = metric;
  spec.kind = kind;
  spec.seed = 7;
  return spec;
}

TEST(RetrievalReference, EveryWorkloadMetricAndDtype) {
  for (RetrievalKind kind : testkit::all_retrieval_kinds()) {
    for (RetrievalMetric metric :
         {RetrievalMetric::kInnerProduct, RetrievalMetric::kCosine, RetrievalMetric::kL2}) {
      for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
        for (RetrievalCorpusFormat format :
             {RetrievalCorpusFormat::kSameAsQueries, RetrievalCorpusFormat::kFp8E4M3}) {
          SCOPED_TRACE(::testing::Message()
                       << testkit::retrieval_kind_name(kind) << " " << retrieval_metric_name(metric)
                       << " " << dtype_name(dtype) << " " << retrieval_corpus_format_name(format));
          testkit::RetrievalSpec spec = small_spec(kind, metric, dtype);
          spec.corpus_format = format;
          const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(spec);
          const Result r = run_and_check(w.host_problem());
          for (int64_t i = 0; i < w.spec.batch * w.spec.k; ++i) ASSERT_GE(r.indices[i], 0);
        }
      }
    }
  }
}

TEST(RetrievalReference, Fp8CorpusScoresAreTheScaledRows) {
  auto spec = small_spec(RetrievalKind::kAnisotropic, RetrievalMetric::kInnerProduct,
                         DType::kFloat16);
  spec.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
  const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(spec);
  const Result r = run_and_check(w.host_problem());
  // The best row's score is the dot product with scale * e4m3 values, and close to the fp16
  // corpus' (the quantisation error of e4m3 is a few percent).
  auto fp16 = spec;
  fp16.corpus_format = RetrievalCorpusFormat::kSameAsQueries;
  const testkit::RetrievalWorkload reference = testkit::make_retrieval_workload(fp16);
  const Result r16 = run_and_check(reference.host_problem());
  for (int64_t b = 0; b < spec.batch; ++b) {
    EXPECT_NEAR(r.scores[b * spec.k], r16.scores[b * spec.k],
                0.1 * std::fabs(r16.scores[b * spec.k]) + 0.1)
        << "query " << b;
  }
}

TEST(RetrievalReference, WorkloadsAreDeterministicAndDistinct) {
  const auto spec = small_spec(RetrievalKind::kClustered, RetrievalMetric::kInnerProduct,
                               DType::kFloat16);
  EXPECT_EQ(testkit::make_retrieval_workload(spec).corpus,
            testkit::make_retrieval_workload(spec).corpus);
  auto other = spec;
  other.seed = 8;
  EXPECT_NE(testkit::make_retrieval_workload(spec).corpus,
            testkit::make_retrieval_workload(other).corpus);
}

TEST(RetrievalReference, L2WithAndWithoutNormsRanksByDistance) {
  const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(
      small_spec(RetrievalKind::kAnisotropic, RetrievalMetric::kL2, DType::kFloat16));
  RetrievalProblem p = w.host_problem();
  const Result computed = run_and_check(p);
  p.corpus_norms = w.corpus_norms.data();
  const Result given = run_and_check(p);
  EXPECT_EQ(computed.indices, given.indices);
  // The best row is the nearest one by squared distance, and its score is minus that distance.
  for (int64_t b = 0; b < p.batch; ++b) {
    double best = std::numeric_limits<double>::infinity();
    int32_t nearest = -1;
    for (int64_t c = 0; c < p.n; ++c) {
      double distance = 0.0;
      for (int64_t j = 0; j < p.dim; ++j) {
        const double q = float_bits::f32_from_f16_bits(w.queries[b * p.dim + j]);
        const double x = float_bits::f32_from_f16_bits(w.corpus[c * p.dim + j]);
        distance += (q - x) * (q - x);
      }
      if (distance < best) best = distance, nearest = static_cast<int32_t>(c);
    }
    EXPECT_EQ(given.indices[b * p.k], nearest) << "query " << b;
    EXPECT_NEAR(given.scores[b * p.k], -best, 1e-4 * (1.0 + best)) << "query " << b;
  }
}

TEST(RetrievalReference, TiesGoToTheSmallestIndices) {
  testkit::RetrievalWorkload w = testkit::make_retrieval_workload(
      small_spec(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct, DType::kBFloat16));
  // Seven distinct rows repeated: every score is tied about 43 times.
  const int64_t dim = w.spec.dim;
  for (int64_t c = 7; c < w.spec.n; ++c) {
    for (int64_t j = 0; j < dim; ++j) w.corpus[c * dim + j] = w.corpus[(c % 7) * dim + j];
  }
  RetrievalProblem p = w.host_problem();
  p.deterministic = true;
  const Result r = run_and_check(p);
  // The best of the seven rows fills the first slots with its copies, in ascending order.
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t j = 1; j < p.k; ++j) {
      if (r.scores[b * p.k + j] == r.scores[b * p.k + j - 1]) {
        EXPECT_EQ(r.indices[b * p.k + j], r.indices[b * p.k + j - 1] + 7);
      }
    }
  }
}

TEST(RetrievalReference, NaNRowsAndQueriesAreNeverSelected) {
  testkit::RetrievalWorkload w = testkit::make_retrieval_workload(
      small_spec(RetrievalKind::kNormalized, RetrievalMetric::kInnerProduct, DType::kFloat16));
  const int64_t dim = w.spec.dim;
  const uint16_t nan = float_bits::f16_bits_from_f32(std::numeric_limits<float>::quiet_NaN());
  for (int64_t c = 0; c < w.spec.n; c += 3) w.corpus[c * dim + 5] = nan;
  w.queries[2 * dim] = nan;  // query 2 scores NaN everywhere
  RetrievalProblem p = w.host_problem();
  p.k = 250;
  const Result r = run_and_check(p);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t j = 0; j < p.k; ++j) {
      const int32_t index = r.indices[b * p.k + j];
      if (b == 2) {
        EXPECT_EQ(index, -1);
      } else if (j < 200) {
        EXPECT_NE(index % 3, 0) << "query " << b << " selected NaN row " << index;
      } else {
        EXPECT_EQ(index, -1) << "only 200 rows are not NaN";
      }
    }
  }
}

TEST(RetrievalReference, KBeyondTheCorpusPads) {
  auto spec = small_spec(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct, DType::kFloat16);
  spec.n = 10;
  spec.k = 32;
  const Result r = run_and_check(testkit::make_retrieval_workload(spec).host_problem());
  for (int64_t b = 0; b < spec.batch; ++b) {
    for (int64_t j = 0; j < spec.k; ++j) EXPECT_EQ(r.indices[b * spec.k + j] < 0, j >= 10);
  }
}

TEST(RetrievalReference, RangesShorterThanKAndEmpty) {
  const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(
      small_spec(RetrievalKind::kClustered, RetrievalMetric::kL2, DType::kBFloat16));
  const std::vector<int32_t> starts = {0, 100, 5, 299, 150, 300};
  const std::vector<int32_t> ends = {300, 110, 5, 300, 290, 300};
  RetrievalProblem p = w.host_problem();
  p.range_starts = starts.data();
  p.range_ends = ends.data();
  const Result r = run_and_check(p);
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t length = ends[b] - starts[b];
    for (int64_t j = 0; j < p.k; ++j) {
      const int32_t index = r.indices[b * p.k + j];
      if (j < length) {
        EXPECT_GE(index, starts[b]);
        EXPECT_LT(index, ends[b]);
      } else {
        EXPECT_EQ(index, -1);
      }
    }
  }
  // Only ends: starts default to 0.
  p.range_starts = nullptr;
  run_and_check(p);
}

TEST(RetrievalReference, KOneAndTheLargestK) {
  auto spec = small_spec(RetrievalKind::kClustered, RetrievalMetric::kInnerProduct,
                         DType::kFloat16);
  spec.k = 1;
  run_and_check(testkit::make_retrieval_workload(spec).host_problem());
  spec.batch = 2;
  spec.n = 9000;
  spec.k = kRetrievalMaxK;
  const Result r = run_and_check(testkit::make_retrieval_workload(spec).host_problem());
  for (int32_t index : r.indices) ASSERT_GE(index, 0);
  spec.n = 5000;  // fewer rows than k: all of them, then padding
  run_and_check(testkit::make_retrieval_workload(spec).host_problem());
}

TEST(RetrievalReference, BitmapAllOffAllOnAndSparse) {
  for (RetrievalCorpusFormat format :
       {RetrievalCorpusFormat::kSameAsQueries, RetrievalCorpusFormat::kFp8E4M3}) {
    auto spec = small_spec(RetrievalKind::kNormalized, RetrievalMetric::kL2, DType::kBFloat16);
    spec.corpus_format = format;
    spec.n = 301;  // a partial last byte
    const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(spec);
    RetrievalProblem p = w.host_problem();
    const Result unfiltered = run_and_check(p);
    const std::vector<uint8_t> none = testkit::make_retrieval_bitmap(p.n, 0.0, 1);
    p.corpus_bitmap = none.data();
    for (int32_t index : run_and_check(p).indices) EXPECT_EQ(index, -1);
    const std::vector<uint8_t> all = testkit::make_retrieval_bitmap(p.n, 1.0, 1);
    p.corpus_bitmap = all.data();
    EXPECT_EQ(run_and_check(p).indices, unfiltered.indices);
    const std::vector<uint8_t> sparse = testkit::make_retrieval_bitmap(p.n, 0.04, 5);
    p.corpus_bitmap = sparse.data();
    const Result r = run_and_check(p);  // about 12 rows allowed, fewer than k
    for (int64_t i = 0; i < p.batch * p.k; ++i) {
      const int32_t c = r.indices[i];
      if (c >= 0) {
        EXPECT_TRUE((sparse[c >> 3] >> (c & 7)) & 1) << "row " << c;
      }
    }
    EXPECT_EQ(r.indices[p.k - 1], -1) << "a sparse bitmap allows fewer than k rows";
  }
}

TEST(RetrievalReference, BitmapWithRangesShorterThanK) {
  const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(
      small_spec(RetrievalKind::kAnisotropic, RetrievalMetric::kInnerProduct, DType::kFloat16));
  const std::vector<int32_t> starts = {0, 100, 5, 299, 150, 0};
  const std::vector<int32_t> ends = {300, 130, 5, 300, 290, 16};
  const std::vector<uint8_t> bitmap = testkit::make_retrieval_bitmap(w.spec.n, 0.5, 9);
  RetrievalProblem p = w.host_problem();
  p.range_starts = starts.data();
  p.range_ends = ends.data();
  p.corpus_bitmap = bitmap.data();
  run_and_check(p);
}

TEST(RetrievalReference, CorpusNormsHelper) {
  for (RetrievalCorpusFormat format :
       {RetrievalCorpusFormat::kSameAsQueries, RetrievalCorpusFormat::kFp8E4M3}) {
    auto spec = small_spec(RetrievalKind::kAnisotropic, RetrievalMetric::kL2, DType::kFloat16);
    spec.corpus_format = format;
    const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(spec);
    std::vector<float> norms(static_cast<std::size_t>(spec.n), -1.0f);
    ASSERT_TRUE(retrieval_corpus_norms_cpu(w.host_problem(), norms.data()).is_ok());
    EXPECT_EQ(norms, w.corpus_norms) << retrieval_corpus_format_name(format);
    // Passed back as corpus_norms, they give the same result as computing them.
    RetrievalProblem p = w.host_problem();
    const Result computed = run_and_check(p);
    p.corpus_norms = norms.data();
    EXPECT_EQ(run_and_check(p).indices, computed.indices);
  }
}

TEST(RetrievalReference, EmptyBatchAndCorpus) {
  auto spec = small_spec(RetrievalKind::kNormal, RetrievalMetric::kInnerProduct, DType::kFloat16);
  spec.n = 0;
  const Result r = run_and_check(testkit::make_retrieval_workload(spec).host_problem());
  for (int32_t index : r.indices) EXPECT_EQ(index, -1);
  spec.n = 300;
  spec.batch = 0;
  run_and_check(testkit::make_retrieval_workload(spec).host_problem());
}

}  // namespace
}  // namespace litetopk
