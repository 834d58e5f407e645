// Dense flash-decoding over an fp16/bf16 cache (DenseKvCache), one query token per sequence.
//
// Grid (splits, kv_heads, batch); a CTA owns tokens [split * split_tokens, ...) of one (sequence,
// KV head) and all G query heads of the group, so each K/V byte is read once.
// 1. The CTA reads the length on the device; a split past it exits (the grid is sized from the
//    capacity, so one CUDA graph stays valid as the context grows); split 0 always runs.
// 2. A producer warp streams 64-token K and V tiles into a 3-stage shared-memory ring with
//    cp.async.bulk (one copy per tile, or one per token row for a strided cache), completing on
//    mbarriers; consumers release a stage with one arrival per warp.
// 3. Four consumer warps each take 16 tokens of a tile: S = K Q^T on tensor cores (M = tokens,
//    N = heads), scaled to log2 units, then the online softmax and O += P V (decode_softmax_sm90).
// 4. The warps merge in shared memory and write the split's normalized partial O and its
//    log2-sum-exp; the last split of the (sequence, KV head) to finish merges them all into out
//    and lse (decode_merge_sm90.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "api/sparse_decode_validation.h"
#include "cuda/common/async_copy_sm90.cuh"
#include "cuda/common/grid_dependency_sm90.cuh"
#include "cuda/decode/decode_kernels.h"
#include "cuda/decode/decode_launch_kernel.cuh"
#include "cuda/decode/decode_merge_sm90.cuh"
#include "cuda/decode/decode_softmax_sm90.cuh"

namespace litetopk::decode {
namespace {

constexpr int kStages = 3;
constexpr int kTileBytes = kDenseTileTokens * kRowBytes;  // one of K or V
constexpr int kThreads = (kConsumerWarps + 1) * 32;
static_assert(kDenseTileTokens == kChunkTokens, "a tile is one 16-token chunk per consumer warp");

struct DenseParams {
  const void* q;
  const unsigned char* keys;
  const unsigned char* values;
  int64_t batch_stride, head_stride, token_stride;  // bytes
  const int32_t* lengths;
  int num_kv_heads, group;
  int split_tokens;
  float scale_log2;
  SplitOutput split;
};

struct DenseShared {
  unsigned char tiles[kStages][2][kTileBytes];  // [stage][K, V][rows]; reused by the epilogue
  uint16_t q[16][kHeadDim];                     // the group's queries, zero rows past G
  uint64_t full[kStages];
  uint64_t empty[kStages];
  uint32_t last;  // arrive_and_merge's verdict
};
static_assert(sizeof(CombineScratch) <= sizeof(DenseShared::tiles), "epilogue scratch fits");

// Loads the B fragments of Q (lane (g, t): head 8n+g, channels 32t + 4ks .. +3 of k-step ks).
template <int NT>
__device__ __forceinline__ void load_query_fragments(const uint16_t (*q)[kHeadDim],
                                                     uint32_t (&qf)[NT][8][2]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
#pragma unroll
    for (int ks = 0; ks < 8; ++ks) {
      const uint16_t* row = q[8 * n + g] + 32 * t + 4 * ks;
      qf[n][ks][0] = *reinterpret_cast<const uint32_t*>(row);
      qf[n][ks][1] = *reinterpret_cast<const uint32_t*>(row + 2);
    }
  }
}

// S (log2 units) of the warp's 16 key rows `krows` against the query fragments; rows >= valid
// get -inf. Lane (g, t) reads channels 32t .. 32t+31 of rows g and g+8 (k-step ks holds the
// channel pairs 32t + 4ks + {0,1} and + {2,3}).
template <typename T, int NT>
__device__ __forceinline__ void raw_key_scores(const unsigned char* krows,
                                               const uint32_t (&qf)[NT][8][2], float scale_log2,
                                               int valid, float (&s)[NT][4]) {
  uint32_t k[2][16];
  load_key_row_fragments(krows, kRowBytes, k);
#pragma unroll
  for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) {
    const uint32_t a[4] = {k[0][2 * ks], k[1][2 * ks], k[0][2 * ks + 1], k[1][2 * ks + 1]};
#pragma unroll
    for (int n = 0; n < NT; ++n) mma<T>(s[n], a, qf[n][ks][0], qf[n][ks][1]);
  }
  scale_valid_scores(s, scale_log2, valid);
}

