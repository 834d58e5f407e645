// The fused indexer's list kernel: scores and exact top-k in one kernel, without the [T, S] logits
// buffer. The fused path with an IndexerState or without the cold sample, and the exact re-run of
// the gated pipeline's retried query blocks (gated_indexer_launch.cu).
//
// Pipeline of fused_indexer_kernel (the scoring core of indexer_wgmma_sm90.cuh, one block per SM,
// query blocks of 4 (H = 64) or 8 (H = 32) queries):
// 1.-3. The core scores every key tile that meets some query of the block's ranges; math
//    warpgroups 0 and 1 take alternate tiles.
// 4. Hand-off (consume_bank, end_tile): the math warpgroups write each tile's scores and key
//    indices into a kRingStages-deep ring in shared memory (full/empty mbarriers), with one
//    ballot per warp, bank and pair of queries: which of its 32 (row, query) scores reach the
//    query's gate as a score. Then they go on; they wait for the filter only when the ring is full.
// 5. Filter (the three side warps, filter_tile): warp w takes tiles w, w + 3, ...; it reads only
//    the flagged scores. One inside the query's range whose composite (score key, key index)
//    beats the query's gate is appended to the query's candidate list in the workspace. Sparse
//    tiles (at most 4 flags per word, the usual case once a gate is up): a lane per flag word,
//    a shared atomic per admitted score. Dense ones (samples, no gate yet): a lane per bit of
//    all words at once, one shared atomic per query for the whole tile.
// 6. Gates (the side warps together, when every tile before the point is filtered):
//    a. Hot sample (IndexerState): the block's first tiles are the previous chunk's most chosen
//       positions. After them the k best sample scores of a query, when it has k in its range,
//       bound its k-th best from below: the gate rises to them, and the sample's candidates are
//       dropped (the key tiles score those keys again).
//    b. Cold sample (speculative gate): then come 8 to 512 key tiles evenly strided over the range
//       (formats/tile_order.h; not scored again, so their candidates stay). After them a query's
//       speculative gate is its r-th best sample score, r several standard deviations above the
//       number of the query's k best the sample is expected to hold, so that the k best very
//       likely beat it; the gate rises to it, and the list keeps only the sample's r best (what
//       it drops is at or below the gate: never in the answer when the check of 7. passes).
//    c. Every 16 tiles a list that reached its capacity keeps its k best (candidate_list.cuh) and
//       the gate rises to what they imply. Nothing is dropped that can still be in the answer,
//       so the result is exact whatever the capacity.
// 7. Select (after the block's last tile): per query the side warps find the boundary of the k
//    best of its list and write those (indices relative to ks, fp32 values), -1 / NaN padded. A
//    query with a speculative gate is checked first: its result is exact when at least k
//    candidates beat that gate (then no key it turned away can be among the k best), i.e. when
//    its list holds k (every candidate kept since the gate beats it); when fewer do, the query
//    block goes on the retry list. Meanwhile the math warpgroups go on with the
//    next query block until the ring fills.
// 8. Retry: a second launch re-runs the listed query blocks without a cold sample (exact always);
//    when the list is empty its blocks return at once.
// Auxiliary memory: the workspace of lists, blocks x queries x slots, and the retry list.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "formats/hot_sample_layout.h"
#include "formats/score_keys.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/candidate_list.cuh"
#include "cuda/indexer/indexer_kernels.h"
#include "cuda/indexer/indexer_wgmma_sm90.cuh"
#include "cuda/indexer/speculative_rank.cuh"
#include "cuda/common/device_shape.h"
#include "heuristics/indexer_heuristics.h"
#include "cuda/common/workspace_carver.h"

