// The paged decode indexer's logits, fp8 e4m3 on Hopper tensor cores (DeepGEMM's
// fp8_paged_mqa_logits): logits[r, p] = the score of token p for query row r = b * next_n + j over
// its visible tokens, NaN for a token of a block outside the cache, -inf from the visible count up
// to max_context. The unfused path: this kernel, then the selection over each row's visible
// tokens.
//
// Pipeline of paged_logits_kernel (grid: splits x B; block (x, b) takes tiles
// [x * tiles_per_split, + tiles_per_split) of request b):
// 1.-3. paged_scoring_sm90.cuh scores the block's tiles that some query of the request sees.
// 4. Epilogue: quad lane 0 writes token row0 and quad lane 1 token row0 + 8 of each query row.
// 5. After scoring, the block writes -inf over its tiles that no query of the request sees (when
//    the caller wants the whole [rows, max_context] matrix), and block 0 of each request writes
//    its rows' visible counts (the selection's row ends) when asked to.
#include <cuda_runtime_api.h>

#include <cmath>

#include "cuda/common/cuda_check.h"
#include "cuda/common/kernel_attributes.h"
#include "cuda/indexer/paged_indexer_kernels.h"
#include "cuda/indexer/paged_scoring_sm90.cuh"

namespace litetopk::cuda_indexer {
namespace {

using paged::PagedArgs;

template <int kHeads, int kColumns>
using LogitsStorage = paged::PagedScoringStorage<kHeads, kColumns, kLogitsStages<kColumns>>;

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
__global__ void __launch_bounds__(paged::kThreads, kLogitsBlocksPerSm<kColumns>)
    paged_logits_kernel(const __grid_constant__ CUtensorMap q_map,
                        const __grid_constant__ CUtensorMap kv_map, const PagedArgs args,
                        float* logits, int64_t stride, bool fill_unseen, int32_t* row_ends) {
  extern __shared__ __align__(1024) unsigned char shared_raw[];
  auto& storage = *reinterpret_cast<LogitsStorage<kHeads, kColumns>*>(shared_raw);
  const int b = static_cast<int>(blockIdx.y);
  if (threadIdx.x == 0) paged::init_scoring(storage);
  __syncthreads();
  const paged::TileRange range = paged::tile_range(args, b);
  PagedLogitsEpilogue epilogue{args, logits, stride, b};
  paged::run_scoring<kHeads, kColumns, kLogitsStages<kColumns>>(&q_map, &kv_map, args, storage, b, range, epilogue);
  // 5.
  if (row_ends != nullptr && blockIdx.x == 0 && static_cast<int>(threadIdx.x) < args.next_n) {
    const int j = static_cast<int>(threadIdx.x);
    row_ends[b * args.next_n + j] = paged::visible_tokens(args, b, j);
  }
  if (!fill_unseen) return;
  const int32_t first = range.end * paged::kTileKeys;
  const int32_t last = min((range.begin + args.tiles_per_split) * paged::kTileKeys, args.max_context);
  for (int j = 0; j < args.next_n; ++j) {
    float* row = logits + (int64_t{b} * args.next_n + j) * stride;
    for (int32_t token = first + static_cast<int32_t>(threadIdx.x); token < last;
         token += paged::kThreads) {
      row[token] = -INFINITY;
    }
  }
}

template <int kHeads, int kColumns>
Status launch_kernel(const PagedLaunch& launch, float* logits, int64_t stride, bool fill_unseen,
              int32_t* row_ends, cudaStream_t stream) {
  auto kernel = paged_logits_kernel<kHeads, kColumns>;
  const int smem = static_cast<int>(sizeof(LogitsStorage<kHeads, kColumns>));
  if (Status s = cuda_common::allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), smem);
      !s) {
    return s;
  }
  const dim3 grid(launch.splits, launch.batch);
  kernel<<<grid, paged::kThreads, smem, stream>>>(launch.q_map, launch.kv_map, launch.args, logits,
                                                 stride, fill_unseen, row_ends);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace

Status paged_logits_resident_blocks(const PagedIndexerProblem& problem, int* blocks) {
  return dispatch_paged_shape(static_cast<int>(problem.num_heads), paged_columns(problem),
                              [&](auto heads, auto columns) {
    constexpr int kHeads = decltype(heads)::value;
    constexpr int kColumns = decltype(columns)::value;
    const void* kernel = reinterpret_cast<const void*>(paged_logits_kernel<kHeads, kColumns>);
    const int smem = static_cast<int>(sizeof(LogitsStorage<kHeads, kColumns>));
    if (Status s = cuda_common::allow_dynamic_shared_memory(kernel, smem); !s) return s;
    return cuda_common::resident_blocks(kernel, paged::kThreads, smem, blocks);
  });
}

Status launch_paged_logits(const PagedLaunch& launch, float* logits, int64_t stride,
                           bool fill_unseen, int32_t* row_ends, cudaStream_t stream) {
  if (launch.batch == 0 || launch.splits == 0) return Status::ok();
  return dispatch_paged_shape(launch.heads, launch.columns, [&](auto heads, auto columns) {
    return launch_kernel<decltype(heads)::value, decltype(columns)::value>(
        launch, logits, stride, fill_unseen, row_ends, stream);
  });
}

}  // namespace litetopk::cuda_indexer
