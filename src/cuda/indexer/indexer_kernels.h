// Host-side entry points of the indexer kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/indexer/query_block_scorer.cuh"
#include "litetopk/indexer.h"

namespace litetopk::cuda_indexer {

inline ScoreInputs score_inputs(const IndexerProblem& problem) {
  return {static_cast<const uint8_t*>(problem.q), static_cast<const uint8_t*>(problem.kv),
          problem.kv_scale, problem.weights, problem.ks, problem.ke,
          static_cast<int32_t>(problem.num_queries), static_cast<int32_t>(problem.num_keys)};
}

// Writes logits[t * stride + s] for t < T, s < S: the score inside [ks[t], ke[t]), -inf outside.
Status launch_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                     cudaStream_t stream);

// The fused kernel's largest k (larger k goes through the unfused path).
constexpr int64_t kFusedMaxK = 2048;

// Scores and selects in one kernel, without a [T, S] buffer. k <= kFusedMaxK.
Status launch_fused(const IndexerProblem& problem, cudaStream_t stream);

}  // namespace litetopk::cuda_indexer
