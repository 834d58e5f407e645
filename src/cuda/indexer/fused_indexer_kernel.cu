// The fused indexer: scores and exact top-k in one kernel, without the [T, S] logits buffer.
//
// Pipeline of fused_indexer_kernel (the scoring core of indexer_wgmma_sm90.cuh, one block per SM,
// query blocks of 4 (H = 64) or 8 (H = 32) queries):
// 1.-3. The core scores every key tile that meets some query of the block's ranges; math
//    warpgroups 0 and 1 take alternate tiles.
// 4. Filter (consume_bank): a score inside the query's range whose composite (score key, key
//    index) beats the query's gate is staged in the warp's shared-memory queue for that query (a
//    ballot and a shared store); a queue holding 32 is flushed to the warpgroup's candidate list
//    for the query in the workspace with one atomic and coalesced stores. When no score of the
//    warp beats the gates, one vote ends it.
// 4b. Hot sample (IndexerState): the block's first tiles are the previous chunk's most chosen
//    positions. After them (end_samples) the k best sample scores of a query, when it has k in its
//    range, bound its k-th best from below: the gate rises to them, and the sample's candidates
//    are dropped (the key tiles score those keys again).
// 5. Every 8 tiles (end_tile) a warpgroup whose list reached its capacity keeps the k best
//    (candidate_list.cuh) and raises the query's gate to what they imply (shared by both
//    warpgroups: k candidates beat anything at or below either gate). Nothing is dropped that can
//    still be in the answer, so the result is exact whatever the capacity.
// 6. Select: at the end of a query block the lists are handed to the side warps (mbarrier), and
//    the math warpgroups go on with the next query block on the other of two list sets. Per
//    query the side warps find the boundary of the k best of the union of its two lists and write
//    those (indices relative to ks, fp32 values), -1 / NaN padded; then they reset the set's
//    counts and gates and release it.
// Auxiliary memory: the workspace of lists, blocks x 2 sets x 2 warpgroups x queries x slots.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "core/hot_sample_layout.h"
#include "core/score_keys.h"
#include "cuda/common/cuda_check.h"
#include "cuda/indexer/candidate_list.cuh"
#include "cuda/indexer/indexer_kernels.h"
#include "cuda/indexer/indexer_wgmma_sm90.cuh"
#include "cuda/select/select_kernels.h"

namespace litetopk::cuda_indexer {
namespace {

using sm90core::CoreArgs;
using sm90core::QueryBlockRanges;

// Each math warp stages its admitted candidates per query in shared memory (no atomics) and
// flushes them to the warpgroup's list once kFlushAt have piled up; a warp adds at most 16 per
// query and tile, so a stage never holds more than kFlushAt + 15 < kStageSlots.
constexpr int kStageSlots = 64;
constexpr uint32_t kFlushAt = 32;
constexpr int kMathWarps = sm90core::kMathThreads / 32;
// The lists are checked against their capacity every kCheckTiles tiles of a warpgroup (a check is
// a warpgroup barrier); in between a list grows by at most 64 candidates per tile plus what its
// four warps had staged before.
constexpr int kCheckTiles = 8;
constexpr int64_t kListSlack = int64_t{kCheckTiles} * sm90core::kTileKeys + 4 * kStageSlots;
constexpr uint64_t kInitialGate = keys::kAdmitAllValid - 1;  // admits every non-NaN score
constexpr int kSets = 2;

struct FusedArgs {
  uint64_t* lists;   // [blocks, kSets, 2 groups, queries, slots]
  int32_t slots;     // capacity + kListSlack
  int32_t capacity;  // a list is reduced to its k best when it reaches this many
  int32_t k;
  int32_t* indices;
  float* values;
  unsigned long long* counters;  // optional [2]: admitted candidates, list reductions
};

template <int kQueries>
struct FusedShared {
  uint32_t counts[kSets][2][kQueries];
  uint64_t gate[kSets][kQueries];
  uint64_t staged[kMathWarps][kQueries][kStageSlots];
  ListScratch scratch[3];  // math warpgroup 0, 1, side warps
  uint64_t set_full[kSets];
  uint64_t set_empty[kSets];

