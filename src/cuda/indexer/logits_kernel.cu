// The DSA lightning-indexer logits, fp8 e4m3 on tensor cores (mma.sync m16n8k32, sm_89+):
//   logits[t, s] = kv_scale[s] * sum_h weights[t, h] * relu(dot(q[t, h], kv[s]))  in [ks, ke)
// and -inf elsewhere. The unfused baseline: this kernel, then select_topk over the rows.
//
// Pipeline of logits_kernel (one block = kQueries queries x one chunk of keys, 8 warps):
// 1. Stage the block's q [kQueries, H, 128] (rows padded to 144 bytes: conflict-free fragment
//    loads) and weights in shared memory.
// 2. For each 128-key tile of the chunk that meets some query's range: every warp loads the A
//    fragments of its 16 keys straight from global memory (keys on the M side, as DeepGEMM
//    does, so the head reduction stays inside a thread and its quad).
// 3. Per query: 4 x H/8 mma (B = that query's heads), relu (NaN stays NaN), times the head
//    weights, summed over the thread's heads and its quad, times kv_scale; lanes 0 of each quad
//    write the two keys they hold, -inf outside the query's range.
// Tiles outside every query's range are filled with -inf without any math.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "cuda/common/cuda_check.h"
#include "cuda/indexer/indexer_kernels.h"

namespace litetopk::cuda_indexer {
namespace {

constexpr int kHeadDim = 128;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kKeysPerWarp = 16;
constexpr int kTileKeys = kWarps * kKeysPerWarp;  // 128
constexpr int kQueries = 4;                       // queries per block
constexpr int kRowPitch = kHeadDim + 16;          // bytes per staged q row

struct LogitsArgs {
  const uint8_t* q;
  const uint8_t* kv;
  const float* kv_scale;
  const float* weights;
  const int32_t* ks;
  const int32_t* ke;
  int32_t num_queries;
  int32_t num_keys;
  int32_t chunk_keys;  // keys per block along S (a multiple of kTileKeys)
  float* logits;
  int64_t stride;
};

__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// max(0, x) that keeps NaN (a NaN input must give a NaN score, which is never selected).
__device__ __forceinline__ float relu_keep_nan(float x) { return x < 0.0f ? 0.0f : x; }

__device__ __forceinline__ int32_t clamp_key(int32_t s, int32_t num_keys) {
  return min(max(s, 0), num_keys);
}

template <int kHeads>
__global__ void __launch_bounds__(kThreads) logits_kernel(const LogitsArgs args) {
  constexpr int kHeadTiles = kHeads / 8;
  __shared__ __align__(16) uint8_t q_rows[kQueries * kHeads * kRowPitch];
  __shared__ float weights[kQueries][kHeads];
  __shared__ int32_t range_begin[kQueries];
  __shared__ int32_t range_end[kQueries];

  const int t0 = static_cast<int>(blockIdx.y) * kQueries;
  const int chunk_begin = static_cast<int>(blockIdx.x) * args.chunk_keys;
  const int chunk_end = min(chunk_begin + args.chunk_keys, args.num_keys);
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int group = lane / 4;   // row within the fragment
  const int quad_lane = lane % 4;

  // 1. Stage q, weights and ranges (queries past T get empty ranges and zero q).
  constexpr int kVectorsPerRow = kHeadDim / 16;
  for (int i = threadIdx.x; i < kQueries * kHeads * kVectorsPerRow; i += kThreads) {
    const int row = i / kVectorsPerRow;  // query * kHeads + head
    const int part = i % kVectorsPerRow;
    const int t = t0 + row / kHeads;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (t < args.num_queries) {
      v = *reinterpret_cast<const uint4*>(args.q + (int64_t{t0} * kHeads + row) * kHeadDim +
                                          part * 16);
    }
    *reinterpret_cast<uint4*>(q_rows + row * kRowPitch + part * 16) = v;
  }
  for (int i = threadIdx.x; i < kQueries * kHeads; i += kThreads) {
    const int t = t0 + i / kHeads;
    weights[i / kHeads][i % kHeads] =
        t < args.num_queries ? args.weights[int64_t{t} * kHeads + i % kHeads] : 0.0f;
  }
  if (threadIdx.x < kQueries) {
    const int t = t0 + static_cast<int>(threadIdx.x);
    int32_t begin = 0;
    int32_t end = 0;
    if (t < args.num_queries) {
      begin = clamp_key(args.ks[t], args.num_keys);
      end = max(begin, clamp_key(args.ke[t], args.num_keys));
    }
    range_begin[threadIdx.x] = begin;
    range_end[threadIdx.x] = end;
  }
  __syncthreads();
  int32_t union_begin = args.num_keys;
  int32_t union_end = 0;
#pragma unroll
  for (int qi = 0; qi < kQueries; ++qi) {
    if (range_begin[qi] < range_end[qi]) {
      union_begin = min(union_begin, range_begin[qi]);
      union_end = max(union_end, range_end[qi]);
    }
  }

  const float neg_inf = -INFINITY;
  for (int tile = chunk_begin; tile < chunk_end; tile += kTileKeys) {
    const int key0 = tile + warp * kKeysPerWarp + group;  // this thread's keys: key0, key0 + 8
    const int key1 = key0 + 8;
    if (tile + kTileKeys <= union_begin || tile >= union_end) {
      // No query of the block sees this tile: -inf only.
      if (quad_lane == 0) {
        for (int qi = 0; qi < kQueries; ++qi) {
          const int t = t0 + qi;
          if (t >= args.num_queries) break;
          float* row = args.logits + int64_t{t} * args.stride;
          if (key0 < chunk_end) row[key0] = neg_inf;
          if (key1 < chunk_end) row[key1] = neg_inf;
        }
      }
      continue;
    }

    // 2. A fragments: keys key0 / key1, bytes [quad_lane * 4, +4) and [16 + quad_lane * 4, +4)
    //    of each 32-byte slice of the 128-byte key.
    uint32_t a[kHeadDim / 32][4];
#pragma unroll
    for (int kk = 0; kk < kHeadDim / 32; ++kk) {
      const int offset = kk * 32 + quad_lane * 4;
      a[kk][0] = key0 < args.num_keys
                     ? *reinterpret_cast<const uint32_t*>(args.kv + int64_t{key0} * kHeadDim + offset)
                     : 0u;
      a[kk][1] = key1 < args.num_keys
                     ? *reinterpret_cast<const uint32_t*>(args.kv + int64_t{key1} * kHeadDim + offset)
                     : 0u;
      a[kk][2] = key0 < args.num_keys ? *reinterpret_cast<const uint32_t*>(
                                            args.kv + int64_t{key0} * kHeadDim + offset + 16)
                                      : 0u;
      a[kk][3] = key1 < args.num_keys ? *reinterpret_cast<const uint32_t*>(
                                            args.kv + int64_t{key1} * kHeadDim + offset + 16)
                                      : 0u;
    }
    const float scale0 = key0 < args.num_keys ? args.kv_scale[key0] : 0.0f;
    const float scale1 = key1 < args.num_keys ? args.kv_scale[key1] : 0.0f;

    // 3. Per query: the head-weighted relu sum.
    for (int qi = 0; qi < kQueries; ++qi) {
      const int t = t0 + qi;
      if (t >= args.num_queries) break;
      float acc[kHeadTiles][4];
#pragma unroll
      for (int nt = 0; nt < kHeadTiles; ++nt) {
        acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
      }
      const uint8_t* q_query = q_rows + qi * kHeads * kRowPitch;
#pragma unroll
      for (int kk = 0; kk < kHeadDim / 32; ++kk) {
#pragma unroll
        for (int nt = 0; nt < kHeadTiles; ++nt) {
          const uint8_t* b = q_query + (nt * 8 + group) * kRowPitch + kk * 32 + quad_lane * 4;
          mma_e4m3(acc[nt], a[kk], *reinterpret_cast<const uint32_t*>(b),
                   *reinterpret_cast<const uint32_t*>(b + 16));
        }
      }
      float sum0 = 0.0f;
      float sum1 = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kHeadTiles; ++nt) {
        const float w0 = weights[qi][nt * 8 + quad_lane * 2];
        const float w1 = weights[qi][nt * 8 + quad_lane * 2 + 1];
        sum0 += relu_keep_nan(acc[nt][0]) * w0 + relu_keep_nan(acc[nt][1]) * w1;
        sum1 += relu_keep_nan(acc[nt][2]) * w0 + relu_keep_nan(acc[nt][3]) * w1;
      }
      sum0 += __shfl_xor_sync(0xffffffffu, sum0, 1);
      sum0 += __shfl_xor_sync(0xffffffffu, sum0, 2);
      sum1 += __shfl_xor_sync(0xffffffffu, sum1, 1);
      sum1 += __shfl_xor_sync(0xffffffffu, sum1, 2);
      if (quad_lane == 0) {
        float* row = args.logits + int64_t{t} * args.stride;
        const int32_t begin = range_begin[qi];
        const int32_t end = range_end[qi];
        if (key0 < chunk_end) row[key0] = key0 >= begin && key0 < end ? sum0 * scale0 : neg_inf;
        if (key1 < chunk_end) row[key1] = key1 >= begin && key1 < end ? sum1 * scale1 : neg_inf;
      }
    }
  }
}

}  // namespace

