// The DSA lightning-indexer logits, fp8 e4m3 on Hopper tensor cores:
//   logits[t, s] = kv_scale[s] * sum_h weights[t, h] * relu(dot(q[t, h], kv[s]))  in [ks, ke)
// and -inf elsewhere. The unfused baseline: this kernel, then select_topk over the rows.
//
// Pipeline of logits_kernel (the scoring core of indexer_wgmma_sm90.cuh with four math warpgroups,
// one block per SM):
// 1.-3. The core scores every key tile that meets some query of the block's ranges.
// 4. Epilogue: quad lane 0 writes key0 and quad lane 1 writes key1 of each query row (a warp's
//    eight rows make 32-byte segments), -inf outside the query's own range; a tile inside every
//    query's range is stored without comparisons.
// 5. The side warps write -inf over the keys the tiles do not cover, for every row of the block.
#include <cuda_runtime_api.h>

#include <cmath>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/indexer_kernels.h"
#include "cuda/indexer/indexer_wgmma_sm90.cuh"

namespace litetopk::cuda_indexer {
namespace {

using sm90core::CoreArgs;
using sm90core::kTileKeys;
using sm90core::QueryBlockRanges;

template <int kQueries>
struct LogitsEpilogue {
  static constexpr bool kTileOrder = false;
  const CoreArgs& args;
  float* logits;
  int64_t stride;
  const QueryBlockRanges<kQueries>* ranges = nullptr;
  int t0 = 0;
  float* block_rows = nullptr;  // row t0

  __device__ void begin_query_block(int query_block, const QueryBlockRanges<kQueries>& r) {
    ranges = &r;
    t0 = query_block * kQueries;
    block_rows = logits + int64_t{t0} * stride;
  }

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(uint32_t, int, int first_query,
                                               const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries], int key0,
                                               int key1, int quad_lane, bool inside_all) {
    const int key = quad_lane == 0 ? key0 : key1;
    if (quad_lane > 1) return;
    float* column = block_rows + key;
    if (inside_all) {
#pragma unroll
      for (int bq = 0; bq < kBankQueries; ++bq) {
        column[(first_query + bq) * stride] = quad_lane == 0 ? scores0[bq] : scores1[bq];
      }
      return;
    }
    if (key >= args.num_keys) return;
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      const int qi = first_query + bq;
      if (t0 + qi >= args.num_queries) return;
      const bool inside = key >= ranges->begin[qi] && key < ranges->end[qi];
      column[qi * stride] = inside ? (quad_lane == 0 ? scores0[bq] : scores1[bq]) : -INFINITY;
    }
  }

  __device__ void end_tile(uint32_t) {}
  __device__ void refill_slot(int, int, int, int) {}

  // -inf over [0, first_key) and [first_key + 64 tiles, S) of every row of the block.
  __device__ void side_work(int query_block, const QueryBlockRanges<kQueries>& r, int thread,
                            int threads) {
    const int covered_end = min(args.num_keys, r.first_key + r.num_tiles * kTileKeys);
    const int covered_begin = r.num_tiles > 0 ? r.first_key : covered_end;
    const int outside = covered_begin + (args.num_keys - covered_end);
    for (int qi = 0; qi < kQueries; ++qi) {
      const int t = query_block * kQueries + qi;
      if (t >= args.num_queries) break;
      float* row = logits + int64_t{t} * stride;
      for (int i = thread; i < outside; i += threads) {
        row[i < covered_begin ? i : covered_end + (i - covered_begin)] = -INFINITY;
      }
    }
  }
};

// Four math warpgroups (sm90core::Roles<4>): twice the warps of the fused kernel's two to hide the
// wgmma latency; the side warps only write -inf, so the producer warpgroup gives up its registers.
using LogitsRoles = sm90core::Roles<4>;

template <int kHeads>
__global__ void __launch_bounds__(LogitsRoles::kThreads, 1)
    logits_kernel(const __grid_constant__ CUtensorMap q_map,
                  const __grid_constant__ CUtensorMap kv_map, const CoreArgs args, float* logits,
                  int64_t stride) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& storage = *reinterpret_cast<sm90core::CoreStorage<kHeads>*>(shared_raw);
  LogitsEpilogue<sm90core::Shape<kHeads>::kQueries> epilogue{args, logits, stride};
  sm90core::run_core<kHeads, LogitsRoles::kMathGroups>(&q_map, &kv_map, args, storage, epilogue);
}

template <int kHeads>
Status launch(const IndexerProblem& problem, float* logits, int64_t stride, cudaStream_t stream) {
  CoreLaunch core;
  if (Status s = prepare_core_launch(problem, &core); !s) return s;
  auto kernel = logits_kernel<kHeads>;
  const int smem = static_cast<int>(sizeof(sm90core::CoreStorage<kHeads>));
  if (Status s = cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem);
      !s) {
    return s;
  }
  kernel<<<core.blocks, LogitsRoles::kThreads, smem, stream>>>(core.q_map, core.kv_map, core.args,
                                                            logits, stride);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace

Status launch_logits(const IndexerProblem& problem, float* logits, int64_t logits_stride,
                     cudaStream_t stream) {
  if (problem.num_queries == 0 || problem.num_keys == 0) return Status::ok();
  return problem.num_heads == 64 ? launch<64>(problem, logits, logits_stride, stream)
                                 : launch<32>(problem, logits, logits_stride, stream);
}

}  // namespace litetopk::cuda_indexer
