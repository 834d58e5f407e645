// sparse_attention's plan (attention_plan.h).
#include "heuristics/attention_plan.h"

namespace litetopk::heuristics {
namespace {

constexpr std::size_t kAlignment = 256;

std::size_t aligned(std::size_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

}  // namespace

bool union_packing_applies(const SparseAttentionProblem& problem) {
  if (problem.h_q != 16 && problem.h_q != 32) return false;
  return kAttentionMmaRows / problem.h_q * problem.topk <= kUnionMaxSlots &&
         problem.s_kv <= kUnionMaxTokens;
}

void plan_sparse_attention(const SparseAttentionProblem& problem, SparseAttentionPlan* plan) {
  plan->algo = problem.algo;
  plan->group = 1;
  plan->counts_offset = 0;
  plan->workspace_bytes = 0;
  if (plan->algo == SparseAttentionAlgo::kAuto) {
    plan->algo = union_packing_applies(problem) ? SparseAttentionAlgo::kUnionPacked
                                                : SparseAttentionAlgo::kPerQuery;
  }
  if (plan->algo != SparseAttentionAlgo::kUnionPacked) return;
  plan->group = static_cast<int32_t>(kAttentionMmaRows / problem.h_q);
  const int64_t groups = (problem.s_q + plan->group - 1) / plan->group;
  plan->counts_offset = aligned(static_cast<std::size_t>(groups * plan->group * problem.topk) * 4);
  plan->workspace_bytes = plan->counts_offset + aligned(static_cast<std::size_t>(groups) * 4);
}

}  // namespace litetopk::heuristics
