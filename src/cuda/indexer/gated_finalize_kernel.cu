// The gated fused indexer's last step, after the selection over the candidate lists.
//
// Pipeline of gated_finalize_kernel (one thread per output slot, and one per query block):
// 1. The selection wrote each query's k best as positions in its list (-1 padded): each becomes
//    the key at that position, relative to the query's clamped ks (-1 stays -1).
// 2. A query block goes on the retry list when one of its queries' lists overflowed (its count
//    passed the capacity: candidates are missing) or its gate was above -inf and admitted fewer
//    than k (the speculative gate turned away keys that may be among its k best). Otherwise
//    every key a gate turned away is beaten by k admitted ones, and the result is exact.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>

#include "cuda/common/cuda_check.h"
#include "cuda/indexer/gated_indexer_kernels.h"

namespace litetopk::cuda_indexer {
namespace {

constexpr int kFinalizeThreads = 256;

struct FinalizeArgs {
  const int32_t* ks;
  int32_t* indices;
  int64_t slots;  // T * k
  int32_t k;
  int32_t num_queries;
  int32_t num_keys;
  int32_t queries_per_block;
  int32_t query_blocks;
};

__global__ void __launch_bounds__(kFinalizeThreads)
    gated_finalize_kernel(const FinalizeArgs a, const GatedLists lists, int32_t* retry,
                          unsigned long long* counters) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const int64_t first = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  // 1.
  for (int64_t i = first; i < a.slots; i += stride) {
    const int32_t position = a.indices[i];
    if (position < 0) continue;
    const int64_t t = i / a.k;
    const int32_t begin = min(max(a.ks[t], 0), a.num_keys);
    a.indices[i] = lists.keys[t * lists.capacity + position] - begin;
  }
  // 2.
  for (int64_t qb = first; qb < a.query_blocks; qb += stride) {
    bool again = false;
    for (int qi = 0; qi < a.queries_per_block; ++qi) {
      const int64_t t = qb * a.queries_per_block + qi;
      if (t >= a.num_queries) break;
      const int32_t count = lists.counts[t];
      again = again || count > lists.capacity || (lists.gates[t] > -INFINITY && count < a.k);
    }
    if (again) {
      retry[1 + atomicAdd(&retry[0], 1)] = static_cast<int32_t>(qb);
      if (counters != nullptr) atomicAdd(&counters[2], 1ull);
    }
  }
}

}  // namespace

Status launch_gated_finalize(const IndexerProblem& problem, const GatedLists& lists,
                             int32_t* retry, unsigned long long* counters, cudaStream_t stream) {
  const FinalizeArgs a{problem.ks,
                       problem.indices,
                       problem.num_queries * problem.k,
                       static_cast<int32_t>(problem.k),
                       static_cast<int32_t>(problem.num_queries),
                       static_cast<int32_t>(problem.num_keys),
                       core_queries_per_block(problem),
                       static_cast<int32_t>(core_query_blocks(problem))};
  const int64_t work = std::max<int64_t>(a.slots, a.query_blocks);
  const auto blocks = static_cast<unsigned>(
      std::min<int64_t>((work + kFinalizeThreads - 1) / kFinalizeThreads, 4096));
  gated_finalize_kernel<<<blocks, kFinalizeThreads, 0, stream>>>(a, lists, retry, counters);
  LITETOPK_CUDA_TRY(cudaPeekAtLastError());
  return Status::ok();
}

}  // namespace litetopk::cuda_indexer