  __device__ void init() {
    for (int s = 0; s < kSets; ++s) {
      for (int qi = 0; qi < kQueries; ++qi) {
        counts[s][0][qi] = counts[s][1][qi] = 0;
        gate[s][qi] = kInitialGate;
      }
      sm90::mbarrier_init(&set_full[s], sm90core::kMathThreads / 32);
      sm90::mbarrier_init(&set_empty[s], 3);
    }
  }
};

template <int kQueries>
struct TopkEpilogue {
  const CoreArgs& args;
  const FusedArgs& fused;
  FusedShared<kQueries>& sh;
  const QueryBlockRanges<kQueries>* ranges = nullptr;
  uint64_t* lists = nullptr;  // this warpgroup's lists of the current set
  int set = 0;
  int group = 0;
  int iteration = 0;
  int tiles_since_check = 0;
  uint32_t staged_count[kQueries];  // this warp's staged candidates per query (warp-uniform)

  __device__ uint64_t* list_of(int s, int g, int qi) const {
    const int64_t list = ((int64_t{blockIdx.x} * kSets + s) * 2 + g) * kQueries + qi;
    return fused.lists + list * fused.slots;
  }

  __device__ ListTeam<4> math_team(int math_thread) const {
    return {sh.scratch[group], static_cast<uint32_t>(2 + group), math_thread % 128};
  }

  __device__ void begin_query_block(int, const QueryBlockRanges<kQueries>& r, int, int g) {
    set = iteration % kSets;
    sm90::mbarrier_wait(&sh.set_empty[set], ((iteration / kSets) & 1) ^ 1);
    ++iteration;
    ranges = &r;
    group = g;
    lists = list_of(set, g, 0);
#pragma unroll
    for (int qi = 0; qi < kQueries; ++qi) staged_count[qi] = 0;
  }

