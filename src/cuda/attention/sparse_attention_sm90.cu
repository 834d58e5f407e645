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
// slots go by pairs of 64-slot tiles, tile 2 b + h belonging to math warpgroup h):
// 1. Loader: the block's 64 q rows into shared memory (cp.async, 128-byte swizzle, d_qk / 64
//    slabs of 64 columns), then each tile into its warpgroup's stage once both math warpgroups
//    released it: the slots' kv rows (cp.async; a skipped slot, or one past the list, gets a zero
//    row); completion lands on the stage's full barrier.
// 2. Math warpgroup h: S = Q K^T over its own tile (m64n64k16 wgmma, both operands from shared
//    memory), scaled to base-2 logits (sm_scale * log2 e); a slot the row does not take is -inf.
// 3. Online softmax over the pair: the two tiles' row maxima meet in shared memory, giving the new
//    running max m; P = 2^(S - m) rounded to bf16, kept in registers and written to the
//    warpgroup's P tile; the running sums l (each thread its own columns) and O scaled by
//    2^(m_old - m).
// 4. O[:, 256 h .. 256 h + 255] += P_own V_own (P from registers) + P_other V_other (P from the
//    other warpgroup's P tile), m64n256k16 wgmma with V = the tiles' first 512 columns read
//    N-major in place; then both stages are released.
// 5. out = O / l (l summed over both warpgroups) in bf16 for the block's real rows;
//    max_logits = m and lse = m + log2 l (base 2); a row with no valid slot gets out 0 and -inf.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>

#include "cuda/attention/attention_kernels.h"
#include "cuda/attention/attention_wgmma_sm90.cuh"
#include "cuda/common/async_copy_sm90.cuh"
#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"