namespace litetopk::cuda_indexer {
namespace {

using sm90core::CoreArgs;
using sm90core::kTileKeys;
// Two math warpgroups, each both banks of its tiles: the side warps keep 72 registers for the
// filter and the lists.
using FusedRoles = sm90core::Roles<2>;
using sm90core::QueryBlockRanges;

constexpr int kRingStages = 16;
// A tile whose flag words have at most this many flags each is filtered a word per lane.
constexpr uint32_t kSparseWordFlags = 4;
constexpr int kSideWarps = 3;
constexpr uint32_t kSideBarrier = 4;  // named barrier of the side warps (core: 0, math: none)
// The side warps meet every kCheckTiles tiles to reduce the lists that reached their capacity; in
// between a list grows by at most 64 candidates per tile.
constexpr int kCheckTiles = 16;
constexpr int64_t kListSlack = int64_t{kCheckTiles} * kTileKeys;
constexpr uint64_t kInitialGate = keys::kAdmitAllValid - 1;  // admits every non-NaN score

struct FusedArgs {
  uint64_t* lists;   // [blocks, queries, slots]
  int32_t slots;     // capacity + kListSlack
  int32_t capacity;  // a list is reduced to its k best when it reaches this many
  int32_t k;
  int32_t* indices;
  float* values;
  // Optional [3]: admitted candidates, list reductions, query blocks put on the retry list.
  unsigned long long* counters;
  int32_t* retry;  // the retry list (sm90core::CoreArgs::block_list); null on the retry launch
};

// One tile's scores in the ring: [query][row], the rows' key indices (-1: none), and the math
// warps' flags (flag_word, flag_lane).
template <int kQueries>
struct ScoreStage {
  static constexpr int kWords = 2 * kQueries;  // 4 warps x 2 banks x kQueries / 4 query pairs
  float score[kQueries][kTileKeys];
  int32_t key[kTileKeys];
  uint32_t flags[kWords];
};

// Flag word i of a tile is math warp w's ballot in bank b over query pair j, i = (b * 4 + w) *
// (kQueries / 4) + j; its bit l is the score of row 16 w + l / 4 + 8 (l % 2) and query
// b * kQueries / 2 + 2 j + (l % 4) / 2 (each quad lane of a math warp holds every sum of its two
// rows, so lane l takes row parity l % 2 and query parity (l % 4) / 2).
struct FlagSlot {
  int row;
  int query;
};
template <int kQueries>
__device__ __forceinline__ FlagSlot flag_slot(int word, int lane) {
  constexpr int kPairs = kQueries / 4;
  const int j = word % kPairs;
  const int w = (word / kPairs) % 4;
  const int bank = word / (4 * kPairs);
  return {16 * w + lane / 4 + 8 * (lane % 2), bank * kQueries / 2 + 2 * j + (lane % 4) / 2};
}

__device__ __forceinline__ uint64_t gate_floor_word(int block_iteration, float score) {
  return (uint64_t{static_cast<uint32_t>(block_iteration)} << 32) | __float_as_uint(score);
}

// The score below which nothing beats a gate: that of the gate's key, -inf for keys at or below
// -inf's (the initial gate's 0, and boundaries among -inf scores, whose keys decode to NaN).
__device__ __forceinline__ float gate_floor_score(uint64_t gate) {
  const uint32_t minus_infinity_key = keys::key_from_f32_bits(__float_as_uint(-INFINITY), true);
  const uint32_t key = keys::composite_key(gate);
  return key <= minus_infinity_key ? -INFINITY
                                   : __uint_as_float(keys::f32_bits_from_key(key, true));
}

template <int kQueries>
struct FusedShared {
  ScoreStage<kQueries> ring[kRingStages];
  uint64_t ring_full[kRingStages];
  uint64_t ring_empty[kRingStages];
  uint64_t gate[kQueries];
  uint64_t speculative[kQueries];  // 0: none
  // The gate as a score for the math warps' flags, tagged with the query block it belongs to
  // (its iteration in this block's walk): gate_floor_word. One 64-bit word, written and read in
  // one access, so that a math warp running ahead into the next query block can never pair that
  // block with this one's gate.
  uint64_t gate_floor[kQueries];
  uint32_t count[kQueries];
  int32_t begin[kQueries];  // the clamped ranges of the block's queries
  int32_t end[kQueries];
  ListScratch<kSideWarps> scratch;

