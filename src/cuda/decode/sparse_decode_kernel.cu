// Sparse decode (litetopk/sparse_decode.h): scan 2-bit key codes, keep the blocks that can matter,
// exact attention over the kept blocks only. One kernel, four passes (SparsePass in
// decode_kernels.h): kScanDelta scans, decides and attends; kScanMass only scans (block masses for
// the pick kernel); kAttendPicked and kAttendAll only attend (the pick kernel's rows, or every
// block).
//
// Grid (splits, kv_heads, batch); a CTA owns blocks [split * bps, (split + 1) * bps) of one
// (sequence, KV head) (block nf is the open block) and all G query heads of the group.
// 1. Reads the length on the device; a split past the last block exits (after waiting for the
//    prerequisite grid, so that this grid's end implies that one's); split 0 always runs.
//    kScanMass: split 0 zeroes the pair's arrival counter for the kAttendPicked pass.
// 2. Scan: a producer warp streams each full block's codes (BS * 32 B) and scales into a deep
//    ring (cp.async.bulk + mbarriers). Consumer warp w takes blocks w, w+4, ...: folds the scales
//    into the query and rounds it to int8 (u = rint(127 q s / max|q s|)), takes the codes as int8
//    bytes (one shift-and-mask per 4 channels), runs S = codes u^T on int8 tensor cores (exact
//    int32) and keeps the max per head (sparse_key_fragments_sm90.cuh).
//    kScanDelta: before its first decision the warp waits for the anchor kernel (programmatic
//    dependent launch) and reads the pseudo-max pm2 per head. Keep = anchor (0, nf-1) or some head
//    of the group has estimate >= pm2 - delta * log2(e) (log2 units). The first round (blocks
//    0 .. kConsumerWarps-1 of the split, one per warp) is a sample: when the split has more full
//    blocks and keeps every sampled one, attention here is spread and the scan would skip little,
//    so the CTA stops scanning and reads all its blocks (the producer streams the codes of two
//    rounds, then waits at the same barrier).
//    kScanMass: also the log2 of the block's pseudo-logit mass per head (an online log-sum-exp of
//    the same int32 scores), written to block_mass2; the CTA then exits.
//    kAttendPicked / kAttendAll: no scan; keep = anchor, or some head's pick row (after waiting
//    for the pick kernel), or every block.
// 3. Attend: the producer streams, for each kept block in order and then the open block, 64-token
//    chunks of residuals + codes + scales + values (tail keys + values for the open block) into a
//    3-stage ring: residuals and values of skipped blocks are never read.
// 4. Each consumer warp takes 16 tokens of a chunk: keys code + R (exact fp16) against the
//    query's fp16 hi + lo split (fp32-grade exact scores), or the raw tail keys against the raw
//    query; online softmax and O += P V (decode_softmax_sm90.cuh).
// 5. The warps merge and write the split's partial; the last split of the (sequence, KV head) to
//    finish merges them all into out and lse (decode_merge_sm90.cuh).
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "api/sparse_decode_validation.h"
#include "formats/sparse_kv_format.h"
#include "cuda/common/async_copy_sm90.cuh"
#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/common/mma_sync_sm80.cuh"
#include "cuda/decode/decode_kernels.h"
#include "cuda/decode/decode_launch_kernel.cuh"
#include "cuda/decode/decode_merge_sm90.cuh"
#include "cuda/decode/decode_softmax_sm90.cuh"
#include "cuda/decode/sparse_key_fragments_sm90.cuh"