  // Moves this warp's staged candidates of query qi to the end of the warpgroup's list.
  __device__ __forceinline__ void flush(int qi) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const uint64_t* stage = sh.staged[threadIdx.x / 32][qi];
    __syncwarp();  // the lanes' staged stores
    uint32_t base = 0;
    if (lane == 0) {
      base = atomicAdd(&sh.counts[set][group][qi], staged_count[qi]);
      if (fused.counters != nullptr) {
        atomicAdd(&fused.counters[0], static_cast<unsigned long long>(staged_count[qi]));
      }
    }
    base = __shfl_sync(0xffffffffu, base, 0);
    uint64_t* list = lists + qi * fused.slots + base;
    for (uint32_t i = lane; i < staged_count[qi]; i += 32) list[i] = stage[i];
    staged_count[qi] = 0;
    __syncwarp();  // before the stage is written again
  }

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(int first_query, const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries], int key0,
                                               int key1, int quad_lane) {
    const int key = quad_lane == 0 ? key0 : key1;
    uint64_t composite[kBankQueries];
    bool admit[kBankQueries];
    bool any = false;
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      const int qi = first_query + bq;
      const float score = quad_lane == 0 ? scores0[bq] : scores1[bq];
      composite[bq] = keys::make_composite(keys::key_from_f32_bits(__float_as_uint(score), true),
                                           static_cast<uint32_t>(key));
      const uint64_t gate = *reinterpret_cast<volatile uint64_t*>(&sh.gate[set][qi]);
      admit[bq] = quad_lane < 2 && key >= ranges->begin[qi] && key < ranges->end[qi] &&
                  composite[bq] > gate;
      any |= admit[bq];
    }
    if (!__any_sync(0xffffffffu, any)) return;  // the common case once the gates have risen
    uint32_t lanes_below;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lanes_below));
    uint64_t(*stage)[kStageSlots] = sh.staged[threadIdx.x / 32];
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      const int qi = first_query + bq;
      const uint32_t ballot = __ballot_sync(0xffffffffu, admit[bq]);
      if (admit[bq]) stage[qi][staged_count[qi] + __popc(ballot & lanes_below)] = composite[bq];
      staged_count[qi] += __popc(ballot);
    }
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      if (staged_count[first_query + bq] >= kFlushAt) flush(first_query + bq);
    }
  }

  // After the hot sample's tiles: the k best of this warpgroup's sample scores of a query bound its
  // k-th best from below, so the gate rises to them; then the sample's candidates are dropped
  // (the main tiles score the same keys again and admit them if they still beat the gate).
  __device__ void end_samples(int) {
#pragma unroll
    for (int qi = 0; qi < kQueries; ++qi) {
      if (staged_count[qi] > 0) flush(qi);
    }
    const ListTeam<4> team = math_team(static_cast<int>(threadIdx.x));
    team.sync();
    for (int qi = 0; qi < kQueries; ++qi) {
      const uint32_t n = *reinterpret_cast<volatile uint32_t*>(&sh.counts[set][group][qi]);
      if (n >= static_cast<uint32_t>(fused.k)) {
        const uint64_t* list = lists + int64_t{qi} * fused.slots;
        const uint64_t* const both[2] = {list, list};
        const uint32_t counts[2] = {n, 0};
        const auto boundary = team.find_boundary(both, counts, static_cast<uint32_t>(fused.k));
        if (team.thread == 0) {
          atomicMax(reinterpret_cast<unsigned long long*>(&sh.gate[set][qi]),
                    static_cast<unsigned long long>(boundary.gate()));
        }
      }
      team.sync();
      if (team.thread == 0) sh.counts[set][group][qi] = 0;
    }
    team.sync();
  }

  // Every kCheckTiles tiles, a list that reached its capacity keeps its k best; the query's gate
  // rises.
  __device__ void end_tile(int) {
    if (++tiles_since_check < kCheckTiles) return;
    tiles_since_check = 0;
    const ListTeam<4> team = math_team(static_cast<int>(threadIdx.x));
    team.sync();
    for (int qi = 0; qi < kQueries; ++qi) {
      const uint32_t n = *reinterpret_cast<volatile uint32_t*>(&sh.counts[set][group][qi]);
      if (n < static_cast<uint32_t>(fused.capacity)) continue;
      const uint64_t gate = team.keep_best(lists + int64_t{qi} * fused.slots, n,
                                           static_cast<uint32_t>(fused.k));
      if (team.thread == 0) {
        if (fused.counters != nullptr) atomicAdd(&fused.counters[1], 1ull);
        sh.counts[set][group][qi] = static_cast<uint32_t>(fused.k);
        atomicMax(reinterpret_cast<unsigned long long*>(&sh.gate[set][qi]),
                  static_cast<unsigned long long>(gate));
      }
      team.sync();
    }
  }

  // Flushes the stages and hands the set's lists to the side warps.
  __device__ void end_query_block(int, const QueryBlockRanges<kQueries>&, int math_thread, int) {
#pragma unroll
    for (int qi = 0; qi < kQueries; ++qi) {
      if (staged_count[qi] > 0) flush(qi);
    }
    math_team(math_thread).sync();
    if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(&sh.set_full[set]);
  }

  // 6. The side warps: the exact k best of each query of the block.
  __device__ void side_work(int query_block, const QueryBlockRanges<kQueries>& r, int thread,
                            int threads) {
    const int s = iteration % kSets;
    sm90::mbarrier_wait_sleeping(&sh.set_full[s], (iteration / kSets) & 1);
    ++iteration;
    const ListTeam<3> team{sh.scratch[2], 4, thread};
    const auto k = static_cast<uint32_t>(fused.k);
    for (int qi = 0; qi < kQueries; ++qi) {
      const int t = query_block * kQueries + qi;
      if (t >= args.num_queries) break;
      const uint64_t* const lists[2] = {list_of(s, 0, qi), list_of(s, 1, qi)};
      const uint32_t n[2] = {sh.counts[s][0][qi], sh.counts[s][1][qi]};
      int32_t* out_indices = fused.indices + int64_t{t} * fused.k;
      float* out_values = fused.values != nullptr ? fused.values + int64_t{t} * fused.k : nullptr;
      const int32_t begin = r.begin[qi];
      auto write = [&](uint32_t position, uint64_t c) {
        out_indices[position] = keys::composite_index(c) - begin;
        if (out_values != nullptr) {
          out_values[position] =
              __uint_as_float(keys::f32_bits_from_key(keys::composite_key(c), true));
        }
      };
      // Both lists whole when they hold at most k together, else the k best of their union.
      typename ListTeam<3>::Boundary boundary{0, 0};
      if (n[0] + n[1] > k) boundary = team.find_boundary(lists, n, k);
      uint32_t written = team.for_each_kept(lists[0], n[0], boundary, 0, write);
      written = team.for_each_kept(lists[1], n[1], boundary, written, write);
      for (uint32_t i = written + thread; i < k; i += threads) {
        out_indices[i] = -1;
        if (out_values != nullptr) out_values[i] = NAN;
      }
    }
    if (thread < kQueries) {
      sh.counts[s][0][thread] = sh.counts[s][1][thread] = 0;
      sh.gate[s][thread] = kInitialGate;
    }
    team.sync();
    if (thread % 32 == 0) sm90::mbarrier_arrive(&sh.set_empty[s]);
  }
};