namespace litetopk::cuda_attention {
namespace {

constexpr int kRows = 64;           // MMA rows per block
constexpr int kTile = 64;           // slots per tile
constexpr int kDv = 512;
constexpr int kSlabBytes = kRows * 128;  // 64 rows (or slots) x 64 bf16 columns
constexpr int kThreads = 384;
constexpr int kMathThreads = 256;
constexpr uint32_t kSoftmaxBarrier = 1;  // named barriers of the two math warpgroups
constexpr uint32_t kProbabilityBarrier = 2;
constexpr int kFullBarrier = 0;  // mbarriers: full[2], empty[2], q
constexpr int kEmptyBarrier = 2;
constexpr int kQBarrier = 4;

template <int kSlabs>
struct Layout {
  static constexpr int kQ = 0;
  static constexpr int kStage0 = kSlabs * kSlabBytes;
  static constexpr int kStageBytes = kSlabs * kSlabBytes;
  // The P tile of math warpgroup h (64 x 64 bf16): with d_qk 576 it takes the rope slab of its own
  // stage (dead once its Q K^T is done, reloaded only after both warpgroups release the stage);
  // with d_qk 512 a buffer of its own.
  static constexpr int kPRegion = kStage0 + 2 * kStageBytes;
  __host__ __device__ static constexpr int p(int half) {
    return kSlabs == 9 ? kStage0 + half * kStageBytes + 8 * kSlabBytes
                       : kPRegion + half * kSlabBytes;
  }
  static constexpr int kMaxPart = kPRegion + (kSlabs == 9 ? 0 : 2 * kSlabBytes);  // float [2][64]
  static constexpr int kSumPart = kMaxPart + 2 * kRows * 4;                         // float [2][64]
  static constexpr int kBarriers = kSumPart + 2 * kRows * 4;  // full[2], empty[2], q
  static constexpr int kBytes = kBarriers + 5 * 8;
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
      const int64_t left = a.s_q - w->query0;
      w->queries = left < a.group ? static_cast<int>(left) : a.group;
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

// The query bits of a slot word: bit g set when packed query g takes it (bit 0 for a valid
// per-query slot); 0 for a skipped slot or one past the list.
__device__ __forceinline__ uint32_t slot_bits(const SparseAttentionArgs& a, const BlockWork& w,
                                              int slot) {
  if (slot >= w.count) return 0;
  const int32_t word = __ldg(w.slots + slot);
  if (w.packed) return static_cast<uint32_t>(word) & kUnionBitsMask;
  return word >= 0 && word < a.s_kv ? 1u : 0u;
}
__device__ __forceinline__ int32_t slot_token(const BlockWork& w, int32_t word) {
  return w.packed ? (word >> kUnionTokenShift) : word;
}

// 1. Loader warpgroup (128 threads): warp v moves rows 16 v .. 16 v + 15 of every tile; tile t
// goes to stage t % 2, the stage of math warpgroup t % 2.
template <int kSlabs>
__device__ void load_tiles(const SparseAttentionArgs& a, const BlockWork& w, unsigned char* smem,
                           int tiles) {
  using L = Layout<kSlabs>;
  constexpr int kChunks = kSlabs * 8;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  auto* barriers = reinterpret_cast<uint64_t*>(smem + L::kBarriers);
  const int d_qk = kSlabs * 64;

  // q rows: row r is head r % rows_per_query of query r / rows_per_query.
  for (int i = 0; i < 16; ++i) {
    const int row = warp * 16 + i;
    const int member = row / w.rows_per_query;
    const bool real = member < w.queries;
    const __nv_bfloat16* source =
        a.q + ((w.query0 + (real ? member : 0)) * a.h_q + w.head0 + row % w.rows_per_query) *
                  static_cast<int64_t>(d_qk);
    for (int chunk = lane; chunk < kChunks; chunk += 32) {
      sm90::cp_async_16(smem + L::kQ + (chunk / 8) * kSlabBytes + swizzled(row, chunk % 8),
                        source + chunk * 8, real);
    }
  }
  sm90::cp_async_arrive(&barriers[kQBarrier]);

  for (int tile = 0; tile < tiles; ++tile) {
    const int stage = tile & 1;
    sm90::mbarrier_wait(&barriers[kEmptyBarrier + stage], ((tile >> 1) & 1) ^ 1);
    // Lanes 0..15 read the warp's 16 slot words; each row is then shuffled to the whole warp.
    const int slot = tile * kTile + warp * 16 + (lane & 15);
    const int32_t word = slot < w.count ? __ldg(w.slots + slot) : -1;
    const int32_t token = slot_token(w, word);
    const bool valid = slot < w.count && (w.packed || (word >= 0 && word < a.s_kv));
    unsigned char* stage_base = smem + L::kStage0 + stage * L::kStageBytes;
    for (int i = 0; i < 16; ++i) {
      const int32_t row_token = __shfl_sync(0xffffffffu, token, i);
      const bool row_valid = __shfl_sync(0xffffffffu, valid, i);
      const int row = warp * 16 + i;
      const __nv_bfloat16* source = a.kv + (row_valid ? int64_t{row_token} * d_qk : 0);
      for (int chunk = lane; chunk < kChunks; chunk += 32) {
        sm90::cp_async_16(stage_base + (chunk / 8) * kSlabBytes + swizzled(row, chunk % 8),
                          source + chunk * 8, row_valid);
      }
    }
    sm90::cp_async_arrive(&barriers[kFullBarrier + stage]);
  }
  sm90::cp_async_wait<0>();
}

// Rounds a pair of probabilities to bf16 and packs them (low: the first).
__device__ __forceinline__ uint32_t pack_bf16(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// 2-5. Math warpgroup `half` (0 or 1), its 128 threads. Per pair of tiles (2 b + half is its own,
// in stage `half`): S of its own tile, the shared running max, P of its own tile in registers
// and in shared memory, then O[:, 256 half ..] += P_own V_own + P_other V_other.
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
  unsigned char* own_p = smem + L::p(half);
  unsigned char* other_p = smem + L::p(1 - half);
  // The packed query of each of the thread's two rows (its bit in a slot word).
  const uint32_t member0 = static_cast<uint32_t>(row0 / w.rows_per_query);
  const uint32_t member1 = static_cast<uint32_t>((row0 + 8) / w.rows_per_query);

  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.0f;
  float s[32] = {};
  uint32_t p[16];
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};