namespace litetopk::decode {
namespace {

constexpr int kThreads = (kConsumerWarps + 1) * 32;
constexpr int kAttendStages = 3;
constexpr int kNamedBarrierSample = 2;  // bar.sync id of the kScanDelta sample: the whole CTA
constexpr int kScanRingBytes = 68 * 1024;  // codes + scales of 16 (BS 128) or 8 (BS 256) blocks
// One attend stage: values [64 rows] | keys [64 rows] (the open block) or residuals [64 rows of
// 128 B] + codes [64 rows of 32 B] | the block's scales.
constexpr int kValuesOffset = 0;
constexpr int kKeysOffset = kChunkTokens * kRowBytes;
constexpr int kResidualsOffset = kKeysOffset;
constexpr int kCodesOffset = kResidualsOffset + kChunkTokens * kHeadDim;
constexpr int kScalesOffset = kKeysOffset + kChunkTokens * kRowBytes;
constexpr int kAttendStageBytes = kScalesOffset + kHeadDim * 2;

struct SparseParams : SparseCacheView {
  int blocks_per_split;
  SparsePass pass;
  float delta2;  // kScanDelta: delta * log2(e)
  const float* anchor_max;
  int anchor_chunks;
  float* block_mass2;        // kScanMass: [rows, max_blocks]
  const uint8_t* keep_rows;  // kAttendPicked: [rows, max_blocks]
  uint8_t* kept_mask;
  SplitOutput split;
};

struct SparseShared {
  union {
    unsigned char scan[kScanRingBytes];
    unsigned char attend[kAttendStages][kAttendStageBytes];
  } ring;
  uint16_t q[16][kHeadDim];
  float pm2[16];
  uint8_t keep[kMaxBlocksPerSplit];
  uint64_t scan_full[16], scan_empty[16];
  uint64_t attend_full[kAttendStages], attend_empty[kAttendStages];
  uint32_t last;  // arrive_and_merge's verdict
};
static_assert(sizeof(CombineScratch) <= sizeof(SparseShared::ring), "epilogue scratch fits");

__device__ __forceinline__ int scan_stages(int block_size) { return 16 * 128 / block_size; }
__device__ __forceinline__ int scan_stage_bytes(int block_size) {
  return block_size * kCodeRowBytes + kHeadDim * 2;
}

// The 2-bit estimate (log2 units) of head 8n+g for every n, in lanes (g, *): the max over the
// block's tokens of (sum_c code_c u_c - 1.5 sum_c u_c) * dequant. Four 16-token tiles at a time
// keep four independent mma chains in flight.
// kMass: also mass2[n][i], the log2 of sum over the block's tokens of exp2(estimate) of head
// 8n + 2t + i, in the lanes (0, t) (an online log-sum-exp over the tiles, then over g).
template <typename T, int NT, bool kMass>
__device__ __forceinline__ void scan_block(const unsigned char* codes, const T* scales,
                                           const float (&q)[NT][32], int block_size,
                                           float scale_log2, float (&estimate)[NT],
                                           float (&mass2)[NT][2]) {
  constexpr int kTiles = 4;
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  uint32_t bf[NT][4][2];
  int sum[NT];
  float dequant[NT];
#pragma unroll
  for (int n = 0; n < NT; ++n) scan_query<T>(q[n], scales, scale_log2, bf[n], &sum[n], &dequant[n]);
  int best[NT][2];
#pragma unroll
  for (int n = 0; n < NT; ++n) best[n][0] = best[n][1] = INT_MIN;
  // kMass: the sum and dequantization factor of the C columns' heads 8n + 2t + i, and the
  // running max and sum of exp2 per column.
  int col_sum[NT][2];
  float col_dequant[NT][2], run_max[NT][2], run_sum[NT][2];
  if constexpr (kMass) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        col_sum[n][i] = __shfl_sync(0xffffffffu, sum[n], 4 * (2 * t + i));
        col_dequant[n][i] = __shfl_sync(0xffffffffu, dequant[n], 4 * (2 * t + i));
        run_max[n][i] = -INFINITY;
        run_sum[n][i] = 0.0f;
      }
    }
  }
  for (int row0 = 0; row0 < block_size; row0 += 16 * kTiles) {
    uint32_t w[kTiles][2][2];
#pragma unroll
    for (int m = 0; m < kTiles; ++m) {
      load_code_words(codes + (row0 + 16 * m + g) * kCodeRowBytes, w[m][0]);
      load_code_words(codes + (row0 + 16 * m + g + 8) * kCodeRowBytes, w[m][1]);
    }
    int acc[kTiles][NT][4];
#pragma unroll
    for (int m = 0; m < kTiles; ++m) {
#pragma unroll
      for (int n = 0; n < NT; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0;
    }
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
      for (int m = 0; m < kTiles; ++m) {
        uint32_t a[4];
        scan_key_fragment(w[m], ks, a);
#pragma unroll
        for (int n = 0; n < NT; ++n) sm80::mma_s8(acc[m][n], a, bf[n][ks][0], bf[n][ks][1]);
      }
    }
#pragma unroll
    for (int m = 0; m < kTiles; ++m) {
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        best[n][0] = max(best[n][0], max(acc[m][n][0], acc[m][n][2]));
        best[n][1] = max(best[n][1], max(acc[m][n][1], acc[m][n][3]));
      }
    }
    if constexpr (kMass) {
#pragma unroll
      for (int n = 0; n < NT; ++n) {
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          float v[2 * kTiles];
          float top = run_max[n][i];
#pragma unroll
          for (int m = 0; m < kTiles; ++m) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              v[2 * m + r] = static_cast<float>(2 * acc[m][n][2 * r + i] - 3 * col_sum[n][i]) *
                             0.5f * col_dequant[n][i];
              top = fmaxf(top, v[2 * m + r]);
            }
          }
          run_sum[n][i] *= exp2f(run_max[n][i] - top);
          run_max[n][i] = top;
