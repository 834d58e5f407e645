// The lightning indexer's scoring core on Hopper: warp-specialized fp8 wgmma over TMA-loaded KV
// tiles, shared by the logits kernel and the fused top-k kernel (so both compute bit-identical
// scores). An Epilogue policy decides what happens to each score.
//
// One persistent block per SM walks query blocks of kQueries queries (blockIdx.x, + gridDim.x, ...)
// and, for each, the 64-key tiles covering the union of their ranges:
// 1. Producer warp (warp 0 of the warpgroup after the math ones): per query block, once its q slot
//    is free, Epilogue::refill_slot (the query block that used the slot is done), then stage the
//    ranges and head weights, TMA the queries' q [kQueries * H, 128] into a double-buffered slot,
//    then fill a kKvStages-deep ring of 64-key tiles, each slot guarded by a full/empty mbarrier
//    pair: first the hot sample's tiles when there is one (rows gathered by cp.async into the
//    swizzled layout, with their key indices), then the key tiles by TMA, in formats/tile_order.h's
//    order: with a cold sample, evenly strided tiles of the range first. CoreArgs::walk takes
//    every key tile or the cold sample's alone.
// 2. The math warpgroups (Roles): keys on the M side (64 per tile), query-heads on N in two banks
//    of 128 columns, each 4 wgmma m64n128k32 steps over the head dimension. Two warpgroups take
//    alternate tiles, each both banks (the epilogue of bank 0 runs while bank 1 is still in the
//    tensor cores); or four in two pairs take alternate tiles, a bank per warpgroup.
// 3. Epilogue per bank: relu (keeping NaN), head weights, the head sum (in-thread, times kv_scale,
//    then two quad shuffles; DeepGEMM's fp32 order); then Epilogue::consume_bank with the bank's
//    queries' scores of the tile's rows row0 and row0 + 8 (keys key0 and key1; whether the tile
//    lies inside every query's range), and Epilogue::end_tile per tile.
// 4. The other three warps of the producer warpgroup run Epilogue::side_work for each query block
//    (the logits kernel fills the keys outside the tiles with -inf there; the fused kernel filters
//    the scores and selects).
// The query blocks are all of them in order, or those of a block list (a re-run of some).
// Epilogue::kTileOrder: whether the four-warpgroup math follows formats/tile_order.h (else key
// tiles in key order only).
#pragma once

#include <cuda.h>

#include <cmath>
#include <cstdint>

#include "formats/hot_sample_layout.h"
#include "formats/tile_order.h"
#include "cuda/common/wgmma_sm90.cuh"