  const uint32_t q_low = sm90::swizzled_descriptor_low(smem + L::kQ);
  const uint32_t k_low = sm90::swizzled_descriptor_low(own_stage);
  const uint32_t other_p_low = sm90::swizzled_descriptor_low(other_p);
  sm90::mbarrier_wait(&barriers[kQBarrier], 0);
  for (int pair = 0; 2 * pair < tiles; ++pair) {
    const uint32_t parity = pair & 1;
    // Which of the own tile's 16 slots per row this thread's rows take (bit 2 j + e: column
    // 8 j + column + e).
    uint32_t take0 = 0, take1 = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const uint32_t bits = slot_bits(a, w, (2 * pair + half) * kTile + 8 * j + column + e);
        take0 |= ((bits >> member0) & 1u) << (2 * j + e);
        take1 |= ((bits >> member1) & 1u) << (2 * j + e);
      }
    }
    sm90::mbarrier_wait(&barriers[kFullBarrier + half], parity);
    sm90::fence_proxy_async_shared();

    // 2.
    sm90::fence_accumulators(s);
    sm90::wgmma_fence();
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t offset = (slab * kSlabBytes + k * 32) >> 4;
        sm90::wgmma_m64n64k16_bf16(s, sm90::swizzled_descriptor(q_low + offset),
                                   sm90::swizzled_descriptor(k_low + offset), slab + k > 0);
      }
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_accumulators(s);

    // 3.
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
    if (lane % 4 == 0) {
      max_part[half * kRows + row0] = tile_max[0];
      max_part[half * kRows + row0 + 8] = tile_max[1];
    }
    sm90::named_barrier(kSoftmaxBarrier, kMathThreads);
    float factor[2], base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float other = max_part[(1 - half) * kRows + row0 + 8 * r];
      const float next = fmaxf(m[r], fmaxf(tile_max[r], other));
      factor[r] = next == -INFINITY ? 1.0f : exp2f(m[r] - next);
      base[r] = next == -INFINITY ? 0.0f : next;
      m[r] = next;
      l[r] *= factor[r];
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int col = 8 * j + column;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float p0 = exp2f(s[4 * j + 2 * r] - base[r]);
        const float p1 = exp2f(s[4 * j + 2 * r + 1] - base[r]);
        l[r] += p0 + p1;
        p[2 * j + r] = pack_bf16(p0, p1);
        *reinterpret_cast<uint32_t*>(own_p + swizzled(row0 + 8 * r, col / 8) + (col % 8) * 2) =
            p[2 * j + r];
      }
    }
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] *= factor[(i >> 1) & 1];
    sm90::fence_accumulators(o);
    sm90::fence_fragment(p);
    sm90::fence_proxy_async_shared();

    // 4. The own tile from registers (A fragment of k16 step k: p[4 k .. 4 k + 3]).
    sm90::wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t fragment[4] = {p[4 * k], p[4 * k + 1], p[4 * k + 2], p[4 * k + 3]};
      sm90::wgmma_m64n256k16_bf16_rs_n_major_b(
          o, fragment,
          sm90::n_major_descriptor(own_stage + half * 4 * kSlabBytes + k * 16 * 128, kSlabBytes));
    }
    sm90::wgmma_commit();
    // The other tile, its P from shared memory once the other warpgroup wrote it.
    sm90::named_barrier(kProbabilityBarrier, kMathThreads);
    sm90::mbarrier_wait(&barriers[kFullBarrier + (1 - half)], parity);
    sm90::fence_proxy_async_shared();
    sm90::wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      sm90::wgmma_m64n256k16_bf16_n_major_b(
          o, sm90::swizzled_descriptor(other_p_low + ((k * 32) >> 4)),
          sm90::n_major_descriptor(other_stage + half * 4 * kSlabBytes + k * 16 * 128,
                                   kSlabBytes),
          true);
    }
    sm90::wgmma_commit();
    sm90::wgmma_wait<0>();
    sm90::fence_accumulators(o);
    sm90::fence_fragment(p);
    __syncwarp();
    if (lane == 0) {
      sm90::mbarrier_arrive(&barriers[kEmptyBarrier]);
      sm90::mbarrier_arrive(&barriers[kEmptyBarrier + 1]);
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
  sm90::named_barrier(kSoftmaxBarrier, kMathThreads);
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
    for (int stage = 0; stage < 2; ++stage) {
      sm90::mbarrier_init(&barriers[kFullBarrier + stage], 128);  // every loader thread
      sm90::mbarrier_init(&barriers[kEmptyBarrier + stage], 8);   // every math warp
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
