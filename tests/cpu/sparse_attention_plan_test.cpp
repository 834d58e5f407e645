// sparse_attention_plan and sparse_attention_launch on the host: a plan needs only shapes (no
// device, no addresses), resolves the algorithm and sizes the workspace exactly as the one-shot
// size query; a launch checks the addresses before anything reaches a device, and refuses a plan
// that was never made.
#include <gtest/gtest.h>

#include <string>

#include "litetopk/attention.h"

namespace litetopk {
namespace {

SparseAttentionProblem shapes(int64_t h_q, SparseAttentionAlgo algo) {
  SparseAttentionProblem p;  // no addresses
  p.s_q = 9;
  p.s_kv = 1000;
  p.h_q = h_q;
  p.d_qk = 576;
  p.topk = 64;
  p.sm_scale = 0.04f;
  p.algo = algo;
  return p;
}

TEST(SparseAttentionPlan, FromShapesAlone) {
  struct Want {
    int64_t h_q;
    SparseAttentionAlgo asked, runs;
    int32_t group;
  };
  for (const Want& w : {Want{16, SparseAttentionAlgo::kAuto, SparseAttentionAlgo::kUnionPacked, 4},
                        Want{32, SparseAttentionAlgo::kAuto, SparseAttentionAlgo::kUnionPacked, 2},
                        Want{64, SparseAttentionAlgo::kAuto, SparseAttentionAlgo::kPerQuery, 1},
                        Want{16, SparseAttentionAlgo::kPlain, SparseAttentionAlgo::kPlain, 1}}) {
    SparseAttentionPlan plan;
    const Status status = sparse_attention_plan(shapes(w.h_q, w.asked), &plan);
    ASSERT_TRUE(status.is_ok()) << status.to_string();
    EXPECT_EQ(plan.algo, w.runs) << "h_q " << w.h_q;
    EXPECT_EQ(plan.group, w.group);
    EXPECT_EQ(plan.problem.q, nullptr);
    EXPECT_EQ(plan.problem.h_q, w.h_q);
    EXPECT_EQ(plan.workspace_bytes > 0, w.runs == SparseAttentionAlgo::kUnionPacked);
  }
}

TEST(SparseAttentionPlan, RejectsBadShapesByName) {
  SparseAttentionPlan plan;
  SparseAttentionProblem p = shapes(8, SparseAttentionAlgo::kAuto);
  Status status = sparse_attention_plan(p, &plan);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("h_q must be 16, 32, 64 or 128"), std::string::npos);
  EXPECT_EQ(plan.algo, SparseAttentionAlgo::kAuto) << "a failed plan must not look planned";
  p = shapes(64, SparseAttentionAlgo::kUnionPacked);
  status = sparse_attention_plan(p, &plan);
  EXPECT_NE(status.message().find("algo union-packed needs h_q 16 or 32"), std::string::npos);
  EXPECT_EQ(sparse_attention_plan(shapes(16, SparseAttentionAlgo::kAuto), nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST(SparseAttentionPlan, LaunchChecksAddressesFirst) {
  SparseAttentionPlan plan;
  ASSERT_TRUE(sparse_attention_plan(shapes(64, SparseAttentionAlgo::kAuto), &plan).is_ok());
  SparseAttentionAddresses addresses;  // q missing
  Status status = sparse_attention_launch(plan, addresses, nullptr, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("q must not be null"), std::string::npos) << status.message();
  const SparseAttentionPlan never_planned;
  status = sparse_attention_launch(never_planned, addresses, nullptr, nullptr);
  EXPECT_NE(status.message().find("sparse_attention_plan"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace litetopk
