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
// 4c. Cold sample (speculative gate): the block's first key tiles are 8 to 512 evenly strided
//    over the range (cold_sample_tiles). After them (end_cold_sample) a warpgroup sets each query's
//    speculative gate to its r-th best sample score, r a few standard deviations above the number
//    of the query's k best that its share of the sample is expected to hold, so that the k best
//    very likely beat it; these tiles are not scored again, so their candidates stay.
// 5. Every 8 tiles (end_tile) a warpgroup whose list reached its capacity keeps the k best
//    (candidate_list.cuh) and raises the query's gate to what they imply (shared by both
//    warpgroups: k candidates beat anything at or below either gate). Nothing is dropped that can
//    still be in the answer, so the result is exact whatever the capacity.
// 6. Select: at the end of a query block the lists are handed to the side warps (mbarrier), and
//    the math warpgroups go on with the next query block on the other of two list sets. Per
//    query the side warps find the boundary of the k best of the union of its two lists and write
//    those (indices relative to ks, fp32 values), -1 / NaN padded; then they reset the set's
//    counts and gates and release it. A query with a speculative gate is checked: its result is
//    exact when at least k candidates beat that gate (then no key it turned away can be among the
//    k best); when fewer do, the query block goes on the retry list.
// 7. Retry: a second launch re-runs the listed query blocks without a cold sample (exact
//    always); when the list is empty its blocks return at once.
// Auxiliary memory: the workspace of lists, blocks x 2 sets x 2 warpgroups x queries x slots, and
// the retry list.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

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
  // Optional [3]: admitted candidates, list reductions, query blocks put on the retry list.
  unsigned long long* counters;
  int32_t* retry;  // the retry list (sm90core::CoreArgs::block_list); null on the retry launch
};

// The speculative gate's sample rank for a warpgroup that scored `cold` of the `tiles` key tiles:
// its share of a query's k best is about binomial with mean mu = cold k / tiles, and the sample's
// r-th best with r = mu + 3 sqrt(mu) + 2 lies below the query's k-th best but with a
// probability of about 1e-3. The speculative gate is the lower of the two warpgroups' (each from
// its half of the sample), so a query fails only when both do: about 1e-6.
__device__ __forceinline__ uint32_t speculative_rank(int cold, int tiles, int32_t k) {
  const float mu = static_cast<float>(cold) * static_cast<float>(k) / static_cast<float>(tiles);
  return static_cast<uint32_t>(ceilf(mu + 3.0f * sqrtf(mu))) + 2;
}

template <int kQueries>
struct FusedShared {
  uint32_t counts[kSets][2][kQueries];
  uint64_t gate[kSets][kQueries];
  uint64_t speculative[kSets][kQueries];  // 0: none
  // Each warpgroup's speculative gate of a query (0: none) and how many have been posted.
  uint64_t speculative_part[kSets][2][kQueries];
  uint32_t speculative_posted[kSets][kQueries];
  uint64_t staged[kMathWarps][kQueries][kStageSlots];
  ListScratch scratch[3];  // math warpgroup 0, 1, side warps
  uint64_t set_full[kSets];
  uint64_t set_empty[kSets];

