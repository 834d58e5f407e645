// indexer_topk_plan / indexer_topk_paged_plan and their launches on the host: a plan checks the
// sizes and options before it asks anything of a device (its errors name the argument on any
// machine) and a failed plan does not look planned; a launch refuses a plan never made.
#include <gtest/gtest.h>

#include <string>

#include "litetopk/indexer.h"

namespace litetopk {
namespace {

IndexerProblem prefill_sizes() {
  IndexerProblem p;  // no addresses
  p.num_queries = 16;
  p.num_heads = 64;
  p.head_dim = 128;
  p.num_keys = 4096;
  p.k = 256;
  return p;
}

PagedIndexerProblem paged_sizes() {
  PagedIndexerProblem p;
  p.batch = 2;
  p.next_n = 1;
  p.num_heads = 64;
  p.head_dim = 128;
  p.num_blocks = 16;
  p.block_size = 64;
  p.max_blocks = 8;
  p.max_context = 512;
  p.k = 128;
  return p;
}

template <typename Plan>
void expect_rejected(const Status& status, const Plan& plan, const char* mention) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.to_string();
  EXPECT_NE(status.message().find(mention), std::string::npos)
      << "message \"" << status.message() << "\" does not name " << mention;
  EXPECT_EQ(plan.algo, IndexerAlgo::kAuto) << "a failed plan must not look planned";
  EXPECT_EQ(plan.workspace_bytes, 0u);
}

TEST(IndexerPlan, RejectsBadSizesAndOptions) {
  IndexerPlan plan;
  IndexerProblem p = prefill_sizes();
  p.k = 0;
  expect_rejected(indexer_topk_plan(p, {}, &plan), plan, "k must be in [1, 8192]");
  p = prefill_sizes();
  p.num_heads = 48;
  expect_rejected(indexer_topk_plan(p, {}, &plan), plan, "num_heads must be 32 or 64");
  IndexerOptions options;
  options.candidate_capacity = -1;
  expect_rejected(indexer_topk_plan(prefill_sizes(), options, &plan), plan,
                  "candidate_capacity");
  alignas(16) static unsigned char small_state[16];
  const IndexerState state{small_state, sizeof(small_state)};
  IndexerOptions with_state;
  with_state.state = &state;
  expect_rejected(indexer_topk_plan(prefill_sizes(), with_state, &plan), plan,
                  "indexer_state_bytes");
  IndexerOptions bad_algo;
  bad_algo.algo = static_cast<IndexerAlgo>(7);
  expect_rejected(indexer_topk_plan(prefill_sizes(), bad_algo, &plan), plan, "options.algo");
  EXPECT_EQ(indexer_topk_plan(prefill_sizes(), {}, nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(IndexerPlan, PagedRejectsBadSizes) {
  PagedIndexerPlan plan;
  PagedIndexerProblem p = paged_sizes();
  p.next_n = 5;
  expect_rejected(indexer_topk_paged_plan(p, {}, &plan), plan, "next_n");
  p = paged_sizes();
  p.k = 9000;
  expect_rejected(indexer_topk_paged_plan(p, {}, &plan), plan, "k must be in [1, 8192]");
}

TEST(IndexerPlan, LaunchOfAnUnmadePlanIsRefused) {
  Status status = indexer_topk_launch(IndexerPlan{}, IndexerAddresses{}, nullptr, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("indexer_topk_plan"), std::string::npos) << status.message();
  status = indexer_topk_paged_launch(PagedIndexerPlan{}, PagedIndexerAddresses{}, nullptr,
                                     nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("indexer_topk_paged_plan"), std::string::npos)
      << status.message();
}

}  // namespace
}  // namespace litetopk
