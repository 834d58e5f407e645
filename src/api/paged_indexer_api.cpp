// Public GPU entry points of indexer_topk_paged: validation, algorithm resolution, workspace
// checks.
#include <cstddef>

#include "api/format.h"
#include "api/paged_indexer_backend.h"
#include "api/paged_indexer_validation.h"
#include "api/workspace.h"
#include "heuristics/indexer_heuristics.h"
#include "litetopk/indexer.h"

namespace litetopk {

IndexerAlgo indexer_topk_paged_dispatch(const PagedIndexerProblem& problem) {
  return heuristics::choose_paged_indexer_algo(problem);
}

namespace {

Status resolve_paged_algo(const PagedIndexerProblem& problem, IndexerAlgo requested,
                          IndexerAlgo* resolved) {
  switch (requested) {
    case IndexerAlgo::kAuto:
      *resolved = indexer_topk_paged_dispatch(problem);
      return Status::ok();
    case IndexerAlgo::kUnfused:
    case IndexerAlgo::kFused:
      *resolved = requested;
      return Status::ok();
  }
  return detail::invalid_argument("options.algo must be auto, unfused or fused, got ",
                                  static_cast<int>(requested));
}

}  // namespace

Status indexer_topk_paged_workspace_size(const PagedIndexerProblem& problem,
                                         std::size_t* workspace_bytes,
                                         const IndexerOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status s = validate_paged_indexer_problem(problem); !s) return s;
  IndexerAlgo algo;
  if (Status s = resolve_paged_algo(problem, options.algo, &algo); !s) return s;
  return detail::cuda_paged_indexer_workspace_size(problem, algo, workspace_bytes);
}

Status indexer_topk_paged(const PagedIndexerProblem& problem, void* workspace,
                          std::size_t workspace_bytes, cudaStream_t stream,
                          const IndexerOptions& options) {
  if (Status s = validate_paged_indexer_problem(problem); !s) return s;
  IndexerAlgo algo;
  if (Status s = resolve_paged_algo(problem, options.algo, &algo); !s) return s;
  std::size_t needed = 0;
  if (Status s = detail::cuda_paged_indexer_workspace_size(problem, algo, &needed); !s) return s;
  if (Status s = detail::check_workspace(needed, workspace, workspace_bytes); !s) return s;
  if (problem.batch == 0) return Status::ok();
  return detail::cuda_paged_indexer_topk(problem, algo, workspace, stream);
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
