// Sparse MLA attention on Hopper (sparse_attention in litetopk/attention.h, algorithms per-query
// and union-packed): one block computes 64 query-head rows against a list of key slots, with
// warpgroup MMAs (wgmma, bf16, fp32 accumulators) and warp specialization.
//
// The rows and the slot list of a block:
// - per query: 64 heads of one query (h_q 64 or 128: h_q / 64 blocks per query, adjacent, so the
//   second one finds the query's rows in L2), or the h_q heads of one query with the rest of the
//   64 MMA rows zero (h_q 16 and 32, what FlashMLA's padding to 64 heads computes too); the slots
//   are the query's row of `indices`, a slot outside [0, s_kv) skipped.
// - union-packed (LiteDSA): the h_q heads of each of G = 64 / h_q neighbouring queries; the slots
//   are their union (sorted, each token once, built by union_packing.cu), each carrying the bits of
//   the queries that selected it; row (query g, head h) takes a slot only when bit g is set. A
//   group that union_packing.cu left unpacked runs per query, one block per query.
//
// Pipeline of sparse_attention_sm90_kernel (384 threads: warpgroup 0 loads, 1 and 2 compute; the
// slots go by pairs of 64-slot tiles, tile 2 b + h belonging to math warpgroup h and its stage h):
// 1. Loader: the block's 64 q rows into shared memory (cp.async, 128-byte swizzle, d_qk / 64
//    slabs of 64 columns); then per tile, per half of its columns once that half's readers
//    released it, the slots' kv rows (cp.async; a skipped slot, or one past the list, gets a zero
//    row), completing on the half's full barrier; with the left half, the slots' query bits. The
//    slot words of the next pair are loaded while this pair's copies are issued.
// 2. Math warpgroup h: S = Q K^T over its own tile (m64n64k16 wgmma from shared memory, the left
//    half's slabs while the right half lands), scaled to base-2 logits (sm_scale * log2 e); a
//    slot the row does not take is -inf.
// 3. Running max, handed on: warpgroup 0 continues it over tile 2 b (m_0) and hands m_0 and its
//    P to warpgroup 1, which continues it over tile 2 b + 1 (m_1) and hands back. P = 2^(S - m)
//    rounded to bf16, kept in registers and written to the warpgroup's P tile.
// 4. O[:, 256 h .. 256 h + 255] += P_0 V_0, then += P_1 V_1 (m64n256k16 wgmma, the own tile's P
//    from registers, the other's from its P tile, V = the tiles' first 512 columns read N-major in
//    place), O and the running sum l rescaled to each tile's max before; each half of a stage is
//    released as soon as its last reader is done. Warpgroup 0 runs ahead of 1 by a tile's softmax,
//    so one's matrix products cover the other's waits.
// 5. out = O / l (l summed over both warpgroups) in bf16 for the block's real rows;
//    max_logits = m and lse = m + log2 l (base 2); a row with no valid slot gets out 0 and -inf.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "cuda/attention/attention_kernels.h"
#include "cuda/common/async_copy_sm90.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/common/wgmma_sm90.cuh"
#include "cuda/decode/decode_mma_sm90.cuh"

