// The gated fused indexer (gated_indexer_kernels.h): plan, workspace and the launches in order.
//
// 1. sample_scores_kernel: the cold sample's key tiles of every query block, into sample rows.
// 2. sample_gate_kernel: per query its gate from the sample, and an empty list.
// 3. gated_indexer_kernel: every key tile, the gate in the epilogue, survivors appended.
// 4. select_topk over each query's list (the count as the row's end): positions of its k best.
// 5. gated_finalize_kernel: positions to keys; the retry list of query blocks whose list
//    overflowed or whose speculative gate admitted fewer than k.
// 6. The fused kernel over the retry list, exact (its blocks return at once when it is empty).
#include <cuda_runtime_api.h>

#include <algorithm>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_shape.h"
#include "cuda/indexer/gated_indexer_kernels.h"
#include "cuda/indexer/gated_indexer_launch.h"
#include "cuda/select/select_kernels.h"
#include "heuristics/indexer_heuristics.h"

namespace litetopk::cuda_indexer {
namespace {

// The selection over the lists: row t is lists.scores[t, 0 .. counts[t]) (clamped to the
// capacity by the selection).
SelectProblem list_selection(const IndexerProblem& problem, const GatedPlan& plan,
                             const float* scores, const int32_t* counts) {
  SelectProblem select;
  select.scores = scores;
  select.dtype = DType::kFloat32;
  select.batch = problem.num_queries;
  select.n = plan.capacity;
  select.row_stride = plan.capacity;
  select.row_ends = counts;
  select.k = problem.k;
  select.indices = problem.indices;
  select.values = problem.values;
  return select;
}

}  // namespace

Status plan_gated(const IndexerProblem& problem, int64_t requested_capacity,
                  int32_t requested_tiles, GatedPlan* plan) {
  plan->cold_sample_tiles =
      heuristics::cold_sample_tiles(problem, sm90core::kTileKeys, requested_tiles);
  plan->capacity = heuristics::gated_list_capacity(problem, requested_capacity,
                                                   plan->cold_sample_tiles, sm90core::kTileKeys);
  return plan_fused(problem, requested_capacity, /*cold_sample=*/false, 0, &plan->retry);
}

Status carve_gated(cuda_common::WorkspaceCarver& carver, const IndexerProblem& problem,
                   const GatedPlan& plan, GatedWorkspace* ws) {
  const auto rows = static_cast<std::size_t>(problem.num_queries);
  ws->sample.stride = plan.cold_sample_tiles * sm90core::kTileKeys;
  ws->sample.scores = carver.take<float>(rows * static_cast<std::size_t>(ws->sample.stride));
  ws->lists.capacity = static_cast<int32_t>(plan.capacity);
  const std::size_t slots = rows * static_cast<std::size_t>(plan.capacity);
  ws->lists.scores = carver.take<float>(slots);
  ws->lists.keys = carver.take<int32_t>(slots);
  ws->lists.counts = carver.take<int32_t>(rows);
  ws->lists.gates = carver.take<float>(rows);
  // Sizing never reads the scores; any aligned non-null address stands in for the lists.
  alignas(16) static const float placeholder[4] = {};
  alignas(16) static const int32_t placeholder_counts[4] = {};
  const float* scores = ws->lists.scores != nullptr ? ws->lists.scores : placeholder;
  const int32_t* counts = ws->lists.counts != nullptr ? ws->lists.counts : placeholder_counts;
  if (Status s = cuda_select::select_workspace_size(list_selection(problem, plan, scores, counts),
                                                    &ws->selection_bytes);
      !s) {
    return s;
  }
  ws->selection = carver.take<char>(ws->selection_bytes);
  ws->retry = carver.take<int32_t>(static_cast<std::size_t>(plan.retry.retry_entries));
  ws->retry_lists = carver.take<uint64_t>(static_cast<std::size_t>(plan.retry.list_slots));
  return Status::ok();
}

Status launch_gated(const IndexerProblem& problem, const GatedPlan& plan,
                    const GatedWorkspace& ws, unsigned long long* counters,
                    cudaStream_t stream) {
  if (problem.num_queries == 0 || problem.num_keys == 0) {
    return launch_fused(problem, plan.retry, ws.retry_lists, ws.retry, stream);
  }
  LITETOPK_CUDA_TRY(cudaMemsetAsync(ws.retry, 0, sizeof(int32_t), stream));
  if (Status s = launch_sample_scores(problem, plan, ws.sample, stream); !s) return s;
  if (Status s = launch_sample_gates(problem, plan, ws.sample, ws.lists, stream); !s) return s;
  if (Status s = launch_gated_scores(problem, ws.lists, counters, stream); !s) return s;
  if (Status s = cuda_select::select_rows(
          list_selection(problem, plan, ws.lists.scores, ws.lists.counts), ws.selection, stream);
      !s) {
    return s;
  }
  if (Status s = launch_gated_finalize(problem, ws.lists, ws.retry, counters, stream); !s) {
    return s;
  }
  FusedPlan exact = plan.retry;
  exact.counters = counters;
  return launch_fused_blocks(problem, exact, ws.retry_lists, ws.retry, stream);
}

}  // namespace litetopk::cuda_indexer
