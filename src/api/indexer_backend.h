// The CUDA indexer backend as seen from src/core. Implemented in src/cuda/indexer/ when the build
// has CUDA, else by src/api/cuda_unavailable.cpp (kNotCompiled). Callers have validated the
// problem and resolved kAuto.
#pragma once

#include <cstddef>

#include "litetopk/indexer.h"

namespace litetopk::detail {

// `options` for the fused kernel's candidate_capacity and candidate_counters; `algo` resolved.
Status cuda_indexer_workspace_size(const IndexerProblem& problem, IndexerAlgo algo,
                                   const IndexerOptions& options, std::size_t* workspace_bytes);
Status cuda_indexer_topk(const IndexerProblem& problem, IndexerAlgo algo,
                         const IndexerOptions& options, void* workspace,
                         std::size_t workspace_bytes, cudaStream_t stream);
Status cuda_indexer_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                           cudaStream_t stream);
Status cuda_memset_async(void* data, std::size_t bytes, cudaStream_t stream);

}  // namespace litetopk::detail