  __device__ void init() {
    for (int i = 0; i < kRingStages; ++i) {
      sm90::mbarrier_init(&ring_full[i], 128);  // every thread of the writing warpgroup
      sm90::mbarrier_init(&ring_empty[i], 1);  // the side warp that filtered the tile
    }
    for (int qi = 0; qi < kQueries; ++qi) {
      reset(qi);
      gate_floor[qi] = gate_floor_word(-1, -INFINITY);
    }
  }

  __device__ void reset(int qi) {
    gate[qi] = kInitialGate;
    speculative[qi] = 0;
    count[qi] = 0;
  }
};

template <int kQueries>
struct TopkEpilogue {
  using Team = ListTeam<kSideWarps>;
  const CoreArgs& args;
  const FusedArgs& fused;
  FusedShared<kQueries>& sh;
  // Side warps only: the ring position of the query block's first tile.
  uint32_t side_base = 0;
  // Both: the query block being worked on, counted over this block's walk.
  int block_iteration = -1;

  __device__ uint64_t* list_of(int qi) const {
    return fused.lists + (int64_t{blockIdx.x} * kQueries + qi) * fused.slots;
  }

  // ---- the math warpgroups: hand each tile over through the ring ----

  __device__ void begin_query_block(int, const QueryBlockRanges<kQueries>&) { ++block_iteration; }

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(uint32_t iter, int row0, int first_query,
                                               const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries], int key0,
                                               int key1, int quad_lane, bool) {
    const uint32_t slot = iter % kRingStages;
    if (first_query == 0) {
      sm90::mbarrier_wait(&sh.ring_empty[slot], ((iter / kRingStages) & 1) ^ 1);
    }
    ScoreStage<kQueries>& stage = sh.ring[slot];
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int warp = static_cast<int>(threadIdx.x) / 32 % 4;
    const int bank = first_query / kBankQueries;
    const int row = row0 + 8 * (quad_lane % 2);
    if (first_query == 0 && quad_lane < 2) stage.key[row] = quad_lane == 0 ? key0 : key1;
#pragma unroll
    for (int j = 0; j < kBankQueries / 2; ++j) {
      // Static indices into the sums (a computed one would put them in local memory).
      const int bq = 2 * j + quad_lane / 2;
      const float row_even = quad_lane / 2 == 0 ? scores0[2 * j] : scores0[2 * j + 1];
      const float row_odd = quad_lane / 2 == 0 ? scores1[2 * j] : scores1[2 * j + 1];
      const float score = quad_lane % 2 == 0 ? row_even : row_odd;
      stage.score[first_query + bq][row] = score;
      const uint64_t word =
          *reinterpret_cast<volatile uint64_t*>(&sh.gate_floor[first_query + bq]);
      const bool live = static_cast<int>(word >> 32) == block_iteration;
      const float floor = live ? __uint_as_float(static_cast<uint32_t>(word)) : -INFINITY;
      const uint32_t flags = __ballot_sync(0xffffffffu, score >= floor);
      if (lane == 0) stage.flags[(bank * 4 + warp) * (kBankQueries / 2) + j] = flags;
    }
  }

  __device__ void end_tile(uint32_t iter) {
    sm90::mbarrier_arrive(&sh.ring_full[iter % kRingStages]);
  }

  __device__ void refill_slot(int, int, int, int) {}

  // ---- the side warps: filter, gates, select ----