namespace litetopk::cuda_attention {
namespace {

constexpr int kRows = static_cast<int>(heuristics::kAttentionMmaRows);  // MMA rows per block
constexpr int kTile = 64;           // slots per tile
constexpr int kDv = 512;
constexpr int kSlabBytes = kRows * 128;  // 64 rows (or slots) x 64 bf16 columns
constexpr int kThreads = 384;
constexpr int kMathThreads = 256;
// Named barriers of the two math warpgroups: a tile's running max and P handed from warpgroup 0
// to 1 and from 1 to 0, and the final sums.
constexpr uint32_t kHandoffBarrier0 = 1;  // + h: from warpgroup h

constexpr uint32_t kSumBarrier = 3;
// mbarriers: full and empty per (stage, half of the columns), then q. Half 0 of a stage is its
// slabs 0..3 (the first 256 value columns), half 1 the rest (the other 256, and the rope slab).
constexpr int kFullBarrier = 0;   // + 2 stage + half
constexpr int kEmptyBarrier = 4;  // + 2 stage + half
constexpr int kQBarrier = 8;
constexpr int kBarrierCount = 9;
constexpr int kLeftSlabs = 4;

template <int kSlabs>
struct Layout {
  static constexpr int kQ = 0;
  static constexpr int kStage0 = kSlabs * kSlabBytes;
  static constexpr int kStageBytes = kSlabs * kSlabBytes;
  // The P tile of math warpgroup h for pair b (64 x 64 bf16): with d_qk 576 it takes the rope
  // slab of its own stage (dead once its Q K^T is done, reloaded only after the other warpgroup
  // read P); with d_qk 512 a buffer per (h, b % 2) (the other warpgroup reads pair b's while h
  // writes pair b + 1's).
  static constexpr int kPRegion = kStage0 + 2 * kStageBytes;
  __host__ __device__ static constexpr int p(int half, int pair) {
    return kSlabs == 9 ? kStage0 + half * kStageBytes + 8 * kSlabBytes
                       : kPRegion + (2 * half + (pair & 1)) * kSlabBytes;
  }
  static constexpr int kMaxPart = kPRegion + (kSlabs == 9 ? 0 : 4 * kSlabBytes);  // float [2][64]
  static constexpr int kSumPart = kMaxPart + 2 * kRows * 4;                         // float [2][64]
  static constexpr int kBits = kSumPart + 2 * kRows * 4;  // uint8 [2][64]: each slot's query bits
  static constexpr int kBarriers = kBits + 2 * kTile;
  static constexpr int kBytes = kBarriers + kBarrierCount * 8;
};

// Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a 128-byte swizzled slab.
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  return static_cast<uint32_t>(row * 128 + ((chunk ^ (row & 7)) << 4));
}

// What a block computes, decoded the same way by every thread.
struct BlockWork {
  int64_t query0;          // first query
  int queries;             // queries whose rows are real (1, or up to G packed)
  int rows_per_query;      // h_q, or 64 for h_q 128
  int head0;               // first head (h_q 128: 0 or 64)
  const int32_t* slots;    // the slot words
  int count;               // slots
  bool packed;             // words are token << 4 | query bits, else tokens
};

__device__ __forceinline__ bool decode_work(const SparseAttentionArgs& a, BlockWork* w) {
  const int64_t block = blockIdx.x;
  if (a.group == 1) {
    const int blocks_per_query = a.h_q > kRows ? a.h_q / kRows : 1;
    w->query0 = block / blocks_per_query;
    w->head0 = static_cast<int>(block % blocks_per_query) * kRows;
    w->rows_per_query = a.h_q > kRows ? kRows : a.h_q;
  } else {
    const int64_t group = block / a.group;
    const int member = static_cast<int>(block % a.group);
    const int count = a.union_counts[group];
    w->head0 = 0;
    w->rows_per_query = a.h_q;
    if (count >= 0) {
      if (member != 0) return false;
      w->query0 = group * a.group;
      w->queries = union_group_queries(a, w->query0);
      w->slots = a.union_slots + group * a.group * a.topk;
      w->count = count;
      w->packed = true;
      return true;
    }
    w->query0 = group * a.group + member;
    if (w->query0 >= a.s_q) return false;
  }
  w->queries = 1;
  w->slots = a.indices + w->query0 * a.topk;
  w->count = a.topk;
  w->packed = false;
  return true;
}

__device__ __forceinline__ int32_t slot_token(const BlockWork& w, int32_t word) {
  return w.packed ? (word >> kUnionTokenShift) : word;
}

// 1. Loader warpgroup (128 threads). Thread t moves 16-byte chunk t % 8 of every 64-column slab
// of rows t / 8 + 16 i (i < 4) of each tile: with the 128-byte swizzle that chunk lands at the
// same place in each of its rows (the rows share row % 8), so every copy is one instruction with a
// constant offset. Tile t goes to stage t % 2 (math warpgroup t % 2's), in halves of its columns,
// each with its own full and empty barrier, so that a half is refilled as soon as its readers
// are done.
template <int kSlabs>
__device__ void load_tiles(const SparseAttentionArgs& a, const BlockWork& w, unsigned char* smem,
                           int tiles) {
  using L = Layout<kSlabs>;
  constexpr int kRowsPerThread = 4;
  const int thread = static_cast<int>(threadIdx.x);
  const int chunk = thread % 8;
  const int row0 = thread / 8;  // and + 16 i
  const uint32_t row_offset =
      static_cast<uint32_t>(row0 * 128 + ((chunk ^ (row0 & 7)) << 4));  // + 16 i * 128
  auto* barriers = reinterpret_cast<uint64_t*>(smem + L::kBarriers);
  auto* bits = smem + L::kBits;
  constexpr int kDqk = kSlabs * 64;
  // kv rows stay in L2 before other lines: neighbouring queries and a query's other head block
  // gather many of the same rows.
  const uint64_t kv_policy = sm90::l2_evict_last_policy();
  const uint64_t q_policy = sm90::l2_evict_first_policy();  // q rows are read once

  // q rows: row r is head r % rows_per_query of query r / rows_per_query.
#pragma unroll
  for (int i = 0; i < kRowsPerThread; ++i) {
    const int row = row0 + 16 * i;
    const int member = row / w.rows_per_query;
    const bool real = member < w.queries;
    const __nv_bfloat16* source =
        a.q + ((w.query0 + (real ? member : 0)) * a.h_q + w.head0 + row % w.rows_per_query) *
                  static_cast<int64_t>(kDqk) + chunk * 8;
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab) {
      sm90::cp_async_16(smem + L::kQ + slab * kSlabBytes + row_offset + 16 * i * 128,
                        source + slab * 64, real, q_policy);
    }
  }
  sm90::cp_async_arrive(&barriers[kQBarrier]);

