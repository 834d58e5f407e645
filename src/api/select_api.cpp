// Public GPU entry points of select_topk: validation, algorithm resolution, workspace checks.
#include <cstring>

#include "api/format.h"
#include "api/select_backend.h"
#include "api/workspace.h"
#include "litetopk/select.h"

namespace litetopk {

const char* select_algo_name(SelectAlgo algo) {
  switch (algo) {
    case SelectAlgo::kAuto: return "auto";
    case SelectAlgo::kRadix: return "radix";
    case SelectAlgo::kSampleFilter: return "sample-filter";
    case SelectAlgo::kGridRadix: return "grid-radix";
  }
  return "invalid";
}

bool parse_select_algo(const char* name, SelectAlgo* algo) {
  for (SelectAlgo a : {SelectAlgo::kAuto, SelectAlgo::kRadix, SelectAlgo::kSampleFilter,
                        SelectAlgo::kGridRadix}) {
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

namespace {

Status resolve_algo(const SelectProblem& problem, SelectAlgo requested, SelectAlgo* resolved) {
  switch (requested) {
    case SelectAlgo::kAuto:
      *resolved = detail::cuda_select_dispatch(problem);
      return Status::ok();
    case SelectAlgo::kRadix:
    case SelectAlgo::kGridRadix:
      *resolved = requested;
      return Status::ok();
    case SelectAlgo::kSampleFilter:
      if (problem.k > kSampleFilterMaxK) {
        return detail::invalid_argument("k must be <= ", kSampleFilterMaxK,
                                        " for algo sample-filter, got ", problem.k,
                                        " (use auto or radix)");
      }
      *resolved = requested;
      return Status::ok();
  }
  return detail::invalid_argument(
      "options.algo must be auto, radix, sample-filter or grid-radix, got ",
      static_cast<int>(requested));
}

}  // namespace

Status select_topk_workspace_size(const SelectProblem& problem, std::size_t* workspace_bytes,
                                  const SelectOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  Status status = validate_select_problem(problem);
  if (!status) return status;
  SelectAlgo algo;
  status = resolve_algo(problem, options.algo, &algo);
  if (!status) return status;
  return detail::cuda_select_workspace_size(problem, algo, workspace_bytes);
}

Status select_topk(const SelectProblem& problem, void* workspace, std::size_t workspace_bytes,
                   cudaStream_t stream, const SelectOptions& options) {
  Status status = validate_select_problem(problem);
  if (!status) return status;
  SelectAlgo algo;
  status = resolve_algo(problem, options.algo, &algo);
  if (!status) return status;
  std::size_t needed = 0;
  status = detail::cuda_select_workspace_size(problem, algo, &needed);
  if (!status) return status;
  status = detail::check_workspace(needed, workspace, workspace_bytes);
  if (!status) return status;
  if (options.validate_ranges && (problem.row_starts || problem.row_ends)) {
    status = detail::cuda_validate_select_ranges(problem, stream);
    if (!status) return status;
  }
  if (problem.batch == 0) return Status::ok();
  return detail::cuda_select_topk(problem, algo, workspace, workspace_bytes, stream);
}

}  // namespace litetopk
