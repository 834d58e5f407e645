// retrieval_topk past 2^31 corpus elements: an fp8 corpus of 2^25 + 2^20 rows of 64 (2.2 GB,
// zero but for a few planted rows, one of them at element 2^31 exactly), so that the chunk
// offsets, the widening, the row norms, the per-chunk epilogue (row scales, l2, the bitmap) and
// the chunks' index offsets all run on int64 offsets beyond int32. The answer is known in closed
// form: no CPU reference over the corpus.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "gpu/gpu_select_runner.h"
#include "litetopk/retrieval.h"
#include "testkit/device_memory.h"

namespace litetopk {
namespace {

constexpr int64_t kDim = 64;
constexpr int64_t kRows = (int64_t{1} << 31) / kDim + (int64_t{1} << 20);
constexpr uint8_t kE4m3One = 0x38;
constexpr uint16_t kHalfOne = 0x3c00;

struct Planted {
  int64_t row;
  float scale;
};
// Best first (scores rise with the scale for ip and, below 1, for l2); the last is masked off by
// the bitmap.
constexpr Planted kPlanted[] = {{int64_t{1} << 25, 0.5f},      {(int64_t{1} << 25) - 1, 0.45f},
                                {kRows - 1, 0.4f},            {34000000, 0.35f},
                                {5, 0.3f},                    {34500001, 0.25f}};
constexpr int kAllowed = 5;

TEST(RetrievalLargeGpu, Fp8CorpusPast2Pow31ElementsIpAndL2) {
  if (!testing::gpu_available()) GTEST_SKIP() << "no CUDA device";
  testkit::DeviceBuffer corpus, scales, bitmap, queries, indices, values, workspace;
  ASSERT_TRUE(corpus.allocate(static_cast<std::size_t>(kRows * kDim)).is_ok());
  ASSERT_TRUE(testkit::fill_device(corpus.data(), 0, corpus.size()).is_ok());
  const std::vector<uint8_t> ones(kDim, kE4m3One);
  std::vector<float> host_scales(static_cast<std::size_t>(kRows), 1.0f);
  std::vector<uint8_t> host_bitmap(static_cast<std::size_t>(retrieval_bitmap_bytes(kRows)), 0xff);
  for (const Planted& p : kPlanted) {
    ASSERT_TRUE(testkit::copy_to_device(corpus.as<uint8_t>() + p.row * kDim, ones.data(), kDim)
                    .is_ok());
    host_scales[static_cast<std::size_t>(p.row)] = p.scale;
  }
  const int64_t masked = kPlanted[kAllowed].row;
  host_bitmap[static_cast<std::size_t>(masked >> 3)] &= static_cast<uint8_t>(~(1u << (masked & 7)));
  const std::vector<uint16_t> query(kDim, kHalfOne);
  ASSERT_TRUE(scales.allocate(host_scales.size() * sizeof(float)).is_ok());
  ASSERT_TRUE(testkit::copy_to_device(scales.data(), host_scales.data(), scales.size()).is_ok());
  ASSERT_TRUE(bitmap.allocate(host_bitmap.size()).is_ok());
  ASSERT_TRUE(testkit::copy_to_device(bitmap.data(), host_bitmap.data(), bitmap.size()).is_ok());
  ASSERT_TRUE(queries.allocate(query.size() * sizeof(uint16_t)).is_ok());
  ASSERT_TRUE(testkit::copy_to_device(queries.data(), query.data(), queries.size()).is_ok());
  constexpr int64_t kK = 8;
  ASSERT_TRUE(indices.allocate(kK * sizeof(int32_t)).is_ok());
  ASSERT_TRUE(values.allocate(kK * sizeof(float)).is_ok());

  for (RetrievalMetric metric : {RetrievalMetric::kInnerProduct, RetrievalMetric::kL2}) {
    const bool l2 = metric == RetrievalMetric::kL2;
    SCOPED_TRACE(l2 ? "l2" : "ip");
    RetrievalProblem p;
    p.queries = queries.data();
    p.corpus = corpus.data();
    p.dtype = DType::kFloat16;
    p.corpus_format = RetrievalCorpusFormat::kFp8E4M3;
    p.corpus_scales = scales.as<float>();
    p.batch = 1;
    p.n = kRows;
    p.dim = kDim;
    p.metric = metric;
    p.corpus_bitmap = bitmap.as<uint8_t>();
    p.k = kK;
    p.sorted = true;
    p.deterministic = true;
    p.indices = indices.as<int32_t>();
    p.scores = values.as<float>();
    std::size_t bytes = 0;
    Status s = retrieval_topk_workspace_size(p, &bytes);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_TRUE(workspace.allocate(bytes).is_ok());
    ASSERT_TRUE(testkit::fill_device(indices.data(), 0x5a, indices.size()).is_ok());
    s = retrieval_topk(p, workspace.data(), bytes, nullptr);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int32_t> got(kK);
    std::vector<float> got_scores(kK);
    ASSERT_TRUE(testkit::copy_to_host(got.data(), indices.data(), indices.size()).is_ok());
    ASSERT_TRUE(testkit::copy_to_host(got_scores.data(), values.data(), values.size()).is_ok());
    // The planted rows the bitmap allows, best first, then the zero rows 0, 1, 2 (ties: the
    // smallest rows).
    const float dim = static_cast<float>(kDim);
    for (int64_t i = 0; i < kK; ++i) {
      const bool is_planted = i < kAllowed;
      const int64_t row = is_planted ? kPlanted[i].row : i - kAllowed;
      const float scale = is_planted ? kPlanted[i].scale : 0.0f;
      const float dot = scale * dim;
      const float expected = l2 ? (2.0f * dot - scale * scale * dim) - dim : dot;
      EXPECT_EQ(got[static_cast<std::size_t>(i)], row) << "slot " << i;
      EXPECT_FLOAT_EQ(got_scores[static_cast<std::size_t>(i)], expected) << "slot " << i;
    }
  }
}

}  // namespace
}  // namespace litetopk
