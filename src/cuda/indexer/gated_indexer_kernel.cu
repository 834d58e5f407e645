// The gated fused indexer's scoring: the four-warpgroup core with the top-k gate in the math
// warpgroups' epilogue (the producer warpgroup's three side warps have nothing to do).
//
// Pipeline of gated_indexer_kernel (the scoring core of indexer_wgmma_sm90.cuh, four math
// warpgroups in two pairs, one block per SM, query blocks of 4 (H = 64) or 8 (H = 32) queries):
// 1.-3. The core scores every key tile of the block's ranges in key order, the same loop as the
//    logits kernel (the cold sample's tiles again: their scores only set the gates).
// 4. Gate, per bank: quad lane l takes the score of row parity l % 2 and query parity l / 2, so
//    that one ballot covers the warp's 16 keys x 2 queries; a score is admitted when it lies in
//    its query's range and reaches the query's gate (a NaN never does). The gates stay fixed
//    while the block is scored: nothing to wait for, nothing to refresh.
// 5. Append, only when the ballot is not empty: per query, the lowest admitted lane reserves the
//    warp's slots with one shared atomic on the query's count, and each admitted lane writes its
//    (score, key) at its rank among them; slots past the list's capacity are not written, but
//    counted (the row has overflowed and is re-run exactly).
// 6. Once the math warps are done with a query block, the producer warp writes the block's
//    counts to the workspace, beside staging the gates of the next query block of the same q slot
//    (Epilogue::refill_slot): the math warps keep no list state across query blocks.
#include <cuda_runtime_api.h>

#include <cmath>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/gated_indexer_kernels.h"
#include "cuda/indexer/indexer_wgmma_sm90.cuh"

namespace litetopk::cuda_indexer {
namespace {

using sm90core::CoreArgs;
using sm90core::kQStages;
using sm90core::QueryBlockRanges;
using GatedRoles = sm90core::Roles<4>;

template <int kQueries>
struct GatedShared {
  uint32_t count[kQStages][kQueries];  // the lists' lengths of the slot's query block
  float gate[kQStages][kQueries];
};

template <int kQueries>
struct GatedEpilogue {
  static constexpr bool kTileOrder = false;
  // References to the kernel's parameters (read from the constant bank where used, so that they
  // take no registers in the tile loop).
  const CoreArgs& args;
  const GatedLists& lists;
  unsigned long long* const& counters;
  GatedShared<kQueries>& sh;
  const QueryBlockRanges<kQueries>* ranges = nullptr;
  int t0 = 0;
  int slot = 0;
  int it = 0;

  // Run by the producer warp once q slot `s` is free: lane q writes query q's list length of the
  // query block done with the slot, and stages the gate of the one about to use it.
  __device__ void refill_slot(int s, int done_block, int next_block, int lane) {
    if (done_block >= 0) {
      const int t = done_block * kQueries + lane;
      const bool real = lane < kQueries && t < args.num_queries;
      const uint32_t count = real ? sh.count[s][lane] : 0u;
      if (real) lists.counts[t] = static_cast<int32_t>(count);
      const uint32_t admitted = __reduce_add_sync(0xffffffffu, count);
      if (counters != nullptr && lane == 0) atomicAdd(&counters[0], uint64_t{admitted});
    }
    if (next_block >= 0 && lane < kQueries) {
      const int t = next_block * kQueries + lane;
      sh.gate[s][lane] = t < args.num_queries ? lists.gates[t] : INFINITY;
      sh.count[s][lane] = 0;
    }
  }