namespace litetopk::cuda_indexer::sm90core {

constexpr int kHeadDim = 128;
constexpr int kTileKeys = 64;
constexpr int kKvStages = 8;
constexpr int kQStages = 2;
constexpr int kBankColumns = 128;

// The block's warp roles: kGroups math warpgroups, then the producer warpgroup (the producer warp
// and three side warps), and the register split setmaxnreg applies (within the block's launch
// allocation, 65536 / kThreads rounded down to 8 per thread; asking for more would stall the math
// warpgroups forever).
// - 2 math warpgroups take alternate tiles, each both banks of a tile (216 registers: 128
//   accumulators and 64 weights). The fused kernel, whose side warps need 72 registers.
// - 4 math warpgroups in two pairs: a pair takes alternate tiles, its warpgroups one bank each
//   (112 registers: 64 accumulators and 32 weights), for twice the warps to hide the wgmma
//   latency; the producer warpgroup keeps 32 registers. The logits kernel.
template <int kGroups>
struct Roles {
  static constexpr int kMathGroups = kGroups;
  static constexpr int kMathThreads = kGroups * 128;
  static constexpr int kThreads = kMathThreads + 128;
  static constexpr int kMathRegisters = kGroups == 2 ? 216 : 112;
  static constexpr int kProducerRegisters = kGroups == 2 ? 72 : 32;
  static constexpr int kWarpsPerTile = kGroups == 2 ? 4 : 8;  // the warps that release a stage
  static_assert(kGroups == 2 || kGroups == 4, "2 or 4 math warpgroups");
  static_assert(128 * kProducerRegisters + kMathThreads * kMathRegisters <=
                    kThreads * (65536 / kThreads / 8 * 8),
                "register split beyond the launch allocation");
};

template <int kHeads>
struct Shape {
  static constexpr int kQueries = 2 * kBankColumns / kHeads;  // 4 (H = 64) or 8 (H = 32)
  static constexpr int kBankQueries = kQueries / 2;
  static constexpr int kQRows = kQueries * kHeads;  // 256
  static constexpr int kWeightsPerQuery = kHeads / 4;  // the head columns one thread holds
};

struct CoreArgs {
  const uint8_t* kv;
  const float* kv_scale;
  const float* weights;
  const int32_t* ks;
  const int32_t* ke;
  int32_t num_queries;
  int32_t num_keys;
  int32_t num_query_blocks;
  // The hot sample to score before each query block's tiles (formats/hot_sample_layout.h), or null;
  // at most hot_limit of its positions are used.
  const int32_t* hot;
  int32_t hot_limit;
  // Nonzero: each query block whose range spans at least 4x this many key tiles scores this many,
  // evenly strided over the range, first (the cold sample).
  int32_t cold_sample_tiles;
  // Null: query blocks 0 .. num_query_blocks-1. Else [0] a count, then that many query blocks.
  const int32_t* block_list;
  // Which key tiles of the order a query block walks (TileWalk).
  int32_t walk;
};

// The key tiles of a query block's order (formats/tile_order.h) that the core scores.
enum TileWalk : int32_t {
  kWalkAll = 0,         // every tile
  kWalkColdSample = 1,  // the cold sample's tiles alone (none when the range has no sample)
};

// The query blocks a kernel walks, and the i-th of them.
__device__ __forceinline__ int query_block_count(const CoreArgs& args) {
  return args.block_list == nullptr ? args.num_query_blocks : args.block_list[0];
}
__device__ __forceinline__ int query_block_at(const CoreArgs& args, int i) {
  return args.block_list == nullptr ? i : args.block_list[1 + i];
}

// Positions of the hot sample in use: none unless the writer's magic word is there.
__device__ __forceinline__ int32_t hot_sample_count(const CoreArgs& args) {
  if (args.hot == nullptr || args.hot[hot_sample::kMagicWord] != hot_sample::kMagic) return 0;
  const int32_t limit = min(args.hot_limit, args.hot[hot_sample::kCapacityWord]);
  return min(max(args.hot[hot_sample::kCountWord], 0), limit);
}

// The clamped ranges of a query block and the key tiles that cover their union.
template <int kQueries>
struct QueryBlockRanges {
  int32_t begin[kQueries];
  int32_t end[kQueries];
  int32_t num_sample_tiles;  // tiles 0 .. num_sample_tiles-1: the hot sample's positions
  int32_t first_key;  // then tile num_sample_tiles + t covers keys
                      // [first_key + 64 key_tile(order, t), + 64)
  int32_t num_tiles;  // 0 when every range is empty
  tile_order::TileOrder order;
  // The key tiles walked: order positions 0 .. walk_tiles - 1.
  int32_t walk_tiles;
  // [inner_begin, inner_end): the keys inside every query's range (empty when some query of the
  // block is past the last one or has an empty range).
  int32_t inner_begin;
  int32_t inner_end;
};

__device__ __forceinline__ void clamped_range(const CoreArgs& args, int t, int32_t* begin,
                                              int32_t* end) {
  int32_t b = 0;
  int32_t e = 0;
  if (t < args.num_queries) {
    b = min(max(args.ks[t], 0), args.num_keys);
    e = max(b, min(max(args.ke[t], 0), args.num_keys));
  }
  *begin = b;
  *end = e;
}

// Computed by one warp (every lane gets the result).
template <int kQueries>
__device__ __forceinline__ void compute_ranges(const CoreArgs& args, int query_block, int lane,
                                               QueryBlockRanges<kQueries>* out) {
  int32_t b = 0;
  int32_t e = 0;
  if (lane < kQueries) clamped_range(args, query_block * kQueries + lane, &b, &e);
  int32_t union_begin = b < e ? b : INT32_MAX;
  int32_t union_end = b < e ? e : 0;
  int32_t inner_begin = lane < kQueries ? b : 0;
  int32_t inner_end = lane < kQueries ? e : INT32_MAX;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    union_begin = min(union_begin, __shfl_xor_sync(0xffffffffu, union_begin, offset));
    union_end = max(union_end, __shfl_xor_sync(0xffffffffu, union_end, offset));
    inner_begin = max(inner_begin, __shfl_xor_sync(0xffffffffu, inner_begin, offset));
    inner_end = min(inner_end, __shfl_xor_sync(0xffffffffu, inner_end, offset));
  }
  out->inner_begin = inner_begin;
  out->inner_end = inner_end;
#pragma unroll
  for (int i = 0; i < kQueries; ++i) {
    out->begin[i] = __shfl_sync(0xffffffffu, b, i);
    out->end[i] = __shfl_sync(0xffffffffu, e, i);
  }
  if (union_begin >= union_end) {
    out->first_key = 0;
    out->num_tiles = 0;
    out->num_sample_tiles = 0;
    out->order = tile_order::TileOrder{};
  } else {
    out->first_key = union_begin / 16 * 16;
    out->num_tiles = (union_end - out->first_key + kTileKeys - 1) / kTileKeys;
    out->num_sample_tiles = (hot_sample_count(args) + kTileKeys - 1) / kTileKeys;
    out->order = tile_order::make_tile_order(out->num_tiles, args.cold_sample_tiles);
  }
  out->walk_tiles = args.walk == kWalkAll ? out->num_tiles : out->order.cold_tiles;
}