template <typename T, int NT>
__global__ void __launch_bounds__(kThreads, 2) dense_decode_kernel(const DenseParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  DenseShared& sh = *reinterpret_cast<DenseShared*>(smem_raw);
  const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int len = p.lengths[b];
  const int start = split * p.split_tokens;
  if (split > 0 && start >= len) return;
  const int end = min(len, start + p.split_tokens);
  const int chunks = (end - start + kDenseTileTokens - 1) / kDenseTileTokens;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int num_q_heads = p.num_kv_heads * p.group;
  const int64_t first_row = static_cast<int64_t>(b) * num_q_heads + static_cast<int64_t>(h) * p.group;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      sm90::mbarrier_init(&sh.full[s], 1);
      sm90::mbarrier_init(&sh.empty[s], kConsumerWarps);
    }
    sm90::fence_barrier_init();
  }
  __syncthreads();  // the barriers are initialized; the producer starts at once

  const unsigned char* kbase = p.keys + b * p.batch_stride + h * p.head_stride;
  const unsigned char* vbase = p.values + b * p.batch_stride + h * p.head_stride;
  if (warp == kConsumerWarps) {
    // Producer: lane 0 announces the bytes, then the warp issues the copies.
    const bool contiguous = p.token_stride == kRowBytes;
    for (int c = 0; c < chunks; ++c) {
      const int stage = c % kStages;
      if (c >= kStages) sm90::mbarrier_wait(&sh.empty[stage], ((c / kStages) - 1) & 1);
      const int first = start + c * kDenseTileTokens;
      const int rows = min(kDenseTileTokens, end - first);
      if (lane == 0) {
        sm90::mbarrier_arrive_expect_bytes(&sh.full[stage], 2u * rows * kRowBytes);
      }
      __syncwarp();
      if (contiguous) {
        if (lane == 0) {
          const int64_t at = static_cast<int64_t>(first) * kRowBytes;
          sm90::bulk_copy_global_to_shared(sh.tiles[stage][0], kbase + at, rows * kRowBytes,
                                           &sh.full[stage]);
          sm90::bulk_copy_global_to_shared(sh.tiles[stage][1], vbase + at, rows * kRowBytes,
                                           &sh.full[stage]);
        }
      } else {
        for (int r = lane; r < rows; r += 32) {
          const int64_t at = static_cast<int64_t>(first + r) * p.token_stride;
          sm90::bulk_copy_global_to_shared(sh.tiles[stage][0] + r * kRowBytes, kbase + at,
                                           kRowBytes, &sh.full[stage]);
          sm90::bulk_copy_global_to_shared(sh.tiles[stage][1] + r * kRowBytes, vbase + at,
                                           kRowBytes, &sh.full[stage]);
        }
      }
    }
    return;
  }

  load_group_queries(p.q, first_row, p.group, sh.q);
  consumer_barrier();
  uint32_t qf[NT][8][2];
  load_query_fragments<NT>(sh.q, qf);
  WarpSoftmax<T, NT> state;
  state.init();
  for (int c = 0; c < chunks; ++c) {
    const int stage = c % kStages;
    sm90::mbarrier_wait(&sh.full[stage], (c / kStages) & 1);
    const int valid = min(kDenseTileTokens, end - (start + c * kDenseTileTokens)) - 16 * warp;
    if (valid > 0) {
      const int row0 = 16 * warp;
      float s[NT][4];
      raw_key_scores<T, NT>(sh.tiles[stage][0] + row0 * kRowBytes, qf, p.scale_log2, valid, s);
      state.add(s, sh.tiles[stage][1] + row0 * kRowBytes, valid);
    }
    __syncwarp();
    if (lane == 0) sm90::mbarrier_arrive_expect_bytes(&sh.empty[stage], 0);
  }
  sm90::allow_dependent_grids();
  consumer_barrier();  // every warp is done with the tiles before the scratch overwrites them
  combine_and_store(state, reinterpret_cast<CombineScratch*>(sh.tiles), p.group, first_row, split,
                    p.split.partial);
  const int active = max(1, min(p.split.partial.splits, (len + p.split_tokens - 1) / p.split_tokens));
  arrive_and_merge(p.split, static_cast<int64_t>(b) * p.num_kv_heads + h, active, first_row, p.group,
                   &sh.last);
}

}  // namespace

Status launch_dense_decode(const DenseDecodeProblem& problem, const SplitPartials& partials,
                           cudaStream_t stream) {
  const DenseKvCache& c = problem.cache;
  const detail::DenseStrides strides = detail::dense_strides(c);
  constexpr int64_t kElement = 2;
  DenseParams params{};
  params.q = problem.q;
  params.keys = static_cast<const unsigned char*>(c.keys);
  params.values = static_cast<const unsigned char*>(c.values);
  params.batch_stride = strides.batch * kElement;
  params.head_stride = strides.head * kElement;
  params.token_stride = strides.token * kElement;
  params.lengths = c.lengths;
  params.num_kv_heads = static_cast<int>(c.num_kv_heads);
  params.group = static_cast<int>(problem.num_q_heads / c.num_kv_heads);
  params.split_tokens = static_cast<int>(partials.split_tokens);
  params.scale_log2 =
      static_cast<float>(detail::resolved_softmax_scale(problem.softmax_scale, c.head_dim)) *
      kLog2e;
  params.split = SplitOutput{PartialOut{partials.o, partials.lse2, partials.splits},
                             partials.arrivals, problem.out, problem.out_dtype, problem.lse};
  const dim3 grid(static_cast<unsigned>(partials.splits), static_cast<unsigned>(c.num_kv_heads),
                  static_cast<unsigned>(c.batch));
  return dispatch_cache_type(c.dtype, params.group, [&](auto element, auto width) {
    return launch_kernel(dense_decode_kernel<decltype(element), decltype(width)::value>, grid,
                         dim3(kThreads), sizeof(DenseShared), true, stream, params);
  });
}

}  // namespace litetopk::decode