  __device__ void begin_query_block(int query_block, const QueryBlockRanges<kQueries>& r) {
    ranges = &r;
    t0 = query_block * kQueries;
    slot = it % kQStages;
    ++it;
  }

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(uint32_t, int, int first_query,
                                               const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries], int key0,
                                               int key1, int quad_lane, bool inside_all) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int key = quad_lane % 2 == 0 ? key0 : key1;
#pragma unroll
    for (int j = 0; j < kBankQueries / 2; ++j) {
      // Static indices into the sums (a computed one would put them in local memory).
      const float row_even = quad_lane / 2 == 0 ? scores0[2 * j] : scores0[2 * j + 1];
      const float row_odd = quad_lane / 2 == 0 ? scores1[2 * j] : scores1[2 * j + 1];
      const float score = quad_lane % 2 == 0 ? row_even : row_odd;
      const int qi = first_query + 2 * j + quad_lane / 2;
      const bool inside =
          inside_all || (key >= ranges->begin[qi] && key < ranges->end[qi]);
      const uint32_t admitted = __ballot_sync(0xffffffffu, inside && score >= sh.gate[slot][qi]);
      if (admitted == 0) continue;
      // 5. Lanes of query parity h: 0x33333333 (h = 0) or 0xcccccccc (h = 1).
      const uint32_t mine = admitted & (quad_lane / 2 == 0 ? 0x33333333u : 0xccccccccu);
      uint32_t lanes_below;
      asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lanes_below));
      const int leader = __ffs(mine) - 1;  // -1 for a lane of a query with nothing admitted
      uint32_t base = 0;
      if (lane == leader) {
        base = atomicAdd(&sh.count[slot][qi], static_cast<uint32_t>(__popc(mine)));
      }
      base = __shfl_sync(0xffffffffu, base, leader < 0 ? 0 : leader);
      if ((mine >> lane) & 1u) {
        const uint32_t position = base + static_cast<uint32_t>(__popc(mine & lanes_below));
        if (position < static_cast<uint32_t>(lists.capacity)) {
          const int64_t at = int64_t{t0 + qi} * lists.capacity + position;
          lists.scores[at] = score;
          lists.keys[at] = key;
        }
      }
    }
  }

  __device__ void end_tile(uint32_t) {}

  __device__ void side_work(int, const QueryBlockRanges<kQueries>&, int, int) {}
};

template <int kHeads>
__global__ void __launch_bounds__(GatedRoles::kThreads, 1)
    gated_indexer_kernel(const __grid_constant__ CUtensorMap q_map,
                         const __grid_constant__ CUtensorMap kv_map, const CoreArgs args,
                         const GatedLists lists, unsigned long long* counters) {
  constexpr int kQueries = sm90core::Shape<kHeads>::kQueries;
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& core = *reinterpret_cast<sm90core::CoreStorage<kHeads>*>(shared_raw);
  auto& sh = *reinterpret_cast<GatedShared<kQueries>*>(shared_raw + sizeof(core));
  GatedEpilogue<kQueries> epilogue{args, lists, counters, sh};
  sm90core::run_core<kHeads, GatedRoles::kMathGroups>(&q_map, &kv_map, args, core, epilogue);
}

template <int kHeads>
Status launch(const IndexerProblem& problem, const GatedLists& lists,
              unsigned long long* counters, cudaStream_t stream) {
  CoreLaunch core;
  if (Status s = prepare_core_launch(problem, &core); !s) return s;
  auto kernel = gated_indexer_kernel<kHeads>;
  const int smem = static_cast<int>(sizeof(sm90core::CoreStorage<kHeads>) +
                                    sizeof(GatedShared<sm90core::Shape<kHeads>::kQueries>));
  if (Status s =
          cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem);
      !s) {
    return s;
  }
  kernel<<<core.blocks, GatedRoles::kThreads, smem, stream>>>(core.q_map, core.kv_map, core.args,
                                                             lists, counters);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace

Status launch_gated_scores(const IndexerProblem& problem, const GatedLists& lists,
                           unsigned long long* counters, cudaStream_t stream) {
  return problem.num_heads == 64 ? launch<64>(problem, lists, counters, stream)
                                 : launch<32>(problem, lists, counters, stream);
}

}  // namespace litetopk::cuda_indexer
