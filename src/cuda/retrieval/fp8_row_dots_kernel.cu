// The unfused retrieval path's scores for an fp8 corpus at small batches, read straight from its
// bytes (no widened copy): scores[b, r] = scales[r] * (queries[b] . e4m3 row r) in fp32.
//
// Pipeline of fp8_row_dots_kernel<kBatch> (kBatch >= batch queries; blocks of 256 threads over
// the rows):
// 1. A group of G lanes per row (G the power of two >= the row's 16-byte chunks, at most 32), lane
//    g of a group taking chunks g and g + G (dim <= 1024: at most two); the lane's query values of
//    those chunks into registers as fp32, once.
// 2. A warp takes kSteps x 32 / G consecutive rows at a time (kSteps: 4, 2 at batch 2): all of
//    its 16-byte loads (streaming, evict-first) issued before any is used, and those of its next
//    rows while it computes these.
// 3. Per chunk, the e4m3 pairs to half2 (cvt, exact) to float2, FMAs into the lane's kBatch sums
//    (its chunks in order, each chunk's values in order).
// 4. The group's butterfly sum (every lane gets the same bits), times the row's scale (a separate
//    rounding, as launch_chunk_adjust applies it); lane 0 of the group writes the row's scores.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/retrieval/retrieval_kernels.h"

namespace litetopk::cuda_retrieval {

namespace {

constexpr int kThreads = 256;
// Row steps a warp loads at once: 4; 2 at batch 2, so that the query values, two tiles of bytes
// and the sums fit in 128 registers (two blocks an SM; at 4 steps it fell to one and ran 1.4x
// slower). Batch 4 runs one block an SM either way.
template <int kBatch>
constexpr int kSteps = kBatch == 2 ? 2 : 4;
constexpr int kChunkValues = 16;  // e4m3 values in a 16-byte chunk
constexpr int kMaxLaneChunks = 2;  // 1024 / 16 chunks over 32 lanes
constexpr int64_t kMaxBlocks = 4096;  // the grid; its warps stride over the rows past it

__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// The e4m3 pair in the low 16 bits of `bits` as two floats (exact).
__device__ inline float2 e4m3_pair(uint32_t bits) {
  const __half2_raw raw =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(bits & 0xffffu), __NV_E4M3);
  return __half22float2(__half2(raw));
}

template <int kBatch, typename T>
__global__ void __launch_bounds__(kThreads)
    fp8_row_dots_kernel(const T* queries, int batch, const uint8_t* rows, const float* scales,
                        int64_t num_rows, int dim, int group, float* scores) {
  const int chunks = dim / kChunkValues;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int member = lane % group;
  const int rows_per_step = 32 / group;
  // 1.
  float q[kMaxLaneChunks][kBatch][kChunkValues];
#pragma unroll
  for (int p = 0; p < kMaxLaneChunks; ++p) {
    const int chunk = member + p * group;
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
#pragma unroll
      for (int e = 0; e < kChunkValues; ++e) {
        q[p][b][e] = chunk < chunks && b < batch
                         ? to_float(queries[int64_t{b} * dim + chunk * kChunkValues + e])
                         : 0.0f;
      }
    }
  }
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x) / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  const int64_t rows_per_tile = int64_t{kSteps<kBatch>} * rows_per_step;
  // 2. The bytes of the rows from `first` on (zeros past the end).
  const auto load_tile = [&](int64_t first, uint4 (&bytes)[kSteps<kBatch>][kMaxLaneChunks]) {
#pragma unroll
    for (int s = 0; s < kSteps<kBatch>; ++s) {
      const int64_t row = first + s * rows_per_step + lane / group;
#pragma unroll
      for (int p = 0; p < kMaxLaneChunks; ++p) {
        const int chunk = member + p * group;
        bytes[s][p] = row < num_rows && chunk < chunks
                          ? __ldcs(reinterpret_cast<const uint4*>(rows + row * dim) + chunk)
                          : make_uint4(0, 0, 0, 0);
      }
    }
  };
  uint4 ahead[kSteps<kBatch>][kMaxLaneChunks];
  load_tile(warp * rows_per_tile, ahead);
  for (int64_t first = warp * rows_per_tile; first < num_rows; first += warps * rows_per_tile) {
    uint4 bytes[kSteps<kBatch>][kMaxLaneChunks];
#pragma unroll
    for (int s = 0; s < kSteps<kBatch>; ++s) {
#pragma unroll
      for (int p = 0; p < kMaxLaneChunks; ++p) bytes[s][p] = ahead[s][p];
    }
    load_tile(first + warps * rows_per_tile, ahead);  // the warp's next rows, in flight meanwhile
#pragma unroll
    for (int s = 0; s < kSteps<kBatch>; ++s) {
      // 3.
      float sum[kBatch] = {};
#pragma unroll
      for (int p = 0; p < kMaxLaneChunks; ++p) {
        const uint32_t words[4] = {bytes[s][p].x, bytes[s][p].y, bytes[s][p].z, bytes[s][p].w};
#pragma unroll
        for (int w = 0; w < 4; ++w) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float2 v = e4m3_pair(words[w] >> (16 * h));
            const int e = w * 4 + h * 2;
#pragma unroll
            for (int b = 0; b < kBatch; ++b) {
              sum[b] = fmaf(q[p][b][e], v.x, sum[b]);
              sum[b] = fmaf(q[p][b][e + 1], v.y, sum[b]);
            }
          }
        }
      }
      // 4.
      for (int offset = group / 2; offset > 0; offset /= 2) {
#pragma unroll
        for (int b = 0; b < kBatch; ++b) sum[b] += __shfl_xor_sync(0xffffffffu, sum[b], offset);
      }
      const int64_t row = first + s * rows_per_step + lane / group;
      if (member == 0 && row < num_rows) {
        const float scale = scales != nullptr ? scales[row] : 1.0f;  // x 1 is exact
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          if (b < batch) scores[b * num_rows + row] = __fmul_rn(scale, sum[b]);
        }
      }
    }
  }
}