// Starts gathering the hot sample's rows first .. first+63 into a tile in TMA's 128-byte swizzled
// layout (16-byte chunk c of row r at chunk c ^ (r % 8)) with cp.async, one commit group, and
// writes their key indices (-1, and a zero row, for a row past the sample or a position outside
// [0, S): never admitted). Run by one warp; the caller waits for the group and fences before
// publishing the tile.
__device__ __forceinline__ void start_sample_tile(const CoreArgs& args, int32_t count,
                                                  int32_t first, uint8_t* tile, int32_t* keys,
                                                  int lane) {
  const int32_t* positions = args.hot + hot_sample::kHeaderWords;
  // Lane l holds the positions of rows l and l + 32; the copies take them by shuffle.
  const int32_t low = first + lane < count ? positions[first + lane] : -1;
  const int32_t high = first + 32 + lane < count ? positions[first + 32 + lane] : -1;
  constexpr int kChunks = kHeadDim / 16;
#pragma unroll 1
  for (int i = lane; i < kTileKeys * kChunks; i += 32) {
    const int row = i / kChunks;  // the same half (< 32 or not) for the whole warp in a step
    const int chunk = i % kChunks;
    const int32_t position = __shfl_sync(0xffffffffu, row < 32 ? low : high, row % 32);
    const bool valid = position >= 0 && position < args.num_keys;
    const uint8_t* source = args.kv + (valid ? int64_t{position} * kHeadDim + chunk * 16 : 0);
    sm90::cp_async_16(tile + row * kHeadDim + ((chunk ^ (row % 8)) * 16), source, valid);
    if (chunk == 0) keys[row] = valid ? position : -1;
  }
  sm90::cp_async_commit();
}

// Descriptor low-word strides (16-byte units): one key tile's stage, one bank of query columns.
constexpr uint32_t kStageLow = kTileKeys * kHeadDim / 16;
constexpr uint32_t kBankLow = kBankColumns * kHeadDim / 16;
template <int kHeads>
constexpr uint32_t kQSlotLow = Shape<kHeads>::kQRows * kHeadDim / 16;

// Sample tiles in flight per producer lane before the oldest is published.
constexpr int kSampleTilesInFlight = 4;

