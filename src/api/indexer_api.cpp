// Public GPU entry points of indexer_topk: validation, algorithm resolution, workspace checks.
#include <cstdint>
#include <cstring>

#include "api/format.h"
#include "formats/hot_sample_layout.h"
#include "api/indexer_backend.h"
#include "api/indexer_validation.h"
#include "api/workspace.h"
#include "heuristics/indexer_heuristics.h"
#include "litetopk/indexer.h"

namespace litetopk {

const char* indexer_algo_name(IndexerAlgo algo) {
  switch (algo) {
    case IndexerAlgo::kAuto: return "auto";
    case IndexerAlgo::kUnfused: return "unfused";
    case IndexerAlgo::kFused: return "fused";
  }
  return "invalid";
}

bool parse_indexer_algo(const char* name, IndexerAlgo* algo) {
  for (IndexerAlgo a : {IndexerAlgo::kAuto, IndexerAlgo::kUnfused, IndexerAlgo::kFused}) {
    if (std::strcmp(name, indexer_algo_name(a)) == 0) {
      *algo = a;
      return true;
    }
  }
  return false;
}

std::size_t indexer_state_bytes(int64_t k) { return hot_sample::state_bytes(k); }

Status indexer_state_reset(const IndexerState& state, cudaStream_t stream) {
  if (state.data == nullptr && state.bytes > 0) {
    return detail::invalid_argument("state.data is null but state.bytes is ", state.bytes);
  }
  return detail::cuda_memset_async(state.data, state.bytes, stream);
}

IndexerAlgo indexer_topk_dispatch(const IndexerProblem& problem) {
  return heuristics::choose_indexer_algo(problem);
}

namespace {

Status resolve_algo(const IndexerProblem& problem, IndexerAlgo requested, IndexerAlgo* resolved) {
  switch (requested) {
    case IndexerAlgo::kAuto:
      *resolved = indexer_topk_dispatch(problem);
      return Status::ok();
    case IndexerAlgo::kUnfused:
    case IndexerAlgo::kFused:
      *resolved = requested;
      return Status::ok();
  }
  return detail::invalid_argument("options.algo must be auto, unfused or fused, got ",
                                  static_cast<int>(requested));
}

Status check_options(const IndexerOptions& options) {
  if (options.candidate_capacity < 0) {
    return detail::invalid_argument("options.candidate_capacity must be >= 0, got ",
                                    options.candidate_capacity);
  }
  if (options.state != nullptr && options.state->data == nullptr && options.state->bytes > 0) {
    return detail::invalid_argument("options.state->data is null");
  }
  return Status::ok();
}

// The state, when one is given, must hold this k's hot sample.
Status check_state(const IndexerProblem& problem, const IndexerOptions& options) {
  if (options.state == nullptr || options.state->data == nullptr) return Status::ok();
  const std::size_t needed = indexer_state_bytes(problem.k);
  if (options.state->bytes < needed) {
    return detail::invalid_argument("options.state->bytes must be >= indexer_state_bytes(k = ",
                                    problem.k, ") = ", needed, ", got ", options.state->bytes);
  }
  if (reinterpret_cast<std::uintptr_t>(options.state->data) % alignof(int32_t) != 0) {
    return detail::invalid_argument("options.state->data must be 4-byte aligned");
  }
  return Status::ok();
}

}  // namespace

Status indexer_topk_workspace_size(const IndexerProblem& problem, std::size_t* workspace_bytes,
                                   const IndexerOptions& options) {
  if (workspace_bytes == nullptr) return detail::invalid_argument("workspace_bytes is null");
  *workspace_bytes = 0;
  if (Status s = validate_indexer_problem(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  if (Status s = check_state(problem, options); !s) return s;
  IndexerAlgo algo;
  if (Status s = resolve_algo(problem, options.algo, &algo); !s) return s;
  return detail::cuda_indexer_workspace_size(problem, algo, options, workspace_bytes);
}

Status indexer_topk(const IndexerProblem& problem, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream, const IndexerOptions& options) {
  if (Status s = validate_indexer_problem(problem); !s) return s;
  if (Status s = check_options(options); !s) return s;
  if (Status s = check_state(problem, options); !s) return s;
  IndexerAlgo algo;
  if (Status s = resolve_algo(problem, options.algo, &algo); !s) return s;
  std::size_t needed = 0;
  if (Status s = detail::cuda_indexer_workspace_size(problem, algo, options, &needed); !s) return s;
  if (Status s = detail::check_workspace(needed, workspace, workspace_bytes); !s) return s;
  if (problem.num_queries == 0) return Status::ok();
  return detail::cuda_indexer_topk(problem, algo, options, workspace, workspace_bytes, stream);
}

Status indexer_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                      cudaStream_t stream) {
  if (Status s = validate_indexer_inputs(problem); !s) return s;
  if (Status s = validate_indexer_logits_output(problem, logits, logits_stride); !s) return s;
  return detail::cuda_indexer_logits(problem, logits, logits_stride, stream);
}

}  // namespace litetopk
