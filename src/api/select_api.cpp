// Public GPU entry points of select_topk: the plan (validate sizes, resolve the algorithm, size
// the workspace), the launch (check addresses, launch), and the one-shot calls over both.
#include <cstring>

#include "api/format.h"
#include "api/select_backend.h"
#include "api/select_validation.h"
#include "api/workspace.h"
#include "litetopk/select.h"

namespace litetopk {

const char* select_algo_name(SelectAlgo algo) {
  switch (algo) {
    case SelectAlgo::kAuto: return "auto";
    case SelectAlgo::kRadix: return "radix";
    case SelectAlgo::kSampleFilter: return "sample-filter";
    case SelectAlgo::kGridRadix: return "grid-radix";
    case SelectAlgo::kSieve: return "sieve";
    case SelectAlgo::kCluster: return "cluster";
    case SelectAlgo::kRegister: return "register";
  }
  return "invalid";
}

bool parse_select_algo(const char* name, SelectAlgo* algo) {
  for (SelectAlgo a : {SelectAlgo::kAuto, SelectAlgo::kRadix, SelectAlgo::kSampleFilter,
                        SelectAlgo::kGridRadix, SelectAlgo::kSieve, SelectAlgo::kCluster,
                        SelectAlgo::kRegister}) {
    if (std::strcmp(name, select_algo_name(a)) == 0) {
      *algo = a;
      return true;
    }
  }
  return false;
}

SelectAlgo select_topk_dispatch(const SelectProblem& problem) {
  return detail::cuda_select_dispatch(problem);
}

Status select_topk_plan(const SelectProblem& problem, const SelectOptions& options,
                        SelectPlan* plan) {
  if (plan == nullptr) return detail::invalid_argument("plan is null");
  *plan = SelectPlan{};
  if (Status status = detail::validate_select_sizes(problem); !status) return status;
  switch (options.algo) {
    case SelectAlgo::kAuto:
    case SelectAlgo::kRadix:
    case SelectAlgo::kGridRadix:
    case SelectAlgo::kSieve:
    case SelectAlgo::kCluster:
    case SelectAlgo::kRegister:
      break;
    case SelectAlgo::kSampleFilter:
      if (problem.k > kSampleFilterMaxK) {
        return detail::invalid_argument("k must be <= ", kSampleFilterMaxK,
                                        " for algo sample-filter, got ", problem.k,
                                        " (use auto or radix)");
      }
      break;
    default:
      return detail::invalid_argument(
          "options.algo must be auto, radix, sample-filter, grid-radix, sieve, cluster or register, "
          "got ",
          static_cast<int>(options.algo));
  }
  SelectPlan planned{};
  if (Status status = detail::cuda_select_plan(problem, options.algo, &planned); !status) {
    return status;
  }
  planned.problem = problem;
  planned.problem.scores = nullptr;
  planned.problem.row_starts = nullptr;
  planned.problem.row_ends = nullptr;
  planned.problem.indices = nullptr;
  planned.problem.values = nullptr;
  planned.validate_ranges = options.validate_ranges;
  planned.has_row_starts = problem.row_starts != nullptr;
  planned.has_row_ends = problem.row_ends != nullptr;
  planned.has_values = problem.values != nullptr;
  *plan = planned;
  return Status::ok();
}

Status select_topk_launch(const SelectPlan& plan, const SelectAddresses& addresses,
                          void* workspace, cudaStream_t stream) {
  if (plan.algo == SelectAlgo::kAuto) {
    return detail::invalid_argument("plan was not made by select_topk_plan (its algo is auto)");
  }
  SelectProblem problem = plan.problem;
  problem.scores = addresses.scores;
  problem.row_starts = plan.has_row_starts ? addresses.row_starts : nullptr;
  problem.row_ends = plan.has_row_ends ? addresses.row_ends : nullptr;
  problem.indices = addresses.indices;
  problem.values = plan.has_values ? addresses.values : nullptr;
  if (Status status = detail::validate_select_addresses(problem); !status) return status;
  if ((plan.has_row_starts && problem.row_starts == nullptr) ||
      (plan.has_row_ends && problem.row_ends == nullptr)) {
    return detail::invalid_argument("row_starts and row_ends must be set as when planned");
  }
  if (plan.has_values && problem.values == nullptr) {
    return detail::invalid_argument("values must not be null: the plan writes values");
  }
  if (plan.workspace_bytes > 0 && workspace == nullptr) {
    return detail::invalid_argument("workspace must not be null (", plan.workspace_bytes,
                                    " bytes needed)");
  }
  if (problem.batch == 0) return Status::ok();
  if (plan.validate_ranges && (problem.row_starts || problem.row_ends)) {
    if (Status status = detail::cuda_validate_select_ranges(problem, stream); !status) {
      return status;
    }
  }
  return detail::cuda_select_launch(plan, problem, workspace, stream);
}

Status select_topk_workspace_size(const SelectProblem& problem, std::size_t* workspace_bytes,
                                  const SelectOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status status = validate_select_problem(problem); !status) return status;
  SelectPlan plan{};
  if (Status status = select_topk_plan(problem, options, &plan); !status) return status;
  *workspace_bytes = plan.workspace_bytes;
  return Status::ok();
}

Status select_topk(const SelectProblem& problem, void* workspace, std::size_t workspace_bytes,
                   cudaStream_t stream, const SelectOptions& options) {
  if (Status status = validate_select_problem(problem); !status) return status;
  SelectPlan plan{};
  if (Status status = select_topk_plan(problem, options, &plan); !status) return status;
  if (Status status = detail::check_workspace(plan.workspace_bytes, workspace, workspace_bytes);
      !status) {
    return status;
  }
  const SelectAddresses addresses{problem.scores, problem.row_starts, problem.row_ends,
                                  problem.indices, problem.values};
  return select_topk_launch(plan, addresses, workspace, stream);
}

}  // namespace litetopk
