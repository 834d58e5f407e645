// Tensor-core fragments of the quantized keys of sparse decode (litetopk/sparse_decode.h).
//
// Scores are S[token, head] = K Q^T with M = 16 tokens (A, built in registers from shared memory)
// and N = 8 heads per tile (B). The channel scale is folded into the query once per block:
// q . (s * (L + R)) = sum_c (q_c s_c) (L_c + R_c), so A holds block-independent small numbers.
//
// Channel order. Lane (g, t) reads code bytes 8t .. 8t+7 (channels 32t .. 32t+31) of tokens g and
// g+8. A 32-bit code word w holds 16 channels m .. m+15 (channel m + 4i + j at bits 8i + 2j), so
// (w >> 2p) & 0x00030003 holds the codes of channels m + p and m + p + 8 in its two halves (p = 0
// .. 7). K-step ks, register r (a0a1 for r = 0, a4a5 for r = 1) therefore holds the channels
//   chan(t, ks, r, half) = 32t + 16 (ks >> 2) + 2 (ks & 3) + r + 8 half,
// and the B fragments of the queries use the same order.
//
// Scan (2-bit estimate, codes only): A = fp16(1024 + code * 4^j), j = channel % 4, formed by one
// mask-and-or on the code word (the code lands in mantissa bits 2j .. 2j+1 of 1024); B = u 4^-j
// with u the scaled query; the constant 1024 * sum B and the level offset 1.5 u are subtracted
// after the mma (fp32). Exact scores: A = code + R in fp16 (exact: both are multiples of 2^-9
// below 4.5), B = u split into fp16 hi + lo (22 bits), minus 1.5 * sum u.
// u = q * s * softmax_scale * log2(e) * 2^-F per head and block, F chosen so that max |u| is in
// [2^13, 2^14): no fp16 overflow whatever the key range (bf16 caches too), nothing near fp16's
// subnormals that matters, and S = 2^F (acc - bias) in log2 units.
#pragma once

#include <cstdint>

#include "cuda/decode/decode_mma_sm90.cuh"

namespace litetopk::decode {

constexpr int kCodeRowBytes = kHeadDim / 4;  // 32
constexpr uint32_t kMagic1024 = 0x64006400u;  // fp16x2 (1024, 1024)

__device__ __forceinline__ int key_channel(int t, int ks, int r, int half) {
  return 32 * t + 16 * (ks >> 2) + 2 * (ks & 3) + r + 8 * half;
}

// The per-block query of head tile n for lane (g, t): u for its 32 channels of head 8n+g, with
// F and the lane-group (t = 0..3) reduction of max |q s|. `q` is the group's raw queries (rows
// past G are zero), `scales` the block's channel scales.
template <typename T>
struct BlockQuery {
  float u[32];  // index 2 * (2 * ks + r) + half... laid out as [ks][r][half]
  int exponent;  // F

  __device__ __forceinline__ void build(const T* q_row, const T* scales, float scale_log2) {
    const int t = threadIdx.x & 3;
    float vmax = 0.0f;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int c = key_channel(t, ks, r, half);
          const float v = to_float(q_row[c]) * to_float(scales[c]) * scale_log2;
          u[4 * ks + 2 * r + half] = v;
          vmax = fmaxf(vmax, fabsf(v));
        }
      }
    }
    vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 1));
    vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 2));
    int e = 0;
    if (vmax > 0.0f) frexpf(vmax, &e);
    exponent = vmax > 0.0f ? e - 14 : 0;
#pragma unroll
    for (int i = 0; i < 32; ++i) u[i] = ldexpf(u[i], -exponent);
  }
};

// Sum over the four lanes of a lane group (t = 0..3).
__device__ __forceinline__ float group_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

// Scan B fragments (fp16 u 4^-j) and the bias sum_c B_c (1024 + 1.5 4^j) of head 8n+g.
template <typename T>
__device__ __forceinline__ float scan_query_fragments(const BlockQuery<T>& bq, uint32_t (&bf)[8][2]) {
  float bias = 0.0f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int j = (2 * ks + r) & 3;  // = channel % 4
      const float down = 1.0f / static_cast<float>(1 << (2 * j));
      const __half2 h = __floats2half2_rn(bq.u[4 * ks + 2 * r] * down, bq.u[4 * ks + 2 * r + 1] * down);
      bf[ks][r] = half2_bits(h);
      const float2 f = __half22float2(h);
      bias += (f.x + f.y) * (1024.0f + 1.5f * static_cast<float>(1 << (2 * j)));
    }
  }
  return group_sum(bias);
}

// Exact B fragments (fp16 hi and lo of u) and the bias 1.5 * sum_c (hi + lo) of head 8n+g.
template <typename T>
__device__ __forceinline__ float exact_query_fragments(const BlockQuery<T>& bq, uint32_t (&hi)[8][2],
                                                       uint32_t (&lo)[8][2]) {
  float bias = 0.0f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float x0 = bq.u[4 * ks + 2 * r], x1 = bq.u[4 * ks + 2 * r + 1];
      const __half2 h = __floats2half2_rn(x0, x1);
      const float2 hf = __half22float2(h);
      const __half2 l = __floats2half2_rn(x0 - hf.x, x1 - hf.y);
      const float2 lf = __half22float2(l);
      hi[ks][r] = half2_bits(h);
      lo[ks][r] = half2_bits(l);
      bias += (hf.x + lf.x) + (hf.y + lf.y);
    }
  }
  return 1.5f * group_sum(bias);
}

// The two code words of a token row for lane t (channels 32t .. 32t+15 and 32t+16 .. 32t+31).
__device__ __forceinline__ void load_code_words(const unsigned char* code_row, uint32_t (&w)[2]) {
  const uint2 v = *reinterpret_cast<const uint2*>(code_row + 8 * (threadIdx.x & 3));
  w[0] = v.x;
  w[1] = v.y;
}

// Scan A register (k-step ks, register r) of one token: fp16x2 (1024 + code * 4^j).
__device__ __forceinline__ uint32_t scan_key_register(const uint32_t (&w)[2], const uint32_t (&w8)[2],
                                                      int ks, int r) {
  const int p = 2 * (ks & 3) + r;
  const uint32_t word = p < 4 ? w[ks >> 2] : w8[ks >> 2];
  return (word & (0x00030003u << (2 * (p & 3)))) | kMagic1024;
}

// Exact A registers (k-step ks, r = 0 and 1) of one token: fp16x2 code + R.
__device__ __forceinline__ void exact_key_registers(const uint32_t (&w)[2], const uint32_t (&res)[8],
                                                    int ks, uint32_t (&out)[2]) {
  const int wsel = ks >> 2, upper = (ks & 3) >= 2 ? 1 : 0;
  const uint32_t pairs = __byte_perm(res[4 * wsel + upper], res[4 * wsel + 2 + upper],
                                     (ks & 1) ? 0x7362u : 0x5140u);
  const __half2 k1024 = __float2half2_rn(1024.0f);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int p = 2 * (ks & 3) + r;
    const uint32_t code = ((w[wsel] >> (2 * p)) & 0x00030003u) | kMagic1024;
    const __half2 c = __hsub2(bits_half2(code), k1024);
    const __half2 rr = bits_half2(e4m3x2_to_half2(r == 0 ? (pairs & 0xffffu) : (pairs >> 16)));
    out[r] = half2_bits(__hadd2(c, rr));
  }
}

}  // namespace litetopk::decode
