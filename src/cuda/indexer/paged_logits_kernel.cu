// The paged decode indexer's logits, fp8 e4m3 on Hopper tensor cores (DeepGEMM's
// fp8_paged_mqa_logits): logits[r, p] = the score of token p for query row r = b * next_n + j over
// its visible tokens, NaN for a token of a block outside the cache, -inf from the visible count up
// to max_context. The unfused path: this kernel, then the selection over each row's visible
// tokens.
//
// Pipeline of paged_logits_kernel (grid: `blocks` blocks over the whole batch; two math warpgroups
// and the producer warp, three math warpgroups at 128 columns):
// 1. Schedule from the device's context lengths (graph-safe: nothing is planned from them on the
//    host): request b costs kSegmentCost + the tiles its last query needs (nothing without one);
//    block x takes the cost units [x * chunk, + chunk) of the batch in request order, chunk =
//    ceil(total / blocks): one or more segments, each a request and a range of its tiles. The
//    block scans the requests kThreads at a time (cub::BlockScan) and keeps each chunk's segments
//    in shared memory.
// 2.-4. For each segment, paged_scoring_sm90.cuh scores its tiles (a block barrier between
//    segments; the ring's and the query's barrier phases continue across them); the epilogue's
//    quad lane 0 writes token row0 and quad lane 1 token row0 + 8 of each query row.
// 5. Block 0 writes every row's visible count (the selection's row ends) when asked to; when the
//    caller wants the whole [rows, max_context] matrix, block x writes -inf over the positions
//    past the request's tiles of rows x, x + blocks, ...
#include <cuda_runtime_api.h>

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <algorithm>
#include <cmath>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/paged_indexer_kernels.h"
#include "cuda/indexer/paged_scoring_sm90.cuh"

namespace litetopk::cuda_indexer {
namespace {

using paged::PagedArgs;

// A segment costs this many tiles more than its tiles: the drain and refill of the ring around
// the block barrier that separates it from the block's next segment.
constexpr int32_t kSegmentCost = 4;

struct Segment {
  int32_t request;  // -1: none (a request without tiles)
  int32_t begin;
  int32_t end;
};

template <int kColumns>
constexpr int kLogitsThreads = paged::kThreadsFor<kLogitsGroups<kColumns>>;

template <int kHeads, int kColumns>
struct LogitsStorage {
  static constexpr int kThreads = kLogitsThreads<kColumns>;
  using Scan = cub::BlockScan<int32_t, kThreads>;
  using Reduce = cub::BlockReduce<int32_t, kThreads>;
  paged::PagedScoringStorage<kHeads, kColumns, kLogitsStages<kColumns>> scoring;
  Segment segments[kThreads];
  union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } cub;
  int32_t total;
};

__device__ __forceinline__ int32_t request_cost(const PagedArgs& args, int b, int batch) {
  if (b >= batch) return 0;
  const int32_t tiles = paged::needed_tiles(args, b);
  return tiles > 0 ? tiles + kSegmentCost : 0;
}

struct PagedLogitsEpilogue {
  const PagedArgs& args;
  float* logits;
  int64_t stride;
  int b;

