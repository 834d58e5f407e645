// Public GPU entry points of merge_topk: the plan (validate sizes, size the workspace), the launch
// (check addresses, launch), and the one-shot calls over both.
#include "api/format.h"
#include "api/merge_backend.h"
#include "api/merge_validation.h"
#include "api/workspace.h"
#include "litetopk/merge.h"

namespace litetopk {

Status merge_topk_plan(const MergeProblem& problem, MergePlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = MergePlan{};
  if (Status status = detail::validate_merge_sizes(problem); !status) return status;
  MergePlan planned{};
  planned.problem = detail::with_merge_strides(problem);
  planned.problem.values = nullptr;
  planned.problem.indices = nullptr;
  planned.problem.counts = nullptr;
  planned.problem.out_indices = nullptr;
  planned.problem.out_values = nullptr;
  if (Status status = detail::cuda_merge_workspace_size(planned.problem, &planned.workspace_bytes);
      !status) {
    return status;
  }
  planned.has_counts = problem.counts != nullptr;
  planned.has_values = problem.out_values != nullptr;
  planned.planned = true;
  *plan = planned;
  return Status::ok();
}

Status merge_topk_launch(const MergePlan& plan, const MergeAddresses& addresses, void* workspace,
                         cudaStream_t stream) {
  if (!plan.planned) return detail::invalid_argument("plan was not made by merge_topk_plan");
  MergeProblem problem = plan.problem;
  problem.values = addresses.values;
  problem.indices = addresses.indices;
  problem.counts = plan.has_counts ? addresses.counts : nullptr;
  problem.out_indices = addresses.out_indices;
  problem.out_values = plan.has_values ? addresses.out_values : nullptr;
  if (Status status = detail::validate_merge_addresses(problem); !status) return status;
  if (plan.has_counts && problem.counts == nullptr) {
    return detail::invalid_argument("counts must not be null: the plan reads counts");
  }
  if (plan.has_values && problem.out_values == nullptr) {
    return detail::invalid_argument("out_values must not be null: the plan writes values");
  }
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return detail::invalid_argument("workspace must not be null (", plan.workspace_bytes,
                                    " bytes needed)");
  }
  if (problem.batch == 0) return Status::ok();
  return detail::cuda_merge_launch(problem, workspace, stream);
}

Status merge_topk_workspace_size(const MergeProblem& problem, std::size_t* workspace_bytes) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status status = validate_merge_problem(problem); !status) return status;
  MergePlan plan{};
  if (Status status = merge_topk_plan(problem, &plan); !status) return status;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status merge_topk(const MergeProblem& problem, void* workspace, std::size_t workspace_bytes,
                  cudaStream_t stream) {
  if (Status status = validate_merge_problem(problem); !status) return status;
  MergePlan plan{};
  if (Status status = merge_topk_plan(problem, &plan); !status) return status;
  if (Status status = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes);
      !status) {
    return status;
  }
  const MergeAddresses addresses{problem.values, problem.indices, problem.counts,
                                 problem.out_indices, problem.out_values};
  return merge_topk_launch(plan, addresses, workspace, stream);
}

}  // namespace litetopk
