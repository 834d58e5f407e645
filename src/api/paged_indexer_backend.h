// The CUDA backend of the paged decode indexer as seen from src/api. Implemented in
// src/cuda/indexer/ when the build has CUDA, else by src/api/cuda_unavailable.cpp (kNotCompiled).
// Callers have validated the problem and resolved kAuto.
#pragma once

#include <cstddef>

#include "litetopk/indexer.h"

namespace litetopk::detail {

Status cuda_paged_indexer_workspace_size(const PagedIndexerProblem& problem, IndexerAlgo algo,
                                         std::size_t* workspace_bytes);
Status cuda_paged_indexer_topk(const PagedIndexerProblem& problem, IndexerAlgo algo,
                               void* workspace, cudaStream_t stream);
// Whether the fused path without a decode state can run the problem on the current device.
Status cuda_paged_fused_fits(const PagedIndexerProblem& problem, bool* fits);
// The fused path with a decode state (decode_state_launch.cu): state is the caller's
// paged_indexer_state_bytes; needs max_context > 0 and k <= kPagedDecodeStateMaxK.
Status cuda_paged_decode_workspace_size(const PagedIndexerProblem& problem,
                                        std::size_t* workspace_bytes);
Status cuda_paged_decode_topk(const PagedIndexerProblem& problem, void* state, void* workspace,
                              cudaStream_t stream);
Status cuda_paged_indexer_logits(const PagedIndexerProblem& problem, float* logits,
                                 int64_t logits_stride, cudaStream_t stream);

}  // namespace litetopk::detail