template <int kBatch, typename T>
Status launch(const void* queries, int batch, const uint8_t* rows, const float* scales,
              int64_t num_rows, int dim, float* scores, cudaStream_t stream) {
  const int chunks = dim / kChunkValues;
  int group = 1;
  while (group < chunks && group < 32) group *= 2;
  const int64_t rows_per_block = int64_t{kThreads / 32} * kSteps<kBatch> * (32 / group);
  const int64_t blocks =
      std::min<int64_t>((num_rows + rows_per_block - 1) / rows_per_block, kMaxBlocks);
  fp8_row_dots_kernel<kBatch, T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<const T*>(queries), batch, rows, scales, num_rows, dim, group, scores);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

template <typename T>
Status launch_for(const void* queries, int batch, const uint8_t* rows, const float* scales,
                  int64_t num_rows, int dim, float* scores, cudaStream_t stream) {
  static_assert(kRetrievalFp8DirectMaxBatch == 4, "instantiations for batches 1, 2 and 4");
  if (batch == 1) return launch<1, T>(queries, batch, rows, scales, num_rows, dim, scores, stream);
  if (batch == 2) return launch<2, T>(queries, batch, rows, scales, num_rows, dim, scores, stream);
  return launch<4, T>(queries, batch, rows, scales, num_rows, dim, scores, stream);
}

}  // namespace

Status launch_fp8_row_dots(const void* queries, DType dtype, int64_t batch, const uint8_t* rows,
                           const float* scales, int64_t num_rows, int64_t dim, float* scores,
                           cudaStream_t stream) {
  if (batch < 1 || batch > kRetrievalFp8DirectMaxBatch || dim % kChunkValues != 0 ||
      dim > kChunkValues * 32 * kMaxLaneChunks) {
    return Status(StatusCode::kInternal, "launch_fp8_row_dots: unsupported batch or dim");
  }
  if (num_rows == 0) return Status::ok();
  const int b = static_cast<int>(batch);
  const int d = static_cast<int>(dim);
  return dtype == DType::kFloat16
             ? launch_for<__half>(queries, b, rows, scales, num_rows, d, scores, stream)
             : launch_for<__nv_bfloat16>(queries, b, rows, scales, num_rows, d, scores, stream);
}

}  // namespace litetopk::cuda_retrieval
