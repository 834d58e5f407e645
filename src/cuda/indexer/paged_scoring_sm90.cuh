// The paged decode indexer's scoring core on Hopper, shared by the paged logits kernel and the
// fused paged top-k kernel (so both compute the same scores, in the prefill core's fp32 order).
//
// One thread block scores a contiguous range of 64-token blocks (tiles) of one request's context
// for all next_n queries of the request at once:
// 1. Producer warp (after the math warpgroups): lanes stage the request's head weights in
//    shared memory, lane 0 loads its q [next_n * H, 128] (padded to whole banks of 128 query-head
//    columns) by TMA, then fills a kStages-deep ring with the range's key tiles: the lanes read 32
//    block-table entries at a time, a chunk ahead (the first chunk before the query, so that the
//    two reads overlap), and for each tile lane 0 stores the entry with the stage and,
//    for a block inside the cache, loads its keys by TMA from the 3-D map over kv_cache
//    (litetopk/paged_kv_layout.h) and its 64 scales by a bulk copy; a block outside the cache is
//    only announced (its tokens get NaN scores, its bytes are never read).
// 2. Math warpgroups take the tiles in turn: keys on the M side (64 per tile), query-heads on N:
//    one bank of 64 columns or one or two of 128, 4 wgmma steps each (sm90core::issue_bank).
// 3. Epilogue per bank: the prefill core's head_sums (relu keeping NaN, head weights, head sum
//    times the key's scale from the stage), then Epilogue::consume_bank with the scores of
//    the thread's key rows row0 and row0 + 8 for the bank's queries.
// run_scoring runs steps 1-3 over a range of the context's tiles; run_scoring_with takes another
// producer for step 1 (decode_bound_kernel.cu fills the stages with gathered keys).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "cuda/common/wgmma_sm90.cuh"
#include "cuda/indexer/indexer_wgmma_sm90.cuh"
#include "litetopk/paged_kv_layout.h"

