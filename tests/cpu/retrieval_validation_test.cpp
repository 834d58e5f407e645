// Bad input to retrieval_topk: kInvalidArgument naming the argument, from the CPU reference and
// the plan, with nothing written.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <vector>

#include "common/validation_testing.h"
#include "litetopk/retrieval.h"

namespace litetopk {
namespace {

struct BadInput {
  const char* name;     // gtest-safe
  const char* mention;  // the message must contain this
  bool sizes_only;      // the plan (which ignores addresses) rejects it too
  void (*break_it)(RetrievalProblem&);
};

const BadInput kBadInputs[] = {
    {"DtypeFloat32", "dtype must be float16 or bfloat16, got float32", true,
     [](RetrievalProblem& p) { p.dtype = DType::kFloat32; }},
    {"BatchNegative", "batch must be >= 0, got -1", true,
     [](RetrievalProblem& p) { p.batch = -1; }},
    {"NNegative", "n must be >= 0, got -2", true, [](RetrievalProblem& p) { p.n = -2; }},
    {"NTooLarge", "n must be <= 2147483647", true,
     [](RetrievalProblem& p) { p.n = int64_t{1} << 31; }},
    {"DimSmall", "dim must be a multiple of 16 in [64, 1024], got 48", true,
     [](RetrievalProblem& p) { p.dim = 48; }},
    {"DimLarge", "got 1040", true, [](RetrievalProblem& p) { p.dim = 1040; }},
    {"DimOdd", "got 72", true, [](RetrievalProblem& p) { p.dim = 72; }},
    {"MetricInvalid", "metric must be ip, cosine or l2, got 9", true,
     [](RetrievalProblem& p) { p.metric = static_cast<RetrievalMetric>(9); }},
    {"NormsWithoutL2", "corpus_norms must be null unless metric is l2", true,
     [](RetrievalProblem& p) { p.metric = RetrievalMetric::kInnerProduct; }},
    {"CorpusFormatInvalid", "corpus_format must be same_as_queries or fp8_e4m3, got 5", true,
     [](RetrievalProblem& p) { p.corpus_format = static_cast<RetrievalCorpusFormat>(5); }},
    {"ScalesWithoutFp8", "corpus_scales must be null unless corpus_format is fp8_e4m3", true,
     [](RetrievalProblem& p) { p.corpus_scales = p.corpus_norms; }},
    {"Fp8WithoutScales", "corpus_scales must not be null: corpus_format is fp8_e4m3", false,
     [](RetrievalProblem& p) { p.corpus_format = RetrievalCorpusFormat::kFp8E4M3; }},
    {"MisalignedScales", "corpus_scales must be 4-byte aligned", false,
     [](RetrievalProblem& p) {
       p.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
       p.corpus_scales = static_cast<const float*>(testing::offset(p.corpus_norms, 2));
     }},
    {"KZero", "k must be in [1, 8192], got 0", true, [](RetrievalProblem& p) { p.k = 0; }},
    {"KLarge", "k must be in [1, 8192], got 8193", true, [](RetrievalProblem& p) { p.k = 8193; }},
    {"NullQueries", "queries must not be null", false,
     [](RetrievalProblem& p) { p.queries = nullptr; }},
    {"NullCorpus", "corpus must not be null", false,
     [](RetrievalProblem& p) { p.corpus = nullptr; }},
    {"NullIndices", "indices must not be null", false,
     [](RetrievalProblem& p) { p.indices = nullptr; }},
    {"MisalignedCorpus", "corpus must be 16-byte aligned", false,
     [](RetrievalProblem& p) { p.corpus = testing::offset(p.corpus, 8); }},
    {"MisalignedQueries", "queries must be 16-byte aligned", false,
     [](RetrievalProblem& p) { p.queries = testing::offset(p.queries, 2); }},
    {"MisalignedNorms", "corpus_norms must be 4-byte aligned", false,
     [](RetrievalProblem& p) { p.corpus_norms = testing::offset(p.corpus_norms, 2); }},
    {"MisalignedScores", "scores must be 4-byte aligned", false,
     [](RetrievalProblem& p) { p.scores = testing::offset(p.scores, 1); }},
};

class RetrievalValidation : public ::testing::TestWithParam<BadInput> {
 protected:
  // A valid problem: 2 queries, 8 rows, dim 64, l2 with norms and ranges, k 4.
  RetrievalProblem valid() {
    RetrievalProblem p;
    p.queries = queries_.data();
    p.corpus = corpus_.data();
    p.dtype = DType::kFloat16;
    p.batch = 2;
    p.n = 8;
    p.dim = 64;
    p.metric = RetrievalMetric::kL2;
    p.corpus_norms = norms_.data();
    p.range_starts = starts_.data();
    p.range_ends = ends_.data();
    p.k = 4;
    p.indices = indices_.data();
    p.scores = scores_.data();
    return p;
  }
  std::vector<uint16_t> queries_ = std::vector<uint16_t>(2 * 64 + 8, 0x3c00);
  std::vector<uint16_t> corpus_ = std::vector<uint16_t>(8 * 64 + 8, 0x3c00);
  std::vector<float> norms_ = std::vector<float>(9, 64.0f);
  std::vector<int32_t> starts_ = {0, 2};
  std::vector<int32_t> ends_ = {8, 6};
  std::vector<int32_t> indices_ = std::vector<int32_t>(8, 77);
  std::vector<float> scores_ = std::vector<float>(9, 77.0f);
};

TEST_P(RetrievalValidation, NamesTheArgumentAndWritesNothing) {
  const BadInput& bad = GetParam();
  RetrievalProblem p = valid();
  ASSERT_TRUE(retrieval_topk_cpu(p).is_ok());
  indices_.assign(indices_.size(), 77);
  bad.break_it(p);
  EXPECT_TRUE(testing::rejects_naming(retrieval_topk_cpu(p), bad.mention));
  EXPECT_TRUE(testing::rejects_naming(validate_retrieval_problem(p), bad.mention));
  for (int32_t index : indices_) EXPECT_EQ(index, 77);
  if (bad.sizes_only) {
    RetrievalPlan plan;
    EXPECT_TRUE(testing::rejects_naming(retrieval_topk_plan(p, {}, &plan), bad.mention));
    EXPECT_FALSE(plan.planned);
  }
}

INSTANTIATE_TEST_SUITE_P(BadInputs, RetrievalValidation, ::testing::ValuesIn(kBadInputs),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(RetrievalValidation, HostRangesAreChecked) {
  RetrievalProblem p = valid();
  starts_[1] = 7;  // start 7 > end 6
  EXPECT_TRUE(testing::rejects_naming(retrieval_topk_cpu(p),
                                      "range [range_starts[1], range_ends[1]) must satisfy 0 <= "
                                      "start <= end <= n (8), got [7, 6)"));
  starts_[1] = 0;
  ends_[0] = 9;
  EXPECT_TRUE(testing::rejects_naming(retrieval_topk_cpu(p), "got [0, 9)"));
}

TEST_F(RetrievalValidation, CorpusNormsHelperNamesTheArgument) {
  RetrievalProblem p = valid();
  std::vector<float> norms(8, -1.0f);
  ASSERT_TRUE(retrieval_corpus_norms_cpu(p, norms.data()).is_ok());
  EXPECT_EQ(norms[3], 64.0f);
  EXPECT_TRUE(testing::rejects_naming(retrieval_corpus_norms_cpu(p, nullptr),
                                      "norms must not be null"));
  p.dim = 40;
  EXPECT_TRUE(testing::rejects_naming(retrieval_corpus_norms_cpu(p, norms.data()),
                                      "dim must be a multiple of 16"));
  p.dim = 64;
  p.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
  EXPECT_TRUE(testing::rejects_naming(retrieval_corpus_norms_cpu(p, norms.data()),
                                      "corpus_scales must not be null"));
  EXPECT_TRUE(testing::rejects_naming(retrieval_corpus_norms(p, norms.data(), nullptr),
                                      "corpus_scales must not be null"));
}

TEST_F(RetrievalValidation, PlanRejectsANegativeChunk) {
  RetrievalOptions options;
  options.chunk_rows = -1;
  RetrievalPlan plan;
  EXPECT_TRUE(testing::rejects_naming(retrieval_topk_plan(valid(), options, &plan),
                                      "options.chunk_rows must be >= 0"));
}

TEST_F(RetrievalValidation, LaunchRejectsAnUnplannedPlan) {
  EXPECT_TRUE(testing::rejects_naming(retrieval_topk_launch(RetrievalPlan{}, {}, nullptr, nullptr),
                                      "plan was not made by retrieval_topk_plan"));
}

TEST(RetrievalMetricNames, RoundTrip) {
  for (RetrievalMetric metric :
       {RetrievalMetric::kInnerProduct, RetrievalMetric::kCosine, RetrievalMetric::kL2}) {
    RetrievalMetric parsed = RetrievalMetric::kL2;
    ASSERT_TRUE(parse_retrieval_metric(retrieval_metric_name(metric), &parsed));
    EXPECT_EQ(parsed, metric);
  }
  RetrievalMetric parsed;
  EXPECT_FALSE(parse_retrieval_metric("dot", &parsed));
}

}  // namespace
}  // namespace litetopk
