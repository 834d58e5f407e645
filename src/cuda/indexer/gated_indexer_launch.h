// Host side of the gated fused indexer: its workspace and the pipeline of launches
// (gated_indexer_launch.cu).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "cuda/common/workspace_carver.h"
#include "cuda/indexer/gated_indexer_kernels.h"

namespace litetopk::cuda_indexer {

struct GatedWorkspace {
  SampleScores sample{};
  GatedLists lists{};
  void* selection = nullptr;  // the selection over the lists
  std::size_t selection_bytes = 0;
  int32_t* retry = nullptr;          // count, then query blocks
  uint64_t* retry_lists = nullptr;   // the exact re-run's candidate lists
};
// Takes the workspace's parts from `carver` (sizes only, when it has no base).
Status carve_gated(cuda_common::WorkspaceCarver& carver, const IndexerProblem& problem,
                   const GatedPlan& plan, GatedWorkspace* ws);
// `counters`: IndexerOptions::candidate_counters, or null.
Status launch_gated(const IndexerProblem& problem, const GatedPlan& plan, const GatedWorkspace& ws,
                    unsigned long long* counters, cudaStream_t stream);

}  // namespace litetopk::cuda_indexer