namespace litetopk::cuda_indexer::paged {

using sm90core::kHeadDim;
using sm90core::kTileKeys;  // the block size: one tile is one cache block
// A block: kGroups math warpgroups and the producer warp (two warpgroups unless a kernel asks
// for more).
template <int kGroups>
constexpr int kThreadsFor = kGroups * 128 + 32;
constexpr int kMathThreads = 256;
constexpr int kThreads = kThreadsFor<2>;
constexpr int64_t kBlockBytes = kTileKeys * (kHeadDim + paged_kv::kScaleBytes);  // 8448
constexpr int kScalesOffset = kTileKeys * kHeadDim;  // a block's scales follow its keys

// A request's next_n * H query-head columns, padded to kColumns (64, 128 or 256), in banks of at
// most 128 columns (one wgmma N each).
template <int kHeads, int kColumns>
struct PagedShape {
  static constexpr int kBankColumns = kColumns < sm90core::kBankColumns ? kColumns
                                                                         : sm90core::kBankColumns;
  static constexpr int kBanks = kColumns / kBankColumns;
  static constexpr int kBankQueries = kBankColumns / kHeads;
  static constexpr uint32_t kBankLow = kBankColumns * kHeadDim / 16;  // descriptor units
};

struct PagedArgs {
  const uint8_t* kv_cache;
  const float* weights;
  const int32_t* context_lens;
  const int32_t* block_table;
  int32_t next_n;
  int32_t max_blocks;
  int32_t num_blocks;
  int32_t max_context;
  int32_t tiles_per_split;  // tiles of blockIdx.x's range: [x * tiles_per_split, + tiles_per_split)
};

// Tokens query j of request b sees (the contract's formula).
__device__ __forceinline__ int32_t visible_tokens(const PagedArgs& args, int b, int j) {
  return static_cast<int32_t>(
      paged_kv::visible_tokens(args.context_lens[b], args.next_n, j, args.max_context));
}

// The block's tiles: [begin, end) of request b's context, clipped to the tiles its last query
// (which sees the most) needs. A block that scores several ranges one after another (with a block
// barrier between them) continues its barriers' phases: first_iter is the ring iteration of the
// range's first tile and q_parity the phase of the range's query load.
struct TileRange {
  int32_t begin;
  int32_t end;
  uint32_t first_iter = 0;
  uint32_t q_parity = 0;
};
// The tiles request b's last query needs (every query of b sees a prefix of them).
__device__ __forceinline__ int32_t needed_tiles(const PagedArgs& args, int b) {
  return (visible_tokens(args, b, args.next_n - 1) + kTileKeys - 1) / kTileKeys;
}
__device__ __forceinline__ TileRange tile_range(const PagedArgs& args, int b) {
  const int32_t needed = needed_tiles(args, b);
  const int32_t begin = static_cast<int32_t>(blockIdx.x) * args.tiles_per_split;
  return {begin, max(begin, min(begin + args.tiles_per_split, needed))};
}

// kStages: depth of the key-tile ring (the bytes in flight per block).
template <int kHeads, int kColumns, int kStages>
struct alignas(1024) PagedScoringStorage {
  uint8_t q[kColumns * kHeadDim];
  uint8_t kv[kStages][kTileKeys * kHeadDim];
  float scales[kStages][kTileKeys];  // the tile's key scales, copied with its keys
  int32_t entries[kStages];          // the tile's block-table entry
  float weights[kColumns];
  uint64_t q_full;
  uint64_t kv_full[kStages];
  uint64_t kv_empty[kStages];
};

__device__ __forceinline__ bool block_in_cache(const PagedArgs& args, int32_t entry) {
  return entry >= 0 && entry < args.num_blocks;
}

// 1. The producer warp's first part: the request's head weights into shared memory and its
// q [next_n * H, 128] by TMA.
template <int kHeads, int kColumns, int kStages>
__device__ __forceinline__ void stage_query(const CUtensorMap* q_map, const CUtensorMap* kv_map,
                                            const PagedArgs& args,
                                            PagedScoringStorage<kHeads, kColumns, kStages>& s,
                                            int b, int lane) {
  const int columns = args.next_n * kHeads;
  for (int c = lane; c < kColumns; c += 32) {
    s.weights[c] = c < columns ? args.weights[int64_t{b} * columns + c] : 0.0f;
  }
  if (lane == 0) {
    sm90::prefetch_tensor_map(q_map);
    sm90::prefetch_tensor_map(kv_map);
    sm90::mbarrier_arrive_expect_bytes(&s.q_full, kColumns * kHeadDim);
    sm90::tma_load_2d(s.q, q_map, 0, b * columns, &s.q_full);
  } else {
    sm90::mbarrier_arrive(&s.q_full);
  }
}

// 1. The producer warp: the query, then the range's key tiles in context order.
template <int kHeads, int kColumns, int kStages>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* kv_map,
                                        const PagedArgs& args, PagedScoringStorage<kHeads, kColumns, kStages>& s,
                                        int b, TileRange range, int lane) {
  // Lane i reads the table entry of tile base + i; lane 0 issues the copies. The first 32
  // entries are read before the query is staged, so that the two reads overlap.
  const int32_t* table = args.block_table + int64_t{b} * args.max_blocks;
  int32_t next_entry = range.begin + lane < range.end ? table[range.begin + lane] : -1;
  stage_query(q_map, kv_map, args, s, b, lane);
  // The keys are read once per call: their lines go first, so that what the kernel writes (the
  // logits the selection reads next) stays in L2.
  const uint64_t kv_policy = sm90::l2_evict_first_policy();
  for (int32_t base = range.begin; base < range.end; base += 32) {
    const int32_t lane_entry = next_entry;
    if (base + 32 < range.end) {
      next_entry = base + 32 + lane < range.end ? table[base + 32 + lane] : -1;
    }
    const int32_t count = min(32, range.end - base);
    for (int i = 0; i < count; ++i) {
      const int32_t entry = __shfl_sync(0xffffffffu, lane_entry, i);
      if (lane == 0) {
        const uint32_t iter = range.first_iter + static_cast<uint32_t>(base + i - range.begin);
        const uint32_t stage = iter % kStages;
        sm90::mbarrier_wait(&s.kv_empty[stage], ((iter / kStages) & 1) ^ 1);
        s.entries[stage] = entry;
        if (block_in_cache(args, entry)) {
          sm90::mbarrier_arrive_expect_bytes(&s.kv_full[stage],
                                             kTileKeys * kHeadDim + kTileKeys * sizeof(float));
          sm90::tma_load_3d(s.kv[stage], kv_map, 0, 0, entry, &s.kv_full[stage], kv_policy);
          sm90::bulk_copy_global_to_shared(
              s.scales[stage], args.kv_cache + int64_t{entry} * kBlockBytes + kScalesOffset,
              kTileKeys * sizeof(float), &s.kv_full[stage], kv_policy);
        } else {
          sm90::mbarrier_arrive(&s.kv_full[stage]);
        }
      }
      __syncwarp();
    }
  }
}

