// The pseudo-maximum of sparse decode: exact logits of the anchor tokens (block 0, block nf-1,
// the open block), never 2-bit estimates.
//
// Grid (3 * BS/64 chunks, kv_heads, batch), 128 threads; chunk c covers 64 tokens of one anchor.
// 1. Lets the dependent sparse kernel launch at once (it scans codes meanwhile and waits for this
//    grid only before its first keep decision). Chunk 0 zeroes the (sequence, KV head)'s arrival
//    counter of that kernel's merge.
// 2. Reads the length; a chunk without tokens (no such anchor, block nf-1 == block 0, or past the
//    open block's end) writes -inf.
// 3. Rebuilds the chunk's keys in shared memory in fp32, exactly (s * (L + R), or the tail key
//    widened; each thread loads its 16 rows' bytes at once), and the group's queries times
//    softmax_scale * log2(e).
// 4. Thread (token, head) dot products in fp32 (rotated channel order: no bank conflicts), then
//    the max over the chunk's tokens per head -> anchor_max [batch, q_heads, chunks] (log2 units).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "formats/sparse_kv_format.h"
#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/decode/decode_kernels.h"
#include "cuda/decode/decode_launch_kernel.cuh"
#include "cuda/decode/decode_mma_sm90.cuh"

namespace litetopk::decode {
namespace {

constexpr int kThreads = 128;
constexpr int kTokens = kAnchorChunkTokens;
constexpr int kTokenGroups = kThreads / 32;             // step 3: one per warp
constexpr int kRowsPerThread = kTokens / kTokenGroups;  // 16

struct AnchorParams : SparseCacheView {
  int chunks;
  float* anchor_max;
  uint32_t* arrivals;
};

template <typename T>
__global__ void __launch_bounds__(kThreads) sparse_anchor_kernel(const AnchorParams p) {
  sm90::allow_dependent_grids();
  __shared__ float keys[kTokens][kHeadDim];
  __shared__ float q[16][kHeadDim];
  __shared__ float best[2][16];
  const int chunk = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  if (chunk == 0 && threadIdx.x == 0) p.arrivals[static_cast<int64_t>(b) * p.num_kv_heads + h] = 0;
  const int per_anchor = p.block_size / kTokens;
  const int anchor = chunk / per_anchor, first = (chunk % per_anchor) * kTokens;
  const int len = p.lengths[b];
  const int nf = len / p.block_size, nt = len - nf * p.block_size;
  int count = 0, block = 0;
  if (anchor == 0 && nf >= 1) {
    count = kTokens;
  } else if (anchor == 1 && nf >= 2) {
    count = kTokens;
    block = nf - 1;
  } else if (anchor == 2 && nt > first) {
    count = min(kTokens, nt - first);
  }
  const int num_q_heads = p.num_kv_heads * p.group;
  const int64_t first_row = static_cast<int64_t>(b) * num_q_heads + static_cast<int64_t>(h) * p.group;
  if (count == 0) {
    if (threadIdx.x < p.group) p.anchor_max[(first_row + threadIdx.x) * p.chunks + chunk] = -INFINITY;
    return;
  }
  const uint4* qg = reinterpret_cast<const uint4*>(static_cast<const T*>(p.q) + first_row * kHeadDim);
  for (int i = threadIdx.x; i < p.group * kHeadDim / 8; i += kThreads) {  // 8 elements a load
    const uint4 v = qg[i];
    const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
    for (int j = 0; j < 8; ++j) q[8 * i / kHeadDim][(8 * i + j) % kHeadDim] = to_float(e[j]) * p.scale_log2;
  }
  // Thread (token group tg, channel quad cq) takes channels 4cq .. 4cq+3 of tokens tg, tg + 4, ...:
  // a warp reads whole rows, and every load is in flight before the first use.
  const int cq = threadIdx.x % 32, tg = threadIdx.x / 32;
  if (anchor < 2) {
    const int64_t slot = sparse_kv::slot_index(p.block_table, p.num_kv_heads, p.max_blocks, b, h, block);
    const uint8_t* codes = p.codes + (slot * p.block_size + first) * (kHeadDim / 4);
    const uint8_t* residuals = p.residuals + (slot * p.block_size + first) * kHeadDim;
    const T* scales = static_cast<const T*>(p.scales) + slot * kHeadDim;
    float sc[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) sc[j] = to_float(scales[4 * cq + j]);
    uint32_t code[kRowsPerThread], res[kRowsPerThread];
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      const int token = tg + kTokenGroups * k;
      code[k] = codes[token * (kHeadDim / 4) + cq];
      res[k] = *reinterpret_cast<const uint32_t*>(residuals + token * kHeadDim + 4 * cq);
    }
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      float4 key;
      float* kv = &key.x;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        kv[j] = sparse_kv::rebuild_element(sc[j], (code[k] >> (2 * j)) & 3u,
                                           static_cast<uint8_t>(res[k] >> (8 * j)));
      }
      *reinterpret_cast<float4*>(&keys[tg + kTokenGroups * k][4 * cq]) = key;
    }
  } else {
    const T* tail = static_cast<const T*>(p.tail_keys) +
                    ((static_cast<int64_t>(b) * p.num_kv_heads + h) * p.block_size + first) * kHeadDim;
    uint2 raw[kRowsPerThread];
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      const int token = tg + kTokenGroups * k;
      raw[k] = token < count ? *reinterpret_cast<const uint2*>(tail + token * kHeadDim + 4 * cq)
                             : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int k = 0; k < kRowsPerThread; ++k) {
      const T* e = reinterpret_cast<const T*>(&raw[k]);
      *reinterpret_cast<float4*>(&keys[tg + kTokenGroups * k][4 * cq]) =
          make_float4(to_float(e[0]), to_float(e[1]), to_float(e[2]), to_float(e[3]));
    }
  }
  __syncthreads();
  const int token = threadIdx.x % kTokens, half = threadIdx.x / kTokens;
  for (int head = half; head < p.group; head += 2) {
    float dot = 0.0f;
#pragma unroll 8
    for (int c = 0; c < kHeadDim; ++c) {
      const int cc = (c + token) & (kHeadDim - 1);
      dot = fmaf(q[head][cc], keys[token][cc], dot);
    }
    float m = token < count ? dot : -INFINITY;
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    // Warps 2*half and 2*half+1 hold tokens 0..31 and 32..63 of this head.
    if ((threadIdx.x & 31) == 0) best[(threadIdx.x >> 5) & 1][head] = m;
  }
  __syncthreads();
  if (threadIdx.x < p.group) {
    p.anchor_max[(first_row + threadIdx.x) * p.chunks + chunk] =
        fmaxf(best[0][threadIdx.x], best[1][threadIdx.x]);
  }
}

}  // namespace

Status launch_sparse_anchors(const SparseDecodeProblem& problem, float* anchor_max,
                             uint32_t* arrivals, cudaStream_t stream) {
  const SparseKvCache& c = problem.cache;
  AnchorParams params{};
  static_cast<SparseCacheView&>(params) = sparse_cache_view(problem);
  params.chunks = anchor_chunks(c.block_size);
  params.anchor_max = anchor_max;
  params.arrivals = arrivals;
  const dim3 grid(static_cast<unsigned>(params.chunks), static_cast<unsigned>(c.num_kv_heads),
                  static_cast<unsigned>(c.batch));
  return dispatch_cache_type(c.dtype, params.group, [&](auto element, auto) {
    return launch_kernel(sparse_anchor_kernel<decltype(element)>, grid, dim3(kThreads), 0, false,
                         stream, params);
  });
}

}  // namespace litetopk::decode