#pragma unroll
          for (int k = 0; k < 2 * kTiles; ++k) run_sum[n][i] += exp2f(v[k] - top);
        }
      }
    }
  }
  if constexpr (kMass) {
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float m = run_max[n][i], sm = run_sum[n][i];
#pragma unroll
        for (int k = 4; k < 32; k *= 2) {
          const float om = __shfl_xor_sync(0xffffffffu, m, k);
          const float os = __shfl_xor_sync(0xffffffffu, sm, k);
          const float top = fmaxf(m, om);
          sm = sm * exp2f(m - top) + os * exp2f(om - top);
          m = top;
        }
        mass2[n][i] = m + log2f(sm);
      }
    }
  }
  // Lanes (*, t) hold heads 8n + 2t + i: reduce over g, then fetch head 8n+g from lane t = g/2.
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      int x = best[n][i];
      x = max(x, __shfl_xor_sync(0xffffffffu, x, 4));
      x = max(x, __shfl_xor_sync(0xffffffffu, x, 8));
      x = max(x, __shfl_xor_sync(0xffffffffu, x, 16));
      best[n][i] = x;
    }
    const int x0 = __shfl_sync(0xffffffffu, best[n][0], g >> 1);
    const int x1 = __shfl_sync(0xffffffffu, best[n][1], g >> 1);
    const int twice = 2 * ((g & 1) ? x1 : x0) - 3 * sum[n];  // 2 (acc - 1.5 sum), exact
    estimate[n] = static_cast<float>(twice) * 0.5f * dequant[n];
  }
}

// The exact-score state of the block being attended: query fragments and, per C column (heads
// 8n + 2t + i), the exponent and bias.
template <int NT>
struct ExactQuery {
  uint32_t hi[NT][8][2], lo[NT][8][2];
  float col_scale[NT][2], col_bias[NT][2];
};

template <typename T, int NT>
__device__ __forceinline__ void build_exact_query(const T* scales, const uint16_t (*q)[kHeadDim],
                                                  float scale_log2, ExactQuery<NT>& eq) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    BlockQuery<T> bq;
    bq.build(reinterpret_cast<const T*>(q[8 * n + g]), scales, scale_log2);
    const float bias = exact_query_fragments(bq, eq.hi[n], eq.lo[n]);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int src = 4 * (2 * t + i);
      eq.col_scale[n][i] = ldexpf(1.0f, __shfl_sync(0xffffffffu, bq.exponent, src));
      eq.col_bias[n][i] = __shfl_sync(0xffffffffu, bias, src);
    }
  }
}

