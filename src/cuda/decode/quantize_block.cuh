// Quantizes one block of the sparse KV cache (BS keys x 128 channels) into its slot, bit for bit as
// litetopk/sparse_decode.h specifies (and as the CPU reference cpu::quantize_key_block does), with
// all kThreads threads of the CTA (256: conversion, many CTAs; 1024: an append with few CTAs,
// where one block's latency matters). Used by the append and conversion kernels.
//
// 1. Load: thread (token lane tl = tid / 16, channel group g = tid % 16) holds rows tl,
//    tl + kThreads / 16, ... of channels 8g..8g+7 in registers (one 16-byte load per row; a warp
//    reads two whole rows).
// 2. Channel amax: max over the thread's rows, over the warp's two token lanes (shuffle), then
//    over the warps (shared memory).
// 3. Scale: thread c < 128 rounds 0.5 * amax_c to the cache dtype (round to nearest), raised to the
//    dtype's smallest subnormal when that is 0 and amax_c > 0, and stores it.
// 4. Codes and residuals per element (sparse_kv::quantize_element), packed per thread and row
//    into 2 bytes of codes and 8 bytes of residuals (a warp writes two whole rows of each).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "formats/sparse_kv_format.h"
#include "cuda/decode/cache_rows.cuh"

namespace litetopk::cuda_kv {

// The cache dtype's 16-bit elements: fp16 (kBf16 false) or bf16.
template <bool kBf16>
struct HalfElement;
template <>
struct HalfElement<false> {
  __device__ static float to_float(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
  __device__ static uint16_t from_float(float value) {
    return __half_as_ushort(__float2half_rn(value));
  }
};
template <>
struct HalfElement<true> {
  __device__ static float to_float(uint16_t bits) {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  }
  __device__ static uint16_t from_float(float value) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(value));
  }
};

// Element e (0..7) of a 16-byte vector of 2-byte elements.
__device__ __forceinline__ uint16_t vector_element(const uint4& v, int e) {
  const uint32_t word = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
  return static_cast<uint16_t>(word >> (16 * (e % 2)));
}

template <int kThreads>
struct QuantizeSmem {
  float amax[kThreads / 32][kHeadDim];
  float scale[kHeadDim];
};

// The stored scale of a channel: bits of the dtype, and its value in *scale.
template <bool kBf16>
__device__ __forceinline__ uint16_t channel_scale(float amax, float* scale) {
  using E = HalfElement<kBf16>;
  uint16_t bits = E::from_float(sparse_kv::unrounded_scale(amax));
  if (E::to_float(bits) == 0.0f && amax > 0.0f) bits = 1;  // the smallest positive subnormal
  *scale = E::to_float(bits);
  return bits;
}

// Every thread of the CTA must call it (it synchronizes). `row(t)` gives the 16-byte vectors of
// key t (t in [0, BS)); codes, scales and residuals point at the block's slot.
template <bool kBf16, int kBlockSize, int kThreads, typename RowSource>
__device__ void quantize_block(const RowSource& row, uint8_t* codes, uint16_t* scales,
                               uint8_t* residuals, QuantizeSmem<kThreads>& smem) {
  using E = HalfElement<kBf16>;
  constexpr int kTokenLanes = kThreads / kRowVectors;
  constexpr int kRows = kBlockSize / kTokenLanes;
  constexpr int kWarps = kThreads / 32;
  static_assert(kThreads >= kHeadDim && kBlockSize % kTokenLanes == 0, "one scale per thread");
  const int tid = static_cast<int>(threadIdx.x);
  const int group = tid % kRowVectors, lane = tid / kRowVectors;

  uint4 keys[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) keys[r] = row(lane + r * kTokenLanes)[group];

  float amax[kChannelsPerVector];
#pragma unroll
  for (int e = 0; e < kChannelsPerVector; ++e) {
    amax[e] = 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      amax[e] = fmaxf(amax[e], fabsf(E::to_float(vector_element(keys[r], e))));
    }
    amax[e] = fmaxf(amax[e], __shfl_xor_sync(0xffffffffu, amax[e], kRowVectors));
  }
  if (tid % 32 < kRowVectors) {
#pragma unroll
    for (int e = 0; e < kChannelsPerVector; ++e) {
      smem.amax[tid / 32][group * kChannelsPerVector + e] = amax[e];
    }
  }
  __syncthreads();
  if (tid < kHeadDim) {
    float channel_amax = smem.amax[0][tid];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) channel_amax = fmaxf(channel_amax, smem.amax[w][tid]);
    scales[tid] = channel_scale<kBf16>(channel_amax, &smem.scale[tid]);
  }
  __syncthreads();

  float scale[kChannelsPerVector];
#pragma unroll
  for (int e = 0; e < kChannelsPerVector; ++e) {
    scale[e] = smem.scale[group * kChannelsPerVector + e];
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    uint32_t packed_codes = 0;
    uint32_t packed_residuals[2] = {0, 0};
#pragma unroll
    for (int e = 0; e < kChannelsPerVector; ++e) {
      const sparse_kv::QuantizedElement q =
          sparse_kv::quantize_element(E::to_float(vector_element(keys[r], e)), scale[e]);
      packed_codes |= q.code << (sparse_kv::kCodeBits * e);
      packed_residuals[e / 4] |= static_cast<uint32_t>(q.residual) << (8 * (e % 4));
    }
    const int t = lane + r * kTokenLanes;
    // Channel 8g + e: code bits 2e of bytes 2g, 2g + 1; residual byte 8g + e.
    reinterpret_cast<uint16_t*>(codes + t * kCodeBytesPerRow)[group] =
        static_cast<uint16_t>(packed_codes);
    reinterpret_cast<uint2*>(residuals + t * kHeadDim)[group] =
        make_uint2(packed_residuals[0], packed_residuals[1]);
  }
}

}  // namespace litetopk::cuda_kv
