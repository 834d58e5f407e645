// The gated decode path's scoring: the paged logits kernel's core with a gate in its epilogue
// instead of the [rows, max_context] store. Each row's bound comes from the bound kernel (the
// previous step's top-k re-scored: a lower bound of the row's k-th best once k distinct
// positions counted, else -inf), so every score the row's top-k can hold passes the gate; the
// candidate buffer has room for every visible token, so none is ever dropped.
//
// Pipeline of decode_gated_kernel (grid: splits x B; block (x, b) takes tiles
// [x * tiles_per_split, + tiles_per_split) of request b; a dependent launch of the bound kernel):
// 1.-3. paged_scoring_sm90.cuh scores the block's tiles that some query of the request sees (the
//    producer starts while the bound kernel runs).
// 4. Before scoring the math warps wait for the bound kernel and combine its partials into each
//    row's bound (lanes in parallel, then shuffles).
// 5. Epilogue per query: quad lanes 0 and 1 hold tokens row0 and row0 + 8; a visible score of a
//    block inside the cache at or above the bound (never NaN) is appended to the block's region
//    of the row's candidates (score and position): one shared-memory atomic add per warp for its
//    survivors (no global atomic waits in the math warps).
// 6. After scoring, the block writes its regions' counts.
#include <cuda_runtime_api.h>

#include <cmath>

#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/decode_state_kernels.h"
#include "cuda/indexer/paged_radix_select.cuh"
#include "cuda/indexer/paged_scoring_sm90.cuh"

namespace litetopk::cuda_indexer {
namespace {

using paged::PagedArgs;

constexpr int kMaxNextN = 4;
template <int kHeads, int kColumns>
using GatedStorage = paged::PagedScoringStorage<kHeads, kColumns, kLogitsStages<kColumns>>;

struct GatedParams {
  const uint32_t* partial_keys;
  const uint32_t* partial_counts;
  int32_t bound_splits;
  int32_t k;
  uint32_t* counts;
  float* candidate_scores;
  int32_t* candidate_positions;
  int32_t splits;
  int32_t span;
};

struct GateEpilogue {
  const PagedArgs& args;
  const GatedParams& params;
  uint32_t* block_counts;  // shared: the block's candidates per query
  int b;
  float bound[kMaxNextN];
  int32_t visible[kMaxNextN];

  // 4. Warp-wide (every math warp): lane x combines partials x, x + 32, ...
  __device__ __forceinline__ void prepare(int lane) {
    sm90::wait_for_prerequisite_grids();
#pragma unroll
    for (int j = 0; j < kMaxNextN; ++j) {
      bound[j] = -INFINITY;
      visible[j] = 0;
      if (j >= args.next_n) continue;
      visible[j] = paged::visible_tokens(args, b, j);
      const int64_t at = (int64_t{b} * args.next_n + j) * params.bound_splits;
      uint32_t min_key = 0xffffffffu;
      uint32_t count = 0;
      for (int x = lane; x < params.bound_splits; x += 32) {
        min_key = min(min_key, __ldcg(params.partial_keys + at + x));
        count += __ldcg(params.partial_counts + at + x);
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        min_key = min(min_key, __shfl_xor_sync(0xffffffffu, min_key, offset));
        count += __shfl_xor_sync(0xffffffffu, count, offset);
      }
      if (count >= static_cast<uint32_t>(params.k)) bound[j] = radix::key_score(min_key);
    }
  }

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(int tile, int row0, int first_query,
                                               const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries],
                                               bool in_cache, int quad_lane) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int32_t token = tile * paged::kTileKeys + row0 + 8 * (quad_lane & 1);
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      const int j = first_query + bq;
      if (j >= args.next_n) return;
      const float score = quad_lane == 0 ? scores0[bq] : scores1[bq];
      float gate = bound[0];
      int32_t seen = visible[0];
#pragma unroll
      for (int jj = 1; jj < kMaxNextN; ++jj) {
        if (jj == j) {
          gate = bound[jj];
          seen = visible[jj];
        }
      }
      const bool pass = quad_lane < 2 && in_cache && token < seen && score >= gate;
      const unsigned survivors = __ballot_sync(0xffffffffu, pass);
      if (survivors == 0) continue;
      const int row = b * args.next_n + j;
      uint32_t base = 0;
      if (lane == __ffs(survivors) - 1) base = atomicAdd(block_counts + j, __popc(survivors));
      base = __shfl_sync(0xffffffffu, base, __ffs(survivors) - 1);
      if (pass) {
        const uint32_t slot = base + __popc(survivors & ((1u << lane) - 1));
        const int64_t at = (int64_t{row} * params.splits + blockIdx.x) * params.span + slot;
        params.candidate_scores[at] = score;
        params.candidate_positions[at] = token;
      }
    }
  }
};

