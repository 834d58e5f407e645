// The CUDA backend of indexer_topk. The unfused path: the logits kernel writes [T, S] fp32 into
// the workspace, then select_topk picks each row's top k inside [ks, ke). The fused path: one
// kernel scores and selects (fused_indexer_kernel.cu); its workspace holds candidate lists. With
// an IndexerState, the fused kernel first scores the previous chunk's hot sample, and either path
// then writes this chunk's (hot_sample_writer.cu) with the rest of the workspace.
#include <cuda_runtime_api.h>

#include "core/indexer_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/indexer/indexer_kernels.h"
#include "litetopk/select.h"

namespace litetopk::detail {
namespace {

constexpr std::size_t kAlignment = 256;

std::size_t logits_bytes(const IndexerProblem& problem) {
  const auto bytes = static_cast<std::size_t>(problem.num_queries * problem.num_keys) * sizeof(float);
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

// The selection over the materialized logits.
SelectProblem logits_selection(const IndexerProblem& problem, const float* logits) {
  SelectProblem select;
  select.scores = logits;
  select.dtype = DType::kFloat32;
  select.batch = problem.num_queries;
  select.n = problem.num_keys;
  select.row_stride = problem.num_keys;
  select.row_starts = problem.ks;
  select.row_ends = problem.ke;
  select.k = problem.k;
  select.indices = problem.indices;
  select.values = problem.values;
  return select;
}

// The state to write after the selection (and for the fused kernel to read first), or null.
void* state_of(const IndexerOptions& options) {
  return options.state != nullptr ? options.state->data : nullptr;
}

std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// The selection's own workspace (before the hot-sample writer's, which follows it when a state
// is given).
Status selection_workspace_size(const IndexerProblem& problem, IndexerAlgo algo,
                                const IndexerOptions& options, std::size_t* workspace_bytes) {
  if (algo == IndexerAlgo::kFused) {
    cuda_indexer::FusedPlan plan;
    if (Status s = cuda_indexer::plan_fused(problem, options.candidate_capacity, &plan); !s) {
      return s;
    }
    *workspace_bytes = plan.workspace_bytes;
    return Status::ok();
  }
  // Sizing never reads the scores; any aligned non-null address stands in for the logits.
  alignas(16) static const float placeholder[4] = {};
  std::size_t select_bytes = 0;
  if (Status s = select_topk_workspace_size(logits_selection(problem, placeholder), &select_bytes);
      !s) {
    return s;
  }
  *workspace_bytes = logits_bytes(problem) + select_bytes;
  return Status::ok();
}

Status run_selection(const IndexerProblem& problem, IndexerAlgo algo,
                     const IndexerOptions& options, void* workspace, std::size_t workspace_bytes,
                     cudaStream_t stream) {
  if (algo == IndexerAlgo::kFused) {
    cuda_indexer::FusedPlan plan;
    if (Status s = cuda_indexer::plan_fused(problem, options.candidate_capacity, &plan); !s) {
      return s;
    }
    plan.counters = options.candidate_counters;
    plan.hot = static_cast<const int32_t*>(state_of(options));
    return cuda_indexer::launch_fused(problem, plan, workspace, stream);
  }
  auto* logits = static_cast<float*>(workspace);
  if (Status s = cuda_indexer::launch_logits(problem, logits, problem.num_keys, stream); !s) {
    return s;
  }
  const std::size_t used = logits_bytes(problem);
  return select_topk(logits_selection(problem, logits), static_cast<char*>(workspace) + used,
                     workspace_bytes - used, stream);
}

}  // namespace

Status cuda_indexer_workspace_size(const IndexerProblem& problem, IndexerAlgo algo,
                                   const IndexerOptions& options, std::size_t* workspace_bytes) {
  if (Status s = selection_workspace_size(problem, algo, options, workspace_bytes); !s) return s;
  if (state_of(options) == nullptr) return Status::ok();
  std::size_t writer_bytes = 0;
  if (Status s = cuda_indexer::hot_sample_workspace_size(problem, &writer_bytes); !s) return s;
  *workspace_bytes = aligned(*workspace_bytes) + writer_bytes;
  return Status::ok();
}

Status cuda_indexer_topk(const IndexerProblem& problem, IndexerAlgo algo,
                         const IndexerOptions& options, void* workspace,
                         std::size_t workspace_bytes, cudaStream_t stream) {
  std::size_t selection_bytes = 0;
  if (Status s = selection_workspace_size(problem, algo, options, &selection_bytes); !s) return s;
  if (Status s = run_selection(problem, algo, options, workspace, selection_bytes, stream); !s) {
    return s;
  }
  void* state = state_of(options);
  if (state == nullptr) return Status::ok();
  const std::size_t used = aligned(selection_bytes);
  return cuda_indexer::write_hot_sample(problem, state, static_cast<char*>(workspace) + used,
                                        workspace_bytes - used, stream);
}

Status cuda_indexer_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                           cudaStream_t stream) {
  return cuda_indexer::launch_logits(problem, logits, logits_stride, stream);
}

Status cuda_memset_async(void* data, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Status::ok();
  LITETOPK_CUDA_TRY(cudaMemsetAsync(data, 0, bytes, stream));
  return Status::ok();
}

}  // namespace litetopk::detail
