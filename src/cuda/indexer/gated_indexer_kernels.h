// The gated fused indexer (the four-warpgroup scoring core with the top-k gate in the math
// warpgroups' epilogue): its plan, workspace and kernels. Pipeline in gated_indexer_launch.cu.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cuda/indexer/indexer_kernels.h"
#include "litetopk/indexer.h"

namespace litetopk::cuda_indexer {

// Per query t: a candidate list of `capacity` (score, key) slots, its length (which may pass the
// capacity: the row then overflowed), and the gate a score must reach to be admitted.
struct GatedLists {
  float* scores;    // [T, capacity]
  int32_t* keys;    // [T, capacity]
  int32_t* counts;  // [T]
  float* gates;     // [T]; -inf admits every non-NaN score
  int32_t capacity;
};

// The cold sample's scores: [T, stride] fp32, the c sample tiles of the query's block in order
// (column 64 w + r: row r of sample tile w), NaN outside the query's range.
struct SampleScores {
  float* scores;
  int32_t stride;  // 64 x the planned sample tiles
};

struct GatedPlan {
  int32_t cold_sample_tiles = 0;  // per query block (formats/tile_order.h)
  int64_t capacity = 0;           // slots per candidate list
  FusedPlan retry;                // the exact re-run of overflowed or failed query blocks
};
Status plan_gated(const IndexerProblem& problem, int64_t requested_capacity,
                  int32_t requested_tiles, GatedPlan* plan);

// The cold sample's scores (sample_scores_kernel, gated_sample_kernel.cu).
Status launch_sample_scores(const IndexerProblem& problem, const GatedPlan& plan,
                            const SampleScores& sample, cudaStream_t stream);
// Per query: the gate from its sample scores (sample_gate_kernel, gated_sample_kernel.cu).
Status launch_sample_gates(const IndexerProblem& problem, const GatedPlan& plan,
                           const SampleScores& sample, const GatedLists& lists,
                           cudaStream_t stream);
// Every key of the ranges, gated into the lists (gated_indexer_kernel.cu).
Status launch_gated_scores(const IndexerProblem& problem, const GatedLists& lists,
                           unsigned long long* counters, cudaStream_t stream);
// After the selection over the lists wrote list positions into problem.indices: the keys
// relative to ks, and the retry list (count, then query blocks) of the blocks with an overflowed
// list or a failed speculative gate (gated_finalize_kernel.cu).
Status launch_gated_finalize(const IndexerProblem& problem, const GatedLists& lists,
                             int32_t* retry, unsigned long long* counters, cudaStream_t stream);

// The fused kernel over the query blocks of `block_list` only, exact (no cold sample).
Status launch_fused_blocks(const IndexerProblem& problem, const FusedPlan& plan, uint64_t* lists,
                           const int32_t* block_list, cudaStream_t stream);

}  // namespace litetopk::cuda_indexer