template <int kHeads>
struct alignas(1024) CoreStorage {
  using S = Shape<kHeads>;
  uint8_t q[kQStages][S::kQRows * kHeadDim];
  uint8_t kv[kKvStages][kTileKeys * kHeadDim];
  int32_t sample_keys[kKvStages][kTileKeys];  // a sample tile's key indices
  float weights[kQStages][S::kQueries * kHeads];
  QueryBlockRanges<S::kQueries> ranges[kQStages];
  uint64_t q_full[kQStages];
  uint64_t q_empty[kQStages];
  uint64_t kv_full[kKvStages];
  uint64_t kv_empty[kKvStages];
};

// max(0, x) that keeps NaN (a NaN input must give a NaN score, which is never selected): one
// max.NaN instruction.
__device__ __forceinline__ float relu_keep_nan(float x) {
  float y;
  asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(y) : "f"(x));
  return y;
}

// 2. Math with 2 warpgroups: alternate tiles, both banks of each (the epilogue of bank 0 runs
// while bank 1 is still in the tensor cores). It never reports a tile as inside every range.
// A bank holds kBankQueries queries' heads (128 columns; the paged decode core also uses banks of
// 64 columns).
template <int kHeads, int kBankQueries = Shape<kHeads>::kBankQueries>
using BankWeights = float[kBankQueries][Shape<kHeads>::kWeightsPerQuery];

// This thread's head weights of a bank's queries: heads 8 j + 2 p and 8 j + 2 p + 1 (p: the quad
// lane) at 2 j and 2 j + 1, the columns of its accumulators.
template <int kHeads, int kBankQueries = Shape<kHeads>::kBankQueries>
__device__ __forceinline__ void load_bank_weights(const float* block_weights, int bank,
                                                  int quad_lane,
                                                  BankWeights<kHeads, kBankQueries>& weights) {
#pragma unroll
  for (int bq = 0; bq < kBankQueries; ++bq) {
#pragma unroll
    for (int j = 0; j < kHeads / 8; ++j) {
      const float2 w = *reinterpret_cast<const float2*>(
          &block_weights[(bank * kBankQueries + bq) * kHeads + j * 8 + quad_lane * 2]);
      weights[bq][2 * j] = w.x;
      weights[bq][2 * j + 1] = w.y;
    }
  }
}

// Issues a bank's 4 wgmma steps over the head dimension as one commit group: 64 keys (the stage
// at descriptor low word kv_low) x kColumns (128 or 64) query-head columns (at q_low); + 2 per 32
// bytes of K.
template <int kColumns = kBankColumns>
__device__ __forceinline__ void issue_bank(float (&acc)[kColumns / 2], uint32_t kv_low,
                                           uint32_t q_low) {
  static_assert(kColumns == 128 || kColumns == 64, "banks of 128 or 64 columns");
  sm90::fence_accumulators(acc);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 32; ++kk) {
    if constexpr (kColumns == 128) {
      sm90::wgmma_m64n128k32_e4m3(acc, sm90::swizzled_descriptor(kv_low + kk * 2),
                                  sm90::swizzled_descriptor(q_low + kk * 2), kk > 0);
    } else {
      sm90::wgmma_m64n64k32_e4m3(acc, sm90::swizzled_descriptor(kv_low + kk * 2),
                                 sm90::swizzled_descriptor(q_low + kk * 2), kk > 0);
    }
  }
  sm90::wgmma_commit();
}

