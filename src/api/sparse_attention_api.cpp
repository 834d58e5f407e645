// Public GPU entry points of sparse_attention: the algorithm names, the plan (shapes checked, the
// algorithm and workspace from src/heuristics/attention_plan.cpp), the launch (addresses
// checked), and the one-shot calls over both.
#include <cstddef>
#include <cstring>

#include "api/format.h"
#include "api/sparse_attention_backend.h"
#include "api/sparse_attention_validation.h"
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

Status sparse_attention_plan(const SparseAttentionProblem& problem, SparseAttentionPlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = SparseAttentionPlan{};
  if (Status s = detail::validate_sparse_attention_shapes(problem); !s) return s;
  SparseAttentionPlan planned{};
  heuristics::plan_sparse_attention(problem, &planned);
  planned.problem = problem;
  planned.problem.q = nullptr;
  planned.problem.kv = nullptr;
  planned.problem.indices = nullptr;
  planned.problem.out = nullptr;
  planned.problem.max_logits = nullptr;
  planned.problem.lse = nullptr;
  *plan = planned;
  return Status::ok();
}

Status sparse_attention_launch(const SparseAttentionPlan& plan,
                               const SparseAttentionAddresses& addresses, void* workspace,
                               cudaStream_t stream) {
  if (plan.algo == SparseAttentionAlgo::kAuto) {
    return detail::invalid_argument(
        "plan was not made by sparse_attention_plan (its algo is auto)");
  }
  SparseAttentionProblem problem = plan.problem;
  problem.q = addresses.q;
  problem.kv = addresses.kv;
  problem.indices = addresses.indices;
  problem.out = addresses.out;
  problem.max_logits = addresses.max_logits;
  problem.lse = addresses.lse;
  if (Status s = detail::validate_sparse_attention_addresses(problem); !s) return s;
  if (plan.workspace_bytes > 0 && workspace == nullptr && problem.s_q > 0) {
    return detail::invalid_argument("workspace must not be null (", plan.workspace_bytes,
                                    " bytes needed)");
  }
  return detail::cuda_sparse_attention(problem, plan, workspace, stream);
}

Status sparse_attention_workspace_size(const SparseAttentionProblem& problem,
                                       std::size_t* workspace_bytes) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status s = validate_sparse_attention_problem(problem); !s) return s;
  SparseAttentionPlan plan{};
  if (Status s = sparse_attention_plan(problem, &plan); !s) return s;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status sparse_attention(const SparseAttentionProblem& problem, void* workspace,
                        std::size_t workspace_bytes, cudaStream_t stream) {
  if (Status s = validate_sparse_attention_problem(problem); !s) return s;
  SparseAttentionPlan plan{};
  if (Status s = sparse_attention_plan(problem, &plan); !s) return s;
  if (Status s = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) {
    return s;
  }
  const SparseAttentionAddresses addresses{problem.q,   problem.kv,         problem.indices,
                                           problem.out, problem.max_logits, problem.lse};
  return sparse_attention_launch(plan, addresses, workspace, stream);
}

}  // namespace litetopk
