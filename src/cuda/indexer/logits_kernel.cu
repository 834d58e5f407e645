// The DSA lightning-indexer logits, fp8 e4m3 on tensor cores:
//   logits[t, s] = kv_scale[s] * sum_h weights[t, h] * relu(dot(q[t, h], kv[s]))  in [ks, ke)
// and -inf elsewhere. The unfused baseline: this kernel, then select_topk over the rows.
//
// Pipeline of logits_kernel (one block = kQueries queries x one chunk of keys, 8 warps):
// 1. Stage the block's q, weights and ranges in shared memory (QueryBlockScorer::stage).
// 2. For each 128-key tile of the chunk that meets some query's range: load the warps' A
//    fragments, then per query score the tile (query_block_scorer.cuh) and let lane 0 of each quad
//    write its two keys, -inf outside the query's range.
// 3. Tiles outside every query's range are filled with -inf without any math.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "cuda/common/cuda_check.h"
#include "cuda/indexer/indexer_kernels.h"
#include "cuda/indexer/query_block_scorer.cuh"

namespace litetopk::cuda_indexer {
namespace {

constexpr int kQueries = 4;  // queries per block

template <int kHeads>
__global__ void __launch_bounds__(kScorerThreads)
    logits_kernel(const ScoreInputs in, int32_t chunk_keys, float* logits, int64_t stride) {
  using Scorer = QueryBlockScorer<kHeads, kQueries>;
  __shared__ typename Scorer::Storage storage;
  Scorer scorer(storage, in, static_cast<int>(blockIdx.y) * kQueries);
  scorer.stage();
  const int chunk_begin = static_cast<int>(blockIdx.x) * chunk_keys;
  const int chunk_end = min(chunk_begin + chunk_keys, in.num_keys);
  const float neg_inf = -INFINITY;
  const int queries = min(kQueries, in.num_queries - scorer.t0);
  for (int tile = chunk_begin; tile < chunk_end; tile += kTileKeys) {
    const bool needed = scorer.tile_needed(tile);
    if (needed) scorer.load_tile(tile);
    const int key0 = tile + scorer.warp * 16 + scorer.group;
    const int key1 = key0 + 8;
    for (int qi = 0; qi < queries; ++qi) {
      float score0 = neg_inf;
      float score1 = neg_inf;
      if (needed) scorer.score(qi, &score0, &score1);
      if (scorer.quad_lane == 0) {
        float* row = logits + int64_t{scorer.t0 + qi} * stride;
        if (key0 < chunk_end) row[key0] = needed && scorer.in_range(qi, key0) ? score0 : neg_inf;
        if (key1 < chunk_end) row[key1] = needed && scorer.in_range(qi, key1) ? score1 : neg_inf;
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
  const ScoreInputs in = score_inputs(problem);
  const auto chunk_keys = static_cast<int32_t>(chunk_tiles * kTileKeys);
  const dim3 grid(static_cast<unsigned>((tiles + chunk_tiles - 1) / chunk_tiles),
                  static_cast<unsigned>(query_blocks));
  if (problem.num_heads == 64) {
    logits_kernel<64><<<grid, kScorerThreads, 0, stream>>>(in, chunk_keys, logits, logits_stride);
  } else {
    logits_kernel<32><<<grid, kScorerThreads, 0, stream>>>(in, chunk_keys, logits, logits_stride);
  }
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_indexer