// 3. The head sums of a bank's queries for the thread's key rows row0 and row0 + 8 (all of them
// before the epilogue sees any, so that the shuffle latencies overlap). DeepGEMM's fp32 order, so
// that the logits are bit-identical to its fp8_mqa_logits: per key row, the even and the odd heads
// of the thread's columns in one chain each (column group 1's product, group 0's FMA onto it,
// then the FMAs of groups 2, 3, ... in order: what nvcc makes of a product followed by
// += products), their sum times kv_scale, then the sums of lanes 1 and 2 apart.
template <int kHeads, int kBankQueries = Shape<kHeads>::kBankQueries>
__device__ __forceinline__ void head_sums(const float (&acc)[kBankQueries * kHeads / 2],
                                          const BankWeights<kHeads, kBankQueries>& weights,
                                          float scale0, float scale1,
                                          float (&scores0)[kBankQueries],
                                          float (&scores1)[kBankQueries]) {
#pragma unroll
  for (int bq = 0; bq < kBankQueries; ++bq) {
    float sum0[2];
    float sum1[2];
#pragma unroll
    for (int j = 1; j < kHeads / 8; ++j) {
      const int c = (bq * kHeads / 8 + j) * 4;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float w = weights[bq][2 * j + h];
        const float x0 = relu_keep_nan(acc[c + h]);
        const float x1 = relu_keep_nan(acc[c + 2 + h]);
        if (j == 1) {
          const int c0 = bq * kHeads / 8 * 4;
          const float w0 = weights[bq][h];
          sum0[h] = fmaf(relu_keep_nan(acc[c0 + h]), w0, x0 * w);
          sum1[h] = fmaf(relu_keep_nan(acc[c0 + 2 + h]), w0, x1 * w);
        } else {
          sum0[h] = fmaf(x0, w, sum0[h]);
          sum1[h] = fmaf(x1, w, sum1[h]);
        }
      }
    }
    scores0[bq] = (sum0[0] + sum0[1]) * scale0;
    scores1[bq] = (sum1[0] + sum1[1]) * scale1;
  }
#pragma unroll
  for (int bq = 0; bq < kBankQueries; ++bq) {
    scores0[bq] += __shfl_xor_sync(0xffffffffu, scores0[bq], 1);
    scores1[bq] += __shfl_xor_sync(0xffffffffu, scores1[bq], 1);
  }
#pragma unroll
  for (int bq = 0; bq < kBankQueries; ++bq) {
    scores0[bq] += __shfl_xor_sync(0xffffffffu, scores0[bq], 2);
    scores1[bq] += __shfl_xor_sync(0xffffffffu, scores1[bq], 2);
  }
}

// 2. Math with 2 warpgroups: alternate tiles, both banks of each (the epilogue of bank 0 runs
// while bank 1 is still in the tensor cores). It never reports a tile as inside every range.
template <int kHeads, class Epilogue>
__device__ __forceinline__ void run_math_two_banks(const CoreArgs& args, CoreStorage<kHeads>& s,
                                                   Epilogue& epilogue, int warp, int lane) {
  using S = Shape<kHeads>;
  const int blocks = query_block_count(args);
  // Broadcast from lane 0 so that the compiler knows it is warp-uniform: the tile walk and the
  // wgmma descriptors then stay in uniform registers.
  const int group = __shfl_sync(0xffffffffu, warp / 4, 0);
  const int row0 = (warp % 4) * 16 + lane / 4;
  const int quad_lane = lane % 4;
  const uint32_t kv_low0 = sm90::swizzled_descriptor_low(s.kv[0]);
  const uint32_t q_low0 = sm90::swizzled_descriptor_low(s.q[0]);
  uint32_t kv_base = 0;
  int it = 0;
  for (int i = blockIdx.x; i < blocks; i += gridDim.x, ++it) {
    const int qb = query_block_at(args, i);
    const int slot = it % kQStages;
    sm90::mbarrier_wait(&s.q_full[slot], (it / kQStages) & 1);
    const QueryBlockRanges<S::kQueries>& ranges = s.ranges[slot];
    const int num_samples = ranges.num_sample_tiles;
    const int num_tiles = num_samples + ranges.walk_tiles;
    BankWeights<kHeads> weights[2];
    load_bank_weights<kHeads>(s.weights[slot], 0, quad_lane, weights[0]);
    load_bank_weights<kHeads>(s.weights[slot], 1, quad_lane, weights[1]);
    epilogue.begin_query_block(qb, ranges);
    for (int tile = group; tile < num_tiles; tile += 2) {
      const uint32_t iter = kv_base + static_cast<uint32_t>(tile);
      const uint32_t stage = iter % kKvStages;
      // A key tile's keys and scales are known before its data lands; a sample tile's after.
      const bool sample = tile < num_samples;
      int key0 = 0;
      float scale0 = 0.0f;
      float scale1 = 0.0f;
      if (!sample) {
        key0 = ranges.first_key +
               tile_order::key_tile(ranges.order, tile - num_samples) * kTileKeys + row0;
        if (key0 < args.num_keys) scale0 = __ldg(args.kv_scale + key0);
        if (key0 + 8 < args.num_keys) scale1 = __ldg(args.kv_scale + key0 + 8);
      }
      sm90::mbarrier_wait(&s.kv_full[stage], (iter / kKvStages) & 1);
      int key1 = key0 + 8;
      if (sample) {
        key0 = s.sample_keys[stage][row0];
        key1 = s.sample_keys[stage][row0 + 8];
        if (key0 >= 0 && key0 < args.num_keys) scale0 = __ldg(args.kv_scale + key0);
        if (key1 >= 0 && key1 < args.num_keys) scale1 = __ldg(args.kv_scale + key1);
      }
      // The operands' descriptors: low words from stage 0's, 16-byte units.
      const uint32_t kv_low = kv_low0 + stage * kStageLow;
      const uint32_t q_low = q_low0 + static_cast<uint32_t>(slot) * kQSlotLow<kHeads>;
      float acc[2][64];
      issue_bank(acc[0], kv_low, q_low);
      issue_bank(acc[1], kv_low, q_low + kBankLow);
#pragma unroll
      for (int bank = 0; bank < 2; ++bank) {
        if (bank == 0) {
          sm90::wgmma_wait<1>();
        } else {
          sm90::wgmma_wait<0>();
          if (lane == 0) sm90::mbarrier_arrive(&s.kv_empty[stage]);
        }
        sm90::fence_accumulators(acc[bank]);
        float scores0[S::kBankQueries];
        float scores1[S::kBankQueries];
        head_sums<kHeads>(acc[bank], weights[bank], scale0, scale1, scores0, scores1);
        epilogue.consume_bank(iter, row0, bank * S::kBankQueries, scores0, scores1, key0, key1,
                              quad_lane, /*inside_all=*/false);
      }
      epilogue.end_tile(iter);
    }
    kv_base += static_cast<uint32_t>(num_tiles);
    __syncwarp();  // the warp's epilogue writes, ordered before the slot's release
    if (lane == 0) sm90::mbarrier_arrive(&s.q_empty[slot]);
  }
}

