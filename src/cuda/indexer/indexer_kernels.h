// Host-side entry points of the indexer kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/indexer.h"

namespace litetopk::cuda_indexer {

// Writes logits[t * stride + s] for t < T, s < S: the score inside [ks[t], ke[t]), -inf outside.
Status launch_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                     cudaStream_t stream);

}  // namespace litetopk::cuda_indexer
