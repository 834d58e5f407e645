// The unfused retrieval path's elementwise kernels.
//
// row_norms:      1. one warp per row; 2. each lane sums the squares of a strided slice of the
//                 row in fp32 (e4m3 bytes decoded exactly); 3. a warp shuffle reduction, lane 0
//                 writes the sum (times the row's scale squared for fp8).
// widen_fp8:      1. a grid-stride loop over 8-byte groups; 2. e4m3 pairs to half2 (cvt, exact);
//                 3. bf16: half to float to bf16 (exact); 4. one 16-byte store per group.
// chunk_adjust:   1. blocks stride over (query, row) tiles; 2. the query's range clamped into
//                 [0, n]; 3. fp8: s = scale * s; l2: s = (2 s - ||c||^2) - ||q||^2 (fp32, in
//                 that order); 4. NaN outside the range or where the bitmap's bit is clear.
// offset_indices: 1. a grid-stride loop; 2. non-negative indices shifted by the chunk's first row.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/retrieval/corpus_filters.cuh"
#include "cuda/retrieval/retrieval_kernels.h"

namespace litetopk::cuda_retrieval {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65535;

__device__ inline float widen(__half x) { return __half2float(x); }
__device__ inline float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float widen(uint8_t x) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(x, __NV_E4M3)));
}

template <typename T>
__global__ void row_norms_kernel(const T* rows, const float* scales, int64_t n, int64_t dim,
                                 float* norms) {
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; row < n; row += warps) {
    const T* values = rows + row * dim;
    float sum = 0.0f;
    for (int64_t j = lane; j < dim; j += 32) {
      const float x = widen(values[j]);
      sum = fmaf(x, x, sum);
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (lane == 0) norms[row] = scales != nullptr ? scales[row] * scales[row] * sum : sum;
  }
}

__device__ inline uint32_t pack(__half2 h, __half) { return *reinterpret_cast<uint32_t*>(&h); }
__device__ inline uint32_t pack(__half2 h, __nv_bfloat16) {
  __nv_bfloat162 b = __float22bfloat162_rn(__half22float2(h));
  return *reinterpret_cast<uint32_t*>(&b);
}

template <typename T>
__global__ void widen_fp8_kernel(const uint2* bytes, int64_t groups, uint4* out) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += step) {
    const uint2 in = bytes[g];
    uint32_t words[4];
    for (int w = 0; w < 4; ++w) {
      const uint32_t source = w < 2 ? in.x : in.y;
      const auto pair = static_cast<__nv_fp8x2_storage_t>(source >> (16 * (w % 2)));
      words[w] = pack(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)), T{});
    }
    out[g] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

__global__ void chunk_adjust_kernel(float* scores, ChunkAdjust a) {
  const float nan = __int_as_float(0x7fc00000);
  for (int64_t b = blockIdx.y; b < a.batch; b += gridDim.y) {
    const QueryRows rows = query_rows(a.starts, a.ends, b, a.n);
    const float query_norm = a.query_norms != nullptr ? a.query_norms[b] : 0.0f;
    float* row_scores = scores + b * a.rows;
    for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < a.rows;
         r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int64_t row = a.first_row + r;
      float s = row_scores[r];
      if (row < rows.start || row >= rows.end || !bitmap_allows(a.bitmap, row)) {
        row_scores[r] = nan;
        continue;
      }
      if (a.scales != nullptr) s = a.scales[row] * s;
      if (a.norms != nullptr) s = (2.0f * s - a.norms[row]) - query_norm;
      row_scores[r] = s;
    }
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

Status launch_row_norms(const void* rows, DType dtype, RetrievalCorpusFormat format,
                        const float* scales, int64_t n, int64_t dim, float* norms,
                        cudaStream_t stream) {
  if (n == 0) return Status::ok();
  const unsigned blocks = blocks_for(n * 32);
  if (format == RetrievalCorpusFormat::kFp8E4M3) {
    row_norms_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint8_t*>(rows), scales,
                                                      n, dim, norms);
  } else if (dtype == DType::kFloat16) {
    row_norms_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __half*>(rows), nullptr,
                                                      n, dim, norms);
  } else {
    row_norms_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(rows),
                                                      nullptr, n, dim, norms);
  }
  LITETOPK_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status launch_l2_norms(const RetrievalProblem& p, float* corpus_scratch, float* query_norms,
                       const float** corpus_norms, cudaStream_t stream) {
  *corpus_norms = p.corpus_norms;
  if (p.corpus_norms == nullptr) {
    if (Status s = launch_row_norms(p.corpus, p.dtype, p.corpus_format, p.corpus_scales, p.n,
                                    p.dim, corpus_scratch, stream);
        !s) {
      return s;
    }
    *corpus_norms = corpus_scratch;
  }
  return launch_row_norms(p.queries, p.dtype, RetrievalCorpusFormat::kSameAsQueries, nullptr,
                          p.batch, p.dim, query_norms, stream);
}

Status launch_widen_fp8(const uint8_t* bytes, int64_t count, DType dtype, void* out,
                        cudaStream_t stream) {
  const int64_t groups = count / 8;
  if (groups == 0) return Status::ok();
  const auto* in = reinterpret_cast<const uint2*>(bytes);
  if (dtype == DType::kFloat16) {
    widen_fp8_kernel<__half><<<blocks_for(groups), kThreads, 0, stream>>>(
        in, groups, static_cast<uint4*>(out));
  } else {
    widen_fp8_kernel<__nv_bfloat16><<<blocks_for(groups), kThreads, 0, stream>>>(
        in, groups, static_cast<uint4*>(out));
  }
  LITETOPK_CUDA_TRY(cudaGetLastError());
  return Status::ok();
}

Status launch_chunk_adjust(float* scores, const ChunkAdjust& adjust, cudaStream_t stream) {
  if (adjust.batch * adjust.rows == 0) return Status::ok();
  // Rows of a query across x (at most kMaxBlocks blocks in all), queries across y.
  const unsigned y = static_cast<unsigned>(std::min<int64_t>(adjust.batch, kMaxBlocks));
  const int64_t x_wanted = std::max<int64_t>(1, kMaxBlocks / static_cast<int64_t>(y));
  const unsigned x = static_cast<unsigned>(
      std::min<int64_t>((adjust.rows + kThreads - 1) / kThreads, x_wanted));
  chunk_adjust_kernel<<<dim3(x, y), kThreads, 0, stream>>>(scores, adjust);
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
