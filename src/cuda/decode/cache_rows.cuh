// Rows of the sparse KV cache's 2-byte arrays (keys, values, tail keys: 128 channels = 256 bytes =
// 16 vectors of 16 bytes) as the cache writers move them, and a CTA-wide row copy.
#pragma once

#include <cstdint>

#include "formats/sparse_kv_format.h"

namespace litetopk::cuda_kv {

constexpr int kHeadDim = 128;
constexpr int kRowVectors = kHeadDim * 2 / 16;  // 16-byte vectors per row of a 2-byte dtype
constexpr int kChannelsPerVector = 8;
constexpr int kCodeBytesPerRow = kHeadDim / sparse_kv::kCodesPerByte;

// Copies `rows` rows from src (rows src_stride vectors apart) to the contiguous rows of dst with
// all kThreads threads of the CTA, kUnroll 16-byte loads in flight per thread.
template <int kThreads>
__device__ __forceinline__ void copy_rows(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                          int rows, int64_t src_stride) {
  constexpr int kUnroll = 8;
  const int total = rows * kRowVectors;
  for (int base = static_cast<int>(threadIdx.x); base < total; base += kThreads * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kThreads;
      if (i < total) v[u] = src[(i / kRowVectors) * src_stride + i % kRowVectors];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = base + u * kThreads;
      if (i < total) dst[i] = v[u];
    }
  }
}

}  // namespace litetopk::cuda_kv