// 2. Math with 4 warpgroups in two pairs: pair p takes tiles p, p + 2, ...; its warpgroup b bank b
// of each. Key tiles only (no hot sample), in key order or, with kTileOrder, in the tile order's
// walk; a key's scale is read at min(key, S - 1), its score never stored past S.
template <int kHeads, bool kTileOrder, class Epilogue>
__device__ __forceinline__ void run_math_pairs(const CoreArgs& args, CoreStorage<kHeads>& s,
                                               Epilogue& epilogue, int warp, int lane) {
  using S = Shape<kHeads>;
  const int blocks = query_block_count(args);
  const int group = __shfl_sync(0xffffffffu, warp / 4, 0);  // warp-uniform, as above
  const int pair = group / 2;
  const int bank = group % 2;
  const int row0 = (warp % 4) * 16 + lane / 4;
  const int quad_lane = lane % 4;
  const uint32_t kv_low0 = sm90::swizzled_descriptor_low(s.kv[0]);
  const uint32_t q_low0 = sm90::swizzled_descriptor_low(s.q[0]) +
                          static_cast<uint32_t>(bank) * kBankLow;
  const int last_key = args.num_keys - 1;
  uint32_t kv_base = 0;
  int it = 0;
  for (int i = blockIdx.x; i < blocks; i += gridDim.x, ++it) {
    const int qb = query_block_at(args, i);
    const int slot = it % kQStages;
    sm90::mbarrier_wait(&s.q_full[slot], (it / kQStages) & 1);
    const QueryBlockRanges<S::kQueries>& ranges = s.ranges[slot];
    const int num_tiles = ranges.walk_tiles;
    BankWeights<kHeads> weights;
    load_bank_weights<kHeads>(s.weights[slot], bank, quad_lane, weights);
    const uint32_t q_low = q_low0 + static_cast<uint32_t>(slot) * kQSlotLow<kHeads>;
    epilogue.begin_query_block(qb, ranges);
    for (int tile = pair; tile < num_tiles; tile += 2) {
      const uint32_t iter = kv_base + static_cast<uint32_t>(tile);
      const uint32_t stage = iter % kKvStages;
      const int key_tile = kTileOrder ? tile_order::key_tile(ranges.order, tile) : tile;
      const int tile_key = ranges.first_key + key_tile * kTileKeys;
      const int key0 = tile_key + row0;
      const float scale0 = __ldg(args.kv_scale + min(key0, last_key));
      const float scale1 = __ldg(args.kv_scale + min(key0 + 8, last_key));
      const bool inside_all =
          tile_key >= ranges.inner_begin && tile_key + kTileKeys <= ranges.inner_end;
      sm90::mbarrier_wait(&s.kv_full[stage], (iter / kKvStages) & 1);
      float acc[64];
      issue_bank(acc, kv_low0 + stage * kStageLow, q_low);
      sm90::wgmma_wait<0>();
      if (lane == 0) sm90::mbarrier_arrive(&s.kv_empty[stage]);
      sm90::fence_accumulators(acc);
      float scores0[S::kBankQueries];
      float scores1[S::kBankQueries];
      head_sums<kHeads>(acc, weights, scale0, scale1, scores0, scores1);
      epilogue.consume_bank(iter, row0, bank * S::kBankQueries, scores0, scores1, key0, key0 + 8,
                            quad_lane, inside_all);
      epilogue.end_tile(iter);
    }
    kv_base += static_cast<uint32_t>(num_tiles);
    __syncwarp();  // the warp's epilogue writes, ordered before the slot's release
    if (lane == 0) sm90::mbarrier_arrive(&s.q_empty[slot]);
  }
}