  // The slot words of a pair's rows (both tiles), loaded one pair ahead so that their latency
  // hides behind the previous pair's waits and copies.
  int32_t words[2][kRowsPerThread];
  auto load_words = [&](int pair, int32_t (&into)[2][kRowsPerThread]) {
#pragma unroll
    for (int stage = 0; stage < 2; ++stage) {
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const int slot = (2 * pair + stage) * kTile + row0 + 16 * i;
        into[stage][i] = slot < w.count ? __ldg(w.slots + slot) : -1;
      }
    }
  };
  load_words(0, words);
  for (int pair = 0; 2 * pair < tiles; ++pair) {
    const uint32_t parity = (pair & 1) ^ 1;
    // The rows' sources (a skipped slot reads nothing and gets zeros) and query bits, both tiles.
    const __nv_bfloat16* source[2][kRowsPerThread];
    bool valid[2][kRowsPerThread];
    uint32_t row_bits[2][kRowsPerThread];
#pragma unroll
    for (int stage = 0; stage < 2; ++stage) {
#pragma unroll
      for (int i = 0; i < kRowsPerThread; ++i) {
        const int slot = (2 * pair + stage) * kTile + row0 + 16 * i;
        const int32_t word = words[stage][i];
        const int32_t token = slot_token(w, word);
        valid[stage][i] = slot < w.count && (w.packed || (word >= 0 && word < a.s_kv));
        row_bits[stage][i] =
            !valid[stage][i] ? 0u : (w.packed ? static_cast<uint32_t>(word) & kUnionBitsMask : 1u);
        source[stage][i] = a.kv + (valid[stage][i] ? int64_t{token} * kDqk : 0) + chunk * 8;
      }
    }
    load_words(pair + 1, words);
#pragma unroll
    for (int stage = 0; stage < 2; ++stage) {
      unsigned char* stage_base = smem + L::kStage0 + stage * L::kStageBytes + row_offset;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        sm90::mbarrier_wait(&barriers[kEmptyBarrier + 2 * stage + half], parity);
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
#pragma unroll
          for (int slab = half * kLeftSlabs; slab < (half ? kSlabs : kLeftSlabs); ++slab) {
            sm90::cp_async_16(stage_base + slab * kSlabBytes + 16 * i * 128,
                              source[stage][i] + slab * 64, valid[stage][i], kv_policy);
          }
        }
        sm90::cp_async_arrive(&barriers[kFullBarrier + 2 * stage + half]);
        if (half == 0) {
          // The slots' query bits, published by one plain arrival per warp.
          if (chunk == 0) {
#pragma unroll
            for (int i = 0; i < kRowsPerThread; ++i) {
              bits[stage * kTile + row0 + 16 * i] = static_cast<unsigned char>(row_bits[stage][i]);
            }
          }
          __syncwarp();
          if (thread % 32 == 0) sm90::mbarrier_arrive(&barriers[kFullBarrier + 2 * stage]);
        }
      }
    }
  }
  sm90::cp_async_wait<0>();
}

