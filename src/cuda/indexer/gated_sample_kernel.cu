// The gated fused indexer's gate: each query's threshold from its cold sample.
//
// Pipeline:
// 1. sample_scores_kernel (the scoring core of indexer_wgmma_sm90.cuh, four math warpgroups, one
//    block per SM): per query block, only the cold sample's key tiles (formats/tile_order.h: c
//    tiles evenly strided over the union of the block's ranges); quad lanes 0 and 1 write the
//    scores of rows key0 and key1 into the query's sample row, NaN outside its range.
// 2. sample_gate_kernel (a block per query): a 4 x 8-bit radix descent over the sample row's
//    score keys finds its r-th best, r = the speculative rank (speculative_rank.cuh) when the
//    range spans at least 4k keys and 2r <= k, else k. The r-th best is a guess of a lower bound
//    of the query's k-th best, checked after the selection (gated_finalize_kernel.cu); the k-th
//    best is a true lower bound (the sample is a subset of the row). Fewer valid sample scores
//    than that rank: the gate is -inf (every non-NaN score is admitted).
// The sample's keys are scored again with the others by gated_indexer_kernel.cu, which fills the
// candidate lists.
#include <cuda_runtime_api.h>

#include <cmath>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/common/warp_scan.cuh"
#include "cuda/indexer/gated_indexer_kernels.h"
#include "cuda/indexer/indexer_wgmma_sm90.cuh"
#include "cuda/indexer/speculative_rank.cuh"
#include "formats/score_keys.h"
#include "formats/tile_order.h"

namespace litetopk::cuda_indexer {
namespace {

using sm90core::CoreArgs;
using sm90core::kTileKeys;
using sm90core::QueryBlockRanges;
using SampleRoles = sm90core::Roles<4>;

// 1. Scores of the sample tiles into the sample rows.
template <int kQueries>
struct SampleEpilogue {
  static constexpr bool kTileOrder = true;
  const CoreArgs& args;
  SampleScores sample;
  const QueryBlockRanges<kQueries>* ranges = nullptr;
  int t0 = 0;
  uint32_t walk_base = 0;  // the iteration of the query block's first tile
  uint32_t walked = 0;

  __device__ void begin_query_block(int query_block, const QueryBlockRanges<kQueries>& r) {
    ranges = &r;
    t0 = query_block * kQueries;
    walk_base = walked;
    walked += static_cast<uint32_t>(r.walk_tiles);
  }

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(uint32_t iter, int row0, int first_query,
                                               const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries], int key0,
                                               int key1, int quad_lane, bool) {
    if (quad_lane > 1) return;
    const int key = quad_lane == 0 ? key0 : key1;
    const int64_t column = int64_t{iter - walk_base} * kTileKeys + row0 + 8 * quad_lane;
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      const int qi = first_query + bq;
      if (t0 + qi >= args.num_queries) return;
      const bool inside = key >= ranges->begin[qi] && key < ranges->end[qi];
      const float score = quad_lane == 0 ? scores0[bq] : scores1[bq];
      sample.scores[int64_t{t0 + qi} * sample.stride + column] = inside ? score : NAN;
    }
  }

  __device__ void end_tile(uint32_t) {}
  __device__ void refill_slot(int, int, int, int) {}
  __device__ void side_work(int, const QueryBlockRanges<kQueries>&, int, int) {}
};

template <int kHeads>
__global__ void __launch_bounds__(SampleRoles::kThreads, 1)
    sample_scores_kernel(const __grid_constant__ CUtensorMap q_map,
                         const __grid_constant__ CUtensorMap kv_map, const CoreArgs args,
                         const SampleScores sample) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& storage = *reinterpret_cast<sm90core::CoreStorage<kHeads>*>(shared_raw);
  SampleEpilogue<sm90core::Shape<kHeads>::kQueries> epilogue{args, sample};
  sm90core::run_core<kHeads, SampleRoles::kMathGroups>(&q_map, &kv_map, args, storage, epilogue);
}

constexpr int kGateThreads = 256;
constexpr int kDigitBits = 8;
constexpr int kDigits = 1 << kDigitBits;

struct GateArgs {
  const int32_t* ks;
  const int32_t* ke;
  int32_t num_queries;
  int32_t num_keys;
  int32_t k;
  int32_t cold_sample_tiles;
  int32_t queries_per_block;
};

__device__ __forceinline__ void clamp_range(const GateArgs& a, int t, int32_t* b, int32_t* e) {
  *b = min(max(a.ks[t], 0), a.num_keys);
  *e = max(*b, min(max(a.ke[t], 0), a.num_keys));
}

