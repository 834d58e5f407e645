// Host-side entry points of the indexer kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda.h>

#include "cuda/indexer/indexer_wgmma_sm90.cuh"
#include "litetopk/indexer.h"

namespace litetopk::cuda_indexer {

// What every launch of the scoring core (indexer_wgmma_sm90.cuh) needs: the TMA maps of q
// ([T * H, 128] rows, boxes of one query block) and kv ([S, 128], boxes of one tile), the
// arguments, and the persistent grid (one block per SM, at most one per query block).
struct CoreLaunch {
  CUtensorMap q_map;
  CUtensorMap kv_map;
  sm90core::CoreArgs args;
  unsigned blocks = 0;
};
Status prepare_core_launch(const IndexerProblem& problem, CoreLaunch* launch);

// Queries per block of the scoring core for the problem's head count, and its query blocks.
inline int core_queries_per_block(const IndexerProblem& problem) {
  return problem.num_heads == 64 ? sm90core::Shape<64>::kQueries : sm90core::Shape<32>::kQueries;
}
inline int64_t core_query_blocks(const IndexerProblem& problem) {
  const int per_block = core_queries_per_block(problem);
  return (problem.num_queries + per_block - 1) / per_block;
}

// Writes logits[t * stride + s] for t < T, s < S: the score inside [ks[t], ke[t]), -inf outside.
Status launch_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                     cudaStream_t stream);

// The fused kernel's grid and candidate lists: `capacity` candidates per list (at least 2k; the
// default, requested 0, aims at 4k within 2% of the [T, S] fp32 logits), and its workspace: the
// lists' uint64 slots and the retry list's int32 entries.
struct FusedPlan {
  unsigned blocks = 0;
  int64_t capacity = 0;
  int64_t list_slots = 0;
  int64_t retry_entries = 0;
  unsigned long long* counters = nullptr;  // IndexerOptions::candidate_counters
  const int32_t* hot = nullptr;            // IndexerState::data, the sample to read, or null
  int32_t cold_sample_tiles = 0;  // per query block; 0 without IndexerOptions::cold_sample
};
Status plan_fused(const IndexerProblem& problem, int64_t requested_capacity, bool cold_sample,
                  int32_t requested_tiles, FusedPlan* plan);

// The hot sample of IndexerState (hot_sample_writer.cu): the workspace its writer needs, and the
// writer, run after a selection wrote problem.indices.
Status hot_sample_workspace_size(const IndexerProblem& problem, std::size_t* bytes);
// `workspace` holds hot_sample_workspace_size bytes.
Status write_hot_sample(const IndexerProblem& problem, void* state, void* workspace,
                        cudaStream_t stream);

// Scores and selects in one kernel, without a [T, S] buffer (fused_indexer_kernel.cu).
Status launch_fused(const IndexerProblem& problem, const FusedPlan& plan, uint64_t* lists,
                    int32_t* retry, cudaStream_t stream);

}  // namespace litetopk::cuda_indexer
