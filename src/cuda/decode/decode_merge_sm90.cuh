// The merge step of flash-decoding, inside the split kernels (dense and sparse): the last split of
// a (sequence, KV head) to finish merges the partial results of all of them.
// 1. Every active split writes its partial (combine_and_store), fences it device-wide and arrives
//    on the pair's counter (atomicInc wrapping at the active count, so the last arrival leaves it
//    at 0). A prerequisite grid of the same launch zeroed the counters, so a workspace that holds
//    anything (a caller's scratch shared with other calls) is fine.
// 2. The last arrival fences again (acquire) and merges: one warp per query row, lanes owning 4 of
//    the 128 dims. M = max of the splits' log2-sum-exps; out = sum_s 2^(lse2_s - M) o_s / sum_s
//    2^(lse2_s - M), lse = (M + log2 sum) * ln 2. A row with no read token gets zeros and
//    lse = -inf. A pair with one active split merges without the counter.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/decode/decode_mma_sm90.cuh"
#include "cuda/decode/decode_softmax_sm90.cuh"
#include "litetopk/sparse_decode.h"

namespace litetopk::decode {

// Where the splits meet: the partials, one arrival counter per (sequence, KV head) and the
// final outputs (out [rows, D] of out_dtype, the optional natural-log lse [rows]).
struct SplitOutput {
  PartialOut partial;
  uint32_t* arrivals;
  void* out;
  DType out_dtype;
  float* lse;
};

__device__ __forceinline__ void store4(void* out, DType dtype, int64_t at, const float (&v)[4]) {
  if (dtype == DType::kFloat32) {
    *reinterpret_cast<float4*>(static_cast<float*>(out) + at) = make_float4(v[0], v[1], v[2], v[3]);
  } else if (dtype == DType::kFloat16) {
    uint2 w;
    w.x = pack2<__half>(v[0], v[1]);
    w.y = pack2<__half>(v[2], v[3]);
    *reinterpret_cast<uint2*>(static_cast<__half*>(out) + at) = w;
  } else {
    uint2 w;
    w.x = pack2<__nv_bfloat16>(v[0], v[1]);
    w.y = pack2<__nv_bfloat16>(v[2], v[3]);
    *reinterpret_cast<uint2*>(static_cast<__nv_bfloat16*>(out) + at) = w;
  }
}

// One warp merges the `active` splits of `row`. The partials come from other CTAs: read through
// L2 (ld.global.cg).
__device__ __forceinline__ void merge_row(const SplitOutput& so, int64_t row, int active) {
  const int lane = threadIdx.x & 31;
  const int splits = so.partial.splits;
  const float* lse2 = so.partial.lse2 + row * splits;
  float mx = -INFINITY;
  for (int s = lane; s < active; s += 32) mx = fmaxf(mx, __ldcg(lse2 + s));
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float lse = -INFINITY;
  if (mx != -INFINITY) {
    float sum = 0.0f;
    for (int s0 = 0; s0 < active; s0 += 32) {
      // Lane l holds the weight of split s0 + l; the loop broadcasts them one by one.
      const float mine = s0 + lane < active ? exp2f(__ldcg(lse2 + s0 + lane) - mx) : 0.0f;
      sum += mine;
      const int count = min(32, active - s0);
#pragma unroll 8
      for (int k = 0; k < count; ++k) {
        const float w = __shfl_sync(0xffffffffu, mine, k);
        if (w == 0.0f) continue;
        const float4 o = __ldcg(reinterpret_cast<const float4*>(
            so.partial.o + (row * splits + s0 + k) * kHeadDim + 4 * lane));
        acc[0] += w * o.x;
        acc[1] += w * o.y;
        acc[2] += w * o.z;
        acc[3] += w * o.w;
      }
    }
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float inv = 1.0f / sum;
    for (float& a : acc) a *= inv;
    lse = (mx + log2f(sum)) / kLog2e;
  }
  store4(so.out, so.out_dtype, row * kHeadDim + 4 * lane, acc);
  if (so.lse != nullptr && lane == 0) so.lse[row] = lse;
}

// Steps 1-2 for the kConsumerWarps warps of a split CTA (named barrier) after combine_and_store
// wrote its partial: rows first_row .. first_row + heads - 1 of pair `pair`, `active` splits in
// all. `last` is a word of the CTA's shared memory.
__device__ __forceinline__ void arrive_and_merge(const SplitOutput& so, int64_t pair, int active,
                                                 int64_t first_row, int heads, uint32_t* last) {
  if (active > 1) {
    sm90::wait_for_prerequisite_grids();  // the grid that zeroed the counters
    __threadfence();                      // this thread's partial, device-wide, before the arrival
    consumer_barrier();
    if (threadIdx.x == 0) {
      const uint32_t before = atomicInc(so.arrivals + pair, static_cast<uint32_t>(active - 1));
      __threadfence();  // the other splits' partials, before this CTA reads them
      *last = before == static_cast<uint32_t>(active - 1) ? 1u : 0u;
    }
    consumer_barrier();
    if (*last == 0) return;
  } else {
    consumer_barrier();  // the CTA's own partial is written
  }
  for (int head = threadIdx.x >> 5; head < heads; head += kConsumerWarps) {
    merge_row(so, first_row + head, active);
  }
}

}  // namespace litetopk::decode