template <int kHeads, int kColumns>
__global__ void __launch_bounds__(paged::kThreads, kLogitsBlocksPerSm<kColumns>)
    decode_gated_kernel(const __grid_constant__ CUtensorMap q_map,
                        const __grid_constant__ CUtensorMap kv_map, const PagedArgs args,
                        const GatedParams params) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& storage = *reinterpret_cast<GatedStorage<kHeads, kColumns>*>(shared_raw);
  auto* block_counts =
      reinterpret_cast<uint32_t*>(shared_raw + sizeof(GatedStorage<kHeads, kColumns>));
  sm90::allow_dependent_grids();
  const int b = static_cast<int>(blockIdx.y);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) paged::init_scoring(storage);
  if (tid < kMaxNextN) block_counts[tid] = 0;
  __syncthreads();
  const paged::TileRange range = paged::tile_range(args, b);
  GateEpilogue epilogue{args, params, block_counts, b, {}, {}};
  // The math warps wait for the bound kernel here (every block, so that none ends before it);
  // the producer warp starts loading meanwhile.
  if (static_cast<int>(threadIdx.x) < paged::kMathThreads) {
    epilogue.prepare(static_cast<int>(threadIdx.x) % 32);
  }
  paged::run_scoring<kHeads, kColumns, kLogitsStages<kColumns>>(&q_map, &kv_map, args, storage, b,
                                                               range, epilogue);
  // 6.
  __syncthreads();
  if (tid < args.next_n) {
    params.counts[(int64_t{b} * args.next_n + tid) * params.splits + blockIdx.x] = block_counts[tid];
  }
}

// The scoring storage, then the block's per-query candidate counts.
template <int kHeads, int kColumns>
int gated_smem() {
  return static_cast<int>(sizeof(GatedStorage<kHeads, kColumns>) + kMaxNextN * sizeof(uint32_t));
}

}  // namespace

Status launch_decode_gated(const PagedLaunch& launch, const PagedIndexerProblem& problem,
                           const DecodeBuffers& buffers, cudaStream_t stream) {
  if (launch.batch == 0 || launch.splits == 0) return Status::ok();
  return dispatch_paged_shape(launch.heads, launch.columns, [&](auto heads, auto columns) {
    constexpr int kHeads = decltype(heads)::value;
    constexpr int kColumns = decltype(columns)::value;
    const void* kernel = reinterpret_cast<const void*>(decode_gated_kernel<kHeads, kColumns>);
    const int smem = gated_smem<kHeads, kColumns>();
    if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
    GatedParams params{buffers.partial_keys,
                       buffers.partial_counts,
                       buffers.bound_splits,
                       static_cast<int32_t>(problem.k),
                       buffers.counts,
                       buffers.candidate_scores,
                       buffers.candidate_positions,
                       buffers.splits,
                       buffers.span};
    void* kernel_args[] = {const_cast<CUtensorMap*>(&launch.q_map),
                           const_cast<CUtensorMap*>(&launch.kv_map),
                           const_cast<paged::PagedArgs*>(&launch.args), &params};
    return cuda_common::launch_dependent(kernel, dim3(launch.splits, launch.batch),
                                         paged::kThreads, smem, /*dependent=*/true, stream,
                                         kernel_args);
  });
}

Status decode_gated_resident_blocks(const PagedIndexerProblem& problem, int* blocks) {
  return dispatch_paged_shape(static_cast<int>(problem.num_heads), paged_columns(problem),
                              [&](auto heads, auto columns) {
    constexpr int kHeads = decltype(heads)::value;
    constexpr int kColumns = decltype(columns)::value;
    const void* kernel = reinterpret_cast<const void*>(decode_gated_kernel<kHeads, kColumns>);
    const int smem = gated_smem<kHeads, kColumns>();
    if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
    return cuda_common::resident_blocks(kernel, paged::kThreads, smem, blocks);
  });
}

}  // namespace litetopk::cuda_indexer