// 2.-3. One block per query.
__global__ void __launch_bounds__(kGateThreads)
    sample_gate_kernel(const GateArgs a, const SampleScores sample, const GatedLists lists) {
  __shared__ uint32_t histogram[kDigits];
  __shared__ uint32_t found_prefix;
  __shared__ uint32_t found_need;
  const int t = static_cast<int>(blockIdx.x);
  const int thread = static_cast<int>(threadIdx.x);
  // The query block's tiles and order, as the scoring core computes them.
  const int t0 = t / a.queries_per_block * a.queries_per_block;
  int32_t union_begin = INT32_MAX;
  int32_t union_end = 0;
  for (int qt = t0; qt < min(t0 + a.queries_per_block, a.num_queries); ++qt) {
    int32_t b, e;
    clamp_range(a, qt, &b, &e);
    if (b < e) {
      union_begin = min(union_begin, b);
      union_end = max(union_end, e);
    }
  }
  int32_t begin, end;
  clamp_range(a, t, &begin, &end);
  int cold = 0;
  int tiles = 0;
  int32_t first_key = 0;
  tile_order::TileOrder order;
  if (union_begin < union_end) {
    first_key = union_begin / 16 * 16;
    tiles = (union_end - first_key + kTileKeys - 1) / kTileKeys;
    order = tile_order::make_tile_order(tiles, a.cold_sample_tiles);
    cold = order.cold_tiles;
  }
  const int n = cold * kTileKeys;
  const float* row = sample.scores + int64_t{t} * sample.stride;
  auto key_at = [&](int i) {
    return keys::key_from_f32_bits(__float_as_uint(row[i]), true);
  };
  // The speculative rank, or k (a true lower bound), or none.
  const uint32_t rank = cold > 0 ? speculative_rank(cold, tiles, a.k) : 0;
  const bool speculate = int64_t{end - begin} >= 4 * int64_t{a.k} &&
                         2 * rank <= static_cast<uint32_t>(a.k);
  uint32_t prefix = 0;
  uint32_t need = 0;
  for (int pass = 0; pass < 4 && n > 0; ++pass) {
    const int shift = 32 - kDigitBits * (pass + 1);
    for (int i = thread; i < kDigits; i += kGateThreads) histogram[i] = 0;
    __syncthreads();
    for (int i = thread; i < n; i += kGateThreads) {
      const uint32_t key = key_at(i);
      if (key != 0 && (pass == 0 || (key >> (shift + kDigitBits)) == prefix)) {
        atomicAdd(&histogram[(key >> shift) & (kDigits - 1)], 1u);
      }
    }
    __syncthreads();
    if (thread < 32) {
      // Lane l holds the 8 digits below 256 - 8 l, from the top.
      const int lane = thread;
      const int top = kDigits - 1 - lane * (kDigits / 32);
      uint32_t lane_total = 0;
      for (int j = 0; j < kDigits / 32; ++j) lane_total += histogram[top - j];
      const uint32_t inclusive = cuda_common::warp_inclusive_sum(lane_total, lane);
      uint32_t target = need;
      if (pass == 0) {
        // The valid sample scores decide the rank.
        const uint32_t valid = __shfl_sync(0xffffffffu, inclusive, 31);
        target = speculate && valid >= rank                     ? rank
                 : valid >= static_cast<uint32_t>(a.k)          ? static_cast<uint32_t>(a.k)
                                                                 : 0;
      }
      if (lane == 0) {
        found_need = target;
        found_prefix = 0;
      }
      __syncwarp();
      uint32_t before = inclusive - lane_total;
      if (target > 0 && before < target && target <= inclusive) {
        for (int j = 0; j < kDigits / 32; ++j) {
          const uint32_t count = histogram[top - j];
          if (before + count >= target) {
            found_prefix = (prefix << kDigitBits) | static_cast<uint32_t>(top - j);
            found_need = target - before;
            break;
          }
          before += count;
        }
      }
    }
    __syncthreads();
    need = found_need;
    prefix = found_prefix;
    __syncthreads();
    if (need == 0) break;
  }
  // need > 0 after 4 passes: prefix is the rank's key.
  const float gate = need > 0 ? __uint_as_float(keys::f32_bits_from_key(prefix, true)) : -INFINITY;
  if (thread == 0) lists.gates[t] = gate;
}

template <int kHeads>
Status launch_scores(const IndexerProblem& problem, const GatedPlan& plan,
                     const SampleScores& sample, cudaStream_t stream) {
  CoreLaunch core;
  if (Status s = prepare_core_launch(problem, &core); !s) return s;
  core.args.cold_sample_tiles = plan.cold_sample_tiles;
  core.args.walk = sm90core::kWalkColdSample;
  auto kernel = sample_scores_kernel<kHeads>;
  const int smem = static_cast<int>(sizeof(sm90core::CoreStorage<kHeads>));
  if (Status s =
          cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem);
      !s) {
    return s;
  }
  kernel<<<core.blocks, SampleRoles::kThreads, smem, stream>>>(core.q_map, core.kv_map, core.args,
                                                             sample);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace

Status launch_sample_scores(const IndexerProblem& problem, const GatedPlan& plan,
                            const SampleScores& sample, cudaStream_t stream) {
  return problem.num_heads == 64 ? launch_scores<64>(problem, plan, sample, stream)
                                 : launch_scores<32>(problem, plan, sample, stream);
}

Status launch_sample_gates(const IndexerProblem& problem, const GatedPlan& plan,
                           const SampleScores& sample, const GatedLists& lists,
                           cudaStream_t stream) {
  const GateArgs a{problem.ks,
                   problem.ke,
                   static_cast<int32_t>(problem.num_queries),
                   static_cast<int32_t>(problem.num_keys),
                   static_cast<int32_t>(problem.k),
                   plan.cold_sample_tiles,
                   core_queries_per_block(problem)};
  sample_gate_kernel<<<static_cast<unsigned>(problem.num_queries), kGateThreads, 0, stream>>>(
      a, sample, lists);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_indexer