template <int kHeads>
__global__ void __launch_bounds__(sm90core::kThreads, 1)
    fused_indexer_kernel(const __grid_constant__ CUtensorMap q_map,
                         const __grid_constant__ CUtensorMap kv_map, const CoreArgs args,
                         const FusedArgs fused) {
  constexpr int kQueries = sm90core::Shape<kHeads>::kQueries;
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& core = *reinterpret_cast<sm90core::CoreStorage<kHeads>*>(shared_raw);
  auto& sh = *reinterpret_cast<FusedShared<kQueries>*>(shared_raw + sizeof(core));
  if (threadIdx.x == 0) sh.init();  // published by the core's barrier-init fence and barrier
  TopkEpilogue<kQueries> epilogue{args, fused, sh};
  sm90core::run_core<kHeads>(&q_map, &kv_map, args, core, epilogue);
}

int64_t lists_per_block(const IndexerProblem& problem) {
  return int64_t{kSets} * 2 * core_queries_per_block(problem);
}

template <int kHeads>
Status launch(const IndexerProblem& problem, const FusedPlan& plan, void* workspace,
              cudaStream_t stream) {
  CoreLaunch core;
  if (Status s = prepare_core_launch(problem, &core); !s) return s;
  if (core.blocks > plan.blocks) core.blocks = plan.blocks;
  core.args.hot = plan.hot;
  core.args.hot_limit = static_cast<int32_t>(hot_sample::capacity(problem.k));
  auto kernel = fused_indexer_kernel<kHeads>;
  const int smem = static_cast<int>(sizeof(sm90core::CoreStorage<kHeads>) +
                                    sizeof(FusedShared<sm90core::Shape<kHeads>::kQueries>));
  LITETOPK_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  FusedArgs fused{static_cast<uint64_t*>(workspace),
                  static_cast<int32_t>(plan.capacity + kListSlack),
                  static_cast<int32_t>(plan.capacity),
                  static_cast<int32_t>(problem.k),
                  problem.indices,
                  problem.values,
                  plan.counters};
  kernel<<<core.blocks, sm90core::kThreads, smem, stream>>>(core.q_map, core.kv_map, core.args,
                                                            fused);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace

Status plan_fused(const IndexerProblem& problem, int64_t requested_capacity, FusedPlan* plan) {
  cuda_select::DeviceShape device{};
  if (Status s = cuda_select::current_device_shape(&device); !s) return s;
  const int64_t query_blocks = core_query_blocks(problem);
  plan->blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(query_blocks, device.sm_count)));
  const int64_t lists = plan->blocks * lists_per_block(problem);
  // Two k's are the least a list needs (the merge appends one list's k best to the other's);
  // the default aims at 4k within 2% of the [T, S] fp32 logits, and never below 2k.
  const int64_t least = 2 * problem.k;
  int64_t capacity = requested_capacity;
  if (capacity == 0) {
    const double budget = 0.02 * static_cast<double>(problem.num_queries) *
                          static_cast<double>(problem.num_keys) * sizeof(float);
    const auto fitting = static_cast<int64_t>(budget / (static_cast<double>(lists) * 8)) - kListSlack;
    capacity = std::min<int64_t>(4 * problem.k, fitting) / 64 * 64;
  }
  plan->capacity = std::max(capacity, least);
  plan->workspace_bytes =
      static_cast<std::size_t>(lists * (plan->capacity + kListSlack)) * sizeof(uint64_t);
  return Status::ok();
}

Status launch_fused(const IndexerProblem& problem, const FusedPlan& plan, void* workspace,
                    cudaStream_t stream) {
  if (problem.num_queries == 0) return Status::ok();
  if (problem.num_keys == 0) {
    // Every range is empty: -1 indices and NaN values (all bits set is both).
    const auto bytes = static_cast<std::size_t>(problem.num_queries * problem.k) * 4;
    LITETOPK_CUDA_TRY(cudaMemsetAsync(problem.indices, 0xff, bytes, stream));
    if (problem.values != nullptr) {
      LITETOPK_CUDA_TRY(cudaMemsetAsync(problem.values, 0xff, bytes, stream));
    }
    return Status::ok();
  }
  return problem.num_heads == 64 ? launch<64>(problem, plan, workspace, stream)
                                 : launch<32>(problem, plan, workspace, stream);
}

}  // namespace litetopk::cuda_indexer