// 2-5. Math warpgroup `half` (0 or 1), its 128 threads. Per pair of tiles (2 b + half is its own,
// in stage `half`): S of its own tile; the running max m_0 after tile 2 b (warpgroup 0, handed
// to 1) and m_1 after tile 2 b + 1 (warpgroup 1, handed back); P of the own tile in registers
// and in shared memory; then O[:, 256 half ..] += P_0 V_0 + P_1 V_1 in tile order, rescaled
// between them. Warpgroup 0 does not wait for warpgroup 1 before its own tile's P V, so the two
// run staggered and one's matrix products cover the other's waits.
template <int kSlabs>
__device__ void compute_rows(const SparseAttentionArgs& a, const BlockWork& w, unsigned char* smem,
                             int tiles, int half) {
  using L = Layout<kSlabs>;
  const int thread = static_cast<int>(threadIdx.x) - 128 * (1 + half);
  const int warp = thread / 32;
  const int lane = thread % 32;
  const int row0 = warp * 16 + lane / 4;  // and row0 + 8
  const int column = 2 * (lane % 4);      // and + 1, + 8 j
  auto* barriers = reinterpret_cast<uint64_t*>(smem + L::kBarriers);
  auto* max_part = reinterpret_cast<float*>(smem + L::kMaxPart);
  auto* sum_part = reinterpret_cast<float*>(smem + L::kSumPart);
  unsigned char* own_stage = smem + L::kStage0 + half * L::kStageBytes;
  unsigned char* other_stage = smem + L::kStage0 + (1 - half) * L::kStageBytes;
  // The packed query of each of the thread's two rows (its bit in a slot word).
  const uint32_t member0 = static_cast<uint32_t>(row0 / w.rows_per_query);
  const uint32_t member1 = static_cast<uint32_t>((row0 + 8) / w.rows_per_query);

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  float s[32] = {};
  uint32_t p[16];
  float m[2] = {-INFINITY, -INFINITY};  // the running max O and l are scaled to
  float l[2] = {0.0f, 0.0f};            // this warpgroup's tiles' sums

  // O and l times 2^(m - next) for the running max `next` (a row still at -inf stays as is).
  auto rescale = [&](const float (&next)[2]) {
    float factor[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      factor[r] = next[r] == -INFINITY ? 1.0f : exp2f(m[r] - next[r]);
      m[r] = next[r];
      l[r] *= factor[r];
    }
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] *= factor[(i >> 1) & 1];
  };

  const uint32_t q_low = sm90::swizzled_descriptor_low(smem + L::kQ);
  const uint32_t k_low = sm90::swizzled_descriptor_low(own_stage);
  // The halves of the stages this warpgroup's value columns come from: its own tile's and the
  // other tile's (warpgroup 0: both left halves, warpgroup 1: both right halves).
  const int v_slab = half * kLeftSlabs;
  sm90::mbarrier_wait(&barriers[kQBarrier], 0);
  for (int pair = 0; 2 * pair < tiles; ++pair) {
    const uint32_t parity = pair & 1;
    unsigned char* own_p = smem + L::p(half, pair);
    const uint32_t other_p_low = sm90::swizzled_descriptor_low(smem + L::p(1 - half, pair));

    // 2. The left half's slabs as soon as they land, then the right half's.
    sm90::mbarrier_wait(&barriers[kFullBarrier + 2 * half], parity);
    sm90::fence_proxy_async_shared();
    sm90::fence_accumulators(s);
    sm90::wgmma_fence();
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab) {
      if (slab == kLeftSlabs) {
        sm90::mbarrier_wait(&barriers[kFullBarrier + 2 * half + 1], parity);
        sm90::fence_proxy_async_shared();
        sm90::wgmma_fence();
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t offset = (slab * kSlabBytes + k * 32) >> 4;
        sm90::wgmma_m64n64k16_bf16(s, sm90::swizzled_descriptor(q_low + offset),
                                   sm90::swizzled_descriptor(k_low + offset), slab + k > 0);
      }
    }
    sm90::wgmma_commit();
    // Which of the tile's 16 slots per row this thread's rows take (bit 2 j + e: column
    // 8 j + column + e), from the query bits the loader published with the left half.
    uint32_t take0 = 0, take1 = 0;
    const unsigned char* tile_bits = smem + L::kBits + half * kTile;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t pair_bits =
          *reinterpret_cast<const uint16_t*>(tile_bits + 8 * j + column);  // two slots
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint32_t slot_bits = (pair_bits >> (8 * e)) & 0xffu;
        take0 |= ((slot_bits >> member0) & 1u) << (2 * j + e);
        take1 |= ((slot_bits >> member1) & 1u) << (2 * j + e);
      }
    }
    sm90::wgmma_wait<0>();
    sm90::fence_accumulators(s);
    // Warpgroup 1's Q K^T was its last read of its stage's left half (its bits are read too).
    __syncwarp();
    if (half == 1 && lane == 0) sm90::mbarrier_arrive(&barriers[kEmptyBarrier + 2 * 1]);

    // 3. Warpgroup 0 continues the running max from the last pair, warpgroup 1 from tile 2 b.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int r = (i >> 1) & 1;
      const bool take = ((r ? take1 : take0) >> (2 * (i >> 2) + (i & 1))) & 1u;
      s[i] = take ? s[i] * a.scale2 : -INFINITY;
      tile_max[r] = fmaxf(tile_max[r], s[i]);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
    }
    float tile0_max[2] = {m[0], m[1]};  // warpgroup 1: the running max after tile 2 b
    if (half == 1) {
      sm90::named_barrier(kHandoffBarrier0, kMathThreads);  // P_0 and m_0 are ready
      tile0_max[0] = max_part[row0];
      tile0_max[1] = max_part[row0 + 8];
    }
    float next[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      next[r] = fmaxf(half == 1 ? tile0_max[r] : m[r], tile_max[r]);
      base[r] = next[r] == -INFINITY ? 0.0f : next[r];
    }
    float own_sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = 8 * j + column;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float p0 = exp2f(s[4 * j + 2 * r] - base[r]);
        const float p1 = exp2f(s[4 * j + 2 * r + 1] - base[r]);
        own_sum[r] += p0 + p1;
        p[2 * j + r] = decode::pack2<__nv_bfloat16>(p0, p1);
        *reinterpret_cast<uint32_t*>(own_p + swizzled(row0 + 8 * r, col / 8) + (col % 8) * 2) =
            p[2 * j + r];
      }
    }
    if (lane % 4 == 0) {
      max_part[half * kRows + row0] = next[0];
      max_part[half * kRows + row0 + 8] = next[1];
    }
    sm90::fence_fragment(p);
    sm90::fence_proxy_async_shared();
    sm90::named_barrier_arrive(kHandoffBarrier0 + half, kMathThreads);

    // 4. Tile 2 b, then tile 2 b + 1, each at its running max: O and l rescaled to it, then the
    // tile's P V (the own tile's P from registers, the other's from its P tile).
    const uint64_t own_v =
        sm90::n_major_descriptor(own_stage + v_slab * kSlabBytes, kSlabBytes);
    const uint64_t other_v =
        sm90::n_major_descriptor(other_stage + v_slab * kSlabBytes, kSlabBytes);
    auto add_own_tile = [&]() {
      rescale(next);
      l[0] += own_sum[0];
      l[1] += own_sum[1];
      sm90::fence_accumulators(o);
      sm90::wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t fragment[4] = {p[4 * k], p[4 * k + 1], p[4 * k + 2], p[4 * k + 3]};
        sm90::wgmma_m64n256k16_bf16_rs_n_major_b(o, fragment, own_v + ((k * 16 * 128) >> 4));
      }
      sm90::wgmma_commit();
      sm90::wgmma_wait<0>();
      sm90::fence_accumulators(o);
      sm90::fence_fragment(p);
      __syncwarp();
    };
    auto add_other_tile = [&](const float (&tile_max_after)[2]) {
      rescale(tile_max_after);
      sm90::fence_accumulators(o);
      sm90::wgmma_fence();
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        sm90::wgmma_m64n256k16_bf16_n_major_b(
            o, sm90::swizzled_descriptor(other_p_low + ((k * 32) >> 4)),
            other_v + ((k * 16 * 128) >> 4), true);
      }
      sm90::wgmma_commit();
      sm90::wgmma_wait<0>();
      sm90::fence_accumulators(o);
      __syncwarp();
    };
    if (half == 0) {
      add_own_tile();
      if (lane == 0) {  // done with its stage: the left half, and its Q K^T of the right
        sm90::mbarrier_arrive(&barriers[kEmptyBarrier + 0]);
        sm90::mbarrier_arrive(&barriers[kEmptyBarrier + 1]);
      }
      sm90::named_barrier(kHandoffBarrier0 + 1, kMathThreads);  // P_1 and m_1 are ready
      const float after1[2] = {max_part[kRows + row0], max_part[kRows + row0 + 8]};
      add_other_tile(after1);
      if (lane == 0) {  // done with stage 1: its left half's values and P_1 in its right half
        sm90::mbarrier_arrive(&barriers[kEmptyBarrier + 2]);
        sm90::mbarrier_arrive(&barriers[kEmptyBarrier + 3]);
      }
    } else {
      add_other_tile(tile0_max);
      if (lane == 0) {  // done with stage 0's right half: its values and P_0
        sm90::mbarrier_arrive(&barriers[kEmptyBarrier + 1]);
      }
      add_own_tile();
      if (lane == 0) {  // done with its stage's right half
        sm90::mbarrier_arrive(&barriers[kEmptyBarrier + 3]);
      }
    }
  }

  // 5.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  if (lane % 4 == 0) {
    sum_part[half * kRows + row0] = l[0];
    sum_part[half * kRows + row0 + 8] = l[1];
  }
  sm90::named_barrier(kSumBarrier, kMathThreads);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    const int member = row / w.rows_per_query;
    if (member >= w.queries) continue;
    const float sum = l[r] + sum_part[(1 - half) * kRows + row];
    const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
    const int64_t at = (w.query0 + member) * a.h_q + w.head0 + row % w.rows_per_query;
    __nv_bfloat16* out_row = a.out + at * kDv + half * 256;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      *reinterpret_cast<__nv_bfloat162*>(out_row + 8 * j + column) =
          __floats2bfloat162_rn(o[4 * j + 2 * r] * inverse, o[4 * j + 2 * r + 1] * inverse);
    }
    if (half == 0 && lane % 4 == 0) {
      if (a.max_logits != nullptr) a.max_logits[at] = m[r];
      if (a.lse != nullptr) a.lse[at] = sum > 0.0f ? m[r] + log2f(sum) : -INFINITY;
    }
  }
}

