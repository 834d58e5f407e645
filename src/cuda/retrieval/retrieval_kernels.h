// Host-side entry points of the unfused retrieval path's kernels (src/cuda/retrieval/): the
// chunk GEMM through cuBLAS (retrieval_gemm.cu), the small-batch fp8 scores
// (fp8_row_dots_kernel.cu) and the small elementwise kernels around them
// (retrieval_kernels.cu). retrieval_launch.cu runs them chunk by chunk.
#pragma once

#include <cstddef>
#include <cstdint>

#include "litetopk/retrieval.h"
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

// norms[r] = ||row r||^2 in fp32 for r < n: rows of `dtype` (format kSameAsQueries), or e4m3 bytes
// whose row r is scales[r] times its values (kFp8E4M3: scales[r]^2 times the sum of squares).
Status launch_row_norms(const void* rows, DType dtype, RetrievalCorpusFormat format,
                        const float* scales, int64_t n, int64_t dim, float* norms,
                        cudaStream_t stream);

// l2's squared norms for one launch of `p`: the queries' into query_norms [batch], and the
// corpus' into corpus_scratch [n] unless p.corpus_norms holds them; *corpus_norms is then where
// the corpus' are.
Status launch_l2_norms(const RetrievalProblem& p, float* corpus_scratch, float* query_norms,
                       const float** corpus_norms, cudaStream_t stream);

// out[i] = e4m3 bytes[i] as `dtype` (float16 or bfloat16, both exact) for i < count (a multiple of
// 16; bytes and out 16-byte aligned).
Status launch_widen_fp8(const uint8_t* bytes, int64_t count, DType dtype, void* out,
                        cudaStream_t stream);

// scores[b * rows + r] = scales[r] * (queries[b] . e4m3 row r) in fp32 (scales null: 1) for
// b < batch <= kRetrievalFp8DirectMaxBatch, r < rows; queries [batch, dim] of `dtype` (float16
// or bfloat16), rows [rows, dim] e4m3 bytes, 16-byte aligned, dim a multiple of 16 up to 1024
// (fp8_row_dots_kernel.cu).
Status launch_fp8_row_dots(const void* queries, DType dtype, int64_t batch, const uint8_t* rows,
                           const float* scales, int64_t num_rows, int64_t dim, float* scores,
                           cudaStream_t stream);

// What turns a chunk's dot products into its scores (corpus rows first_row .. first_row + rows - 1
// of n); every array is optional.
struct ChunkAdjust {
  int64_t batch = 0;
  int64_t rows = 0;
  int64_t first_row = 0;
  int64_t n = 0;
  const float* scales = nullptr;       // [n] fp8 row scales: s = scales[row] * s
  const float* norms = nullptr;        // [n] with query_norms (l2): s = (2 s - norms) - query_norms
  const float* query_norms = nullptr;  // [batch]
  const uint8_t* bitmap = nullptr;     // a clear bit: NaN
  const int32_t* starts = nullptr;     // outside [starts[b], ends[b]) clamped into [0, n]: NaN
  const int32_t* ends = nullptr;
};
// Applies `adjust` to scores [batch, rows] in place.
Status launch_chunk_adjust(float* scores, const ChunkAdjust& adjust, cudaStream_t stream);

// indices[i] += offset for every i < count with indices[i] >= 0 (chunk rows to corpus rows).
Status launch_offset_indices(int32_t* indices, int64_t count, int32_t offset, cudaStream_t stream);

}  // namespace litetopk::cuda_retrieval
