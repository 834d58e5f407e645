// retrieval_topk through the C ABI (liblitetopk_c): the CPU call matches the C++ reference (an
// fp16/bf16 corpus, and an fp8 corpus with a bitmap), so do the corpus norms, bad input is
// reported with the argument's name.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "litetopk/c_api.h"
#include "litetopk/retrieval.h"
#include "testkit/retrieval_workload.h"

namespace litetopk {
namespace {

testkit::RetrievalWorkload small_workload() {
  testkit::RetrievalSpec spec;
  spec.batch = 3;
  spec.n = 200;
  spec.dim = 96;
  spec.k = 9;
  spec.dtype = DType::kBFloat16;
  spec.metric = RetrievalMetric::kL2;
  spec.kind = testkit::RetrievalKind::kClustered;
  spec.seed = 11;
  return testkit::make_retrieval_workload(spec);
}

litetopk_retrieval_problem c_problem(const testkit::RetrievalWorkload& w, int32_t* indices,
                                     float* scores) {
  litetopk_retrieval_problem c{};
  c.queries = w.queries.data();
  c.corpus = w.corpus.data();
  c.dtype = LITETOPK_BFLOAT16;
  c.batch = w.spec.batch;
  c.n = w.spec.n;
  c.dim = w.spec.dim;
  c.metric = LITETOPK_METRIC_L2;
  c.corpus_norms = w.corpus_norms.data();
  c.k = w.spec.k;
  c.flags = LITETOPK_SORTED;
  c.indices = indices;
  c.scores = scores;
  return c;
}

TEST(RetrievalCApi, CpuMatchesTheCppReference) {
  const testkit::RetrievalWorkload w = small_workload();
  const std::size_t out = static_cast<std::size_t>(w.spec.batch * w.spec.k);
  std::vector<int32_t> c_indices(out, -7), cpp_indices(out, -8);
  std::vector<float> c_scores(out, 0.0f), cpp_scores(out, 1.0f);
  const litetopk_retrieval_problem c = c_problem(w, c_indices.data(), c_scores.data());
  ASSERT_EQ(litetopk_retrieval_topk_cpu(&c, 1), LITETOPK_OK) << litetopk_last_error();
  RetrievalProblem p = w.host_problem();
  p.corpus_norms = w.corpus_norms.data();
  p.sorted = true;
  p.indices = cpp_indices.data();
  p.scores = cpp_scores.data();
  ASSERT_TRUE(retrieval_topk_cpu(p).is_ok());
  EXPECT_EQ(c_indices, cpp_indices);
  EXPECT_EQ(c_scores, cpp_scores);
}

TEST(RetrievalCApi, Fp8CorpusBitmapAndNormsMatchTheCpp) {
  testkit::RetrievalSpec spec = small_workload().spec;
  spec.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
  const testkit::RetrievalWorkload w = testkit::make_retrieval_workload(spec);
  const std::vector<uint8_t> bitmap = testkit::make_retrieval_bitmap(w.spec.n, 0.5, 3);
  const std::size_t out = static_cast<std::size_t>(w.spec.batch * w.spec.k);
  std::vector<int32_t> c_indices(out, -7), cpp_indices(out, -8);
  std::vector<float> c_scores(out, 0.0f), cpp_scores(out, 1.0f);
  litetopk_retrieval_problem c = c_problem(w, c_indices.data(), c_scores.data());
  c.corpus = w.corpus_fp8.data();
  c.corpus_format = LITETOPK_CORPUS_FP8_E4M3;
  c.corpus_scales = w.corpus_scales.data();
  c.corpus_norms = nullptr;
  c.corpus_bitmap = bitmap.data();
  ASSERT_EQ(litetopk_retrieval_topk_cpu(&c, 1), LITETOPK_OK) << litetopk_last_error();
  RetrievalProblem p = w.host_problem();
  p.corpus_bitmap = bitmap.data();
  p.sorted = true;
  p.indices = cpp_indices.data();
  p.scores = cpp_scores.data();
  ASSERT_TRUE(retrieval_topk_cpu(p).is_ok());
  EXPECT_EQ(c_indices, cpp_indices);
  EXPECT_EQ(c_scores, cpp_scores);
  std::vector<float> norms(static_cast<std::size_t>(w.spec.n), -1.0f);
  ASSERT_EQ(litetopk_retrieval_corpus_norms_cpu(&c, norms.data()), LITETOPK_OK)
      << litetopk_last_error();
  EXPECT_EQ(norms, w.corpus_norms);
  c.corpus_scales = nullptr;
  EXPECT_EQ(litetopk_retrieval_corpus_norms_cpu(&c, norms.data()), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("corpus_scales must not be null"),
            std::string::npos)
      << litetopk_last_error();
}

TEST(RetrievalCApi, BadInputNamesTheArgument) {
  const testkit::RetrievalWorkload w = small_workload();
  std::vector<int32_t> indices(static_cast<std::size_t>(w.spec.batch * w.spec.k));
  litetopk_retrieval_problem c = c_problem(w, indices.data(), nullptr);
  c.dim = 100;
  EXPECT_EQ(litetopk_retrieval_topk_cpu(&c, 0), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("dim must be a multiple of 16"),
            std::string::npos)
      << litetopk_last_error();
  size_t bytes = 0;
  c.dim = w.spec.dim;
  c.k = 0;
  EXPECT_EQ(litetopk_retrieval_topk_workspace_size(&c, 0, &bytes), LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("k must be in [1, 8192]"), std::string::npos);
  EXPECT_EQ(litetopk_retrieval_topk_cpu(nullptr, 0), LITETOPK_INVALID_ARGUMENT);
  c.k = w.spec.k;
  EXPECT_EQ(litetopk_retrieval_topk_on_path_workspace_size(&c, 7, 0, &bytes),
            LITETOPK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(litetopk_last_error()).find("options.path must be auto, unfused or fused"),
            std::string::npos)
      << litetopk_last_error();
}

}  // namespace
}  // namespace litetopk
