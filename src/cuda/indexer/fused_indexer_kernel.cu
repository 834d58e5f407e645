// The fused indexer: scores and exact top-k in one kernel, without the [T, S] logits buffer.
//
// Pipeline of fused_indexer_kernel (one block = 4 queries over all of their keys, 8 warps):
// 1. Stage the block's q, weights and ranges (QueryBlockScorer, shared with the logits kernel,
//    so scores are bit-identical to the unfused path's).
// 2. For each 128-key tile of the union of the queries' ranges: load the warps' A fragments; per
//    query, score the tile and offer the in-range scores to that query's shared-memory candidate
//    buffer (Sample-Filter-Select's CandidateBuffer): only scores at or above the query's gate
//    enter; a full buffer is compacted to its best k, which raises the gate. Nothing is ever
//    dropped that can still be in the answer, so the result is exact.
// 3. Per query, a range select over the buffer writes the k best (indices relative to ks, fp32
//    values) and -1 padding.
// Auxiliary memory: none (no workspace).
#include <cuda_runtime_api.h>

#include "cuda/common/cuda_check.h"
#include "cuda/indexer/indexer_kernels.h"
#include "cuda/select/candidate_buffer.cuh"

namespace litetopk::cuda_indexer {
namespace {

constexpr int kQueries = 4;
using Buffer = cuda_select::CandidateBuffer<kScorerThreads, kFusedMaxK + 2 * kScorerThreads,
                                            kFusedMaxK>;

template <int kHeads>
struct FusedStorage {
  typename QueryBlockScorer<kHeads, kQueries>::Storage scorer;
  typename Buffer::Storage buffers[kQueries];
};

template <int kHeads>
__global__ void __launch_bounds__(kScorerThreads)
    fused_indexer_kernel(const ScoreInputs in, const cuda_select::SelectArgs out) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto& storage = *reinterpret_cast<FusedStorage<kHeads>*>(shared_raw);
  QueryBlockScorer<kHeads, kQueries> scorer(storage.scorer, in,
                                            static_cast<int>(blockIdx.x) * kQueries);
  const auto k = static_cast<uint32_t>(out.k);
  if (threadIdx.x == 0) {
    for (int qi = 0; qi < kQueries; ++qi) Buffer(storage.buffers[qi], k, false).reset(0);
  }
  scorer.stage();  // ends with a barrier, which also publishes the resets
  const int queries = min(kQueries, in.num_queries - scorer.t0);
  uint64_t gate[kQueries];
  uint32_t steps[kQueries];
#pragma unroll
  for (int qi = 0; qi < kQueries; ++qi) {
    gate[qi] = keys::kAdmitAllValid;
    steps[qi] = 0;
  }

  for (int tile = scorer.union_begin / kTileKeys * kTileKeys; tile < scorer.union_end;
       tile += kTileKeys) {
    scorer.load_tile(tile);
#pragma unroll
    for (int qi = 0; qi < kQueries; ++qi) {
      if (qi >= queries) break;
      float score0, score1;
      scorer.score(qi, &score0, &score1);
      cuda_select::ArrayItems<2> items;
      if (scorer.quad_lane == 0) {
        const int32_t begin = storage.scorer.range_begin[qi];
        const int keys_of_thread[2] = {scorer.key0, scorer.key1};
        const float scores[2] = {score0, score1};
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          items.key[i] = keys::key_from_f32_bits(__float_as_uint(scores[i]), true);
          items.index[i] = static_cast<uint32_t>(keys_of_thread[i] - begin);
          if (scorer.in_range(qi, keys_of_thread[i])) items.tie |= 1u << i;
        }
      }
      Buffer(storage.buffers[qi], k, false).offer_step(steps[qi]++, items, gate[qi], [] {});
    }
  }

  for (int qi = 0; qi < queries; ++qi) {
    Buffer buffer(storage.buffers[qi], k, false);
    buffer.finish_steps(steps[qi]);
    buffer.template emit<cuda_select::Float32Scores>(out, scorer.t0 + qi);
    __syncthreads();  // the next query's emit reuses nothing, but keeps the block in step
  }
}

template <int kHeads>
Status launch(const IndexerProblem& problem, cudaStream_t stream) {
  auto kernel = fused_indexer_kernel<kHeads>;
  const int smem = static_cast<int>(sizeof(FusedStorage<kHeads>));
  LITETOPK_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cuda_select::SelectArgs out{};
  out.k = static_cast<int32_t>(problem.k);
  out.largest = true;
  out.indices = problem.indices;
  out.values = problem.values;
  const auto blocks = static_cast<unsigned>((problem.num_queries + kQueries - 1) / kQueries);
  kernel<<<blocks, kScorerThreads, smem, stream>>>(score_inputs(problem), out);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace

Status launch_fused(const IndexerProblem& problem, cudaStream_t stream) {
  if (problem.num_queries == 0) return Status::ok();
  return problem.num_heads == 64 ? launch<64>(problem, stream) : launch<32>(problem, stream);
}

}  // namespace litetopk::cuda_indexer