// Exact scores (log2 units) of the warp's 16 rows of a quantized block chunk.
template <int NT>
__device__ __forceinline__ void exact_scores(const unsigned char* codes, const unsigned char* residuals,
                                             const ExactQuery<NT>& eq, float (&s)[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  uint32_t w[2][2], res[2][8];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    load_code_words(codes + (g + 8 * r) * kCodeRowBytes, w[r]);
    uint32_t x[4];
    load_shared16(residuals + (g + 8 * r) * kHeadDim + 32 * t, x);
#pragma unroll
    for (int j = 0; j < 4; ++j) res[r][j] = x[j];
    load_shared16(residuals + (g + 8 * r) * kHeadDim + 32 * t + 16, x);
#pragma unroll
    for (int j = 0; j < 4; ++j) res[r][4 + j] = x[j];
  }
#pragma unroll
  for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    uint32_t k0[2], k1[2];
    exact_key_registers(w[0], res[0], ks, k0);
    exact_key_registers(w[1], res[1], ks, k1);
    const uint32_t a[4] = {k0[0], k1[0], k0[1], k1[1]};
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      sm80::mma_f16(s[n], a, eq.hi[n][ks][0], eq.hi[n][ks][1]);
      sm80::mma_f16(s[n], a, eq.lo[n][ks][0], eq.lo[n][ks][1]);
    }
  }
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = (s[n][e] - eq.col_bias[n][e & 1]) * eq.col_scale[n][e & 1];
  }
}

// Raw (fp16/bf16) key rows against the raw query: the open block. Same channel order as the
// dense kernel: lane (g, t) reads channels 32t .. 32t+31, k-step ks holds 32t + 4ks + {0..3}.
template <typename T, int NT>
__device__ __forceinline__ void tail_scores(const unsigned char* krows, const uint16_t (*q)[kHeadDim],
                                            float scale_log2, int valid, float (&s)[NT][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  uint32_t k[2][16];
  load_key_row_fragments(krows, kRowBytes, k);
#pragma unroll
  for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const uint32_t a[4] = {k[0][2 * ks], k[1][2 * ks], k[0][2 * ks + 1], k[1][2 * ks + 1]};
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const uint16_t* row = q[8 * n + g] + 32 * t + 4 * ks;
      mma<T>(s[n], a, *reinterpret_cast<const uint32_t*>(row),
             *reinterpret_cast<const uint32_t*>(row + 2));
    }
  }
  scale_valid_scores(s, scale_log2, valid);
}

// The attend units of a CTA, in order: every chunk of each kept full block, then the open
// block's chunks. Iterated identically by the producer and the consumers.
struct UnitCursor {
  int index = -1;   // position among the CTA's full blocks (== full for the open block)
  int chunk = 0;
  __device__ __forceinline__ bool next(const uint8_t* keep, int full, int chunks_per_block,
                                       int tail_chunks) {
    if (index >= 0 && index < full && ++chunk < chunks_per_block) return true;
    if (index == full) return ++chunk < tail_chunks;
    chunk = 0;
    for (++index; index < full; ++index) {
      if (keep[index]) return true;
    }
    return tail_chunks > 0;
  }
};

