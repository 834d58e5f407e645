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
// Exact scores: A = code + r 2^-8 in fp16 (r the int8 residual byte; exact: a multiple of 2^-8
// below 4), B = u split into fp16 hi + lo (22 bits), minus (1.5 - 2^-9) * sum u (the levels'
// offset less the residual's half cell). u = q * s * softmax_scale * log2(e) * 2^-F per head and
// block, F chosen so that max |u| is in [2^13, 2^14): no fp16 overflow whatever the key range
// (bf16 caches too), nothing near fp16's subnormals that matters, and S = 2^F (acc - bias) in
// log2 units.
//
// Scan (2-bit estimate): int8 tensor cores (m16n8k32). A = the codes themselves, one byte each:
// (w >> 2j) & 0x03030303 holds the codes of channels m + 4b + j (b = 0..3) of a code word, so a
// token's 32 channels of lane t take 8 registers and two instructions each. B = the block's
// query, rint(127 q s / max_c |q s|) per head. The int32 dot product sum_c code_c u_c is exact;
// estimate = (acc - 1.5 sum u) * max|q s| / 127, so the only error is the int8 rounding of the
// query: |e_gpu - e| <= 1.5 * 128 * 0.5 / 127 * max_c |q_c s_c| * scale (about 0.76 of the
// largest single channel term; the 2-bit estimate's own error is far larger). Channel order of
// the scan: k-step ks (0..3), half h (a0/a2) -> channels 32t + 16 (ks >> 1) + 4b + 2 (ks & 1) + h.
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
  float u[32];  // [ks][r][half]: u[4 ks + 2 r + half] is channel key_channel(t, ks, r, half)
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
    exponent = vmax > 0.0f ? max(e - 14, -100) : 0;
    const float down = ldexpf(1.0f, -exponent);
#pragma unroll
    for (int i = 0; i < 32; ++i) u[i] *= down;
  }
};

// Sum over the four lanes of a lane group (t = 0..3).
__device__ __forceinline__ float group_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  x += __shfl_xor_sync(0xffffffffu, x, 2);
  return x;
}

// Exact B fragments (fp16 hi and lo of u) and the bias (1.5 - 2^-9) * sum_c (hi + lo) of head
// 8n+g: q . key = sum_c u_c (code_c + r_c 2^-8) - (1.5 - 2^-9) sum_c u_c.
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
  return (1.5f - 1.0f / 512.0f) * group_sum(bias);  // level offset minus the residual's half cell
}

// The scan's int8 query of head 8n+g for lane (g, t) and one block: b[ks][h] (the B fragments),
// the exact sum of the int8 values over the head's 128 channels, and the dequantization factor
// max|q s| / 127 * scale_log2 (0 for an all-zero query). `q` holds the lane's 32 channels of the
// head in natural order (32t + i), `scales` the block's scales.
template <typename T>
__device__ __forceinline__ void scan_query(const float (&q)[32], const T* scales, float scale_log2,
                                           uint32_t (&b)[4][2], int* sum, float* dequant) {
  const int t = threadIdx.x & 3;
  float v[32];
  float vmax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t w[4];
    load_shared16(scales + 32 * t + 8 * i, w);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint16_t lo = static_cast<uint16_t>(w[k] & 0xffffu), hi = static_cast<uint16_t>(w[k] >> 16);
      v[8 * i + 2 * k] = q[8 * i + 2 * k] * to_float(*reinterpret_cast<const T*>(&lo));
      v[8 * i + 2 * k + 1] = q[8 * i + 2 * k + 1] * to_float(*reinterpret_cast<const T*>(&hi));
      vmax = fmaxf(vmax, fmaxf(fabsf(v[8 * i + 2 * k]), fabsf(v[8 * i + 2 * k + 1])));
    }
  }
  vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 1));
  vmax = fmaxf(vmax, __shfl_xor_sync(0xffffffffu, vmax, 2));
  const float to_int = vmax > 0.0f ? 127.0f / vmax : 0.0f;
  int total = 0;
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int base = 16 * (ks >> 1) + 2 * (ks & 1) + h;  // + 4 * byte
      int x[4];
#pragma unroll
      for (int byte = 0; byte < 4; ++byte) {
        x[byte] = __float2int_rn(v[base + 4 * byte] * to_int);
        total += x[byte];
      }
      b[ks][h] = __byte_perm(__byte_perm(x[0], x[1], 0x0040), __byte_perm(x[2], x[3], 0x0040), 0x5410);
    }
  }
  total += __shfl_xor_sync(0xffffffffu, total, 1);
  total += __shfl_xor_sync(0xffffffffu, total, 2);
  *sum = total;
  *dequant = vmax / 127.0f * scale_log2;
}

// The scan's A fragment of k-step ks for tokens g and g+8 from their code words (lane t's
// channels 32t .. 32t+31: w[row][0] and w[row][1]).
__device__ __forceinline__ void scan_key_fragment(const uint32_t (&w)[2][2], int ks, uint32_t (&a)[4]) {
  const int wsel = ks >> 1, j0 = 2 * (ks & 1);
  a[0] = (w[0][wsel] >> (2 * j0)) & 0x03030303u;
  a[1] = (w[1][wsel] >> (2 * j0)) & 0x03030303u;
  a[2] = (w[0][wsel] >> (2 * j0 + 2)) & 0x03030303u;
  a[3] = (w[1][wsel] >> (2 * j0 + 2)) & 0x03030303u;
}

// The two code words of a token row for lane t (channels 32t .. 32t+15 and 32t+16 .. 32t+31).
__device__ __forceinline__ void load_code_words(const unsigned char* code_row, uint32_t (&w)[2]) {
  const uint2 v = *reinterpret_cast<const uint2*>(code_row + 8 * (threadIdx.x & 3));
  w[0] = v.x;
  w[1] = v.y;
}

// Exact A registers (k-step ks, r = 0 and 1) of one token: fp16x2 code + r * 2^-8 for the int8
// residual byte r ((1152 + r) - 1152 and the fma are exact: a multiple of 2^-8 in [-0.5, 3.5]);
// the residual's half cell, 2^-9, is in the bias (exact_query_fragments).
__device__ __forceinline__ void exact_key_registers(const uint32_t (&w)[2], const uint32_t (&res)[8],
                                                    int ks, uint32_t (&out)[2]) {
  const int wsel = ks >> 2, upper = (ks & 3) >= 2 ? 1 : 0;
  const uint32_t pairs = __byte_perm(res[4 * wsel + upper], res[4 * wsel + 2 + upper],
                                     (ks & 1) ? 0x7362u : 0x5140u);
  const __half2 k1024 = __float2half2_rn(1024.0f);
  const __half2 k1152 = __float2half2_rn(1152.0f);
  const __half2 unit = __float2half2_rn(1.0f / 256.0f);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int p = 2 * (ks & 3) + r;
    const uint32_t code = ((w[wsel] >> (2 * p)) & 0x00030003u) | kMagic1024;
    const __half2 c = __hsub2(bits_half2(code), k1024);
    const __half2 b = __hsub2(
        bits_half2(int8x2_biased_half2(r == 0 ? (pairs & 0xffffu) : (pairs >> 16))), k1152);
    out[r] = half2_bits(__hfma2(b, unit, c));
  }
}

}  // namespace litetopk::decode
