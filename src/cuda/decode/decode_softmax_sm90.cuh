// The part of flash-decoding shared by the dense and sparse kernels: one warp's online softmax
// over 16-token chunks with the probabilities times values on tensor cores, and the CTA epilogue
// that merges its consumer warps and writes the split's partial result.
//
// Layouts (fragment names as in cuda/common/mma_sync_sm80.cuh). Scores come as the C fragments
// of S[token, head] = K Q^T (M = 16 tokens, N = 8 heads per head tile, NT tiles): s[n][0..1] are
// token g, heads 8n+2t, 8n+2t+1; s[n][2..3] token g+8. They are in log2 units (logit * log2 e).
// P is transposed in registers (movmatrix) into the A fragment of O[head, dim] = P V (M = 16
// heads, K = 16 tokens, N = 8 dims per tile, 16 tiles). O's C fragment o[nt] holds heads g (o0,
// o1) and g+8 (o2, o3) at dims 32t + nt (o0, o2) and 32t + 16 + nt (o1, o3), because the V
// fragment of lane (g, t) is read as dims 16g .. 16g+15 of tokens 2t, 2t+1, 2t+8, 2t+9.
#pragma once

#include <cstdint>

#include "cuda/common/mma_sync_sm80.cuh"
#include "cuda/decode/decode_mma_sm90.cuh"

namespace litetopk::decode {

constexpr int kConsumerWarps = 4;
constexpr int kChunkTokens = 16 * kConsumerWarps;  // tokens per pipeline stage
constexpr int kRowBytes = kHeadDim * 2;            // one fp16/bf16 key or value row
constexpr int kNamedBarrierConsumers = 1;          // bar.sync id used by the consumer warps only

__device__ __forceinline__ void consumer_barrier() {
  asm volatile("bar.sync %0, %1;" ::"n"(kNamedBarrierConsumers), "n"(kConsumerWarps * 32)
               : "memory");
}

// The group's `heads` query rows (fp16/bf16, from row first_row of q [rows, D]) into q_shared
// [16][D], zero rows past `heads`: 16-byte loads, two per consumer thread, all in flight at once.
// Called by the kConsumerWarps warps only.
__device__ __forceinline__ void load_group_queries(const void* q, int64_t first_row, int heads,
                                                   uint16_t (*q_shared)[kHeadDim]) {
  constexpr int kVectors = 16 * kHeadDim / 8;  // 16-byte vectors of 16 rows
  constexpr int kPerThread = kVectors / (kConsumerWarps * 32);
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(q) + first_row * kHeadDim);
  uint4 v[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = threadIdx.x + k * kConsumerWarps * 32;
    v[k] = i / (kHeadDim / 8) < heads ? src[i] : make_uint4(0u, 0u, 0u, 0u);
  }
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    reinterpret_cast<uint4*>(&q_shared[0][0])[threadIdx.x + k * kConsumerWarps * 32] = v[k];
  }
}

// Online softmax state of one warp for up to 8 * NT heads.
template <typename T, int NT>
struct WarpSoftmax {
  float o[16][4];
  float m[NT][2];  // running max of heads 8n + 2t + i (log2 units), the same in every g
  float l[NT][2];  // this lane's share of the running sum (reduced over g at the end)

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      m[n][0] = m[n][1] = -INFINITY;
      l[n][0] = l[n][1] = 0.0f;
    }
  }

  // Adds 16 tokens: scores s (invalid tokens already -inf) and their value rows `vrows` (16 rows
  // of kRowBytes); rows >= valid are read as zeros (their shared memory may hold stale bytes).
  __device__ __forceinline__ void add(float (&s)[NT][4], const unsigned char* vrows, int valid) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float factor[NT][2];
    uint32_t pa[NT][2];  // per head tile: transposed P of tokens 0..7 and 8..15
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float mx = fmaxf(s[n][i], s[n][i + 2]);
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
        const float m_new = fmaxf(m[n][i], mx);
        const float base = m_new == -INFINITY ? 0.0f : m_new;  // keeps exp2 away from NaN
        factor[n][i] = exp2f(m[n][i] - base);
        m[n][i] = m_new;
        s[n][i] = exp2f(s[n][i] - base);
        s[n][i + 2] = exp2f(s[n][i + 2] - base);
        l[n][i] = l[n][i] * factor[n][i] + s[n][i] + s[n][i + 2];
      }
      pa[n][0] = sm80::transpose8x8(pack2<T>(s[n][0], s[n][1]));
      pa[n][1] = sm80::transpose8x8(pack2<T>(s[n][2], s[n][3]));
    }
    // O rows are heads g and g+8: fetch their factors from the lanes that own them (t = g / 2).
    const int src = g >> 1;
    float row_factor[2];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const float f0 = __shfl_sync(0xffffffffu, factor[n][0], src);
      const float f1 = __shfl_sync(0xffffffffu, factor[n][1], src);
      row_factor[n] = (g & 1) ? f1 : f0;
    }
    const uint32_t a[4] = {pa[0][0], NT > 1 ? pa[NT - 1][0] : 0u, pa[0][1],
                           NT > 1 ? pa[NT - 1][1] : 0u};