template <typename T, int NT>
__global__ void __launch_bounds__(kThreads, 2) sparse_decode_kernel(const SparseParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  SparseShared& sh = *reinterpret_cast<SparseShared*>(smem_raw);
  if (p.pass == SparsePass::kScanMass) sm90::allow_dependent_grids();  // the pick kernel waits
  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int bs = p.block_size;
  const int len = p.lengths[b];
  const int nf = len / bs, nt = len - nf * bs;
  const int used = nf + (nt > 0 ? 1 : 0);
  const int j0 = split * p.blocks_per_split;
  const int64_t pair = static_cast<int64_t>(b) * p.num_kv_heads + h;
  if (p.pass == SparsePass::kScanMass && split == 0 && threadIdx.x == 0) p.split.arrivals[pair] = 0;
  if (split > 0 && j0 >= used) {
    sm90::wait_for_prerequisite_grids();
    return;
  }
  const int j1 = min(used, j0 + p.blocks_per_split);
  const int full = min(j1, nf) - j0;                     // full blocks of this CTA
  const bool has_tail = nt > 0 && nf < j1;               // the open block is ours
  const int tail_chunks = has_tail ? (nt + kChunkTokens - 1) / kChunkTokens : 0;
  const int chunks_per_block = bs / kChunkTokens;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int num_q_heads = p.num_kv_heads * p.group;
  const int64_t first_row = static_cast<int64_t>(b) * num_q_heads + static_cast<int64_t>(h) * p.group;
  const int stages1 = scan_stages(bs), stage1_bytes = scan_stage_bytes(bs);
  const auto slot = [&](int j) {
    return sparse_kv::slot_index(p.block_table, p.num_kv_heads, p.max_blocks, b, h, j);
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < stages1; ++s) {
      sm90::mbarrier_init(&sh.scan_full[s], 1);
      sm90::mbarrier_init(&sh.scan_empty[s], 1);
    }
    for (int s = 0; s < kAttendStages; ++s) {
      sm90::mbarrier_init(&sh.attend_full[s], 1);
      sm90::mbarrier_init(&sh.attend_empty[s], kConsumerWarps);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();  // the barriers are initialized; the producer starts at once

  // ---- 2. scan (or the keep flags without one) ----
  const bool scan = p.pass == SparsePass::kScanDelta || p.pass == SparsePass::kScanMass;
  uint8_t* mask_row =
      p.kept_mask != nullptr ? p.kept_mask + (static_cast<int64_t>(b) * p.num_kv_heads + h) * p.max_blocks
                             : nullptr;
  // kScanDelta's sample (step 2): the whole CTA meets once the first round is decided.
  const bool sampling = p.pass == SparsePass::kScanDelta && full > kConsumerWarps;
  const auto sample_keeps_all = [&] {
    __syncwarp();
    asm volatile("bar.sync %0, %1;" ::"n"(kNamedBarrierSample), "n"(kThreads) : "memory");
    bool all = true;
    for (int i = 0; i < kConsumerWarps; ++i) all = all && sh.keep[i] != 0;
    return all;
  };
  if (warp == kConsumerWarps) {
    if (scan) {
      const auto issue = [&](int i) {
        const int stage = i % stages1;
        const int64_t at = slot(j0 + i);
        unsigned char* dst = sh.ring.scan + stage * stage1_bytes;
        sm90::mbarrier_arrive_expect_bytes(&sh.scan_full[stage], static_cast<uint32_t>(stage1_bytes));
        sm90::bulk_copy_global_to_shared(dst, p.codes + at * bs * kCodeRowBytes, bs * kCodeRowBytes,
                                         &sh.scan_full[stage]);
        sm90::bulk_copy_global_to_shared(dst + bs * kCodeRowBytes,
                                         static_cast<const unsigned char*>(p.scales) + at * kHeadDim * 2,
                                         kHeadDim * 2, &sh.scan_full[stage]);
      };
      // Before the sample's verdict, the sample and one more round (at most a ring).
      const int early = min(full, sampling ? min(stages1, 2 * kConsumerWarps) : stages1);
      if (lane == 0) {
        for (int i = 0; i < early; ++i) issue(i);
      }
      if (sampling && sample_keeps_all()) {
        // Reading everything: the codes already in flight land before the attend ring reuses
        // the shared memory.
        if (lane == 0) {
          for (int i = kConsumerWarps; i < early; ++i) sm90::mbarrier_wait(&sh.scan_full[i], 0);
        }
      } else if (lane == 0) {
        for (int i = early; i < full; ++i) {
          const int stage = i % stages1;
          if (i >= stages1) sm90::mbarrier_wait(&sh.scan_empty[stage], ((i / stages1) - 1) & 1);
          issue(i);
        }
      }
    }
  } else {
    load_group_queries(p.q, first_row, p.group, sh.q);
    if (p.pass == SparsePass::kScanDelta) {
      sm90::wait_for_prerequisite_grids();  // the anchor kernel's pseudo-max
      // Warp w takes heads w, w + 4, ...; lane c reads chunk c (at most 32 chunks).
      for (int head = warp; head < p.group; head += kConsumerWarps) {
        float m = lane < p.anchor_chunks ? p.anchor_max[(first_row + head) * p.anchor_chunks + lane]
                                         : -INFINITY;
        for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
        if (lane == 0) sh.pm2[head] = m;
      }
    }
    consumer_barrier();
    if (scan) {
      const int g = lane >> 2, t = lane & 3;
      float qv[NT][32];  // this lane's 32 channels (32t ..) of heads 8n+g, natural order
#pragma unroll
      for (int n = 0; n < NT; ++n) {
#pragma unroll
        for (int i = 0; i < 32; ++i) qv[n][i] = to_float(reinterpret_cast<const T*>(sh.q[8 * n + g])[32 * t + i]);
      }
      for (int i = warp; i < full; i += kConsumerWarps) {
        const int stage = i % stages1;
        sm90::mbarrier_wait(&sh.scan_full[stage], (i / stages1) & 1);
        const unsigned char* base = sh.ring.scan + stage * stage1_bytes;
        const T* scales = reinterpret_cast<const T*>(base + bs * kCodeRowBytes);
        float estimate[NT], mass2[NT][2];
        const int j = j0 + i;
        if (p.pass == SparsePass::kScanMass) {
          scan_block<T, NT, true>(base, scales, qv, bs, p.scale_log2, estimate, mass2);
          __syncwarp();
          if (g == 0) {
#pragma unroll
            for (int n = 0; n < NT; ++n) {
#pragma unroll
              for (int k = 0; k < 2; ++k) {
                const int head = 8 * n + 2 * t + k;
                if (head < p.group) p.block_mass2[(first_row + head) * p.max_blocks + j] = mass2[n][k];
              }
            }
          }
          if (lane == 0) sm90::mbarrier_arrive_expect_bytes(&sh.scan_empty[stage], 0);
          continue;
        }
        scan_block<T, NT, false>(base, scales, qv, bs, p.scale_log2, estimate, mass2);
        bool keep_head = false;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const int head = 8 * n + g;
          keep_head = keep_head || (head < p.group && estimate[n] >= sh.pm2[head] - p.delta2);
        }
        const bool keep = j == 0 || j == nf - 1 || __any_sync(0xffffffffu, keep_head);
        __syncwarp();
        if (lane == 0) {
          sh.keep[i] = keep ? 1 : 0;
          if (mask_row != nullptr) mask_row[j] = keep ? 1 : 0;
          sm90::mbarrier_arrive_expect_bytes(&sh.scan_empty[stage], 0);
        }
        if (sampling && i == warp && sample_keeps_all()) {
          for (int r = kConsumerWarps + threadIdx.x; r < full; r += kConsumerWarps * 32) {
            sh.keep[r] = 1;
            if (mask_row != nullptr) mask_row[j0 + r] = 1;
          }
          break;  // every warp takes the same branch: the sample is read after one barrier
        }
      }
    } else {
      if (p.pass == SparsePass::kAttendPicked) sm90::wait_for_prerequisite_grids();  // the picks
      for (int i = threadIdx.x; i < full; i += kConsumerWarps * 32) {
        const int j = j0 + i;
        bool keep = p.pass == SparsePass::kAttendAll || j == 0 || j == nf - 1;
        for (int head = 0; head < p.group && !keep; ++head) {
          keep = p.keep_rows[(first_row + head) * p.max_blocks + j] != 0;
        }
        sh.keep[i] = keep ? 1 : 0;
        if (mask_row != nullptr) mask_row[j] = keep ? 1 : 0;
      }
    }
    if (has_tail && threadIdx.x == 0 && mask_row != nullptr && p.pass != SparsePass::kScanMass) {
      mask_row[nf] = 1;
    }
  }
  if (p.pass == SparsePass::kScanMass) return;  // no attend; the pick kernel waits for this grid
  __syncthreads();  // the keep flags are complete; the scan ring is free

  // ---- 3. attend: producer ----
  if (warp == kConsumerWarps) {
    if (lane == 0) {
      UnitCursor cursor;
      for (int u = 0; cursor.next(sh.keep, full, chunks_per_block, tail_chunks); ++u) {
        const int stage = u % kAttendStages;
        if (u >= kAttendStages) {
          sm90::mbarrier_wait(&sh.attend_empty[stage], ((u / kAttendStages) - 1) & 1);
        }
        unsigned char* dst = sh.ring.attend[stage];
        const int row0 = cursor.chunk * kChunkTokens;
        if (cursor.index < full) {
          const int64_t at = slot(j0 + cursor.index);
          const int64_t row = at * bs + row0;
          sm90::mbarrier_arrive_expect_bytes(
              &sh.attend_full[stage],
              kChunkTokens * (kRowBytes + kHeadDim + kCodeRowBytes) + kHeadDim * 2);
          sm90::bulk_copy_global_to_shared(dst + kValuesOffset,
                                           static_cast<const unsigned char*>(p.values) + row * kRowBytes,
                                           kChunkTokens * kRowBytes, &sh.attend_full[stage]);
          sm90::bulk_copy_global_to_shared(dst + kResidualsOffset, p.residuals + row * kHeadDim,
                                           kChunkTokens * kHeadDim, &sh.attend_full[stage]);
          sm90::bulk_copy_global_to_shared(dst + kCodesOffset, p.codes + row * kCodeRowBytes,
                                           kChunkTokens * kCodeRowBytes, &sh.attend_full[stage]);
          sm90::bulk_copy_global_to_shared(dst + kScalesOffset,
                                           static_cast<const unsigned char*>(p.scales) + at * kHeadDim * 2,
                                           kHeadDim * 2, &sh.attend_full[stage]);
        } else {
          const int rows = min(kChunkTokens, nt - row0);
          const int64_t value_row = slot(nf) * bs + row0;
          const int64_t key_row = (static_cast<int64_t>(b) * p.num_kv_heads + h) * bs + row0;
          sm90::mbarrier_arrive_expect_bytes(&sh.attend_full[stage], 2u * rows * kRowBytes);
          sm90::bulk_copy_global_to_shared(dst + kValuesOffset,
                                           static_cast<const unsigned char*>(p.values) + value_row * kRowBytes,
                                           rows * kRowBytes, &sh.attend_full[stage]);
          sm90::bulk_copy_global_to_shared(dst + kKeysOffset,
                                           static_cast<const unsigned char*>(p.tail_keys) + key_row * kRowBytes,
                                           rows * kRowBytes, &sh.attend_full[stage]);
        }
      }
    }
    return;
  }

  // ---- 4. attend: consumers ----
  WarpSoftmax<T, NT> state;
  state.init();
  ExactQuery<NT> eq;
  int query_block = -1;
  UnitCursor cursor;
  for (int u = 0; cursor.next(sh.keep, full, chunks_per_block, tail_chunks); ++u) {
    const int stage = u % kAttendStages;
    sm90::mbarrier_wait(&sh.attend_full[stage], (u / kAttendStages) & 1);
    const unsigned char* base = sh.ring.attend[stage];
    const int row0 = 16 * warp;
    float s[NT][4];
    if (cursor.index < full) {
      if (cursor.index != query_block) {
        build_exact_query<T, NT>(reinterpret_cast<const T*>(base + kScalesOffset), sh.q, p.scale_log2, eq);
        query_block = cursor.index;
      }
      exact_scores<NT>(base + kCodesOffset + row0 * kCodeRowBytes,
                       base + kResidualsOffset + row0 * kHeadDim, eq, s);
      state.add(s, base + kValuesOffset + row0 * kRowBytes, 16);
    } else {
      const int valid = min(kChunkTokens, nt - cursor.chunk * kChunkTokens) - row0;
      if (valid > 0) {
        tail_scores<T, NT>(base + kKeysOffset + row0 * kRowBytes, sh.q, p.scale_log2, valid, s);
        state.add(s, base + kValuesOffset + row0 * kRowBytes, valid);
      }
    }
    __syncwarp();
    if (lane == 0) sm90::mbarrier_arrive_expect_bytes(&sh.attend_empty[stage], 0);
  }
  sm90::allow_dependent_grids();
  consumer_barrier();
  combine_and_store(state, reinterpret_cast<CombineScratch*>(&sh.ring), p.group, first_row, split,
                    p.split.partial);
  const int active = max(1, (used + p.blocks_per_split - 1) / p.blocks_per_split);
  arrive_and_merge(p.split, pair, active, first_row, p.group, &sh.last);
}

}  // namespace

