// select_topk's dispatch rule (src/heuristics/select_heuristics.cpp) on the shape classes it
// separates, from the planners' facts (no device needed).
#include <gtest/gtest.h>

#include "heuristics/select_heuristics.h"

namespace litetopk::heuristics {
namespace {

SelectShapeFacts facts(int64_t n, int64_t k, int32_t segments, int32_t grid_segments,
                       int32_t element_bytes = 4, int32_t sieve_segments = 0) {
  SelectShapeFacts f;
  f.n = n;
  f.k = k;
  f.element_bytes = element_bytes;
  f.sample_filter_segments = segments;
  f.grid_radix_segments = grid_segments;
  f.sieve_segments = sieve_segments;
  return f;
}

TEST(SelectDispatch, ABlockPerRowStreamsOnce) {
  EXPECT_EQ(choose_select_algo(facts(200000, 1024, 1, 0)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(524288, 256, 1, 1)), SelectAlgo::kSampleFilter);
}

TEST(SelectDispatch, AFewLongSegmentsStillStreamOnce) {
  // 2 segments of 65536 (64 x 131072 in wide blocks before 4ffe6d4 kept them whole), 32 x 2^20
  // (4 of 262144).
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 2, 4)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(1 << 20, 2048, 4, 8)), SelectAlgo::kSampleFilter);
  // 64 x 65536: two short fp32 segments stream too; three short ones do not.
  EXPECT_EQ(choose_select_algo(facts(65536, 2048, 2, 4, 4, 8)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(65536, 2048, 3, 6, 4, 12)), SelectAlgo::kSieve);
  // 32 x 131072 in wide blocks: 4 short segments go to grid-radix (no sieve plan) or the
  // sieve, 16-bit ones too.
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 4, 8)), SelectAlgo::kGridRadix);
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 4, 8, 2, 16)), SelectAlgo::kSieve);
}

TEST(SelectDispatch, ManySegmentsGoToTheRadixPaths) {
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 33, 64)), SelectAlgo::kGridRadix);
  EXPECT_EQ(choose_select_algo(facts(1 << 20, 4096, 16, 32, 2)), SelectAlgo::kGridRadix);
  EXPECT_EQ(choose_select_algo(facts(1 << 24, 1024, 264, 0)), SelectAlgo::kRadix);
}

TEST(SelectDispatch, SplitRowsSieve) {
  // 1 x 131072 and 32 x 131072 bf16: sieve where grid-radix would run.
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 33, 64, 2, 128)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 8, 16, 2, 16)), SelectAlgo::kSieve);
  // fp32: sieve for 8-64 rows of 131072 (33 and 16 segments), grid-radix for one row (128).
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 33, 64, 4, 33)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 8, 16, 4, 16)), SelectAlgo::kSieve);
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 33, 64, 4, 128)), SelectAlgo::kGridRadix);
  // Two 16-bit segments stay with sample-filter; survivors that do not fit: grid-radix.
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 2, 8, 2, 16)), SelectAlgo::kSampleFilter);
  EXPECT_EQ(choose_select_algo(facts(131072, 2048, 33, 64, 2, 0)), SelectAlgo::kGridRadix);
}

TEST(SelectDispatch, KBeyondSampleFilterNeverPicksIt) {
  EXPECT_EQ(choose_select_algo(facts(100000, 20000, 1, 0)), SelectAlgo::kRadix);
  EXPECT_EQ(choose_select_algo(facts(100000, 20000, 1, 2)), SelectAlgo::kGridRadix);
}

}  // namespace
}  // namespace litetopk::heuristics