  // 5. One side warp filters a whole tile: each flagged score is checked exactly (inside its
  // query's range, composite above its gate) and appended to its query's list when admitted.
  __device__ void filter_tile(const ScoreStage<kQueries>& stage, int lane) {
    constexpr int kWords = ScoreStage<kQueries>::kWords;
    const uint32_t lane_flags = lane < kWords ? stage.flags[lane] : 0u;
    const uint32_t busiest =
        __reduce_max_sync(0xffffffffu, static_cast<uint32_t>(__popc(lane_flags)));
    if (busiest > kSparseWordFlags) {
      filter_dense(stage, lane_flags, lane);
    } else if (busiest != 0) {
      filter_sparse(stage, lane_flags, lane);
    }
  }

  // The composite of a tile's score, and whether it is admitted (inside its query's range and
  // above its gate).
  __device__ __forceinline__ uint64_t composite_of(const ScoreStage<kQueries>& stage,
                                                  const FlagSlot& slot) const {
    return keys::make_composite(
        keys::key_from_f32_bits(__float_as_uint(stage.score[slot.query][slot.row]), true),
        static_cast<uint32_t>(stage.key[slot.row]));
  }
  __device__ __forceinline__ bool admits(const FlagSlot& slot, uint64_t composite) const {
    const auto key = static_cast<int32_t>(keys::composite_index(composite));
    return key >= sh.begin[slot.query] && key < sh.end[slot.query] &&
           composite > sh.gate[slot.query];
  }

  // 5a. Few flags per word (the usual case once a gate is up): lane w takes word w's flagged
  // scores one after another, with a shared atomic per admitted one. The lanes' chains overlap.
  __device__ void filter_sparse(const ScoreStage<kQueries>& stage, uint32_t lane_flags, int lane) {
    for (uint32_t rest = lane_flags; rest != 0; rest &= rest - 1) {
      const FlagSlot slot = flag_slot<kQueries>(lane, __ffs(rest) - 1);
      const uint64_t composite = composite_of(stage, slot);
      if (admits(slot, composite)) {
        list_of(slot.query)[atomicAdd(&sh.count[slot.query], 1u)] = composite;
        if (fused.counters != nullptr) atomicAdd(&fused.counters[0], 1ull);
      }
    }
  }

  // 5b. Many flags (samples, and before a gate is up): lane l takes bit l of every word, all at
  // once. Per query one shared atomic (lane q) reserves the slots of all the tile's admitted
  // scores; the ballots give each its slot (the composites are read again then, to spare
  // registers).
  __device__ void filter_dense(const ScoreStage<kQueries>& stage, uint32_t lane_flags, int lane) {
    constexpr int kWords = ScoreStage<kQueries>::kWords;
    constexpr uint32_t kHalfLanes[2] = {0x33333333u, 0xccccccccu};  // lanes with (l % 4) / 2 = h
    uint32_t lanes_below;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(lanes_below));
    uint32_t admitted[kWords];
    uint32_t total[kQueries];
#pragma unroll
    for (int q = 0; q < kQueries; ++q) total[q] = 0;
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
      const uint32_t flags = __shfl_sync(0xffffffffu, lane_flags, j);
      const FlagSlot slot = flag_slot<kQueries>(j, lane);
      const bool admit = ((flags >> lane) & 1u) != 0 && admits(slot, composite_of(stage, slot));
      admitted[j] = __ballot_sync(0xffffffffu, admit);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        total[flag_slot<kQueries>(j, 2 * h).query] += __popc(admitted[j] & kHalfLanes[h]);
      }
    }
    uint32_t reserve = 0;
#pragma unroll
    for (int q = 0; q < kQueries; ++q) reserve = lane == q ? total[q] : reserve;
    uint32_t base = 0;
    if (reserve != 0) {
      base = atomicAdd(&sh.count[lane], reserve);
      if (fused.counters != nullptr) atomicAdd(&fused.counters[0], uint64_t{reserve});
    }
    uint32_t next[kQueries];
#pragma unroll
    for (int q = 0; q < kQueries; ++q) next[q] = __shfl_sync(0xffffffffu, base, q);