// 2.-3. A math warpgroup (group 0 .. kGroups - 1 of the block; group g takes the range's tiles
// g, g + kGroups, ...). Epilogue::consume_bank(tile, row0, first_query, scores0, scores1,
// in_cache, quad_lane) gets the bank's queries' scores of tokens tile * 64 + row0 and + 8
// (in_cache false: the block is outside the cache, the scores are junk).
template <int kHeads, int kColumns, int kStages, int kGroups, class Epilogue>
__device__ __forceinline__ void score_tiles(const PagedArgs& args,
                                            PagedScoringStorage<kHeads, kColumns, kStages>& s, int b,
                                            TileRange range, Epilogue& epilogue, int warp,
                                            int lane) {
  using P = PagedShape<kHeads, kColumns>;
  const int group = __shfl_sync(0xffffffffu, warp / 4, 0);  // warp-uniform
  const int row0 = (warp % 4) * 16 + lane / 4;
  const int quad_lane = lane % 4;
  sm90::mbarrier_wait(&s.q_full, range.q_parity);
  sm90core::BankWeights<kHeads, P::kBankQueries> weights[P::kBanks];
#pragma unroll
  for (int bank = 0; bank < P::kBanks; ++bank) {
    sm90core::load_bank_weights<kHeads, P::kBankQueries>(s.weights, bank, quad_lane,
                                                         weights[bank]);
  }
  const uint32_t kv_low0 = sm90::swizzled_descriptor_low(s.kv[0]);
  const uint32_t q_low = sm90::swizzled_descriptor_low(s.q);
  for (int32_t tile = range.begin + group; tile < range.end; tile += kGroups) {
    const uint32_t iter = range.first_iter + static_cast<uint32_t>(tile - range.begin);
    const uint32_t stage = iter % kStages;
    sm90::mbarrier_wait(&s.kv_full[stage], (iter / kStages) & 1);
    const bool in_cache = block_in_cache(args, s.entries[stage]);
    const float scale0 = s.scales[stage][row0];
    const float scale1 = s.scales[stage][row0 + 8];
    const uint32_t kv_low = kv_low0 + stage * sm90core::kStageLow;
    // One bank at a time (two banks' accumulators and weights would not fit the registers); the
    // other warpgroups' tiles overlap the epilogue.
#pragma unroll
    for (int bank = 0; bank < P::kBanks; ++bank) {
      float acc[P::kBankColumns / 2];
      sm90core::issue_bank<P::kBankColumns>(acc, kv_low,
                                            q_low + static_cast<uint32_t>(bank) * P::kBankLow);
      sm90::wgmma_wait<0>();
      if (bank + 1 == P::kBanks && lane == 0) sm90::mbarrier_arrive(&s.kv_empty[stage]);
      sm90::fence_accumulators(acc);
      float scores0[P::kBankQueries];
      float scores1[P::kBankQueries];
      sm90core::head_sums<kHeads, P::kBankQueries>(acc, weights[bank], scale0, scale1,
                                                   scores0, scores1);
      epilogue.consume_bank(tile, row0, bank * P::kBankQueries, scores0, scores1, in_cache,
                            quad_lane);
    }
  }
}

// Barrier initialization by thread 0 (the caller syncs the block after it).
template <int kHeads, int kColumns, int kStages>
__device__ __forceinline__ void init_scoring(PagedScoringStorage<kHeads, kColumns, kStages>& s) {
  sm90::mbarrier_init(&s.q_full, 32);
  for (int i = 0; i < kStages; ++i) {
    sm90::mbarrier_init(&s.kv_full[i], 1);
    sm90::mbarrier_init(&s.kv_empty[i], 4);  // the four warps of the warpgroup that took the tile
  }
  sm90::fence_barrier_init();
}

// Runs steps 2-3 on the math warps and produce(lane) (step 1, for the tiles of `range`) on the
// producer warp; returns when this thread's part is done (no block-wide synchronization at the
// end).
template <int kHeads, int kColumns, int kStages, int kGroups = 2, class Produce, class Epilogue>
__device__ __forceinline__ void run_scoring_with(const PagedArgs& args,
                                                 PagedScoringStorage<kHeads, kColumns, kStages>& s,
                                                 int b, TileRange range, Produce&& produce_tiles,
                                                 Epilogue& epilogue) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (warp == kGroups * 4) {
    produce_tiles(lane);
  } else {
    score_tiles<kHeads, kColumns, kStages, kGroups>(args, s, b, range, epilogue, warp, lane);
  }
}

// Runs steps 1-3 for request b's tiles of `range` on the block's threads (kThreadsFor<kGroups>).
template <int kHeads, int kColumns, int kStages, int kGroups = 2, class Epilogue>
__device__ __forceinline__ void run_scoring(const CUtensorMap* q_map, const CUtensorMap* kv_map,
                                            const PagedArgs& args,
                                            PagedScoringStorage<kHeads, kColumns, kStages>& s, int b,
                                            TileRange range, Epilogue& epilogue) {
  run_scoring_with<kHeads, kColumns, kStages, kGroups>(
      args, s, b, range,
      [&](int lane) { produce<kHeads, kColumns, kStages>(q_map, kv_map, args, s, b, range, lane); },
      epilogue);
}

}  // namespace litetopk::cuda_indexer::paged