  template <int kBankQueries>
  __device__ __forceinline__ void consume_bank(int tile, int row0, int first_query,
                                               const float (&scores0)[kBankQueries],
                                               const float (&scores1)[kBankQueries],
                                               bool in_cache, int quad_lane) {
    if (quad_lane > 1) return;
    const int32_t token = tile * paged::kTileKeys + row0 + 8 * quad_lane;
    if (token >= args.max_context) return;
#pragma unroll
    for (int bq = 0; bq < kBankQueries; ++bq) {
      const int j = first_query + bq;
      if (j >= args.next_n) return;
      const float score = quad_lane == 0 ? scores0[bq] : scores1[bq];
      const int32_t visible = paged::visible_tokens(args, b, j);
      logits[(int64_t{b} * args.next_n + j) * stride + token] =
          token < visible ? (in_cache ? score : NAN) : -INFINITY;
    }
  }
};

template <int kHeads, int kColumns>
__global__ void __launch_bounds__(kLogitsThreads<kColumns>, kLogitsBlocksPerSm<kColumns>)
    paged_logits_kernel(const __grid_constant__ CUtensorMap q_map,
                        const __grid_constant__ CUtensorMap kv_map, const PagedArgs args,
                        int32_t batch, float* logits, int64_t stride, bool fill_unseen,
                        int32_t* row_ends) {
  using Storage = LogitsStorage<kHeads, kColumns>;
  constexpr int kThreads = Storage::kThreads;
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& s = *reinterpret_cast<Storage*>(shared_raw);
  const int tid = static_cast<int>(threadIdx.x);
  if (tid == 0) paged::init_scoring(s.scoring);
  // 1. The batch's cost and this block's share of it.
  int32_t cost = 0;
  for (int b = tid; b < batch; b += kThreads) cost += request_cost(args, b, batch);
  cost = typename Storage::Reduce(s.cub.reduce).Sum(cost);
  if (tid == 0) s.total = cost;
  __syncthreads();
  const int32_t total = s.total;
  const int32_t chunk = (total + static_cast<int32_t>(gridDim.x) - 1) / static_cast<int32_t>(gridDim.x);
  const int32_t mine_begin = min(static_cast<int32_t>(blockIdx.x) * chunk, total);
  const int32_t mine_end = min(mine_begin + chunk, total);
  uint32_t iters = 0;  // ring iterations and query loads of the block's segments so far
  uint32_t loads = 0;
  int32_t passed = 0;  // cost of the requests before this round's
  for (int base = 0; base < batch && mine_begin < mine_end && passed < mine_end;
       base += kThreads) {
    const int b = base + tid;
    const int32_t here = request_cost(args, b, batch);
    int32_t before = 0;
    int32_t round = 0;
    typename Storage::Scan(s.cub.scan).ExclusiveSum(here, before, round);
    before += passed;
    // The part of b's tiles inside [mine_begin, mine_end): its tiles occupy the cost units
    // [before + kSegmentCost, before + here).
    Segment segment{-1, 0, 0};
    if (here > 0) {
      const int32_t first = before + kSegmentCost;
      const int32_t tile_begin = max(mine_begin - first, 0);
      const int32_t tile_end = min(mine_end - first, here - kSegmentCost);
      if (tile_begin < tile_end) segment = Segment{b, tile_begin, tile_end};
    }
    s.segments[tid] = segment;
    __syncthreads();
    // 2.-4.
    const int count = min(kThreads, batch - base);
    for (int i = 0; i < count; ++i) {
      const Segment seg = s.segments[i];
      if (seg.request < 0) continue;
      const paged::TileRange range{seg.begin, seg.end, iters, loads & 1u};
      iters += static_cast<uint32_t>(seg.end - seg.begin);
      ++loads;
      PagedLogitsEpilogue epilogue{args, logits, stride, seg.request};
      paged::run_scoring<kHeads, kColumns, kLogitsStages<kColumns>, kLogitsGroups<kColumns>>(
          &q_map, &kv_map, args, s.scoring, seg.request, range, epilogue);
      __syncthreads();
    }
    passed += round;
    __syncthreads();  // every thread has read this round's segments
  }
  // 5.
  const int rows = batch * args.next_n;
  if (row_ends != nullptr && blockIdx.x == 0) {
    for (int r = tid; r < rows; r += kThreads) {
      row_ends[r] = paged::visible_tokens(args, r / args.next_n, r % args.next_n);
    }
  }
  if (!fill_unseen) return;
  for (int r = static_cast<int>(blockIdx.x); r < rows; r += static_cast<int>(gridDim.x)) {
    float* row = logits + int64_t{r} * stride;
    const int32_t first = paged::needed_tiles(args, r / args.next_n) * paged::kTileKeys;
    for (int32_t token = first + tid; token < args.max_context; token += kThreads) {
      row[token] = -INFINITY;
    }
  }
}

// Launches the logits kernel over the batch: one wave of resident blocks, or a block per request
// when the batch is larger, never more blocks than the batch's tiles.
template <int kHeads, int kColumns>
Status launch_kernel(const PagedLaunch& launch, float* logits, int64_t stride, bool fill_unseen,
                     int32_t* row_ends, cudaStream_t stream) {
  static_assert(kLogitsBlocksPerSm<kColumns> * (sizeof(LogitsStorage<kHeads, kColumns>) + 1024) <=
                    233472,
                "the blocks of an SM must fit its 228 KB of shared memory");
  auto kernel = paged_logits_kernel<kHeads, kColumns>;
  const int smem = static_cast<int>(sizeof(LogitsStorage<kHeads, kColumns>));
  const void* entry = reinterpret_cast<const void*>(kernel);
  if (Status s = cuda_common::allow_dynamic_shared_memory(entry, smem); !s) return s;
  int wave = 0;
  if (Status s = cuda_common::resident_blocks(entry, kLogitsThreads<kColumns>, smem, &wave); !s) {
    return s;
  }
  const int64_t tiles =
      (int64_t{launch.args.max_context} + paged::kTileKeys - 1) / paged::kTileKeys * launch.batch;
  const auto blocks = static_cast<unsigned>(
      std::min<int64_t>(std::max<int64_t>(wave, launch.batch), tiles));
  kernel<<<blocks, kLogitsThreads<kColumns>, smem, stream>>>(launch.q_map, launch.kv_map, launch.args,
                                                    static_cast<int32_t>(launch.batch), logits,
                                                    stride, fill_unseen, row_ends);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace

Status launch_paged_logits(const PagedLaunch& launch, float* logits, int64_t stride,
                           bool fill_unseen, int32_t* row_ends, cudaStream_t stream) {
  if (launch.batch == 0 || launch.args.max_context == 0) return Status::ok();
  return dispatch_paged_shape(launch.heads, launch.columns, [&](auto heads, auto columns) {
    return launch_kernel<decltype(heads)::value, decltype(columns)::value>(
        launch, logits, stride, fill_unseen, row_ends, stream);
  });
}

}  // namespace litetopk::cuda_indexer