#pragma unroll
    for (int j = 0; j < kWords; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int q = flag_slot<kQueries>(j, 2 * h).query;
        const uint32_t ballot = admitted[j] & kHalfLanes[h];
        if ((ballot >> lane) & 1u) {
          list_of(q)[next[q] + __popc(ballot & lanes_below)] =
              composite_of(stage, flag_slot<kQueries>(j, lane));
        }
        next[q] += __popc(ballot);
      }
    }
  }

  // Waits for ring position `position`, filters it and hands it back.
  __device__ void filter_position(uint32_t position, int lane) {
    const uint32_t slot = position % kRingStages;
    sm90::mbarrier_wait(&sh.ring_full[slot], (position / kRingStages) & 1);
    filter_tile(sh.ring[slot], lane);
    __syncwarp();
    if (lane == 0) sm90::mbarrier_arrive(&sh.ring_empty[slot]);
  }

  // The gate of query qi rises to `gate` (by one thread; the side warps are its only writers).
  __device__ void raise_gate(int qi, uint64_t gate) {
    if (gate <= sh.gate[qi]) return;
    sh.gate[qi] = gate;
    *reinterpret_cast<volatile uint64_t*>(&sh.gate_floor[qi]) =
        gate_floor_word(block_iteration, gate_floor_score(gate));
  }

  // 6a. After the hot sample's tiles.
  __device__ void end_hot_sample(const Team& team) {
    for (int qi = 0; qi < kQueries; ++qi) {
      const uint32_t n = sh.count[qi];
      if (n >= static_cast<uint32_t>(fused.k)) {
        const auto boundary = team.find_boundary(list_of(qi), n, static_cast<uint32_t>(fused.k));
        if (team.thread == 0) raise_gate(qi, boundary.gate());
      }
      team.sync();
      if (team.thread == 0) sh.count[qi] = 0;
    }
    team.sync();
  }

  // 6b. After the cold sample: the speculative gate of each query whose range is long enough (4k)
  // and whose list holds the sample rank.
  __device__ void end_cold_sample(const Team& team, const QueryBlockRanges<kQueries>& r) {
    const uint32_t rank = speculative_rank(r.order.cold_tiles, r.num_tiles, fused.k);
    for (int qi = 0; qi < kQueries; ++qi) {
      const uint32_t n = sh.count[qi];
      const int64_t length = r.end[qi] - r.begin[qi];
      if (length < 4 * int64_t{fused.k} || 2 * rank > static_cast<uint32_t>(fused.k) || n < rank) {
        continue;
      }
      const uint64_t gate = team.keep_best(list_of(qi), n, rank);
      if (team.thread == 0) {
        sh.speculative[qi] = gate;
        sh.count[qi] = rank;
        raise_gate(qi, gate);
      }
      team.sync();
    }
  }

  // 6c. A list that reached its capacity keeps its k best.
  __device__ void reduce_full_lists(const Team& team) {
    for (int qi = 0; qi < kQueries; ++qi) {
      const uint32_t n = sh.count[qi];
      if (n < static_cast<uint32_t>(fused.capacity)) continue;
      const uint64_t gate = team.keep_best(list_of(qi), n, static_cast<uint32_t>(fused.k));
      if (team.thread == 0) {
        if (fused.counters != nullptr) atomicAdd(&fused.counters[1], 1ull);
        sh.count[qi] = static_cast<uint32_t>(fused.k);
        raise_gate(qi, gate);
      }
      team.sync();
    }
  }

  // 7. The exact k best of each query of the block; the block goes on the retry list when a
  // speculative gate turned away too much. Then the lists and gates start over.
  __device__ void select(const Team& team, int query_block, const QueryBlockRanges<kQueries>& r) {
    const auto k = static_cast<uint32_t>(fused.k);
    bool retry = false;
    for (int qi = 0; qi < kQueries; ++qi) {
      const int t = query_block * kQueries + qi;
      if (t >= args.num_queries) break;
      const uint64_t* list = list_of(qi);
      const uint32_t n = sh.count[qi];
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
      // Every candidate beats the speculative gate (the list kept only those at its end, and
      // the gate only rose since), so k of them beat it when the list holds k.
      if (sh.speculative[qi] != 0 && n < k) retry = true;
      // The whole list when it holds at most k, else its k best.
      typename Team::Boundary boundary{0, 0};
      if (n > k) boundary = team.find_boundary(list, n, k);
      const uint32_t written = team.for_each_kept(list, n, boundary, 0, write);
      for (uint32_t i = written + team.thread; i < k; i += Team::kThreads) {
        out_indices[i] = -1;
        if (out_values != nullptr) out_values[i] = NAN;
      }
    }
    if (retry && team.thread == 0) {
      fused.retry[1 + atomicAdd(&fused.retry[0], 1)] = query_block;
      if (fused.counters != nullptr) atomicAdd(&fused.counters[2], 1ull);
    }
    team.sync();
    if (team.thread < kQueries) sh.reset(team.thread);
    team.sync();
  }

  // The side warps' whole query block: warp w filters tiles w, w + 3, ... as they arrive; they
  // meet at the end of the hot sample, of the cold sample, every kCheckTiles tiles and at the end
  // for the gate updates between tiles (each when every tile before it is filtered), then select.
  __device__ void side_work(int query_block, const QueryBlockRanges<kQueries>& r, int thread,
                            int /*threads: Team::kThreads*/) {
    const Team team{sh.scratch, kSideBarrier, thread};
    const int warp = thread / 32;
    const int lane = thread % 32;
    ++block_iteration;
    if (thread < kQueries) {
      sh.begin[thread] = r.begin[thread];
      sh.end[thread] = r.end[thread];
      *reinterpret_cast<volatile uint64_t*>(&sh.gate_floor[thread]) =
          gate_floor_word(block_iteration, -INFINITY);
    }
    team.sync();
    const int samples = r.num_sample_tiles;
    const int cold_end = r.order.cold_tiles > 0 ? samples + r.order.cold_tiles : -1;
    const int tiles = samples + r.walk_tiles;
    int next = warp;  // this warp's next tile
    for (int done = 0; done < tiles;) {
      int boundary = min(tiles, (done / kCheckTiles + 1) * kCheckTiles);
      if (samples > done) boundary = min(boundary, samples);
      if (cold_end > done) boundary = min(boundary, cold_end);
      for (; next < boundary; next += kSideWarps) {
        filter_position(side_base + static_cast<uint32_t>(next), lane);
      }
      team.sync();
      if (boundary == samples) end_hot_sample(team);
      if (boundary == cold_end) end_cold_sample(team, r);
      if (boundary % kCheckTiles == 0) reduce_full_lists(team);
      done = boundary;
    }
    side_base += static_cast<uint32_t>(tiles);
    select(team, query_block, r);
  }
};