static_assert(Layout<9>::kBytes <= 227 * 1024 && Layout<8>::kBytes <= 227 * 1024,
              "shared memory of one block");

template <int kSlabs>
__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_sm90_kernel(const SparseAttentionArgs args) {
  extern __shared__ __align__(1024) unsigned char smem[];
  using L = Layout<kSlabs>;
  BlockWork work;
  if (!decode_work(args, &work)) return;
  const int tiles = (work.count + 2 * kTile - 1) / (2 * kTile) * 2;  // whole pairs
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  auto* barriers = reinterpret_cast<uint64_t*>(smem + L::kBarriers);
  if (threadIdx.x == 0) {
    // Full: every loader thread's copies, and for a left half the loader warps' query bits.
    // Empty: the math warps that read the half (stage 0's left half: warpgroup 0's only).
    for (int stage = 0; stage < 2; ++stage) {
      sm90::mbarrier_init(&barriers[kFullBarrier + 2 * stage], 128 + 4);
      sm90::mbarrier_init(&barriers[kFullBarrier + 2 * stage + 1], 128);
      sm90::mbarrier_init(&barriers[kEmptyBarrier + 2 * stage], stage == 0 ? 4 : 8);
      sm90::mbarrier_init(&barriers[kEmptyBarrier + 2 * stage + 1], 8);
    }
    sm90::mbarrier_init(&barriers[kQBarrier], 128);
    sm90::fence_barrier_init();
  }
  __syncthreads();
  if (warpgroup == 0) {
    sm90::warpgroup_registers_decrease<56>();
    load_tiles<kSlabs>(args, work, smem, tiles);
  } else {
    sm90::warpgroup_registers_increase<224>();
    compute_rows<kSlabs>(args, work, smem, tiles, warpgroup - 1);
  }
}

template <int kSlabs>
Status launch(const SparseAttentionArgs& args, int64_t blocks, cudaStream_t stream) {
  const auto* kernel = reinterpret_cast<const void*>(sparse_attention_sm90_kernel<kSlabs>);
  constexpr int kSmem = Layout<kSlabs>::kBytes;
  if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, kSmem); !s) return s;
  sparse_attention_sm90_kernel<kSlabs>
      <<<static_cast<unsigned>(blocks), kThreads, kSmem, stream>>>(args);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace

Status launch_sparse_attention_sm90(const SparseAttentionArgs& args, cudaStream_t stream) {
  const int64_t groups = (args.s_q + args.group - 1) / args.group;
  const int64_t blocks = args.group == 1 ? args.s_q * (args.h_q > kRows ? args.h_q / kRows : 1)
                                         : groups * args.group;
  if (blocks == 0) return Status::ok();
  if (blocks > 0x7fffffff) {
    return Status(StatusCode::kUnsupported,
                  "sparse_attention: s_q * max(1, h_q / 64) must be < 2^31 (one block each)");
  }
  return args.d_qk == 576 ? launch<9>(args, blocks, stream) : launch<8>(args, blocks, stream);
}

}  // namespace litetopk::cuda_attention
