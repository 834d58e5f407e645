// The CUDA backend of indexer_topk. The unfused path: the logits kernel writes [T, S] fp32 into
// the workspace, then select_topk picks each row's top k inside [ks, ke). The fused path never
// writes the logits: with the cold sample and no state, the gated kernel pipeline
// (gated_indexer_launch.cu: a gate per query from its sample, the four-warpgroup core gating the
// rest into candidate lists, a selection over the lists, an exact re-run of the blocks that need
// it); otherwise the list kernel (fused_indexer_kernel.cu), which first scores the previous
// chunk's hot sample of an IndexerState. Either path then writes this chunk's hot sample
// (hot_sample_writer.cu) with the rest of the workspace.
#include <cuda_runtime_api.h>

#include "api/indexer_backend.h"
#include "cuda/common/cuda_check.h"
#include "cuda/indexer/gated_indexer_launch.h"
#include "cuda/indexer/indexer_kernels.h"
#include "heuristics/indexer_heuristics.h"
#include "cuda/select/select_kernels.h"
#include "litetopk/select.h"

namespace litetopk::detail {
namespace {

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

// Where each part of a call's workspace lies (only sized when base is null): the fused kernel's
// candidate lists, or the logits and their selection's workspace; then, with a state, the
// hot-sample writer's.
struct CallLayout {
  bool gated = false;
  cuda_indexer::GatedPlan gated_plan{};
  cuda_indexer::GatedWorkspace gated_ws{};
  cuda_indexer::FusedPlan plan{};
  uint64_t* lists = nullptr;
  int32_t* retry = nullptr;
  float* logits = nullptr;
  void* selection = nullptr;
  std::size_t selection_bytes = 0;
  void* writer = nullptr;
  std::size_t writer_bytes = 0;
  std::size_t bytes = 0;
};

Status carve_call(const IndexerProblem& problem, IndexerAlgo algo, const IndexerOptions& options,
                  void* base, CallLayout* layout) {
  cuda_common::WorkspaceCarver carver(base);
  layout->gated = algo == IndexerAlgo::kFused &&
                   heuristics::choose_fused_kernel(problem, options) ==
                       heuristics::FusedKernel::kGated;
  if (layout->gated) {
    if (Status s = cuda_indexer::plan_gated(problem, options.candidate_capacity,
                                            options.cold_sample_tiles, &layout->gated_plan);
        !s) {
      return s;
    }
    if (Status s = cuda_indexer::carve_gated(carver, problem, layout->gated_plan,
                                             &layout->gated_ws);
        !s) {
      return s;
    }
  } else if (algo == IndexerAlgo::kFused) {
    if (Status s = cuda_indexer::plan_fused(problem, options.candidate_capacity,
                                            options.cold_sample, options.cold_sample_tiles,
                                            &layout->plan);
        !s) {
      return s;
    }
    layout->plan.counters = options.candidate_counters;
    layout->plan.hot = static_cast<const int32_t*>(state_of(options));
    layout->lists = carver.take<uint64_t>(static_cast<std::size_t>(layout->plan.list_slots));
    layout->retry = carver.take<int32_t>(static_cast<std::size_t>(layout->plan.retry_entries));
  } else {
    layout->logits =
        carver.take<float>(static_cast<std::size_t>(problem.num_queries * problem.num_keys));
    // Sizing never reads the scores; any aligned non-null address stands in for the logits.
    alignas(16) static const float placeholder[4] = {};
    if (Status s = cuda_select::select_workspace_size(logits_selection(problem, placeholder),
                                              &layout->selection_bytes);
        !s) {
      return s;
    }
    layout->selection = carver.take<char>(layout->selection_bytes);
  }
  if (state_of(options) != nullptr) {
    if (Status s = cuda_indexer::hot_sample_workspace_size(problem, &layout->writer_bytes); !s) {
      return s;
    }
    layout->writer = carver.take<char>(layout->writer_bytes);
  }
  layout->bytes = carver.bytes();
  return Status::ok();
}

}  // namespace

Status cuda_indexer_workspace_size(const IndexerProblem& problem, IndexerAlgo algo,
                                   const IndexerOptions& options, std::size_t* workspace_bytes) {
  CallLayout layout;
  if (Status s = carve_call(problem, algo, options, nullptr, &layout); !s) return s;
  *workspace_bytes = layout.bytes;
  return Status::ok();
}

Status cuda_indexer_topk(const IndexerProblem& problem, IndexerAlgo algo,
                         const IndexerOptions& options, void* workspace, std::size_t,
                         cudaStream_t stream) {
  CallLayout layout;
  if (Status s = carve_call(problem, algo, options, workspace, &layout); !s) return s;
  if (layout.gated) {
    if (Status s = cuda_indexer::launch_gated(problem, layout.gated_plan, layout.gated_ws,
                                              options.candidate_counters, stream);
        !s) {
      return s;
    }
  } else if (algo == IndexerAlgo::kFused) {
    if (Status s = cuda_indexer::launch_fused(problem, layout.plan, layout.lists, layout.retry,
                                               stream); !s) {
      return s;
    }
  } else {
    if (Status s = cuda_indexer::launch_logits(problem, layout.logits, problem.num_keys, stream);
        !s) {
      return s;
    }
    if (Status s = cuda_select::select_rows(logits_selection(problem, layout.logits),
                                            layout.selection, stream);
        !s) {
      return s;
    }
  }
  void* state = state_of(options);
  if (state == nullptr) return Status::ok();
  return cuda_indexer::write_hot_sample(problem, state, layout.writer, stream);
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