template <int kHeads>
__global__ void __launch_bounds__(FusedRoles::kThreads, 1)
    fused_indexer_kernel(const __grid_constant__ CUtensorMap q_map,
                         const __grid_constant__ CUtensorMap kv_map, const CoreArgs args,
                         const FusedArgs fused) {
  constexpr int kQueries = sm90core::Shape<kHeads>::kQueries;
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& core = *reinterpret_cast<sm90core::CoreStorage<kHeads>*>(shared_raw);
  auto& sh = *reinterpret_cast<FusedShared<kQueries>*>(shared_raw + sizeof(core));
  if (threadIdx.x == 0) sh.init();  // published by the core's barrier-init fence and barrier
  TopkEpilogue<kQueries> epilogue{args, fused, sh};
  sm90core::run_core<kHeads, FusedRoles::kMathGroups>(&q_map, &kv_map, args, core, epilogue);
}

// The speculative launch over every query block, then the retry launch over the listed ones;
// or, with a block list, one exact launch over the listed query blocks.
template <int kHeads>
Status launch(const IndexerProblem& problem, const FusedPlan& plan, uint64_t* lists,
              int32_t* retry, const int32_t* block_list, cudaStream_t stream) {
  CoreLaunch core;
  if (Status s = prepare_core_launch(problem, &core); !s) return s;
  if (core.blocks > plan.blocks) core.blocks = plan.blocks;
  core.args.hot = plan.hot;
  core.args.hot_limit = static_cast<int32_t>(hot_sample::capacity(problem.k));
  core.args.cold_sample_tiles = plan.cold_sample_tiles;
  auto kernel = fused_indexer_kernel<kHeads>;
  const int smem = static_cast<int>(sizeof(sm90core::CoreStorage<kHeads>) +
                                    sizeof(FusedShared<sm90core::Shape<kHeads>::kQueries>));
  if (Status s = cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem);
      !s) {
    return s;
  }
  FusedArgs fused{lists,
                  static_cast<int32_t>(plan.capacity + kListSlack),
                  static_cast<int32_t>(plan.capacity),
                  static_cast<int32_t>(problem.k),
                  problem.indices,
                  problem.values,
                  plan.counters,
                  retry};
  auto run = [&]() -> Status {
    kernel<<<core.blocks, FusedRoles::kThreads, smem, stream>>>(core.q_map, core.kv_map, core.args,
                                                              fused);
    LITETOPK_CUDA_TRY(cudaPeekAtLastError());
    return Status::ok();
  };
  if (block_list != nullptr) {
    core.args.block_list = block_list;
    fused.retry = nullptr;
    return run();
  }
  LITETOPK_CUDA_TRY(cudaMemsetAsync(retry, 0, sizeof(int32_t), stream));
  if (Status s = run(); !s || plan.cold_sample_tiles == 0) return s;
  core.args.cold_sample_tiles = 0;
  core.args.block_list = retry;
  fused.retry = nullptr;
  return run();
}

}  // namespace

