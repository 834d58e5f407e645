// Host-side entry points of the unfused retrieval path's kernels (src/cuda/retrieval/): the
// chunk GEMM through cuBLAS (retrieval_gemm.cu) and the small elementwise kernels around it
// (retrieval_kernels.cu). retrieval_launch.cu runs them chunk by chunk.
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/status.h"
#include "litetopk/types.h"

namespace litetopk::cuda_retrieval {

// cuBLAS workspace carved from the caller's workspace for each GEMM.
constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;

// Creates the current device's cuBLAS handle if it has none (it lives until the process exits)
// and returns the device number.
Status prepare_blas(int* device);

// scores[b * rows + r] = queries[b] . corpus[r] in fp32 (fp16 / bf16 inputs, fp32 accumulate)
// for b < batch, r < rows, with the current device's handle (prepare_blas made it) on `stream`
// and `blas_workspace` (kBlasWorkspaceBytes, 256-byte aligned).
Status chunk_scores(const void* queries, const void* corpus, DType dtype, int64_t batch,
                    int64_t rows, int64_t dim, float* scores, void* blas_workspace,
                    cudaStream_t stream);

// norms[r] = ||corpus[r]||^2 in fp32 for r < n.
Status launch_corpus_norms(const void* corpus, DType dtype, int64_t n, int64_t dim, float* norms,
                           cudaStream_t stream);

// Turns a chunk's dot products (scores [batch, rows], corpus rows first_row .. first_row + rows
// - 1 of n) into its scores: 2 s - norms[row] when norms is set (l2), NaN outside query b's range
// [starts[b], ends[b]) clamped into [0, n] (either array may be null).
Status launch_chunk_adjust(float* scores, int64_t batch, int64_t rows, int64_t first_row,
                           int64_t n, const float* norms, const int32_t* starts,
                           const int32_t* ends, cudaStream_t stream);

// indices[i] += offset for every i < count with indices[i] >= 0 (chunk rows to corpus rows).
Status launch_offset_indices(int32_t* indices, int64_t count, int32_t offset, cudaStream_t stream);

}  // namespace litetopk::cuda_retrieval