SparseCacheView sparse_cache_view(const SparseDecodeProblem& problem) {
  const SparseKvCache& c = problem.cache;
  SparseCacheView view{};
  view.q = problem.q;
  view.codes = c.key_codes;
  view.scales = c.key_scales;
  view.residuals = c.key_residuals;
  view.values = c.values;
  view.tail_keys = c.tail_keys;
  view.lengths = c.lengths;
  view.block_table = c.block_table;
  view.num_kv_heads = static_cast<int>(c.num_kv_heads);
  view.group = static_cast<int>(problem.num_q_heads / c.num_kv_heads);
  view.block_size = static_cast<int>(c.block_size);
  view.max_blocks = static_cast<int>(c.max_blocks);
  view.scale_log2 =
      static_cast<float>(detail::resolved_softmax_scale(problem.softmax_scale, c.head_dim)) *
      kLog2e;
  return view;
}

Status launch_sparse_decode(const SparseDecodeProblem& problem, int blocks_per_split,
                            SparsePass pass, const SparseSelectionBuffers& selection,
                            const SplitPartials& partials, bool dependent, cudaStream_t stream) {
  const SparseKvCache& c = problem.cache;
  SparseParams params{};
  static_cast<SparseCacheView&>(params) = sparse_cache_view(problem);
  params.blocks_per_split = blocks_per_split;
  params.pass = pass;
  params.delta2 = pass == SparsePass::kScanDelta ? problem.delta * kLog2e : 0.0f;
  params.anchor_max = selection.anchor_max;
  params.anchor_chunks = anchor_chunks(c.block_size);
  params.block_mass2 = selection.block_mass2;
  params.keep_rows = selection.keep_rows;
  params.kept_mask = problem.kept_mask;
  params.split = SplitOutput{PartialOut{partials.o, partials.lse2, partials.splits},
                             partials.arrivals, problem.out, problem.out_dtype, problem.lse};
  const dim3 grid(static_cast<unsigned>(partials.splits), static_cast<unsigned>(c.num_kv_heads),
                  static_cast<unsigned>(c.batch));
  return dispatch_cache_type(c.dtype, params.group, [&](auto element, auto width) {
    return launch_kernel(sparse_decode_kernel<decltype(element), decltype(width)::value>, grid,
                         dim3(kThreads), sizeof(SparseShared), dependent, stream, params);
  });
}

}  // namespace litetopk::decode