// The kernel body. Epilogue: constructed per thread from (epilogue args, its shared storage); its
// hooks are called by the math threads (begin_query_block; consume_bank and end_tile with the
// tile's iteration, counted over the block's query blocks), by the producer warp (refill_slot,
// with the q slot, the query block done with it or -1, the query block about to use it or -1,
// and the lane) and by the side warps (side_work).
template <int kHeads, int kGroups, class Epilogue>
__device__ __forceinline__ void run_core(const CUtensorMap* q_map, const CUtensorMap* kv_map,
                                         const CoreArgs& args, CoreStorage<kHeads>& s,
                                         Epilogue& epilogue) {
  using S = Shape<kHeads>;
  using R = Roles<kGroups>;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int blocks = query_block_count(args);
  if (threadIdx.x == 0) {
    for (int i = 0; i < kQStages; ++i) {
      sm90::mbarrier_init(&s.q_full[i], 32);  // every producer lane publishes its stores
      sm90::mbarrier_init(&s.q_empty[i], R::kMathThreads / 32);
    }
    for (int i = 0; i < kKvStages; ++i) {
      sm90::mbarrier_init(&s.kv_full[i], 32);  // every producer lane (sample tiles are gathered)
      sm90::mbarrier_init(&s.kv_empty[i], R::kWarpsPerTile);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();

  if (warp >= R::kMathThreads / 32) {
    sm90::warpgroup_registers_decrease<R::kProducerRegisters>();
    if (warp == R::kMathThreads / 32) {
      // 1. The producer.
      if (lane == 0) {
        sm90::prefetch_tensor_map(q_map);
        sm90::prefetch_tensor_map(kv_map);
      }
      uint32_t kv_iter = 0;
      int it = 0;
      for (int i = blockIdx.x; i < blocks; i += gridDim.x, ++it) {
        const int qb = query_block_at(args, i);
        const int slot = it % kQStages;
        sm90::mbarrier_wait(&s.q_empty[slot], ((it / kQStages) & 1) ^ 1);
        const int previous = i - kQStages * static_cast<int>(gridDim.x);
        epilogue.refill_slot(slot, previous >= 0 ? query_block_at(args, previous) : -1, qb, lane);
        QueryBlockRanges<S::kQueries> ranges;
        compute_ranges(args, qb, lane, &ranges);
        if (lane == 0) s.ranges[slot] = ranges;
        const int t0 = qb * S::kQueries;
        for (int i = lane; i < S::kQueries * kHeads; i += 32) {
          const int t = t0 + i / kHeads;
          s.weights[slot][i] =
              t < args.num_queries ? args.weights[int64_t{t0} * kHeads + i] : 0.0f;
        }
        if (lane == 0) {
          sm90::mbarrier_arrive_expect_bytes(&s.q_full[slot], S::kQRows * kHeadDim);
          sm90::tma_load_2d(s.q[slot], q_map, 0, t0 * kHeads, &s.q_full[slot]);
        } else {
          sm90::mbarrier_arrive(&s.q_full[slot]);
        }
        const int32_t sample_count = hot_sample_count(args);
        // Sample tiles: gathered with cp.async, published kSampleTilesInFlight tiles later (the
        // wait, then the fence that hands generic-proxy writes to the tensor cores).
        const uint32_t first_sample_iter = kv_iter;
        for (int tile = 0; tile < ranges.num_sample_tiles; ++tile, ++kv_iter) {
          const uint32_t stage = kv_iter % kKvStages;
          sm90::mbarrier_wait(&s.kv_empty[stage], ((kv_iter / kKvStages) & 1) ^ 1);
          start_sample_tile(args, sample_count, tile * kTileKeys, s.kv[stage],
                            s.sample_keys[stage], lane);
          if (tile >= kSampleTilesInFlight) {
            sm90::cp_async_wait<kSampleTilesInFlight>();
            sm90::fence_proxy_async_shared();
            sm90::mbarrier_arrive(&s.kv_full[(kv_iter - kSampleTilesInFlight) % kKvStages]);
          }
        }
        sm90::cp_async_wait<0>();
        sm90::fence_proxy_async_shared();
        for (uint32_t iter = first_sample_iter + static_cast<uint32_t>(
                                 max(ranges.num_sample_tiles - kSampleTilesInFlight, 0));
             iter < kv_iter; ++iter) {
          sm90::mbarrier_arrive(&s.kv_full[iter % kKvStages]);
        }
        // Key tiles: TMA.
        for (int tile = 0; tile < ranges.walk_tiles; ++tile, ++kv_iter) {
          const uint32_t stage = kv_iter % kKvStages;
          sm90::mbarrier_wait(&s.kv_empty[stage], ((kv_iter / kKvStages) & 1) ^ 1);
          if (lane == 0) {
            sm90::mbarrier_arrive_expect_bytes(&s.kv_full[stage], kTileKeys * kHeadDim);
            const int key = ranges.first_key + tile_order::key_tile(ranges.order, tile) * kTileKeys;
            sm90::tma_load_2d(s.kv[stage], kv_map, 0, key, &s.kv_full[stage]);
          } else {
            sm90::mbarrier_arrive(&s.kv_full[stage]);
          }
        }
      }
      // The last query blocks of each slot, once the math is done with them.
      for (int j = max(it, kQStages); j < it + kQStages; ++j) {
        const int previous =
            static_cast<int>(blockIdx.x) + (j - kQStages) * static_cast<int>(gridDim.x);
        sm90::mbarrier_wait(&s.q_empty[j % kQStages], ((j / kQStages) & 1) ^ 1);
        epilogue.refill_slot(j % kQStages, query_block_at(args, previous), -1, lane);
      }
    } else {
      // 4. The side warps.
      const int side_thread = static_cast<int>(threadIdx.x) - R::kMathThreads - 32;
      for (int i = blockIdx.x; i < blocks; i += gridDim.x) {
        const int qb = query_block_at(args, i);
        QueryBlockRanges<S::kQueries> ranges;
        compute_ranges(args, qb, lane, &ranges);
        epilogue.side_work(qb, ranges, side_thread, 96);
      }
    }
    return;
  }

  // 2. The math warpgroups.
  sm90::warpgroup_registers_increase<R::kMathRegisters>();
  if constexpr (kGroups == 2) {
    run_math_two_banks<kHeads>(args, s, epilogue, warp, lane);
  } else {
    run_math_pairs<kHeads, Epilogue::kTileOrder>(args, s, epilogue, warp, lane);
  }
}

}  // namespace litetopk::cuda_indexer::sm90core