#pragma unroll
    for (int nt = 0; nt < 16; ++nt) {
      o[nt][0] *= row_factor[0];
      o[nt][1] *= row_factor[0];
      if constexpr (NT > 1) {
        o[nt][2] *= row_factor[NT - 1];
        o[nt][3] *= row_factor[NT - 1];
      }
    }
    // V fragments: tokens 2t, 2t+1, 2t+8, 2t+9; dims 16g .. 16g+15, in two halves of 8 dims.
    const int rows[4] = {2 * t, 2 * t + 1, 2 * t + 8, 2 * t + 9};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      uint32_t v[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        if (rows[r] < valid) {
          load_shared16(vrows + rows[r] * kRowBytes + 32 * g + 16 * half, v[r]);
        } else {
          v[r][0] = v[r][1] = v[r][2] = v[r][3] = 0u;
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int nt = 8 * half + j;
        const uint32_t sel = (j & 1) ? 0x7632u : 0x5410u;
        const uint32_t b0 = __byte_perm(v[0][j >> 1], v[1][j >> 1], sel);
        const uint32_t b1 = __byte_perm(v[2][j >> 1], v[3][j >> 1], sel);
        mma<T>(o[nt], a, b0, b1);
      }
    }
  }

  // Full-warp sums of l: every lane then holds the sums of heads 8n + 2t + i.
  __device__ __forceinline__ void reduce_sums() {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float x = l[n][i];
        x += __shfl_xor_sync(0xffffffffu, x, 4);
        x += __shfl_xor_sync(0xffffffffu, x, 8);
        x += __shfl_xor_sync(0xffffffffu, x, 16);
        l[n][i] = x;
      }
    }
  }
};

// Shared memory of the CTA epilogue: every consumer warp's (m, l, O) for up to 16 heads.
struct CombineScratch {
  float m[kConsumerWarps][16];
  float l[kConsumerWarps][16];
  float o[kConsumerWarps][16][kHeadDim];
};

// Where a split writes its partial result: o [rows, splits, D] normalized by its own sum, and
// lse2 [rows, splits] = max + log2(sum) (-inf when the split saw no token), rows = batch * heads.
struct PartialOut {
  float* o;
  float* lse2;
  int splits;
};

// Merges the consumer warps' states and writes the partial result of (first_row .. first_row +
// heads - 1, split). Called by the kConsumerWarps warps only (named barrier).
template <typename T, int NT>
__device__ __forceinline__ void combine_and_store(WarpSoftmax<T, NT>& state, CombineScratch* scratch,
                                                  int heads, int64_t first_row, int split,
                                                  const PartialOut& out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  state.reduce_sums();
  if (g == 0) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        scratch->m[warp][8 * n + 2 * t + i] = state.m[n][i];
        scratch->l[warp][8 * n + 2 * t + i] = state.l[n][i];
      }
    }
  }
#pragma unroll
  for (int nt = 0; nt < 16; ++nt) {
#pragma unroll
    for (int r = 0; r < NT; ++r) {
      const int head = g + 8 * r;
      scratch->o[warp][head][32 * t + nt] = state.o[nt][2 * r];
      scratch->o[warp][head][32 * t + 16 + nt] = state.o[nt][2 * r + 1];
    }
  }
  consumer_barrier();
  const int dim = threadIdx.x;  // 128 consumer threads, one per dim
  for (int head = 0; head < heads; ++head) {
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) mx = fmaxf(mx, scratch->m[w][head]);
    const int64_t at = (first_row + head) * out.splits + split;
    if (mx == -INFINITY) {
      out.o[at * kHeadDim + dim] = 0.0f;
      if (dim == 0) out.lse2[at] = -INFINITY;
      continue;
    }
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) {
      const float f = exp2f(scratch->m[w][head] - mx);
      sum += scratch->l[w][head] * f;
      acc += scratch->o[w][head][dim] * f;
    }
    out.o[at * kHeadDim + dim] = acc / sum;
    if (dim == 0) out.lse2[at] = mx + log2f(sum);
  }
}

}  // namespace litetopk::decode