  __device__ void init() {
    for (int s = 0; s < kSets; ++s) {
      for (int qi = 0; qi < kQueries; ++qi) {
        counts[s][0][qi] = counts[s][1][qi] = 0;
        gate[s][qi] = kInitialGate;
        speculative[s][qi] = 0;
        speculative_posted[s][qi] = 0;
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
  // The lowest of the block's gates as a score, refreshed every kCheckTiles tiles: a score below
  // it beats no gate (a stale one is lower, so it only lets more through to the exact check).
  // One register: the math warpgroups have none to spare.
  float gate_floor = -INFINITY;

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
    refresh_gate_floor();
  }

  // gate_floor from the gates: the score of the lowest gate's key (-inf for the initial gate,
  // whose key is 0, so that every score but NaN goes on to the exact check).
  __device__ __forceinline__ void refresh_gate_floor() {
    uint32_t key = UINT32_MAX;
#pragma unroll
    for (int qi = 0; qi < kQueries; ++qi) {
      key = min(key, keys::composite_key(*reinterpret_cast<volatile uint64_t*>(&sh.gate[set][qi])));
    }
    gate_floor = key == 0 ? -INFINITY : __uint_as_float(keys::f32_bits_from_key(key, true));
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

  __device__ void flush_all() {
#pragma unroll
    for (int qi = 0; qi < kQueries; ++qi) {
      if (staged_count[qi] > 0) flush(qi);
    }
  }

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(int first_query, const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries], int key0,
                                               int key1, int quad_lane) {
    // The common case once the gates have risen: no score of the warp reaches the gate floor.
    bool maybe = false;
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      maybe |= (quad_lane == 0 ? scores0[bq] : scores1[bq]) >= gate_floor;
    }
    if (!__any_sync(0xffffffffu, maybe)) return;
    // The exact check: the composite (score key, key index) inside the range beats the gate.
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
    if (!__any_sync(0xffffffffu, any)) return;
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
    flush_all();
    const ListTeam<4> team = math_team(static_cast<int>(threadIdx.x));
    team.sync();
    for (int qi = 0; qi < kQueries; ++qi) {
      const uint32_t n = *reinterpret_cast<volatile uint32_t*>(&sh.counts[set][group][qi]);
      if (n >= static_cast<uint32_t>(fused.k)) {
        const auto boundary = team.find_boundary(lists + int64_t{qi} * fused.slots, n,
                                                 static_cast<uint32_t>(fused.k));
        if (team.thread == 0) {
          atomicMax(reinterpret_cast<unsigned long long*>(&sh.gate[set][qi]),
                    static_cast<unsigned long long>(boundary.gate()));
        }
      }
      team.sync();
      if (team.thread == 0) sh.counts[set][group][qi] = 0;
    }
    team.sync();
    refresh_gate_floor();
  }

  // After the cold sample: this warpgroup's speculative gate of each query (its sample's r-th best
  // when the range is long enough, 4k, and the list holds r; else none). The second warpgroup to
  // post one sets the query's speculative gate to the lower of the two (none if either is none),
  // and the gate rises to it: it fails only when both halves of the sample overshoot.
  __device__ void end_cold_sample(int) {
    flush_all();
    const ListTeam<4> team = math_team(static_cast<int>(threadIdx.x));
    team.sync();
    // This warpgroup's share of the sample: the tiles of its parity among the first cold_tiles.
    const int mine = (ranges->num_sample_tiles + group) % 2 == 0 ? 1 : 0;
    const int cold = (ranges->order.cold_tiles + mine) / 2;
    const uint32_t rank = speculative_rank(cold, ranges->num_tiles, fused.k);
    for (int qi = 0; qi < kQueries; ++qi) {
      const uint32_t n = *reinterpret_cast<volatile uint32_t*>(&sh.counts[set][group][qi]);
      const int64_t length = ranges->end[qi] - ranges->begin[qi];
      uint64_t mine_gate = 0;
      if (length >= 4 * int64_t{fused.k} && 2 * rank <= static_cast<uint32_t>(fused.k) &&
          n >= rank) {
        mine_gate = team.find_boundary(lists + int64_t{qi} * fused.slots, n, rank).gate();
      }
      if (team.thread == 0) {
        sh.speculative_part[set][group][qi] = mine_gate;
        __threadfence_block();
        if (atomicAdd(&sh.speculative_posted[set][qi], 1u) == 1u) {
          __threadfence_block();
          const uint64_t other =
              *reinterpret_cast<volatile uint64_t*>(&sh.speculative_part[set][1 - group][qi]);
          const uint64_t gate = min(mine_gate, other);
          if (gate != 0) {
            sh.speculative[set][qi] = gate;
            atomicMax(reinterpret_cast<unsigned long long*>(&sh.gate[set][qi]),
                      static_cast<unsigned long long>(gate));
          }
        }
      }
      team.sync();
    }
    refresh_gate_floor();
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
    refresh_gate_floor();
  }

  // Flushes the stages and hands the set's lists to the side warps.
  __device__ void end_query_block(int, const QueryBlockRanges<kQueries>&, int math_thread, int) {
    flush_all();
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
    bool retry = false;
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
      const uint64_t speculative = sh.speculative[s][qi];
      if (speculative != 0 && team.count_above(lists, n, speculative) < k) retry = true;
      typename ListTeam<3>::Boundary boundary{0, 0};
      if (n[0] + n[1] > k) boundary = team.find_boundary(lists, n, k);
      uint32_t written = team.for_each_kept(lists[0], n[0], boundary, 0, write);
      written = team.for_each_kept(lists[1], n[1], boundary, written, write);
      for (uint32_t i = written + thread; i < k; i += threads) {
        out_indices[i] = -1;
        if (out_values != nullptr) out_values[i] = NAN;
      }
    }
    if (retry && thread == 0) {
      fused.retry[1 + atomicAdd(&fused.retry[0], 1)] = query_block;
      if (fused.counters != nullptr) atomicAdd(&fused.counters[2], 1ull);
    }
    if (thread < kQueries) {
      sh.counts[s][0][thread] = sh.counts[s][1][thread] = 0;
      sh.gate[s][thread] = kInitialGate;
      sh.speculative[s][thread] = 0;
      sh.speculative_posted[s][thread] = 0;
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

// The speculative launch over every query block, then the retry launch over the listed ones.
template <int kHeads>
Status launch(const IndexerProblem& problem, const FusedPlan& plan, void* lists, int32_t* retry,
              cudaStream_t stream) {
  CoreLaunch core;
  if (Status s = prepare_core_launch(problem, &core); !s) return s;
  if (core.blocks > plan.blocks) core.blocks = plan.blocks;
  core.args.hot = plan.hot;
  core.args.hot_limit = static_cast<int32_t>(hot_sample::capacity(problem.k));
  core.args.cold_sample_tiles = plan.cold_sample_tiles;
  auto kernel = fused_indexer_kernel<kHeads>;
  const int smem = static_cast<int>(sizeof(sm90core::CoreStorage<kHeads>) +
                                    sizeof(FusedShared<sm90core::Shape<kHeads>::kQueries>));
  LITETOPK_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  FusedArgs fused{static_cast<uint64_t*>(lists),
                  static_cast<int32_t>(plan.capacity + kListSlack),
                  static_cast<int32_t>(plan.capacity),
                  static_cast<int32_t>(problem.k),
                  problem.indices,
                  problem.values,
                  plan.counters,
                  retry};
  LITETOPK_CUDA_TRY(cudaMemsetAsync(retry, 0, sizeof(int32_t), stream));
  kernel<<<core.blocks, sm90core::kThreads, smem, stream>>>(core.q_map, core.kv_map, core.args,
                                                            fused);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  if (plan.cold_sample_tiles == 0) return Status::ok();
  core.args.cold_sample_tiles = 0;
  core.args.block_list = retry;
  fused.retry = nullptr;
  kernel<<<core.blocks, sm90core::kThreads, smem, stream>>>(core.q_map, core.kv_map, core.args,
                                                            fused);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

// Cold-sample tiles: a warpgroup's share of c sample tiles holds mu = c k / (2 n) of a query's k
// best (n key tiles), and after the sample a query admits about k (1 + 3 / sqrt(mu)) more
// candidates, while the sample itself admits about 64 c. Their sum is least at
// c^1.5 = 1.5 k sqrt(2 n / k) / 64; twice that is taken (the k best cluster on real data), within
// [8, 512] tiles. LITETOPK_COLD_SAMPLE_TILES overrides it (a tuning knob for benchmarks).
int32_t cold_sample_tiles(const IndexerProblem& problem) {
  if (const char* env = std::getenv("LITETOPK_COLD_SAMPLE_TILES"); env != nullptr) {
    return static_cast<int32_t>(std::clamp(std::atol(env), 0L, 1L << 20));
  }
  const double k = static_cast<double>(problem.k);
  const double tiles = static_cast<double>(problem.num_keys) / sm90core::kTileKeys;
  const double best = std::pow(1.5 * k * std::sqrt(2.0 * tiles / k) / sm90core::kTileKeys, 2.0 / 3.0);
  return static_cast<int32_t>(std::clamp(2.0 * best, 8.0, 512.0));
}

}  // namespace

Status plan_fused(const IndexerProblem& problem, int64_t requested_capacity, bool cold_sample,
                  FusedPlan* plan) {
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
  plan->list_slots = lists * (plan->capacity + kListSlack);
  plan->retry_entries = 1 + query_blocks;
  plan->cold_sample_tiles = cold_sample ? cold_sample_tiles(problem) : 0;
  return Status::ok();
}

Status launch_fused(const IndexerProblem& problem, const FusedPlan& plan, uint64_t* lists,
                    int32_t* retry, cudaStream_t stream) {
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
  return problem.num_heads == 64 ? launch<64>(problem, plan, lists, retry, stream)
                                 : launch<32>(problem, plan, lists, retry, stream);
}

}  // namespace litetopk::cuda_indexer
