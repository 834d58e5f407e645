// Register-level building blocks of the decode attention kernels over the mma.sync wrappers of
// cuda/common/mma_sync_sm80.cuh (whose fragment conventions they follow): the mma of a cache's
// element type, packing and int8 pair conversion, key-row fragments and score masking.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "cuda/common/mma_sync_sm80.cuh"

namespace litetopk::decode {

constexpr int kHeadDim = 128;
constexpr float kLog2e = 1.4426950408889634f;

// The mma of the cache's element type T (__half or __nv_bfloat16).
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    sm80::mma_f16(d, a, b0, b1);
  } else {
    sm80::mma_bf16(d, a, b0, b1);
  }
}

// Two floats rounded to T, `lo` in the low half.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

template <typename T>
__device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else {
    return __bfloat162float(x);
  }
}

// Two int8 bytes b (low byte -> low half) as fp16 1152 + b (exact: 0x6400 | (b ^ 0x80)).
__device__ __forceinline__ uint32_t int8x2_biased_half2(uint32_t two_bytes) {
  return __byte_perm(two_bytes ^ 0x8080u, 0x6464u, 0x5140u);
}

__device__ __forceinline__ uint32_t half2_bits(__half2 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}
__device__ __forceinline__ __half2 bits_half2(uint32_t x) {
  return *reinterpret_cast<const __half2*>(&x);
}

// 16 bytes of shared memory as four 32-bit words.
__device__ __forceinline__ void load_shared16(const void* p, uint32_t (&w)[4]) {
  const uint4 v = *static_cast<const uint4*>(p);
  w[0] = v.x;
  w[1] = v.y;
  w[2] = v.z;
  w[3] = v.w;
}

// The A fragments of 16 raw (fp16/bf16) key rows of `row_bytes` bytes for an m16n8k16 product
// over the head dimension: lane (g, t) reads channels 32t .. 32t+31 of rows g (k[0]) and g + 8
// (k[1]); k-step ks takes words 2 ks and 2 ks + 1 (channels 32t + 4ks + {0,1} and + {2,3}).
__device__ __forceinline__ void load_key_row_fragments(const unsigned char* krows, int row_bytes,
                                                       uint32_t (&k)[2][16]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t w[4];
      load_shared16(krows + (g + 8 * r) * row_bytes + 64 * t + 16 * i, w);
#pragma unroll
      for (int j = 0; j < 4; ++j) k[r][4 * i + j] = w[j];
    }
  }
}

// Scores of an m16n8 accumulator tile in log2 units: rows g and g + 8 of lane (g, t) are tokens;
// those at or past `valid` become -inf.
template <int NT>
__device__ __forceinline__ void scale_valid_scores(float (&s)[NT][4], float scale_log2,
                                                   int valid) {
  const int g = (threadIdx.x & 31) >> 2;
  const bool low_ok = g < valid, high_ok = g + 8 < valid;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    s[n][0] = low_ok ? s[n][0] * scale_log2 : -INFINITY;
    s[n][1] = low_ok ? s[n][1] * scale_log2 : -INFINITY;
    s[n][2] = high_ok ? s[n][2] * scale_log2 : -INFINITY;
    s[n][3] = high_ok ? s[n][3] * scale_log2 : -INFINITY;
  }
}

}  // namespace litetopk::decode
