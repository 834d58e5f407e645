// Public GPU entry points of sparse_attention: the algorithm names, validation, the workspace
// (the plan's), launch.
#include <cstddef>
#include <cstring>

#include "api/format.h"
#include "api/sparse_attention_backend.h"
#include "api/workspace.h"
#include "heuristics/attention_plan.h"
#include "litetopk/attention.h"

namespace litetopk {

const char* sparse_attention_algo_name(SparseAttentionAlgo algo) {
  switch (algo) {
    case SparseAttentionAlgo::kAuto: return "auto";
    case SparseAttentionAlgo::kPerQuery: return "per-query";
    case SparseAttentionAlgo::kUnionPacked: return "union-packed";
    case SparseAttentionAlgo::kPlain: return "plain";
  }
  return "invalid";
}

bool parse_sparse_attention_algo(const char* name, SparseAttentionAlgo* algo) {
  for (SparseAttentionAlgo a : {SparseAttentionAlgo::kAuto, SparseAttentionAlgo::kPerQuery,
                                SparseAttentionAlgo::kUnionPacked, SparseAttentionAlgo::kPlain}) {
    if (name != nullptr && std::strcmp(name, sparse_attention_algo_name(a)) == 0) {
      *algo = a;
      return true;
    }
  }
  return false;
}

Status sparse_attention_workspace_size(const SparseAttentionProblem& problem,
                                       std::size_t* workspace_bytes) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status s = validate_sparse_attention_problem(problem); !s) return s;
  *workspace_bytes = heuristics::plan_sparse_attention(problem).workspace_bytes;
  return Status::ok();
}

Status sparse_attention(const SparseAttentionProblem& problem, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream) {
  if (Status s = validate_sparse_attention_problem(problem); !s) return s;
  const heuristics::SparseAttentionPlan plan = heuristics::plan_sparse_attention(problem);
  if (Status s = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) {
    return s;
  }
  return detail::cuda_sparse_attention(problem, plan, workspace, stream);
}

}  // namespace litetopk
