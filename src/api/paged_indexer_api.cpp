// Public GPU entry points of indexer_topk_paged: the plan (sizes checked, the algorithm resolved,
// the workspace sized by max_context), the launch (addresses checked), the one-shot calls.
#include <cstddef>

#include "api/format.h"
#include "api/paged_indexer_backend.h"
#include "api/indexer_validation.h"
#include "api/paged_indexer_validation.h"
#include "api/workspace.h"
#include "heuristics/indexer_heuristics.h"
#include "litetopk/indexer.h"

namespace litetopk {

IndexerAlgo indexer_topk_paged_dispatch(const PagedIndexerProblem& problem) {
  return heuristics::choose_paged_indexer_algo(problem);
}

Status indexer_topk_paged_plan(const PagedIndexerProblem& problem, const IndexerOptions& options,
                               PagedIndexerPlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = PagedIndexerPlan{};
  if (Status s = validate_paged_indexer_sizes(problem); !s) return s;
  PagedIndexerPlan planned{};
  if (Status s = resolve_indexer_algo(
          options.algo, [&] { return indexer_topk_paged_dispatch(problem); }, &planned.algo);
      !s) {
    return s;
  }
  if (Status s = detail::cuda_paged_indexer_workspace_size(problem, planned.algo,
                                                           &planned.workspace_bytes);
      !s) {
    return s;
  }
  planned.has_values = problem.values != nullptr;
  planned.problem = problem;
  planned.problem.q = nullptr;
  planned.problem.kv_cache = nullptr;
  planned.problem.weights = nullptr;
  planned.problem.context_lens = nullptr;
  planned.problem.block_table = nullptr;
  planned.problem.indices = nullptr;
  planned.problem.values = nullptr;
  *plan = planned;
  return Status::ok();
}

Status indexer_topk_paged_launch(const PagedIndexerPlan& plan,
                                 const PagedIndexerAddresses& addresses, void* workspace,
                                 cudaStream_t stream) {
  if (plan.algo == IndexerAlgo::kAuto) {
    return detail::invalid_argument(
        "plan was not made by indexer_topk_paged_plan (its algo is auto)");
  }
  PagedIndexerProblem problem = plan.problem;
  problem.q = addresses.q;
  problem.kv_cache = addresses.kv_cache;
  problem.weights = addresses.weights;
  problem.context_lens = addresses.context_lens;
  problem.block_table = addresses.block_table;
  problem.indices = addresses.indices;
  problem.values = plan.has_values ? addresses.values : nullptr;
  if (Status s = validate_paged_indexer_addresses(problem); !s) return s;
  if (plan.has_values && problem.values == nullptr && problem.batch > 0) {
    return detail::invalid_argument("values must not be null: the plan writes values");
  }
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return detail::invalid_argument("workspace must not be null (", plan.workspace_bytes,
                                    " bytes needed)");
  }
  if (problem.batch == 0) return Status::ok();
  return detail::cuda_paged_indexer_topk(problem, plan.algo, workspace, stream);
}

Status indexer_topk_paged_workspace_size(const PagedIndexerProblem& problem,
                                         std::size_t* workspace_bytes,
                                         const IndexerOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status s = validate_paged_indexer_problem(problem); !s) return s;
  PagedIndexerPlan plan{};
  if (Status s = indexer_topk_paged_plan(problem, options, &plan); !s) return s;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status indexer_topk_paged(const PagedIndexerProblem& problem, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream,
                          const IndexerOptions& options) {
  if (Status s = validate_paged_indexer_problem(problem); !s) return s;
  PagedIndexerPlan plan{};
  if (Status s = indexer_topk_paged_plan(problem, options, &plan); !s) return s;
  if (Status s = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes); !s) {
    return s;
  }
  const PagedIndexerAddresses addresses{problem.q,       problem.kv_cache,    problem.weights,
                                        problem.context_lens, problem.block_table,
                                        problem.indices, problem.values};
  return indexer_topk_paged_launch(plan, addresses, workspace, stream);
}

Status indexer_logits_paged(const PagedIndexerProblem& problem, float* logits,
                            int64_t logits_stride, cudaStream_t stream) {
  if (Status s = validate_paged_indexer_inputs(problem); !s) return s;
  if (Status s = validate_paged_indexer_logits_output(problem, logits, logits_stride); !s) {
    return s;
  }
  if (problem.batch == 0 || problem.max_context == 0) return Status::ok();
  return detail::cuda_paged_indexer_logits(problem, logits, logits_stride, stream);
}

}  // namespace litetopk
