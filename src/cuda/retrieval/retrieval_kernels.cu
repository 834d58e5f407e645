// The unfused retrieval path's elementwise kernels.
//
// corpus_norms:  1. one warp per corpus row; 2. each lane sums the squares of a strided slice of
//                the row in fp32; 3. a warp shuffle reduction, lane 0 writes the norm.
// chunk_adjust:  1. a grid-stride loop over the chunk's [batch, rows] scores; 2. l2: 2 s - ||c||^2;
//                3. NaN outside the query's clamped range.
// offset_indices: 1. a grid-stride loop; 2. non-negative indices shifted by the chunk's first row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/retrieval/retrieval_kernels.h"

namespace litetopk::cuda_retrieval {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

__device__ inline float widen(__half x) { return __half2float(x); }
__device__ inline float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__global__ void corpus_norms_kernel(const T* corpus, int64_t n, int64_t dim, float* norms) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < n; row += warps) {
    const T* values = corpus + row * dim;
    float sum = 0.0f;
    for (int64_t j = lane; j < dim; j += 32) {
      const float x = widen(values[j]);
      sum = fmaf(x, x, sum);
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) norms[row] = sum;
  }
}

__global__ void chunk_adjust_kernel(float* scores, int64_t batch, int64_t rows, int64_t first_row,
                                    int64_t n, const float* norms, const int32_t* starts,
                                    const int32_t* ends) {
  const int64_t total = batch * rows;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += step) {
    const int64_t b = i / rows;
    const int64_t row = first_row + i % rows;
    const int64_t start = starts ? min(max(static_cast<int64_t>(starts[b]), int64_t{0}), n) : 0;
    const int64_t end = ends ? min(max(static_cast<int64_t>(ends[b]), start), n) : n;
    float s = scores[i];
    if (norms != nullptr) s = 2.0f * s - norms[row];
    if (row < start || row >= end) s = __int_as_float(0x7fc00000);
    scores[i] = s;
  }
}

__global__ void offset_indices_kernel(int32_t* indices, int64_t count, int32_t offset) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += step) {
    const int32_t index = indices[i];
    if (index >= 0) indices[i] = index + offset;
  }
}

unsigned blocks_for(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kThreads - 1) / kThreads, 1, kMaxBlocks));
}

}  // namespace

Status launch_corpus_norms(const void* corpus, DType dtype, int64_t n, int64_t dim, float* norms,
                           cudaStream_t stream) {
  if (n == 0) return Status::ok();
  const unsigned blocks = blocks_for(n * 32);
  if (dtype == DType::kFloat16) {
    corpus_norms_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(corpus), n,
                                                         dim, norms);
  } else {
    corpus_norms_kernel<<<blocks, kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(corpus), n, dim, norms);
  }
  LITETOPK_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status launch_chunk_adjust(float* scores, int64_t batch, int64_t rows, int64_t first_row,
                           int64_t n, const float* norms, const int32_t* starts,
                           const int32_t* ends, cudaStream_t stream) {
  if (batch * rows == 0) return Status::ok();
  chunk_adjust_kernel<<<blocks_for(batch * rows), kThreads, 0, stream>>>(
      scores, batch, rows, first_row, n, norms, starts, ends);
  LITETOPK_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status launch_offset_indices(int32_t* indices, int64_t count, int32_t offset,
                             cudaStream_t stream) {
  if (count == 0) return Status::ok();
  offset_indices_kernel<<<blocks_for(count), kThreads, 0, stream>>>(indices, count, offset);
  LITETOPK_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_retrieval