Status plan_fused(const IndexerProblem& problem, int64_t requested_capacity, bool cold_sample,
                  int32_t requested_tiles, FusedPlan* plan) {
  cuda_common::DeviceShape device{};
  if (Status s = cuda_common::current_device_shape(&device); !s) return s;
  const int64_t query_blocks = core_query_blocks(problem);
  plan->blocks = static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(query_blocks, device.sm_count)));
  const int64_t lists = plan->blocks * core_queries_per_block(problem);  // one per query
  plan->cold_sample_tiles =
      cold_sample ? heuristics::cold_sample_tiles(problem, sm90core::kTileKeys, requested_tiles)
                  : 0;
  plan->capacity = heuristics::fused_list_capacity(problem, requested_capacity,
                                                   plan->cold_sample_tiles, sm90core::kTileKeys,
                                                   lists, kListSlack);
  plan->list_slots = lists * (plan->capacity + kListSlack);
  plan->retry_entries = 1 + query_blocks;
  return Status::ok();
}

Status launch_fused_blocks(const IndexerProblem& problem, const FusedPlan& plan, uint64_t* lists,
                           const int32_t* block_list, cudaStream_t stream) {
  if (problem.num_queries == 0 || problem.num_keys == 0) return Status::ok();
  FusedPlan exact = plan;
  exact.cold_sample_tiles = 0;
  return problem.num_heads == 64 ? launch<64>(problem, exact, lists, nullptr, block_list, stream)
                                 : launch<32>(problem, exact, lists, nullptr, block_list, stream);
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
  return problem.num_heads == 64 ? launch<64>(problem, plan, lists, retry, nullptr, stream)
                                 : launch<32>(problem, plan, lists, retry, nullptr, stream);
}

}  // namespace litetopk::cuda_indexer
