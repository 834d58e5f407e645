// The CUDA decoding backend as seen from src/core (litetopk/sparse_decode.h). Implemented in
// src/cuda/decode/ when the build has CUDA, else by src/api/cuda_unavailable.cpp (kNotCompiled).
// Callers have validated the problem and, for the decode calls, checked the workspace.
#pragma once

#include <cstddef>

#include "litetopk/sparse_decode.h"

namespace litetopk::detail {

// Cache writers (src/cuda/decode/sparse_kv_append.cu, sparse_kv_from_dense.cu).
Status cuda_sparse_kv_append(const SparseKvCache& cache, const void* new_keys,
                             const void* new_values, cudaStream_t stream);
Status cuda_sparse_kv_from_dense(const DenseKvCache& dense, const SparseKvCache& cache,
                                 cudaStream_t stream);

// Attention (src/cuda/decode/). Workspace sizes depend on shapes and options, never on lengths.
std::size_t cuda_sparse_decode_workspace_size(const SparseDecodeProblem& problem,
                                              const DecodeOptions& options);
Status cuda_sparse_decode(const SparseDecodeProblem& problem, void* workspace,
                          cudaStream_t stream, const DecodeOptions& options);
std::size_t cuda_dense_decode_workspace_size(const DenseDecodeProblem& problem,
                                             const DecodeOptions& options);
Status cuda_dense_decode(const DenseDecodeProblem& problem, void* workspace, cudaStream_t stream,
                         const DecodeOptions& options);

}  // namespace litetopk::detail