Status launch_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                     cudaStream_t stream) {
  if (problem.num_queries == 0 || problem.num_keys == 0) return Status::ok();
  int device = 0;
  int sm_count = 0;
  LITETOPK_CUDA_TRY(cudaGetDevice(&device));
  LITETOPK_CUDA_TRY(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  const int64_t query_blocks = (problem.num_queries + kQueries - 1) / kQueries;
  const int64_t tiles = (problem.num_keys + kTileKeys - 1) / kTileKeys;
  // Split the keys only as much as needed for about eight blocks per SM.
  const int64_t splits = std::clamp<int64_t>(8 * sm_count / query_blocks, 1, tiles);
  const int64_t chunk_tiles = (tiles + splits - 1) / splits;
  LogitsArgs args{};
  args.q = static_cast<const uint8_t*>(problem.q);
  args.kv = static_cast<const uint8_t*>(problem.kv);
  args.kv_scale = problem.kv_scale;
  args.weights = problem.weights;
  args.ks = problem.ks;
  args.ke = problem.ke;
  args.num_queries = static_cast<int32_t>(problem.num_queries);
  args.num_keys = static_cast<int32_t>(problem.num_keys);
  args.chunk_keys = static_cast<int32_t>(chunk_tiles * kTileKeys);
  args.logits = logits;
  args.stride = logits_stride;
  const dim3 grid(static_cast<unsigned>((tiles + chunk_tiles - 1) / chunk_tiles),
                  static_cast<unsigned>(query_blocks));
  if (problem.num_heads == 64) {
    logits_kernel<64><<<grid, kThreads, 0, stream>>>(args);
  } else {
    logits_kernel<32><<<grid, kThreads, 0, stream>>>(args);
  }
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_indexer
